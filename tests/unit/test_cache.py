"""The cache of ``--module`` evaluations (``_cache``): where it lives, what an
entry must match, when an entry is trusted, how it is written and pruned."""

from __future__ import annotations

import json
import os
import stat
import time
from pathlib import Path
from typing import Any

import pytest

from rocm_hwq_autoset._config import ConfigError
from rocm_hwq_autoset._evaluation import cache as _cache
from rocm_hwq_autoset._evaluation.cache import Cache, key, location, open_cache
from tests.fake_child import INPUTS, RESULT, SETTINGS

NO_DEPS = {"env": {}, "files": [], "dirs": [], "lists": []}


@pytest.mark.parametrize(
    ("environ", "where"),
    [
        ({"ROCM_HWQ_AUTOSET_CACHE_DIR": "/c", "XDG_CACHE_HOME": "/x", "HOME": "/h"},
         "/c"),
        ({"XDG_CACHE_HOME": "/x", "HOME": "/h"}, "/x/rocm-hwq-autoset"),
        ({"XDG_CACHE_HOME": "relative", "HOME": "/h"}, "/h/.cache/rocm-hwq-autoset"),
        ({"HOME": "/h"}, "/h/.cache/rocm-hwq-autoset"),
        ({"ROCM_HWQ_AUTOSET_CACHE_DIR": "", "HOME": "/h"},
         "/h/.cache/rocm-hwq-autoset"),
    ],
)  # fmt: skip
def test_location(environ: dict[str, str], where: str) -> None:
    assert location(environ) == where


def test_without_home_the_users_home_is_asked() -> None:
    home = os.path.expanduser("~")
    assert location({}) == os.path.join(home, ".cache", "rocm-hwq-autoset")
    assert location({"HOME": ""}) == os.path.join(home, ".cache", "rocm-hwq-autoset")


def test_the_switch(tmp_path: Path) -> None:
    environ = {"ROCM_HWQ_AUTOSET_CACHE_DIR": str(tmp_path / "c")}
    for off in ("0", "off", "FALSE", " no "):
        assert open_cache({**environ, "ROCM_HWQ_AUTOSET_CACHE": off}) == (None, "")
    assert not (tmp_path / "c").exists()
    with pytest.raises(ConfigError) as caught:
        open_cache({**environ, "ROCM_HWQ_AUTOSET_CACHE": "sometimes"})
    assert str(caught.value) == (
        "ROCM_HWQ_AUTOSET_CACHE='sometimes' is not 1/on/true/yes/auto (on),"
        " 0/off/false/no (off)"
    )
    for on in ("", "1", "on", "yes", "True"):
        cache, problem = open_cache({**environ, "ROCM_HWQ_AUTOSET_CACHE": on})
        assert cache is not None and problem == ""


def test_the_directory_is_made_private(tmp_path: Path) -> None:
    cache, _ = open_cache({"ROCM_HWQ_AUTOSET_CACHE_DIR": str(tmp_path / "a" / "c")})
    assert cache is not None
    assert stat.S_IMODE(os.stat(cache.path).st_mode) == 0o700
    cache, problem = open_cache(
        {"ROCM_HWQ_AUTOSET_CACHE_DIR": str(tmp_path / "x")}, create=False
    )
    assert cache is None and "No such file" in problem


def test_a_directory_others_can_write_is_not_used(tmp_path: Path) -> None:
    folder = tmp_path / "c"
    folder.mkdir(mode=0o777)
    folder.chmod(0o777)
    cache, problem = open_cache({"ROCM_HWQ_AUTOSET_CACHE_DIR": str(folder)})
    assert cache is None and problem == f"{folder}: writable by others; not used"


@pytest.mark.skipif(os.getuid() != 0, reason="chown to another user needs root")
def test_a_directory_of_another_user_is_not_used(tmp_path: Path) -> None:
    folder = tmp_path / "c"
    folder.mkdir(mode=0o700)
    os.chown(folder, 65534, 65534)
    cache, problem = open_cache({"ROCM_HWQ_AUTOSET_CACHE_DIR": str(folder)})
    assert cache is None and problem == f"{folder}: owned by another user; not used"


def test_the_key(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    args = ["--module", "m", "--config", "c"]
    monkeypatch.chdir(tmp_path)
    base = key(args, {})
    assert len(base) == 32 and int(base, 16) >= 0  # an entry's file name
    assert key(args, {"RANK": "3", "SLURM_JOB_ID": "7", "WORLD_SIZE": "8"}) == base
    assert key([*args, "--parallelism.tensor_parallel_degree=2"], {}) != base
    assert key(args[::-1], {}) != base
    for name in ("HIP_VISIBLE_DEVICES", "CUDA_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES",
                 "PYTHONPATH"):  # fmt: skip
        assert key(args, {name: "0"}) != base
    (tmp_path / "other").mkdir()
    monkeypatch.chdir(tmp_path / "other")
    assert key(args, {}) != base
    # An argument of bytes that are not UTF-8 (a Latin-1 path) has a key too.
    latin = ["--module", "m", "--config", os.fsdecode(b"caf\xe9")]
    assert key(latin, {}) != key(["--module", "m", "--config", "caf\xe9"], {})


@pytest.fixture
def cache(tmp_path: Path) -> Cache:
    folder = tmp_path / "cache"
    folder.mkdir(mode=0o700)
    return Cache(str(folder))


def test_an_entry_round_trips(cache: Cache) -> None:
    assert cache.lookup("k", {}) == (None, "no entry")
    cache.store("k", RESULT, NO_DEPS)
    assert cache.lookup("k", {}) == ((INPUTS, SETTINGS), "hit")
    path = Path(cache.entry("k"))
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    text = path.read_text()  # compact: torchtitan's are hundreds of KB as it is
    assert text == json.dumps(json.loads(text), separators=(",", ":"))
    assert sorted(os.listdir(cache.path)) == ["k.json"]  # nothing temporary left


def test_a_stale_entry_says_what_changed(cache: Cache) -> None:
    cache.store("k", RESULT, {**NO_DEPS, "env": {"MY_DEGREE": "2"}})
    assert cache.lookup("k", {"MY_DEGREE": "2"})[1] == "hit"
    assert cache.lookup("k", {"MY_DEGREE": "4"}) == (None, "stale: MY_DEGREE changed")


@pytest.mark.parametrize(
    ("damage", "said"),
    [
        ("writable by others", "entry ignored: writable by others"),
        ("not json", "entry ignored: corrupt"),
        ("not a result", "entry ignored: corrupt"),
        ("other format", "entry of another format"),
        ("a link", "entry ignored: "),
        ("a folder", "entry ignored: "),
        ("a fifo", "entry ignored: "),  # opened without waiting for a writer
        ("bad deps", "entry ignored: corrupt"),
    ],
)
def test_an_entry_that_cannot_be_trusted_is_ignored(
    cache: Cache, damage: str, said: str
) -> None:
    cache.store("k", RESULT, NO_DEPS)
    path = Path(cache.entry("k"))
    doc = json.loads(path.read_text())
    if damage == "writable by others":
        path.chmod(0o666)
    elif damage == "not json":
        path.write_text("{")
    elif damage == "not a result":
        path.write_text(json.dumps({**doc, "result": {"inputs": "tp=2"}}))
    elif damage == "other format":
        path.write_text(json.dumps({**doc, "format": 0}))
    elif damage == "bad deps":
        path.write_text(json.dumps({**doc, "deps": {"env": []}}))
    elif damage == "a fifo":
        path.unlink()
        os.mkfifo(path, 0o600)
    elif damage == "a link":
        target = path.with_name("elsewhere")
        path.rename(target)
        path.symlink_to(target)
    else:
        path.unlink()
        path.mkdir()
    found, why = cache.lookup("k", {})
    assert found is None and why.startswith(said), why


def test_an_entry_on_a_read_only_mount_is_still_used(
    cache: Cache, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Marking it recently used fails there: no matter."""
    cache.store("k", RESULT, NO_DEPS)

    def read_only(path: str) -> None:
        raise OSError(30, "Read-only file system")

    monkeypatch.setattr(_cache.os, "utime", read_only)
    assert cache.lookup("k", {}) == ((INPUTS, SETTINGS), "hit")


@pytest.mark.skipif(os.getuid() != 0, reason="chown to another user needs root")
def test_an_entry_of_another_user_is_ignored(cache: Cache) -> None:
    cache.store("k", RESULT, NO_DEPS)
    os.chown(cache.entry("k"), 65534, 65534)
    assert cache.lookup("k", {}) == (None, "entry ignored: owned by another user")


def test_entries_are_bounded_least_recently_used_first(
    cache: Cache, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_cache, "MAX_ENTRIES", 3)
    now = time.time()
    for i in range(3):
        cache.store(f"k{i}", RESULT, NO_DEPS)
        os.utime(cache.entry(f"k{i}"), (now - 100 + i, now - 100 + i))
    cache.lookup("k0", {})  # used: now the most recent
    cache.store("k3", RESULT, NO_DEPS)
    assert sorted(os.listdir(cache.path)) == ["k0.json", "k2.json", "k3.json"]
    assert cache.count() == 3


def test_only_entries_count_as_entries(cache: Cache, tmp_path: Path) -> None:
    """Not a link named like an entry (never followed), nor other files."""
    cache.store("k", RESULT, NO_DEPS)
    (tmp_path / "elsewhere.json").write_text("{}")
    Path(cache.path, "link.json").symlink_to(tmp_path / "elsewhere.json")
    Path(cache.path, "notes.txt").write_text("")
    Path(cache.path, "dir.json").mkdir()
    assert cache.count() == 1


def test_left_overs_are_pruned(cache: Cache) -> None:
    old = time.time() - _cache.STALE_SECONDS - 10
    for name in ("x.json.h.1.tmp", "k.h.lock", "k.h.result", "fresh.h.lock"):
        Path(cache.path, name).write_text("")
    for name in ("x.json.h.1.tmp", "k.h.lock", "k.h.result"):
        os.utime(Path(cache.path, name), (old, old))
    cache.store("k", RESULT, NO_DEPS)
    assert sorted(os.listdir(cache.path)) == ["fresh.h.lock", "k.json"]


def test_a_left_over_is_pruned_once_older_than_a_day(
    cache: Cache, monkeypatch: pytest.MonkeyPatch
) -> None:
    now = 1_700_000_000
    monkeypatch.setattr(_cache.time, "time", lambda: float(now))
    for name, age in (("day.h.lock", _cache.STALE_SECONDS),
                      ("older.h.lock", _cache.STALE_SECONDS + 1)):  # fmt: skip
        Path(cache.path, name).write_text("")
        stamp = (now - age) * 10**9
        os.utime(Path(cache.path, name), ns=(stamp, stamp))
    Path(cache.path, "gone.h.lock").symlink_to(Path(cache.path, "nowhere"))
    stamp = (now - _cache.STALE_SECONDS - 1) * 10**9
    os.utime(Path(cache.path, "gone.h.lock"), ns=(stamp, stamp), follow_symlinks=False)
    cache.prune()
    assert sorted(os.listdir(cache.path)) == ["day.h.lock"]


def test_pruning_goes_on_past_a_left_over_it_cannot_stat_or_remove(
    cache: Cache, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another rank prunes at the same time: a left-over listed may be gone
    before it is looked at; one may refuse to go (here a folder)."""
    old = time.time() - _cache.STALE_SECONDS - 10
    for name in ("b.h.lock", "c.h.result"):
        Path(cache.path, name).write_text("")
        os.utime(Path(cache.path, name), (old, old))
    Path(cache.path, "d.h.lock").mkdir()
    os.utime(Path(cache.path, "d.h.lock"), (old, old))
    scandir = os.scandir
    vanishing = Path(cache.path, "a.h.lock")

    def racing(path: str) -> Any:
        vanishing.write_text("")  # listed first ...
        listed = sorted(scandir(path), key=lambda entry: entry.name)
        vanishing.unlink()  # ... and gone before it is looked at
        return iter(listed)

    monkeypatch.setattr(_cache.os, "scandir", racing)
    cache.prune()
    assert sorted(os.listdir(cache.path)) == ["d.h.lock"]


def test_a_link_planted_where_an_entry_is_written_is_never_followed(
    cache: Cache, tmp_path: Path
) -> None:
    """The temporary file's name is predictable: another user's link there
    must not make us write through it."""
    victim = tmp_path / "victim"
    victim.write_text("mine")
    temp = f"{cache.entry('k')}.{_cache.host()}.{os.getpid()}.tmp"
    os.symlink(victim, temp)
    with pytest.raises(OSError, match="File exists"):
        cache.store("k", RESULT, NO_DEPS)
    assert victim.read_text() == "mine"


def test_an_entry_that_cannot_take_its_place_leaves_nothing_behind(
    cache: Cache,
) -> None:
    os.mkdir(cache.entry("k"))  # in the way: the rename fails
    with pytest.raises(IsADirectoryError):
        cache.store("k", RESULT, NO_DEPS)
    assert os.listdir(cache.path) == ["k.json"]


def test_a_cache_that_cannot_be_written_raises_os_error(cache: Cache) -> None:
    os.chmod(cache.path, 0o500)
    try:
        if os.getuid() == 0:  # root writes anyway: a missing folder then
            cache = Cache(os.path.join(cache.path, "gone"))
        with pytest.raises(OSError, match=r"No such file|Permission denied"):
            cache.store("k", RESULT, NO_DEPS)
    finally:
        os.chmod(Path(cache.path).parent if os.getuid() == 0 else cache.path, 0o700)


def test_a_published_answer_changes_identity_each_time(cache: Cache) -> None:
    assert cache.published("k") == (None, None)
    cache.publish("k", {"error": "no"})
    assert os.listdir(cache.path) == [f"k.{_cache.host()}.result"]
    first, doc = cache.published("k")
    assert doc == {"error": "no"} and first is not None
    cache.publish("k", {"error": "no"})
    second, _ = cache.published("k")
    assert second != first


def test_an_answer_over_a_megabyte_is_not_taken(cache: Cache) -> None:
    cache.publish("k", {"error": "x" * (1 << 20)})
    assert cache.published("k") == (None, None)


@pytest.mark.parametrize(
    ("nodename", "name"),
    [("node 1/../x", "node_1_.._x"), ("", "localhost"), ("n" * 70, "n" * 64)],
)
def test_the_host_name_is_a_file_name(
    monkeypatch: pytest.MonkeyPatch, nodename: str, name: str
) -> None:
    class Uname:
        pass

    Uname.nodename = nodename  # type: ignore[attr-defined]
    monkeypatch.setattr(_cache.os, "uname", lambda: Uname())
    assert _cache.host() == name


# The key (issue #23): what a launch must match, and no more.


def test_the_interpreter_counts_by_its_real_path_and_prefix(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Was: ``sys.executable`` as started, so ``venv/bin/python``, ``python3``
    and a console script's ``#!.../python3`` never shared an entry."""
    import sys

    args = ["--module", "m", "--config", "c"]
    monkeypatch.chdir(tmp_path)
    base = key(args, {})
    for name in ("python", "python3"):
        link = tmp_path / name
        link.symlink_to(sys.executable)
        monkeypatch.setattr(sys, "executable", str(link))
        assert key(args, {}) == base, name
    monkeypatch.setattr(sys, "prefix", str(tmp_path / "another-venv"))
    assert key(args, {}) != base  # another venv of the same Python


@pytest.mark.parametrize(
    "name",
    ["HIP_VISIBLE_DEVICES", "CUDA_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES",
     "GPU_DEVICE_ORDINAL"],
)  # fmt: skip
def test_the_visible_gpus_count_by_how_many(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str
) -> None:
    """Was: by value, so ``srun --gpus-per-task=1`` (a per-rank
    ``ROCR_VISIBLE_DEVICES``) gave 4 ranks 4 evaluations and 4 entries."""
    args = ["--module", "m", "--config", "c"]
    monkeypatch.chdir(tmp_path)
    assert len({key(args, {name: str(rank)}) for rank in range(4)}) == 1
    assert key(args, {name: "0,1"}) == key(args, {name: "2,3"})
    assert key(args, {name: "0,1"}) != key(args, {name: "0"})
    assert len({key(args, {}), key(args, {name: ""}), key(args, {name: "0"})}) == 3


def test_per_job_variables_are_not_in_the_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    args = ["--module", "m", "--config", "c"]
    monkeypatch.chdir(tmp_path)
    job = {"TMPDIR": "/tmp/job.1", "SLURM_JOB_ID": "1", "SLURM_STEP_ID": "0",
           "PMIX_NAMESPACE": "slurm.pmix.1.0"}  # fmt: skip
    assert key(args, job) == key(args, {k: v + "2" for k, v in job.items()})


def test_an_entry_of_the_first_format_is_not_read(cache: Cache) -> None:
    assert _cache.FORMAT == 2
    cache._write(cache.entry("k"), json.dumps({"format": 1, "result": RESULT,
                                               "deps": NO_DEPS}))  # fmt: skip
    assert cache.lookup("k", {}) == (None, "entry of another format")

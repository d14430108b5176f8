"""The cache of ``--module`` evaluations (``_cache``): where it lives, what an
entry must match, when an entry is trusted, how it is written and pruned."""

from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import json
import os
import stat
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from rocm_hwq_autoset._config import ConfigError
from rocm_hwq_autoset._environ import cache_switch
from rocm_hwq_autoset._evaluation import cache as _cache
from rocm_hwq_autoset._evaluation.answer import Answer
from rocm_hwq_autoset._evaluation.cache import Cache, key, location, open_cache
from rocm_hwq_autoset._model import Config, Inputs
from tests.evaluation.helpers import served_on_a_full_disk
from tests.fake_child import ANSWER, INPUTS, SETTINGS
from tests.helpers import GOLDEN, check_golden, check_lines, child_env, lines_report

ROOT = Path(__file__).resolve().parents[2]
CONFIG = Config(INPUTS, SETTINGS)
RESULT = ANSWER["config"]  # an entry's result, as JSON
REFUSED = Answer(refusal=ConfigError("no"))


NO_DEPS = {"env": {}, "files": [], "dirs": [], "lists": []}


def package_env() -> dict[str, str]:
    """The environment of a child interpreter that imports this package (and,
    under mutation, its mutant)."""
    return child_env({"PATH": os.environ["PATH"], "PYTHONPATH": str(ROOT)})


def untrusted(folder: Path) -> str:
    """What ``open_cache`` says of a folder it does not trust: the folder, and
    why (``_untrusted``'s words for it)."""
    reason = _cache._untrusted(os.stat(folder))
    assert reason, folder
    return f"{folder}: {reason}; not used"


def test_the_words_of_each_entry_not_taken() -> None:
    """A lookup's reasons, each a constant of ``cache``: their words, once."""
    names = ("READ_ONLY", "OTHER_FORMAT", "OTHER_LAUNCH", "CORRUPT", "NO_HOME")
    said = [(name, getattr(_cache, name)) for name in names]
    check_golden(GOLDEN / "lines" / "cache.txt", lines_report(said))


@pytest.mark.parametrize(
    ("environ", "where"),
    [
        ({"ROCM_HWQ_AUTOSET_CACHE_DIR": "/c", "XDG_CACHE_HOME": "/x", "HOME": "/"},
         "/c"),
        ({"XDG_CACHE_HOME": "/x", "HOME": "/"}, "/x/rocm-hwq-autoset"),
        ({"XDG_CACHE_HOME": "relative", "HOME": "/"}, "/.cache/rocm-hwq-autoset"),
        ({"HOME": "/"}, "/.cache/rocm-hwq-autoset"),
        ({"ROCM_HWQ_AUTOSET_CACHE_DIR": "", "HOME": "/"},
         "/.cache/rocm-hwq-autoset"),
        ({"ROCM_HWQ_AUTOSET_CACHE_DIR": "~/c/d", "HOME": "/tmp"}, "/tmp/c/d"),
        ({"ROCM_HWQ_AUTOSET_CACHE_DIR": "~", "HOME": "/tmp"}, "/tmp"),
    ],
)  # fmt: skip
def test_location(environ: dict[str, str], where: str) -> None:
    assert location(environ) == where


def test_without_home_the_users_home_is_asked() -> None:
    import pwd

    home = pwd.getpwuid(os.getuid()).pw_dir
    for environ in ({}, {"HOME": ""}, {"HOME": "relative"}):
        assert location(environ) == os.path.join(home, ".cache", "rocm-hwq-autoset")
    # "~" in the cache's variable is that home too, not a HOME that is none.
    for tilde in ("~", "~/"):
        environ = {"HOME": "/nonexistent", "ROCM_HWQ_AUTOSET_CACHE_DIR": tilde}
        assert location(environ) == os.path.abspath(home)


def test_a_uid_with_no_home_has_no_cache(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """Issue #36: no folder in the temporary directory any more (another user
    could make it first, plant a link in it, or swap it; and asking
    ``tempfile.gettempdir()`` in the training fixed its answer before the
    training could set ``TMPDIR``): no cache, every launch evaluates, said.
    Was (#28): ``./~/.cache/rocm-hwq-autoset`` in the working directory."""
    import pwd
    import tempfile

    def unknown(uid: int) -> Any:
        raise KeyError(f"getpwuid(): uid not found: {uid}")

    monkeypatch.setattr(pwd, "getpwuid", unknown)
    monkeypatch.setattr(tempfile, "tempdir", None)
    monkeypatch.chdir(tmp_path)
    assert location({}) is None
    assert open_cache({"HOME": ""}) == (None, _cache.NO_HOME)
    assert tempfile.tempdir is None  # tempfile was never asked
    assert os.listdir(tmp_path) == []
    explicit = {"ROCM_HWQ_AUTOSET_CACHE_DIR": str(tmp_path / "c"), "HOME": ""}
    assert open_cache(explicit)[0] is not None  # a folder named: used
    with pytest.raises(ConfigError) as caught:
        location({"ROCM_HWQ_AUTOSET_CACHE_DIR": "~/cache", "HOME": ""})
    assert caught.value.source == "ROCM_HWQ_AUTOSET_CACHE_DIR"
    assert caught.value.reason.split()[0] == "'~/cache':"
    check_lines(request, [("ROCM_HWQ_AUTOSET_CACHE_DIR=~/cache, no home",
                           str(caught.value))])  # fmt: skip


def test_a_home_that_is_not_there_is_none(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """A container's ``HOME=/nonexistent`` (``nobody``'s passwd home, the mark
    of a user without one): no cache, and no home made for it. Was: the
    cache's folders made "on the way", the home among them, so that a root
    launch made ``/nonexistent/.cache/rocm-hwq-autoset``. Where ``HOME``
    names none, the passwd entry's home serves, when it is there."""
    import pwd

    gone = tmp_path / "nonexistent"
    passwd = tmp_path / "passwd home"

    def entry(uid: int) -> Any:
        return type("pw", (), {"pw_dir": str(passwd)})()

    monkeypatch.setattr(pwd, "getpwuid", entry)
    for environ in ({"HOME": str(gone)}, {"HOME": str(gone), "XDG_CACHE_HOME": ""}):
        assert location(environ) is None
        assert open_cache(environ) == (None, _cache.NO_HOME)
    assert not gone.exists() and not passwd.exists()
    passwd.mkdir()
    assert location({"HOME": str(gone)}) == str(passwd / ".cache" / "rocm-hwq-autoset")
    cache, problem = open_cache({"HOME": str(gone)})
    assert cache is not None and problem == ""
    assert not gone.exists()


def test_the_switch(tmp_path: Path) -> None:
    environ = {"ROCM_HWQ_AUTOSET_CACHE_DIR": str(tmp_path / "c")}
    for off in ("0", "off", "FALSE", " no "):
        assert open_cache({**environ, "ROCM_HWQ_AUTOSET_CACHE": off}) == (None, "")
    assert not (tmp_path / "c").exists()
    with pytest.raises(ConfigError) as caught:
        open_cache({**environ, "ROCM_HWQ_AUTOSET_CACHE": "sometimes"})
    said = cache_switch({"ROCM_HWQ_AUTOSET_CACHE": "sometimes"})[1]
    assert str(caught.value) == said
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


def test_a_directory_others_can_write_is_not_used(
    tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    folder = tmp_path / "c"
    folder.mkdir(mode=0o777)
    folder.chmod(0o777)
    cache, problem = open_cache({"ROCM_HWQ_AUTOSET_CACHE_DIR": str(folder)})
    assert cache is None and problem == untrusted(folder)
    check_lines(request, [("a cache folder of mode 777", problem)], tmp_path)


@pytest.mark.parametrize("mode", [0o770, 0o720, 0o702])
def test_a_directory_its_group_can_write_is_not_used(tmp_path: Path, mode: int) -> None:
    """Group write too: a cache that trusted it would pass the test above."""
    folder = tmp_path / "c"
    folder.mkdir()
    folder.chmod(mode)
    cache, problem = open_cache({"ROCM_HWQ_AUTOSET_CACHE_DIR": str(folder)})
    assert cache is None and problem == untrusted(folder)
    folder.chmod(0o750)  # read and enter: no one else writes
    cache, problem = open_cache({"ROCM_HWQ_AUTOSET_CACHE_DIR": str(folder)})
    assert cache is not None and problem == ""


@pytest.mark.skipif(os.getuid() != 0, reason="chown to another user needs root")
def test_a_directory_of_another_user_is_not_used(
    tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    folder = tmp_path / "c"
    folder.mkdir(mode=0o700)
    os.chown(folder, 65534, 65534)
    cache, problem = open_cache({"ROCM_HWQ_AUTOSET_CACHE_DIR": str(folder)})
    assert cache is None and problem == untrusted(folder)
    check_lines(request, [("a cache folder of uid 65534", problem)], tmp_path)


def test_the_key(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    args = ["--module", "m", "--config", "c"]
    monkeypatch.chdir(tmp_path)
    base = key(args, {})
    assert len(base) == 32 and int(base, 16) >= 0  # an entry's file name
    assert key(args, {"RANK": "3", "SLURM_JOB_ID": "7", "WORLD_SIZE": "8"}) == base
    assert key([*args, "--parallelism.tensor_parallel_degree=2"], {}) != base
    assert key(args[::-1], {}) != base
    # and what the interpreter reads before any code: PYTHONOPTIMIZE=1 makes
    # __debug__ false (was: one entry for both, a wrong Q every other job)
    for name in ("HIP_VISIBLE_DEVICES", "CUDA_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES",
                 "PYTHONPATH", "PYTHONOPTIMIZE", "PYTHONDEVMODE", "PYTHONWARNINGS",
                 "PYTHONUTF8", "PYTHON_CPU_COUNT"):  # fmt: skip
        assert key(args, {name: "0"}) != base, name
    (tmp_path / "other").mkdir()
    monkeypatch.chdir(tmp_path / "other")
    assert key(args, {}) != base
    # An argument of bytes that are not UTF-8 (a Latin-1 path) has a key too.
    latin = ["--module", "m", "--config", os.fsdecode(b"caf\xe9")]
    assert key(latin, {}) != key(["--module", "m", "--config", "caf\xe9"], {})


def test_a_venv_reached_through_a_link_has_the_same_key(tmp_path: Path) -> None:
    """Issue #28: the same venv through a symlink (``/work/current ->
    /work/venv-3``) was a needless miss: its ``sys.prefix`` is the link's."""
    link = tmp_path / "venv-link"
    link.symlink_to(sys.prefix, target_is_directory=True)
    code = ("import sys; from rocm_hwq_autoset._evaluation.cache import key;"
            " print(sys.prefix); print(key(['--module', 'm'], {}))")  # fmt: skip
    python = Path(sys.executable).name
    seen = [subprocess.run([str(prefix / "bin" / python), "-c", code], cwd=tmp_path,
                           capture_output=True, text=True,
                           check=True).stdout.splitlines()
            for prefix in (Path(sys.prefix), link)]  # fmt: skip
    assert seen[1][0] == str(link)  # Python keeps the link's path
    assert seen[0][1] == seen[1][1]


#: The key of a launch, from the interpreter that runs it.
KEY_OF = ("import sys; from rocm_hwq_autoset._evaluation.cache import key;"
          " print(key(['--module', 'm'], {}))")  # fmt: skip


@pytest.mark.skipif(os.getuid() != 0, reason="a bind mount needs root")
def test_a_venv_reached_through_a_bind_mount_has_the_same_key(tmp_path: Path) -> None:
    """Issue #36: the same venv bind-mounted elsewhere (a container's
    ``-v /opt/venv:/venv``) was a needless miss at every launch: its real
    path differs. Not by device number, which differs on each NFS client."""
    if not os.path.isfile(os.path.join(sys.prefix, "pyvenv.cfg")):
        pytest.skip("the tests do not run in a venv")
    there = tmp_path / "mounted"
    there.mkdir()
    python = Path(sys.executable).name
    script = (
        'mount --bind "$0" "$1" && cd "$2" && "$0/bin/$3" -c "$4"'
        ' && "$1/bin/$3" -c "$4"'
    )
    run = subprocess.run(
        ["unshare", "-m", "--propagation", "private", "sh", "-c", script,
         sys.prefix, str(there), str(tmp_path), python, KEY_OF],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    if run.returncode and "unshare" in run.stderr:
        pytest.skip(run.stderr.strip())
    assert run.returncode == 0, run.stderr
    first, second = run.stdout.split()
    assert first == second


def test_a_path_variable_counts_by_the_folders_it_names(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue #36: ``PYTHONPATH=/x/`` after ``PYTHONPATH=/x`` missed: the key
    compared the variable's text."""
    monkeypatch.chdir(tmp_path)
    args = ["--module", "m"]
    same = ["/x", "/x/", "/x//", "/y/../x"]
    assert len({key(args, {"PYTHONPATH": value}) for value in same}) == 1
    assert key(args, {"PYTHONPATH": "/x:/y/"}) == key(args, {"PYTHONPATH": "/x/:/y"})
    for other in ("/y", "/y:/x", "/x:/y", "", "x"):
        assert key(args, {"PYTHONPATH": other}) != key(args, {"PYTHONPATH": "/x"})
    assert key(args, {"PYTHONHOME": "/h/"}) == key(args, {"PYTHONHOME": "/h"})


def test_each_machine_keeps_its_variant(
    cache: Cache, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue #36: two hosts whose node-local file differs (here: a variable
    read) shared a cache, and each host's evaluation replaced the other's
    entry: an evaluation at every launch on both. Now an entry keeps a
    variant per machine; one of the same result and record is kept once
    (a cache shared over NFS by a 16-node job holds one)."""
    tp2 = Config(INPUTS, SETTINGS)
    for machine, value in (("a" * 32, "1"), ("b" * 32, "2")):
        monkeypatch.setattr(_cache, "machine", lambda m=machine: m)
        cache.store("k", tp2, {**NO_DEPS, "env": {"NODE_FILE": value}})
    monkeypatch.setattr(_cache, "machine", lambda: "c" * 32)
    assert cache.lookup("k", {"NODE_FILE": "1"})[1] == "hit"
    assert cache.lookup("k", {"NODE_FILE": "2"})[1] == "hit"
    assert cache.lookup("k", {"NODE_FILE": "3"})[1] == "stale: NODE_FILE changed"
    for n in range(16):  # the same evaluation on each machine: kept once
        monkeypatch.setattr(_cache, "machine", lambda n=n: f"{n:032x}")
        cache.store("k", tp2, {**NO_DEPS, "env": {"NODE_FILE": "1"}})
    doc = json.loads(Path(cache.entry("k")).read_text())
    assert [v["deps"]["env"] for v in doc["variants"]] == [
        {"NODE_FILE": "1"}, {"NODE_FILE": "2"}
    ]  # fmt: skip
    for n in range(_cache.MAX_VARIANTS + 2):  # bounded
        monkeypatch.setattr(_cache, "machine", lambda n=n: f"{n:032x}")
        cache.store("k", tp2, {**NO_DEPS, "env": {"NODE_FILE": str(n + 10)}})
    doc = json.loads(Path(cache.entry("k")).read_text())
    assert len(doc["variants"]) == _cache.MAX_VARIANTS


@pytest.fixture
def cache(tmp_path: Path) -> Cache:
    folder = tmp_path / "cache"
    folder.mkdir(mode=0o700)
    return Cache(str(folder))


def test_an_entry_round_trips(cache: Cache) -> None:
    assert cache.lookup("k", {}) == (None, "no entry")
    cache.store("k", CONFIG, NO_DEPS)
    assert cache.lookup("k", {}) == (CONFIG, "hit")
    path = Path(cache.entry("k"))
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    text = path.read_text()  # compact: torchtitan's are hundreds of KB as it is
    assert text == json.dumps(json.loads(text), separators=(",", ":"))
    assert sorted(os.listdir(cache.path)) == ["k.json"]  # nothing temporary left


def launch(n: int) -> dict[str, str]:
    """The environment of the ``n``-th launch (a Slurm step of its own)."""
    return {"SLURM_JOB_ID": "7", "SLURM_STEP_ID": str(n)}


def test_an_entry_is_taken_at_most_twice_unchecked_on_a_machine(
    cache: Cache,
) -> None:
    """Issue #28: an entry whose every check ended first (short runs, a busy
    node) was served again and again. Each launch that takes it counts, its
    ranks once; the third launch misses until this machine evaluates it."""
    cache.store("k", CONFIG, NO_DEPS)
    for n in range(_cache.MAX_UNCHECKED):
        entry, phrase = cache.lookup("k", launch(n), take=True)
        assert entry is not None and phrase == "hit"
        assert cache.lookup("k", launch(n), take=True)[1] == "hit"  # another rank
        assert len(cache.unchecked("k") or []) == n + 1
    refused = "taken 2 times on this machine with no evaluation of it here since"
    assert cache.lookup("k", launch(9), take=True) == (None, refused)
    assert cache.lookup("k", launch(9)) == (None, refused)  # counted, not taking
    assert cache.lookup("k", launch(1))[1] == "hit"  # a rank of a launch counted
    cache.store("k", CONFIG, NO_DEPS)  # this machine evaluated it
    assert cache.lookup("k", launch(9), take=True)[1] == "hit"
    assert sorted(os.listdir(cache.path)) == sorted(
        ["k.json", f"k.{_cache.machine()}.served"]
    )


def test_no_history_resets_the_bound(cache: Cache) -> None:
    """Issue #36: the record was cut at 2 KiB, and a use counted again. Three
    hundred rounds of two launches and an evaluation: never a third hit."""
    for n in range(300):
        cache.store("k", CONFIG, NO_DEPS)
        hits = [cache.lookup("k", launch(3 * n + i), take=True)[0] is not None
                for i in range(3)]  # fmt: skip
        assert hits == [True, True, False], n
    lines = Path(cache.path, cache.served_file("k")).read_text().splitlines()
    assert len(lines) == _cache.MAX_UNCHECKED


def test_the_ranks_of_a_launch_count_once_while_it_runs(cache: Cache) -> None:
    """The ranks of one job step run together: while the process that took
    the entry for their launch lives, or within ``LAUNCH_SECONDS`` of it (a
    rank may end at once), they take it as that launch. After, the same
    step's identifiers (a requeued job's step 0 again, a loop of launches
    within one step or one script) are another launch."""
    cache.store("k", CONFIG, NO_DEPS)
    ended = subprocess.Popen(["true"])
    ended.wait()
    assert cache.take("k", launch(0), launcher=ended.pid) == ""
    assert cache.lookup("k", launch(0), take=True)[1] == "hit"  # at once: a rank
    assert len(cache.unchecked("k") or []) == 1
    # its record aged past the moment ranks start together
    path = Path(cache.path, cache.served_file("k"))
    line = path.read_text().split()
    line[3] = str(int(line[3]) - _cache.LAUNCH_SECONDS)
    path.write_text(" ".join(line) + "\n")
    for _ in range(3):  # this process's launch, three ranks: one more
        assert cache.lookup("k", launch(0), take=True)[1] == "hit"
    assert len(cache.unchecked("k") or []) == 2
    assert cache.lookup("k", launch(1), take=True)[0] is None  # a third launch


def test_the_processes_one_process_started_are_one_launch() -> None:
    """Without a job step's identifiers (ranks a script starts with ``&``,
    this test starting two): the process that started them names the
    launch; another parent, another launch."""
    code = ("from rocm_hwq_autoset._evaluation.cache import launch_of;"
            " print(launch_of({}))")  # fmt: skip
    env = package_env()
    ours = {subprocess.run([sys.executable, "-c", code], env=env, text=True,
                           capture_output=True, check=True).stdout
            for _ in range(2)}  # fmt: skip
    assert len(ours) == 1
    shell = subprocess.run(
        ["sh", "-c", f'"{sys.executable}" -c "{code}"; true'],
        env=env,
        text=True,
        capture_output=True,
        check=True,
    )
    assert shell.stdout not in ours
    step = {"SLURM_JOB_ID": "7", "SLURM_STEP_ID": "0"}
    assert _cache.launch_of(step) == _cache.launch_of(step, os.getppid())


def test_another_machines_evaluation_does_not_reset_the_bound(
    cache: Cache, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue #36: two hosts sharing a cache, a config reading the host name:
    each host's evaluation stored a new entry and reset the other's count, a
    wrong answer again and again."""
    cache.store("k", CONFIG, NO_DEPS)
    for n in range(2):
        assert cache.lookup("k", launch(n), take=True)[1] == "hit"
    monkeypatch.setattr(_cache, "machine", lambda: "f" * 32)  # another machine
    cache.store("k", CONFIG, {**NO_DEPS, "env": {"X": "1"}})
    monkeypatch.undo()
    assert cache.lookup("k", launch(5), take=True)[0] is None


def test_a_machine_is_its_boot_not_its_host_name(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A pod restarted under a new host name is the same machine; the records
    of two hosts of an NFS cache differ (their boot ids do)."""
    with open(_cache.BOOT_ID) as boot:
        assert _cache.machine() == boot.read().strip().replace("-", "")
    monkeypatch.setattr(
        _cache.os, "uname", lambda: os.uname_result(("L", "pod-2", "", "", ""))
    )
    assert _cache.host() == "pod-2" and _cache.machine() != "pod-2"
    monkeypatch.setattr(_cache, "BOOT_ID", "/nonexistent")
    assert _cache.machine() == "pod-2"  # no boot id (not Linux): the host


def test_the_times_taken_stay_small_and_private(cache: Cache) -> None:
    cache.store("k", CONFIG, NO_DEPS)
    assert cache.lookup("k", launch(0), take=True)[1] == "hit"
    path = Path(cache.path, cache.served_file("k"))
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert len(cache.unchecked("k") or []) == 1
    path.chmod(0o622)  # writable by others: not trusted, counted as the most
    assert cache.unchecked("k") is None
    assert cache.lookup("k", launch(1), take=True)[0] is None
    path.chmod(0o600)
    path.write_text("not a launch\n")  # not ours: the most
    assert cache.lookup("k", launch(1), take=True)[0] is None
    path.write_text("x" * (_cache.MAX_SERVED_BYTES + 1))
    assert cache.unchecked("k") is None  # larger than ours: the most, read or taken
    assert cache.take("k", launch(1)).startswith(f"taken {_cache.MAX_UNCHECKED} times")


def test_a_take_that_cannot_be_written_down_says_why_as_one_that_cannot_open(
    cache: Cache, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The record opened, its line not written (a disk full by then): the
    entry is not taken, and the reason is the error's, as where the record
    could not even be opened."""
    cache.store("k", CONFIG, NO_DEPS)
    served_on_a_full_disk(monkeypatch)
    unopened = cache.take("k", launch(0))
    monkeypatch.undo()

    def full(fd: int, data: bytes) -> int:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(_cache.os, "write", full)
    assert (cache.take("k", launch(0)), unopened != "") == (unopened, True)
    monkeypatch.undo()
    assert cache.unchecked("k") == []


@pytest.mark.parametrize("lives", [True, False])
def test_a_launch_counts_once_while_the_process_that_took_it_lives(
    cache: Cache, lives: bool
) -> None:
    """Past :data:`LAUNCH_SECONDS`, a rank of a launch takes the entry
    without counting again only while the process that took it for the
    launch lives (its pid and start time); another process by that pid is
    another launch."""
    cache.store("k", CONFIG, NO_DEPS)
    mine = _cache.launch_of(launch(0))
    started = int(Path("/proc/self/stat").read_text().rpartition(")")[2].split()[19])
    then = int(time.time()) - 10 * _cache.LAUNCH_SECONDS
    line = f"{mine} {os.getpid()} {started if lives else started + 1} {then}\n"
    record = Path(cache.path, cache.served_file("k"))
    record.write_text(line)
    record.chmod(0o600)  # trusted whatever the umask
    assert cache.take("k", launch(0)) == ""
    assert len(cache.unchecked("k") or []) == (1 if lives else 2)


def test_a_record_of_the_largest_size_read_is_still_ours(cache: Cache) -> None:
    """A record of exactly :data:`MAX_SERVED_BYTES` is read as ours: a launch
    it holds takes the entry again (a rank of it) rather than being refused."""
    cache.store("k", CONFIG, NO_DEPS)
    assert cache.take("k", launch(0)) == ""
    path = Path(cache.path, cache.served_file("k"))
    ours = path.read_bytes()
    fill, left = [], _cache.MAX_SERVED_BYTES - len(ours)
    while left:  # other launches' lines, 23 to 32 bytes each
        size = left if left <= 32 else 32 if left - 32 >= 23 else left - 23
        fill.append(b"0" * 16 + b" " + b"1" * (size - 22) + b" 0 0\n")
        left -= size
    path.write_bytes(b"".join(fill) + ours)
    assert path.stat().st_size == _cache.MAX_SERVED_BYTES
    assert cache.take("k", launch(0)) == ""  # noted already, within its seconds


def test_a_venv_is_the_same_interpreter_wherever_it_is_reached(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A venv by its ``pyvenv.cfg`` and its executable within it: the same
    when its folder is reached by another path (here: moved), another venv's
    differs; without ``pyvenv.cfg``, the real paths."""

    def venv(name: str, cfg: str | None) -> Path:
        (tmp_path / name / "bin").mkdir(parents=True)
        (tmp_path / name / "bin" / "python").write_text("")
        if cfg is not None:
            (tmp_path / name / "pyvenv.cfg").write_text(cfg)
        return tmp_path / name

    def interpreter(prefix: Path, name: str = "python") -> Any:
        monkeypatch.setattr(sys, "prefix", str(prefix))
        monkeypatch.setattr(sys, "executable", str(prefix / "bin" / name))
        return json.loads(json.dumps(_cache._interpreter()))

    first = interpreter(venv("a", "home = /usr/bin\n"))
    (tmp_path / "a" / "bin" / "python3").write_text("")  # a copy, not a link
    assert interpreter(tmp_path / "a", "python3") != first
    assert interpreter((tmp_path / "a").rename(tmp_path / "moved")) == first
    assert interpreter(venv("b", "home = /usr/local/bin\n")) != first
    plain = venv("plain", None)
    assert interpreter(plain) == [str(plain / "bin" / "python"), str(plain)]


def test_folders_another_rank_makes_meanwhile_are_passed_over(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``make_private`` of ``a/b/c`` where another rank makes ``a`` between
    our look and our ``mkdir``: ``b`` and ``c`` are still made, private."""
    made = os.mkdir

    def raced(path: str, mode: int = 0o777) -> None:
        if path == str(tmp_path / "a"):
            made(path, 0o700)  # the other rank's
            raise FileExistsError(errno.EEXIST, os.strerror(errno.EEXIST), path)
        made(path, mode)

    monkeypatch.setattr(_cache.os, "mkdir", raced)
    _cache.make_private(str(tmp_path / "a" / "b" / "c"))
    monkeypatch.undo()
    modes = [stat.S_IMODE((tmp_path / p).stat().st_mode) for p in ("a/b", "a/b/c")]
    assert modes == [0o700, 0o700]


def test_a_stale_entry_says_what_changed(cache: Cache) -> None:
    cache.store("k", CONFIG, {**NO_DEPS, "env": {"MY_DEGREE": "2"}})
    assert cache.lookup("k", {"MY_DEGREE": "2"})[1] == "hit"
    assert cache.lookup("k", {"MY_DEGREE": "4"}) == (None, "stale: MY_DEGREE changed")


@pytest.mark.parametrize(
    ("damage", "said"),
    [
        ("writable by others", "entry ignored: writable by its group or others"),
        ("writable by its group", "entry ignored: writable by its group or others"),
        ("not json", _cache.CORRUPT),
        ("not a result", _cache.CORRUPT),
        ("other format", _cache.OTHER_FORMAT),
        ("a link", "entry ignored: "),
        ("a folder", "entry ignored: "),
        ("a fifo", "entry ignored: "),  # opened without waiting for a writer
        ("bad deps", _cache.CORRUPT),
        ("another key's", _cache.OTHER_LAUNCH),
    ],
)
def test_an_entry_that_cannot_be_trusted_is_ignored(
    cache: Cache, damage: str, said: str
) -> None:
    cache.store("k", CONFIG, NO_DEPS)
    path = Path(cache.entry("k"))
    doc = json.loads(path.read_text())
    if damage == "writable by others":
        path.chmod(0o666)
    elif damage == "writable by its group":
        path.chmod(0o620)
    elif damage == "not json":
        path.write_text("{")
    elif damage == "not a result":
        variant = {**doc["variants"][0], "result": {"inputs": "tp=2"}}
        path.write_text(json.dumps({**doc, "variants": [variant]}))
    elif damage == "other format":
        path.write_text(json.dumps({**doc, "format": 0}))
    elif damage == "bad deps":
        variant = {**doc["variants"][0], "deps": {"env": []}}
        path.write_text(json.dumps({**doc, "variants": [variant]}))
    elif damage == "another key's":
        path.write_text(json.dumps({**doc, "key": "j"}))
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


def test_an_entry_whose_time_cannot_be_marked_is_still_used(
    cache: Cache, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Marking it recently used (for pruning) fails: no matter."""
    cache.store("k", CONFIG, NO_DEPS)

    def read_only(path: str, **kwargs: object) -> None:
        raise OSError(30, "Read-only file system")

    monkeypatch.setattr(_cache.os, "utime", read_only)
    assert cache.lookup("k", {}) == (CONFIG, "hit")


def test_a_read_only_cache_has_no_entry_to_take(
    cache: Cache, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A read-only mount, chattr +i (the kernel's answer, os.access): no use of
    an entry can be noted there, so none is taken, by any rank; was: taken,
    unbounded, a stale one again and again (issue #28). The real mount:
    tests/e2e/test_doctor.py."""
    cache.store("k", CONFIG, NO_DEPS)
    asked = []

    def access(path: str, mode: int, *, dir_fd: int) -> bool:
        asked.append((path, mode, dir_fd))
        return False

    monkeypatch.setattr(_cache.os, "access", access)
    assert cache.lookup("k", {}) == (None, _cache.READ_ONLY)
    assert asked == [(".", os.W_OK | os.X_OK, cache.fd)]
    monkeypatch.undo()
    assert cache.lookup("k", {}) == (CONFIG, "hit")


@pytest.mark.parametrize("noted", [True, False])
def test_an_entry_is_taken_only_where_its_use_is_noted(
    cache: Cache, monkeypatch: pytest.MonkeyPatch, noted: bool,
    request: pytest.FixtureRequest,
) -> None:  # fmt: skip
    """A full disk (or a race with a remount): the bound could not be kept."""
    cache.store("k", CONFIG, NO_DEPS)
    if not noted:
        served_on_a_full_disk(monkeypatch)
        found, why = cache.lookup("k", {}, take=True)
        assert found is None and why.endswith(f" ({os.strerror(errno.ENOSPC)})")
        check_lines(request, [("a full disk", why)])
        return
    assert cache.take("k", {}) == ""
    assert len(cache.unchecked("k") or []) == 1


@pytest.mark.skipif(os.getuid() != 0, reason="chown to another user needs root")
def test_an_entry_of_another_user_is_ignored(cache: Cache) -> None:
    cache.store("k", CONFIG, NO_DEPS)
    os.chown(cache.entry("k"), 65534, 65534)
    reason = _cache._untrusted(os.stat(cache.entry("k")))
    assert reason and cache.lookup("k", {}) == (None, f"entry ignored: {reason}")


#: Keys as the cache makes them (32 hex digits): only such names are pruned.
K = [f"{i:032x}" for i in range(5)]


def test_entries_are_bounded_least_recently_used_first(
    cache: Cache, monkeypatch: pytest.MonkeyPatch
) -> None:
    cache.tag()  # a directory the cache made
    monkeypatch.setattr(_cache, "MAX_ENTRIES", 3)
    now = time.time()
    for i in range(3):
        cache.store(K[i], CONFIG, NO_DEPS)
        os.utime(cache.entry(K[i]), (now - 100 + i, now - 100 + i))
    cache.lookup(K[0], {})  # used: now the most recent
    cache.store(K[3], CONFIG, NO_DEPS)
    assert sorted(os.listdir(cache.path)) == sorted(
        [
            "CACHEDIR.TAG",
            *(f"{K[i]}.json" for i in (0, 2, 3)),
        ]
    )
    assert cache.count() == 3


def test_only_entries_count_as_entries(cache: Cache, tmp_path: Path) -> None:
    """Not a link named like an entry (never followed), nor other files."""
    cache.store(K[0], CONFIG, NO_DEPS)
    (tmp_path / "elsewhere.json").write_text("{}")
    Path(cache.path, f"{K[1]}.json").symlink_to(tmp_path / "elsewhere.json")
    Path(cache.path, "notes.txt").write_text("")
    Path(cache.path, f"{K[2]}.json").mkdir()
    Path(cache.path, "k.json").write_text("{}")  # not a key's name
    assert cache.count() == 1


def test_an_entry_pruned_while_listed_leaves_the_others_counted(
    cache: Cache, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another rank's prune between the listing and the look at one entry:
    that one is gone; those listed after it still count."""
    for k in K[:3]:
        cache.store(k, CONFIG, NO_DEPS)
    listing = os.scandir

    class Pruned:
        def __init__(self, name: str) -> None:
            self.name = name

        def is_file(self, *, follow_symlinks: bool = True) -> bool:
            raise FileNotFoundError(errno.ENOENT, "pruned", self.name)

    def scandir(path: str) -> contextlib.nullcontext[list[Any]]:
        with listing(path) as found:
            entries: list[Any] = sorted(found, key=lambda e: e.name)
        entries[0] = Pruned(entries[0].name)
        return contextlib.nullcontext(entries)

    monkeypatch.setattr(_cache.os, "scandir", scandir)
    assert cache.count() == 2


def _age(path: Path, seconds: float) -> None:
    old = time.time() - seconds
    os.utime(path, (old, old), follow_symlinks=False)


def test_left_overs_are_pruned(cache: Cache) -> None:
    cache.tag()  # a directory the cache made
    h = _cache.host()
    names = (f"{K[1]}.json.{h}.1.tmp", f"{K[0]}.{h}.lock", f"{K[0]}.{h}.result",
             f"{K[0]}.{h}.check", f"{K[0]}.{h}.result.{h}.7.tmp")  # fmt: skip
    for name in (*names, f"{K[2]}.{h}.lock"):
        Path(cache.path, name).write_text("")
    for name in names:
        _age(Path(cache.path, name), _cache.STALE_SECONDS + 10)
    cache.store(K[0], CONFIG, NO_DEPS)
    assert sorted(os.listdir(cache.path)) == sorted(
        [
            "CACHEDIR.TAG",
            f"{K[0]}.json",
            f"{K[2]}.{h}.lock",
        ]
    )


def test_a_left_over_is_pruned_once_older_than_a_day(
    cache: Cache, monkeypatch: pytest.MonkeyPatch
) -> None:
    cache.tag()  # a directory the cache made
    now = 1_700_000_000
    monkeypatch.setattr(_cache.time, "time", lambda: float(now))
    day, older = f"{K[0]}.h.lock", f"{K[1]}.h.lock"
    for name, age in ((day, _cache.STALE_SECONDS),
                      (older, _cache.STALE_SECONDS + 1)):  # fmt: skip
        Path(cache.path, name).write_text("")
        stamp = (now - age) * 10**9
        os.utime(Path(cache.path, name), ns=(stamp, stamp))
    cache.prune()
    assert sorted(os.listdir(cache.path)) == sorted(["CACHEDIR.TAG", day])


def test_pruning_goes_on_past_a_left_over_it_cannot_stat_or_remove(
    cache: Cache, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another rank prunes at the same time: a left-over listed may be gone
    before it is looked at, or go between the listing and its removal."""
    cache.tag()  # a directory the cache made
    for name in (f"{K[1]}.h.lock", f"{K[2]}.h.result"):
        Path(cache.path, name).write_text("")
        _age(Path(cache.path, name), _cache.STALE_SECONDS + 10)
    scandir = os.scandir
    vanishing = Path(cache.path, f"{K[0]}.h.lock")
    unlink = os.unlink

    def racing(path: int) -> Any:
        vanishing.write_text("")  # listed first ...
        listed = sorted(scandir(path), key=lambda entry: entry.name)
        unlink(vanishing)  # ... and gone before it is looked at

        class Listing(list):  # type: ignore[type-arg]
            def __enter__(self) -> Any:
                return iter(self)

            def __exit__(self, *exc: object) -> None:
                pass

        return Listing(listed)

    def gone_first(path: str, *, dir_fd: int) -> None:
        unlink(path, dir_fd=dir_fd)  # another rank was quicker
        unlink(path, dir_fd=dir_fd)

    monkeypatch.setattr(_cache.os, "scandir", racing)
    monkeypatch.setattr(_cache.os, "unlink", gone_first)
    cache.prune()
    assert sorted(os.listdir(cache.path)) == ["CACHEDIR.TAG"]


USER_FILES = {"results.json": b'{"loss": 1.5}\n', "a.lock": b"", "old.tmp": b"x",
              f"{'AB' * 16}.json": b"{}", "notes": b"mine"}  # fmt: skip


@pytest.mark.parametrize(
    "foreign",
    ["user-files", "folder", "entry-link", "entry-folder"],
)
def test_a_directory_holding_anything_else_is_used_and_never_pruned(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, foreign: str
) -> None:
    """ROCM_HWQ_AUTOSET_CACHE_DIR=~/runs deleted the user's *.json, *.lock and
    *.tmp files (issue #23): in a directory the cache does not hold alone,
    nothing is removed, not even what has the cache's own names (a user's
    files may be named by a hash too)."""
    monkeypatch.setattr(_cache, "MAX_ENTRIES", 1)
    folder = tmp_path / "runs"
    folder.mkdir(mode=0o700)
    for name, data in USER_FILES.items():
        (folder / name).write_bytes(data)
    if foreign == "folder":
        (folder / "logs").mkdir()
    elif foreign == "entry-link":
        for name in USER_FILES:
            (folder / name).unlink()
        (tmp_path / "target").write_text("")
        (folder / f"{K[3]}.json").symlink_to(tmp_path / "target")
    elif foreign == "entry-folder":
        for name in USER_FILES:
            (folder / name).unlink()
        (folder / f"{K[3]}.h.lock").mkdir()
    before = {p.name: p.read_bytes() for p in folder.iterdir() if p.is_file()}
    for path in folder.iterdir():
        _age(path, _cache.STALE_SECONDS + 3600)
    stale_lock = folder / f"{K[2]}.{_cache.host()}.lock"  # of the form, aged
    stale_lock.write_text("")
    _age(stale_lock, _cache.STALE_SECONDS + 3600)
    cache, problem = open_cache({"ROCM_HWQ_AUTOSET_CACHE_DIR": str(folder)})
    assert cache is not None and problem == ""
    for k in K[:3]:  # used: over the bound of 1
        cache.store(k, CONFIG, NO_DEPS)
        assert cache.lookup(k, {}) == (CONFIG, "hit")
    cache.prune()
    after = {p.name: p.read_bytes() for p in folder.iterdir() if p.is_file()}
    assert {n: d for n, d in after.items() if n in before} == before  # byte for byte
    assert stale_lock.exists()
    assert {f"{k}.json" for k in K[:3]} <= set(after)
    assert (tmp_path / "target").exists() or foreign != "entry-link"


def test_the_names_of_the_cache(cache: Cache) -> None:
    k, h = "0123456789abcdef" * 2, _cache.host()
    ours = [f"{k}.json", f"{k}.{h}.lock", f"{k}.{h}.result", f"{k}.{h}.check",
            f"{k}.json.{h}.12.tmp", f"{k}.{h}.result.{h}.3.tmp",
            cache.lock_file(k), cache.result_file(k),
            cache.check_lock_file(k)]  # fmt: skip
    for name in ours:
        assert _cache.OWN_NAME.fullmatch(name), name
    for name in ("results.json", "a.lock", "old.tmp", f"{k}.lock", f"{k[:31]}.json",
                 f"{k.upper()}.json", f"{k}.json.tmp", f"{k}.{h}.lock.tmp",
                 f"{k}.{h}.pid.tmp", f"x{k}.json", f"{k}.json~",
                 f"{k}.{'h' * 65}.lock"):  # fmt: skip
        assert not _cache.OWN_NAME.fullmatch(name), name


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
        cache.store("k", CONFIG, NO_DEPS)
    assert victim.read_text() == "mine"


def test_an_entry_that_cannot_take_its_place_leaves_nothing_behind(
    cache: Cache,
) -> None:
    os.mkdir(cache.entry("k"))  # in the way: the rename fails
    with pytest.raises(IsADirectoryError):
        cache.store("k", CONFIG, NO_DEPS)
    assert os.listdir(cache.path) == ["k.json"]


def test_a_cache_that_cannot_be_written_raises_os_error(cache: Cache) -> None:
    os.chmod(cache.path, 0o500)
    try:
        if os.getuid() == 0:  # root writes anyway: a folder gone then
            os.rename(cache.path, cache.path + ".gone")
            cache.close()  # opened again, it is not there
        with pytest.raises(OSError, match=r"No such file|Permission denied"):
            cache.store("k", CONFIG, NO_DEPS)
    finally:
        if os.getuid() == 0:
            os.rename(cache.path + ".gone", cache.path)
        os.chmod(cache.path, 0o700)


def test_a_published_answer_changes_identity_each_time(cache: Cache) -> None:
    assert cache.published("k") == (None, None)
    cache.publish("k", REFUSED, NO_DEPS)
    assert os.listdir(cache.path) == [f"k.{_cache.host()}.result"]
    first, doc = cache.published("k")
    assert first is not None
    assert doc == {"format": _cache.FORMAT, "key": "k", "answer": REFUSED.to_json(),
                   "deps": NO_DEPS}  # fmt: skip
    cache.publish("k", REFUSED, NO_DEPS)
    second, _ = cache.published("k")
    assert second != first


def test_an_answer_over_the_bound_of_an_entry_is_not_taken(
    cache: Cache, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_cache, "MAX_ENTRY_BYTES", 1 << 10)
    cache.publish("k", Answer(refusal=ConfigError("x" * (1 << 10))), NO_DEPS)
    assert cache.published("k") == (None, None)


PEER = Answer(config=CONFIG)


@pytest.mark.parametrize(
    ("change", "taken"),
    [
        ("nothing", True),
        ("the variable it read", False),
        ("another key", False),
        ("another format", False),
        ("no deps", False),
        ("deps of the wrong types", False),
        ("not a result", False),
        ("an error", True),
        ("not a document", False),
    ],
)
def test_a_peers_answer_is_checked_as_an_entry(
    cache: Cache, change: str, taken: bool
) -> None:
    """The second of two launches at once took the first's answer unchecked,
    even with another environment (issue #23): now only if it is for the same
    key and nothing its evaluation read differs here."""
    deps: Any = {**NO_DEPS, "env": {"MY_CP": "1"}}
    answer = PEER
    environ = {"MY_CP": "1"}
    key = K[0]
    if change == "the variable it read":
        environ = {"MY_CP": "2"}
    elif change == "another key":
        key = K[1]
    elif change == "no deps":
        deps = None
    elif change == "deps of the wrong types":
        deps = {**NO_DEPS, "files": [[1, 2]]}
    elif change == "an error":
        answer = REFUSED
    cache.publish(key, answer, deps)
    _, doc = cache.published(key)
    if change == "another format":
        doc["format"] = 0
    elif change == "not a document":
        doc = ["a list"]
    elif change == "not a result":
        doc["answer"] = {"config": {"inputs": "tp=x", "settings": {}}, "how": "x"}
    assert cache.peer_answer(doc, K[0], environ) == (answer if taken else None)


def nested(depth: int) -> str:
    return "[" * depth + "]" * depth


@pytest.mark.parametrize(
    "hostile",
    [
        "nested 100,000 deep",
        "deps nested 100,000 deep",
        "out of memory",
        "files of the wrong types",
        "dirs of the wrong types",
        "lists of the wrong types",
        "env of the wrong types",
        "result of the wrong types",
        "a list",
        "a number",
        "format a list",
    ],
)
def test_a_hostile_entry_is_a_corrupt_entry(
    cache: Cache, monkeypatch: pytest.MonkeyPatch, hostile: str
) -> None:
    """Any failure reading or checking an entry means evaluating as without
    it: an entry nested 100,000 deep raised RecursionError, and every launch
    said "internal error; nothing set" (issue #23)."""
    variant: Any = {"id": "0" * 16, "result": RESULT, "deps": NO_DEPS}
    doc: Any = {"format": _cache.FORMAT, "key": "k", "variants": [variant]}
    text = ""
    if hostile == "nested 100,000 deep":
        text = nested(100_000)
    elif hostile == "deps nested 100,000 deep":
        text = json.dumps(doc).replace('"files":[]', '"files":' + nested(100_000))
        text = text.replace('"files": []', '"files": ' + nested(100_000))
        assert "[[[[" in text
    elif hostile == "out of memory":

        def exhausted(data: Any) -> Any:
            raise MemoryError

        monkeypatch.setattr(_cache.json, "loads", exhausted)
    elif hostile.endswith("of the wrong types"):
        part = hostile.split()[0]
        wrong: Any = {"files": [["/x", "a", "b", "c"]], "dirs": [5], "lists": {"a": 1},
                      "env": [["A", "1"]], "result": {"inputs": 5}}[part]  # fmt: skip
        if part == "result":
            variant["result"] = wrong
        else:
            variant["deps"] = {**NO_DEPS, part: wrong}
    elif hostile == "a list":
        doc = [doc]
    elif hostile == "a number":
        doc = 7
    else:
        doc["format"] = [1]
    Path(cache.entry("k")).write_text(json.dumps(doc))
    os.chmod(cache.entry("k"), 0o600)
    if not text and hostile != "out of memory" and isinstance(doc, dict):
        assert cache.lookup("k", {})[0] is None  # the damage, not its frame
        doc["variants"] = [{"id": "0" * 16, "result": RESULT, "deps": NO_DEPS}]
        Path(cache.entry("k")).write_text(json.dumps(doc))
        if doc["format"] == _cache.FORMAT:
            assert cache.lookup("k", {})[1] == "hit"
        monkeypatch.undo()
        doc["variants"] = [variant]
    Path(cache.entry("k")).write_text(text or json.dumps(doc))
    assert cache.lookup("k", {})[0] is None
    assert cache.lookup("k", {})[1] in (_cache.CORRUPT, _cache.OTHER_FORMAT)
    Path(cache.path, cache.result_file("k")).write_text(text or json.dumps(doc))
    _, published = cache.published("k")
    assert cache.peer_answer(published, "k", {}) is None


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


@pytest.mark.parametrize("old", [1, 2, 3, 4])
def test_an_entry_of_an_earlier_format_is_not_read(cache: Cache, old: int) -> None:
    """Format 2 had no id: its times taken unchecked could not be counted.
    Format 3 had neither the inputs nor the fields of the streams the model
    leaves out. Format 4 named no key, and held one machine's evaluation."""
    assert _cache.FORMAT == 5
    cache._write("k.json", json.dumps({"format": old, "result": RESULT,
                                       "deps": NO_DEPS}))  # fmt: skip
    assert cache.lookup("k", {}) == (None, _cache.OTHER_FORMAT)


def test_only_a_directory_the_cache_made_is_tagged_and_pruned(
    tmp_path: Path,
) -> None:
    """Was: a folder of the user's holding JSON files named by md5 (names of
    the cache's own form) lost the oldest of them. Now only a directory that
    holds the cache's tag is pruned, and only one the cache made is tagged:
    an empty folder of the user's got a CACHEDIR.TAG, and whatever the user put
    there later was skipped by backups (issue #28)."""
    user = tmp_path / "runs"
    user.mkdir(mode=0o700)
    theirs = {}
    for i in range(_cache.MAX_ENTRIES + 8):
        name = f"{hashlib.md5(str(i).encode()).hexdigest()}.json"
        (user / name).write_text(f'{{"mydata": {i}}}')
        os.utime(user / name, (1, 1))  # older than any entry
        theirs[name] = (user / name).read_bytes()
    cache, _ = open_cache({"ROCM_HWQ_AUTOSET_CACHE_DIR": str(user)})
    assert cache is not None and not cache.tagged()
    cache.store("f" * 32, CONFIG, {})
    assert {n: (user / n).read_bytes() for n in theirs} == theirs
    assert not (user / "CACHEDIR.TAG").exists()
    made, _ = open_cache({"ROCM_HWQ_AUTOSET_CACHE_DIR": str(tmp_path / "new")})
    assert made is not None and made.tagged()
    assert (tmp_path / "new" / "CACHEDIR.TAG").read_text().startswith(
        "Signature: 8a477f597d28d172789f06886806bc55\n")  # fmt: skip
    (tmp_path / "empty").mkdir(mode=0o700)
    empty, _ = open_cache({"ROCM_HWQ_AUTOSET_CACHE_DIR": str(tmp_path / "empty")})
    assert empty is not None and not empty.tagged()
    assert os.listdir(tmp_path / "empty") == []
    default = tmp_path / "xdg" / "rocm-hwq-autoset"
    default.mkdir(parents=True, mode=0o700)  # not made by the cache
    found, _ = open_cache({"XDG_CACHE_HOME": str(tmp_path / "xdg")})
    assert found is not None and not found.tagged()
    made, _ = open_cache({"XDG_CACHE_HOME": str(tmp_path / "xdg2")})
    assert made is not None and made.tagged()
    # A tag that is not ours, or a link to one, marks nothing.
    (user / "CACHEDIR.TAG").write_text("Signature: 8a477f597d28d172789f06886806bc55\n")
    assert not cache.tagged()
    (user / "CACHEDIR.TAG").unlink()
    (user / "CACHEDIR.TAG").symlink_to(tmp_path / "new" / "CACHEDIR.TAG")
    assert not cache.tagged()


WAITS = """
import fcntl, os, sys
fd = os.open(sys.argv[1], os.O_RDWR)
fcntl.flock(fd, fcntl.LOCK_EX)
"""


@pytest.mark.skipif(not os.path.exists(_cache.PROC_LOCKS), reason="no /proc/locks")
def test_a_lock_is_waited_on_while_another_process_blocks_on_it(cache: Cache) -> None:
    """The evaluator asks it once it answered: ranks blocked on its lock wait
    for what it publishes."""
    name, other = cache.lock_file(K[0]), cache.lock_file(K[1])
    assert not cache.waited_on(name)  # no such file
    held = os.open(os.path.join(cache.path, name), os.O_RDWR | os.O_CREAT, 0o600)
    Path(cache.path, other).touch()
    try:
        fcntl.flock(held, fcntl.LOCK_EX)  # the evaluator's
        assert not cache.waited_on(name)  # held, nobody waits
        peer = subprocess.Popen(
            [sys.executable, "-c", WAITS, os.path.join(cache.path, name)]
        )
        try:
            deadline = time.monotonic() + 10
            while not cache.waited_on(name) and time.monotonic() < deadline:
                time.sleep(0.01)
            assert (cache.waited_on(name), cache.waited_on(other)) == (True, False)
        finally:
            peer.kill()
            peer.wait(10)
        assert not cache.waited_on(name)
    finally:
        os.close(held)


# What mutation testing found untested (docs/mutation.md).


def _flags_of_each_open(monkeypatch: pytest.MonkeyPatch) -> list[tuple[Any, int]]:
    """Each ``os.open`` from now on: its path and its descriptor's
    non-blocking flag, read as it opened. (Close-on-exec needs no test:
    Python opens every descriptor so, PEP 446.)"""
    seen: list[tuple[Any, int]] = []
    real_open = os.open

    def opened(path: Any, *args: Any, **kwargs: Any) -> int:
        fd = real_open(path, *args, **kwargs)
        seen.append((path, fcntl.fcntl(fd, fcntl.F_GETFL) & os.O_NONBLOCK))
        return fd

    monkeypatch.setattr(_cache.os, "open", opened)
    return seen


def test_the_tag_is_private_made_once_and_never_written_through_a_link(
    cache: Cache, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Whatever the umask, the tag is its owner's alone; a link planted where
    it goes is left as it is, and so is what it points to."""
    tag = Path(cache.path, _cache.TAG)
    tag.unlink(missing_ok=True)
    old = os.umask(0)
    try:
        cache.tag()
    finally:
        os.umask(old)
    assert stat.S_IMODE(tag.stat().st_mode) == 0o600
    tag.unlink()
    target = tmp_path / "elsewhere"
    target.write_text("not the cache's\n")
    tag.symlink_to(target)
    cache.tag()
    assert target.read_text() == "not the cache's\n" and tag.is_symlink()


def test_a_take_s_record_is_never_waited_on_nor_written_through_a_link(
    cache: Cache, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """(A record on a file server that hangs must not hang the launch.) A link
    planted where the record goes is refused, and what it points to is left."""
    served = cache.served_file("k")
    seen = _flags_of_each_open(monkeypatch)
    assert cache.take("k", launch(0)) == ""
    monkeypatch.undo()
    assert [nonblock for path, nonblock in seen if path == served] == [os.O_NONBLOCK]
    Path(cache.path, served).unlink()
    target = tmp_path / "elsewhere"
    target.write_text("")
    Path(cache.path, served).symlink_to(target)
    assert cache.take("k", launch(1)).endswith(f"({os.strerror(errno.ELOOP)})")
    assert target.read_text() == ""


def test_a_record_whose_lock_cannot_be_had_is_kept_without(
    cache: Cache, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A file server without locks (``ENOLCK``): the take is noted all the
    same, never an error."""

    def no_locks(fd: int, operation: int) -> None:
        raise OSError(errno.ENOLCK, os.strerror(errno.ENOLCK))

    monkeypatch.setattr(fcntl, "flock", no_locks)
    assert cache.take("k", launch(0)) == ""
    served = Path(cache.path, cache.served_file("k")).read_text()
    assert len(served.splitlines()) == 1


def test_another_machine_s_variant_of_another_result_is_kept(
    cache: Cache, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two machines, one record, two results: both variants stay; the same
    result and record from another machine is one variant."""
    other = Config(Inputs(tp=2), SETTINGS)
    for n, config in enumerate([CONFIG, other, other]):
        monkeypatch.setattr(_cache, "machine", lambda n=n: f"{n:032x}")
        cache.store("k", config, NO_DEPS)
    doc = json.loads(Path(cache.entry("k")).read_text())
    assert len(doc["variants"]) == 2


def test_a_take_counts_once_while_its_taker_lives_however_long_ago(
    cache: Cache, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Past the seconds a launch's ranks take to start, the process that took
    it, alive still (its pid and start time), is the same launch."""
    monkeypatch.setattr(_cache, "LAUNCH_SECONDS", 0)
    assert cache.take("k", launch(0)) == "" and cache.take("k", launch(0)) == ""
    served = Path(cache.path, cache.served_file("k")).read_text()
    assert len(served.splitlines()) == 1


def test_a_record_that_cannot_be_read_says_why(
    cache: Cache, monkeypatch: pytest.MonkeyPatch
) -> None:
    def grew(fd: int, limit: int) -> bytes:
        raise ConfigError("grew past its size as it was read")

    monkeypatch.setattr(_cache, "read_open", grew)
    said = cache.take("k", launch(0))
    assert said.endswith("(grew past its size as it was read)") and said != ""


def test_a_private_folder_is_private_from_its_making_and_never_through_a_link(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each folder is made 0700 (under umask 000 too: no moment where another
    user could put a file in it), then opened without following a link: one
    put in its place (a regular file, or a link to another user's folder) is
    refused, and what it points to is left as it was."""
    modes: list[int] = []
    real_fchmod = os.fchmod

    def fchmod(fd: int, mode: int) -> None:
        modes.append(stat.S_IMODE(os.fstat(fd).st_mode))
        real_fchmod(fd, mode)

    monkeypatch.setattr(_cache.os, "fchmod", fchmod)
    old = os.umask(0)
    try:
        _cache.make_private(str(tmp_path / "a" / "b"))
    finally:
        os.umask(old)
    assert modes == [0o700, 0o700]
    other = tmp_path / "other"
    other.mkdir(mode=0o755)
    (tmp_path / "plain").write_text("")
    real_mkdir = os.mkdir
    for swapped_in in ("link", "file"):
        folder = tmp_path / swapped_in

        def mkdir(path: Any, mode: int = 0o777, *, kind: str = swapped_in) -> None:
            real_mkdir(path, mode)
            os.rmdir(path)
            if kind == "link":
                os.symlink(other, path)
            else:
                Path(path).write_text("")
                os.chmod(path, 0o644)

        monkeypatch.setattr(_cache.os, "mkdir", mkdir)
        with pytest.raises(OSError, match=r"Not a directory|Too many levels"):
            _cache.make_private(str(folder))
        assert stat.S_IMODE(other.stat().st_mode) == 0o755
        if swapped_in == "file":
            assert stat.S_IMODE(folder.stat().st_mode) == 0o644


def test_a_command_name_with_a_parenthesis_is_read_past(tmp_path: Path) -> None:
    """``/proc/PID/stat`` puts the command's name in parentheses, and a name
    may hold ``) 1 2 3``: the fields come after the last one."""
    code = ("import sys, time\nopen('/proc/self/comm', 'w').write('x) 7 7 7 7')\n"
            "print(flush=True)\ntime.sleep(60)\n")  # fmt: skip
    child = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE)
    try:
        assert child.stdout is not None and child.stdout.readline() == b"\n"
        fields = _cache._stat(child.pid)
        assert fields is not None and fields[1] == str(os.getpid()).encode()
    finally:
        child.kill()
        child.wait()


def test_the_launch_of_a_process_by_its_parent(monkeypatch: pytest.MonkeyPatch) -> None:
    """With no job-step variables, a launch is its launcher's parent: its pid
    and start time (the pid of another process, started later, is another
    launch); a process whose parent cannot be told (gone) is a launch of its
    own, in each process another."""
    starts = iter([1000, 2000])
    monkeypatch.setattr(_cache, "_started", lambda pid: next(starts))
    assert _cache.launch_of({}) != _cache.launch_of({})  # another start time
    monkeypatch.undo()
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)  # fmt: skip
    pid = int(gone.stdout)
    code = ("from rocm_hwq_autoset._evaluation.cache import launch_of\n"
            f"print(launch_of({{}}, {pid}))\n")  # fmt: skip
    env = package_env()
    found = [subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                            text=True, check=True, timeout=60).stdout
             for _ in range(2)]  # fmt: skip
    assert found[0] != found[1] and all(len(f.strip()) == 16 for f in found)


def test_a_cache_closed_is_closed_at_descriptor_0_and_twice(tmp_path: Path) -> None:
    """A launcher started with stdin closed: the cache's descriptor may be 0,
    and is closed all the same; one closed behind its back is no error."""
    folder = tmp_path / "cache"
    folder.mkdir(mode=0o700)
    code = (
        "import os\nos.close(0)\n"
        "from rocm_hwq_autoset._evaluation.cache import Cache\n"
        f"c = Cache({str(folder)!r})\nassert c.fd == 0 and c.dir() == 0, c.fd\n"
        "c.close()\n"
        "try:\n    os.fstat(0)\nexcept OSError:\n    pass\n"
        "else:\n    raise SystemExit(3)\n"
        "c.dir()\nos.close(c.fd)\nc.close()\nprint('ok')\n"
    )
    env = package_env()
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                          text=True, timeout=60)  # fmt: skip
    assert (done.returncode, done.stdout) == (0, "ok\n"), done.stderr


def test_a_folder_holding_anything_not_the_cache_s_is_never_pruned(
    cache: Cache,
) -> None:
    """A name not of the cache's form, or a link of its form: the folder is
    not the cache's alone (it may be the user's), and nothing in it is
    removed."""
    cache.tag()
    assert cache._entries()[2] is False
    for planted in ("notes.txt", "0" * 32 + ".json"):
        path = Path(cache.path, planted)
        if planted.endswith(".json"):
            path.symlink_to(Path(cache.path, _cache.TAG))
        else:
            path.write_text("the user's\n")
        assert cache._entries()[2] is True
        path.unlink()


def test_an_entry_of_another_format_leaves_no_variant(
    cache: Cache, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_cache, "machine", lambda: "a" * 32)
    cache.store("k", CONFIG, NO_DEPS)
    doc = json.loads(Path(cache.entry("k")).read_text())
    doc["format"] = _cache.FORMAT - 1
    Path(cache.entry("k")).write_text(json.dumps(doc))
    monkeypatch.setattr(_cache, "machine", lambda: "b" * 32)
    cache.store("k", CONFIG, {**NO_DEPS, "env": {"X": "1"}})
    doc = json.loads(Path(cache.entry("k")).read_text())
    assert [v["machine"] for v in doc["variants"]] == ["b" * 32]


@pytest.mark.timeout(30)
def test_an_evaluation_never_writes_the_record_through_a_link_nor_waits(
    cache: Cache, tmp_path: Path
) -> None:
    """What a machine's evaluation clears: a link put in the record's place is
    left, and so is what it points to; a FIFO there is no wait."""
    served = Path(cache.path, cache.served_file("k"))
    target = tmp_path / "elsewhere"
    target.write_text("the user's\n")
    served.symlink_to(target)
    cache.evaluated("k")
    assert target.read_text() == "the user's\n" and served.is_symlink()
    served.unlink()
    os.mkfifo(served, 0o600)
    cache.evaluated("k")  # (blocked for good without O_NONBLOCK: no reader)


def test_a_boot_id_that_is_not_one_names_the_machine_by_its_host(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    odd = tmp_path / "boot_id"
    odd.write_text("not-a-boot-id\n")
    monkeypatch.setattr(_cache, "BOOT_ID", str(odd))
    assert _cache.machine() == _cache.host()


def test_a_cache_made_but_not_tagged_is_still_used(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """(A full disk as the tag is written: the cache works without it, and is
    never pruned.)"""

    def full(self: Cache) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(Cache, "tag", full)
    found, said = open_cache({"ROCM_HWQ_AUTOSET_CACHE_DIR": str(tmp_path / "new")})
    assert found is not None and said == ""


@pytest.mark.timeout(60)
def test_a_lock_another_process_holds_is_not_waited_for_unless_asked(
    cache: Cache,
) -> None:
    """Two real processes: while one holds the lock, the other's try gives
    False at once; a lock of another name is its own."""
    name = cache.lock_file("k" * 32)
    code = (
        "import sys, time\n"
        "from rocm_hwq_autoset._evaluation.cache import Cache\n"
        f"assert Cache({cache.path!r}).lock({name!r}, wait=True)\n"
        "print(flush=True)\ntime.sleep(60)\n"
    )
    env = package_env()
    holder = subprocess.Popen([sys.executable, "-c", code], env=env,
                              stdout=subprocess.PIPE)  # fmt: skip
    try:
        assert holder.stdout is not None and holder.stdout.readline() == b"\n"
        assert cache.lock(name, wait=False) is False
        assert cache.lock(cache.lock_file("j" * 32), wait=False) is True
    finally:
        holder.kill()
        holder.wait()
    assert cache.lock(name, wait=False) is True  # its holder gone


def test_a_cache_folder_replaced_since_it_was_opened_is_refused(
    cache: Cache, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    cache.close()
    os.rename(cache.path, tmp_path / "moved")
    os.mkdir(cache.path, 0o700)
    with pytest.raises(ConfigError) as refused:
        cache.dir()
    check_lines(request, [("replaced", str(refused.value))])


@pytest.mark.parametrize("damage", ["no variant", "an id that is no id", "no id"])
def test_an_entry_whose_variants_cannot_be_trusted_is_corrupt(
    cache: Cache, damage: str
) -> None:
    cache.store("k", CONFIG, NO_DEPS)
    path = Path(cache.entry("k"))
    doc = json.loads(path.read_text())
    if damage == "no variant":
        doc["variants"] = []
    else:
        doc["variants"][0]["id"] = "../x" if damage == "an id that is no id" else 7
    path.write_text(json.dumps(doc))
    assert cache.lookup("k", {}) == (None, _cache.CORRUPT)


def test_a_signal_as_an_entry_is_written_is_never_lost(
    cache: Cache, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Ctrl-C as the entry goes in place, and its temporary file cannot be
    removed either: the KeyboardInterrupt goes on, not an error of ours."""

    def interrupted(*args: Any, **kwargs: Any) -> None:
        raise KeyboardInterrupt

    def stuck(*args: Any, **kwargs: Any) -> None:
        raise OSError(errno.EBUSY, os.strerror(errno.EBUSY))

    monkeypatch.setattr(_cache.os, "replace", interrupted)
    monkeypatch.setattr(_cache.os, "unlink", stuck)
    with pytest.raises(KeyboardInterrupt):
        cache.store("k", CONFIG, NO_DEPS)

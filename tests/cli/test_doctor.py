"""``doctor`` in this process: what it says of the environment, of the hook at
start-up and of a launch. Installs in real venvs: tests/e2e/test_doctor.py."""

from __future__ import annotations

import argparse
import io
import os
import site
import sys
from pathlib import Path
from typing import Any

import pytest

from rocm_hwq_autoset import _hook, recommend
from rocm_hwq_autoset._argv import Launch
from rocm_hwq_autoset._cli import doctor as _doctor
from rocm_hwq_autoset._cli import main
from rocm_hwq_autoset._cli.doctor import (
    Row,
    cache_checks,
    environment_checks,
    launch_checks,
    start_up_check,
    startup_file_checks,
)
from rocm_hwq_autoset._decision import SET, SKIP, WARNING, Outcome
from rocm_hwq_autoset._evaluation.cache import Cache

from ..data import write_job
from ..helpers import CUDA_VERSION_PY, ROCM_VERSION_PY, fake_torch

JOB = "models__deepseek_v3__deepseek_v3_16b.toml"
ROOT = Path(__file__).resolve().parents[2]
#: The parser torchtitan reads a job config with, here.
TOML_READER = "tomllib" if sys.version_info >= (3, 11) else "tomli"


@pytest.fixture
def rocm_job(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """A ROCm torch first on the path, and a job config in the working directory."""
    monkeypatch.syspath_prepend(str(fake_torch(tmp_path / "rocm", ROCM_VERSION_PY)))
    write_job(tmp_path, JOB)
    monkeypatch.chdir(tmp_path)
    return JOB


def doctor(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    code = main(["doctor", *args])
    out, err = capsys.readouterr()
    assert err == ""
    return code, " ".join(out.split())


def test_a_launch(rocm_job: str, capsys: pytest.CaptureFixture[str]) -> None:
    _, flat = doctor(capsys, "--", "--job.config_file", rocm_job,
                     "--compile.enable_fsdp_ag_rs_overlap")  # fmt: skip
    assert "ok ROCm " in flat and "hip = '6.2.41133-dd7f95766'" in flat
    assert "ok GPU_MAX_HW_QUEUES unset (HIP's default: 4)" in flat
    assert flat.endswith("for that launch would set GPU_MAX_HW_QUEUES=8 healthy")
    assert "as if on ROCm" not in flat  # it is ROCm


def test_a_launch_names_each_stream_q_leaves_out(
    rocm_job: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """One note a stream the model leaves out, after the launch's row, with
    the verify command that settles it; healthy all the same."""
    code, flat = doctor(capsys, "--", "--job.config_file", rocm_job,
                        "--parallelism.tensor_parallel_degree", "2",
                        "--compile.enable_async_tensor_parallel")  # fmt: skip
    assert code == 0
    assert flat.endswith(
        "ok for that launch would set GPU_MAX_HW_QUEUES=8 note not in Q symm_mem:"
        " async TP's and dist-GEMM's fused all-gather/reduce-scatter matmuls run on"
        " torch's symmetric-memory stream, which PR #4032 has no lane for; check it"
        " on a profiler trace: rocm-hwq-autoset verify --queues 8 TRACE healthy"
    )
    _, flat = doctor(capsys, "--", "--job.config_file", rocm_job)
    assert "not in Q" not in flat


@pytest.mark.parametrize(
    ("content", "said"),
    [
        (b"\xef\xbb\xbf[job]\n", "FAIL for that launch warning: bom.toml: invalid"
         f" TOML: it starts with a UTF-8 byte-order mark, which {TOML_READER}"
         " (torchtitan's TOML reader) refuses (Invalid statement (at line 1,"
         " column 1)); save it without the mark: sed -i '1s/^\\xEF\\xBB\\xBF//'"
         " bom.toml; GPU_MAX_HW_QUEUES left unset (checked as if on ROCm: this"
         " machine is not)"),
        (b"[parallelism]\ntensor_parallel_degree = 0\n",
         "FAIL for that launch warning: bom.toml: parallelism.tensor_parallel_degree:"
         " 0 must be >= 1; GPU_MAX_HW_QUEUES left unset (checked as if on ROCm: this"
         " machine is not)"),
    ],
)  # fmt: skip
def test_off_rocm_a_launch_is_checked_as_on_a_rocm_node(
    content: bytes, said: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    """On a login node or in an image build, a config the hook would refuse on
    the ROCm node is unhealthy here too, and doctor says how it checked."""
    monkeypatch.syspath_prepend(str(fake_torch(tmp_path / "cuda", CUDA_VERSION_PY)))
    monkeypatch.chdir(tmp_path)
    (tmp_path / "bom.toml").write_bytes(content)
    code, flat = doctor(capsys, "--", "--job.config_file", "bom.toml")
    assert "note not ROCm " in flat
    assert code == 1 and said in flat
    assert flat.endswith("(checked as if on ROCm: this machine is not)")
    write_job(tmp_path, JOB)
    code, flat = doctor(capsys, "--", "--job.config_file", JOB)
    assert code == 0
    assert (
        "ok for that launch would set GPU_MAX_HW_QUEUES=4 (checked as if on ROCm:"
        " this machine is not)" in flat
    )
    # Opted out, the hook does nothing on ROCm either: said as it is.
    monkeypatch.setenv("ROCM_HWQ_AUTOSET", "0")
    code, flat = doctor(capsys, "--", "--job.config_file", "bom.toml")
    assert code == 0
    assert (
        "note for that launch ROCM_HWQ_AUTOSET=0: opted out, the hook stays out (the"
        " package is not imported)" in flat
    )


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["--job.config_file", "/nonexistent.toml"],
         "FAIL for that launch warning: /nonexistent.toml: No such file or directory;"
         " GPU_MAX_HW_QUEUES left unset"),
        (["--job.config_file", JOB, "--parallelism.expert_parallel_degree"],
         "FAIL for that launch warning: --parallelism.expert_parallel_degree:"
         " expects a value; GPU_MAX_HW_QUEUES left unset"),
        (["--module", "graph_trainer.llama3"],
         "FAIL for that launch warning: --config: is required"),
    ],
)  # fmt: skip
def test_a_launch_the_hook_refuses_is_unhealthy(
    args: list[str], said: str, rocm_job: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, flat = doctor(capsys, "--", *args)
    assert code == 1 and said in flat
    assert "unhealthy: for that launch: " in flat


def test_an_explicit_value_hip_cannot_use_is_unhealthy(
    rocm_job: str, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    monkeypatch.setenv("GPU_MAX_HW_QUEUES", "eight")
    code, flat = doctor(capsys, "--", "--job.config_file", rocm_job)
    assert code == 1
    assert (
        "FAIL GPU_MAX_HW_QUEUES 'eight' (HIP reads 0), set explicitly: not a queue"
        " count HIP can use" in flat
    )
    assert (
        "warning: GPU_MAX_HW_QUEUES='eight': HIP reads 0, not a queue count;"
        " left as is (an explicit value always wins)" in flat
    )


def test_without_a_launch_argument_the_hook_stays_out(
    rocm_job: str, capsys: pytest.CaptureFixture[str]
) -> None:
    _, flat = doctor(capsys, "--", "--training.steps", "10")
    assert (
        "note for that launch no --job.config_file, nor --module for torchtitan:"
        " the hook stays out (the package is not imported)" in flat
    )


def test_a_world_size_it_cannot_read_is_unhealthy(
    rocm_job: str, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    bad = "z" * 12  # the summary line: 80 characters, one too many
    monkeypatch.setenv("WORLD_SIZE", bad)
    code, flat = doctor(capsys, "--", "--job.config_file", rocm_job)
    assert code == 1
    assert f"FAIL for that launch WORLD_SIZE: '{bad}' is not a positive integer" in flat
    out = io.StringIO()
    training = argparse.Namespace(training=["--job.config_file", rocm_job])
    assert _doctor.run(training, out) == 1
    assert out.getvalue().split("\n\n")[-1] == (
        f"unhealthy: for that launch: WORLD_SIZE: '{bad}' is not a positive\ninteger\n"
    )


@pytest.mark.parametrize(
    ("decided", "said"),
    [
        (None, "the hook did not run at start-up (no --job.config or --module)"),
        (Outcome(SKIP, "rocm-hwq-autoset's own command"),
         "at start-up the hook did nothing: rocm-hwq-autoset's own command"),
        (Outcome(SET, "GPU_MAX_HW_QUEUES=4 (...)", rec=recommend(None)),
         "at start-up the hook set GPU_MAX_HW_QUEUES=4 here"),
        (Outcome(WARNING, "x.toml: No such file", "GPU_MAX_HW_QUEUES left unset"),
         "at start-up the hook warned: x.toml: No such file; GPU_MAX_HW_QUEUES left"
         " unset"),
        (Launch("--module", ["--module", "m", "--config", "c"], True),
         "at start-up the hook started a --module evaluation"),
    ],
)  # fmt: skip
def test_what_the_hook_did_at_start_up(
    decided: Outcome | Launch | None, said: str, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    check = start_up_check(decided)
    assert (check.status, check.topic, check.detail) == ("note", "this process", said)
    monkeypatch.setattr(_hook, "decided", decided)
    _, flat = doctor(capsys)
    assert f"note this process {said}" in flat


def rows(checks: list[Row]) -> list[tuple[str, str, str]]:
    return [(c.status, c.topic, c.detail) for c in checks]


SWITCH_VALUES = "1/on/true/yes/auto (on), 0/off/false/no (off) or force"


@pytest.mark.parametrize(
    ("env", "row"),
    [
        ({}, ("ok", "GPU_MAX_HW_QUEUES", "unset (HIP's default: 4)")),
        # Empty: nobody's value, which the hook replaces (HIP would read 0).
        ({"GPU_MAX_HW_QUEUES": ""}, ("ok", "GPU_MAX_HW_QUEUES",
                                      "'' (HIP reads 0): empty")),
        ({"GPU_MAX_HW_QUEUES": "2"}, ("ok", "GPU_MAX_HW_QUEUES",
                                      "2, set explicitly: it always wins")),
        ({"GPU_MAX_HW_QUEUES": " 8 "}, ("ok", "GPU_MAX_HW_QUEUES",
                                        "' 8 ' (HIP reads 8), set explicitly: it"
                                        " always wins")),
        ({"GPU_MAX_HW_QUEUES": "8.0"}, ("ok", "GPU_MAX_HW_QUEUES",
                                        "'8.0' (HIP reads 8), set explicitly: it"
                                        " always wins")),
        ({"GPU_MAX_HW_QUEUES": "-1"}, ("FAIL", "GPU_MAX_HW_QUEUES",
                                       "-1, set explicitly: not a queue count HIP"
                                       " can use")),
        ({"GPU_MAX_HW_QUEUES": "8", "ROCM_HWQ_AUTOSET_ORIGIN": "8 --module"},
         ("ok", "GPU_MAX_HW_QUEUES", "8, set by rocm-hwq-autoset (--module)")),
        ({"GPU_MAX_HW_QUEUES": "4", "ROCM_HWQ_AUTOSET_ORIGIN": "4 job.config_file"},
         ("ok", "GPU_MAX_HW_QUEUES", "4, set by rocm-hwq-autoset (job.config_file)")),
        ({"ROCM_HWQ_AUTOSET": "Off"}, ("note", "ROCM_HWQ_AUTOSET", "Off: opted out")),
        ({"ROCM_HWQ_AUTOSET": "bogus"},
         ("FAIL", "ROCM_HWQ_AUTOSET",
          f"ROCM_HWQ_AUTOSET='bogus' is not {SWITCH_VALUES}: the hook does nothing")),
        ({"ROCM_HWQ_AUTOSET_LOG": "loud"},
         ("FAIL", "ROCM_HWQ_AUTOSET_LOG", "ROCM_HWQ_AUTOSET_LOG='loud' is not quiet"
          " or verbose; using the default (one line per node)")),
        ({"ROCM_HWQ_AUTOSET_TIMEOUT": "2m"},
         ("FAIL", "ROCM_HWQ_AUTOSET_TIMEOUT", "ROCM_HWQ_AUTOSET_TIMEOUT='2m' is not"
          " a positive number of seconds up to 86400; using the default (120 s)")),
        ({"ROCM_HWQ_AUTOSET_TIMEOUT": "300"}, None),
    ],
)  # fmt: skip
def test_each_variable_has_its_line(
    env: dict[str, str], row: tuple[str, str, str] | None,
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    found = rows(environment_checks([]))
    if row is None:  # a good value: no line of its own
        assert not any(topic in env for _, topic, _ in found)
        return
    assert row in found
    topics = [topic for _, topic, _ in found]
    assert topics.count(row[1]) == 1
    assert ("ROCm" in topics) != ("not ROCm" in topics)
    # The whole command: the same line, and unhealthy exactly when one FAILs.
    code, flat = doctor(capsys)
    assert f"{row[0]} {row[1]} {row[2]}" in flat
    assert code == (1 if row[0] == "FAIL" else 0)
    assert flat.endswith(f"unhealthy: {row[1]}: {row[2]}" if code else "healthy")


def test_not_rocm_is_a_note_with_its_evidence(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.syspath_prepend(str(fake_torch(tmp_path / "cuda", CUDA_VERSION_PY)))
    [first, *_] = rows(environment_checks([]))
    assert first[:2] == ("note", "not ROCm")
    assert first[2].endswith("version.py: hip = None (a CUDA or CPU build)")


@pytest.mark.parametrize(
    ("env", "row"),
    [
        ({"ROCM_HWQ_AUTOSET_CACHE": "0"}, ("note", "cache",
                                           "off (ROCM_HWQ_AUTOSET_CACHE)")),
        ({"ROCM_HWQ_AUTOSET_CACHE": "sometimes"},
         ("FAIL", "cache", "ROCM_HWQ_AUTOSET_CACHE='sometimes' is not"
          " 1/on/true/yes/auto (on), 0/off/false/no (off)")),
        ({}, ("ok", "cache", "{cache}: not made yet")),
    ],
)  # fmt: skip
def test_the_cache_line(
    env: dict[str, str], row: tuple[str, str, str], tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    cache = tmp_path / "cache"
    assert rows(cache_checks()) == [(*row[:2], row[2].format(cache=cache))]
    assert not cache.exists()  # doctor only looks: it creates nothing


def test_without_a_home_there_is_no_cache_and_doctor_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue #36: no cache in the temporary directory any more: a note, not a
    failure (the cost is an evaluation at every launch)."""
    import pwd

    def unknown(uid: int) -> object:
        raise KeyError(uid)

    monkeypatch.setattr(pwd, "getpwuid", unknown)
    for name in ("ROCM_HWQ_AUTOSET_CACHE_DIR", "XDG_CACHE_HOME", "HOME"):
        monkeypatch.delenv(name, raising=False)
    assert rows(cache_checks()) == [
        ("note", "cache", "no home directory and no ROCM_HWQ_AUTOSET_CACHE_DIR:"
         " no cache, each --module launch evaluates")
    ]  # fmt: skip


def test_the_cache_line_counts_entries_and_names_what_is_wrong(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cache = tmp_path / "cache"
    cache.mkdir(mode=0o700)
    said = {0: "0 entries", 1: "1 entry", 2: "2 entries"}
    for count, words in said.items():
        if count:
            (cache / f"{count:032x}.json").write_text("{}")
        assert rows(cache_checks()) == [("ok", "cache", f"{cache}: usable, {words}")]
    cache.chmod(0o777)
    assert rows(cache_checks()) == [
        ("FAIL", "cache", f"{cache}: writable by its group or others; not used")
    ]
    cache.chmod(0o700)

    def unreadable(self: object) -> int:
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(Cache, "count", unreadable)
    assert rows(cache_checks()) == [("FAIL", "cache", f"{cache}: Permission denied")]


def test_a_read_only_cache_is_said_with_what_it_costs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Was: "usable, 0 entries" for a cache no launch can store in (issue
    #28). os.access is the kernel's answer (EROFS, EPERM for chattr +i, root
    included); tests/e2e/test_doctor.py asks a real read-only mount."""
    cache = tmp_path / "cache"
    cache.mkdir(mode=0o700)
    (cache / f"{1:032x}.json").write_text("{}")
    monkeypatch.setenv("ROCM_HWQ_AUTOSET_CACHE_DIR", str(cache))
    asked: list[tuple[str, int]] = []

    def access(path: str, mode: int) -> bool:
        asked.append((path, mode))
        return False

    monkeypatch.setattr(_doctor.os, "access", access)
    assert rows(cache_checks()) == [
        ("FAIL", "cache", f"{cache}: read-only, 1 entry, none taken (no use of one"
         " can be noted, and an entry is taken at most 2 times unchecked); none is"
         " stored: every --module launch evaluates again (seconds each)")
    ]  # fmt: skip
    assert asked == [(str(cache), os.W_OK | os.X_OK)]


@pytest.mark.parametrize("where", ["file", "file/cache"])
def test_a_cache_folder_that_is_a_file_is_said_as_the_hook_says_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, where: str
) -> None:
    """Was: "File exists" from the hook, "Not a directory" from doctor."""
    (tmp_path / "file").write_text("")
    monkeypatch.setenv("ROCM_HWQ_AUTOSET_CACHE_DIR", str(tmp_path / where))
    said = f"{tmp_path / where}: Not a directory"
    assert rows(cache_checks()) == [("FAIL", "cache", said)]
    from rocm_hwq_autoset._evaluation import open_cache

    assert open_cache(os.environ) == (None, said)  # the hook's, which may create
    assert (tmp_path / "file").read_text() == ""


class Flags:
    """``sys.flags`` with ``no_site`` replaced; every other flag as it is
    (Python 3.9's ``open()`` reads ``utf8_mode``)."""

    def __init__(self, no_site: int) -> None:
        self.no_site = no_site
        self._real = sys.flags

    def __getattr__(self, name: str) -> Any:
        return getattr(self._real, name)


@pytest.fixture
def layout(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    """Site directories of a made-up interpreter: two of the environment's and
    the user site (on or off); returns a function that lays out the start-up
    files and gives doctor's lines on them."""
    site_dirs = [tmp_path / "site-a", tmp_path / "site-b"]
    user, other = tmp_path / "user", tmp_path / "target"
    for folder in (*site_dirs, user, other):
        folder.mkdir()
    monkeypatch.setattr(site, "getsitepackages",
                        lambda prefixes=None: [str(d) for d in site_dirs])  # fmt: skip
    monkeypatch.setattr(site, "getusersitepackages", lambda: str(user))
    # No distribution of the package: one is made up where a test needs it.
    monkeypatch.setattr(_doctor, "installed_file", lambda name: None)
    monkeypatch.setattr(_doctor, "reinstall_command", lambda: "REINSTALL")

    def lines(files: dict[str, list[str]], *, user_site: bool = True,
              on_path: tuple[str, ...] = (), pep_829: bool = False,
              texts: dict[str, str] | None = None,
              ) -> list[tuple[str, str, str]]:  # fmt: skip
        for folder, names in files.items():
            for name in names:
                (tmp_path / folder / name).write_text((texts or {}).get(name, ""))
        monkeypatch.setattr(site, "ENABLE_USER_SITE", user_site)
        # site puts each site directory it processes on sys.path.
        processed = [*site_dirs, *([user] if user_site else [])]
        monkeypatch.setattr(
            sys,
            "path",
            ["", *map(str, processed), *(str(tmp_path / p) for p in on_path)],
        )
        # Python 3.15 runs .start files: doctor checks as that Python, or 3.14.
        version = (3, 15) if pep_829 else (3, 14)
        monkeypatch.setattr(_doctor, "python_version", lambda: version)
        return [(s, t, d.replace(str(tmp_path), "T")) for s, t, d in
                rows(startup_file_checks())]  # fmt: skip

    return lines


PTH, START = "rocm_hwq_autoset.pth", "rocm_hwq_autoset.start"


def test_start_up_files_in_a_site_directory(layout: Any) -> None:
    assert layout({"site-b": [PTH, START], "user": [START]}) == [
        ("ok", PTH, f"T/site-b/{PTH}"),
        ("ok", "before it", "no start-up file site runs before the hook runs code"),
        ("ok", START, "present, for Python 3.15+ (PEP 829)"),
    ]


def test_the_pth_files_site_runs_first_that_run_code_are_named(layout: Any) -> None:
    """Issue #31: possible early starters of HIP, in site's order (the
    environment's folders, then the user site; by name within one)."""
    texts = {"aa_probe.pth": "import gpu_probe\n", "ab_paths.pth": "/opt/x\n",
             "distutils-precedence.pth": "import os; os.environ\n",
             "zz_after.pth": "import late\n",
             "u.pth": "import user_thing\n"}  # fmt: skip
    files = {"site-a": ["aa_probe.pth", "ab_paths.pth"],
             "site-b": ["distutils-precedence.pth", PTH, "zz_after.pth"],
             "user": ["u.pth"]}  # fmt: skip
    assert layout(files, texts=texts)[:2] == [
        ("ok", PTH, f"T/site-b/{PTH}"),
        ("note", "before it", "2 start-up files site runs before the hook run code; one"
         " that starts HIP makes the hook come too late (it warns then):"
         " T/site-a/aa_probe.pth, T/site-b/distutils-precedence.pth"),
    ]  # fmt: skip


ENTRY = "_rocm_hwq_autoset_gate:start\n"


def test_start_up_files_on_python_3_15(layout: Any) -> None:
    found = layout({"site-a": [PTH, START]}, pep_829=True, texts={START: ENTRY})
    assert found == [
        ("ok", PTH, f"T/site-a/{PTH}"),
        ("ok", "before it", "no start-up file site runs before the hook runs code"),
        ("ok", START, "present: Python runs it instead of the .pth line"),
    ]


def test_an_empty_start_file_turns_the_hook_off_on_python_3_15(layout: Any) -> None:
    """PEP 829: a ``.start`` beside the ``.pth`` of its name turns that
    file's import lines off, even when it names no entry point."""
    assert layout({"site-a": [PTH, START]}, pep_829=True)[1:] == [
        ("note", "before it", f"site never runs the hook here (see {START})"),
        ("FAIL", START, f"T/site-a/{START} names no entry point: it turns the {PTH}"
         " line off (PEP 829) and the hook never runs; reinstall: REINSTALL"),
    ]  # fmt: skip


#: Site folders whose start-up files run in another order on 3.15 (PEP 829).
ORDERED = {"site-a": ["aa_first.start", "aa_probe.pth", "bb.pth", "bb.start", PTH,
                      START, "zz_after.pth", "zz_late.start"],
           "user": ["a_user.start", "u.pth"]}  # fmt: skip
ORDERED_TEXTS = {"aa_first.start": "first:go\n", "aa_probe.pth": "import gpu_probe\n",
                 "bb.pth": "import b\n", START: ENTRY, "zz_after.pth": "import late\n",
                 "zz_late.start": "late:go\n", "a_user.start": "user:go\n",
                 "u.pth": "import user_thing\n"}  # fmt: skip


@pytest.mark.parametrize(
    ("pep_829", "early"),
    [
        (False, "2 start-up files site runs before the hook run code; one that"
         " starts HIP makes the hook come too late (it warns then):"
         " T/site-a/aa_probe.pth, T/site-a/bb.pth"),
        (True, "4 start-up files site runs before the hook run code (Python 3.15+:"
         " every .pth import line of every site folder, then the .start entries"
         " found before ours); one that starts HIP makes the hook come too late (it"
         " warns then): T/site-a/aa_probe.pth, T/site-a/zz_after.pth, T/user/u.pth,"
         " T/site-a/aa_first.start"),
    ],
)  # fmt: skip
def test_what_runs_before_the_hook_follows_the_pythons_order(
    layout: Any, pep_829: bool, early: str
) -> None:
    """3.14 and older: folder by folder, by name, up to our .pth. 3.15+: every
    import line first (bb.pth's turned off by bb.start, empty as it is), then
    the entry points found before ours."""
    rows = layout(ORDERED, pep_829=pep_829, texts=ORDERED_TEXTS)
    assert rows[1] == ("note", "before it", early)


def test_a_start_file_missing_on_python_3_15(layout: Any) -> None:
    found = layout({"site-a": [PTH], "user": [START]}, user_site=False, pep_829=True)
    assert found == [
        ("ok", PTH, f"T/site-a/{PTH}"),
        ("ok", "before it", "no start-up file site runs before the hook runs code"),
        ("FAIL", START, "missing: Python 3.15+ runs the hook from it"),
    ]


def test_start_up_files_in_the_user_site(layout: Any) -> None:
    assert layout({"user": [PTH, START]}) == [
        ("ok", PTH, f"T/user/{PTH}"),
        ("ok", "before it", "no start-up file site runs before the hook runs code"),
        ("ok", START, "present, for Python 3.15+ (PEP 829)"),
    ]
    assert layout({}, user_site=False) == [
        ("FAIL", PTH, f"T/user/{PTH} is in the user site, which is disabled (-s, -I"
         " or PYTHONNOUSERSITE)"),
    ]  # fmt: skip


def test_start_up_files_outside_the_site_directories(layout: Any) -> None:
    assert layout({"target": [PTH, START]}, on_path=("user", "target")) == [
        ("FAIL", PTH, f"T/target/{PTH}: its folder is on sys.path but is no site"
         " directory, so site ignores it (pip install --target?); install into the"
         " environment instead"),
    ]  # fmt: skip
    assert layout({}, on_path=("user", "site-a")) == [
        ("FAIL", PTH, "in no site directory of this interpreter: not installed;"
         " install: REINSTALL"),
    ]  # fmt: skip


def test_a_pth_removed_from_an_installed_distribution_names_the_command(
    layout: Any, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Was: "not installed", while ``pip list`` shows the package."""
    where = str(tmp_path / "site-a" / PTH)
    monkeypatch.setattr(_doctor, "installed_file",
                        lambda name: where if name == PTH else None)  # fmt: skip
    assert layout({"site-a": [START]}) == [
        ("FAIL", PTH, f"T/site-a/{PTH} is missing, though rocm-hwq-autoset is"
         " installed (pip list shows it): the hook never runs; restore it:"
         " REINSTALL"),
        ("ok", START, "present, for Python 3.15+ (PEP 829)"),
    ]  # fmt: skip


def test_without_site_nothing_is_looked_for(
    layout: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sys, "flags", Flags(no_site=1))
    assert layout({"site-a": [PTH, START]}) == [
        ("FAIL", "site", "python -S: site is skipped, so no .pth runs")
    ]


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_the_report_on_a_terminal(
    rocm_job: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each status in its colour, the python line first, and a failure's
    summary wrapped at 79 columns without breaking a path or a flag."""
    monkeypatch.setenv("ROCM_HWQ_AUTOSET_LOG", "loud")
    out = _Tty()
    code = _doctor.run(argparse.Namespace(training=[]), out)
    text = out.getvalue()
    assert code == 1
    # The python line, however long the interpreter's path (wrapped beside
    # its topic where it is long): the path whole, then the version.
    first = text[: text.index("\n\033[32mok")]
    python = f"{sys.executable} ({sys.version.split()[0]})"
    assert first.startswith("\033[33mnote\033[0m  " + "python".ljust(23))
    assert " ".join(first.split()[2:]) == " ".join(python.split())
    assert "\033[32mok\033[0m    ROCm" in text
    assert "\033[31mFAIL\033[0m  ROCM_HWQ_AUTOSET_LOG" in text
    summary = text[text.index("\n\nunhealthy") + 2 :]
    assert summary == (
        "unhealthy: ROCM_HWQ_AUTOSET_LOG: ROCM_HWQ_AUTOSET_LOG='loud' is not quiet or\n"
        "verbose; using the default (one line per node)\n"
    )


def test_a_long_summary_breaks_only_between_words(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    long = tmp_path / ("a-very-long-folder-name-" * 4) / "cache"
    long.mkdir(parents=True, mode=0o777)
    long.chmod(0o777)
    monkeypatch.setenv("ROCM_HWQ_AUTOSET_CACHE_DIR", str(long))
    out = io.StringIO()
    assert _doctor.run(argparse.Namespace(training=[]), out) == 1
    summary = out.getvalue().split("\n\n")[-1]
    assert (
        summary
        == f"unhealthy: cache:\n{long}:\nwritable by its group or others; not used\n"
    )


def test_the_gate_module_is_checked(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The .pth line imports the gate by name: missing, or another one first
    on the path, the hook never runs and nothing says so but doctor."""
    import importlib.machinery
    import importlib.util

    from rocm_hwq_autoset._cli import doctor as doctor_module

    ours = doctor_module.gate_check()
    assert (ours.status, ours.topic) == ("ok", "_rocm_hwq_autoset_gate")
    assert ours.detail.endswith("_rocm_hwq_autoset_gate.py")
    monkeypatch.setattr(doctor_module, "reinstall_command", lambda: "REINSTALL")
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None)
    missing = doctor_module.gate_check()
    assert (missing.status, missing.detail) == (
        "FAIL", "missing: the .pth line imports it, and without it the hook never"
        " runs; reinstall: REINSTALL",
    )  # fmt: skip
    other = tmp_path / "_rocm_hwq_autoset_gate.py"
    other.write_bytes((ROOT / "_rocm_hwq_autoset_gate.py").read_bytes())
    monkeypatch.setattr(
        importlib.util, "find_spec",
        lambda name: importlib.machinery.ModuleSpec(name, None, origin=str(other)),
    )  # fmt: skip
    monkeypatch.setattr(doctor_module, "installed_file", lambda name: None)
    shadowed = doctor_module.gate_check()
    assert shadowed.status == "FAIL"
    assert shadowed.detail.startswith(f"{other} comes first on sys.path")
    # An editable install: the distribution's own copy in site-packages, the
    # package in the checkout. Healthy while it is the checkout's.
    monkeypatch.setattr(doctor_module, "installed_file", lambda name: str(other))
    copy = doctor_module.gate_check()
    assert (copy.status, copy.detail) == (
        "ok", f"{other} (installed with the package)"
    )  # fmt: skip
    other.write_text(other.read_text() + "# an older gate\n")
    stale = doctor_module.gate_check()
    assert (stale.status, stale.detail) == (
        "FAIL", f"{other} is not {ROOT / '_rocm_hwq_autoset_gate.py'} (changed"
        " since the install): start-up runs the old one; reinstall: REINSTALL",
    )  # fmt: skip


def test_the_installed_files_are_the_distributions(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Read from its RECORD, as pip lists them."""
    from importlib import metadata

    class Dist:
        files = (metadata.PackagePath("x/y.py"),
                 metadata.PackagePath("_rocm_hwq_autoset_gate.py"))  # fmt: skip

        def locate_file(self, path: object) -> Path:
            return tmp_path / str(path)

    monkeypatch.setattr(metadata, "distribution", lambda name: Dist())
    assert _doctor.installed_file("_rocm_hwq_autoset_gate.py") == str(
        tmp_path / "_rocm_hwq_autoset_gate.py"
    )
    assert _doctor.installed_file("rocm_hwq_autoset.pth") is None

    def none(name: str) -> object:
        raise metadata.PackageNotFoundError(name)

    monkeypatch.setattr(metadata, "distribution", none)
    assert _doctor.installed_file("rocm_hwq_autoset.pth") is None


@pytest.mark.parametrize(
    ("name", "meant"),
    [("rocm_hwq_autoset", "ROCM_HWQ_AUTOSET"), ("ROCM_HWQ_AUTSET", "ROCM_HWQ_AUTOSET"),
     ("GPU_MAX_HW_QUEUE", "GPU_MAX_HW_QUEUES")],
)  # fmt: skip
def test_a_misspelt_variable_is_named_by_doctor_and_explain(
    name: str, meant: str, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    """Issue #37: ``ROCM_HWQ_AUTSET=0`` opts nothing out, and neither command
    said a word: doctor fails on it, explain warns."""
    monkeypatch.setenv(name, "0")
    said = f"'0' is set, but nothing reads it: did you mean {meant}?"
    code, flat = doctor(capsys)
    assert code == 1 and f"FAIL {name} {said}" in flat
    assert main(["explain", "--json"]) == 0
    assert capsys.readouterr().err == f"rocm-hwq-autoset: warning: {name}={said}\n"


def test_the_python_that_will_train_is_checked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue #37: an activated venv without the package, ``rocm-hwq-autoset``
    from another venv on ``PATH``: was "healthy", for the other venv, while the
    ``python`` that trains (the first on ``PATH``) had no hook."""
    import subprocess

    code, flat = doctor(capsys)
    assert code == 0 and "ok python on PATH " in flat and ": this interpreter" in flat
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(tmp_path / "v")],
                   check=True, timeout=60)  # fmt: skip
    other = tmp_path / "v" / "bin" / "python"
    monkeypatch.setenv("PATH", f"{other.parent}{os.pathsep}{os.environ['PATH']}")
    code, flat = doctor(capsys)
    version = sys.version.split()[0]
    assert (
        code == 1
        and (
            f"FAIL python on PATH {other} ({version}) is another Python, without"
            " rocm_hwq_autoset.pth: the training it runs (python -m torchtitan.train,"
            f" torchrun) has no hook; install it there: {other} -m pip install"
            " rocm-hwq-autoset"
        )
        in flat
    ), flat


def test_what_torchtitan_refuses_beside_the_fields_fails_the_launch(
    rocm_job: str,
) -> None:
    """Issue #37: an unknown flag and an unknown key gave a healthy launch. The
    value is still the fields' (torchtitan's releases differ in their fields);
    each input's unknown names fail a row."""
    args = ["--job.config_file", rocm_job, "--parallelism.tp2", "2", "--job.bar=1"]
    checks = launch_checks(args, on_rocm=True)
    rows = [(row.status, row.detail.partition(": ")[0]) for row in checks
            if row.topic == "for that launch"]  # fmt: skip
    assert rows == [
        ("ok", "would set GPU_MAX_HW_QUEUES=4"),
        ("FAIL", "--parallelism.tp2, --job.bar"),
    ]

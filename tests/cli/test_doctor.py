"""``doctor`` in this process: what it says of the environment, of the hook at
start-up and of a launch. Installs in real venvs: tests/e2e/test_doctor.py."""

from __future__ import annotations

import argparse
import io
import os
import shlex
import shutil
import site
import sys
from pathlib import Path
from typing import Any

import pytest

from rocm_hwq_autoset import _hook, recommend
from rocm_hwq_autoset._argv import Launch
from rocm_hwq_autoset._cli import doctor as _doctor
from rocm_hwq_autoset._cli import main
from rocm_hwq_autoset._cli._common import AS_IF_ON_ROCM
from rocm_hwq_autoset._cli.doctor import (
    Row,
    cache_checks,
    environment_checks,
    launch_checks,
    start_up_check,
    startup_file_checks,
)
from rocm_hwq_autoset._cli.term import unbroken
from rocm_hwq_autoset._decision import SET, SKIP, WARNING, Outcome
from rocm_hwq_autoset._environ import QUEUES, QueuesSetting
from rocm_hwq_autoset._evaluation import MAX_UNCHECKED
from rocm_hwq_autoset._evaluation.cache import Cache
from rocm_hwq_autoset._left_out import LEFT_OUT, verify_command
from rocm_hwq_autoset._rocm import detect

from ..data import write_job
from ..helpers import (
    CUDA_VERSION_PY,
    GOLDEN,
    ROCM_VERSION_PY,
    check_golden,
    fake_torch,
)

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


def flat_row(check: Row) -> str:
    """A row as doctor's report says it, flattened: status, topic, detail."""
    return " ".join(f"{check.status} {check.topic} {check.detail}".split())


def launch_rows(*training: str) -> list[Row]:
    """The rows of a launch, as doctor checks it here."""
    topics = ("for that launch", "not in Q")
    return [c for c in environment_checks(training) if c.topic in topics]


def test_a_launch(rocm_job: str, capsys: pytest.CaptureFixture[str]) -> None:
    args = ["--job.config_file", rocm_job, "--compile.enable_fsdp_ag_rs_overlap"]
    _, flat = doctor(capsys, "--", *args)
    assert "ok ROCm " in flat and "hip = '6.2.41133-dd7f95766'" in flat
    queues = Row("ok", QUEUES, QueuesSetting(os.environ).describe())
    assert QueuesSetting(os.environ).text is None and flat_row(queues) in flat
    [launch] = launch_rows(*args)
    assert (launch.status, launch.detail) == ("ok", f"would set {QUEUES}=8")
    assert flat.endswith(f"{flat_row(launch)} healthy")
    assert AS_IF_ON_ROCM not in flat  # it is ROCm


def test_a_launch_names_each_stream_q_leaves_out(
    rocm_job: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """One note a stream the model leaves out, after the launch's row, with
    the verify command that settles it; healthy all the same."""
    args = ["--job.config_file", rocm_job, "--parallelism.tensor_parallel_degree",
            "2", "--compile.enable_async_tensor_parallel"]  # fmt: skip
    code, flat = doctor(capsys, "--", *args)
    assert code == 0
    launch, note = launch_rows(*args)
    assert (launch.status, launch.detail) == ("ok", f"would set {QUEUES}=8")
    assert (note.status, note.topic) == ("note", "not in Q")
    assert note.detail.startswith(f"symm_mem: {LEFT_OUT['symm_mem'][0]}; ")
    assert note.detail.endswith(f": {unbroken(verify_command('symm_mem', 8))}")
    assert flat.endswith(f"{flat_row(launch)} {flat_row(note)} healthy")
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
    assert flat.endswith(f"({AS_IF_ON_ROCM})")
    write_job(tmp_path, JOB)
    code, flat = doctor(capsys, "--", "--job.config_file", JOB)
    [launch] = launch_rows("--job.config_file", JOB)
    assert code == 0 and launch.status == "ok"
    assert launch.detail == f"would set {QUEUES}=4 ({AS_IF_ON_ROCM})"
    assert f"{flat_row(launch)} healthy" in flat
    # Opted out, the hook does nothing on ROCm either: said as it is.
    monkeypatch.setenv("ROCM_HWQ_AUTOSET", "0")
    code, flat = doctor(capsys, "--", "--job.config_file", "bom.toml")
    [launch] = launch_rows("--job.config_file", "bom.toml")
    assert code == 0 and launch.status == "note"
    assert launch.detail.startswith("ROCM_HWQ_AUTOSET=0: ")
    assert flat_row(launch) in flat and AS_IF_ON_ROCM not in flat


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
    [launch] = launch_rows(*args)
    assert launch.status == "FAIL" and flat_row(launch).startswith(said)
    assert flat.endswith(f"unhealthy: {launch.topic}: {launch.detail}")


def test_an_explicit_value_hip_cannot_use_is_unhealthy(
    rocm_job: str, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    monkeypatch.setenv("GPU_MAX_HW_QUEUES", "eight")
    code, flat = doctor(capsys, "--", "--job.config_file", rocm_job)
    setting = QueuesSetting(os.environ)
    assert code == 1 and setting.problem is not None
    assert flat_row(Row("FAIL", QUEUES, setting.describe())) in flat
    [launch] = launch_rows("--job.config_file", rocm_job)
    assert launch.status == "FAIL"
    assert launch.detail.startswith(f"warning: {setting.problem}; ")
    assert flat_row(launch) in flat


def test_without_a_launch_argument_the_hook_stays_out(
    rocm_job: str, capsys: pytest.CaptureFixture[str]
) -> None:
    _, flat = doctor(capsys, "--", "--training.steps", "10")
    [launch] = launch_rows("--training.steps", "10")
    assert (launch.status, launch.topic) == ("note", "for that launch")
    assert {"--job.config_file,", "--module"} <= set(launch.detail.split())
    assert flat_row(launch) in flat


def test_a_world_size_it_cannot_read_is_unhealthy(
    rocm_job: str, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    bad = "z" * 12  # the summary line: 80 characters, one too many
    monkeypatch.setenv("WORLD_SIZE", bad)
    code, flat = doctor(capsys, "--", "--job.config_file", rocm_job)
    [launch] = launch_rows("--job.config_file", rocm_job)
    assert code == 1 and launch.status == "FAIL"
    assert launch.detail.startswith(f"WORLD_SIZE: '{bad}' ")
    assert flat_row(launch) in flat
    out = io.StringIO()
    training = argparse.Namespace(training=["--job.config_file", rocm_job])
    assert _doctor.run(training, out) == 1
    summary = out.getvalue().split("\n\n")[-1]
    lines = summary.splitlines()
    assert len(lines) == 2 and max(map(len, lines)) <= 79
    assert len(f"{lines[0]} {lines[1].split()[0]}") > 79  # no room for one more
    assert " ".join(summary.split()) == f"unhealthy: {launch.topic}: {launch.detail}"


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
    assert first == ("note", "not ROCm", detect(sys.path, os.environ)[1])
    assert first[2].startswith(f"{tmp_path}/cuda/torch/version.py: ")


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
    no_home(monkeypatch)
    [(status, topic, detail)] = rows(cache_checks())
    assert (status, topic) == ("note", "cache") and "--module" in detail.split()
    assert "ROCM_HWQ_AUTOSET_CACHE_DIR:" in detail.split()


def no_home(monkeypatch: pytest.MonkeyPatch) -> None:
    """No home directory and no variable naming the cache's folder."""
    import pwd

    def unknown(uid: int) -> object:
        raise KeyError(uid)

    monkeypatch.setattr(pwd, "getpwuid", unknown)
    for name in ("ROCM_HWQ_AUTOSET_CACHE_DIR", "XDG_CACHE_HOME", "HOME"):
        monkeypatch.delenv(name, raising=False)


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
    [(status, topic, detail)] = rows(cache_checks())
    assert (status, topic) == ("FAIL", "cache") and detail.startswith(f"{cache}: ")
    assert detail.endswith("; not used")
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
    [(status, topic, detail)] = rows(cache_checks())
    assert (status, topic) == ("FAIL", "cache")
    assert detail.startswith(f"{cache}: read-only, ") and " 1 entry, " in detail
    assert f" {MAX_UNCHECKED} times " in detail and "--module" in detail.split()
    assert asked == [(str(cache), os.W_OK | os.X_OK)]


def statuses(found: list[tuple[str, str, str]]) -> list[tuple[str, str]]:
    """Each row's status and topic."""
    return [(status, topic) for status, topic, _ in found]


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
    found = layout({"site-b": [PTH, START], "user": [START]})
    assert statuses(found) == [("ok", PTH), ("ok", "before it"), ("ok", START)]
    assert found[0][2] == f"T/site-b/{PTH}" and "T/" not in found[1][2]
    assert found[2][2].startswith("present") and "3.15+" in found[2][2]


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
    found = layout(files, texts=texts)[:2]
    assert statuses(found) == [("ok", PTH), ("note", "before it")]
    assert found[0][2] == f"T/site-b/{PTH}" and found[1][2].startswith("2 ")
    assert found[1][2].endswith(
        ": T/site-a/aa_probe.pth, T/site-b/distutils-precedence.pth"
    )


ENTRY = "_rocm_hwq_autoset_gate:start\n"


def test_start_up_files_on_python_3_15(layout: Any) -> None:
    found = layout({"site-a": [PTH, START]}, pep_829=True, texts={START: ENTRY})
    assert statuses(found) == [("ok", PTH), ("ok", "before it"), ("ok", START)]
    assert found[0][2] == f"T/site-a/{PTH}" and "T/" not in found[1][2]
    assert found[2][2].startswith("present") and "3.15+" not in found[2][2]


def test_an_empty_start_file_turns_the_hook_off_on_python_3_15(layout: Any) -> None:
    """PEP 829: a ``.start`` beside the ``.pth`` of its name turns that
    file's import lines off, even when it names no entry point."""
    found = layout({"site-a": [PTH, START]}, pep_829=True)[1:]
    assert statuses(found) == [("note", "before it"), ("FAIL", START)]
    assert found[0][2].endswith(f"(see {START})")
    assert found[1][2].startswith(f"T/site-a/{START} ")
    assert found[1][2].endswith(": REINSTALL") and PTH in found[1][2].split()


#: Site folders whose start-up files run in another order on 3.15 (PEP 829).
def test_the_distributions_pth_is_checked_against_the_checkouts(
    layout: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An editable install's ``.pth`` in site-packages, which ``site`` runs,
    is compared with the checkout's (``stale_copy``): its answer is a
    failing row. One the distribution put elsewhere is not the one run."""
    monkeypatch.setattr(
        _doctor, "stale_copy", lambda installed, name: f"{installed} {name}"
    )
    for folder, stale in (("site-b", [("FAIL", PTH, f"T/site-b/{PTH} {PTH}")]),
                          ("site-a", [])):  # fmt: skip
        monkeypatch.setattr(_doctor, "installed_file",
                            {PTH: str(tmp_path / folder / PTH)}.get)  # fmt: skip
        assert layout({"site-b": [PTH]})[2:] == stale, folder


def test_one_file_before_the_hook_is_counted_as_one(layout: Any) -> None:
    found = layout({"site-a": ["aa.pth", PTH]}, texts={"aa.pth": "import x\n"})
    assert statuses(found)[1] == ("note", "before it")
    words = found[1][2].split()
    assert words[:3] == ["1", "start-up", "file"] and words[8] == "runs"  # code


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
        (False, ["site-a/aa_probe.pth", "site-a/bb.pth"]),
        (True, ["site-a/aa_probe.pth", "site-a/zz_after.pth", "user/u.pth",
                "site-a/aa_first.start"]),
    ],
)  # fmt: skip
def test_what_runs_before_the_hook_follows_the_pythons_order(
    layout: Any, pep_829: bool, early: list[str]
) -> None:
    """3.14 and older: folder by folder, by name, up to our .pth. 3.15+: every
    import line first (bb.pth's turned off by bb.start, empty as it is), then
    the entry points found before ours."""
    found = layout(ORDERED, pep_829=pep_829, texts=ORDERED_TEXTS)
    assert statuses(found)[1] == ("note", "before it")
    assert found[1][2].startswith(f"{len(early)} ")
    assert found[1][2].endswith(": " + ", ".join(f"T/{path}" for path in early))
    assert ("3.15+" in found[1][2]) == pep_829


def test_a_start_file_missing_on_python_3_15(layout: Any) -> None:
    found = layout({"site-a": [PTH], "user": [START]}, user_site=False, pep_829=True)
    assert statuses(found) == [("ok", PTH), ("ok", "before it"), ("FAIL", START)]
    assert found[0][2] == f"T/site-a/{PTH}"
    assert found[2][2].startswith("missing") and "3.15+" in found[2][2]


def test_start_up_files_in_the_user_site(layout: Any) -> None:
    found = layout({"user": [PTH, START]})
    assert statuses(found) == [("ok", PTH), ("ok", "before it"), ("ok", START)]
    assert found[0][2] == f"T/user/{PTH}"
    [(status, topic, detail)] = layout({}, user_site=False)
    assert (status, topic) == ("FAIL", PTH) and detail.startswith(f"T/user/{PTH} ")
    assert "(-s," in detail.split() and "PYTHONNOUSERSITE)" in detail.split()


def test_start_up_files_outside_the_site_directories(layout: Any) -> None:
    [(status, topic, detail)] = layout({"target": [PTH, START]},
                                       on_path=("user", "target"))  # fmt: skip
    assert (status, topic) == ("FAIL", PTH) and detail.startswith(f"T/target/{PTH}: ")
    assert "--target?);" in detail.split()
    [(status, topic, detail)] = layout({}, on_path=("user", "site-a"))
    assert (status, topic) == ("FAIL", PTH) and detail.endswith(": REINSTALL")
    assert "T/" not in detail


def test_a_pth_removed_from_an_installed_distribution_names_the_command(
    layout: Any, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Was: "not installed", while ``pip list`` shows the package."""
    where = str(tmp_path / "site-a" / PTH)
    monkeypatch.setattr(_doctor, "installed_file",
                        lambda name: where if name == PTH else None)  # fmt: skip
    found = layout({"site-a": [START]})
    assert statuses(found) == [("FAIL", PTH), ("ok", START)]
    assert found[0][2].startswith(f"T/site-a/{PTH} is missing, ")
    assert found[0][2].endswith(": REINSTALL") and "(pip list" in found[0][2]


def test_without_site_nothing_is_looked_for(
    layout: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sys, "flags", Flags(no_site=1))
    [(status, topic, detail)] = layout({"site-a": [PTH, START]})
    assert (status, topic) == ("FAIL", "site") and detail.startswith("python -S: ")


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
    [failed] = [c for c in environment_checks([]) if c.status == "FAIL"]
    assert failed.topic == "ROCM_HWQ_AUTOSET_LOG"
    assert failed.detail.startswith("ROCM_HWQ_AUTOSET_LOG='loud' ")
    assert " ".join(summary.split()) == f"unhealthy: {failed.topic}: {failed.detail}"
    assert summary.count("\n") == 2 and max(map(len, summary.splitlines())) <= 79


def test_the_gate_is_checked_where_site_runs(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The gate's row is in the report, but not under ``python -S`` (no
    ``.pth`` runs there: the site row says so)."""
    monkeypatch.setattr(_doctor, "gate_check", lambda: Row("ok", "GATE-ROW", "x"))
    for no_site, shown in ((0, True), (1, False)):
        monkeypatch.setattr(sys, "flags", Flags(no_site=no_site))
        out = io.StringIO()
        _doctor.run(argparse.Namespace(training=[]), out)
        assert ("GATE-ROW" in out.getvalue().split()) is shown, no_site


def test_a_start_up_file_without_a_checkout_copy_is_not_stale(tmp_path: Path) -> None:
    """Nothing of that name beside the package (not an editable install's
    checkout): nothing to compare, nothing stale."""
    installed = tmp_path / "x.pth"
    installed.write_text("import x\n")
    assert _doctor.stale_copy(str(installed), "no-such-start-up-file.pth") is None


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
    [(status, topic, detail)] = rows(cache_checks())
    assert status == "FAIL" and detail.startswith(f"{long}: ")
    lines = summary.splitlines()
    assert lines[:2] == [f"unhealthy: {topic}:", f"{long}:"]  # the path whole
    assert " ".join(lines[2:]) == detail[len(f"{long}: ") :]


def test_the_gate_module_is_checked(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The .pth line imports the gate by name: missing, or another one first
    on the path, the hook never runs and nothing says so but doctor."""
    ours = _doctor.gate_check()
    assert (ours.status, ours.topic) == ("ok", "_rocm_hwq_autoset_gate")
    assert ours.detail.endswith("_rocm_hwq_autoset_gate.py")
    missing, shadowed, copy, stale = gate_rows(monkeypatch, tmp_path)
    other = tmp_path / "_rocm_hwq_autoset_gate.py"
    assert missing.status == "FAIL" and missing.detail.startswith("missing: ")
    assert missing.detail.endswith(": REINSTALL")
    assert shadowed.status == "FAIL" and shadowed.detail.startswith(f"{other} ")
    assert "sys.path," in shadowed.detail.split()
    # An editable install: the distribution's own copy in site-packages, the
    # package in the checkout. Healthy while it is the checkout's.
    assert copy.status == "ok" and copy.detail.startswith(f"{other} (installed ")
    gate = ROOT / "_rocm_hwq_autoset_gate.py"
    assert stale.status == "FAIL" and stale.detail.startswith(f"{other} is not {gate} ")
    assert stale.detail.endswith(": REINSTALL")
    assert all(row.topic == ours.topic for row in (missing, shadowed, copy, stale))


def gate_rows(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> list[Row]:
    """The gate's row where it is missing, where another is first on the path,
    where that is the distribution's copy, and where that copy is stale."""
    import importlib.machinery
    import importlib.util

    found = []
    with monkeypatch.context() as patch:
        patch.setattr(_doctor, "reinstall_command", lambda: "REINSTALL")
        patch.setattr(importlib.util, "find_spec", lambda name: None)
        found.append(_doctor.gate_check())
        other = tmp_path / "_rocm_hwq_autoset_gate.py"
        other.write_bytes((ROOT / "_rocm_hwq_autoset_gate.py").read_bytes())
        patch.setattr(
            importlib.util, "find_spec",
            lambda name: importlib.machinery.ModuleSpec(name, None, origin=str(other)),
        )  # fmt: skip
        patch.setattr(_doctor, "installed_file", lambda name: None)
        found.append(_doctor.gate_check())
        patch.setattr(_doctor, "installed_file",
                      lambda name: {other.name: str(other)}.get(name))  # fmt: skip
        found.append(_doctor.gate_check())
        other.write_text(other.read_text() + "# an older gate\n")
        found.append(_doctor.gate_check())
    return found


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


def test_a_misspelt_variables_value_may_hold_an_equals_sign(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The row's topic is the variable, its detail from the value on."""
    monkeypatch.setenv("ROCM_HWQ_AUTSET", "a=b")
    [slip] = [c for c in environment_checks([]) if c.topic.startswith("ROCM_HWQ_AUTS")]
    assert (slip.status, slip.topic) == ("FAIL", "ROCM_HWQ_AUTSET")
    assert slip.detail.startswith("'a=b' ")


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
    ours = _doctor.training_python_check()
    assert code == 0 and (ours.status, ours.topic) == ("ok", "python on PATH")
    assert ours.detail.endswith(": this interpreter") and flat_row(ours) in flat
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(tmp_path / "v")],
                   check=True, timeout=60)  # fmt: skip
    other = tmp_path / "v" / "bin" / "python"
    monkeypatch.setenv("PATH", f"{other.parent}{os.pathsep}{os.environ['PATH']}")
    code, flat = doctor(capsys)
    theirs = _doctor.training_python_check()
    version = sys.version.split()[0]
    assert code == 1 and theirs.status == "FAIL" and flat_row(theirs) in flat, flat
    assert theirs.detail.startswith(f"{other} ({version}) ")
    install = [str(other), "-m", "pip", "install", "rocm-hwq-autoset"]
    assert theirs.detail.split(": ")[-1].split() == install
    said = f"{theirs.status} | {theirs.topic} | {theirs.detail}\n"
    said = said.replace(str(other.parent), "V").replace(version, "X.Y.Z")
    check_golden(GOLDEN / "cli" / "doctor-python-on-path.txt", said)
    assert PTH + ":" in theirs.detail.split()


def test_without_a_python_on_path_the_training_python_is_a_note(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No ``python`` on ``PATH``: nothing to ask, a note (not a failure)."""
    monkeypatch.setenv("PATH", str(tmp_path))
    found = _doctor.training_python_check()
    assert (found.status, found.topic) == ("note", "python on PATH")
    assert found.detail.startswith("none:")


#: Another Python's answer to doctor's probe: its prefix (with a blank) and
#: version; whether its site holds the ``.pth`` follows.
ANSWER = "printf '/opt/a b\\n3.99.0\\n"
SLEEP = shlex.quote(str(shutil.which("sleep")))


@pytest.mark.parametrize(
    ("script", "status", "shown", "wait"),
    [
        # another path to this interpreter: its prefix is this one's
        (f'exec {shlex.quote(sys.executable)} "$@"', "ok", "this interpreter", 30),
        # another Python (a prefix with a blank), with the .pth, and without
        (f"{ANSWER}True\\n'", "ok", "(3.99.0)", 30),
        (f"{ANSWER}False\\n'", "FAIL", "(3.99.0)", 30),
        # no answer, and one after the wait
        ("exit 0", "FAIL", "asked", 30),
        (f"{SLEEP} 3; {ANSWER}True\\n'", "FAIL", "asked", 0.5),
    ],
)  # fmt: skip
def test_the_python_on_path_is_asked_for_its_prefix_version_and_hook(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, script: str, status: str,
    shown: str, wait: float,
) -> None:  # fmt: skip
    """The first ``python`` on ``PATH``, in a folder of its own, answers the
    probe (or does not, within ``wait`` seconds): its status, and the words
    of its detail that tell which answer it was."""
    python = tmp_path / "python"
    python.write_text(f"#!/bin/sh\n{script}\n")
    python.chmod(0o755)
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setattr(_doctor, "TRAINING_PYTHON_TIMEOUT", wait)
    found = _doctor.training_python_check()
    assert (found.status, found.topic) == (status, "python on PATH")
    assert found.detail.startswith(f"{python}") and shown in found.detail


def test_the_python_version_doctor_checks_is_the_running_ones() -> None:
    assert _doctor.python_version() == tuple(sys.version_info[:2])


def test_the_reinstall_command_is_the_distributions_else_a_plain_one(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The command of ``_rocm_hwq_autoset_reinstall`` (its one home) where
    it imports; else pip's for the index, with the editable install's in
    brackets."""
    from _rocm_hwq_autoset_reinstall import reinstall

    assert _doctor.reinstall_command() == reinstall()[1]
    monkeypatch.setitem(sys.modules, "_rocm_hwq_autoset_reinstall", None)
    command, _, editable = _doctor.reinstall_command().partition(" (")
    assert command.split() == [
        "pip", "install", "--force-reinstall", "--no-deps", "rocm-hwq-autoset"
    ]  # fmt: skip
    assert editable.endswith(")") and {"-e", "CHECKOUT"} <= set(editable.split())


def test_the_wording_of_doctor(
    rocm_job: str, layout: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The rows ``doctor`` writes for the cases the tests above judge by their
    statuses, topics and the inputs they name: the wording pinned here, once
    (``UPDATE_GOLDEN=1``)."""
    from rocm_hwq_autoset._cli import _common

    text: list[str] = []

    def case(title: str, found: list[Row]) -> None:
        lines = [f"{c.status} | {c.topic} | {c.detail}" for c in found]
        said = "\n".join(lines).replace("\xa0", " ").replace(str(tmp_path), "T")
        text.append(f"== {title}\n{said.replace(str(ROOT), 'ROOT')}\n\n")

    job = ["--job.config_file", rocm_job]
    launches = {
        "a launch": [*job, "--compile.enable_fsdp_ag_rs_overlap"],
        "a launch with a stream Q leaves out":
            [*job, "--parallelism.tensor_parallel_degree", "2",
             "--compile.enable_async_tensor_parallel"],
        "no such config": ["--job.config_file", "/nonexistent.toml"],
        "a flag without its value": [*job, "--parallelism.expert_parallel_degree"],
        "a --module launch without --config": ["--module", "graph_trainer.llama3"],
        "no launch argument": ["--training.steps", "10"],
    }  # fmt: skip
    for title, training in launches.items():
        case(title, launch_rows(*training))
    for title, env in [("a bad WORLD_SIZE", {"WORLD_SIZE": "z" * 12}),
                       ("a value HIP cannot use", {QUEUES: "eight"}),
                       ("opted out", {"ROCM_HWQ_AUTOSET": "0"})]:  # fmt: skip
        with monkeypatch.context() as patch:
            for name, value in env.items():
                patch.setenv(name, value)
            case(title, [c for c in environment_checks(job)
                         if c.topic in (QUEUES, "for that launch")])  # fmt: skip
    with monkeypatch.context() as patch:
        patch.setattr(_common, "_verdict", [(False, "EVIDENCE")])
        case("off ROCm", launch_rows(*job))
    with monkeypatch.context() as patch:
        no_home(patch)
        case("no home", cache_checks())
    cache = tmp_path / "cache"
    cache.mkdir(mode=0o777)
    cache.chmod(0o777)
    case("a cache others can write", cache_checks())
    cache.chmod(0o700)
    with monkeypatch.context() as patch:
        patch.setattr(_doctor.os, "access", lambda path, mode: False)
        case("a read-only cache", cache_checks())
    layouts: list[tuple[str, dict[str, list[str]], dict[str, Any]]] = [
        ("start-up files", {"site-b": [PTH, START], "user": [START]}, {}),
        ("start-up files on 3.15", {"site-a": [PTH, START]},
         {"pep_829": True, "texts": {START: ENTRY}}),
        ("an empty .start on 3.15", {"site-a": [PTH, START]}, {"pep_829": True}),
        ("what runs first", ORDERED, {"texts": ORDERED_TEXTS}),
        ("what runs first on 3.15", ORDERED, {"texts": ORDERED_TEXTS, "pep_829": True}),
        ("a .start missing on 3.15", {"site-a": [PTH], "user": [START]},
         {"user_site": False, "pep_829": True}),
        ("the user site off", {"user": [PTH]}, {"user_site": False}),
        ("a folder on sys.path, no site folder", {"target": [PTH, START]},
         {"on_path": ("user", "target")}),
        ("not installed", {}, {"on_path": ("user", "site-a")}),
    ]  # fmt: skip
    for title, files, options in layouts:
        for folder in ("site-a", "site-b", "user", "target"):
            for made in (tmp_path / folder).iterdir():
                made.unlink()
        case(title, [Row(*found) for found in layout(files, **options)])
    with monkeypatch.context() as patch:
        where = str(tmp_path / "site-a" / PTH)
        patch.setattr(_doctor, "installed_file",
                      lambda name: where if name == PTH else None)  # fmt: skip
        case("a .pth removed", [Row(*found) for found in layout({})])
    with monkeypatch.context() as patch:
        patch.setattr(sys, "flags", Flags(no_site=1))
        case("python -S", [Row(*found) for found in layout({})])
    case("the gate: missing, shadowed, a copy, stale", gate_rows(monkeypatch, tmp_path))
    check_golden(GOLDEN / "cli" / "doctor.txt", "".join(text))


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

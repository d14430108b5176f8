"""The start-up hook (``_hook``): it runs the decision once per process, applies
it, and says it in one line, once per node, whatever stderr is; on a plain dict
environment and, ``forked``, in this process as the ``.pth`` line starts it."""

from __future__ import annotations

import io
import os
import sys
from pathlib import Path
from typing import Any

import pytest

import _rocm_hwq_autoset_cmdline
import _rocm_hwq_autoset_gate as gate
from rocm_hwq_autoset import (
    ConfigError,
    _decision,
    _early,
    _environ,
    _hook,
    _rocm,
    recommend,
)
from rocm_hwq_autoset._argv import Launch
from rocm_hwq_autoset._decision import Outcome
from rocm_hwq_autoset._hook import write_line
from rocm_hwq_autoset._rocm import detect

from ..helpers import (
    GOLDEN,
    LINE,
    MODULE_ARGS,
    UNSET_TAIL,
    check_golden,
    decide_module,
    hook,
    no_read,
    run,
    said,
    set_line,
    unset_line,
)

#: Every test here is known fast (the ini's 600 s is for the slow ones).
pytestmark = pytest.mark.timeout(60)


def _detect(path: list[str]) -> tuple[bool, str]:
    return detect(path, {})


# Once per node: a value, and a warning alike.


@pytest.mark.parametrize(
    ("env", "printed"),
    [
        ({}, True),
        ({"LOCAL_RANK": "0"}, True),
        ({"LOCAL_RANK": "3"}, False),
        ({"LOCAL_RANK": "3", "ROCM_HWQ_AUTOSET_LOG": "verbose"}, True),
        ({"ROCM_HWQ_AUTOSET_LOG": "quiet"}, False),
        # Ranks srun or mpirun started (no torchrun, so no LOCAL_RANK).
        ({"SLURM_LOCALID": "0", "SLURM_PROCID": "4"}, True),
        ({"SLURM_LOCALID": "3", "SLURM_PROCID": "7"}, False),
        ({"OMPI_COMM_WORLD_LOCAL_RANK": "1"}, False),
        ({"MPI_LOCALRANKID": "2", "ROCM_HWQ_AUTOSET_LOG": "verbose"}, True),
    ],
)
def test_once_per_node(
    env: dict[str, str], printed: bool, job: str, rocm_path: list[str],
    capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    env = dict(env)  # the hook sets the value in it: not in the shared case
    err = run(env, ["--job.config_file", job], rocm_path, capsys)
    assert (err == LINE) is printed
    assert env["GPU_MAX_HW_QUEUES"] == "8"


def test_control_characters_and_length_are_tamed(
    rocm_path: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    err = run({}, ["--job.config_file", "a\nb\x1b[31m" + "x" * 1000], rocm_path, capsys)
    assert err.count("\n") == 1 and "\x1b" not in err
    assert len(err) == _decision.MAX_LINE + 1  # cut from the middle of the path
    level, message = said(err)
    assert level == "warning" and message.endswith(f"; {UNSET_TAIL}")
    assert message.startswith("a\\nb\\x1b[31mxxx")  # escaped, the path's start kept


@pytest.mark.forked
def test_run_is_once_per_process_and_never_raises(
    job: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    os.environ.pop("GPU_MAX_HW_QUEUES", None)
    os.environ.pop("LOCAL_RANK", None)
    os.environ["ROCM_HWQ_AUTOSET"] = "force"  # no fake torch in pytest's own path
    sys.argv[:] = ["prog", "--job.config_file", job]
    decisions = []
    real = _decision.decide
    monkeypatch.setattr(
        _hook, "decide", lambda *a, **k: decisions.append(1) or real(*a, **k)
    )
    _hook.run()
    _hook.run()  # the same .pth seen through two site directories
    assert os.environ["GPU_MAX_HW_QUEUES"] == "8"
    assert capsys.readouterr().err == LINE
    assert decisions == [1]


@pytest.mark.forked
def test_an_internal_error_is_one_warning(
    job: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def boom(*args: object, **kwargs: object) -> None:
        raise RuntimeError("boom")

    monkeypatch.setattr(_hook, "decide", boom)
    monkeypatch.delenv("LOCAL_RANK", raising=False)
    _hook.run()
    level, message = said(capsys.readouterr().err)
    assert level == "warning"
    assert message.startswith(_decision.internal_error(RuntimeError("boom")) + "; ")
    assert "GPU_MAX_HW_QUEUES" not in os.environ


@pytest.mark.forked
@pytest.mark.parametrize("stderr", ["missing", "closed"])
def test_missing_or_broken_stderr_still_sets_the_value(
    stderr: str, job: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The line cannot be written; the value is set all the same, no exception."""
    if stderr == "missing":
        monkeypatch.setattr(sys, "stderr", None)
    else:
        closed = open(os.devnull, "w")  # noqa: SIM115
        closed.close()
        monkeypatch.setattr(sys, "stderr", closed)
    monkeypatch.setattr(sys, "argv", ["prog", "--job.config_file", job])
    monkeypatch.setenv("ROCM_HWQ_AUTOSET", "force")
    monkeypatch.delenv("GPU_MAX_HW_QUEUES", raising=False)
    monkeypatch.delenv("LOCAL_RANK", raising=False)
    gate.start()  # the gate, as the .pth line calls it: it must not raise
    assert os.environ["GPU_MAX_HW_QUEUES"] == "8"
    _hook.say(Outcome("set", "hello"), {})  # nor the line on its own


@pytest.mark.forked
def test_a_log_level_it_cannot_read_warns_and_uses_the_default(
    job: str, rocm_path: list[str], capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    monkeypatch.setenv("ROCM_HWQ_AUTOSET_LOG", "bogus")
    monkeypatch.delenv("LOCAL_RANK", raising=False)
    monkeypatch.setattr(sys, "argv", ["prog", "--job.config_file", job])
    monkeypatch.setattr(sys, "path", [*rocm_path, *sys.path])
    for key in ("GPU_MAX_HW_QUEUES", "ROCM_HWQ_AUTOSET_ORIGIN", "ROCM_HWQ_AUTOSET"):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setattr(_hook, "decided", None)
    _hook.run()
    warned, *rest = capsys.readouterr().err.splitlines(keepends=True)
    problem = _environ.log_level({"ROCM_HWQ_AUTOSET_LOG": "bogus"})[1]
    assert said(warned) == ("warning", problem) and rest == [LINE]


def test_the_packages_own_commands_are_left_alone(rocm_path: list[str]) -> None:
    for argv, orig in (
        (["/venv/bin/rocm-hwq-autoset", "explain", "--job.config_file", "x"], []),
        (["-m", "explain", "--job.config_file", "x"],
         ["python", "-m", "rocm_hwq_autoset", "explain", "--job.config_file", "x"]),
    ):  # fmt: skip
        outcome = _hook.outcome_for(
            {"ROCM_HWQ_AUTOSET": "bogus"}, argv, orig,
            rocm=lambda: _detect(rocm_path), read_toml=no_read,
        )  # fmt: skip
        assert isinstance(outcome, Outcome) and outcome.level == "skip"
        assert outcome.message == "rocm-hwq-autoset's own command"


@pytest.mark.parametrize(
    ("text", "tail", "limit", "line"),
    [
        ("x" * 10, "", 10, "x" * 10),  # exactly the limit: whole
        # The end keeps two thirds: a message's remedy is at its end.
        ("abcdefghijklmnopqrstuvwxyz", "", 12, "abc...uvwxyz"),
        ("abcdefghijklmnopqrstuvwxyz", "kept", 18, "abc...uvwxyz; kept"),
        ("abcdefghijklmnopqrstuvwxyz", "", 13, "abc...tuvwxyz"),
        # More, to begin at a sentence, while the start keeps a quarter.
        ("Bad value x. Set --flag to fix it.", "", 30,
         "Bad va...Set --flag to fix it."),
        ("abcdef", "", 3, "..."),
        ("abcdef", "", 2, "..."),
        ("a\nb\x1b[31mc", "d\te", 80, "a\\nb\\x1b[31mc; d\\te"),  # was a?b?
    ],
)  # fmt: skip
def test_a_line_is_cut_in_the_middle_of_its_cause(
    text: str, tail: str, limit: int, line: str
) -> None:
    assert _decision.fit(text, tail, limit) == line


@pytest.mark.parametrize("rank", ["", "one"])
def test_a_local_rank_torch_cannot_read_is_said(
    rank: str, job: str, rocm_path: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue #37: ``LOCAL_RANK=`` (empty) set Q and no process said a word;
    torchtitan's ``int(os.environ["LOCAL_RANK"])`` refuses it."""
    err = run({"LOCAL_RANK": rank}, ["--job.config_file", job], rocm_path, capsys)
    problem = _environ.local_rank_problem({"LOCAL_RANK": rank})
    assert problem is not None and problem.startswith(f"{rank!r} ")
    assert err == unset_line("job.config_file", ConfigError(problem, "LOCAL_RANK"))


def test_a_skip_is_said_only_in_verbose_mode(
    job: str, rocm_path: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    env = {"ROCM_HWQ_AUTOSET": "0", "ROCM_HWQ_AUTOSET_LOG": "verbose"}
    err = run(env, ["--job.config_file", job], rocm_path, capsys)
    level, message = said(err)
    assert level == "skip" and message.split()[0] == "ROCM_HWQ_AUTOSET=0"
    assert run({"ROCM_HWQ_AUTOSET": "0"}, ["--job.config_file", job], rocm_path,
               capsys) == ""  # fmt: skip


@pytest.fixture
def hook_process(
    job: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> dict[str, Any]:
    """This (forked) process as one the .pth line started the hook in: no
    torch on the path, no /opt/rocm, nothing of ours in the environment."""
    for name in ("GPU_MAX_HW_QUEUES", "ROCM_HWQ_AUTOSET_ORIGIN", "LOCAL_RANK",
                 "ROCM_HWQ_AUTOSET", "ROCM_HWQ_AUTOSET_LOG", "ROCM_PATH", "HIP_PATH",
                 "WORLD_SIZE"):  # fmt: skip
        monkeypatch.delenv(name, raising=False)
    from rocm_hwq_autoset import _rocm

    monkeypatch.setattr(_rocm, "DEFAULT_ROCM_PATH", str(tmp_path / "no-opt-rocm"))
    monkeypatch.setattr(_hook, "decided", None)
    monkeypatch.setattr(sys, "argv", ["prog", "--job.config_file", job])
    return {"job": job}


@pytest.mark.forked
@pytest.mark.parametrize(
    ("missing", "said"),
    [
        ("argv", "rocm-hwq-autoset: nothing to do: no --job.config_file and no"
                 " torchtitan --module/--config\n"),
        ("orig_argv", LINE),
    ],
)  # fmt: skip
def test_an_interpreter_without_argv_is_read_as_it_is(
    hook_process: dict[str, Any], missing: str, said: str,
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    """An embedded interpreter may have no ``sys.argv`` (no launch), Python 3.9
    no ``sys.orig_argv`` (the script and its arguments still tell)."""
    monkeypatch.setenv("ROCM_HWQ_AUTOSET", "force")
    monkeypatch.setenv("ROCM_HWQ_AUTOSET_LOG", "verbose")
    monkeypatch.delattr(sys, missing, raising=False)
    _hook.run()
    assert capsys.readouterr().err == said


@pytest.mark.forked
def test_the_hook_finds_the_hip_runtime_through_rocm_path(
    hook_process: dict[str, Any], tmp_path: Path,
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    (tmp_path / "rocm" / "lib").mkdir(parents=True)
    (tmp_path / "rocm" / "lib" / "libamdhip64.so.6").write_bytes(b"")
    monkeypatch.setenv("ROCM_PATH", str(tmp_path / "rocm"))
    _hook.run()
    assert capsys.readouterr().err == LINE
    assert os.environ["GPU_MAX_HW_QUEUES"] == "8"


@pytest.mark.forked
def test_the_hook_without_rocm_does_nothing(
    hook_process: dict[str, Any], capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    monkeypatch.setenv("ROCM_HWQ_AUTOSET_LOG", "verbose")
    _hook.run()
    err = capsys.readouterr().err
    level, message = said(err)
    assert level == "skip" and message.endswith(_rocm.detect(sys.path, os.environ)[1])
    assert "GPU_MAX_HW_QUEUES" not in os.environ
    assert _hook.decided is not None and _hook.decided.level == "skip"


@pytest.mark.forked
def test_a_call_from_inside_the_decision_returns_at_once(
    hook_process: dict[str, Any], capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    """The .pth line seen again while the hook decides (a site directory added
    meanwhile): the decision is made once."""
    monkeypatch.setenv("ROCM_HWQ_AUTOSET", "force")
    decisions = []
    real = _decision.decide

    def deciding(*args: Any, **kwargs: Any) -> Any:
        decisions.append(1)
        _hook.run()
        return real(*args, **kwargs)

    monkeypatch.setattr(_hook, "decide", deciding)
    _hook.run()
    assert decisions == [1]
    assert capsys.readouterr().err == LINE


def write_cmdline(path: Path, words: list[str]) -> str:
    """A ``/proc/self/cmdline`` of these words: each ended by a NUL."""
    path.write_bytes(b"".join(os.fsencode(w) + b"\0" for w in words))
    return str(path)


@pytest.mark.forked
@pytest.mark.parametrize("learned", ["sys.orig_argv", "/proc/self/cmdline"])
def test_python_m_torchtitan_train_starts_the_module_evaluation(
    hook_process: dict[str, Any], capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, learned: str,
) -> None:  # fmt: skip
    """``python -m torchtitan.train --module M --config C``: sys.argv[0] is
    "-m", the module is in sys.orig_argv (3.10+), or, where Python has none
    (3.9), in the process's command line; the launch goes to the evaluation."""
    from rocm_hwq_autoset import _evaluation

    monkeypatch.setenv("ROCM_HWQ_AUTOSET", "force")
    monkeypatch.setattr(sys, "argv", ["-m", *MODULE_ARGS])
    line = ["python", "-m", "torchtitan.train", *MODULE_ARGS]
    if learned == "sys.orig_argv":
        monkeypatch.setattr(sys, "orig_argv", line, raising=False)
    else:
        monkeypatch.delattr(sys, "orig_argv", raising=False)
        cmdline = write_cmdline(tmp_path / "cmdline", line)
        monkeypatch.setattr(_rocm_hwq_autoset_cmdline, "PROC_CMDLINE", cmdline)
    started: list[tuple[Any, Any]] = []
    monkeypatch.setattr(
        _evaluation, "start", lambda p, apply: started.append((p, apply))
    )
    _hook.run()
    [(pending, apply)] = started
    assert isinstance(pending, Launch) and pending is _hook.decided
    assert list(pending.args) == MODULE_ARGS and pending.in_process
    assert apply is _hook.apply
    assert capsys.readouterr().err == ""  # said when the evaluation is in


@pytest.mark.parametrize(
    "module", ["rocm_hwq_autoset.__main__", "rocm_hwq_autoset._evaluation.child"]
)
def test_the_packages_own_modules_are_left_alone(module: str) -> None:
    outcome = decide_module({}, MODULE_ARGS, module)
    assert outcome.message == "rocm-hwq-autoset's own command"


#: torchtitan 0.3.0's refusal of CUDA graphs with expert parallelism
#: (``trainer.py``, ``_validate_cuda_graphs``), as the CLI says it.
CUDA_GRAPHS_EP = (
    "--module/--config: torchtitan could not build the config (ValueError: CUDA"
    " graphs support only expert parallel token dispatcher configurations without"
    " CPU synchronization. Set HybridEP non_blocking_capacity_factor, or use"
    " MinimalAsyncEP, or set --training.disable_cuda_graphs. Unsupported token"
    " dispatcher: LocalTokenDispatcher.Config.)"
)


def test_a_long_message_keeps_its_remedy() -> None:
    """The CLI cuts an error at 240 characters (``_cli/_common.fail``): the
    remedy, in the last sentences, survives; the middle goes."""
    line = _decision.fit(CUDA_GRAPHS_EP, limit=240)
    assert len(line) == 240
    start, _, end = line.partition("...")
    assert CUDA_GRAPHS_EP.startswith(start) and len(start) >= 40  # the cause
    # The remedy: whole sentences, from the one that names the flag.
    assert CUDA_GRAPHS_EP.endswith(end) and end.startswith("Set HybridEP")
    assert "--training.disable_cuda_graphs." in end.split()


@pytest.mark.parametrize(
    ("env", "args", "said"),
    [
        ({}, ["--job.config_file", "{bad}"],
         "rocm-hwq-autoset: warning: {bad}: parallelism.tensor_parallel_degree:"
         " 'two' is not an integer; GPU_MAX_HW_QUEUES left unset\n"),
        ({"GPU_MAX_HW_QUEUES": "abc"}, ["--job.config_file", "{job}"],
         "rocm-hwq-autoset: warning: GPU_MAX_HW_QUEUES='abc': HIP reads 0, not a"
         " queue count; left as is (an explicit value always wins)\n"),
        ({"ROCM_HWQ_AUTOSET": "maybe"}, ["--job.config_file", "{job}"],
         "rocm-hwq-autoset: warning: ROCM_HWQ_AUTOSET='maybe' is not"
         " 1/on/true/yes/auto (on), 0/off/false/no (off) or force; the hook does"
         " nothing\n"),
    ],
)  # fmt: skip
@pytest.mark.parametrize("rank", [None, "0", "3"])
def test_a_warning_is_said_once_per_node(
    env: dict[str, str], args: list[str], said: str, rank: str | None, job: str,
    tmp_path: Path, rocm_path: list[str], capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    """Like a set value: the launcher (no ``LOCAL_RANK``) or local rank 0 says
    it; local rank 3 says nothing, and does the same."""
    bad = tmp_path / "bad.toml"
    bad.write_text("[parallelism]\ntensor_parallel_degree = 'two'\n")
    environ = dict(env) if rank is None else dict(env, LOCAL_RANK=rank)
    argv = [a.format(bad=bad, job=job) for a in args]
    err = run(environ, argv, rocm_path, capsys)
    assert err == ("" if rank == "3" else said.format(bad=bad, job=job))
    assert environ.get("GPU_MAX_HW_QUEUES") == env.get("GPU_MAX_HW_QUEUES")


@pytest.mark.parametrize(
    ("args", "flags"),
    [
        ([*MODULE_ARGS, "--job.config_file", "j.toml"],
         "--module and --job.config_file"),
        (["--job.config-file=j.toml", "--config", "c", "--module=llama3"],
         "--config and --job.config-file"),
    ],
)  # fmt: skip
def test_both_launch_forms_at_once_is_one_warning_and_sets_nothing(
    args: list[str], flags: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """torchtitan 0.3.0 refuses --job.config_file, the TOML era --module: the
    hook names both flags and sets nothing (no TOML is read, no child starts);
    the launcher's workers neither warn again nor decide again."""
    outcome = decide_module({}, args, "torchtitan.train")
    assert isinstance(outcome, Outcome)
    assert (outcome.level, outcome.queues) == ("warning", None)
    assert outcome.text.startswith(f"{flags}: ") and outcome.tail == UNSET_TAIL
    environ: dict[str, str] = {}
    _hook.apply(outcome, environ)
    assert capsys.readouterr().err.count("\n") == 1
    assert environ == {"ROCM_HWQ_AUTOSET_ORIGIN": "unset job.config_file"}
    worker = decide_module(dict(environ, WORLD_SIZE="2", LOCAL_RANK="0"), args,
                     "torchtitan.train")  # fmt: skip
    assert (worker.level, worker.queues) == ("skip", None)


def test_both_forms_for_another_program_is_the_toml_launch(
    job: str, rocm_path: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    """``--module`` to a program that is not torchtitan's is that program's own
    option: the TOML launch alone."""
    env: dict[str, str] = {}
    assert run(env, ["--job.config_file", job, "--module", "m"], rocm_path,
               capsys) == LINE  # fmt: skip
    assert env["GPU_MAX_HW_QUEUES"] == "8"


# Issue #31: in time, proven. HIP's runtime, started, holds /dev/kfd open; a
# test stands a file of its own in for the device (``_rocm.KFD``).


EIGHT = recommend(
    {"parallelism": {"tensor_parallel_degree": 2, "expert_parallel_degree": 2}},
    world_size=8, is_moe=True,
)  # fmt: skip


@pytest.fixture
def device(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    from rocm_hwq_autoset import _rocm

    kfd = tmp_path / "kfd"
    kfd.write_text("")
    monkeypatch.setattr(_rocm, "KFD", str(kfd))
    return kfd


@pytest.mark.forked
@pytest.mark.parametrize("started", [True, False])
def test_a_value_put_after_hip_started_is_said_to_come_too_late(
    device: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch, started: bool,
) -> None:  # fmt: skip
    """The value goes in (its children get it), and one warning says this
    process runs with HIP's default, what ran first, and how to mend it."""
    site = tmp_path / "site"
    site.mkdir()
    (site / "aaa_gpu_probe.pth").write_text("import os; os.environ\n")  # runs code
    (site / "aab_paths.pth").write_text("/opt/extra\n")  # only a path
    (site / "rocm_hwq_autoset.pth").write_text("")
    (site / "zzz_late.pth").write_text("import os\n")  # after ours
    monkeypatch.setattr(_early, "site_dirs", lambda: [str(site)])
    monkeypatch.delenv("LOCAL_RANK", raising=False)
    monkeypatch.delenv("ROCM_HWQ_AUTOSET_LOG", raising=False)
    monkeypatch.delenv("GPU_MAX_HW_QUEUES", raising=False)
    held = os.open(device, os.O_RDWR) if started else None
    outcome = _decision.Outcome(
        "set", "GPU_MAX_HW_QUEUES=8 (...)", rec=EIGHT, marker="8 job.config_file"
    )
    _hook.apply(outcome)
    lines = capsys.readouterr().err.splitlines()
    assert os.environ["GPU_MAX_HW_QUEUES"] == "8"
    assert lines[0] == "rocm-hwq-autoset: GPU_MAX_HW_QUEUES=8 (...)"
    if held is None:
        assert lines[1:] == []
        return
    # One warning, naming the one start-up file that ran code before ours.
    late = _early.too_late(
        outcome, during="at interpreter start", early=[str(site / "aaa_gpu_probe.pth")]
    )
    assert [said(line + "\n") for line in lines[1:]] == [("warning", late.message)]
    assert str(site / "aaa_gpu_probe.pth") in late.message.split("; ")[1]


@pytest.mark.forked
def test_a_value_given_to_another_process_is_not_its_own_late_value(
    device: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A launcher hands its worker the value in the worker's own mapping: the
    worker's HIP reads it whenever it starts."""
    os.open(device, os.O_RDWR)
    outcome = _decision.Outcome("set", "x", rec=EIGHT, marker="8 --module")
    worker: dict[str, str] = {}
    _hook.apply(outcome, worker, quiet=True)
    assert worker["GPU_MAX_HW_QUEUES"] == "8" and capsys.readouterr().err == ""


@pytest.mark.forked
@pytest.mark.parametrize("before", ["8", "4", None])
def test_a_value_hip_read_at_its_start_is_in_time(
    device: Path, capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch, before: str | None,
) -> None:  # fmt: skip
    """A worker started with the value (its launcher gave it), or a value that
    is HIP's default (4), given before HIP started or set after: whenever HIP
    started, it has the value (the default needs no time)."""
    if before is None:
        monkeypatch.delenv("GPU_MAX_HW_QUEUES", raising=False)
    else:
        monkeypatch.setenv("GPU_MAX_HW_QUEUES", before)
    monkeypatch.delenv("LOCAL_RANK", raising=False)
    os.open(device, os.O_RDWR)
    rec = EIGHT if before == "8" else recommend(None)
    assert rec.queues == (8 if before == "8" else 4)
    outcome = _decision.Outcome("set", "x", rec=rec, marker=f"{before or 4} --module")
    _hook.apply(outcome, quiet=True)
    assert os.environ["GPU_MAX_HW_QUEUES"] == (before or "4")
    assert capsys.readouterr().err == ""


def test_hip_started_reads_the_open_descriptors(device: Path) -> None:
    from rocm_hwq_autoset import _rocm

    assert not _rocm.hip_started()
    fd = os.open(device, os.O_RDONLY)
    try:
        assert _rocm.hip_started()
    finally:
        os.close(fd)
    assert not _rocm.hip_started()


# The streams PR #4032's model leaves out (issue #31, item 2): named in verbose
# mode, one line each after the value's, with the verify command that settles
# it; the default line is the same as ever.

LEFT_OUT_ARGS = [
    "--parallelism.tensor_parallel_degree", "2",
    "--parallelism.enable_async_tensor_parallel", "--compile.enable_passes",
    "--compile.ep_overlap.enabled",
]  # fmt: skip
LEFT_OUT_VALUE = (
    "rocm-hwq-autoset: GPU_MAX_HW_QUEUES=8 (6 GPU streams: compute, all_reduce,"
    " dense_all_gather, reduce_scatter, expert_comm, tp_all_gather)\n"
)
SYMM_MEM_LINE = (
    "rocm-hwq-autoset: also symm_mem, a GPU stream Q leaves out: async TP's and"
    " dist-GEMM's fused all-gather/reduce-scatter matmuls run on torch's"
    " symmetric-memory stream, which PR #4032 has no lane for; check it on a"
    " profiler trace: rocm-hwq-autoset verify --queues 8 TRACE\n"
)
EP_EXTRA_LINE = (
    "rocm-hwq-autoset: also ep_extra, a GPU stream Q leaves out: graph_trainer's"
    " extra EP group runs the expert all-to-alls on a high-priority NCCL stream"
    " PR #4032 has no lane for: a pool of its own before ROCm/rocm-systems#8485,"
    " the normal one with it; check it on a profiler trace: rocm-hwq-autoset"
    " verify --queues 8 --pools shared TRACE\n"
)


@pytest.mark.parametrize(
    ("env", "said"),
    [
        ({"ROCM_HWQ_AUTOSET_LOG": "verbose"},
         LEFT_OUT_VALUE + SYMM_MEM_LINE + EP_EXTRA_LINE),
        ({"ROCM_HWQ_AUTOSET_LOG": "VERBOSE "},
         LEFT_OUT_VALUE + SYMM_MEM_LINE + EP_EXTRA_LINE),
        ({"ROCM_HWQ_AUTOSET_LOG": "verbose", "LOCAL_RANK": "3"},
         LEFT_OUT_VALUE + SYMM_MEM_LINE + EP_EXTRA_LINE),
        ({}, LEFT_OUT_VALUE),  # the default line, alone and unchanged
        ({"LOCAL_RANK": "0"}, LEFT_OUT_VALUE),
        ({"LOCAL_RANK": "3"}, ""),
        ({"ROCM_HWQ_AUTOSET_LOG": "quiet"}, ""),
    ],
)  # fmt: skip
def test_the_verbose_line_names_each_stream_q_leaves_out(
    env: dict[str, str], said: str, job: str, rocm_path: list[str],
    capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    env = dict(env)
    err = run(env, ["--job.config_file", job, *LEFT_OUT_ARGS], rocm_path, capsys)
    assert err == said
    assert env["GPU_MAX_HW_QUEUES"] == "8"  # Q is the PR's: the streams do not count
    assert all(len(line) <= _decision.MAX_LINE for line in err.splitlines())


def test_a_verbose_line_without_streams_left_out_is_the_value_alone(
    job: str, rocm_path: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    verbose = {"ROCM_HWQ_AUTOSET_LOG": "verbose"}
    assert run(dict(verbose), ["--job.config_file", job], rocm_path, capsys) == LINE
    # Async TP without tensor parallelism starts no stream: nothing said.
    argv = ["--job.config_file", job, "--compile.enable_async_tensor_parallel"]
    assert run(dict(verbose), argv, rocm_path, capsys) == LINE


def test_a_worker_names_them_from_its_launchers_inputs(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A ``--module`` launcher's worker has only the inputs it was handed: the
    streams left out come with them, and its verbose line names them."""
    from rocm_hwq_autoset._model import Inputs, encode_inputs

    inputs = Inputs(tp=2, async_tp=True, dist_gemm=True, trainer_cudagraph=True)
    worker = {
        "GPU_MAX_HW_QUEUES": "8", "ROCM_HWQ_AUTOSET_ORIGIN": "8 --module",
        "ROCM_HWQ_AUTOSET_INPUTS": encode_inputs(inputs), "WORLD_SIZE": "2",
        "LOCAL_RANK": "1", "ROCM_HWQ_AUTOSET_LOG": "verbose",
    }  # fmt: skip
    outcome = decide_module(worker, MODULE_ARGS, "torchtitan.train")
    assert isinstance(outcome, Outcome) and outcome.queues == 4  # 2 // 2: no FSDP
    _hook.say(outcome, worker)
    lines = capsys.readouterr().err.splitlines()
    assert lines == [
        set_line(4, ("compute", "all_reduce", "tp_all_gather")).rstrip("\n"),
        SYMM_MEM_LINE.replace("--queues 8", "--queues 4").rstrip("\n"),
    ]
    # A worker that keeps the launcher's value without recomputing says no more.
    del worker["WORLD_SIZE"]
    kept = decide_module(worker, MODULE_ARGS, "torchtitan.train")
    _hook.say(kept, worker)
    level, message = said(capsys.readouterr().err)
    assert level == "skip" and message.split()[0] == "GPU_MAX_HW_QUEUES=8"


def test_a_detail_is_said_in_verbose_mode_only_and_never_as_nothing_to_do() -> None:
    """Issue #37: a cache folder of mode 777, verbose, said "nothing to do:
    cache ... not used", then Q was set. What the launch does on its way is a
    detail: no "nothing to do"."""
    detail = _decision.Outcome(
        _decision.DETAIL,
        "cache: /c: writable by its group or others; not used",
        "evaluating without it",
    )
    assert detail.line({}) is None
    assert said(detail.line({"ROCM_HWQ_AUTOSET_LOG": "verbose"}) or "") == (
        "say", detail.message
    )  # fmt: skip


def test_a_line_that_cannot_be_written_leaves_nothing_pending() -> None:
    """stderr on a full disk (``2>/dev/full``, buffered as Python buffers it
    without ``PYTHONUNBUFFERED``): the line is lost, and nothing stays in the
    stream for Python to fail on at exit (the training exited 120, not 0:
    issue #36)."""
    with io.TextIOWrapper(open("/dev/full", "wb"), line_buffering=True) as stream:
        write_line(stream, "rocm-hwq-autoset: a line\n")
        stream.flush()  # what Python does at exit: nothing left to fail


def test_a_line_comes_after_the_programs_own_text_whole() -> None:
    read, write = os.pipe()
    with io.TextIOWrapper(open(write, "wb"), line_buffering=True) as stream:
        stream.write("theirs, ")
        write_line(stream, "ours: é\n")
    with open(read, "rb") as pipe:
        assert pipe.read() == "theirs, ours: é\n".encode()


@pytest.mark.parametrize("args", [["--job.config_file", "{job}"], MODULE_ARGS])
def test_an_exported_value_is_decided_again(
    args: list[str], job: str, rocm_path: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    """An ``explain --export`` value carries its origin: the launch decides
    again, as for a value of its own (never kept as explicit, never inherited
    as a --module launcher's)."""
    env = {"GPU_MAX_HW_QUEUES": "2", "ROCM_HWQ_AUTOSET_ORIGIN": "2 explain --export"}
    filled = [a.replace("{job}", job) for a in args]
    if filled == MODULE_ARGS:
        outcome = decide_module(env, filled, "torchtitan.train")
        assert not isinstance(outcome, _decision.Outcome)  # evaluated, not kept
        return
    run(env, filled, rocm_path, capsys)
    assert env["GPU_MAX_HW_QUEUES"] != "2"
    assert env["ROCM_HWQ_AUTOSET_ORIGIN"].endswith(" job.config_file")


# What torchtitan 0.2.2 refuses that the model does not read.

UNKNOWN_JOB = b"""
[model]
name = "deepseek_v3"
[parallelism]
expert_parallel_degree = 2
foo = 1
[wandb]
project = "x"
"""


@pytest.mark.parametrize(
    ("env", "lines"),
    [
        ({}, 3),
        ({"LOCAL_RANK": "3"}, 0),
        ({"ROCM_HWQ_AUTOSET_LOG": "quiet"}, 0),
        ({"LOCAL_RANK": "3", "ROCM_HWQ_AUTOSET_LOG": "verbose"}, 3),
    ],
)
def test_unknown_fields_and_flags_are_said_and_q_is_set(
    env: dict[str, str], lines: int, tmp_path: Path, rocm_path: list[str],
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    """Was: no word (issue #37). Each input's unknown names in one warning
    line, before the value's line, said as the value is (once per node); the
    value is the one the fields the model reads give."""
    monkeypatch.chdir(tmp_path)
    Path("job.toml").write_bytes(UNKNOWN_JOB)
    args = ["--job.config_file", "job.toml", "--parallelism.bar", "2"]
    outcome = hook(env, args, rocm_path)
    assert (outcome.level, env["GPU_MAX_HW_QUEUES"]) == ("set", "4")
    assert outcome.rec is not None
    assert [exc.source for exc in outcome.rec.unknown] == [
        "--parallelism.bar", "job.toml: parallelism.foo, wandb"
    ]  # fmt: skip
    err = capsys.readouterr().err
    assert len(err.splitlines()) == lines
    if lines:
        levels = [line.split(": ")[1] == "warning" for line in err.splitlines()]
        assert levels == [True, True, False]
        check_golden(GOLDEN / "unknown_fields.txt", err)

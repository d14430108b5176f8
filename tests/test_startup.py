"""The start-up decision, step by step, on a plain dict environment."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

import rocm_hwq_autoset as _startup
from rocm_hwq_autoset import ConfigError, _decision
from rocm_hwq_autoset._rocm import Verdict, detect

from .helpers import CUDA_VERSION_PY, JOB, LINE, ROCM_VERSION_PY, fake_torch, hook


@pytest.fixture
def rocm_path(tmp_path: Path) -> list[str]:
    return [str(fake_torch(tmp_path / "rocm", ROCM_VERSION_PY))]


@pytest.fixture
def job(tmp_path: Path) -> str:
    path = tmp_path / "job.toml"
    path.write_bytes(JOB)
    return str(path)


def run(
    environ: dict[str, str],
    argv: list[str],
    path: list[str],
    capsys: pytest.CaptureFixture[str],
) -> str:
    hook(environ, argv, path)
    out, err = capsys.readouterr()
    assert out == ""
    return err


def test_sets_and_marks(
    job: str, rocm_path: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    env: dict[str, str] = {}
    assert run(env, ["--job.config_file", job], rocm_path, capsys) == LINE
    assert env == {
        "GPU_MAX_HW_QUEUES": "8",
        "ROCM_HWQ_AUTOSET_ORIGIN": "8 job.config_file",
    }


@pytest.mark.parametrize("value", ["0", "false", "OFF", "No", " no "])
def test_opt_out(
    value: str, job: str, rocm_path: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    env = {"ROCM_HWQ_AUTOSET": value, "ROCM_HWQ_AUTOSET_LOG": "verbose"}
    err = run(env, ["--job.config_file", job], rocm_path, capsys)
    assert "opted out" in err
    assert "GPU_MAX_HW_QUEUES" not in env


@pytest.mark.parametrize("value", ["", "1", "auto", "AUTO"])
def test_normal_values(
    value: str, job: str, rocm_path: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    env = {"ROCM_HWQ_AUTOSET": value}
    run(env, [f"--job.config_file={job}"], rocm_path, capsys)
    assert env["GPU_MAX_HW_QUEUES"] == "8"


def test_force_skips_detection(
    tmp_path: Path, job: str, capsys: pytest.CaptureFixture[str]
) -> None:
    cuda = [str(fake_torch(tmp_path / "cuda", CUDA_VERSION_PY))]
    env: dict[str, str] = {"ROCM_HWQ_AUTOSET_LOG": "verbose"}
    assert "not ROCm" in run(env, ["--job.config_file", job], cuda, capsys)
    assert "GPU_MAX_HW_QUEUES" not in env
    env = {"ROCM_HWQ_AUTOSET": "force"}
    run(env, ["--job.config_file", job], cuda, capsys)
    assert env["GPU_MAX_HW_QUEUES"] == "8"


def test_explicit_value_wins(
    job: str, rocm_path: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    env = {"GPU_MAX_HW_QUEUES": "2", "ROCM_HWQ_AUTOSET_LOG": "verbose"}
    assert "set explicitly" in run(env, ["--job.config_file", job], rocm_path, capsys)
    assert env["GPU_MAX_HW_QUEUES"] == "2"
    # A marker for another value does not make the user's value ours.
    env = {"GPU_MAX_HW_QUEUES": "2", "ROCM_HWQ_AUTOSET_ORIGIN": "8 job.config_file"}
    run(env, ["--job.config_file", job], rocm_path, capsys)
    assert env["GPU_MAX_HW_QUEUES"] == "2"


def test_worker_recomputes_the_launchers_value(
    tmp_path: Path, rocm_path: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "tp.toml"
    path.write_bytes(
        b"[model]\nname='deepseek_v3'\n[parallelism]\nexpert_parallel_degree=2\n"
        b"tensor_parallel_degree=2\n[compile]\nenable_fsdp_ag_rs_overlap=true\n"
    )
    argv = ["--job.config_file", str(path)]
    launcher: dict[str, str] = {}
    assert "GPU_MAX_HW_QUEUES=8 (6 GPU streams" in run(
        launcher, argv, rocm_path, capsys
    )
    for rank in range(2):
        worker = dict(launcher, WORLD_SIZE="2", RANK=str(rank), LOCAL_RANK=str(rank))
        err = run(worker, argv, rocm_path, capsys)
        # dp_shard = 2 // tp 2 = 1: no FSDP lanes on the workers.
        assert worker["GPU_MAX_HW_QUEUES"] == "4"
        assert worker["ROCM_HWQ_AUTOSET_ORIGIN"] == "4 job.config_file"
        assert err == ("" if rank else
                       "rocm-hwq-autoset: GPU_MAX_HW_QUEUES=4 (4 GPU streams: compute,"
                       " all_reduce, expert_comm, tp_all_gather)\n")  # fmt: skip


def test_worker_with_the_same_value_is_silent(
    job: str, rocm_path: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    launcher: dict[str, str] = {}
    run(launcher, ["--job.config_file", job], rocm_path, capsys)
    worker = dict(launcher, WORLD_SIZE="16", LOCAL_RANK="0")
    assert run(worker, ["--job.config_file", job], rocm_path, capsys) == ""
    assert worker["GPU_MAX_HW_QUEUES"] == "8"


@pytest.mark.parametrize(
    ("env", "printed"),
    [
        ({}, True),
        ({"LOCAL_RANK": "0"}, True),
        ({"LOCAL_RANK": "3"}, False),
        ({"LOCAL_RANK": "3", "ROCM_HWQ_AUTOSET_LOG": "verbose"}, True),
        ({"ROCM_HWQ_AUTOSET_LOG": "quiet"}, False),
    ],
)
def test_once_per_node(
    env: dict[str, str], printed: bool, job: str, rocm_path: list[str],
    capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    err = run(env, ["--job.config_file", job], rocm_path, capsys)
    assert (err == LINE) is printed
    assert env["GPU_MAX_HW_QUEUES"] == "8"


@pytest.mark.parametrize(
    ("content", "argv_extra", "reason"),
    [
        (b"[parallelism\n", [], "invalid TOML"),
        (b"[parallelism]\ntensor_parallel_degree = 'x'\n", [], "is not an integer"),
        (JOB, ["--parallelism.tensor_parallel_degree", "2.0"], "not an integer"),
        (JOB, ["--compile.enable_passes", "False"], "takes no value"),
    ],
)
def test_bad_input_warns_once_and_sets_nothing(
    tmp_path: Path, rocm_path: list[str], capsys: pytest.CaptureFixture[str],
    content: bytes, argv_extra: list[str], reason: str,
) -> None:  # fmt: skip
    path = tmp_path / "bad.toml"
    path.write_bytes(content)
    env: dict[str, str] = {}
    err = run(env, ["--job.config_file", str(path), *argv_extra], rocm_path, capsys)
    assert err.startswith(f"rocm-hwq-autoset: warning: {path}: ")
    assert reason in err and err.endswith("; GPU_MAX_HW_QUEUES left unset\n")
    assert err.count("\n") == 1
    # Nothing set; the marker tells the launcher's workers not to try again.
    assert env == {"ROCM_HWQ_AUTOSET_ORIGIN": "unset job.config_file"}
    worker = dict(env, WORLD_SIZE="2", LOCAL_RANK="0")
    assert run(worker, ["--job.config_file", str(path), *argv_extra], rocm_path,
               capsys) == ""  # fmt: skip
    assert worker == dict(env, WORLD_SIZE="2", LOCAL_RANK="0")


def test_bad_world_size(
    job: str, rocm_path: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    env = {"WORLD_SIZE": "eight"}
    err = run(env, ["--job.config_file", job], rocm_path, capsys)
    assert "WORLD_SIZE='eight' is not a positive integer" in err
    assert "GPU_MAX_HW_QUEUES" not in env


def test_no_config_flag(
    rocm_path: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    env = {"ROCM_HWQ_AUTOSET_LOG": "verbose"}
    assert "no --job.config_file" in run(env, ["--job.config_file"], rocm_path, capsys)
    assert "GPU_MAX_HW_QUEUES" not in env


def test_control_characters_and_length_are_tamed(
    rocm_path: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    err = run({}, ["--job.config_file", "a\nb\x1b[31m" + "x" * 1000], rocm_path, capsys)
    assert err.count("\n") == 1 and "\x1b" not in err
    assert len(err) <= len("rocm-hwq-autoset: ") + _startup.MAX_LINE + 1


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
        _decision, "decide", lambda *a, **k: decisions.append(1) or real(*a, **k)
    )
    _startup.run()
    _startup.run()  # the same .pth seen through two site directories
    assert os.environ["GPU_MAX_HW_QUEUES"] == "8"
    assert capsys.readouterr().err == LINE
    assert decisions == [1]


@pytest.mark.forked
def test_an_internal_error_is_one_warning(
    job: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def boom(*args: object, **kwargs: object) -> None:
        raise RuntimeError("boom")

    monkeypatch.setattr(_decision, "decide", boom)
    monkeypatch.delenv("LOCAL_RANK", raising=False)
    _startup.run()
    assert capsys.readouterr().err == (
        "rocm-hwq-autoset: warning: internal error (RuntimeError: boom); nothing set\n"
    )


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
    _startup.start()  # the gate, as the .pth line calls it: it must not raise
    assert os.environ["GPU_MAX_HW_QUEUES"] == "8"
    assert _startup.say("hello", {}) is None  # nor the line on its own


@pytest.mark.parametrize("value", ["disable", "disabled", "none", "OF", "bogus"])
def test_a_switch_value_it_cannot_read_never_turns_it_on(
    value: str, job: str, rocm_path: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    env = {"ROCM_HWQ_AUTOSET": value}
    err = run(env, ["--job.config_file", job], rocm_path, capsys)
    assert err == (
        f"rocm-hwq-autoset: warning: ROCM_HWQ_AUTOSET={value!r} is not"
        " 1/on/true/yes/auto (on), 0/off/false/no (off) or force; the hook does"
        " nothing\n"
    )
    assert env == {"ROCM_HWQ_AUTOSET": value}


@pytest.mark.parametrize("value", ["1", "on", "TRUE", "yes", "auto", ""])
def test_every_on_value(
    value: str, job: str, rocm_path: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    env = {"ROCM_HWQ_AUTOSET": value}
    assert run(env, ["--job.config_file", job], rocm_path, capsys) == LINE


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
    monkeypatch.setattr(_startup, "ran", False)
    _startup.run()
    assert capsys.readouterr().err == (
        "rocm-hwq-autoset: warning: ROCM_HWQ_AUTOSET_LOG='bogus' is not quiet or"
        " verbose; using the default (one line per node)\n" + LINE
    )


@pytest.mark.parametrize("value", ["abc", "0", "-3", "2.5", " "])
def test_an_explicit_value_hip_cannot_use_is_kept_with_a_warning(
    value: str, job: str, rocm_path: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    env = {"GPU_MAX_HW_QUEUES": value}
    err = run(env, ["--job.config_file", job], rocm_path, capsys)
    assert err == (
        f"rocm-hwq-autoset: warning: GPU_MAX_HW_QUEUES={value!r} is set but is not"
        " a positive integer, which HIP cannot use; left as is (an explicit value"
        " always wins)\n"
    )
    assert env == {"GPU_MAX_HW_QUEUES": value}


def test_a_module_launch_is_pending_and_never_evaluated_in_process(
    rocm_path: list[str],
) -> None:
    args = ["--module", "graph_trainer.llama3", "--config", "c"]
    outcome = _decision.decide(
        {}, args, ["python", "-m", "torchtitan.train", *args],
        rocm=lambda: _detect(rocm_path), read_config=_no_read,
    )  # fmt: skip
    assert outcome.level == _decision.PENDING and outcome.queues is None
    assert outcome.launch is not None and list(outcome.launch.args) == args
    final = _decision.conclude({}, outcome, (8, ("compute",) * 5))
    assert (final.queues, final.marker) == (8, "8 --module")
    failed = _decision.conclude({}, outcome, ConfigError("no"))
    assert failed.queues is None and failed.marker == "unset --module"
    assert failed.message == "--module/--config: no; GPU_MAX_HW_QUEUES left unset"


def test_a_bad_timeout_is_said_before_any_child(rocm_path: list[str]) -> None:
    args = ["-m", "torchtitan.train", "--module", "m", "--config", "c"]
    outcome = _decision.decide(
        {"ROCM_HWQ_AUTOSET_TIMEOUT": "soon"}, args, [],
        rocm=lambda: _detect(rocm_path), read_config=_no_read,
    )  # fmt: skip
    assert outcome.level == _decision.WARNING
    assert "ROCM_HWQ_AUTOSET_TIMEOUT='soon' is not a positive number" in (
        outcome.message
    )


def _detect(path: list[str]) -> Verdict:
    return detect(path, {})


def _no_read(path: str) -> dict[str, object]:
    raise AssertionError("a --module launch reads no TOML")

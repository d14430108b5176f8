"""The start-up decision, step by step, on a plain dict environment."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from rocm_hwq_autoset import _startup
from rocm_hwq_autoset._startup import Log, decide

from .test_rocm import CUDA_VERSION_PY, ROCM_VERSION_PY, fake_torch

JOB = b"""
[model]
name = "deepseek_v3"
[parallelism]
expert_parallel_degree = 2
[compile]
enable_fsdp_ag_rs_overlap = true
"""
LINE = (
    "rocm-hwq-autoset: GPU_MAX_HW_QUEUES=8 (5 GPU streams: compute, all_reduce,"
    " dense_all_gather, reduce_scatter, expert_comm)\n"
)


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
    decide(environ, argv, path, Log(environ))
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
    assert env == {}


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
    job: str, capsys: pytest.CaptureFixture[str]
) -> None:
    os.environ.pop("GPU_MAX_HW_QUEUES", None)
    os.environ.pop("LOCAL_RANK", None)
    os.environ["ROCM_HWQ_AUTOSET"] = "force"  # no fake torch in pytest's own path
    sys.argv[:] = ["prog", "--job.config_file", job]
    _startup.run()
    _startup.run()  # the same .pth seen through two site directories
    assert os.environ["GPU_MAX_HW_QUEUES"] == "8"
    assert capsys.readouterr().err == LINE


@pytest.mark.forked
def test_an_internal_error_is_one_warning(
    job: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def boom(*args: object) -> None:
        raise RuntimeError("boom")

    monkeypatch.setattr(_startup, "decide", boom)
    monkeypatch.delenv("LOCAL_RANK", raising=False)
    _startup.run()
    assert capsys.readouterr().err == (
        "rocm-hwq-autoset: warning: internal error (RuntimeError: boom);"
        " GPU_MAX_HW_QUEUES left unset\n"
    )


@pytest.mark.forked
def test_missing_or_broken_stderr_is_fine(job: str, rocm_path: list[str]) -> None:
    sys.stderr = None  # type: ignore[assignment]
    _startup._write("hello")
    sys.stderr = open(os.devnull, "w")  # noqa: SIM115
    sys.stderr.close()
    _startup._write("hello")

"""``doctor`` in this process: what it says of the environment, of the hook at
start-up and of a launch. Installs in real venvs: tests/e2e/test_doctor.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from rocm_hwq_autoset import _hook
from rocm_hwq_autoset._argv import Launch
from rocm_hwq_autoset._cli import main
from rocm_hwq_autoset._cli.doctor import start_up_check
from rocm_hwq_autoset._decision import SET, SKIP, WARNING, Outcome, Pending

from ..data import write_job
from ..helpers import ROCM_VERSION_PY, fake_torch

JOB = "models__deepseek_v3__deepseek_v3_16b.toml"


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
    assert "for that launch would set GPU_MAX_HW_QUEUES=8" in flat


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
        "FAIL GPU_MAX_HW_QUEUES 'eight', set by you, is not a positive integer:"
        " HIP cannot use it" in flat
    )
    assert "warning: GPU_MAX_HW_QUEUES='eight' is set but is not a positive" in flat


def test_without_a_launch_argument_the_hook_stays_out(
    rocm_job: str, capsys: pytest.CaptureFixture[str]
) -> None:
    _, flat = doctor(capsys, "--", "--training.steps", "10")
    assert "note for that launch no --job.config or --module argument" in flat


@pytest.mark.parametrize(
    ("decided", "said"),
    [
        (None, "the hook did not run at start-up (no --job.config or --module)"),
        (Outcome(SKIP, "rocm-hwq-autoset's own command"),
         "at start-up the hook did nothing: rocm-hwq-autoset's own command"),
        (Outcome(SET, "GPU_MAX_HW_QUEUES=4 (...)", queues=4),
         "at start-up the hook set GPU_MAX_HW_QUEUES=4 here"),
        (Outcome(WARNING, "x.toml: No such file", "GPU_MAX_HW_QUEUES left unset"),
         "at start-up the hook warned: x.toml: No such file; GPU_MAX_HW_QUEUES left"
         " unset"),
        (Pending(Launch("module", ["--module", "m", "--config", "c"], True), None),
         "at start-up the hook started a --module evaluation"),
    ],
)  # fmt: skip
def test_what_the_hook_did_at_start_up(
    decided: Outcome | Pending | None, said: str, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    check = start_up_check(decided)
    assert (check.status, check.topic, check.detail) == ("note", "this process", said)
    monkeypatch.setattr(_hook, "decided", decided)
    _, flat = doctor(capsys)
    assert f"note this process {said}" in flat

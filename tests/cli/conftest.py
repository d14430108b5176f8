"""Every CLI test starts from a clean environment: none of the variables the
commands read, a cache of its own, and ROCm detected anew."""

from __future__ import annotations

from pathlib import Path

import pytest

#: What the commands read from the environment, and what shapes detection.
VARIABLES = (
    "GPU_MAX_HW_QUEUES", "ROCM_HWQ_AUTOSET", "ROCM_HWQ_AUTOSET_ORIGIN",
    "ROCM_HWQ_AUTOSET_INPUTS", "ROCM_HWQ_AUTOSET_LOG", "ROCM_HWQ_AUTOSET_TIMEOUT",
    "ROCM_HWQ_AUTOSET_CACHE", "WORLD_SIZE", "LOCAL_RANK", "RANK", "ROCM_PATH",
    "HIP_PATH", "NO_COLOR", "STANDIN_LOG", "STANDIN_SLEEP", "STANDIN_FAIL",
    "DEBUG_HIP_IGNORE_STREAM_PRIORITY",
)  # fmt: skip


@pytest.fixture(autouse=True)
def clean_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in VARIABLES:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("ROCM_HWQ_AUTOSET_CACHE_DIR", str(tmp_path / "cache"))
    from rocm_hwq_autoset._cli import _common

    monkeypatch.setattr(_common, "_verdict", [])  # detection is once per command

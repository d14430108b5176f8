"""Every CLI test starts from a clean environment: none of the variables the
commands read, a cache of its own, and ROCm detected anew."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from shlex import quote

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
    # The python that trains (doctor asks the first on PATH) is this one: its
    # folder, or one whose `python` runs it (a system Python has `python3` only).
    bin_dir = Path(sys.executable).parent
    if not (bin_dir / "python").exists():
        bin_dir = tmp_path / "bin"
        bin_dir.mkdir()
        script = f'#!/bin/sh\nexec {quote(sys.executable)} "$@"\n'
        (bin_dir / "python").write_text(script)
        (bin_dir / "python").chmod(0o755)
    monkeypatch.setenv("PATH", os.pathsep.join([str(bin_dir), os.environ["PATH"]]))
    from rocm_hwq_autoset._cli import _common

    monkeypatch.setattr(_common, "_verdict", [])  # detection is once per command

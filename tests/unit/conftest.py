"""What the decision's and the hook's tests share: a fake ROCm torch on the
path, a TOML job config, and the hook run on a plain dict."""

from __future__ import annotations

from pathlib import Path

import pytest

from ..helpers import JOB, ROCM_VERSION_PY, fake_torch


@pytest.fixture
def rocm_path(tmp_path: Path) -> list[str]:
    return [str(fake_torch(tmp_path / "rocm", ROCM_VERSION_PY))]


@pytest.fixture
def job(tmp_path: Path) -> str:
    path = tmp_path / "job.toml"
    path.write_bytes(JOB)
    return str(path)

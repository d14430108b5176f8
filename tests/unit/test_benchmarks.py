"""The benchmarks' shared helpers: they clean up, and say what is missing."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from ..helpers import ROOT

sys.path.insert(0, str(ROOT / "benchmarks"))
import _venvs


def test_workdir_is_removed_even_after_an_error() -> None:
    made = []

    def half_way() -> None:
        with _venvs.workdir() as tmp:
            made.append(tmp)
            (tmp / "venv").mkdir()
            (tmp / "venv" / "big").write_bytes(b"x" * 1024)
            raise RuntimeError("a benchmark failed half-way")

    with pytest.raises(RuntimeError):
        half_way()
    assert made and not made[0].exists()


def test_a_wheel_that_cannot_be_built_says_what_is_missing(tmp_path: Path) -> None:
    with pytest.raises(SystemExit) as stop:
        _venvs.build_wheel(tmp_path / "dist", source=tmp_path / "not-a-project")
    message = str(stop.value.code)
    assert message.startswith("building the wheel failed: ")
    assert "the benchmarks need the test extras: pip install -e '.[test]'" in message

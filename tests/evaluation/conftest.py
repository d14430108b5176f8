"""Fixtures of the tests of the --module evaluation."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from rocm_hwq_autoset._evaluation import parent as parent
from rocm_hwq_autoset._evaluation import process
from tests.helpers import child_env

from ..standin import write_recipes, write_standin
from .children import ROOT as _ROOT
from .helpers import ROOT, Applied, FakeEvaluation, pending


@pytest.fixture(autouse=True)
def clean_environ(monkeypatch: pytest.MonkeyPatch) -> None:
    """No value of ours from elsewhere: the outcome is decided afresh."""
    for name in ("GPU_MAX_HW_QUEUES", "ROCM_HWQ_AUTOSET_ORIGIN",
                 "ROCM_HWQ_AUTOSET_INPUTS", "WORLD_SIZE"):  # fmt: skip
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def waiter() -> tuple[parent.Waiter, FakeEvaluation, Applied]:
    evaluation = FakeEvaluation()
    applied = Applied()
    w = parent.Waiter(pending(), applied, evaluation=evaluation)  # type: ignore[arg-type]
    return w, evaluation, applied


@pytest.fixture
def fake_child(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> dict[str, str]:
    monkeypatch.setattr(process, "CHILD", "tests.fake_child")
    return child_env({"PATH": os.environ["PATH"], "PYTHONPATH": str(ROOT),
                      "FAKE_CHILD_LOG": str(tmp_path / "child.log")})  # fmt: skip


@pytest.fixture
def world(tmp_path: Path) -> dict[str, str]:
    """A working directory with a recipe, the stand-in torchtitan, a cache."""
    standin = write_standin(tmp_path / "standin")
    work = write_recipes(tmp_path / "work")
    return child_env(
        {
            "PATH": os.environ["PATH"],
            "PYTHONPATH": os.pathsep.join([str(standin), str(_ROOT)]),
            "STANDIN_LOG": str(tmp_path / "standin.log"),
            "CACHE": str(tmp_path / "cache"),
            "WORK": str(work),
        }
    )

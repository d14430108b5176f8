"""What the tests of the --module evaluation's launcher side share: the
arguments, the stand-ins for an evaluation and for ``_hook.apply``, and the
child processes of ``tests/fake_child.py``."""

from __future__ import annotations

import json
import time
from collections.abc import MutableMapping
from pathlib import Path
from typing import Any

from rocm_hwq_autoset._argv import Launch
from rocm_hwq_autoset._decision import Outcome
from rocm_hwq_autoset._evaluation import parent as parent
from tests.fake_child import INPUTS, SETTINGS

ROOT = Path(__file__).resolve().parents[2]

ARGS = ["--module", "graph_trainer.deepseek_v3", "--config", "c"]

EVALUATED = (INPUTS, SETTINGS)


def pending(in_process: bool = False) -> Launch:
    return Launch("module", ARGS, in_process)


class FakeEvaluation:
    """An evaluation without a process: its answer is given, as is how long it
    takes and what it raises."""

    def __init__(self, answer: Any = EVALUATED, *, delay: float = 0.0,
                 raises: BaseException | None = None, cached: bool = False,
                 meanwhile: Any = None) -> None:  # fmt: skip
        self.answer = answer
        self.delay = delay
        self.raises = raises
        self.cached = cached
        self.meanwhile = meanwhile
        """Called while the launcher waits: what else happens in it then."""
        self.calls: list[str] = []

    def result(self) -> tuple[Any, bool]:
        self.calls.append("result")
        if self.meanwhile is not None:
            self.meanwhile()
        time.sleep(self.delay)
        if self.raises is not None:
            raise self.raises
        return self.answer, self.cached

    def end(self) -> None:
        self.calls.append("end")

    def settle(self, limit: float | None = None) -> None:
        self.calls.append(f"settle {limit}")

    def reap(self) -> None:
        pass

    def disown(self) -> None:
        self.calls.append("disown")


class Applied:
    """Stands for ``_hook.apply``: records each call, and sets the values in the
    mappings it is given (never in this process's ``os.environ``)."""

    def __init__(self) -> None:
        self.calls: list[
            tuple[Outcome, tuple[MutableMapping[str, str], ...], bool]
        ] = []

    def __call__(
        self, outcome: Outcome, *environs: MutableMapping[str, str], quiet: bool = False
    ) -> None:
        self.calls.append((outcome, environs, quiet))
        from rocm_hwq_autoset._hook import apply

        for environ in environs:
            apply(outcome, environ, quiet=True)


POPEN = "subprocess.Popen"


def popen_args(env: Any) -> tuple[Any, ...]:
    return ("python", ["python", "-m", "torchtitan.train"], None, env)


def started(environ: dict[str, str]) -> list[dict[str, Any]]:
    text = Path(environ["FAKE_CHILD_LOG"]).read_text()
    return [json.loads(line) for line in text.splitlines()]


def _state(pid: int) -> str:
    """The process's state (``R``, ``S``, ``Z`` for a zombie ...), or ``""``
    once it is gone and reaped."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rpartition(") ")[2][0]
    except FileNotFoundError:
        return ""


def _alive(pid: int) -> bool:
    return _state(pid) not in ("", "Z")  # a zombie is gone for our purpose


def _gone_within(pids: list[int], seconds: float) -> bool:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if not any(_alive(pid) for pid in pids):
            return True
        time.sleep(0.05)
    return False

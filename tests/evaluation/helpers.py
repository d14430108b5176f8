"""What the tests of the --module evaluation's launcher side share: the
arguments, the stand-ins for an evaluation and for ``_hook.apply``, and the
child processes of ``tests/fake_child.py``."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Mapping, MutableMapping
from pathlib import Path
from typing import Any

from rocm_hwq_autoset._argv import Launch
from rocm_hwq_autoset._config import ConfigError
from rocm_hwq_autoset._decision import Outcome
from rocm_hwq_autoset._environ import MODULE_FORM
from rocm_hwq_autoset._evaluation import cache as _cache
from rocm_hwq_autoset._evaluation import parent as parent
from rocm_hwq_autoset._evaluation.answer import CACHE, Answer
from rocm_hwq_autoset._evaluation.answer import EVALUATED as EVALUATED_HERE
from rocm_hwq_autoset._evaluation.cache import key
from rocm_hwq_autoset._evaluation.process import interpreter_of
from rocm_hwq_autoset._model import Config
from tests.fake_child import INPUTS, SETTINGS

ROOT = Path(__file__).resolve().parents[2]

ARGS = ["--module", "graph_trainer.deepseek_v3", "--config", "c"]

EVALUATED = Config(INPUTS, SETTINGS)


def pending(in_process: bool = False) -> Launch:
    return Launch(MODULE_FORM, ARGS, in_process)


def launch_key(launch: Launch, environ: Mapping[str, str]) -> str:
    """The cache's key of a launch, as ``parent.lookup_or_spawn`` makes it."""
    return key(launch.args, environ, interpreter_of(launch, environ))


class FakeChild:
    """A child without a process."""

    def __init__(self) -> None:
        self.linger = 0.0

    def reap(self) -> None:
        pass


class FakeEvaluation:
    """An evaluation without a process: what it gives (a config, or the error
    of a refusal) is given, as is how long it takes and what it raises."""

    def __init__(self, gives: Config | ConfigError = EVALUATED, *,
                 delay: float = 0.0, raises: BaseException | None = None,
                 cached: bool = False, meanwhile: Any = None) -> None:  # fmt: skip
        self.gives = gives
        self.delay = delay
        self.raises = raises
        self.cached = cached
        self.meanwhile = meanwhile
        """Called while the launcher waits: what else happens in it then."""
        self.calls: list[str] = []
        self.child = FakeChild()

    def answer(self, slow: Callable[[float], None] | None = None) -> Answer:
        """As ``parent.Evaluation.answer``: ``slow`` is called once the wait
        has lasted ``parent.SLOW_SECONDS``."""
        from rocm_hwq_autoset._evaluation.parent import SLOW_SECONDS

        self.calls.append("answer")
        if self.meanwhile is not None:
            self.meanwhile()
        if slow is not None and self.delay > SLOW_SECONDS:
            time.sleep(SLOW_SECONDS)
            slow(self.delay - SLOW_SECONDS)
            time.sleep(self.delay - SLOW_SECONDS)
        else:
            time.sleep(self.delay)
        if self.raises is not None:
            raise self.raises
        how = CACHE if self.cached else EVALUATED_HERE
        if isinstance(self.gives, ConfigError):
            return Answer(refusal=self.gives, how=how)
        return Answer(config=self.gives, how=how)


class Applied:
    """Stands for ``_hook.apply``: records each call, and sets the values in the
    mappings it is given (never in this process's ``os.environ``)."""

    def __init__(self) -> None:
        self.calls: list[
            tuple[Outcome, tuple[MutableMapping[str, str], ...], bool, str]
        ] = []

    def __call__(
        self,
        outcome: Outcome,
        *environs: MutableMapping[str, str],
        quiet: bool = False,
        during: str = "",
    ) -> None:
        self.calls.append((outcome, environs, quiet, during))
        from rocm_hwq_autoset._hook import apply

        for environ in environs:
            apply(outcome, environ, quiet=True)


POPEN = "subprocess.Popen"


def popen_args(env: Any) -> tuple[Any, ...]:
    return ("python", ["python", "-m", "torchtitan.train"], None, env)


def started(environ: dict[str, str]) -> list[dict[str, Any]]:
    text = Path(environ["FAKE_CHILD_LOG"]).read_text()
    return [json.loads(line) for line in text.splitlines()]


def await_started(environ: dict[str, str], seconds: float = 30) -> list[dict[str, Any]]:
    """The children's records once the first is whole: the fake child makes
    its log, then writes its line, so a log that exists may still be empty."""
    log = Path(environ["FAKE_CHILD_LOG"])
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if log.exists() and log.read_text().endswith("\n"):
            break
        time.sleep(0.02)
    return started(environ)


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


def served_on_a_full_disk(monkeypatch: Any) -> None:
    """The cache's record of unchecked takes (``.served``) cannot be written:
    a full disk, or a race with a remount, for that file alone."""
    opening = os.open

    def full(path: str, flags: int, *args: Any, **kwargs: Any) -> int:
        if path.endswith(".served"):
            raise OSError(28, "No space left on device")
        return opening(path, flags, *args, **kwargs)

    monkeypatch.setattr(_cache.os, "open", full)

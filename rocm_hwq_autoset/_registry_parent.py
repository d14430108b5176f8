"""The ``--module`` child, parent side: start the evaluation, wait for it only
when its value is needed, and end it.

At interpreter start the hook starts the child (``_registry_child``) and goes on:
a torchrun launcher has its own work to do (importing torch, the rendezvous with
the other nodes). The value is needed, and waited for, only

* before this process starts another: Python's audit events ``subprocess.Popen``,
  ``os.posix_spawn``, ``os.exec``, ``os.fork`` ... come before a process starts,
  with the environment it will get (torch's elastic agent starts each worker with
  ``Popen(args, env=<copy of os.environ plus rank variables>)``); the value goes
  into that environment and into ``os.environ``;
* before this process imports torch, when it is the training process itself
  (``python -m torchtitan.train``): the ``import`` audit event;
* at exit, which only ends the child.

The audit hook cannot be removed; once the value is in, it returns at its first
line. It never raises: an exception there would abort the process start.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Mapping, MutableMapping, Sequence

from . import _decision as env
from . import apply
from ._decision import Outcome, conclude, failed
from ._launch import ConfigError

#: Audit events that come before this process starts another.
SPAWN_EVENTS = frozenset({
    "subprocess.Popen", "os.posix_spawn", "os.exec", "os.fork", "os.forkpty",
    "os.spawn", "os.system", "pty.spawn",
})  # fmt: skip
#: Those whose last argument is the environment the new process gets.
ENV_LAST = frozenset({"subprocess.Popen", "os.posix_spawn", "os.exec"})
#: The most the child may print: one JSON line of a few hundred bytes.
MAX_RESULT_BYTES = 64 << 10


class Evaluation:
    """One child interpreter evaluating ``--module``/``--config`` arguments."""

    def __init__(
        self, args: Sequence[str], environ: Mapping[str, str], world_size: int | None
    ) -> None:
        self.timeout = env.timeout(environ)
        self.deadline = time.monotonic() + self.timeout
        command = [sys.executable, "-m", "rocm_hwq_autoset._registry_child"]
        if world_size is not None:
            command += ["--world-size", str(world_size)]
        child_env = {**environ, env.SWITCH: "0"}  # no hook in the child
        # The child sees what the training sees: the same GPUs, this directory
        # (recipe modules outside torchtitan import from it). Its own session,
        # so a timeout ends it and anything it started.
        self.child = subprocess.Popen(
            [*command, "--", *args],
            env=child_env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )

    def result(self) -> tuple[int, tuple[str, ...]]:
        """Q and the lanes; ``ConfigError`` on a failure or the timeout."""
        remaining = max(0.0, self.deadline - time.monotonic())
        try:
            out, _ = self.child.communicate(timeout=remaining)
        except subprocess.TimeoutExpired:
            self.end()
            raise ConfigError(
                f"evaluating took over {self.timeout:g} s ({env.TIMEOUT})"
            ) from None
        try:
            doc = json.loads(out[:MAX_RESULT_BYTES])
            error = doc.get("error")
            if error is None:
                return int(doc["queues"]), tuple(str(lane) for lane in doc["lanes"])
        except (ValueError, TypeError, KeyError, AttributeError):
            status = self.child.returncode
            how = f"signal {-status}" if status < 0 else f"status {status}"
            raise ConfigError(f"the evaluating child ended with {how}") from None
        raise ConfigError(str(error))

    def end(self) -> None:
        """Kill the child's whole process group, if it still runs."""
        if self.child.poll() is None:
            with contextlib.suppress(OSError):  # it ended meanwhile
                os.killpg(self.child.pid, signal.SIGKILL)
        self.child.communicate()


def evaluate(
    args: Sequence[str], environ: Mapping[str, str], world_size: int | None
) -> tuple[int, tuple[str, ...]]:
    """Start a child and wait for it: what the hook does, all at once."""
    return Evaluation(args, environ, world_size).result()


class _Waiter:
    """Holds a pending outcome until the value is needed, then applies it."""

    def __init__(self, pending: Outcome, evaluation: Evaluation) -> None:
        self.pending = pending
        self.evaluation = evaluation
        self.wait_on_import = pending.launch is not None and pending.launch.in_process
        self.done = False
        self.lock = threading.RLock()
        self.busy = False

    def audit(self, event: str, args: tuple[object, ...]) -> None:
        if self.done:
            return
        try:
            if event == "import":
                name = str(args[0]) if args else ""
                if not self.wait_on_import or name.split(".")[0] != "torch":
                    return
            elif event not in SPAWN_EVENTS:
                return
            target = args[-1] if event in ENV_LAST and args else None
            self.finish(target if isinstance(target, MutableMapping) else None)
        except Exception:  # never abort the process start or the import
            pass

    def finish(self, environ: MutableMapping[str, str] | None = None) -> None:
        """Wait for the child, then apply the outcome (once)."""
        with self.lock:
            if self.done or self.busy:  # done, or our own import/process start
                return
            self.busy = True
            try:
                try:
                    result: tuple[int, tuple[str, ...]] | ConfigError = (
                        self.evaluation.result()
                    )
                except ConfigError as exc:
                    result = exc
                except Exception as exc:
                    why = f"internal error ({type(exc).__name__}: {exc})"
                    result = ConfigError(why)
                outcome = conclude(os.environ, self.pending, result)
                if environ is None or environ is os.environ:
                    apply(outcome)
                else:
                    apply(outcome, os.environ, environ)
            finally:
                self.done = True

    def at_exit(self) -> None:
        if not self.done:
            self.done = True
            self.evaluation.end()


def start_pending(pending: Outcome) -> None:
    """Start the evaluation for a pending outcome and wait for it when needed."""
    launch = pending.launch
    try:
        evaluation = Evaluation(launch.args if launch else (), os.environ,
                                pending.world_size)  # fmt: skip
    except (OSError, ConfigError) as exc:
        apply(failed(pending.how, f"--module/--config: cannot evaluate: {exc}"))
        return
    waiter = _Waiter(pending, evaluation)
    sys.addaudithook(waiter.audit)
    atexit.register(waiter.at_exit)

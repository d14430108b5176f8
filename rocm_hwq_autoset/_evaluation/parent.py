"""The ``--module`` evaluation, parent side: runs in the launcher (torchrun) or
the training process itself. Uses the cache, or starts the child
(``child``), waits for it only when its value is needed, and ends it.

At interpreter start the hook calls :func:`start` and the process goes on: a
torchrun launcher has its own work to do (importing torch, the rendezvous with
the other nodes). The value is needed, and waited for, only

* before this process starts another: Python's audit events ``subprocess.Popen``,
  ``os.fork``, ``os.system`` ... come before a process starts. torch's elastic
  agent starts each worker with ``Popen(args, env=<a copy of os.environ plus
  rank variables>)``: the value goes into ``os.environ`` and into that mapping.
  ``os.posix_spawn`` and ``os.execve`` read their environment before their
  audit event, and ``multiprocessing``'s spawn and forkserver start processes
  with no audit event at all (``_posixsubprocess.fork_exec``): while the value
  is pending, those functions are wrapped to wait first, and put back after;
* before this process imports torch, when it is the training process itself
  (``python -m torchtitan.train``): the ``import`` audit event;
* never at exit, which only ends the child.

After the value is in, a mapping handed to ``subprocess.Popen`` that lacks it
(made before it arrived) gets it too; one the launcher gave a value of its own
keeps it. A process forked from this one never waits on or ends the evaluation.

Only the evaluation's own failures become a warning. Anything else that happens
while waiting passes through unchanged after the child is ended: an exception
raised by a signal handler (torch elastic's ``SignalException`` on SIGTERM or
SIGINT), ``KeyboardInterrupt``, ``SystemExit``. So the launcher stops exactly as
it would without the hook.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import select
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping, MutableMapping, Sequence
from typing import Any

from .._argv import MODULE_FORM, Launch
from .._config import ConfigError
from .._decision import (
    SKIP,
    WARNING,
    Outcome,
    conclude,
    failed,
    internal_error,
)
from .._environ import INPUTS, ORIGIN, QUEUES, SWITCH, TIMEOUT, timeout
from .cache import Cache, key, open_cache
from .result_text import decode_result

TYPE_CHECKING = False
if TYPE_CHECKING:
    from .result_text import Evaluated

    #: ``_hook.apply``: set an outcome in ``os.environ`` (and in the mappings
    #: given), and say it unless ``quiet``.
    Apply = Callable[..., None]

CHILD = "rocm_hwq_autoset._evaluation.child"
#: Audit events that come before this process starts another.
SPAWN_EVENTS = frozenset({
    "subprocess.Popen", "os.posix_spawn", "os.exec", "os.fork", "os.forkpty",
    "os.spawn", "os.system", "pty.spawn",
})  # fmt: skip
#: Functions that turn the environment into the new process's before their audit
#: event, or have none: wrapped to wait first while the value is pending.
WRAPPED = (
    ("os", "posix_spawn"),
    ("os", "posix_spawnp"),
    ("os", "execve"),
    ("_posixsubprocess", "fork_exec"),
)
#: The most the child may print: one JSON line of a few KB.
MAX_RESULT_BYTES = 1 << 20
#: Seconds an exiting process waits for the ended child to be reaped.
REAP_SECONDS = 1.0
#: Seconds an exiting process gives a child that answered to store its answer
#: in the cache (it takes a few tenths of a second for torchtitan 0.3.0).
STORE_SECONDS = 2.0


class Evaluation:
    """One child interpreter evaluating ``--module``/``--config`` arguments."""

    def __init__(
        self,
        args: Sequence[str],
        environ: Mapping[str, str],
        cache: Cache | None = None,
        cache_key: str = "",
    ) -> None:
        self.timeout, problem = timeout(environ)
        if problem is not None:
            raise ConfigError(problem, TIMEOUT)
        self.deadline = time.monotonic() + self.timeout
        self.owner = os.getpid()
        command = [sys.executable, "-m", CHILD, "--parent", str(self.owner)]
        if cache is not None:
            command += ["--cache", cache.path, "--key", cache_key]
        # The child sees what the training sees: the same GPUs, this directory
        # (recipe modules outside torchtitan import from it). Its own session,
        # so that ending it ends anything it started; stdin is the pipe it
        # watches for this process's end.
        self.child = subprocess.Popen(
            [*command, "--", *args],
            env={**environ, SWITCH: "0"},  # no hook in the child
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )

    def result(self) -> tuple[Evaluated | ConfigError, bool]:
        """The evaluation (or why there is none) and whether it came from the
        cache, waiting until the deadline at most. A child that answered is
        left to finish (it stores its answer in the cache after giving it);
        any other ends here. Raises only what does not belong to the
        evaluation (a signal handler's exception ...), after ending the child."""
        try:
            line = self._read_line()
        except OSError as exc:
            self.end()
            return ConfigError(f"reading the evaluation: {exc.strerror}"), False
        except BaseException:
            self.end()
            raise
        if line is None:
            self.end()
            return ConfigError(
                f"evaluating took over {self.timeout:g} s ({TIMEOUT})"
            ), False
        try:
            doc = json.loads(line)
            if "error" in doc:
                error = ConfigError(str(doc["error"]), str(doc.get("source") or ""))
                return error, False
            return decode_result(doc), doc.get("how") in ("cache", "peer")
        except (ValueError, TypeError, KeyError, AttributeError, ConfigError):
            self.settle(REAP_SECONDS)  # its own status, if it is ending anyway
            status = self.child.returncode
            if status is not None and status < 0:
                how = f"signal {-status}"
            else:
                how = f"status {status}"
            return ConfigError(f"the evaluating child ended with {how}"), False

    def _read_line(self) -> bytes | None:
        """The child's first line (or all it wrote before EOF); None at the
        deadline."""
        assert self.child.stdout is not None
        fd = self.child.stdout.fileno()
        data = b""
        while b"\n" not in data and len(data) <= MAX_RESULT_BYTES:
            remaining = self.deadline - time.monotonic()
            if remaining <= 0:
                return None
            ready, _, _ = select.select([fd], [], [], remaining)
            if not ready:
                continue
            chunk = os.read(fd, 65536)
            if not chunk:
                break
            data += chunk
        return data.partition(b"\n")[0]

    def settle(self, limit: float | None = None) -> None:
        """Let a child that answered finish storing its answer, until the
        deadline or for ``limit`` seconds at most; then end it."""
        if os.getpid() == self.owner:
            left = self.deadline - time.monotonic()
            if limit is not None:
                left = min(left, limit)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.child.wait(max(left, 0))
        self.end()

    def reap(self) -> None:
        """Collect a child that finished, so that no zombie stays behind."""
        if os.getpid() == self.owner:
            self.child.poll()

    def end(self) -> None:
        """End the child's whole process group if it still runs; reap it,
        waiting a bounded time. Only the process that started it does."""
        if os.getpid() != self.owner:
            return
        self._close()
        if self.child.poll() is None:
            with contextlib.suppress(OSError):  # it ended meanwhile
                os.killpg(self.child.pid, signal.SIGKILL)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.child.wait(REAP_SECONDS)

    def disown(self) -> None:
        """In a forked copy of the parent: let go of the pipes, leave the child."""
        self._close()

    def _close(self) -> None:
        for pipe in (self.child.stdin, self.child.stdout):
            if pipe is not None:
                with contextlib.suppress(OSError):
                    pipe.close()


def evaluate(
    launch: Launch, environ: Mapping[str, str], *, use_cache: bool = True
) -> tuple[Evaluated | ConfigError, str]:
    """Evaluate now and wait, for the command line: the result, and how it was
    found (``cache``, ``evaluated``, or why the cache was not used)."""
    cache = None
    how = "evaluated (--no-cache)"
    if use_cache:
        try:
            cache, problem = open_cache(environ)
        except ConfigError as exc:
            cache, problem = None, str(exc)
        how = f"evaluated ({problem})" if problem else "evaluated"
    cache_key = key(launch.args, environ)
    if cache is not None:
        found, why = cache.lookup(cache_key, environ)
        if found is not None:
            return found, f"from the cache ({cache.entry(cache_key)})"
        how = f"evaluated (cache: {why})"
    try:
        evaluation = Evaluation(launch.args, environ, cache, cache_key)
    except (OSError, ConfigError) as exc:
        return ConfigError(f"cannot start the evaluation: {exc}"), how
    try:
        result, cached = evaluation.result()
    finally:
        evaluation.settle()  # the answer stored in the cache, for the launches
    return result, ("from the cache (another process evaluated it)" if cached else how)


def start(launch: Launch, apply: Apply) -> None:
    """At interpreter start: the cached evaluation, or a child started now and
    waited for when the value is needed."""
    environ = os.environ
    try:
        cache, problem = open_cache(environ)
    except ConfigError as exc:
        cache, problem = None, ""
        apply(Outcome(WARNING, str(exc), "the cache is not used"))
    if problem:
        apply(Outcome(SKIP, f"cache: {problem}"))
    cache_key = key(launch.args, environ)
    if cache is not None:
        found, why = cache.lookup(cache_key, environ)
        if found is not None:
            apply(conclude(environ, launch, found, cached=True))
            return
        apply(Outcome(SKIP, f"cache: {why}; evaluating"))
    try:
        evaluation = Evaluation(launch.args, environ, cache, cache_key)
    except (OSError, ConfigError) as exc:
        error = ConfigError(f"cannot start the evaluation: {exc}")
        apply(failed(MODULE_FORM, error))
        return
    Waiter(launch, evaluation, apply).install()


class Waiter:
    """Holds a pending outcome until the value is needed, then applies it."""

    def __init__(self, launch: Launch, evaluation: Evaluation, apply: Apply) -> None:
        self.launch = launch
        self.evaluation = evaluation
        self.apply = apply
        self.outcome: Outcome | None = None
        """The concluded outcome, once it is."""
        self.abandoned = False
        """Set when the wait was cut short (a signal) or the process exits: no
        waiting any more."""
        self.owner = os.getpid()
        self.lock = threading.RLock()
        self.asked = False
        """Set for good when one thread starts waiting: the evaluation is asked
        once, and our own events while it is pass."""
        self.wrapped: list[tuple[Any, str, Any, Any]] = []

    def install(self) -> None:
        sys.addaudithook(self.audit)  # cannot be removed: cheap once done
        os.register_at_fork(after_in_child=self.forked)
        atexit.register(self.at_exit)
        for module_name, name in WRAPPED:
            module = sys.modules.get(module_name)
            original = getattr(module, name, None)
            if original is not None:
                wrapper = self._waiting_first(original)
                setattr(module, name, wrapper)
                self.wrapped.append((module, name, original, wrapper))

    def audit(self, event: str, args: tuple[Any, ...]) -> None:
        if event in SPAWN_EVENTS:
            target = args[-1] if event == "subprocess.Popen" and args else None
            self.need(target if isinstance(target, MutableMapping) else None)
        elif (
            event == "import"
            and self.outcome is None
            and self.launch.in_process
            and args
            and str(args[0]).partition(".")[0] == "torch"
        ):
            self.need()

    def _waiting_first(self, original: Callable[..., Any]) -> Callable[..., Any]:
        def waiting(*args: Any, **kwargs: Any) -> Any:
            environ = kwargs.get("env", args[2] if len(args) > 2 else None)
            self.need(environ if isinstance(environ, MutableMapping) else None)
            return original(*args, **kwargs)

        return waiting

    def need(self, environ: MutableMapping[str, str] | None = None) -> None:
        """The value is needed now: wait for it (once, in one thread; the
        others wait for that one), then put it where the process about to
        start will see it. Raises only what is not the evaluation's: the
        process start or import it guards must not fail for our sake."""
        try:
            self._need(environ)
        except BaseException as exc:
            if is_foreign(exc):
                raise

    def _need(self, environ: MutableMapping[str, str] | None) -> None:
        if self.outcome is None and not self.abandoned and os.getpid() == self.owner:
            with self.lock:  # the others wait for the one that asks
                if not self.asked and not self.abandoned:
                    self.asked = True
                    self.outcome = self._conclude()
                    self._unwrap()
                    self.apply(self.outcome)
        self.evaluation.reap()  # a child that answered and ended: no zombie
        if environ is not None and environ is not os.environ:
            self._give(environ)

    def _conclude(self) -> Outcome:
        try:
            result, cached = self.evaluation.result()
            return conclude(os.environ, self.launch, result, cached=cached)
        except BaseException as exc:
            if is_foreign(exc):
                self.abandoned = True
                self._unwrap()
                raise
            # Never a traceback from our own failure.
            return failed(MODULE_FORM, ConfigError(internal_error(exc)))

    def _give(self, environ: MutableMapping[str, str]) -> None:
        """A mapping made before the value arrived lacks it: add it. One that
        has a value or a marker of its own (the launcher's) keeps it."""
        outcome = self.outcome
        if outcome is None:
            return
        if QUEUES in environ or ORIGIN in environ or INPUTS in environ:
            return
        self.apply(outcome, environ, quiet=True)

    def _unwrap(self) -> None:
        for module, name, original, wrapper in self.wrapped:
            if getattr(module, name, None) is wrapper:  # nobody wrapped ours since
                setattr(module, name, original)

    def forked(self) -> None:
        """In a child made by ``os.fork``: this copy lets go of the pipes. Like
        a copy made by C code's ``fork``, which runs no at-fork handler, it
        never waits on, nor ends, the parent's evaluation: only the owner
        does."""
        if os.getpid() != self.owner:
            self.evaluation.disown()

    def at_exit(self) -> None:
        """Ends the child; one that answered may first store its answer, for a
        bounded time."""
        if os.getpid() == self.owner:
            self.abandoned = True
            if self.outcome is not None:
                self.evaluation.settle(STORE_SECONDS)
            else:
                self.evaluation.end()


def is_foreign(exc: BaseException) -> bool:
    """Whether an exception raised while waiting belongs to the process, not to
    the evaluation: ``KeyboardInterrupt``, ``SystemExit``, or anything raised by
    a Python signal handler (torch elastic raises ``SignalException``, an
    ``Exception``, from its SIGTERM and SIGINT handlers)."""
    if not isinstance(exc, Exception):
        return True
    handlers = set()
    for signum in signal.valid_signals():
        # A function's code; a bound method's is its function's.
        code = getattr(signal.getsignal(signum), "__code__", None)
        if code is not None:
            handlers.add(code)
    tb = exc.__traceback__
    while tb is not None:
        if tb.tb_frame.f_code in handlers:
            return True
        tb = tb.tb_next
    return False

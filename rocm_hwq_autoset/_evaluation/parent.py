"""The ``--module`` evaluation, parent side: runs in the launcher (torchrun) or
the training process itself. Uses the cache, or starts the child
(``child``), waits for it only when its value is needed, and ends it
(:func:`lookup_or_spawn` serves the command line, which waits, and the hook,
which goes on).

A cached value is applied at once, and checked in the background: a child at
the lowest CPU priority evaluates again, ignoring the entry, once per node, and
ends with this process at the latest; when its answer differs it corrects the
entry and says so in one line on this process's stderr, in the same launch
(:class:`Check`). So a cached value is right, or the launch says it was not and
the next launch gets the right one, whatever the evaluation read that no
recording sees.

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
  is pending, those functions are wrapped to wait first, and put back after
  (``spawns``);
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
from .._environ import QUIET, SWITCH, TIMEOUT, log_level, prints_for_node, timeout
from .cache import Cache, key, open_cache
from .result_text import decode_result, encode_inputs
from .spawns import SPAWN_EVENTS, Wrappers, give, mapping_of

TYPE_CHECKING = False
if TYPE_CHECKING:
    from .result_text import Evaluated

    #: ``_hook.apply``: set an outcome in ``os.environ`` (and in the mappings
    #: given), and say it unless ``quiet``.
    Apply = Callable[..., None]

CHILD = "rocm_hwq_autoset._evaluation.child"
#: The most the child may print: one JSON line of a few KB.
MAX_RESULT_BYTES = 1 << 20
#: Seconds an exiting process waits for the ended child to be reaped.
REAP_SECONDS = 1.0
#: Seconds an exiting process gives a child that answered to store its answer
#: in the cache (it takes a few tenths of a second for torchtitan 0.3.0).
STORE_SECONDS = 2.0


#: The interpreter options that change where imports come from, and the first
#: ``sys.path`` entry the interpreter puts before the rest (None: none).
Interpreter = tuple[tuple[str, ...], "str | None"]


def interpreter_of(launch: Launch, environ: Mapping[str, str]) -> Interpreter:
    """How the interpreter that runs the training finds modules, so that the
    child imports the recipe, its helpers and torchtitan from where the
    training will: its options ``-I``, ``-E``, ``-s``, ``-P`` (this process's,
    when the training runs here; torchrun starts its workers with none), and
    what goes first on ``sys.path``: the script's directory (symlinks
    resolved, as CPython does), the working directory for ``-m`` and ``-c``,
    nothing in safe-path or isolated mode."""
    kind, name = launch.program
    if launch.in_process:
        flags = tuple(
            flag
            for flag, on in (
                ("-I", sys.flags.isolated),
                ("-E", sys.flags.ignore_environment),
                ("-s", sys.flags.no_user_site),
                ("-P", getattr(sys.flags, "safe_path", False)),  # 3.11+
            )
            if on
        )
        safe = bool(sys.flags.isolated or getattr(sys.flags, "safe_path", False))
    else:  # a worker: ``python -u PROGRAM``, in this environment
        flags = ()
        safe = sys.version_info >= (3, 11) and bool(environ.get("PYTHONSAFEPATH"))
    if safe:
        return flags, None
    if kind == "script":
        return flags, os.path.dirname(os.path.realpath(name))
    return flags, os.getcwd()


def launch_key(launch: Launch, environ: Mapping[str, str]) -> str:
    """The cache's key for this launch: its arguments, in this environment,
    run by the interpreter that runs the training (:func:`interpreter_of`)."""
    return key(launch.args, environ, interpreter_of(launch, environ))


def child_command(interpreter: Interpreter | None, *options: str) -> list[str]:
    """``python [OPTIONS] -m CHILD OPTIONS [--path0 DIR | --no-path0 1]``: the
    child's own interpreter, told where the training's imports come from first
    (None: as a ``python -m`` in this directory, the child's own)."""
    if interpreter is None:
        return [sys.executable, "-m", CHILD, *options]
    flags, path0 = interpreter
    where = ["--no-path0", "1"] if path0 is None else ["--path0", path0]
    return [sys.executable, *flags, "-m", CHILD, *options, *where]


class Evaluation:
    """One child interpreter evaluating ``--module``/``--config`` arguments."""

    def __init__(
        self,
        args: Sequence[str],
        environ: Mapping[str, str],
        cache: Cache | None = None,
        cache_key: str = "",
        interpreter: Interpreter | None = None,
        *,
        fresh: bool = False,
    ) -> None:
        self.timeout, problem = timeout(environ)
        if problem is not None:
            raise ConfigError(problem, TIMEOUT)
        self.deadline = time.monotonic() + self.timeout
        self.owner = os.getpid()
        options = ["--parent", str(self.owner)]
        if cache is not None:
            options += ["--cache", cache.path, "--key", cache_key]
            if fresh:  # never the entry, nor a peer's answer: evaluated here
                options += ["--fresh", "1"]
        command = child_command(interpreter, *options)
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


class Found:
    """What :func:`lookup_or_spawn` found: the cache's answer, or the child
    started to evaluate (or why none could start), and how."""

    def __init__(self, cache: Cache | None, cache_key: str) -> None:
        self.cache = cache
        self.key = cache_key
        self.hit: Evaluated | None = None
        """The entry's result, when it was used."""
        self.evaluation: Evaluation | None = None
        """The child evaluating, when there was no hit."""
        self.error: ConfigError | None = None
        """Why no child could start."""
        self.unreadable: ConfigError | None = None
        """The cache switch's value, when it cannot be read (no cache then)."""
        self.problem = ""
        """Why there is no cache, when it is on (``""`` when it is off)."""
        self.missed = ""
        """Why the entry was not used (``no entry``, ``stale: ...``)."""


def lookup_or_spawn(
    launch: Launch,
    environ: Mapping[str, str],
    *,
    use_cache: bool = True,
    fresh: bool = False,
) -> Found:
    """The cache first, then the child: the entry for this launch when it is
    trusted and nothing it read changed for ``environ``, else a child started
    to evaluate it (told to store its answer when there is a cache). ``fresh``:
    never the entry, always a child, whose answer the cache then holds.
    Waits for nothing: :func:`evaluate` waits, :func:`start` goes on."""
    cache = None
    problem = ""
    unreadable = None
    if use_cache:
        try:
            cache, problem = open_cache(environ)
        except ConfigError as exc:
            unreadable = exc
    runs = interpreter_of(launch, environ)
    found = Found(cache, key(launch.args, environ, runs))  # launch_key's, reusing runs
    found.unreadable, found.problem = unreadable, problem
    if cache is not None and not fresh:
        hit, found.missed = cache.lookup(found.key, environ)
        if hit is not None:
            found.hit = hit
            return found
    try:
        found.evaluation = Evaluation(
            launch.args, environ, cache, found.key, runs, fresh=fresh
        )
    except (OSError, ConfigError) as exc:
        found.error = ConfigError(f"cannot start the evaluation: {exc}")
    return found


def evaluate(
    launch: Launch,
    environ: Mapping[str, str],
    *,
    use_cache: bool = True,
    fresh: bool = False,
) -> tuple[Evaluated | ConfigError, str]:
    """Evaluate now and wait, for the command line: the result, and how it was
    found (``cache``, ``evaluated``, or why the cache was not used). ``fresh``
    (for a value that leaves the package, ``explain --export``, or judges a
    run, ``verify``): evaluated now, never from the cache, which then holds
    the answer."""
    found = lookup_or_spawn(launch, environ, use_cache=use_cache, fresh=fresh)
    if found.hit is not None and found.cache is not None:
        return found.hit, f"from the cache ({found.cache.entry(found.key)})"
    if not use_cache:
        how = "evaluated (--no-cache)"
    elif fresh and found.cache is not None:
        how = "evaluated (never from the cache here; the cache holds the answer)"
    elif found.unreadable is not None or found.problem:
        how = f"evaluated ({found.unreadable or found.problem})"
    elif found.cache is not None:
        how = f"evaluated (cache: {found.missed})"
    else:
        how = "evaluated"
    evaluation = found.evaluation
    if evaluation is None:
        assert found.error is not None
        return found.error, how
    try:
        result, cached = evaluation.result()
    finally:
        evaluation.settle()  # the answer stored in the cache, for the launches
    return result, ("from the cache (another process evaluated it)" if cached else how)


def start(launch: Launch, apply: Apply) -> None:
    """At interpreter start: the cached evaluation, applied at once and checked
    in the background, or a child started now and waited for when the value is
    needed."""
    environ = os.environ
    found = lookup_or_spawn(launch, environ)
    if found.unreadable is not None:
        apply(Outcome(WARNING, str(found.unreadable), "the cache is not used"))
    if found.problem:
        apply(Outcome(SKIP, f"cache: {found.problem}"))
    if found.hit is not None and found.cache is not None:
        before = dict(environ)  # as the child of a launch that missed sees it
        apply(conclude(environ, launch, found.hit, cached=True))
        if prints_for_node(before):  # the node's one: launcher or local rank 0
            Check.start(launch, before, found.cache, found.key, found.hit, apply)
        return
    if found.cache is not None:
        apply(Outcome(SKIP, f"cache: {found.missed}; evaluating"))
    if found.evaluation is None:
        assert found.error is not None
        apply(failed(MODULE_FORM, found.error))
        return
    Waiter(launch, found.evaluation, apply).install()


class Check:
    """The background check of a cached answer: a child that evaluates again,
    ignoring the entry (``child --check``), at the lowest CPU priority from its
    start, in its own process group, watching this process as an evaluating
    child does (it ends when this process does, whatever ends it; at exit this
    process ends it). One per node: the child gives way when another process
    of the node checks. It corrects the entry and says so, itself, in one line
    on this process's stderr (a copy of the descriptor it is given) when its
    answer differs; nothing at all when the log level is quiet. This process
    never waits for it."""

    def __init__(
        self,
        launch: Launch,
        environ: Mapping[str, str],
        cache: Cache,
        cache_key: str,
        cached: Evaluated,
    ) -> None:
        self.owner = os.getpid()
        level, _ = log_level(environ)
        say = -1 if level == QUIET else _copy_of_stderr()
        options = ["--parent", str(self.owner), "--cache", cache.path,
                   "--key", cache_key, "--check", encode_inputs(cached[0])]  # fmt: skip
        if say >= 0:
            options += ["--say", str(say)]
        command = child_command(interpreter_of(launch, environ), *options)
        try:
            self.child = subprocess.Popen(
                [*command, "--", *launch.args],
                env={**environ, SWITCH: "0"},  # no hook in the child
                stdin=subprocess.PIPE,  # the pipe it watches for our end
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                start_new_session=True,
                pass_fds=(say,) if say >= 0 else (),
            )
        finally:
            if say >= 0:
                os.close(say)

    @classmethod
    def start(
        cls,
        launch: Launch,
        environ: Mapping[str, str],
        cache: Cache,
        cache_key: str,
        cached: Evaluated,
        apply: Apply,
    ) -> Check | None:
        """Start the check, never failing the start-up: one that cannot start
        is one line in verbose mode, and the entry stays as it is."""
        try:
            check = cls(launch, environ, cache, cache_key, cached)
        except Exception as exc:
            apply(Outcome(SKIP, f"cache: the background check cannot start: {exc}",
                          "the cached value stays"))  # fmt: skip
            return None
        os.register_at_fork(after_in_child=check.forked)
        atexit.register(check.at_exit)
        return check

    def forked(self) -> None:
        """A copy made by ``os.fork`` lets go of the pipe: only the owner's end
        keeps the check alive."""
        if os.getpid() != self.owner and self.child.stdin is not None:
            with contextlib.suppress(OSError):
                self.child.stdin.close()

    def at_exit(self) -> None:
        """Ends the check's whole group if it still runs; reaps it."""
        if os.getpid() != self.owner:
            return
        if self.child.stdin is not None:
            with contextlib.suppress(OSError):
                self.child.stdin.close()
        if self.child.poll() is None:
            with contextlib.suppress(OSError):  # it ended meanwhile
                os.killpg(self.child.pid, signal.SIGKILL)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.child.wait(REAP_SECONDS)


def _copy_of_stderr() -> int:
    """A descriptor for this process's stderr, for the check's line; -1 when
    there is none."""
    try:
        return os.dup(2)
    except OSError:
        return -1


class Waiter:
    """Holds a pending outcome until the value is needed, then applies it. The
    process starts it watches are ``spawns``'."""

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
        self.wrappers = Wrappers(self.need)

    def install(self) -> None:
        sys.addaudithook(self.audit)  # cannot be removed: cheap once done
        os.register_at_fork(after_in_child=self.forked)
        atexit.register(self.at_exit)
        self.wrappers.install()

    def audit(self, event: str, args: tuple[Any, ...]) -> None:
        if event in SPAWN_EVENTS:
            self.need(mapping_of(event, args))
        elif (
            event == "import"
            and self.outcome is None
            and self.launch.in_process
            and args
            and str(args[0]).partition(".")[0] == "torch"
        ):
            self.need()

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
                    self.wrappers.remove()
                    self.apply(self.outcome)
        self.evaluation.reap()  # a child that answered and ended: no zombie
        outcome = self.outcome
        if environ is not None and environ is not os.environ and outcome is not None:
            give(outcome, environ, self.apply)

    def _conclude(self) -> Outcome:
        try:
            result, cached = self.evaluation.result()
            return conclude(os.environ, self.launch, result, cached=cached)
        except BaseException as exc:
            if is_foreign(exc):
                self.abandoned = True
                self.wrappers.remove()
                raise
            # Never a traceback from our own failure.
            return failed(MODULE_FORM, ConfigError(internal_error(exc)))

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

"""One child interpreter of the ``--module`` evaluation, both sides of it: the
parent's handle (start it in the training's interpreter, in a process group of
its own, end and reap it within a bound, let go of it after a fork) and the
child's own part (watch the parent, drop to the lowest priority, take the
node's lock)."""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import select
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence

from .._argv import Launch
from .._config import ConfigError
from .._decision import SKIP, Outcome
from .._environ import QUIET, SWITCH, TIMEOUT, log_level, timeout
from .._model import encode_inputs
from .answer import decode_result
from .cache import Cache, key

TYPE_CHECKING = False
if TYPE_CHECKING:
    from .._model import Evaluated

    #: ``_hook.apply``: set an outcome in ``os.environ`` (and in the mappings
    #: given), and say it unless ``quiet``.
    Apply = Callable[..., None]


CHILD = "rocm_hwq_autoset._evaluation.child"


#: The most the child may print: one JSON line of a few KB.
MAX_RESULT_BYTES = 1 << 20


#: Seconds an exiting process waits for the ended child to be reaped.
REAP_SECONDS = 1.0


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


PR_SET_PDEATHSIG = 1


def watch(parent: int) -> None:
    """End this process, and every process it started, as soon as ``parent``
    is gone, however it ended.

    A reaper process, forked first, waits for that: for EOF on stdin (the pipe
    the parent holds open until it no longer wants the answer) and, on Linux,
    for this process's death, which the kernel's parent-death signal makes
    follow the parent's at once. Then it kills the whole process group. It is
    a process of its own so that nothing this one does (a long import holding
    the GIL) can delay it.
    """
    if os.getppid() != parent:  # it died before the watch began
        os._exit(1)
    reaper = os.fork()
    if reaper == 0:
        _reap(os.getppid())
    _die_with(parent, signal.SIGKILL)


def _reap(child: int) -> None:
    """The reaper: kill the process group when the pipe closes or ``child``
    dies. Never returns."""
    quiet = os.open(os.devnull, os.O_RDWR)
    os.dup2(quiet, 1)  # the parent's EOF on the answer must not wait for us
    os.dup2(quiet, 2)
    signal.signal(signal.SIGTERM, lambda signum, frame: _end_group())
    _die_with(child, signal.SIGTERM)
    try:
        while os.read(0, 4096):
            pass
    except OSError:
        pass
    _end_group()


def _die_with(parent: int, signum: int) -> None:
    """Ask the kernel for ``signum`` when ``parent`` dies (Linux)."""
    if sys.platform.startswith("linux"):
        try:
            import ctypes

            ctypes.CDLL(None).prctl(PR_SET_PDEATHSIG, signum)
        except Exception:  # no prctl: the pipe alone
            pass
    if os.getppid() != parent:  # it died before the request
        _end_group()


def _end_group() -> None:
    os.killpg(os.getpgid(0), signal.SIGKILL)
    os._exit(1)  # pragma: no cover - killpg killed us


def lowest_priority() -> None:
    """This process at the lowest CPU priority: nice 19 and, on Linux, the idle
    scheduling class (it runs only when a CPU has nothing else to do)."""
    with contextlib.suppress(OSError):
        os.nice(19)  # from any niceness: 19 is the ceiling
    idle = getattr(os, "SCHED_IDLE", None)
    if idle is not None and hasattr(os, "sched_setscheduler"):
        with contextlib.suppress(OSError):
            os.sched_setscheduler(0, idle, os.sched_param(0))


def _check_lock(path: str) -> bool:
    """Whether this process may check: it holds the node's check lock (until it
    ends), or locks cannot be had there (it checks alone). False when another
    process holds it."""
    import fcntl

    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    except OSError:
        return True
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return False
    except OSError:  # no locks here (an NFS mount without them): alone
        pass
    return True

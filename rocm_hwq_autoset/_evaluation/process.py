"""One child interpreter of the ``--module`` evaluation, both sides of its life
(as coverage.py keeps a feature that spans two processes in one module; the
policy, what to ask it and when to wait, is ``parent``'s).

The parent's side is :class:`Child`: started in the interpreter that runs the
training (:func:`interpreter_of`), with the hook off, its stdin a pipe it
watches for the parent's end and its stdout the pipe its lines come on, in a
session of its own, so that ending its group ends everything it started; read
line by line until a deadline; ended and reaped within a bound, at exit at the
latest; let go of in a copy of the parent made by ``os.fork``.

Between the two, the child's first step, before ``exec``: the kernel is asked
to kill it at the parent's end (:func:`dies_with_this_process`), so that no
child outlives its parent, stopped or not, before its own watch begins.

The child's side: :func:`watch` the parent (the child ends, with everything it
started, as soon as the parent is gone, whatever ended it), drop to the
:func:`lowest_priority`.
"""

from __future__ import annotations

import atexit
import contextlib
import errno
import math
import os
import select
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence

from .._argv import Launch
from .._environ import SWITCH

CHILD = "rocm_hwq_autoset._evaluation.child"
#: The most one line of the child may hold: its answers are a few KB.
MAX_LINE_BYTES = 1 << 20
#: Seconds an exiting process waits for the ended child to be reaped.
REAP_SECONDS = 1.0
PR_SET_PDEATHSIG = 1

#: The interpreter options that change where imports come from, and the first
#: ``sys.path`` entry the interpreter puts before the rest (None: none).
Interpreter = tuple[tuple[str, ...], "str | None"]


def interpreter_of(launch: Launch, environ: Mapping[str, str]) -> Interpreter:
    """How the interpreter that runs the training finds modules, so that the
    child imports the recipe, its helpers and torchtitan from where the
    training will: its options ``-I``, ``-E``, ``-s``, ``-P`` and those that
    change how code runs (this process's, when the training runs here; torchrun
    starts its workers with none), and
    what goes first on ``sys.path``: the script's directory (symlinks
    resolved, as CPython does), the working directory for ``-m`` and ``-c``,
    nothing in safe-path or isolated mode."""
    kind, name = launch.program
    if launch.in_process:
        flags = (
            tuple(
                flag
                for flag, on in (
                    ("-I", sys.flags.isolated),
                    ("-E", sys.flags.ignore_environment),
                    ("-s", sys.flags.no_user_site),
                    ("-P", getattr(sys.flags, "safe_path", False)),  # 3.11+
                )
                if on
            )
            + running_options()
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


def running_options() -> tuple[str, ...]:
    """This interpreter's options that change how the config's code runs, as
    options again: ``-O`` (``__debug__``, asserts), ``-b``, each ``-W`` and
    ``-X`` (``dev``, ``utf8`` ...), in the order CPython keeps them. The
    environment's (``PYTHONOPTIMIZE`` ...) reach the child with the
    environment."""
    options = ["-O"] * sys.flags.optimize + ["-b"] * sys.flags.bytes_warning
    for warning in sys.warnoptions:
        options += ["-W", warning]
    for name, value in sys._xoptions.items():
        options += ["-X", name if value is True else f"{name}={value}"]
    return tuple(options)


#: The folder this package is imported from, where the child finds it before
#: ``site`` has run.
FOLDER = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
#: How the child starts: ``python -S -c BOOT`` (with the training's own
#: interpreter options), so that ``site`` runs in the child, recorded.
BOOT = "import sys; sys.path.insert(0, {folder!r}); from {child} import boot; boot()"


def child_command(interpreter: Interpreter | None, *options: str) -> list[str]:
    """``python [FLAGS] -S -c BOOT OPTIONS [--path0 DIR | --no-path0]``: the
    child's own interpreter, which runs ``site`` itself (recorded: ``child``),
    told where the training's imports come from first (None: as a ``python
    -m`` in this directory, the child's own)."""
    start = ["-S", "-c", BOOT.format(folder=FOLDER, child=CHILD)]
    if interpreter is None:  # -c, as -m, puts this directory first
        return [sys.executable, *start, *options]
    flags, path0 = interpreter
    where = ["--no-path0"] if path0 is None else ["--path0", path0]
    return [sys.executable, *flags, *start, *options, *where]


class Child:
    """A child interpreter of the evaluation, from its parent's side, for its
    whole life: started, read, ended, reaped; let go of after a fork. Only the
    process that started it (its owner) ever waits on or ends it."""

    def __init__(
        self,
        interpreter: Interpreter | None,
        options: Sequence[str],
        args: Sequence[str],
        environ: Mapping[str, str],
        *,
        say: bool = False,
    ) -> None:
        """Start ``python -m CHILD OPTIONS -- ARGS`` with ``environ`` (the hook
        off in it); with ``say``, a copy of this process's stderr is its to
        say its line on (``--say FD``). ``OSError`` if it cannot start."""
        self.owner = os.getpid()
        self.linger = 0.0
        """Seconds it may go on at this process's exit (to store an answer)."""
        self._buffer = b""
        self._eof = False
        held = _hold_stdio()
        fd = _copy_of_stderr() if say and 2 not in held else -1
        if fd >= 0:
            options = [*options, "--say", str(fd)]
        command = child_command(interpreter, *options)
        try:
            # The child sees what the training sees: the same GPUs, this
            # directory. Its own session, so that ending its group ends
            # anything it started; stdin is the pipe it watches for our end.
            self.process = subprocess.Popen(
                [*command, "--", *args],
                env={**environ, SWITCH: "0"},
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                start_new_session=True,
                pass_fds=(fd,) if fd >= 0 else (),
                preexec_fn=dies_with_this_process(),
            )
        finally:
            for own in (*held, fd) if fd >= 0 else held:
                os.close(own)
        os.register_at_fork(after_in_child=self.let_go)
        atexit.register(self.at_exit)

    @property
    def pid(self) -> int:
        return self.process.pid

    def read_line(self, deadline: float) -> bytes | None:
        """The child's next line (at its end: what it wrote before EOF, ``b""``
        for nothing); None if it has none by the deadline (``time.monotonic()``;
        one already past: what is there now, waiting for nothing). ``OSError``
        if the pipe cannot be read."""
        assert self.process.stdout is not None
        fd = self.process.stdout.fileno()
        # poll, not select: a launcher that inherited over a thousand
        # descriptors has this pipe past select's 1023
        poller = select.poll()
        poller.register(fd, select.POLLIN)
        while b"\n" not in self._buffer and not self._eof:
            if len(self._buffer) > MAX_LINE_BYTES:
                break
            remaining = max(deadline - time.monotonic(), 0)
            ready = poller.poll(math.ceil(remaining * 1000))  # milliseconds
            if not ready:
                if remaining == 0:
                    return None
                continue
            chunk = os.read(fd, 65536)
            self._eof = not chunk
            self._buffer += chunk
        line, _, self._buffer = self._buffer.partition(b"\n")
        return line

    def status(self, limit: float) -> str:
        """How the child ended (``status N`` or ``signal N``), waiting ``limit``
        seconds at most for it; ``status None`` if it runs on."""
        self.settle(limit)
        status = self.process.returncode
        if status is not None and status < 0:
            return f"signal {-status}"
        return f"status {status}"

    def settle(self, limit: float) -> None:
        """Let the child finish on its own for ``limit`` seconds at most; then
        end it."""
        if os.getpid() == self.owner:
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.process.wait(max(limit, 0))
        self.end()

    def reap(self) -> None:
        """Collect a child that finished, so that no zombie stays behind."""
        if os.getpid() == self.owner:
            self.process.poll()

    def end(self) -> None:
        """End the child's whole process group if it still runs; reap it,
        waiting a bounded time. Only the process that started it does."""
        if os.getpid() != self.owner:
            return
        self._close()
        if self.process.poll() is None:
            with contextlib.suppress(OSError):  # it ended meanwhile
                os.killpg(self.process.pid, signal.SIGKILL)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.process.wait(REAP_SECONDS)

    def at_exit(self) -> None:
        """This process exits: the child may go on for :attr:`linger`
        seconds (an answer to store), then ends."""
        if os.getpid() == self.owner:
            self.settle(self.linger)

    def let_go(self) -> None:
        """In a copy made by ``os.fork``: let go of the pipes. Like a copy
        made by C code's ``fork``, which runs no at-fork handler, it never
        waits on, nor ends, the child: only the owner does."""
        if os.getpid() != self.owner:
            self._close()

    def _close(self) -> None:
        for pipe in (self.process.stdin, self.process.stdout):
            if pipe is not None:
                with contextlib.suppress(OSError):
                    pipe.close()


def dies_with_this_process() -> Callable[[], None] | None:
    """The child's first step, run between ``fork`` and ``exec``: the kernel
    is asked to SIGKILL it when this process (the thread that starts it) ends,
    before it runs a line of its own, so that a child stopped (SIGSTOP, a
    debugger) before its :func:`watch` begins, or one that never reaches it,
    does not outlive this process holding its pipes (SIGKILL ends a stopped
    process too); one whose parent ended before the request ends at once.
    None where that cannot be asked (not Linux, no ``prctl``): the child's
    :func:`watch` is then its only guard. The C function is found here, before
    the fork: the step itself only calls it (``fork`` copies no other thread,
    and no lock is taken). With a step to run, ``subprocess`` forks rather
    than ``vfork``s, and runs the process's at-fork handlers around it (in the
    child, before ``exec``): at interpreter start, where the package starts its
    children, only those of the standard library and of ``.pth`` files."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        import ctypes

        prctl = ctypes.CDLL(None).prctl
    except Exception:  # no prctl: the child's watch alone
        return None
    parent, request, signum = os.getpid(), PR_SET_PDEATHSIG, int(signal.SIGKILL)

    def first_step() -> None:
        prctl(request, signum)
        if os.getppid() != parent:  # it ended before the request
            os._exit(1)

    return first_step


def _hold_stdio() -> list[int]:
    """Each of the descriptors 0, 1 and 2 this process has closed, held on
    ``/dev/null`` (never inherited) while the child starts, so that none of its
    pipes takes a stdio number: a program with stderr closed would find a pipe
    of ours on 2 (C code's ``stderr``) and its own next file on another number
    than without the package. The caller closes them once the pipes are made."""
    held: list[int] = []
    try:
        while True:
            fd = os.open(os.devnull, os.O_RDWR | os.O_CLOEXEC)
            if fd > 2:
                os.close(fd)
                return held
            held.append(fd)
    except OSError:  # no /dev/null, no descriptor left: as it is
        return held


def _copy_of_stderr() -> int:
    """A descriptor for this process's stderr, for the child's line; -1 when
    there is none."""
    try:
        return os.dup(2)
    except OSError:
        return -1


# The child's side.


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
    _close_all_but_stdio()  # nor a pipe of the launcher's (``--say``)
    signal.signal(signal.SIGTERM, lambda signum, frame: end_group())
    _die_with(child, signal.SIGTERM)
    try:
        while os.read(0, 4096):
            pass
    except OSError:
        pass
    end_group()


def _close_all_but_stdio() -> None:
    """Close every descriptor above 2 (``/proc/self/fd`` lists them: a loop up
    to the limit of open files may take a million calls)."""
    try:
        names = os.listdir("/proc/self/fd")
    except OSError:
        return
    for name in names:
        if int(name) > 2:
            with contextlib.suppress(OSError):  # the listing's own, closed
                os.close(int(name))


def _die_with(parent: int, signum: int) -> None:
    """Ask the kernel for ``signum`` when ``parent`` dies (Linux)."""
    if sys.platform.startswith("linux"):
        try:
            import ctypes

            ctypes.CDLL(None).prctl(PR_SET_PDEATHSIG, signum)
        except Exception:  # no prctl: the pipe alone
            pass
    if os.getppid() != parent:  # it died before the request
        end_group()


def end_group() -> None:
    """End this process's whole group (the child and all it started) now."""
    os.killpg(os.getpgid(0), signal.SIGKILL)
    os._exit(1)  # pragma: no cover - killpg killed us


#: Whether the kernel's autogroup is on: then every session is a scheduling
#: group of its own, and nice or ``SCHED_IDLE`` rank a task only inside its group
#: (sched(7), "The autogroup feature"). Most distributions turn it on.
AUTOGROUP_SWITCH = "/proc/sys/kernel/sched_autogroup_enabled"
#: This process's session's autogroup; writing a nice value to it sets the
#: group's weight against every other group (19: 15 against a nice-0 group's
#: 1024, about 1.4 % of a CPU that a training wants whole).
AUTOGROUP = "/proc/self/autogroup"
#: The kernel takes one autogroup change per tenth of a second from a process
#: without CAP_SYS_ADMIN, machine-wide (``EAGAIN`` meanwhile): tries, that far
#: apart.
AUTOGROUP_TRIES, AUTOGROUP_PAUSE = 12, 0.1


def leads_its_session(pid: int) -> bool:
    """Whether ``pid`` leads a session (its own): the one case where its
    session's autogroup is its alone to lower, never a group it shares with
    others (a test's, a shell's, a launcher's by mistake)."""
    return os.getsid(pid) == pid


def lower_priority_of(pid: int) -> None:
    """The lowest priority (:func:`lowest_priority`) for the child ``pid`` of
    this process, from its parent, as soon as it is started: nice 19, the idle
    class, its session's autogroup at nice 19. ``OSError`` where one of them
    cannot be set (the child then sets them itself, and says why not)."""
    os.setpriority(os.PRIO_PROCESS, pid, 19)
    idle = getattr(os, "SCHED_IDLE", None)
    if idle is not None and hasattr(os, "sched_setscheduler"):
        os.sched_setscheduler(pid, idle, os.sched_param(0))
    if not leads_its_session(pid):
        raise OSError(errno.EPERM, "not the leader of a session of its own")
    fd = os.open(f"/proc/{pid}/autogroup", os.O_WRONLY | os.O_CLOEXEC)
    try:
        os.write(fd, b"19")
    finally:
        os.close(fd)


def lowest_priority() -> str | None:
    """This process at the lowest CPU priority, so that it takes no CPU a
    training wants: nice 19, the idle scheduling class, and, where the kernel
    groups tasks by session (autogroup), its session's group at nice 19 too
    (the child has a session of its own). None when that is so, else why not:
    then its CPU share against a training in another session is not small."""
    with contextlib.suppress(OSError):
        os.nice(19)  # from any niceness: 19 is the ceiling
    idle = getattr(os, "SCHED_IDLE", None)
    if idle is not None and hasattr(os, "sched_setscheduler"):
        with contextlib.suppress(OSError):
            os.sched_setscheduler(0, idle, os.sched_param(0))
    try:
        with open(AUTOGROUP_SWITCH, "rb") as switch:
            grouped = switch.read().strip() == b"1"
    except OSError:  # no autogroup in this kernel: the class and nice suffice
        return None
    if not grouped:
        return None
    if not leads_its_session(os.getpid()):
        return "not in a session of its own: its session's group is another's too"
    with contextlib.suppress(OSError), open(AUTOGROUP, "rb") as group:
        if group.read().split()[-1:] == [b"19"]:  # set by the parent already
            return None
    problem = "unknown"
    for _ in range(AUTOGROUP_TRIES):
        try:
            fd = os.open(AUTOGROUP, os.O_WRONLY | os.O_CLOEXEC)
            try:
                os.write(fd, b"19")
            finally:
                os.close(fd)
            return None
        except OSError as exc:
            problem = exc.strerror or type(exc).__name__
            if exc.errno != errno.EAGAIN:
                break
            time.sleep(AUTOGROUP_PAUSE)
    return f"{AUTOGROUP} cannot be set to nice 19 ({problem})"

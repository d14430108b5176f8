"""The ``--module`` evaluation, parent side: runs in the launcher (torchrun) or
the training process itself. Uses the cache, or starts the child
(``child``, in a ``process.Child``), waits for it only when its value is
needed, and ends it (:func:`lookup_or_spawn` serves the command line, which
waits, and the hook, which goes on).

A cached value is applied at once, and checked in the background: a child at
the lowest CPU priority evaluates again, ignoring the entry, once per node, and
ends with this process at the latest; when its answer differs it corrects the
entry and says so in one line on this process's stderr, in the same launch
(:func:`start_check`). So a cached value is right, or the launch says it was not and
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
import signal
import sys
import threading
import time
from collections.abc import Callable, Mapping, MutableMapping
from typing import Any

from .._argv import Launch
from .._config import ConfigError
from .._decision import (
    CACHED,
    DETAIL,
    PEER,
    WARNING,
    Outcome,
    conclude,
    failed,
    internal_error,
)
from .._environ import (
    QUIET,
    TIMEOUT,
    log_level,
    prints_for_node,
    timeout,
)
from .._model import Config, encode_inputs
from .answer import EVALUATED, Answer, Verdict
from .cache import Cache, key, open_cache
from .lines import interrupted, waiting
from .process import (
    REAP_SECONDS,
    Child,
    Interpreter,
    interpreter_of,
    lower_priority_of,
)
from .spawns import SPAWN_EVENTS, Wrappers, give, mapping_of, take_back

TYPE_CHECKING = False
if TYPE_CHECKING:
    from types import FrameType

    #: ``_hook.apply``: set an outcome in ``os.environ`` (and in the mappings
    #: given), and say it unless ``quiet``.
    Apply = Callable[..., None]

#: Seconds an exiting process gives a child that answered to store its answer
#: in the cache (it takes a few tenths of a second for torchtitan 0.3.0).
STORE_SECONDS = 2.0
#: Seconds a launch waits for its evaluation before it says what it waits for
#: (once per node): a wait shorter than this is not worth a line.
SLOW_SECONDS = 2.0


class Evaluation:
    """A child evaluating a launch's ``--module``/``--config``, and the time
    it has: its deadline is set once, when it starts (the launch's timeout,
    ``ROCM_HWQ_AUTOSET_TIMEOUT``)."""

    def __init__(
        self,
        launch: Launch,
        environ: Mapping[str, str],
        cache: Cache | None = None,
        cache_key: str = "",
        interpreter: Interpreter | None = None,
        *,
        fresh: bool = False,
        checks: bool = False,
    ) -> None:
        """Start the child (``fresh``: never the entry, nor a peer's answer;
        ``checks``: what it finds without evaluating, it checks, and says on
        this process's stderr what it found, as this node's one process does);
        ``OSError`` if it cannot start. A timeout it cannot read is the
        default: whoever starts it says so (``_environ.timeout``)."""
        self.timeout, _ = timeout(environ)  # a bad value: the default, said
        self.deadline = time.monotonic() + self.timeout
        options = ["--parent", str(os.getpid())]
        if cache is not None:
            options += ["--cache", cache.path, "--key", cache_key]
            if fresh or checks:
                options.append("--fresh" if fresh else "--checks")
        say = checks and cache is not None and log_level(environ)[0] != QUIET
        self.child = Child(interpreter, options, launch.args, environ, say=say)

    def answer(self, slow: Callable[[float], None] | None = None) -> Answer:
        """The child's answer, waiting until the deadline at most; a failure
        when there is none (the deadline, a child that ended without one).
        ``slow``, if given, is called once when the wait has lasted
        :data:`SLOW_SECONDS`, with the seconds left to the deadline. A
        child that answered is left to finish (it stores its answer in the
        cache after giving it); any other ends here. Raises only what does not
        belong to the evaluation (a signal handler's exception ...), after
        ending the child."""
        try:
            slow_at = time.monotonic() + SLOW_SECONDS
            line = self.child.read_line(
                self.deadline if slow is None else min(self.deadline, slow_at)
            )
            if line is None and slow is not None and time.monotonic() < self.deadline:
                slow(self.deadline - time.monotonic())
                line = self.child.read_line(self.deadline)
        except OSError as exc:
            self.child.end()
            return Answer(failure=f"reading the evaluation: {exc.strerror}")
        except BaseException:
            self.child.end()
            raise
        if line is None:
            self.child.end()
            return Answer(
                failure=f"evaluating took over {self.timeout:g} s ({TIMEOUT})"
            )
        try:
            return Answer.from_json(json.loads(line))
        except (ValueError, ConfigError):  # JSON's or ours
            how = self.child.status(REAP_SECONDS)  # if it is ending anyway
            return Answer(failure=f"the evaluating child ended with {how}")

    def settle(self) -> None:
        """Let a child that answered finish storing its answer, until the
        deadline at most; then end it."""
        self.child.settle(self.deadline - time.monotonic())


class Lookup:
    """What :func:`lookup_or_spawn` found: the cache's config (:attr:`hit`),
    or the evaluation started (:attr:`evaluation`), or why none could start
    (:attr:`error`); and, in words, why the cache was not used
    (:attr:`cache_said`) and what a command's report says of it (:attr:`how`)."""

    def __init__(self, cache: Cache | None, cache_key: str, runs: Interpreter) -> None:
        self.cache = cache
        self.key = cache_key
        self.runs = runs
        """The interpreter that evaluates (the training's), found once: its
        key's part, and what the background check of a hit runs."""
        self.hit: Config | None = None
        self.evaluation: Evaluation | None = None
        self.error: ConfigError | None = None
        """Why no evaluation could start."""
        self.switch_error: ConfigError | None = None
        """The cache switch's value, when it cannot be read (no cache then)."""
        self.no_cache = ""
        """Why there is no cache though it is on (``""``: there is one, or it
        is turned off)."""
        self.missed = ""
        """Why the entry was not used (``no entry``, ``stale: ...``)."""


def lookup_or_spawn(
    launch: Launch,
    environ: Mapping[str, str],
    *,
    use_cache: bool = True,
    fresh: bool = False,
    checks: bool = False,
    takes: bool = False,
) -> Lookup:
    """The cache first, then the child: the entry for this launch when it is
    trusted and nothing it read changed for ``environ``, else a child started
    to evaluate it (told to store its answer when there is a cache). ``fresh``:
    never the entry, always a child, whose answer the cache then holds.
    ``checks``: the child checks what it finds without evaluating (the hook's,
    for the node's one process). ``takes``: a hit is this launch's, noted
    (the hook's, whatever the process's local rank: ``Cache.take``). Waits for
    nothing: :func:`evaluate` waits, :func:`start` goes on."""
    cache = None
    no_cache = ""
    switch_error = None
    if use_cache:
        try:
            cache, no_cache = open_cache(environ)
        except ConfigError as exc:
            switch_error = exc
    runs = interpreter_of(launch, environ)
    found = Lookup(cache, key(launch.args, environ, runs), runs)
    found.switch_error, found.no_cache = switch_error, no_cache
    if cache is not None and not fresh:
        found.hit, found.missed = cache.lookup(found.key, environ, take=takes)
        cache.close()  # no descriptor of ours left in the process
        if found.hit is not None:
            return found
    if cache is not None:
        cache.close()
    try:
        found.evaluation = Evaluation(
            launch, environ, cache, found.key, runs, fresh=fresh, checks=checks
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
    slow: Callable[[float], None] | None = None,
) -> tuple[Config | ConfigError, str]:
    """Evaluate now and wait, for the command line: the config (or why there
    is none), and how it was found (``cache``, ``evaluated``, or why the cache
    was not used). ``fresh`` (for a value that leaves the package, ``explain
    --export``, or judges a run, ``verify``): evaluated now, never from the
    cache, which then holds the answer. ``slow``: called once if the child
    has not answered after :data:`SLOW_SECONDS` (``Evaluation.answer``)."""
    found = lookup_or_spawn(launch, environ, use_cache=use_cache, fresh=fresh)
    if found.hit is not None and found.cache is not None:
        return found.hit, f"from the cache ({found.cache.entry(found.key)})"
    if not use_cache:
        how = "evaluated (--no-cache)"
    elif fresh and found.cache is not None:
        how = "evaluated (never from the cache here; the cache holds the answer)"
    elif found.switch_error is not None or found.no_cache:
        how = f"evaluated ({found.switch_error or found.no_cache})"
    elif found.cache is not None:
        how = f"evaluated (cache: {found.missed})"
    else:
        how = "evaluated"
    evaluation = found.evaluation
    if evaluation is None:
        assert found.error is not None
        return found.error, how
    try:
        answer = evaluation.answer(slow)
    finally:
        evaluation.settle()  # the answer stored in the cache, for the launches
    if answer.how != EVALUATED:
        how = "from the cache (another process evaluated it)"
    return answer.result(), how


def start(launch: Launch, apply: Apply) -> None:
    """At interpreter start: the cached evaluation, applied at once and checked
    in the background, or a child started now and waited for when the value is
    needed. An answer this launch did not evaluate itself is checked, by the
    node's one process (the launcher, or local rank 0); a launcher gives the
    check's correction to the processes it starts from then on."""
    environ = os.environ
    ours = prints_for_node(environ)  # the node's one: launcher or local rank 0
    found = lookup_or_spawn(launch, environ, checks=ours, takes=True)
    if found.switch_error is not None:
        apply(Outcome(WARNING, str(found.switch_error), "the cache is not used"))
    if found.no_cache:
        apply(Outcome(DETAIL, f"cache: {found.no_cache}", "evaluating without it"))
    if found.hit is not None and found.cache is not None:
        before = dict(environ)  # as the child of a launch that missed sees it
        outcome = conclude(environ, launch, found.hit, where=CACHED)
        apply(outcome)
        if ours:  # the hit is noted (lookup_or_spawn): now it is checked
            check = start_check(launch, before, found.cache, found.key,
                                found.runs, found.hit, apply)  # fmt: skip
            if check is not None and not launch.in_process:
                Waiter(launch, apply, outcome=outcome, check=check).install()
        return
    if found.cache is not None:
        apply(Outcome(DETAIL, f"cache: {found.missed}; evaluating"))
    if found.evaluation is None:
        assert found.error is not None
        apply(failed(launch.form, found.error))
        return
    Waiter(launch, apply, evaluation=found.evaluation).install()


def start_check(
    launch: Launch,
    environ: Mapping[str, str],
    cache: Cache,
    cache_key: str,
    runs: Interpreter,
    taken: Config,
    apply: Apply,
) -> Child | None:
    """The background check of a cached answer: a child that evaluates again,
    ignoring the entry (``child --check``), at the lowest CPU priority from its
    start, watching this process as an evaluating child does (it ends when
    this process does, whatever ends it; at exit this process ends it). It
    waits for any other check of the node to end first. It corrects the entry
    and says so, itself, in one line on this process's stderr when its answer
    differs (nothing at all when the log level is quiet), then prints its
    verdict. This process never waits for it. A check that cannot start is one
    line in verbose mode, and the entry stays as it is; never a failure.
    ``runs``: the interpreter that evaluates, as the look-up found it."""
    level, _ = log_level(environ)
    options = ["--parent", str(os.getpid()), "--cache", cache.path,
               "--key", cache_key, "--check", encode_inputs(taken.inputs)]  # fmt: skip
    try:
        child = Child(runs, options, launch.args, environ,
                      say=level != QUIET)  # fmt: skip
    except Exception as exc:
        apply(Outcome(DETAIL, f"cache: the background check cannot start: {exc}",
                      "the cached value stays"))  # fmt: skip
        return None
    with contextlib.suppress(OSError):  # idle from its first instruction on
        lower_priority_of(child.pid)
    return child


class Waiter:
    """Holds a pending outcome until the value is needed, then applies it; and
    heeds the verdict of a check of an answer the launch did not evaluate (a
    cache's, a peer's): a stale one's correction goes to every process started
    from then on (torchrun's restarts, later workers). The process starts it
    watches are ``spawns``'."""

    def __init__(
        self,
        launch: Launch,
        apply: Apply,
        *,
        evaluation: Evaluation | None = None,
        outcome: Outcome | None = None,
        check: Child | None = None,
    ) -> None:
        self.launch = launch
        self.apply = apply
        self.evaluation = evaluation
        """The evaluation whose answer is awaited (None: the outcome is in)."""
        self.outcome = outcome
        """The concluded outcome, once it is."""
        self.check = check
        """A check whose verdict may come (the evaluation's own child, when it
        found its answer without evaluating)."""
        self.stale: Outcome | None = None
        """The outcome a check's verdict corrected."""
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
            self.need(during=f"as {args[0]} was imported")

    def need(
        self,
        environ: MutableMapping[str, str] | None = None,
        during: str = "as it started a process",
    ) -> None:
        """The value is needed now (``during``: what this process does): wait
        for it (once, in one thread; the others wait for that one), heed a
        check's verdict if one came, then put the value where the process
        about to start will see it. Raises only what is not the evaluation's:
        the process start or import it guards must not fail for our sake."""
        try:
            self._need(environ, during)
        except BaseException as exc:
            if is_foreign(exc):  # its traceback shows where it came, not our wait
                hide_our_frames(exc)
                raise exc.with_traceback(None)  # noqa: B904 - the same one, as it was

    def _need(self, environ: MutableMapping[str, str] | None, during: str) -> None:
        owner = os.getpid() == self.owner
        if self.outcome is None and not self.abandoned and owner:
            with self.lock:  # the others wait for the one that asks
                if not self.asked and not self.abandoned:
                    self.asked = True
                    self.outcome = self._conclude()
                    self.apply(self.outcome, during=during)
        if self.evaluation is not None:
            self.evaluation.child.reap()  # one that answered and ended: no zombie
        if owner and not self.abandoned:
            with self.lock:
                self._heed()
        if self.outcome is not None and self.check is None:
            self.wrappers.remove()
        outcome = self.outcome
        if environ is not None and environ is not os.environ and outcome is not None:
            give(outcome, environ, self.apply, stale=self.stale)

    def _conclude(self) -> Outcome:
        assert self.evaluation is not None
        began = time.monotonic()
        try:
            answer = self.evaluation.answer(
                slow=lambda left: self.apply(waiting(self.launch, left))
            )
            self.evaluation.child.linger = STORE_SECONDS  # to store the answer
            ours = answer.how == EVALUATED
            if not ours and not self.launch.in_process:  # its check's verdict
                self.check = self.evaluation.child
            where = "" if ours else PEER
            return conclude(os.environ, self.launch, answer.result(), where=where)
        except BaseException as exc:
            if is_foreign(exc):
                self.abandoned = True
                self.wrappers.remove()
                with contextlib.suppress(Exception):  # the signal's, not ours
                    self.apply(interrupted(exc, time.monotonic() - began))
                raise
            # Never a traceback from our own failure.
            return failed(self.launch.form, ConfigError(internal_error(exc)))

    def _heed(self) -> None:
        """A check's verdict, if it came: a stale answer's correction replaces
        ours in this process's environment (quietly: the check said it)."""
        check = self.check
        if check is None or self.outcome is None:
            return
        try:
            line = check.read_line(time.monotonic())  # waits for nothing
        except OSError:
            line = b""
        if line is None:
            return  # not yet
        self.check = None
        try:
            verdict = Verdict.from_json(json.loads(line))
        except (ValueError, ConfigError):  # it ended without one
            return
        if verdict.answer is None:
            return
        corrected = conclude(os.environ, self.launch, verdict.answer.result())
        self.stale, self.outcome = self.outcome, corrected
        take_back(self.stale, os.environ)
        self.apply(corrected, quiet=True)

    def at_exit(self) -> None:
        """No more waiting (the child itself ends at exit: ``process.Child``;
        one that answered may first store its answer, for a bounded time)."""
        if os.getpid() == self.owner:
            self.abandoned = True


#: The package's folder: a traceback's frames in it are the wait's, not the
#: program's.
PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep


def hide_our_frames(exc: BaseException) -> None:
    """Where ``exc`` (Ctrl-C, a signal handler's exception raised while the
    process waited) is about to leave the wait, its traceback is made as it
    would be without the hook: ending in the program's own frame (its import,
    its process start), none of the package's after it (was: the audit hook's
    and the wait's frames, issue #37), whether the program catches and prints
    it itself (``traceback.print_exc()`` in an ``except KeyboardInterrupt``) or
    Python prints it. A raise always adds its own frame, so the traceback is
    cut as the exception enters the program's frame (:func:`_cut_at`); where a
    tracer already runs (a debugger's, coverage's), where Python prints it
    instead: ``sys.excepthook``, wrapped once for this exception alone, the
    program's own hook called with the rest."""
    frame: FrameType | None = sys._getframe(1)
    while frame is not None and _is_ours(frame.f_code.co_filename):
        frame = frame.f_back
    if frame is not None and sys.gettrace() is None:
        _cut_at(frame)
        return
    previous = sys.excepthook

    def excepthook(kind: type[BaseException], value: BaseException, tb: Any) -> None:
        if value is exc:
            tb = _without_ours(tb)
            value.__traceback__ = tb
        previous(kind, value, tb)

    sys.excepthook = excepthook


def _cut_at(frame: FrameType) -> None:
    """The next exception to enter ``frame`` (the program's, as the wait
    raises) keeps no traceback beyond it: a trace function on that frame alone
    cuts it there, at its ``exception`` event (which comes before any handler
    of the frame runs), and takes itself off. Tracing is on only from here to
    there; a frame started on the way (none is) takes it off too."""

    def off() -> None:
        sys.settrace(None)
        frame.f_trace = None

    def cut(at: FrameType, event: str, arg: Any) -> None:
        if event == "exception" and at is frame:
            tb = arg[2]
            if tb is not None and tb.tb_frame is frame:
                tb.tb_next = None
            off()

    def started(at: FrameType, event: str, arg: Any) -> None:
        off()

    frame.f_trace = cut
    sys.settrace(started)


def _is_ours(filename: str) -> bool:
    return filename.startswith(PACKAGE_DIR)


def _without_ours(tb: Any) -> Any:
    """The traceback ``tb`` cut before its first frame of the package's."""
    first, before = tb, None
    while tb is not None:
        if _is_ours(tb.tb_frame.f_code.co_filename):
            if before is None:
                return None
            before.tb_next = None
            return first
        before, tb = tb, tb.tb_next
    return first


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

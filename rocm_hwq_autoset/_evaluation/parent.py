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
import os
import signal
import sys
import threading
from collections.abc import Callable, Mapping, MutableMapping
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
from .._environ import prints_for_node
from .cache import Cache, key, open_cache
from .process import Check, Evaluation, interpreter_of
from .spawns import SPAWN_EVENTS, Wrappers, give, mapping_of

TYPE_CHECKING = False
if TYPE_CHECKING:
    from .._model import Evaluated

    #: ``_hook.apply``: set an outcome in ``os.environ`` (and in the mappings
    #: given), and say it unless ``quiet``.
    Apply = Callable[..., None]

#: Seconds an exiting process gives a child that answered to store its answer
#: in the cache (it takes a few tenths of a second for torchtitan 0.3.0).
STORE_SECONDS = 2.0


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

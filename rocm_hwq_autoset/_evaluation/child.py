"""The ``--module`` evaluation, child side: runs in a child interpreter started
by ``parent`` (a ``process.Child``), never in a training process.

torchtitan's current launch form, ``-m torchtitan.train --module M --config FN``
(pytorch/torchtitan #2386), names a Python function that returns the config:
reading it means importing torchtitan and torch, which starts HIP. So only this
child imports torchtitan (``registry``). It

1. watches its parent: it ends, with everything it started, as soon as the
   parent is gone, whatever ended it (``process.watch``);
2. with a cache, takes this node's lock for the launch: the first rank's child
   evaluates, the others wait for its answer;
3. evaluates (``registry.read_config``), recording what it read (``deps``);
4. prints one line on stdout first, its :class:`answer.Answer`: the config,
   torchtitan's refusal, or its own failure, and how it was found: evaluated
   here, from the cache, or from a peer (another rank's child evaluated it, and
   nothing it read differs here). Nothing else of torch's or torchtitan's
   reaches stdout or stderr;
5. then, the parent served, it drops to the lowest CPU priority (the workers'
   own start-up comes first), publishes the answer with what it read for the
   ranks waiting on the lock, and stores a successful one in the cache.

An answer the launch did not evaluate itself is checked (:func:`_check`): a
launcher's hit (``--check INPUTS``: the model's inputs it took from the entry)
and, with ``--checks``, an answer this child found in the cache or took from a
peer. A check runs only at the lowest CPU priority (it does not run where it
cannot be had), one at a time on a node (it waits for the node's check lock),
and evaluates ignoring the entry. It stores what it found (a new entry: the
times it was taken unchecked start again), says on ``--say FD`` (the
launcher's stderr) in one warning line when the answer was stale, and prints
its :class:`answer.Verdict` as a second line, from which the launcher gives the
corrected value to the processes it starts from then on.

Usage: ``python -S -c BOOT [--parent PID] [--cache
DIR --key KEY [--fresh | --checks | --check INPUTS]] [--say FD] [--path0 DIR |
--no-path0] -- ARGS``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import sys
from collections.abc import Sequence
from typing import Any

from .._argv import MODULE, Launch
from .._config import ConfigError
from .._decision import (
    DETAIL,
    WARNING,
    Outcome,
    conclude,
    internal_error,
    value_words,
)
from .._environ import QUEUES, timeout
from .._model import Config, decode_inputs
from .answer import CACHE, PEER, SAME, STALE, UNCHECKED, Answer, Verdict
from .cache import MAX_UNCHECKED, Cache
from .deps import Recorder
from .process import end_group, lowest_priority, watch
from .registry import read_config


def options_parser() -> argparse.ArgumentParser:
    """The child's own options, before ``--`` and the training arguments."""
    parser = argparse.ArgumentParser(prog="child", allow_abbrev=False)
    parser.add_argument("--parent", type=int, help="the pid to watch")
    parser.add_argument("--cache", help="the cache directory")
    parser.add_argument("--key", help="the launch's key in the cache")
    how = parser.add_mutually_exclusive_group()
    how.add_argument("--fresh", action="store_true",
                     help="evaluate: no entry, no peer's answer")  # fmt: skip
    how.add_argument("--checks", action="store_true",
                     help="check an answer found without evaluating")  # fmt: skip
    how.add_argument("--check", metavar="INPUTS",
                     help="check the inputs a launch took from the entry")  # fmt: skip
    parser.add_argument("--say", type=int, metavar="FD",
                        help="the launcher's stderr, for the line to say")  # fmt: skip
    where = parser.add_mutually_exclusive_group()
    where.add_argument("--path0", help="the training's first sys.path entry")
    where.add_argument("--no-path0", action="store_true",
                       help="the training puts none (safe-path mode)")  # fmt: skip
    return parser


def boot() -> None:
    """The child's start under ``python -S`` (``process.BOOT``): this
    package's folder off the path again (it was put first only to find this
    module), then :func:`main` with ``site`` run under the recording: a
    ``sitecustomize``, or a module a ``.pth`` line imports, may read what the
    config then depends on."""
    del sys.path[0]
    main(sys.argv[1:], run_site=True)


def main(argv: Sequence[str], *, run_site: bool = False) -> int:
    """The child's options, ``--``, the training arguments in; its answer and
    its verdict (a check's) out, one line each. ``run_site``: the interpreter
    started without ``site`` (``-S``), which runs here, recorded."""
    argv = list(argv)
    split = argv.index("--") if "--" in argv else len(argv)
    options = options_parser().parse_args(argv[:split])
    args = argv[split + 1 :]
    if options.path0 is not None or options.no_path0:
        imports_from(options.path0)
    if options.parent is not None:
        watch(options.parent)
    if options.say is not None:  # the launcher's stderr: for us, not for torch's
        os.set_inheritable(options.say, False)  # processes
    out = os.dup(1)
    quiet = os.open(os.devnull, os.O_WRONLY)
    os.dup2(quiet, 1)  # torchtitan's and torch's own output goes nowhere
    os.dup2(quiet, 2)
    seconds, _ = timeout(os.environ)  # a bad value: the default
    # A safety net beside the parent's own timeout: a parent that never waits
    # (it exited, or never started a process) must not leave us hung. A check
    # runs only on idle CPU time, and nobody waits for it: it has longer.
    if options.check is not None or options.checks:
        seconds *= CHECK_TIMEOUTS
        signal.signal(signal.SIGALRM, _check_timed_out(options, seconds))
    signal.alarm(int(seconds) + 1)
    # What the evaluation reads is recorded from here, site's work included
    # (the cache's own look-ups apart).
    recorder = Recorder() if options.cache is not None else None
    if recorder is not None:
        recorder.start()
    if run_site:
        import site

        site.main()
    _serve(options, args, out, recorder)
    os._exit(0)  # no teardown of torch; the node's lock goes with us


def _serve(
    options: argparse.Namespace,
    args: Sequence[str],
    out: int,
    recorder: Recorder | None,
) -> None:
    """The answer, on ``out``: a peer's or the cache's, or evaluated here;
    first, since the parent may be waiting for it. Then what this child
    evaluated goes to the peers and the cache; what it found without
    evaluating is checked (``--checks``). A launcher's check (``--check``)
    gives no answer, only its verdict."""
    cache = None
    if options.cache is not None and recorder is not None:
        with recorder.paused(), contextlib.suppress(OSError, ConfigError):
            cache = Cache(options.cache)  # tested again here, on its descriptor
    if cache is None or recorder is None:  # a cache no longer ours: none
        _write(out, _evaluate_here(args).to_json())
        return
    key = options.key
    if options.check is not None:
        taken = Answer(config=Config(decode_inputs(options.check), {}), how=CACHE)
        _check(cache, key, taken, options, args, out, recorder)
        return
    found = None
    if not options.fresh:
        with recorder.paused():  # the cache's reads are not the config's
            found = _found(cache, key, options.parent)
    if found is not None:
        _write(out, found.to_json())
        if options.checks:  # this node's one process: it checks what it took
            _check(cache, key, found, options, args, out, recorder)
        return
    answer = _evaluate_here(args)
    _write(out, answer.to_json())
    _share(cache, key, answer, recorder, options)


def _found(cache: Cache, key: str, launcher: int | None = None) -> Answer | None:
    """The answer found without evaluating: another rank of this node's, when
    it was evaluating this launch as this child started, or the cache's
    entry (taken for ``launcher``'s launch, noted as the launcher's hit is:
    :meth:`Cache.take`); None
    when this child is to evaluate (it holds the node's lock then, until it
    ends; or locks cannot be had: it evaluates alone)."""
    before, _ = cache.published(key)
    cache.lock(cache.lock_file(key), wait=True)  # the alarm bounds the wait
    identity, doc = cache.published(key)  # a peer's answer since we started,
    if identity is not None and identity != before:  # checked as an entry is
        answer = cache.peer_answer(doc, key, os.environ)
        if answer is not None:
            return Answer(config=answer.config, refusal=answer.refusal,
                          failure=answer.failure, how=PEER)  # fmt: skip
    config, _ = cache.lookup(key, os.environ, take=True, launcher=launcher)
    if config is None:
        return None
    return Answer(config=config, how=CACHE)


def _evaluate_here(args: Sequence[str]) -> Answer:
    """The answer of evaluating in this process: never an exception."""
    try:
        return Answer(config=read_config(args))
    except ConfigError as exc:
        return Answer(refusal=exc)
    except BaseException as exc:  # the parent turns this into one warning line
        return Answer(failure=internal_error(exc))


def _write(fd: int, doc: dict[str, Any]) -> None:
    """One line on ``fd`` (one ``write``: the parent reads it whole)."""
    with contextlib.suppress(OSError):  # a parent that no longer listens
        os.write(fd, (json.dumps(doc) + "\n").encode())


def _share(
    cache: Cache,
    key: str,
    answer: Answer,
    recorder: Recorder,
    options: argparse.Namespace,
) -> None:
    """Publish any answer, with what the evaluation read, to the peers waiting
    on the lock (they check it as an entry); then store a successful one. The
    answer is out: this runs at the lowest CPU priority (the workers' start-up
    comes first), but for the publishing when ranks of this node wait on the
    lock: they would wait for an idle process, on a busy machine until their
    timeout or until this one's launch ends it, and then evaluate each."""
    with recorder.paused():  # the kernel's list of locks is not the config's
        waited = cache.waited_on(cache.lock_file(key))
    if not waited:
        lowest_priority()
    deps = _deps(cache, recorder)
    with contextlib.suppress(Exception):  # a full or read-only cache: no matter
        cache.publish(key, answer, deps)
    if waited:
        lowest_priority()
    if answer.config is not None and deps is not None:
        _store(cache, key, answer.config, deps, options)


def _store(
    cache: Cache,
    key: str,
    config: Config,
    deps: dict[str, Any],
    options: argparse.Namespace,
) -> bool:
    """Store an entry; a cache that cannot hold it says so, once per node (its
    cost is an evaluation at every launch)."""
    try:
        cache.store(key, config, deps)
    except OSError as exc:
        _say(options, Outcome(
            WARNING, f"cache: {cache.path} cannot hold the evaluation ({exc.strerror})",
            "each --module launch evaluates again",
        ))  # fmt: skip
        return False
    return True


def _deps(cache: Cache, recorder: Recorder) -> dict[str, Any] | None:
    """What the evaluation read (the recording stops here), or None when that
    cannot be told: then its answer is neither stored nor taken by a peer."""
    try:
        deps: dict[str, Any] | None = recorder.deps(exclude=cache.path)
    except Exception:
        return None
    return deps


# The check of an answer taken without evaluating.

#: A check's bound, in evaluation timeouts (``ROCM_HWQ_AUTOSET_TIMEOUT``): it
#: runs on idle CPU time only, so a busy node slows it down, and it may wait for
#: another launch's check; it ends with its launcher in any case.
CHECK_TIMEOUTS = 10
#: What the check's lines begin with.
CHECKED = "the cached --module/--config evaluation"


def _check(
    cache: Cache,
    key: str,
    taken: Answer,
    options: argparse.Namespace,
    args: Sequence[str],
    out: int,
    recorder: Recorder,
) -> None:
    """Evaluate, ignoring the entry and the peers; store what was found; say,
    once, when the answer taken differs; print the verdict."""
    not_idle = lowest_priority()
    if not_idle is not None:
        unchecked = f"it is taken at most {MAX_UNCHECKED} times unchecked"
        _say(options, Outcome(DETAIL, f"cache: not checking {CHECKED}: {not_idle}",
                              unchecked))  # fmt: skip
        _write(out, Verdict(UNCHECKED).to_json())
        return
    with recorder.paused():
        cache.lock(cache.check_lock_file(key), wait=True)  # one check at a time
    fresh = _evaluate_here(args)
    deps = _deps(cache, recorder)  # the recording ends before any conclusion
    if fresh.failure is not None:  # ours, not the config's
        _say(options, Outcome(DETAIL, f"cache: checking {CHECKED}: {fresh.failure}",
                              "the entry is kept"))  # fmt: skip
        _write(out, Verdict(UNCHECKED).to_json())
        return
    stored = False
    if fresh.config is not None and deps is not None:
        stored = _store(cache, key, fresh.config, deps, options)  # refreshed
    if _same(taken, fresh):
        _write(out, Verdict(SAME).to_json())
        return
    launch = Launch(MODULE, args, False)
    before = conclude(os.environ, launch, taken.result())
    was = (f"{QUEUES}={before.queues} was set from it" if before.queues is not None
           else "nothing was set from it")  # fmt: skip
    after = conclude(os.environ, launch, fresh.result())
    if (before.level, before.queues) == (after.level, after.queues):
        # Other inputs, the same value (the lanes differ, Q does not): what the
        # launch was given is right; the entry is stored anew where it can be.
        _write(out, Verdict(SAME).to_json())
        return
    found = str(fresh.refusal) if after.rec is None else value_words(after.rec)
    if stored:
        then = f"the cache now holds {after.queues} for the next launch"
    else:  # a wrong entry must not stay
        try:
            cache.remove(key)
            then = "the cache no longer holds it: the next launch evaluates again"
        except OSError as exc:  # then it is taken no more than the bound allows
            then = (f"the cache cannot drop it ({exc.strerror}): it is taken at most"
                    f" {MAX_UNCHECKED} times unchecked")  # fmt: skip
    _say(options, Outcome(
        WARNING, f"{CHECKED} was stale: {was}; evaluated again: {found}", then,
    ))  # fmt: skip
    _write(out, Verdict(STALE, fresh).to_json())


def _same(taken: Answer, fresh: Answer) -> bool:
    """Whether a fresh answer gives the launch what the taken one gave: the
    model's inputs, or the same refusal."""
    if taken.config is not None and fresh.config is not None:
        return taken.config.inputs == fresh.config.inputs
    return str(taken.refusal) == str(fresh.refusal)


def _say(options: argparse.Namespace, outcome: Outcome) -> None:
    """The child's one line, on the launcher's stderr, as the hook says its
    own (the log level, once per node). Never raises."""
    if options.say is None:
        return
    line = outcome.line(os.environ)
    if line is not None:
        with contextlib.suppress(OSError):
            os.write(options.say, line.encode("utf-8", "backslashreplace"))


def _check_timed_out(options: argparse.Namespace, seconds: float) -> Any:
    def timed_out(signum: int, frame: Any) -> None:
        _say(options, Outcome(
            DETAIL, f"cache: checking {CHECKED} took over {seconds:g} s",
            "the entry is kept",
        ))  # fmt: skip
        end_group()

    return timed_out


def imports_from(path0: str | None) -> None:
    """``sys.path`` as the training's interpreter has it (``--path0 DIR`` or
    ``--no-path0``; without either, the child keeps its own): ``-m`` put this
    directory first (unless in safe-path or isolated mode, where the child was
    started as the training is); the training's own first entry instead, if it
    has one (``process.interpreter_of``)."""
    if not (sys.flags.isolated or getattr(sys.flags, "safe_path", False)):
        del sys.path[0]
    if path0 is not None:
        sys.path.insert(0, path0)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

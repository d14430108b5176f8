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
4. prints exactly one line on stdout, its :class:`answer.Answer`: the config,
   torchtitan's refusal, or its own failure, and how it was found: evaluated
   here, from the cache, or from a peer (another rank's child evaluated it, and
   nothing it read differs here). Nothing else reaches stdout or stderr;
5. then, the parent served, it drops to the lowest CPU priority (the workers'
   own start-up comes first), publishes the answer with what it read for the
   ranks waiting on the lock, and stores a successful one in the cache.

With ``--check INPUTS`` it is a launch's background check of a cached answer
(the model's inputs the launch took from the entry): at the lowest CPU priority
from the start, one per node (a lock taken without waiting: if another process
of the node checks, it does nothing), it evaluates ignoring the entry, stores
what it found, and, when the inputs differ, says so in one warning line on
``--say FD`` (the launcher's stderr): what was set, what a fresh evaluation
gives, what the next launch gets. A check that fails or times out says nothing
(verbose: one line) and leaves the entry as it is.

Usage: ``python -m rocm_hwq_autoset._evaluation.child [--parent PID] [--cache
DIR --key KEY [--fresh | --check INPUTS]] [--say FD] [--path0 DIR |
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

from .._argv import Launch
from .._config import ConfigError
from .._decision import SKIP, WARNING, Outcome, conclude, internal_error, value_words
from .._environ import MODULE_FORM, QUEUES, timeout
from .._model import Config, decode_inputs, encode_inputs
from .answer import CACHE, PEER, Answer
from .cache import Cache
from .deps import Recorder
from .process import end_group, lowest_priority, node_lock, watch
from .registry import read_config


def options_parser() -> argparse.ArgumentParser:
    """The child's own options, before ``--`` and the training arguments."""
    parser = argparse.ArgumentParser(prog="child", allow_abbrev=False)
    parser.add_argument("--parent", type=int, help="the pid to watch")
    parser.add_argument("--cache", help="the cache directory")
    parser.add_argument("--key", help="the launch's key in the cache")
    parser.add_argument("--fresh", action="store_true",
                        help="evaluate: no entry, no peer's answer")  # fmt: skip
    parser.add_argument("--check", metavar="INPUTS",
                        help="the inputs a launch took from the entry")  # fmt: skip
    parser.add_argument("--say", type=int, metavar="FD",
                        help="the launcher's stderr, for the line to say")  # fmt: skip
    where = parser.add_mutually_exclusive_group()
    where.add_argument("--path0", help="the training's first sys.path entry")
    where.add_argument("--no-path0", action="store_true",
                       help="the training puts none (safe-path mode)")  # fmt: skip
    return parser


def main(argv: Sequence[str]) -> int:
    """The child's options, ``--``, the training arguments in; one line out,
    the answer (a check: at most one line on ``--say FD``)."""
    argv = list(argv)
    split = argv.index("--") if "--" in argv else len(argv)
    options = options_parser().parse_args(argv[:split])
    args = argv[split + 1 :]
    if options.path0 is not None or options.no_path0:
        imports_from(options.path0)
    if options.parent is not None:
        watch(options.parent)
    if options.check is not None:
        lowest_priority()  # the reaper, forked above, keeps its own
    if options.say is not None:  # the launcher's stderr: for us, not for torch's
        os.set_inheritable(options.say, False)  # processes
    result = os.dup(1)
    quiet = os.open(os.devnull, os.O_WRONLY)
    os.dup2(quiet, 1)  # torchtitan's and torch's own output goes nowhere
    os.dup2(quiet, 2)
    seconds, _ = timeout(os.environ)  # a bad value: the default
    # A safety net beside the parent's own timeout: a parent that never waits
    # (it exited, or never started a process) must not leave us hung. A check
    # runs only on idle CPU time, and nobody waits for it: it has longer.
    if options.check is not None:
        seconds *= CHECK_TIMEOUTS
        signal.signal(signal.SIGALRM, _check_timed_out(options, seconds))
    signal.alarm(int(seconds) + 1)
    _serve(options, args, result)
    os._exit(0)  # no teardown of torch; the node's lock goes with us


def _serve(options: argparse.Namespace, args: Sequence[str], result: int) -> None:
    """The answer, on ``result``: a peer's or the cache's, or evaluated here;
    first, since the parent may be waiting for it. Then what this child
    evaluated goes to the peers and the cache. A check answers nobody."""
    if options.cache is None:
        _answer(result, _evaluated(args, None))
        return
    cache, key = Cache(options.cache), options.key
    if options.check is not None:
        os.close(result)
        try:
            _check(cache, key, options, args)
        except Exception as exc:  # ours: the entry is kept, nothing said
            _say(options, Outcome(
                SKIP, f"cache: checking {CHECKED}: {internal_error(exc)}",
                "the entry is kept",
            ))  # fmt: skip
        return
    found = None if options.fresh else _found(cache, key)
    if found is not None:
        _answer(result, found)
        return
    recorder = Recorder()
    answer = _evaluated(args, recorder)
    _answer(result, answer)
    lowest_priority()  # the answer is out: the workers' start-up comes first
    _share(cache, key, answer, recorder)


def _found(cache: Cache, key: str) -> Answer | None:
    """The answer found without evaluating: another rank of this node's, when
    it was evaluating this launch as this child started, or the cache's
    entry; None when this child is to evaluate (it holds the node's lock then,
    until it ends; or locks cannot be had: it evaluates alone)."""
    before, _ = cache.published(key)
    node_lock(cache.lock_file(key), wait=True)  # the alarm bounds the wait
    identity, doc = cache.published(key)  # a peer's answer since we started,
    if identity is not None and identity != before:  # checked as an entry is
        answer = cache.peer_answer(doc, key, os.environ)
        if answer is not None:
            return Answer(config=answer.config, refusal=answer.refusal,
                          failure=answer.failure, how=PEER)  # fmt: skip
    config, _ = cache.lookup(key, os.environ)
    return None if config is None else Answer(config=config, how=CACHE)


def _evaluated(args: Sequence[str], recorder: Recorder | None) -> Answer:
    """The answer of evaluating here: never an exception."""
    if recorder is not None:
        recorder.start()
    try:
        return Answer(config=read_config(args))
    except ConfigError as exc:
        return Answer(refusal=exc)
    except BaseException as exc:  # the parent turns this into one warning line
        return Answer(failure=internal_error(exc))


def _answer(fd: int, answer: Answer) -> None:
    os.write(fd, (json.dumps(answer.to_json()) + "\n").encode())
    os.close(fd)


def _share(cache: Cache, key: str, answer: Answer, recorder: Recorder) -> None:
    """Publish any answer, with what the evaluation read, to the peers waiting
    on the lock (they check it as an entry); then store a successful one."""
    deps = _deps(cache, recorder)
    with contextlib.suppress(Exception):  # a full or read-only cache: no matter
        cache.publish(key, answer, deps)
    if answer.config is not None and deps is not None:
        with contextlib.suppress(Exception):
            cache.store(key, answer.config, deps)


def _deps(cache: Cache, recorder: Recorder) -> dict[str, Any] | None:
    """What the evaluation read, or None when that cannot be told: then its
    answer is neither stored nor taken by a peer."""
    try:
        deps: dict[str, Any] | None = recorder.deps(exclude=cache.path)
    except Exception:
        return None
    return deps


# The background check of a cached answer.

#: A check's bound, in evaluation timeouts (``ROCM_HWQ_AUTOSET_TIMEOUT``): it
#: runs on idle CPU time only, so a busy node slows it down; it ends with its
#: launcher in any case.
CHECK_TIMEOUTS = 10
#: What the check's lines begin with.
CHECKED = "the cached --module/--config evaluation"


def _check(
    cache: Cache, key: str, options: argparse.Namespace, args: Sequence[str]
) -> None:
    """Evaluate, ignoring the entry; store what was found; say, once, when the
    inputs differ from those the launch took from the entry."""
    if not node_lock(cache.check_lock_file(key), wait=False):
        return  # another process of this node checks it: nothing to do
    recorder = Recorder()
    answer = _evaluated(args, recorder)
    launch = Launch(MODULE_FORM, args, False)
    environ = os.environ
    taken = Config(decode_inputs(options.check), {})
    before = conclude(environ, launch, taken)
    was = (f"{QUEUES}={before.queues} was set from it" if before.queues is not None
           else "nothing was set from it")  # fmt: skip
    if answer.failure is not None:  # ours, not the config's
        _say(options, Outcome(SKIP, f"cache: checking {CHECKED}: {answer.failure}",
                              "the entry is kept"))  # fmt: skip
        return
    if answer.refusal is not None:
        with contextlib.suppress(OSError):
            cache.remove(key)
        _say(options, Outcome(
            WARNING, f"{CHECKED} was stale: {was}; evaluated again: {answer.refusal}",
            "the cache no longer holds it: the next launch evaluates again",
        ))  # fmt: skip
        return
    assert answer.config is not None
    deps = _deps(cache, recorder)
    stored = False
    if deps is not None:
        with contextlib.suppress(Exception):  # the entry, refreshed or corrected
            cache.store(key, answer.config, deps)
            stored = True
    if encode_inputs(answer.config.inputs) == options.check:
        return  # the cached answer was right
    after = conclude(environ, launch, answer.config)
    found = "no value" if after.rec is None else value_words(after.rec)
    if stored:
        then = f"the cache now holds {after.queues} for the next launch"
    else:  # a wrong entry must not stay
        with contextlib.suppress(OSError):
            cache.remove(key)
        then = "the cache no longer holds it: the next launch evaluates again"
    _say(options, Outcome(
        WARNING, f"{CHECKED} was stale: {was}; evaluated again: {found}", then,
    ))  # fmt: skip


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
            SKIP, f"cache: checking {CHECKED} took over {seconds:g} s",
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

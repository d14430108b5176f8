"""The ``--module`` evaluation, child side: runs in a child interpreter started
by ``parent``, never in a training process.

torchtitan's current launch form, ``-m torchtitan.train --module M --config FN``
(pytorch/torchtitan #2386), names a Python function that returns the config:
reading it means importing torchtitan and torch, which starts HIP. So only this
child imports torchtitan. It

1. watches its parent: it ends, with everything it started, as soon as the
   parent is gone, whatever ended it (:func:`watch`);
2. with a cache, takes this node's lock for the launch: the first rank's child
   evaluates, the others wait for its answer (``cache``);
3. evaluates: ``ConfigManager().parse_args(ARGS)``, read as PR #4032 reads the
   config, recording what it read (``deps``);
4. prints exactly one JSON line on stdout: ``{"inputs": ..., "settings": ...}``
   or ``{"error": ..., "source": ...}``, with ``"how"``: ``evaluated`` (here),
   ``cache`` or ``peer`` (another rank's child evaluated it, and nothing it
   read differs here). Nothing else reaches stdout or stderr;
5. then, the parent served, it drops to the lowest CPU priority (the workers'
   own start-up comes first), publishes the answer with what it read for the
   ranks waiting on the lock, and stores a successful result in the cache.

With ``--check INPUTS`` it is a launch's background check of a cached answer
(the model's inputs the launch took from the entry): at the lowest CPU priority
from the start, one per node (a lock taken without waiting: if another process
of the node checks, it does nothing), it evaluates ignoring the entry, stores
what it found, and, when the inputs differ, says so in one warning line on
``--say FD`` (the launcher's stderr): what was set, what a fresh evaluation
gives, what the next launch gets. A check that fails or times out says nothing
(verbose: one line) and leaves the entry as it is.

Usage: ``python -m rocm_hwq_autoset._evaluation.child [--parent PID] [--cache DIR
--key KEY [--check INPUTS [--say FD]]] -- ARGS``.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sys
from collections.abc import Sequence
from typing import Any

from .._argv import (
    MODULE_FORM,
    Launch,
)
from .._config import ConfigError
from .._decision import SKIP, WARNING, Outcome, conclude, internal_error
from .._environ import QUEUES, timeout
from .._model import decode_inputs
from .answer import decode_result, encode_result
from .cache import Cache
from .deps import Recorder
from .process import _check_lock, _end_group, lowest_priority, watch
from .registry import evaluate_config

# The process.


def _from_peer(cache: Cache, key: str) -> dict[str, Any] | None:
    """The answer another rank of this node found, when it was evaluating this
    launch as this child started; None when this child is to evaluate (it holds
    the node's lock then, until it ends; or it could not take the lock: it
    evaluates alone)."""
    before, _ = cache.published(key)
    try:
        fd = os.open(cache.lock_file(key), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    except OSError:
        return None
    import fcntl

    try:  # a peer evaluating holds it: wait for it (the alarm bounds the wait)
        fcntl.flock(fd, fcntl.LOCK_EX)
    except OSError:  # no locks here (an NFS mount without them): alone
        return None
    identity, doc = cache.published(key)  # a peer's answer since we started,
    if identity is not None and identity != before:  # checked as an entry is
        answer = cache.peer_answer(doc, key, os.environ)
        if answer is not None:
            return {**answer, "how": "peer"}
    found, _ = cache.lookup(key, os.environ)
    if found is not None:
        return {**encode_result(*found), "how": "cache"}
    return None


def _evaluate(args: Sequence[str], recorder: Recorder | None) -> dict[str, Any]:
    if recorder is not None:
        recorder.start()
    try:
        inputs, settings = evaluate_config(args)
    except ConfigError as exc:
        return {"error": exc.reason, "source": exc.source, "how": "evaluated"}
    except BaseException as exc:  # the parent turns this into one warning line
        return {"error": internal_error(exc), "source": "", "how": "evaluated"}
    return {**encode_result(inputs, settings), "how": "evaluated"}


def main(argv: Sequence[str]) -> int:
    """``[--parent PID] [--cache DIR --key KEY [--check INPUTS [--say FD]]] --
    ARGS`` in; one JSON line out (a check: at most one line on ``FD``)."""
    options, args = _split(list(argv))
    if "--path0" in options or "--no-path0" in options:
        imports_from(options.get("--path0"))
    if "--parent" in options:
        watch(int(options["--parent"]))
    if "--check" in options:
        lowest_priority()  # the reaper, forked above, keeps its own
    if "--say" in options:  # the launcher's stderr: for us, not for torch's
        os.set_inheritable(int(options["--say"]), False)  # processes
    result = os.dup(1)
    quiet = os.open(os.devnull, os.O_WRONLY)
    os.dup2(quiet, 1)  # torchtitan's and torch's own output goes nowhere
    os.dup2(quiet, 2)
    seconds, _ = timeout(os.environ)  # a bad value: the default
    # A safety net beside the parent's own timeout: a parent that never waits
    # (it exited, or never started a process) must not leave us hung. A check
    # runs only on idle CPU time, and nobody waits for it: it has longer.
    if "--check" in options:
        seconds *= CHECK_TIMEOUTS
        signal.signal(signal.SIGALRM, _check_timed_out(options, seconds))
    signal.alarm(int(seconds) + 1)
    _serve(options, args, result)
    os._exit(0)  # no teardown of torch; the node's lock goes with us


def _serve(options: dict[str, str], args: Sequence[str], result: int) -> None:
    """The answer, on ``result``: a peer's or the cache's, or evaluated here;
    first, since the parent may be waiting for it. Then what this child
    evaluated goes to the peers and the cache. A check answers nobody."""
    if "--cache" not in options:
        _answer(result, _evaluate(args, None))
        return
    cache, key = Cache(options["--cache"]), options["--key"]
    if "--check" in options:
        os.close(result)
        try:
            _check(cache, key, options, args)
        except Exception as exc:  # ours: the entry is kept, nothing said
            _say_check(options, Outcome(
                SKIP, f"cache: checking {CHECKED}: {internal_error(exc)}",
                "the entry is kept",
            ))  # fmt: skip
        return
    doc = None if "--fresh" in options else _from_peer(cache, key)
    if doc is not None:
        _answer(result, doc)
        return
    recorder = Recorder()
    doc = _evaluate(args, recorder)
    _answer(result, doc)
    lowest_priority()  # the answer is out: the workers' start-up comes first
    _share(cache, key, doc, recorder)


def _answer(fd: int, doc: dict[str, Any]) -> None:
    os.write(fd, (json.dumps(doc) + "\n").encode())
    os.close(fd)


def _share(cache: Cache, key: str, doc: dict[str, Any], recorder: Recorder) -> None:
    """Publish any result, with what the evaluation read, to the peers waiting
    on the lock (they check it as an entry); then store a successful one."""
    deps = _deps(cache, recorder)
    with contextlib.suppress(Exception):  # a full or read-only cache: no matter
        cache.publish(key, doc, deps)
    if "inputs" in doc and deps is not None:
        with contextlib.suppress(Exception):
            cache.store(key, {k: doc[k] for k in ("inputs", "settings")}, deps)


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
    cache: Cache, key: str, options: dict[str, str], args: Sequence[str]
) -> None:
    """Evaluate, ignoring the entry; store what was found; say, once, when the
    inputs differ from those the launch took from the entry."""
    if not _check_lock(cache.check_lock_file(key)):
        return  # another process of this node checks it: nothing to do
    recorder = Recorder()
    doc = _evaluate(args, recorder)
    launch = Launch(MODULE_FORM, args, False)
    environ = os.environ
    before = conclude(environ, launch, (decode_inputs(options["--check"]), {}))
    was = (f"{QUEUES}={before.queues} was set from it" if before.queues is not None
           else "nothing was set from it")  # fmt: skip
    if "error" in doc:
        error = str(doc["error"])
        if error.startswith("internal error"):  # ours, not the config's
            _say_check(options, Outcome(SKIP, f"cache: checking {CHECKED}: {error}",
                                        "the entry is kept"))  # fmt: skip
            return
        with contextlib.suppress(OSError):
            cache.remove(key)
        reason = ConfigError(error, str(doc.get("source") or ""))
        _say_check(options, Outcome(
            WARNING, f"{CHECKED} was stale: {was}; evaluated again: {reason}",
            "the cache no longer holds it: the next launch evaluates again",
        ))  # fmt: skip
        return
    deps = _deps(cache, recorder)
    stored = False
    if deps is not None:
        with contextlib.suppress(Exception):  # the entry, refreshed or corrected
            cache.store(key, {k: doc[k] for k in ("inputs", "settings")}, deps)
            stored = True
    if doc["inputs"] == options["--check"]:
        return  # the cached answer was right
    after = conclude(environ, launch, decode_result(doc))
    found = after.text.removeprefix(f"{QUEUES}=")
    if stored:
        then = f"the cache now holds {after.queues} for the next launch"
    else:  # a wrong entry must not stay
        with contextlib.suppress(OSError):
            cache.remove(key)
        then = "the cache no longer holds it: the next launch evaluates again"
    _say_check(options, Outcome(
        WARNING, f"{CHECKED} was stale: {was}; evaluated again: {found}", then,
    ))  # fmt: skip


def _say_check(options: dict[str, str], outcome: Outcome) -> None:
    """The check's one line, on the launcher's stderr, as the hook says its
    own (the log level, once per node). Never raises."""
    if "--say" not in options:
        return
    try:
        from .._hook import say

        sys.stderr = os.fdopen(int(options["--say"]), "w", closefd=False)
        say(outcome, os.environ)
    except Exception:
        pass


def _check_timed_out(options: dict[str, str], seconds: float) -> Any:
    def timed_out(signum: int, frame: Any) -> None:
        _say_check(options, Outcome(
            SKIP, f"cache: checking {CHECKED} took over {seconds:g} s",
            "the entry is kept",
        ))  # fmt: skip
        _end_group()

    return timed_out


def imports_from(path0: str | None) -> None:
    """``sys.path`` as the training's interpreter has it (``--path0 DIR`` or
    ``--no-path0 1``; without either, the child keeps its own): ``-m`` put this
    directory first (unless in safe-path or isolated mode, where the child was
    started as the training is); the training's own first entry instead, if it
    has one (``parent.interpreter_of``)."""
    if not (sys.flags.isolated or getattr(sys.flags, "safe_path", False)):
        del sys.path[0]
    if path0 is not None:
        sys.path.insert(0, path0)


def _split(argv: list[str]) -> tuple[dict[str, str], list[str]]:
    """The ``--name VALUE`` options before ``--``, and the training arguments."""
    options: dict[str, str] = {}
    while argv and argv[0] != "--":
        options[argv[0]] = argv[1]
        argv = argv[2:]
    return options, argv[1:]


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

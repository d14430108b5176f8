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
import io
import json
import os
import re
import signal
import sys
from collections.abc import Sequence
from typing import Any

from .._argv import (
    CONFIG_FLAG,
    MODULE_FLAG,
    MODULE_FORM,
    Launch,
    cli_overrides,
    module_args,
    suggest_flag,
)
from .._config import CLI, ConfigError, Setting, from_object
from .._decision import SKIP, WARNING, Outcome, conclude, internal_error
from .._environ import QUEUES, timeout
from .._model import Inputs, read_inputs
from .cache import Cache
from .deps import Recorder
from .result_text import decode_inputs, decode_result, encode_result

#: How MoE is known in this form: PR #4032's own test.
MOE_TEST = "model_spec.model.traverse(MoE.Config)"
#: A list torchtitan puts in a message (the available config functions, the
#: supported modules) is shortened to its first few, with the count.
LIST_SHOWN = 5
PR_SET_PDEATHSIG = 1


def evaluate_config(args: Sequence[str]) -> tuple[Inputs, dict[str, Setting]]:
    """The model's inputs and every field for ``--module M --config FN
    [overrides]``, with the config built by torchtitan itself and read as PR
    #4032 reads it. Imports torchtitan (and torch): never call this in a
    training process. ``ConfigError`` says why torchtitan refused, naming the
    real source: the flag that gave a value, or the config function itself."""
    module, function = module_args(args)  # both flags, with values
    try:
        from torchtitan.config import (  # type: ignore[import-not-found,unused-ignore]
            ConfigManager,
        )
    except Exception as exc:
        raise ConfigError(
            f"torchtitan cannot be imported here ({type(exc).__name__}: {exc})"
        ) from None
    try:
        config = _parse(ConfigManager, args)
    except SystemExit as refused:  # tyro prints why in a box, then exits
        why = f"{refused}{_hint(args)}"
        if _overrides(args) and not _refuses(ConfigManager, module, function):
            raise ConfigError(f"torchtitan rejected the arguments: {why}") from None
        # The config function's own values: no argument of the user's is at fault.
        raise ConfigError(
            f"torchtitan refused the config: {why}", f"{CONFIG_FLAG} {function}"
        ) from None
    except Exception as exc:
        masked = _masked_import(exc, module)
        also = f"; the import that failed: {masked}" if masked else ""
        raise ConfigError(
            "torchtitan could not build the config"
            f" ({type(exc).__name__}: {shorten_lists(str(exc))}{also})"
        ) from None
    try:
        given = cli_overrides(args)
    except ConfigError:
        given = {}
    try:
        settings = from_object(config, {})
    except ConfigError as exc:  # "config: FIELD": say where the value came from
        key = exc.source.partition(": ")[2]
        source = _flag_for(args, key) if key in given else ""
        raise ConfigError(
            exc.reason, source or f"{CONFIG_FLAG} {function}: {key or exc.source}"
        ) from None
    for key in given:  # torchtitan applied the overrides: say they are the CLI's
        settings[key] = Setting(settings[key].value, CLI)
    moe = _has_moe(config)
    known = None if moe is None else (moe, "traverse")
    return read_inputs(settings, known, form=MODULE_FORM), settings


def _parse(manager: Any, args: Sequence[str]) -> Any:
    """``ConfigManager().parse_args(args)``; ``SystemExit(why)`` for tyro's
    refusal, with tyro's box read into one line."""
    said = io.StringIO()
    try:
        with contextlib.redirect_stderr(said):
            return manager().parse_args(list(args))
    except SystemExit:
        raise SystemExit(_why(said)) from None


def _overrides(args: Sequence[str]) -> bool:
    """Whether ``args`` hold anything beyond ``--module M --config FN``."""
    rest = list(args)
    for flag in (MODULE_FLAG, CONFIG_FLAG):
        for i, arg in enumerate(rest):
            if arg.partition("=")[0] == flag:
                del rest[i : i + (1 if "=" in arg else 2)]
                break
    return bool(rest)


def _refuses(manager: Any, module: str, function: str) -> bool:
    """Whether torchtitan refuses the config function alone, with no overrides."""
    try:
        _parse(manager, [MODULE_FLAG, module, CONFIG_FLAG, function])
    except SystemExit:
        return True
    except Exception:  # another failure: not the refusal at hand
        return False
    return False


def _flag_for(args: Sequence[str], key: str) -> str:
    """The command line's own spelling of the last flag that sets ``key``."""
    found = ""
    for arg in args:
        name = arg.partition("=")[0]
        if name.startswith("--") and name[2:].replace("-", "_") == key:
            found = name
    return found or f"--{key}"


#: Where torchtitan 0.3.0 looks for ``--module NAME``'s registry
#: (``ConfigManager._load_config_registry``).
REGISTRY_PREFIXES = (
    "torchtitan.models",
    "torchtitan.experiments",
    "torchtitan.experiments.rl.examples",
)


def _masked_import(exc: BaseException, module: str) -> str | None:
    """The import that really failed behind ``exc``, said as ``Type: message``:
    the first ``ImportError`` in its chain (``__cause__``, ``__context__``); or,
    for torchtitan's own "Cannot import ..." (raised after its loop, so its
    cause is gone), the first candidate registry that exists but cannot be
    imported, imported again here. None if none."""
    seen: set[int] = set()
    link = exc.__cause__ or exc.__context__
    while link is not None and id(link) not in seen:
        seen.add(id(link))
        if isinstance(link, ImportError):
            return f"{type(link).__name__}: {link}"
        link = link.__cause__ or link.__context__
    if not isinstance(exc, ImportError) or not str(exc).startswith("Cannot import"):
        return None
    import importlib

    candidates = [f"{module}.config_registry", module]
    if "." not in module:
        candidates = [
            f"{prefix}.{module}.config_registry" for prefix in REGISTRY_PREFIXES
        ]
    for candidate in candidates:
        try:
            with contextlib.redirect_stderr(io.StringIO()):
                importlib.import_module(candidate)
        except ModuleNotFoundError as inner:
            name = inner.name or ""
            if name and (candidate == name or candidate.startswith(name + ".")):
                continue  # the candidate itself is not there: torchtitan's own case
            return f"{type(inner).__name__}: {inner}"
        except Exception as inner:
            return f"{type(inner).__name__}: {inner}"
    return None


def _why(said: io.StringIO) -> str:
    """tyro's error, out of its box, on one line."""
    lines = said.getvalue().splitlines()
    boxed = []
    for line in lines:
        body = line.strip()
        if body.startswith("│") and body.endswith("│"):
            body = body.strip("│ ")
            if body and not body.strip("─"):
                break  # the rule before "For full helptext"
            boxed.append(body)
    return " ".join(" ".join(boxed or lines[-1:]).split()) or "no reason given"


def _hint(args: Sequence[str]) -> str:
    for arg in args:
        meant = suggest_flag(arg)
        if meant is not None:
            return f" (did you mean {meant} for {arg.partition('=')[0]}?)"
    return ""


_LIST = re.compile(r"\[('[^'\]]*'(?:, '[^'\]]*')*)\]")


def shorten_lists(text: str, shown: int = LIST_SHOWN) -> str:
    """``text`` with each Python list of strings longer than ``shown`` cut to
    its first ones and the count: ``['a', 'b', ... (19 in all)]``."""

    def cut(match: re.Match[str]) -> str:
        items = match.group(1).split(", ")
        if len(items) <= shown:
            return match.group(0)
        return "[" + ", ".join(items[:shown]) + f", ... ({len(items)} in all)]"

    return _LIST.sub(cut, text)


def _has_moe(config: object) -> bool | None:
    """True when ``config.model_spec.model.traverse(MoE.Config)`` yields anything."""
    model = getattr(getattr(config, "model_spec", None), "model", None)
    if model is None:
        return None
    try:
        from torchtitan.models.common.moe import (  # type: ignore[import-not-found,unused-ignore]
            MoE,
        )
    except Exception:
        return None
    return any(True for _ in model.traverse(MoE.Config))


# The process.


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


def lowest_priority() -> None:
    """This process at the lowest CPU priority: nice 19 and, on Linux, the idle
    scheduling class (it runs only when a CPU has nothing else to do)."""
    with contextlib.suppress(OSError):
        os.nice(19)  # from any niceness: 19 is the ceiling
    idle = getattr(os, "SCHED_IDLE", None)
    if idle is not None and hasattr(os, "sched_setscheduler"):
        with contextlib.suppress(OSError):
            os.sched_setscheduler(0, idle, os.sched_param(0))


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

"""The start-up hook: run by ``rocm_hwq_autoset.pth`` (or ``.start``) in a
process whose argv names a torchtitan job config.

It must never raise, hang, write a file or import torch. Everything it does is
in :func:`decide`, in the order of the decision.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Mapping, MutableMapping, Sequence

from . import _environment as env
from ._api import recommend
from ._argv import config_file_arg
from ._errors import ConfigError
from ._registry import evaluate_in_child, training_args
from ._rocm import detect

PREFIX = "rocm-hwq-autoset: "
#: A log line longer than this is cut: a path or a parser message can be long.
MAX_LINE = 400

_ran = False
#: How a ``--module``/``--config`` launch is evaluated: args, environment and
#: world size in; Q and the lanes out.
Evaluator = Callable[
    [Sequence[str], Mapping[str, str], "int | None"], tuple[int, tuple[str, ...]]
]


def run() -> None:
    """Entry point. Runs once per process, however often ``site`` calls it (a
    venv can list its site-packages twice)."""
    global _ran
    if _ran:
        return
    _ran = True
    log = Log(os.environ)
    argv = list(getattr(sys, "argv", None) or [""])[1:]
    orig_argv = list(getattr(sys, "orig_argv", None) or [])
    try:
        decide(os.environ, argv, sys.path, log, orig_argv)
    except Exception as exc:  # never a traceback at start-up
        log.warn(
            f"internal error ({type(exc).__name__}: {exc}); {env.QUEUES} left unset"
        )


def decide(
    environ: MutableMapping[str, str],
    argv: Sequence[str],
    path: Sequence[str],
    log: Log,
    orig_argv: Sequence[str] = (),
    evaluate: Evaluator = evaluate_in_child,
) -> None:
    """Set ``GPU_MAX_HW_QUEUES`` in ``environ`` for the training launch in ``argv``."""
    switch = env.switch(environ)
    if switch == "off":
        return log.why(f"{env.SWITCH}={environ[env.SWITCH]} (opted out)")
    explicit = env.explicit_queues(environ)
    if explicit is not None:
        return log.why(f"{env.QUEUES}={explicit} was set explicitly; left as is")
    if env.origin(environ) == env.FROM_MODULE:
        return log.why(f"{env.QUEUES}={environ[env.QUEUES]} from the launcher's config")
    config_path = config_file_arg(argv)
    module_args = None if config_path else training_args(argv, orig_argv)
    if config_path is None and module_args is None:
        return log.why("no --job.config_file and no torchtitan --module/--config")
    if switch != "force":
        verdict = detect(path, environ)
        if not verdict.rocm:
            return log.why(f"not ROCm: {verdict.evidence}")
    try:
        world_size = env.world_size(environ)
        if config_path is not None:
            from ._toml import load_toml  # the TOML parser only where it is needed

            rec = recommend(load_toml(config_path), argv=argv, world_size=world_size)
            queues, lanes, how = rec.queues, rec.lanes, env.FROM_TOML
        else:
            queues, lanes = evaluate(module_args or [], environ, world_size)
            how = env.FROM_MODULE
    except ConfigError as exc:
        where = _shorten(config_path) if config_path else "--module/--config"
        return log.warn(f"{where}: {exc}; {env.QUEUES} left unset")
    inherited = environ.get(env.QUEUES)
    environ[env.QUEUES] = str(queues)
    environ[env.ORIGIN] = f"{queues} {how}"
    if inherited == environ[env.QUEUES]:
        return log.why(f"{env.QUEUES}={queues} as set by the parent process")
    log.info(f"{env.QUEUES}={queues} ({len(lanes)} GPU streams: {', '.join(lanes)})")


def preview(
    environ: Mapping[str, str],
    argv: Sequence[str],
    path: Sequence[str],
    evaluate: Evaluator | None = None,
) -> str:
    """What the hook would do for the torchtitan training arguments ``argv`` in
    ``environ``, in one line; nothing is changed. ``explain`` and ``doctor``
    show it. ``evaluate`` stands in for the child evaluation of a
    ``--module``/``--config`` launch when the caller already has the answer."""
    scratch = dict(environ)
    if env.explicit_queues(scratch) is None:  # a value of ours is recomputed
        scratch.pop(env.QUEUES, None)
        scratch.pop(env.ORIGIN, None)
    lines: list[str] = []
    log = Log(scratch, lines.append, verbose=True)
    as_launched = ["-m", "torchtitan.train", *argv]  # argv are its arguments
    decide(scratch, argv, path, log, as_launched, evaluate or evaluate_in_child)
    if env.ORIGIN in scratch:
        return f"would set {env.QUEUES}={scratch[env.QUEUES]}"
    return lines[-1] if lines else "would do nothing"


class Log:
    """One line on stderr per event, by ``ROCM_HWQ_AUTOSET_LOG`` and the rank."""

    def __init__(
        self,
        environ: Mapping[str, str],
        write: Callable[[str], object] | None = None,
        *,
        verbose: bool = False,
    ) -> None:
        level = environ.get(env.LOG, "").strip().lower()
        self.write = write or _write
        self.verbose = verbose or level == "verbose"
        self.enabled = level != "quiet" and (self.verbose or env.speaks(environ))

    def info(self, message: str) -> None:
        if self.enabled:
            self.write(message)

    def warn(self, message: str) -> None:
        if self.enabled:
            self.write("warning: " + message)

    def why(self, message: str) -> None:
        if self.verbose:
            self.write("nothing to do: " + message)


def _shorten(path: str, limit: int = 160) -> str:
    """A path cut in the middle, so the reason after it stays on the line."""
    if len(path) <= limit:
        return path
    half = (limit - 3) // 2
    return path[:half] + "..." + path[-half:]


def _write(message: str) -> None:
    line = "".join(c if c.isprintable() else "?" for c in message)
    if len(line) > MAX_LINE:
        line = line[: MAX_LINE - 3] + "..."
    try:
        stream = sys.stderr
        if stream is not None:
            stream.write(PREFIX + line + "\n")
            stream.flush()
    except Exception:  # a closed or broken stderr must not break start-up
        pass

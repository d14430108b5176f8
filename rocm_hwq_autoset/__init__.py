"""Set ``GPU_MAX_HW_QUEUES`` for torchtitan launches on ROCm at interpreter start.

This module is the start-up edge: the gate every process passes and the hook that
applies the decision (environment variables, one line on stderr). Everything else
is in the modules it calls. ``rocm_hwq_autoset.pth`` checks the arguments and the
switch itself and imports this package only for a possible training launch; on
Python 3.15+, ``rocm_hwq_autoset.start`` names :func:`start`, and this module is
imported at every interpreter start. So it imports only ``os`` and ``sys`` until
the gate opens. Nothing here raises, hangs, writes a file or imports torch.

The public API, loaded on first use: :func:`recommend`, :class:`Recommendation`
and :class:`ConfigError`.
"""

import os
import sys

TYPE_CHECKING = False  # not typing's: importing typing costs start-up time
if TYPE_CHECKING:
    from collections.abc import Mapping, MutableMapping
    from typing import Any

    from ._decision import Outcome
    from ._launch import ConfigError
    from ._model import Recommendation, recommend
    from ._rocm import Verdict

__version__ = "0.2.0"
__all__ = ["ConfigError", "Recommendation", "__version__", "recommend"]


def __getattr__(name: str) -> object:
    if name in ("Recommendation", "recommend"):
        from . import _model

        return getattr(_model, name)
    if name == "ConfigError":
        from ._launch import ConfigError

        return ConfigError
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


# The gate.

#: The switch. The ``.pth`` line reads it too, before importing the package.
SWITCH = "ROCM_HWQ_AUTOSET"
#: Values of the switch that keep the hook out of the process.
OFF_VALUES = ("0", "false", "off", "no")
#: An argument starting with one of these may make this process a training launch.
TRIGGERS = ("--job.config", "--module")


def wanted() -> bool:
    """False for every process that is surely not a torchtitan launch."""
    if os.environ.get(SWITCH, "").strip().lower() in OFF_VALUES:
        return False
    for arg in getattr(sys, "argv", None) or ():
        if str(arg).startswith(TRIGGERS):
            return True
    return False


def start() -> None:
    """Run the hook when :func:`wanted`; never raise."""
    try:
        if wanted():
            run()
    except Exception:
        pass


# The hook.

PREFIX = "rocm-hwq-autoset: "
#: A log line longer than this is cut: a path or a parser message can be long.
MAX_LINE = 400

#: Whether the hook ran in this process (``doctor`` says so).
ran = False


def run() -> None:
    """Decide and apply, once per process however often ``site`` calls it (a
    venv can list its site-packages twice)."""
    global ran
    if ran:
        return
    ran = True
    try:
        from ._decision import PENDING, decide, log_level

        _, problem = log_level(os.environ)
        if problem:
            say(f"warning: {problem}", os.environ)
        outcome = decide(
            os.environ,
            list(getattr(sys, "argv", None) or [""])[1:],
            list(getattr(sys, "orig_argv", None) or []),
            rocm=_detect,
            read_config=_read_config,
        )
        if outcome.level == PENDING:
            from ._registry_parent import start_pending

            start_pending(outcome)
        else:
            apply(outcome)
    except Exception as exc:  # never a traceback at start-up
        say(f"warning: internal error ({type(exc).__name__}: {exc}); nothing set",
            os.environ)  # fmt: skip


def apply(outcome: "Outcome", *environs: "MutableMapping[str, str]") -> None:
    """Set what the outcome sets in each of ``environs`` (``os.environ`` if none;
    a launcher adds the environment a process about to start will get), and say
    it as the first one's log level and rank ask."""
    from ._decision import ORIGIN, QUEUES, SET, SKIP

    targets = environs or (os.environ,)
    for target in targets:
        if outcome.queues is not None:
            target[QUEUES] = str(outcome.queues)
        if outcome.marker is not None:
            target[ORIGIN] = outcome.marker
    if outcome.level == SKIP:
        say(f"nothing to do: {outcome.message}", targets[0], always=False)
    else:
        prefix = "" if outcome.level == SET else "warning: "
        say(prefix + outcome.message, targets[0])


def say(message: str, environ: "Mapping[str, str]", *, always: bool = True) -> None:
    """One line on stderr: in verbose mode always; by default only once per
    node (the launcher or ``LOCAL_RANK`` 0), and only ``always`` lines."""
    from ._decision import log_level, speaks

    level, _ = log_level(environ)
    if level == "quiet" or (level != "verbose" and not (always and speaks(environ))):
        return
    line = "".join([c if c.isprintable() else "?" for c in message])
    if len(line) > MAX_LINE:
        line = line[: MAX_LINE - 3] + "..."
    try:
        stream = sys.stderr
        if stream is not None:
            stream.write(PREFIX + line + "\n")
            stream.flush()
    except Exception:  # a closed or broken stderr must not break start-up
        pass


def _detect() -> "Verdict":
    from ._rocm import detect

    return detect(sys.path, os.environ)


def _read_config(path: str) -> "Mapping[str, Any]":
    from ._launch import load_toml  # the TOML parser only where it is needed

    return load_toml(path)

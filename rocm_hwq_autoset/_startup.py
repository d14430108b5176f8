"""Start-up: the gate every process passes, and the hook that applies the decision.

``rocm_hwq_autoset.pth`` inlines the gate's check (and calls :func:`start` on a
match); ``rocm_hwq_autoset.start`` names :func:`start` for Python 3.15+, where it
replaces the ``.pth`` line and this module is imported at every interpreter start.
So this module imports only ``os`` and ``sys`` until the gate opens; then
:func:`run` asks :func:`~rocm_hwq_autoset._decision.decide` what to do and applies
the outcome: the environment variables, one line on stderr. A ``--module`` launch
hands its pending outcome to the child evaluation (``_registry_parent``), which
applies the final one when it is needed. Nothing here raises, hangs, writes a
file or imports torch.
"""

import os
import sys

TYPE_CHECKING = False  # not typing's: importing typing costs start-up time
if TYPE_CHECKING:
    from collections.abc import Mapping, MutableMapping
    from typing import Any

    from ._decision import Outcome
    from ._rocm import Verdict

# The gate.

#: The switch. The ``.pth`` line reads it before importing anything.
SWITCH = "ROCM_HWQ_AUTOSET"
#: Values of the switch that keep the package out of the process altogether.
OFF_VALUES = ("0", "false", "off", "no")
#: An argument starting with one of these may make this process a training launch.
TRIGGERS = ("--job.config", "--module")


def wanted() -> bool:
    """False for every process that is surely not a torchtitan launch."""
    if os.environ.get(SWITCH, "").strip().lower() in OFF_VALUES:
        return False
    return any(str(a).startswith(TRIGGERS) for a in getattr(sys, "argv", None) or ())


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

_ran = False


def run() -> None:
    """Entry point. Runs once per process, however often ``site`` calls it (a
    venv can list its site-packages twice)."""
    global _ran
    if _ran:
        return
    _ran = True
    try:
        from . import _decision as env
        from ._decision import PENDING, decide

        _, problem = env.log_level(os.environ)
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
        say(f"warning: internal error ({type(exc).__name__}: {exc});"
            f" {env.QUEUES} left unset", os.environ)  # fmt: skip


def apply(outcome: "Outcome", *environs: "MutableMapping[str, str]") -> None:
    """Set what the outcome sets in each of ``environs`` (``os.environ`` if none;
    a launcher adds the environment a process about to start will get), and say
    it as the first one's log level and rank ask."""
    from . import _decision as env

    targets = environs or (os.environ,)
    for target in targets:
        if outcome.queues is not None:
            target[env.QUEUES] = str(outcome.queues)
        if outcome.marker is not None:
            target[env.ORIGIN] = outcome.marker
    if outcome.level == env.SKIP:
        say(f"nothing to do: {outcome.message}", targets[0], always=False)
    else:
        prefix = "" if outcome.level == env.SET else "warning: "
        say(prefix + outcome.message, targets[0])


def say(message: str, environ: "Mapping[str, str]", *, always: bool = True) -> None:
    """One line on stderr: in verbose mode always; by default only once per
    node (the launcher or ``LOCAL_RANK`` 0), and only ``always`` lines."""
    from . import _decision as env

    level, _ = env.log_level(environ)
    if level == "quiet" or (
        level != "verbose" and not (always and env.speaks(environ))
    ):
        return
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


def _detect() -> "Verdict":
    from ._rocm import detect

    return detect(sys.path, os.environ)


def _read_config(path: str) -> "Mapping[str, Any]":
    from ._launch import load_toml  # the TOML parser only where it is needed

    return load_toml(path)

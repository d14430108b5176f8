"""The start-up decision, as a value, and the environment variables it reads.

:func:`decide` takes the environment, the command line and what detection finds,
and returns an :class:`Outcome`: the value to set and how it was derived, or why
nothing is done, and how loudly to say so. It changes nothing. The start-up hook
applies the outcome; ``explain`` and ``doctor`` show the same outcome.

A ``--module``/``--config`` launch cannot be decided in the training process (its
config is Python that imports torch): :func:`decide` returns a *pending* outcome
naming the arguments to evaluate, and :func:`conclude` turns the evaluation's
result into the final outcome.
"""

from __future__ import annotations

from . import OFF_VALUES as OFF_VALUES
from . import SWITCH as SWITCH
from ._launch import ConfigError, find_launch
from ._model import recommend

TYPE_CHECKING = False  # not typing's: start-up imports as little as it can
if TYPE_CHECKING:
    from collections.abc import Callable, Mapping, Sequence
    from typing import Any

    from ._launch import Launch
    from ._rocm import Verdict

# The environment variables: names, and what each value means.

#: HIP's flag: the hardware queues per device and stream priority.
QUEUES = "GPU_MAX_HW_QUEUES"
#: CLR's default when the flag is unset (``release(uint, GPU_MAX_HW_QUEUES, 4, ...)``).
HIP_DEFAULT_QUEUES = 4

#: The values of ``ROCM_HWQ_AUTOSET`` (any case, spaces ignored); anything else is
#: refused with a warning, and the hook does nothing: a value it cannot read never
#: turns it on.
ON_VALUES = ("", "1", "on", "true", "yes", "auto")
FORCE_VALUE = "force"  # skip ROCm detection
SWITCH_VALUES = "1/on/true/yes/auto (on), 0/off/false/no (off) or force"

#: ``quiet``: print nothing. ``verbose``: every rank prints, and says why it did
#: nothing. Unset or empty: one line per node (the launcher or ``LOCAL_RANK`` 0).
LOG = "ROCM_HWQ_AUTOSET_LOG"
LOG_LEVELS = ("quiet", "verbose")

#: Set beside ``GPU_MAX_HW_QUEUES`` as ``"<Q> <how>"``: a value this package set
#: (here or in a parent such as the torchrun launcher) is not explicit. A launcher
#: whose ``--module`` evaluation failed sets ``"unset --module"``, so that its
#: workers neither evaluate again nor warn again.
ORIGIN = "ROCM_HWQ_AUTOSET_ORIGIN"
FROM_TOML = "job.config_file"
FROM_MODULE = "--module"
UNSET = "unset"

#: Seconds the ``--module``/``--config`` evaluation may take: importing torch and
#: torchtitan takes 6-10 s on a busy 2-core machine; 120 s leaves room for a slow
#: shared file system without letting a hung import hold a launch for long.
TIMEOUT = "ROCM_HWQ_AUTOSET_TIMEOUT"
DEFAULT_TIMEOUT = 120.0


def switch(environ: Mapping[str, str]) -> str:
    """``on``, ``off``, ``force``, or ``invalid``."""
    value = environ.get(SWITCH, "").strip().lower()
    if value in OFF_VALUES:
        return "off"
    if value in ON_VALUES:
        return "on"
    return "force" if value == FORCE_VALUE else "invalid"


def log_level(environ: Mapping[str, str]) -> tuple[str, str | None]:
    """``quiet``, ``verbose`` or ``default``, and a warning for a value that is
    none of them (the default is used then)."""
    value = environ.get(LOG, "").strip().lower()
    if not value:
        return "default", None
    if value in LOG_LEVELS:
        return value, None
    return "default", (
        f"{LOG}={environ[LOG]!r} is not quiet or verbose;"
        " using the default (one line per node)"
    )


def positive_int(text: str) -> int | None:
    """``text`` as a positive decimal integer, else None."""
    text = text.strip()
    if not text.isdigit() or not text.isascii():
        return None
    value = int(text)
    return value if value > 0 else None


def marker(environ: Mapping[str, str]) -> tuple[str, str] | None:
    """``(value, how)`` of ``ROCM_HWQ_AUTOSET_ORIGIN`` when it describes the
    current ``GPU_MAX_HW_QUEUES`` (the same value, or ``unset`` with none set)."""
    value, _, how = environ.get(ORIGIN, "").partition(" ")
    if how not in (FROM_TOML, FROM_MODULE):
        return None
    current = environ.get(QUEUES, "")
    if value == current or (value == UNSET and not current):
        return value, how
    return None


def explicit_queues(environ: Mapping[str, str]) -> str | None:
    """A ``GPU_MAX_HW_QUEUES`` someone else set, which always wins; else None.

    An empty value counts as unset: HIP reads it as its default.
    """
    value = environ.get(QUEUES, "")
    if not value or marker(environ) is not None:
        return None
    return value


def world_size(environ: Mapping[str, str]) -> int | None:
    """torchrun's ``WORLD_SIZE``, set in workers and absent in the launcher."""
    raw = environ.get("WORLD_SIZE")
    if raw is None:
        return None
    size = positive_int(raw)
    if size is None:
        raise ConfigError(f"WORLD_SIZE={raw!r} is not a positive integer")
    return size


def timeout(environ: Mapping[str, str]) -> float:
    """Seconds for the ``--module``/``--config`` evaluation."""
    raw = environ.get(TIMEOUT, "")
    if not raw.strip():
        return DEFAULT_TIMEOUT
    try:
        value = float(raw)
    except ValueError:
        value = 0.0
    if not 0 < value < float("inf"):
        raise ConfigError(f"{TIMEOUT}={raw!r} is not a positive number of seconds")
    return value


def speaks(environ: Mapping[str, str]) -> bool:
    """Whether this process prints by default: once per node."""
    return environ.get("LOCAL_RANK", "0").strip() == "0"


# The decision.

#: Outcome levels. ``set``: a value to set, one line per node. ``skip``: nothing
#: to do, said only in verbose mode. ``warning``: nothing set (or an explicit
#: value kept) because of an input that is wrong; one line per node.
#: ``pending``: a ``--module`` launch waiting for its evaluation.
SET, SKIP, WARNING, PENDING = "set", "skip", "warning", "pending"


class Outcome:
    """What the hook does for one process, and the line that says so."""

    __slots__ = ("how", "lanes", "launch", "level", "marker", "message", "queues",
                 "world_size")  # fmt: skip

    def __init__(
        self,
        level: str,
        message: str,
        *,
        queues: int | None = None,
        lanes: tuple[str, ...] = (),
        how: str = "",
        marker: str | None = None,
        launch: Launch | None = None,
        world_size: int | None = None,
    ) -> None:
        self.level = level
        self.message = message
        """One line, without the ``rocm-hwq-autoset:`` prefix."""
        self.queues = queues
        """The value to set, or None to set nothing."""
        self.lanes = lanes
        self.how = how
        """``job.config_file`` or ``--module``: where the value came from."""
        self.marker = marker
        """The ``ROCM_HWQ_AUTOSET_ORIGIN`` to set beside it, or None."""
        self.launch = launch
        """For a pending outcome: the ``--module`` launch to evaluate."""
        self.world_size = world_size

    def __repr__(self) -> str:
        return f"Outcome({self.level!r}, {self.message!r}, queues={self.queues!r})"


def decide(
    environ: Mapping[str, str],
    argv: Sequence[str],
    orig_argv: Sequence[str],
    *,
    rocm: Callable[[], Verdict],
    read_config: Callable[[str], Mapping[str, Any]],
) -> Outcome:
    """The hook's outcome for a process with these environment and arguments.

    ``argv`` is ``sys.argv[1:]``; ``rocm`` and ``read_config`` are asked only
    when the decision gets that far (detection, the bounded TOML reader).
    """
    mode = switch(environ)
    if mode == "off":
        return _skip(f"{SWITCH}={environ[SWITCH]} (opted out)")
    if mode == "invalid":
        return _warn(
            f"{SWITCH}={environ[SWITCH]!r} is not {SWITCH_VALUES};"
            " the hook does nothing"
        )
    explicit = explicit_queues(environ)
    if explicit is not None:
        if positive_int(explicit) is None:
            return _warn(
                f"{QUEUES}={explicit!r} is set but is not a positive integer,"
                " which HIP cannot use; left as is (an explicit value always wins)"
            )
        return _skip(f"{QUEUES}={explicit} was set explicitly; left as is")
    inherited = marker(environ)
    if inherited is not None and inherited[0] == UNSET:
        return _skip(f"the launcher's {inherited[1]} evaluation failed and said so")
    if inherited is not None and inherited[1] == FROM_MODULE:
        return _skip(f"{QUEUES}={inherited[0]} from the launcher's --module")
    launch = find_launch(argv, orig_argv)
    if launch is None:
        return _skip("no --job.config_file and no torchtitan --module/--config")
    if mode != "force":
        verdict = rocm()
        if not verdict.rocm:
            return _skip(f"not ROCm: {verdict.evidence}")
    how = FROM_MODULE if launch.config_file is None else FROM_TOML
    try:
        size = world_size(environ)
        if launch.config_file is None:
            timeout(environ)  # a bad timeout is said here, before any child
            return Outcome(
                PENDING,
                "evaluating --module/--config in a child interpreter",
                how=how,
                launch=launch,
                world_size=size,
            )
        config = read_config(launch.config_file)
        rec = recommend(config, argv=argv, world_size=size)
    except ConfigError as exc:
        where = _shorten(launch.config_file or "--module/--config")
        return failed(how, f"{where}: {exc}")
    return _set(environ, rec.queues, rec.lanes, how)


def conclude(
    environ: Mapping[str, str],
    pending: Outcome,
    result: tuple[int, tuple[str, ...]] | ConfigError,
) -> Outcome:
    """The final outcome of a pending ``--module`` launch, from its evaluation."""
    if isinstance(result, ConfigError):
        return failed(pending.how, f"--module/--config: {result}")
    return _set(environ, result[0], result[1], pending.how)


def failed(how: str, reason: str) -> Outcome:
    """Nothing set, one warning; the marker tells this process's children (a
    launcher's workers) that it failed, so they neither retry nor warn again."""
    return Outcome(WARNING, f"{reason}; {QUEUES} left unset", marker=f"{UNSET} {how}")


def _set(
    environ: Mapping[str, str], queues: int, lanes: tuple[str, ...], how: str
) -> Outcome:
    text = str(queues)
    if environ.get(QUEUES) == text:  # a parent of ours set it: said there
        level, message = SKIP, f"{QUEUES}={text} as set by the parent process"
    else:
        level = SET
        message = f"{QUEUES}={text} ({len(lanes)} GPU streams: {', '.join(lanes)})"
    return Outcome(
        level, message, queues=queues, lanes=lanes, how=how, marker=f"{text} {how}"
    )


def _skip(message: str) -> Outcome:
    return Outcome(SKIP, message)


def _warn(message: str) -> Outcome:
    return Outcome(WARNING, message)


def _shorten(path: str, limit: int = 160) -> str:
    """A path cut in the middle, so the reason after it stays on the line."""
    if len(path) <= limit:
        return path
    half = (limit - 3) // 2
    return path[:half] + "..." + path[-half:]

"""The start-up decision, as a value, and the environment variables it reads.

:func:`decide` takes the environment, the command line and what detection finds,
and returns an :class:`Outcome`: the value to set and how it was derived, or why
nothing is done, and how loudly to say so. It changes nothing. The start-up hook
applies the outcome; ``explain`` and ``doctor`` show the same outcome.

A ``--module``/``--config`` launch cannot be decided in the training process (its
config is Python that imports torch): :func:`decide` returns the ``Launch`` to
evaluate, and :func:`conclude` turns the evaluation's
result into the final outcome. Both forms reach Q through :func:`recommend_launch`.
"""

from __future__ import annotations

from ._argv import (
    MODULE_FORM,
    TOML_FORM,
    cli_overrides,
    config_file_arg,
    find_launch,
    has_config_file,
    is_own_command,
    module_args,
    program,
)
from ._config import ConfigError, merge
from ._model import Inputs, Recommendation, read_inputs

TYPE_CHECKING = False  # not typing's: start-up imports as little as it can
if TYPE_CHECKING:
    from collections.abc import Callable, Mapping, Sequence
    from typing import Any

    from ._argv import Launch
    from ._config import Setting

    #: What evaluating a ``--module`` launch gives: the model's inputs and every
    #: field with its source.
    Evaluated = tuple[Inputs, dict[str, Setting]]

# The environment variables: names, and what each value means.

#: HIP's flag: the hardware queues per device and stream priority.
QUEUES = "GPU_MAX_HW_QUEUES"
#: CLR's default when the flag is unset (``release(uint, GPU_MAX_HW_QUEUES, 4, ...)``).
HIP_DEFAULT_QUEUES = 4

#: The switch. The ``.pth`` line and the gate (``rocm_hwq_autoset.start``) read
#: it too, before importing anything, with these same off values.
SWITCH = "ROCM_HWQ_AUTOSET"
#: The values of the switch (any case, spaces ignored); anything else is refused
#: with a warning, and the hook does nothing: a value it cannot read never turns
#: it on.
OFF_VALUES = ("0", "false", "off", "no")
ON_VALUES = ("", "1", "on", "true", "yes", "auto")
FORCE_VALUE = "force"  # skip ROCm detection
SWITCH_VALUES = "1/on/true/yes/auto (on), 0/off/false/no (off) or force"

#: ``quiet``: print nothing. ``verbose``: every rank prints, and says why it did
#: nothing. Unset or empty: one line per node (the launcher or ``LOCAL_RANK`` 0).
LOG = "ROCM_HWQ_AUTOSET_LOG"
LOG_LEVELS = ("quiet", "verbose")
#: One line per node: the level when the variable is unset or unreadable.
DEFAULT_LOG = "default"

#: Set beside ``GPU_MAX_HW_QUEUES`` as ``"<Q> <form>"``: a value this package set
#: (here or in a parent such as the torchrun launcher) is not explicit. A launcher
#: whose ``--module`` evaluation failed sets ``"unset --module"``, so that its
#: workers neither evaluate again nor warn again.
ORIGIN = "ROCM_HWQ_AUTOSET_ORIGIN"
#: Set beside it by a ``--module`` launcher: the model's inputs
#: (:meth:`Inputs.encode`), from which a worker that knows ``WORLD_SIZE``
#: recomputes Q as a TOML launch's worker does, without evaluating again.
INPUTS = "ROCM_HWQ_AUTOSET_INPUTS"
#: How each form is named in the marker.
MARKED = {TOML_FORM: "job.config_file", MODULE_FORM: "--module"}
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


def switch_problem(environ: Mapping[str, str]) -> str | None:
    """The warning for a switch value it cannot read, else None."""
    if switch(environ) != "invalid":
        return None
    return f"{SWITCH}={environ[SWITCH]!r} is not {SWITCH_VALUES}"


def log_level(environ: Mapping[str, str]) -> tuple[str, str | None]:
    """``quiet``, ``verbose`` or ``default``, and a warning for a value that is
    none of them (the default is used then)."""
    value = environ.get(LOG, "").strip().lower()
    if not value:
        return DEFAULT_LOG, None
    if value in LOG_LEVELS:
        return value, None
    return DEFAULT_LOG, (
        f"{LOG}={environ[LOG]!r} is not quiet or verbose;"
        " using the default (one line per node)"
    )


def prints_for_node(environ: Mapping[str, str]) -> bool:
    """Whether this process prints by default: once per node (the launcher,
    which has no ``LOCAL_RANK``, or local rank 0)."""
    return environ.get("LOCAL_RANK", "0").strip() == "0"


def positive_int(text: str) -> int | None:
    """``text`` as a positive decimal integer, else None."""
    text = text.strip()
    if not text.isdigit() or not text.isascii():
        return None
    value = int(text)
    return value if value > 0 else None


def marker(environ: Mapping[str, str]) -> tuple[str, str] | None:
    """``(value, form)`` of ``ROCM_HWQ_AUTOSET_ORIGIN`` when it describes the
    current ``GPU_MAX_HW_QUEUES`` (the same value, or ``unset`` with none set)."""
    value, _, marked = environ.get(ORIGIN, "").partition(" ")
    form = next((f for f, text in MARKED.items() if text == marked), None)
    if form is None:
        return None
    current = environ.get(QUEUES) or UNSET  # unset or empty: HIP's default
    return (value, form) if value == current else None


def explicit_queues(environ: Mapping[str, str]) -> str | None:
    """A ``GPU_MAX_HW_QUEUES`` someone else set, which always wins; else None.

    An empty value counts as unset: HIP reads it as its default.
    """
    value = environ.get(QUEUES)
    if not value or marker(environ) is not None:
        return None
    return value


def explicit_problem(value: str) -> str | None:
    """Why HIP cannot use an explicit value, or None when it can."""
    if positive_int(value) is not None:
        return None
    return (
        f"{QUEUES}={value!r} is set but is not a positive integer, which HIP cannot use"
    )


def world_size(environ: Mapping[str, str]) -> int | None:
    """torchrun's ``WORLD_SIZE``, set in workers and absent in the launcher."""
    raw = environ.get("WORLD_SIZE")
    if raw is None:
        return None
    size = positive_int(raw)
    if size is None:
        raise ConfigError(f"{raw!r} is not a positive integer", "WORLD_SIZE")
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
        raise ConfigError(f"{raw!r} is not a positive number of seconds", TIMEOUT)
    return value


# The decision.

#: Outcome levels. ``set``: a value to set, one line per node. ``skip``: nothing
#: to do, said only in verbose mode. ``warning``: nothing set (or an explicit
#: value kept) because of an input that is wrong; one line per node.
SET, SKIP, WARNING = "set", "skip", "warning"


class Outcome:
    """What the hook does for one process, and the line that says so: ``text``
    (the cause; the part a long line loses from its middle), then ``tail`` (what
    was done about it, never cut)."""

    __slots__ = ("inputs", "level", "marker", "queues", "tail", "text")

    def __init__(
        self,
        level: str,
        text: str,
        tail: str = "",
        *,
        queues: int | None = None,
        marker: str | None = None,
        inputs: Inputs | None = None,
    ) -> None:
        self.level = level
        self.text = text
        self.tail = tail
        self.queues = queues
        """The value to set, or None to set nothing."""
        self.marker = marker
        """The ``ROCM_HWQ_AUTOSET_ORIGIN`` to set beside it, or None."""
        self.inputs = inputs
        """For a ``--module`` launch, the model's inputs its workers get."""

    @property
    def message(self) -> str:
        """The whole line, without the ``rocm-hwq-autoset:`` prefix."""
        return f"{self.text}; {self.tail}" if self.tail else self.text

    def __repr__(self) -> str:
        return f"Outcome({self.level!r}, {self.message!r}, queues={self.queues!r})"


def decide(
    environ: Mapping[str, str],
    argv: Sequence[str],
    orig_argv: Sequence[str],
    *,
    rocm: Callable[[], tuple[bool, str]],
    read_toml: Callable[[str], Mapping[str, Any]],
) -> Outcome | Launch:
    """The hook's outcome for a process with this environment and command line,
    or, for a ``--module`` launch, the launch to evaluate first.

    ``argv`` is the whole ``sys.argv`` as it is at interpreter start; ``rocm``
    and ``read_toml`` are asked only when the decision gets that far
    (detection, the bounded TOML reader).
    """
    if is_own_command(*program(argv, orig_argv)):
        return _skip("rocm-hwq-autoset's own command")
    mode = switch(environ)
    if mode == "off":
        return _skip(f"{SWITCH}={environ[SWITCH]} (opted out)")
    problem = switch_problem(environ)
    if problem is not None:
        return Outcome(WARNING, problem, "the hook does nothing")
    explicit = explicit_queues(environ)
    if explicit is not None:
        problem = explicit_problem(explicit)
        if problem is not None:
            return Outcome(
                WARNING, problem, "left as is (an explicit value always wins)"
            )
        return _skip(f"{QUEUES}={explicit} was set explicitly; left as is")
    inherited = marker(environ)
    if inherited is not None and inherited[0] == UNSET:
        return _skip(
            f"the launcher's {MARKED[inherited[1]]} evaluation failed and said so"
        )
    if inherited is not None and inherited[1] == MODULE_FORM:
        return _inherit(environ, inherited[0])
    launch = find_launch(argv, orig_argv)
    if launch is None:
        return _skip("no --job.config_file and no torchtitan --module/--config")
    if mode != FORCE_VALUE:
        on_rocm, evidence = rocm()
        if not on_rocm:
            return _skip(f"not ROCm: {evidence}")
    try:
        size = world_size(environ)
        if launch.form == MODULE_FORM:
            module_args(launch.args)  # both flags, with values, as torchtitan needs
            timeout(environ)  # a bad timeout is said here, before any child
            return launch
        rec = recommend_launch(launch, size, read_toml=read_toml)
    except ConfigError as exc:
        return failed(launch.form, exc)
    return _set(environ, rec, TOML_FORM)


def recommend_launch(
    launch: Launch,
    world_size: int | None,
    *,
    read_toml: Callable[[str], Mapping[str, Any]] | None = None,
    evaluated: Evaluated | None = None,
) -> Recommendation:
    """The one way from a launch to its recommendation, for the hook, ``explain``,
    ``doctor`` and ``verify``: a TOML launch's config and overrides are read here;
    a ``--module`` launch brings its evaluation (the model's inputs, from the
    child or the cache). The world size resolves ``data_parallel_shard_degree =
    -1`` in both forms alike."""
    if launch.form == MODULE_FORM:
        if evaluated is None:
            raise ConfigError("a --module/--config launch needs its evaluation")
        return Recommendation(evaluated[0], world_size, evaluated[1])
    if not has_config_file(launch.args):  # torchtitan's defaults, and the flags
        settings = merge(None, cli_overrides(launch.args))
    else:
        if read_toml is None:
            raise ConfigError("a TOML launch needs its reader")
        path = config_file_arg(launch.args)
        config = read_toml(path)  # torchtitan reads the file before the flags
        settings = merge(config, cli_overrides(launch.args), path)
    return Recommendation(read_inputs(settings), world_size, settings)


def conclude(
    environ: Mapping[str, str],
    launch: Launch,
    result: Evaluated | ConfigError,
    *,
    cached: bool = False,
) -> Outcome:
    """The final outcome of a ``--module`` launch, from its evaluation."""
    try:
        if isinstance(result, ConfigError):
            raise result
        rec = recommend_launch(launch, world_size(environ), evaluated=result)
    except ConfigError as exc:
        return failed(MODULE_FORM, exc)
    return _set(environ, rec, MODULE_FORM, cached=cached)


def failed(form: str, error: ConfigError) -> Outcome:
    """Nothing set, one warning; the marker tells this process's children (a
    launcher's workers) that it failed, so they neither retry nor warn again."""
    where = "" if error.source or form == TOML_FORM else "--module/--config: "
    return Outcome(
        WARNING,
        where + str(error),
        f"{QUEUES} left unset",
        marker=f"{UNSET} {MARKED[form]}",
    )


def _inherit(environ: Mapping[str, str], value: str) -> Outcome:
    """A worker of a ``--module`` launcher: the launcher's value, or, with
    ``WORLD_SIZE`` and the launcher's inputs, the same model applied here."""
    try:
        size = world_size(environ)
        inputs = None
        if INPUTS in environ:
            from ._evaluation.result_text import (
                decode_inputs,  # a --module launch's worker
            )

            inputs = decode_inputs(environ[INPUTS])
    except ConfigError as exc:
        return Outcome(
            WARNING, str(exc.within(INPUTS)), f"{QUEUES}={value} kept from the launcher"
        )
    if size is None or inputs is None:
        return _skip(f"{QUEUES}={value} from the launcher's --module evaluation")
    return _set(environ, Recommendation(inputs, size), MODULE_FORM)


def _set(
    environ: Mapping[str, str],
    rec: Recommendation,
    form: str,
    *,
    cached: bool = False,
) -> Outcome:
    text = str(rec.queues)
    inputs = rec.inputs if form == MODULE_FORM else None
    marked = f"{text} {MARKED[form]}"
    if environ.get(QUEUES) == text:  # a parent of ours set it: said there
        return Outcome(
            SKIP,
            f"{QUEUES}={text} as set by the parent process",
            queues=rec.queues, marker=marked, inputs=inputs,
        )  # fmt: skip
    streams = f"{len(rec.lanes)} GPU streams: {', '.join(rec.lanes)}"
    where = ", from the cached --module/--config evaluation" if cached else ""
    return Outcome(
        SET,
        f"{QUEUES}={text} ({streams}){where}",
        queues=rec.queues, marker=marked, inputs=inputs,
    )  # fmt: skip


def _skip(text: str) -> Outcome:
    return Outcome(SKIP, text)

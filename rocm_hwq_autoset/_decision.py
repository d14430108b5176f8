"""The start-up decision, as a value.

:func:`decide` takes the environment, the launch this process makes and what
detection finds, and returns an :class:`Outcome`: the value to set and how it
was derived, or why nothing is done, and how loudly to say so. It changes
nothing. The start-up hook applies the outcome; ``explain`` and ``doctor`` show
the same outcome. The variables it reads, and how each is read, are
``_environ``'s.

A ``--module``/``--config`` launch cannot be decided in the training process (its
config is Python that imports torch): :func:`decide` returns the ``Launch`` to
evaluate, and :func:`conclude` turns the evaluation's
result into the final outcome. Both forms reach Q through :func:`recommend_launch`.
"""

from __future__ import annotations

from ._argv import FORMS, TOML, Form, form_named, unknown_inputs
from ._config import ConfigError, merge
from ._environ import (
    FORCE,
    INPUTS,
    INVALID,
    LOCAL_RANK,
    NAME,
    OFF,
    QUEUES,
    QUIET,
    SWITCH,
    UNSET,
    VERBOSE,
    WORLD_SIZE,
    QueuesSetting,
    local_rank_problem,
    log_level,
    marker,
    prints_for_node,
    switch,
)
from ._environ import world_size as _world_size
from ._model import (
    Config,
    Inputs,
    Recommendation,
    decode_inputs,
    read_inputs,
)

TYPE_CHECKING = False  # not typing's: start-up imports as little as it can
if TYPE_CHECKING:
    from collections.abc import Callable, Mapping
    from typing import Any

    from ._argv import Launch


def world_size(environ: Mapping[str, str]) -> int | None:
    """``WORLD_SIZE``; ``ConfigError`` for a value that is no positive integer,
    or a ``LOCAL_RANK`` torchtitan cannot read (the job fails then, whatever
    its config)."""
    size, problem = _world_size(environ)
    if problem is not None:
        raise ConfigError(problem, WORLD_SIZE)
    problem = local_rank_problem(environ)
    if problem is not None:
        raise ConfigError(problem, LOCAL_RANK)
    return size


def internal_error(exc: BaseException) -> str:
    """The package's own failure, as every warning of it says it."""
    return f"internal error ({type(exc).__name__}: {exc})"


# The decision.

#: Outcome levels. ``set``: a value to set, one line per node. ``skip``: nothing
#: to do, said only in verbose mode. ``warning``: nothing set (or an explicit
#: value kept) because of an input that is wrong; one line per node. ``note``:
#: what the launch is doing (a long wait), one line per node; no decision.
#: ``detail``: what the launch does on its way (the cache not used, a check's
#: own trouble), said only in verbose mode, and never as "nothing to do" (was
#: a skip's line, then Q set: issue #37).
SET, SKIP, WARNING, NOTE, DETAIL = "set", "skip", "warning", "note", "detail"


class Outcome:
    """What the hook does for one process, and the line that says so: ``text``
    (the cause; the part a long line loses from its middle), then ``tail`` (what
    was done about it, never cut)."""

    __slots__ = ("level", "marker", "queues", "rec", "tail", "text")

    def __init__(
        self,
        level: str,
        text: str,
        tail: str = "",
        *,
        rec: Recommendation | None = None,
        marker: str | None = None,
    ) -> None:
        self.level = level
        self.text = text
        self.tail = tail
        self.rec = rec
        """The recommendation behind a value to set, or None to set nothing."""
        self.queues = None if rec is None else rec.queues
        """The value to set, or None to set nothing."""
        self.marker = marker
        """The ``ROCM_HWQ_AUTOSET_ORIGIN`` to set beside it, or None."""

    @property
    def inputs(self) -> Inputs | None:
        """For a ``--module`` launch, the model's inputs its workers get."""
        if self.rec is None or self.marker is None:
            return None
        name = self.marker.partition(" ")[2]
        return self.rec.inputs if name in FORMS and form_named(name).in_child else None

    @property
    def message(self) -> str:
        """The whole line, without the ``rocm-hwq-autoset:`` prefix."""
        return f"{self.text}; {self.tail}" if self.tail else self.text

    def line(self, environ: Mapping[str, str]) -> str | None:
        """The line a process with ``environ`` says for it, prefix and newline
        included, or None when it says nothing: by default once per node (the
        launcher, or local rank 0) and never for a skip or a detail; every
        rank and every skip or detail in verbose mode; nothing when quiet. In
        verbose mode a recommendation's line is followed by one line for each
        stream the model leaves out that the config turns on
        (:func:`left_out_lines`). A value's line comes after a warning for
        each group of inputs torchtitan refuses that the model does not read
        (:func:`unknown_warnings`)."""
        level, _ = log_level(environ)
        if level == QUIET:
            return None
        quiet_by_default = self.level in (SKIP, DETAIL)
        if level != VERBOSE and (quiet_by_default or not prints_for_node(environ)):
            return None
        said = self._said()
        if self.level == SET and self.rec is not None and self.rec.unknown:
            said = "".join(w._said() for w in unknown_warnings(self.rec)) + said
        if level == VERBOSE and self.rec is not None:
            said += "".join(left_out_lines(self.rec))
        return said

    def _said(self) -> str:
        """Its own line, prefix and newline included."""
        lead = {SET: "", NOTE: "", DETAIL: "", SKIP: "nothing to do: ",
                WARNING: "warning: "}[self.level]  # fmt: skip
        return PREFIX + fit(lead + self.text, self.tail, MAX_LINE - len(PREFIX)) + "\n"

    def __repr__(self) -> str:
        return f"Outcome({self.level!r}, {self.message!r}, queues={self.queues!r})"


def decide(
    environ: Mapping[str, str],
    launch: Launch | ConfigError | None,
    *,
    rocm: Callable[[], tuple[bool, str]],
    recommend: Callable[[int | None], Recommendation],
) -> Outcome | Launch:
    """The hook's outcome for a process with this environment that makes this
    launch (None: no launch; a ``ConfigError``: a command line that makes no
    launch torchtitan would take, both forms at once; ``_argv.find_launch``),
    or, for a ``--module`` launch, the launch to evaluate first.

    ``rocm`` and ``recommend`` are asked only when the decision gets that far:
    detection, and a TOML launch's recommendation for the world size
    (:func:`recommend_launch`, or one the caller already has).
    """
    mode, problem = switch(environ)
    if mode == OFF:
        return _skip(f"{SWITCH}={environ[SWITCH]} (opted out)")
    if mode == INVALID:
        return Outcome(WARNING, str(problem), "the hook does nothing")
    setting = QueuesSetting(environ)
    if setting.explicit is not None:
        problem = setting.problem
        if problem is not None:
            return Outcome(
                WARNING, problem, "left as is (an explicit value always wins)"
            )
        return _skip(f"{QUEUES}={setting.reading} was set explicitly; left as is")
    inherited = marker(environ)
    if inherited is not None and inherited[0] == UNSET:
        return _skip(f"the launcher's {inherited[1]} evaluation failed and said so")
    if (
        inherited is not None
        and inherited[1] in FORMS  # an export's (EXPORTED) is decided again
        and form_named(inherited[1]).in_child
    ):
        return _inherit(environ, inherited[0], form_named(inherited[1]))
    if launch is None:
        return _skip("no --job.config_file and no torchtitan --module/--config")
    if mode != FORCE:
        on_rocm, evidence = rocm()
        if not on_rocm:
            return _skip(f"not ROCm: {evidence}")
    if isinstance(launch, ConfigError):  # said like a config torchtitan refuses
        return failed(TOML, launch)
    try:
        size = world_size(environ)
        if launch.form.in_child:
            _module, _config = launch.registry  # both, with values: torchtitan's need
            return launch
        rec = recommend(size)
    except ConfigError as exc:
        return failed(launch.form, exc)
    return _value(environ, rec, launch.form)


def recommend_launch(
    launch: Launch,
    world_size: int | None,
    *,
    read_toml: Callable[[str], Mapping[str, Any]] | None = None,
    config: Config | None = None,
) -> Recommendation:
    """The one way from a launch to its recommendation, for the hook, ``explain``,
    ``doctor`` and ``verify``: a TOML launch's config and overrides are read here;
    a ``--module`` launch brings its evaluation's ``config`` (from the child or
    the cache). The world size resolves ``data_parallel_shard_degree = -1`` in
    both forms alike."""
    if launch.form.in_child:
        if config is None:
            raise ConfigError("a --module/--config launch needs its evaluation")
        return Recommendation(config.inputs, world_size, config.settings)
    path = launch.config_file
    toml = None  # torchtitan's defaults, and the flags
    if path is not None:
        if read_toml is None:
            raise ConfigError("a TOML launch needs its reader")
        toml = read_toml(path)  # torchtitan reads the file before the flags
    overrides = launch.overrides
    unknown = unknown_inputs(launch.args, toml, path or "")
    settings = merge(toml, overrides, path or "")
    inputs = read_inputs(settings, toolkit_passes=launch.form.toolkit_passes)
    return Recommendation(inputs, world_size, settings, unknown)


def conclude(
    environ: Mapping[str, str],
    launch: Launch,
    result: Config | ConfigError,
    *,
    where: str = "",
) -> Outcome:
    """The final outcome of a ``--module`` launch, from its evaluation: the
    config, or why there is none. ``where`` (:data:`CACHED`, :data:`PEER`) ends
    the value's line when this launch did not evaluate it."""
    if isinstance(result, ConfigError):
        return failed(launch.form, result)
    try:
        rec = recommend_launch(launch, world_size(environ), config=result)
    except ConfigError as exc:
        return failed(launch.form, exc)
    return _value(environ, rec, launch.form, where=where)


def failed(form: Form, error: ConfigError) -> Outcome:
    """Nothing set, one warning; the marker tells this process's children (a
    launcher's workers) that it failed, so they neither retry nor warn again."""
    where = "" if error.source else form.where
    return Outcome(
        WARNING,
        where + str(error),
        f"{QUEUES} left unset",
        marker=f"{UNSET} {form}",
    )


def _inherit(environ: Mapping[str, str], value: str, form: Form) -> Outcome:
    """A worker of a ``--module`` launcher: the launcher's value, or, with
    ``WORLD_SIZE`` and the launcher's inputs, the same model applied here."""
    try:
        size = world_size(environ)
        inputs = None
        if INPUTS in environ:
            inputs = decode_inputs(environ[INPUTS])
        if size is None or inputs is None:
            return _skip(f"{QUEUES}={value} from the launcher's --module evaluation")
        rec = Recommendation(inputs, size)  # ConfigError: torchtitan refuses it
    except ConfigError as exc:
        return Outcome(
            WARNING, str(exc.within(INPUTS)), f"{QUEUES}={value} kept from the launcher"
        )
    return _value(environ, rec, form)


def _value(
    environ: Mapping[str, str],
    rec: Recommendation,
    form: Form,
    *,
    where: str = "",
) -> Outcome:
    """The outcome that sets ``rec``'s value, said as new or as the parent's."""
    marked = f"{rec.queues} {form}"
    if environ.get(QUEUES) == str(rec.queues):  # a parent of ours set it: said there
        text = f"{QUEUES}={rec.queues} as set by the parent process"
        return Outcome(SKIP, text, rec=rec, marker=marked)
    return Outcome(SET, f"{QUEUES}={value_words(rec)}{where}", rec=rec, marker=marked)


def unknown_warnings(rec: Recommendation) -> list[Outcome]:
    """A warning for each group of inputs torchtitan refuses that the model
    does not read (``Recommendation.unknown``): the hook says each before the
    value's line, ``explain`` on stderr, ``doctor`` as a failed row. Q is set
    all the same: torchtitan's releases differ in their fields, and a job one
    of them accepts must get its value."""
    return [
        Outcome(WARNING, str(exc), f"{QUEUES} set from the fields the model reads")
        for exc in rec.unknown
    ]


#: What a value's line adds when the value came from the cache, found there by
#: this launch's lookup ...
CACHED = ", from the cached --module/--config evaluation"
#: ... or when another launch evaluated it while this one looked (it had said
#: it found no entry).
PEER = ", from another launch's --module/--config evaluation"


def left_out_lines(rec: Recommendation) -> list[str]:
    """One line for each stream PR #4032's model leaves out that ``rec``'s
    config turns on: its lane name, why Q leaves it out, and the ``verify``
    command that settles it (the line's tail: never cut)."""
    from ._left_out import LEFT_OUT, verify_command  # the verbose line only

    return [
        PREFIX
        + fit(
            f"also {lane}, a GPU stream Q leaves out: {LEFT_OUT[lane][0]}",
            f"check it on a profiler trace: {verify_command(lane, rec.queues)}",
            MAX_LINE - len(PREFIX),
        )
        + "\n"
        for lane in rec.left_out_lanes
    ]


def value_words(rec: Recommendation) -> str:
    """A recommendation's value, as every line says it: ``8 (5 GPU streams:
    compute, ...)``."""
    return f"{rec.queues} ({len(rec.lanes)} GPU streams: {', '.join(rec.lanes)})"


def _skip(text: str) -> Outcome:
    return Outcome(SKIP, text)


PREFIX = f"{NAME}: "


#: A line longer than this loses the middle of its cause: a path, a parser's
#: message or a list can be long; what was done about it always stays.
MAX_LINE = 400


def fit(text: str, tail: str = "", limit: int = MAX_LINE) -> str:
    """``text; tail`` on one printable line of at most ``limit`` characters:
    what does not fit is cut from the middle of ``text``, never from ``tail``
    nor from the end of ``text``, where a message says what to do about it
    (torchtitan's "..., or set --training.disable_cuda_graphs.")."""
    text, tail = printable(text), printable(tail)
    end = f"; {tail}" if tail else ""
    room = limit - len(end)
    if len(text) > room:
        text = cut_middle(text, max(room, 0))
    return text + end


def cut_middle(text: str, room: int) -> str:
    """``text`` in ``room`` characters: its start (the cause, most often),
    ``...``, and its end (the remedy): the most whole last sentences (after
    ``". "``) that leave the start a quarter of the room, else the last two
    thirds."""
    keep = max(room - 3, 0)  # of the text, beside the "..."
    last = keep - keep // 3
    at = text.find(". ")
    while at != -1:
        if len(text) - (at + 2) <= keep - keep // 4:
            last = len(text) - (at + 2)
            break
        at = text.find(". ", at + 2)
    return text[: keep - last] + "..." + text[len(text) - last :]


def printable(text: str) -> str:
    """``text`` with each character that is not printable escaped as Python
    writes it (a newline ``\\n``, a carriage return ``\\r``, an escape
    sequence's ESC ``\\x1b``), and a byte of a name that is not UTF-8 (a
    surrogate ``os.fsdecode`` made of it) as that byte, ``\\xff`` (was:
    ``?``, which hid which it was); a printable text as it is, at C's speed."""
    if text.isprintable():
        return text
    return "".join([c if c.isprintable() else _escaped(c) for c in text])


def _escaped(char: str) -> str:
    code = ord(char)
    if 0xDC80 <= code <= 0xDCFF:  # surrogateescape's: the byte it stands for
        return f"\\x{code - 0xDC00:02x}"
    return repr(char)[1:-1]

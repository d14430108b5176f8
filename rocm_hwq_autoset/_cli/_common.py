"""What the commands share: reading training arguments the way the hook does,
the hook's own outcome for them, and one-line answers to wrong input.

A command reads its training arguments as those of ``python -m
torchtitan.train ARGS`` in this environment: the launch they make (a ``Launch``
built once from them, :func:`launch_of`, never a made-up process command line),
its recommendation for the world size (``--world-size``, else ``WORLD_SIZE``),
and what the start-up hook itself would decide there (:func:`_decision.decide`
handed that ``Launch``, given the same evaluation: a ``--module`` launch is
evaluated once). Each command's own options are a table of :class:`Option`
that its module exports.
"""

from __future__ import annotations

import os
import sys
import textwrap
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from .._argv import TOML, Launch, launch_in
from .._config import ConfigError, load_toml
from .._decision import (
    MAX_LINE,
    SET,
    SKIP,
    WARNING,
    Outcome,
    conclude,
    decide,
    fit,
    printable,
    recommend_launch,
    world_size,
)
from .._environ import (
    CACHE,
    CACHE_DIR,
    INPUTS,
    LOG,
    NAME,
    ORIGIN,
    QUEUES,
    SWITCH,
    TIMEOUT,
    WORLD_SIZE,
    QueuesSetting,
    timeout,
)
from .._model import Recommendation
from .._rocm import detect
from .._unknown import MAX_EDITS, edits_within
from .term import write_stderr

if TYPE_CHECKING:
    import argparse

    from .._model import Config

PROG = NAME
TRAINING_ARGS_HELP = (
    "training arguments: --module, --config, and dotted torchtitan flags"
    " (--section.field, --section.field=VALUE), each with the values that follow"
    " it; everything after '--'. Any other option is an error."
)


class Option:
    """One of a command's own options, in the table its module exports: its
    names, whether it takes a value, the mutually exclusive group it belongs
    to (if any), and what argparse is given for it."""

    __slots__ = ("exclusive", "kwargs", "names", "takes_value")

    def __init__(
        self, *names: str, takes_value: bool, exclusive: str = "", **kwargs: Any
    ) -> None:
        self.names = names
        self.takes_value = takes_value
        self.exclusive = exclusive
        self.kwargs = kwargs


def option_table(options: Sequence[Option]) -> dict[str, bool]:
    """Each option name of a command, with whether it takes a value."""
    return {name: o.takes_value for o in options for name in o.names}


def add_options(parser: argparse.ArgumentParser, options: Sequence[Option]) -> None:
    """A command's option table, added to its parser."""
    groups: dict[str, Any] = {}
    for option in options:
        target: Any = parser
        if option.exclusive:
            if option.exclusive not in groups:
                groups[option.exclusive] = parser.add_mutually_exclusive_group()
            target = groups[option.exclusive]
        target.add_argument(*option.names, **option.kwargs)


#: An error line is cut in the middle of its cause beyond this: the hook's own
#: bound, which holds a refusal of torchtitan's and what to do about it.
MAX_ERROR = MAX_LINE


def fail(message: str, *, whole: bool = False) -> int:
    """A usage or input error: one line on stderr, exit status 2; with
    ``whole`` (for a person reading, not a job log), the whole message after
    it, wrapped, where the line had to cut it. (What stdout gets then is the
    dispatcher's rule: ``_cli.FAILURE_OUTPUT``.)"""
    line = fit(message, limit=MAX_ERROR)
    text = f"{PROG}: error: {line}\n"
    if whole and line != printable(message):
        text += textwrap.fill(printable(message), 79, initial_indent="  ",
                              subsequent_indent="  ", break_long_words=False,
                              break_on_hyphens=False) + "\n"  # fmt: skip
    write_stderr(text)
    return 2


_verdict: list[tuple[bool, str]] = []


def rocm() -> tuple[bool, str]:
    """ROCm detection for this interpreter, once per command."""
    if not _verdict:
        _verdict.append(detect(sys.path, os.environ))
    return _verdict[0]


def training_environ(world: int | None) -> dict[str, str]:
    """This environment as a worker of ``world`` ranks sees it (``--world-size``
    wins over ``WORLD_SIZE``, which :class:`Reading` reads); ``ConfigError``
    for a ``--world-size`` below 1."""
    environ = dict(os.environ)
    if world is not None:
        if world < 1:
            raise ConfigError(f"{world} must be >= 1", "--world-size")
        environ[WORLD_SIZE] = str(world)
    return environ


def launch_of(training: Sequence[str]) -> Launch:
    """The launch of ``python -m torchtitan.train TRAINING``, as the hook finds
    it in such a process (``_argv.launch_in``), else torchtitan's defaults (and
    the flags given) as a TOML launch without a file. ``ConfigError`` for both
    forms at once."""
    return launch_in(training) or Launch(TOML, training, True)


#: What ``doctor`` says of a launch it checked as the hook would on ROCm.
AS_IF_ON_ROCM = "checked as if on ROCm: this machine is not"


class Reading:
    """Training arguments read as the hook reads them: the launch (built once,
    from the arguments), the recommendation, where the config came from, and
    for a ``--module`` launch how its evaluation was found (the cache, or a
    child now). The evaluation and the recommendation are made when first
    asked for; ``ConfigError`` then names what is wrong."""

    def __init__(
        self,
        training: Sequence[str],
        environ: Mapping[str, str],
        *,
        use_cache: bool = True,
        fresh: bool = False,
    ) -> None:
        self.launch = launch_of(training)
        self.environ = environ
        self.use_cache = use_cache
        self.fresh = fresh
        """Evaluate a ``--module`` launch now, never from the cache (which then
        holds the answer): for a value that leaves the package or judges a run."""
        self.world_size = world_size(environ)
        self.found: str | None = None
        """How a ``--module`` evaluation was found, once it was."""
        self._config: Config | ConfigError | None = None
        self._rec: Recommendation | None = None

    @property
    def source(self) -> str:
        """Where the config comes from, in words."""
        if self.launch.form.in_child:
            module, config = self.launch.registry
            return f"--module {module} --config {config} (torchtitan's config registry)"
        return self.launch.config_file or "none: torchtitan's defaults"

    def config(self) -> Config | ConfigError:
        """The ``--module`` launch's config, by its evaluation, or the
        ``ConfigError`` it ended with (named after ``--module/--config`` where
        it names no input); evaluated (or found in the cache) once.
        ``ConfigError`` for arguments no evaluation can start from."""
        if self._config is None:
            from .._evaluation import evaluate  # starts a child: no torch here

            _module, _config = self.launch.registry  # raises without both flags
            _, problem = timeout(self.environ)
            if problem:  # the evaluation goes on with the default, as the hook's
                write_stderr(f"{PROG}: warning: {problem}\n")
            result, self.found = evaluate(
                self.launch, self.environ, use_cache=self.use_cache,
                fresh=self.fresh, slow=self._say_waiting,
            )  # fmt: skip
            if isinstance(result, ConfigError):
                result = result.within("--module/--config")
            self._config = result
        return self._config

    def _say_waiting(self, left: float) -> None:
        """A slow evaluation: what the command waits for, as the hook's launch
        says it (was: nothing, however long)."""
        from .._evaluation import waiting  # the wing's, as the wait is

        write_stderr(f"{PROG}: {waiting(self.launch, left).message}\n")

    @property
    def rec(self) -> Recommendation:
        """The recommendation, by the one path the hook takes. ``ConfigError``
        names what is wrong: the arguments, the config, or the evaluation."""
        if self._rec is None:
            config: Config | None = None
            if self.launch.form.in_child:
                result = self.config()
                if isinstance(result, ConfigError):
                    raise result  # the child's answer, raised once, here
                config = result
            self._rec = recommend_launch(
                self.launch, self.world_size, read_toml=load_toml, config=config
            )
        return self._rec

    def hook_outcome(self, *, as_if_on_rocm: bool = False) -> Outcome:
        """What the start-up hook decides for this launch in this environment
        (on ROCm, whatever this machine is, with ``as_if_on_rocm``). A value
        this package set (here or in a parent) is decided again, as a worker
        would; an explicit value stays."""
        environ = dict(self.environ)
        if QueuesSetting(environ).explicit is None:
            for name in (QUEUES, ORIGIN, INPUTS):
                environ.pop(name, None)
        decided = decide(
            environ, self.launch, recommend=lambda world_size: self.rec,
            rocm=(lambda: (True, AS_IF_ON_ROCM)) if as_if_on_rocm else rocm,
        )  # fmt: skip
        if isinstance(decided, Outcome):
            return decided
        # a --module launch, whose flags decide() read: evaluated here
        return conclude(environ, decided, self.config())


#: The variables a hurried hand misspells, each by the one it means: the
#: switch, the log level, the timeout, the cache, and HIP's flag.
MEANT_VARIABLES = (SWITCH, LOG, TIMEOUT, CACHE, CACHE_DIR, QUEUES)


def misspelt_variables(environ: Mapping[str, str]) -> list[str]:
    """A line for each variable set whose name is a slip for one of ours (its
    case, an edit or two): nothing reads it (was: never mentioned)."""
    said = []
    for name in sorted(environ):
        if name in MEANT_VARIABLES or not name.isascii():
            continue
        for meant in MEANT_VARIABLES:
            if name.upper() == meant or edits_within(name.upper(), meant, MAX_EDITS):
                said.append(
                    f"{name}={environ[name]!r} is set, but nothing reads it: did"
                    f" you mean {meant}?"
                )
                break
    return said


def hook_words(outcome: Outcome) -> str:
    """The hook's outcome as ``explain`` and ``doctor`` show it."""
    if outcome.queues is not None and outcome.level in (SET, SKIP):
        return f"would set {QUEUES}={outcome.queues}"
    if outcome.level == WARNING:
        return f"warning: {outcome.message}"
    return f"nothing to do: {outcome.message}"

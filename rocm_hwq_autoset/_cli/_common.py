"""What the commands share: reading training arguments the way the hook does,
the hook's own outcome for them, and one-line answers to wrong input.

A command reads its training arguments as those of ``python -m
torchtitan.train ARGS`` in this environment: the launch they make, its
recommendation for the world size (``--world-size``, else ``WORLD_SIZE``), and
what the start-up hook itself would decide there (:func:`_decision.decide`,
given the same evaluation: a ``--module`` launch is evaluated once).
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Mapping, Sequence
from typing import Any, TextIO

from .._argv import (
    MODULE_FORM,
    TOML_FORM,
    Launch,
    config_file_arg,
    find_launch,
    has_config_file,
    module_args,
)
from .._config import ConfigError, load_toml
from .._decision import (
    SET,
    SKIP,
    WARNING,
    Outcome,
    conclude,
    recommend_launch,
    world_size,
)
from .._environ import INPUTS, ORIGIN, QUEUES, QueuesSetting
from .._hook import fit, outcome_for
from .._model import Recommendation
from .._rocm import detect

PROG = "rocm-hwq-autoset"
#: An error line is cut in the middle of its cause beyond this.
MAX_ERROR = 240


def fail(message: str, out: TextIO | None = None) -> int:
    """A usage or input error: one line on stderr (and ``{"error": ...}`` on
    ``out`` for a command asked for JSON), exit status 2."""
    line = fit(message, limit=MAX_ERROR)
    if out is not None:
        out.write(json.dumps({"error": line}) + "\n")
    sys.stderr.write(f"{PROG}: error: {line}\n")
    return 2


_verdict: list[tuple[bool, str]] = []


def rocm() -> tuple[bool, str]:
    """ROCm detection for this interpreter, once per command."""
    if not _verdict:
        _verdict.append(detect(sys.path, os.environ))
    return _verdict[0]


def training_environ(world: int | None) -> dict[str, str]:
    """This environment as a worker of ``world`` ranks sees it (``--world-size``
    wins over ``WORLD_SIZE``); ``ConfigError`` names a bad ``WORLD_SIZE``."""
    environ = dict(os.environ)
    if world is not None:
        if world < 1:
            raise ConfigError(f"{world} must be >= 1", "--world-size")
        environ["WORLD_SIZE"] = str(world)
    world_size(environ)
    return environ


class Reading:
    """Training arguments read as the hook reads them: the launch, the
    recommendation, where the config came from, and for a ``--module`` launch
    how its evaluation was found (the cache, or a child now). The evaluation
    and the recommendation are made when first asked for; ``ConfigError`` then
    names what is wrong."""

    def __init__(
        self,
        training: Sequence[str],
        environ: Mapping[str, str],
        *,
        use_cache: bool = True,
    ) -> None:
        self.training = list(training)
        self.environ = environ
        self.use_cache = use_cache
        self.argv = ["-m", *self.training]
        self.orig_argv = [sys.executable, "-m", "torchtitan.train", *self.training]
        found = find_launch(self.argv, self.orig_argv)
        # No launch: torchtitan's defaults and the flags given (TOML era).
        self.launch = found or Launch(TOML_FORM, self.training, True)
        self.world_size = world_size(environ)
        self.found: str | None = None
        """How a ``--module`` evaluation was found, once it was."""
        self._evaluated: Any = None
        self._rec: Recommendation | None = None
        self._tomls: dict[str, Any] = {}

    @property
    def source(self) -> str:
        """Where the config comes from, in words."""
        if self.launch.form == MODULE_FORM:
            module, config = module_args(self.launch.args)
            return f"--module {module} --config {config} (torchtitan's config registry)"
        if has_config_file(self.launch.args):
            return config_file_arg(self.launch.args)
        return "none: torchtitan's defaults"

    def evaluated(self) -> Any:
        """The ``--module`` launch's evaluation, or the ``ConfigError`` it ended
        with; evaluated (or found in the cache) once."""
        if self._evaluated is None:
            from .._evaluation.parent import evaluate  # starts a child: no torch here

            try:
                module_args(self.launch.args)
                result, self.found = evaluate(
                    self.launch, self.environ, use_cache=self.use_cache
                )
            except ConfigError as exc:
                result = exc
            if isinstance(result, ConfigError):
                result = result.within("--module/--config")
            self._evaluated = result
        return self._evaluated

    @property
    def rec(self) -> Recommendation:
        """The recommendation, by the one path the hook takes."""
        if self._rec is None:
            evaluated = None
            if self.launch.form == MODULE_FORM:
                evaluated = self.evaluated()
                if isinstance(evaluated, ConfigError):
                    raise evaluated
            self._rec = recommend_launch(
                self.launch, self.world_size, read_toml=self.read_toml,
                evaluated=evaluated,
            )  # fmt: skip
        return self._rec

    def read_toml(self, path: str) -> Mapping[str, Any]:
        """The job config, read once for the report and the hook's outcome."""
        if path not in self._tomls:
            self._tomls[path] = load_toml(path)
        return self._tomls[path]  # type: ignore[no-any-return]

    def hook_outcome(self) -> Outcome:
        """What the start-up hook decides for this launch in this environment.
        A value this package set (here or in a parent) is decided again, as a
        worker would; an explicit value stays."""
        environ = dict(self.environ)
        if QueuesSetting(environ).explicit is None:
            for name in (QUEUES, ORIGIN, INPUTS):
                environ.pop(name, None)
        outcome = outcome_for(
            environ, self.argv, self.orig_argv, rocm=rocm, read_toml=self.read_toml
        )
        if not isinstance(outcome, Outcome):  # a --module launch: evaluated here
            return conclude(environ, outcome, self.evaluated())
        return outcome


def describe(outcome: Outcome) -> str:
    """The hook's outcome as ``explain`` and ``doctor`` show it."""
    if outcome.queues is not None and outcome.level in (SET, SKIP):
        return f"would set {QUEUES}={outcome.queues}"
    if outcome.level == WARNING:
        return f"warning: {outcome.message}"
    return f"nothing to do: {outcome.message}"

"""The start-up hook: decide, apply, say. The only code that writes
``os.environ`` or stderr at interpreter start.

:func:`run` asks :func:`_decision.decide` what to do for this process and
applies the answer: the value and its marker into the environment, one line on
stderr. A ``--module`` launch's answer comes later, from the evaluation that
``_evaluation.parent`` starts; it applies it through :func:`apply` too.
"""

from __future__ import annotations

import os
import sys

from ._argv import Launch, find_launch, is_own_command, program
from ._config import ConfigError, load_toml
from ._decision import (
    SKIP,
    WARNING,
    Outcome,
    decide,
    internal_error,
    recommend_launch,
)
from ._environ import (
    HIP_DEFAULT_QUEUES,
    INPUTS,
    NAME,
    ORIGIN,
    QUEUES,
    log_level,
    timeout,
)
from ._model import encode_inputs

TYPE_CHECKING = False  # not typing's: start-up imports as little as it can
if TYPE_CHECKING:
    from collections.abc import Callable, Mapping, MutableMapping, Sequence
    from typing import Any, TextIO

    from ._model import Recommendation


#: What the hook decided in this process, once it ran (``doctor`` shows it).
decided: Outcome | Launch | None = None
#: ``decided`` while deciding: a second call, even from inside, returns.
DECIDING = Outcome(SKIP, "deciding")


def run() -> None:
    """Decide and apply, once per process however often ``site`` calls it (a
    venv can list its site-packages twice). Never raises."""
    global decided
    if decided is not None:
        return
    decided = DECIDING
    try:
        _, problem = log_level(os.environ)
        if problem:
            say(Outcome(WARNING, problem), os.environ)
        decided = outcome_for(
            os.environ,
            list(getattr(sys, "argv", ())),  # an embedded interpreter may have none
            list(getattr(sys, "orig_argv", ())),  # Python 3.9 has none
            rocm=_detect,
            read_toml=_read_toml,
        )
        if not isinstance(decided, Outcome):  # a --module launch to evaluate
            from ._evaluation import start  # the wing's one door

            _, problem = timeout(os.environ)
            if problem:
                say(Outcome(WARNING, problem), os.environ)

            start(decided, apply)
        else:
            apply(decided)
    except Exception as exc:  # never a traceback at start-up
        decided = Outcome(WARNING, internal_error(exc), "nothing set")
        say(decided, os.environ)


def outcome_for(
    environ: Mapping[str, str],
    argv: Sequence[str],
    orig_argv: Sequence[str],
    *,
    rocm: Callable[[], tuple[bool, str]],
    read_toml: Callable[[str], Mapping[str, Any]],
) -> Outcome | Launch:
    """:func:`_decision.decide` for a process with this command line (``sys.argv``
    as it is at interpreter start, and ``sys.orig_argv``): the launch it makes,
    if any, decided; the package's own commands are left alone."""
    if is_own_command(*program(argv, orig_argv)):
        return Outcome(SKIP, f"{NAME}'s own command")
    launch: Launch | ConfigError | None
    try:
        launch = find_launch(argv, orig_argv)
    except ConfigError as exc:  # both launch forms: decide() says it
        launch = exc

    def recommend(world_size: int | None) -> Recommendation:
        assert isinstance(launch, Launch)
        return recommend_launch(launch, world_size, read_toml=read_toml)

    return decide(environ, launch, rocm=rocm, recommend=recommend)


def apply(
    outcome: Outcome,
    *environs: MutableMapping[str, str],
    quiet: bool = False,
    during: str = "at interpreter start",
) -> None:
    """Set what the outcome sets in each of ``environs`` (``os.environ`` if
    none; a launcher's worker gets a mapping of its own), and, unless
    ``quiet``, say it as the first one's log level and rank ask. A value put
    in this process's own environment comes in time only if HIP has not
    started here yet: if it has, one warning says so (``during``: when the
    value was put; a value this process started with was in time, and HIP's
    default needs no time)."""
    targets = environs or (os.environ,)
    value = None if outcome.queues is None else str(outcome.queues)
    put_here = (
        not environs
        and value not in (None, str(HIP_DEFAULT_QUEUES))
        and os.environ.get(QUEUES) != value
    )
    for target in targets:
        if outcome.queues is not None:
            target[QUEUES] = str(outcome.queues)
        if outcome.marker is not None:
            target[ORIGIN] = outcome.marker
            if outcome.inputs is not None:
                target[INPUTS] = encode_inputs(outcome.inputs)
            else:
                target.pop(INPUTS, None)
    if not quiet:
        say(outcome, targets[0])
    if put_here:
        from ._rocm import hip_started  # only with a value

        if hip_started():
            from ._early import early_start_files, too_late  # only then

            early = early_start_files() or []
            say(too_late(outcome, during=during, early=early), os.environ)


def say(outcome: Outcome, environ: Mapping[str, str]) -> None:
    """The outcome's line on stderr, if a process with ``environ`` says one
    (``Outcome.line``: once per node by default)."""
    line = outcome.line(environ)
    if line is None:
        return
    write_line(sys.stderr, line)


def write_line(stream: TextIO | None, text: str) -> None:
    """``text`` on a stream that may be closed (None) or refuse it, written
    whole or not at all. A text stream's buffer keeps what it could not write,
    and Python flushes it again at exit, where failing makes the exit status
    120 (stderr on a full disk, without ``PYTHONUNBUFFERED``): so the stream's
    own pending text is flushed first (its order kept; its failure is the
    program's own), and ``text`` goes straight to its descriptor. A stream
    without one (a test's ``io.StringIO``) takes it as any text. Never
    raises."""
    if stream is None:
        return
    try:
        fd = stream.fileno()
    except Exception:  # no descriptor: io.StringIO, pytest's capture ...
        fd = -1
    try:
        if fd < 0:
            stream.write(text)
            stream.flush()
            return
        try:  # noqa: SIM105 - contextlib is more to import at start-up
            stream.flush()
        except Exception:
            pass
        data = text.encode(stream.encoding or "utf-8", "backslashreplace")
        while data:
            data = data[os.write(fd, data) :]
    except Exception:  # a closed or broken stderr must not break start-up
        pass


def _detect() -> tuple[bool, str]:
    from ._rocm import detect

    return detect(sys.path, os.environ)


def _read_toml(path: str) -> Mapping[str, Any]:
    return load_toml(path)  # imports the TOML parser only now

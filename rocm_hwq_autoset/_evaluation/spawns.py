"""A launcher's process starts, watched while a ``--module`` value is pending
(``parent.Waiter`` waits; this module only knows the starts), kept apart from
the waiting as coverage.py keeps its patches apart:

* the audit events that come before this process starts another
  (:data:`SPAWN_EVENTS`), and the environment mapping such a start was handed;
* the functions that turn the environment into the new process's before their
  audit event, or have none (``os.posix_spawn``, ``os.execve``,
  ``_posixsubprocess.fork_exec``, which ``multiprocessing``'s spawn and
  forkserver use): wrapped to call the waiter first, and put back after
  (:class:`Wrappers`);
* the value given to a new process's own mapping made before it arrived
  (:func:`give`).
"""

from __future__ import annotations

import sys
from collections.abc import Callable, MutableMapping
from typing import Any

from .._environ import INPUTS, ORIGIN, QUEUES
from .._model import encode_inputs

TYPE_CHECKING = False
if TYPE_CHECKING:
    from .._decision import Outcome

    #: What is called before a process starts, with its own mapping if any.
    Need = Callable[[MutableMapping[str, str] | None], None]

#: Audit events that come before this process starts another.
SPAWN_EVENTS = frozenset({
    "subprocess.Popen", "os.posix_spawn", "os.exec", "os.fork", "os.forkpty",
    "os.spawn", "os.system", "pty.spawn",
})  # fmt: skip
#: Functions that turn the environment into the new process's before their audit
#: event, or have none: wrapped to wait first while the value is pending.
WRAPPED = (
    ("os", "posix_spawn"),
    ("os", "posix_spawnp"),
    ("os", "execve"),
    ("_posixsubprocess", "fork_exec"),
)


def mapping_of(event: str, args: tuple[Any, ...]) -> MutableMapping[str, str] | None:
    """The environment mapping a process start's audit event carries, if it is
    one the value can go into: ``subprocess.Popen``'s last argument."""
    target = args[-1] if event == "subprocess.Popen" and args else None
    return target if isinstance(target, MutableMapping) else None


class Wrappers:
    """The functions of :data:`WRAPPED` this process has, each made to call
    ``need`` first (with the mapping it was given) while installed."""

    def __init__(self, need: Need) -> None:
        self.need = need
        self.wrapped: list[tuple[Any, str, Any, Any]] = []

    def install(self) -> None:
        for module_name, name in WRAPPED:
            module = sys.modules.get(module_name)
            original = getattr(module, name, None)
            if original is not None:
                wrapper = self.waiting_first(original)
                setattr(module, name, wrapper)
                self.wrapped.append((module, name, original, wrapper))

    def waiting_first(self, original: Callable[..., Any]) -> Callable[..., Any]:
        def waiting(*args: Any, **kwargs: Any) -> Any:
            environ = kwargs.get("env", args[2] if len(args) > 2 else None)
            self.need(environ if isinstance(environ, MutableMapping) else None)
            return original(*args, **kwargs)

        return waiting

    def remove(self) -> None:
        """Put the originals back, where nobody wrapped ours since."""
        for module, name, original, wrapper in self.wrapped:
            if getattr(module, name, None) is wrapper:
                setattr(module, name, original)


def give(
    outcome: Outcome,
    environ: MutableMapping[str, str],
    apply: Callable[..., None],
    *,
    stale: Outcome | None = None,
) -> None:
    """A mapping made before the value arrived lacks it: add it (quietly:
    the line was said); one made before a check corrected it holds the
    ``stale`` outcome's value: replace it. One that has a value or a marker of
    its own (the launcher's) keeps it."""
    if stale is not None and environ.get(ORIGIN) == stale.marker:
        take_back(stale, environ)
    if QUEUES in environ or ORIGIN in environ or INPUTS in environ:
        return
    apply(outcome, environ, quiet=True)


def take_back(outcome: Outcome, environ: MutableMapping[str, str]) -> None:
    """Remove what ``outcome`` set from ``environ``, where it is still as set."""
    for name, value in (
        (QUEUES, None if outcome.queues is None else str(outcome.queues)),
        (ORIGIN, outcome.marker),
        (INPUTS, None if outcome.inputs is None else encode_inputs(outcome.inputs)),
    ):
        if value is not None and environ.get(name) == value:
            del environ[name]

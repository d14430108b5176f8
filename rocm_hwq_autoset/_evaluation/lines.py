"""The lines of a launch waiting for its ``--module``/``--config`` evaluation:
how much longer at most, and what a signal cut short. Only a launch that waits
says them (``parent.Waiter``): a TOML launch never imports them.
"""

from __future__ import annotations

from .._decision import NOTE, WARNING, Outcome
from .._environ import QUEUES, TIMEOUT

TYPE_CHECKING = False  # not typing's: start-up imports as little as it can
if TYPE_CHECKING:
    from .._argv import Launch


def waiting(launch: Launch, left: float) -> Outcome:
    """The line of a launch still waiting for its evaluation: what it waits
    for, and for how long at most."""
    module, config = launch.registry
    return Outcome(
        NOTE,
        f"waiting for the --module/--config evaluation (torchtitan builds"
        f" {module}'s config {config} in a child)",
        f"at most {left:.0f} s more ({TIMEOUT})",
    )


def interrupted(exc: BaseException, waited: float) -> Outcome:
    """The line of a wait a signal cut short (Ctrl-C: ``KeyboardInterrupt``; a
    launcher's handler's exception): what it interrupted. The exception goes
    on as it would without the hook."""
    return Outcome(
        WARNING,
        f"{type(exc).__name__} after {waited:.1f} s of waiting for the"
        " --module/--config evaluation",
        f"{QUEUES} left unset",
    )

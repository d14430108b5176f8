"""Set ``GPU_MAX_HW_QUEUES`` for torchtitan launches on ROCm at interpreter start.

This module is the gate every Python process of the environment passes:
``rocm_hwq_autoset.pth`` checks the arguments and the switch itself and imports
this package only for a possible training launch; on Python 3.15+,
``rocm_hwq_autoset.start`` names :func:`start`, and this module is imported at
every interpreter start. So it imports only ``os`` and ``sys``; the hook
(``_hook``) is imported when the gate opens. Nothing here raises for its own
failures, hangs, writes a file or imports torch.

The public API, loaded on first use: :func:`recommend`, :class:`Recommendation`
and :class:`ConfigError`.
"""

import os
import sys

TYPE_CHECKING = False  # not typing's: importing typing costs start-up time
if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from ._api import recommend
    from ._config import ConfigError
    from ._model import Recommendation

__version__ = "0.3.0"
__all__ = ["ConfigError", "Recommendation", "__version__", "recommend"]

_LAZY = {
    "recommend": "._api",
    "Recommendation": "._model",
    "ConfigError": "._config",
}


def __getattr__(name: str) -> object:
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name], __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


# The gate. The .pth line makes the same two checks before importing anything;
# ``_decision`` holds the switch's full meaning (tests/unit/test_gate.py holds
# the three in agreement).

#: An argument starting with one of these may make this process a training launch.
TRIGGERS = ("--job.config", "--module")


def may_be_launch(
    argv: "Sequence[object] | None" = None, environ: "Mapping[str, str] | None" = None
) -> bool:
    """False for every process that is surely not a torchtitan launch: the
    switch is off (``ROCM_HWQ_AUTOSET=0/false/off/no``), or no argument starts
    with ``--job.config`` or ``--module``."""
    environ = os.environ if environ is None else environ
    if environ.get("ROCM_HWQ_AUTOSET", "").strip().lower() in (
        "0",
        "false",
        "off",
        "no",
    ):
        return False
    args = getattr(sys, "argv", None) if argv is None else argv
    return any(str(arg).startswith(TRIGGERS) for arg in args or ())


def start() -> None:
    """Run the hook when :func:`may_be_launch`; never raise."""
    try:
        if may_be_launch():
            from ._hook import run

            run()
    except Exception:
        pass

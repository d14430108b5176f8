"""The cheap check that stands before the hook, and the PEP 829 entry point.

``rocm_hwq_autoset.start`` names :func:`start`; on Python 3.15+ it replaces the
``import`` line of ``rocm_hwq_autoset.pth``, which inlines the same check. This
module is imported at every interpreter start there: it imports only ``os`` and
``sys``, which every interpreter has already loaded.
"""

import os
import sys

OFF_VALUES = ("0", "false", "off", "no")
#: An argument starting with one of these may make this process a training launch.
TRIGGERS = ("--job.config", "--module")


def wanted() -> bool:
    """False for every process that is surely not a torchtitan launch."""
    if os.environ.get("ROCM_HWQ_AUTOSET", "").strip().lower() in OFF_VALUES:
        return False
    return any(str(a).startswith(TRIGGERS) for a in getattr(sys, "argv", None) or ())


def start() -> None:
    """Run the hook when :func:`wanted`; never raise."""
    try:
        if wanted():
            from ._startup import run

            run()
    except Exception:
        pass

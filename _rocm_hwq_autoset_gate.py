"""The start-up gate of rocm-hwq-autoset, outside the package: what
``rocm_hwq_autoset.pth`` imports in a process whose arguments may make a
training launch (tools/pth_line.py writes that line).

The ``.pth`` line's substring test lets nearly every process go at once; the
few it lets through come here, where the test is exact: this module imports
only ``os`` and ``sys`` (both already loaded), and the package
(``rocm_hwq_autoset``) only for a launch. A near miss (``--module-path``,
``--modules``, ``--job.config_files``, ``mypy --module m``) costs this module,
not the package. Importing a module compiled at install time costs about half
of what compiling the same test from the ``.pth`` line's text would, in every
launch and near miss.

The exact test is ``rocm_hwq_autoset.may_be_launch``'s (the package's copy, for
Python 3.15's ``rocm_hwq_autoset.start``); tests/unit/test_gate.py holds the two
to one table, and tests/unit/test_environ.py the switch's off values to
``_environ.OFF_VALUES``. Nothing here raises, prints or writes.
"""

import os
import sys


def may_be_launch() -> bool:
    """False for every process that is surely not a torchtitan launch: the
    switch is off, or no argument is ``--job.config_file``/``--job.config-file``
    (alone or ``=VALUE``), nor ``--module`` on a command line that names
    torchtitan (after the interpreter's own path)."""
    if os.environ.get("ROCM_HWQ_AUTOSET", "").strip().lower() in (
        "0",
        "false",
        "off",
        "no",
    ):
        return False
    argv = getattr(sys, "argv", None) or ()
    flags = [str(arg).partition("=")[0] for arg in argv]
    if "--job.config_file" in flags or "--job.config-file" in flags:
        return True
    if "--module" not in flags:
        return False
    named = list(getattr(sys, "orig_argv", None) or [""])[1:] or argv
    return any("torchtitan" in str(arg) for arg in named)


try:
    if may_be_launch():
        __import__("rocm_hwq_autoset").start()
except Exception:
    pass

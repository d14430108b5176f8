"""The readable source of ``rocm_hwq_autoset.pth``, the one line ``site`` runs
in every Python process of the environment (as coverage.py keeps its
``pth_file.py``).

``site`` executes a ``.pth`` line that starts with ``import`` and nothing else,
so the gate must be one line. It has two steps:

1. :data:`FILTER`, run in every process: one substring test of ``sys.argv``.
   Nearly every process stops here, having imported nothing.
2. :data:`GATE`, run (by ``exec``) only where the filter matched: the switch
   (the off values are ``_environ.OFF_VALUES``), then the exact test of
   ``rocm_hwq_autoset.may_be_launch``: an argument that *is* ``--job.config_file``
   or ``--job.config-file`` (alone or ``=VALUE``), or ``--module`` (alone or
   ``=VALUE``) on a command line that names torchtitan (after the interpreter's
   own path). Only then is the package imported; ``start()`` never raises, and
   the ``try`` keeps an odd ``sys.argv`` from making ``site`` print a traceback.

``GATE`` runs in the frame of ``site.addpackage``: it must not define names a
comprehension reads from that frame (only the outermost iterable is evaluated
there), nor leave anything but its few local names behind.

    python tools/pth_line.py           # print the line
    python tools/pth_line.py --write   # write rocm_hwq_autoset.pth
    python tools/pth_line.py --check   # exit 1 if the shipped line differs

``tests/unit/test_gate.py`` fails when the shipped line is not :func:`line`.
"""

from __future__ import annotations

import sys
from pathlib import Path

PTH = Path(__file__).resolve().parents[1] / "rocm_hwq_autoset.pth"

#: Every process: is any argument possibly a launch flag?
FILTER = (
    "import sys; a = str(getattr(sys, 'argv', ''));"
    " ('--job.config' in a or '--module' in a)"
)

#: Only where the filter matched: the switch, then the exact test.
GATE = """\
try:
 import os
 if os.environ.get("ROCM_HWQ_AUTOSET", "").strip().lower() not in ("0", "false", "off", "no"):
  f = [str(x).partition("=")[0] for x in sys.argv]
  if "--job.config_file" in f or "--job.config-file" in f or "--module" in f and any("torchtitan" in str(x) for x in getattr(sys, "orig_argv", [""])[1:] or sys.argv):
   __import__("rocm_hwq_autoset").start()
except Exception:
 pass
"""  # noqa: E501


def line() -> str:
    """The ``.pth`` file's text: the filter, then the gate."""
    return f"{FILTER} and exec({GATE!r})\n"


def main(argv: list[str]) -> int:
    if argv == ["--write"]:
        PTH.write_text(line())
        return 0
    if argv == ["--check"]:
        if PTH.read_text() != line():
            print(f"{PTH.name} differs from tools/pth_line.py: run --write")
            return 1
        return 0
    sys.stdout.write(line())
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

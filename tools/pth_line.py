"""The readable source of ``rocm_hwq_autoset.pth``, the one line ``site`` runs
in every Python process of the environment (as coverage.py keeps its
``pth_file.py``).

``site`` executes a ``.pth`` line that starts with ``import`` and nothing else,
so the gate must be one line. It has two steps:

1. :data:`FILTER`, run in every process: one substring test of ``sys.argv``
   (``--job.config`` or ``--module`` anywhere in it). Nearly every process
   stops here, having imported nothing.
2. :data:`GATE`, run only where the filter matched: it imports
   ``_rocm_hwq_autoset_gate`` (a module beside the package, compiled at
   install) and calls its ``start()``, whose exact test imports the package
   only for a launch (Python 3.15's ``rocm_hwq_autoset.start`` names the same
   function). The ``try`` keeps a broken install from making ``site`` print a
   traceback. ``exec`` compiles that one statement only where the filter
   matched.

``GATE`` runs in the frame of ``site.addpackage``: it binds one name there.

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

#: Only where the filter matched: the exact gate, which never raises.
GATE = """\
try:import _rocm_hwq_autoset_gate as g;g.start()
except Exception:pass
"""


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

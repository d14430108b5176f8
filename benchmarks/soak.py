"""Soak the property-based tests of ``tests/unit/test_properties.py``: 10,000
examples per property (its ``soak`` profile; CI runs 300), with a fixed seed
so a failure can be replayed. ``--quick`` runs 10 per property.

    python benchmarks/soak.py [--quick]
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import time

from _venvs import ROOT, workdir

PROPERTIES = ROOT / "tests" / "unit" / "test_properties.py"
#: Registers a ``quick`` profile before the test module loads the one named by
#: ``HYPOTHESIS_PROFILE``, then runs pytest in the same interpreter.
QUICK = """
import sys
from hypothesis import settings
settings.register_profile("quick", max_examples=10, deadline=None)
import pytest
sys.exit(pytest.main(sys.argv[1:]))
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="10 examples each")
    args = parser.parse_args()
    profile = "quick" if args.quick else "soak"
    env = dict(os.environ, HYPOTHESIS_PROFILE=profile)
    start = time.perf_counter()
    with workdir() as tmp:
        proc = subprocess.run(
            # -n 0: in this one process, where the profile is registered
            # (pyproject's addopts run two xdist workers, which never see it).
            [sys.executable, "-c", QUICK, "-n", "0", "-p", "no:cacheprovider", "-q",
             "-W", "ignore::pytest.PytestAssertRewriteWarning",
             f"--basetemp={tmp / 'pytest'}", "--hypothesis-show-statistics",
             "--hypothesis-seed=0", str(PROPERTIES)],
            env=env, capture_output=True, text=True, cwd=ROOT,
        )  # fmt: skip
    elapsed = time.perf_counter() - start
    runs = [int(n) for n in re.findall(r"- (\d+) passing", proc.stdout)]
    lines = proc.stdout.strip().splitlines()
    print(lines[-1] if lines else proc.stderr.strip())
    if proc.returncode:
        print(proc.stdout)
    print(f"profile {profile}: {len(runs)} properties, {sum(runs)} passing examples"
          f" in {elapsed:.0f} s: {runs}")  # fmt: skip
    sys.exit(proc.returncode)


if __name__ == "__main__":
    main()

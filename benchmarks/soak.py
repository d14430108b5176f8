"""Soak the property-based tests: 10,000 examples per property (CI runs 300),
with a fixed seed so a failure can be replayed.

    python benchmarks/soak.py
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import time

from _venvs import ROOT


def main() -> None:
    argparse.ArgumentParser(description=__doc__).parse_args()
    env = dict(os.environ, HYPOTHESIS_PROFILE="soak")
    start = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q",
         "--hypothesis-show-statistics", "--hypothesis-seed=0",
         str(ROOT / "tests" / "test_properties.py")],
        env=env, capture_output=True, text=True, cwd=ROOT,
    )  # fmt: skip
    elapsed = time.perf_counter() - start
    runs = [int(n) for n in re.findall(r"- (\d+) passing", proc.stdout)]
    print(proc.stdout.strip().splitlines()[-1])
    if proc.returncode:
        print(proc.stdout)
    print(f"{len(runs)} properties, {sum(runs)} passing examples in {elapsed:.0f} s:"
          f" {runs}")  # fmt: skip
    sys.exit(proc.returncode)


if __name__ == "__main__":
    main()

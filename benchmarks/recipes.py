"""Q and lanes for every graph_trainer recipe torchtitan 0.3.0 ships, with the
overrides the tests use (``tests/test_real_torchtitan.py`` holds the list and
checks each against PR #4032's model): ``explain --json --module M --config FN``
run in a venv with the real torchtitan 0.3.0 and the CPU torch 2.13.0, one line
of a Markdown table per case. Needs the test extras (it reads the test's list).

    python benchmarks/recipes.py --torchtitan /path/to/venv/bin/python

``--torchtitan`` (or ``$ROCM_HWQ_TORCHTITAN``) names that venv's Python, with
this package installed in it (``.ci/run`` builds one).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

from _venvs import ROOT, machine

sys.path.insert(0, str(ROOT))
from tests.test_real_torchtitan import CASES, OVERRIDES, case_args


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--torchtitan", default=os.environ.get("ROCM_HWQ_TORCHTITAN"))
    args = parser.parse_args()
    if not args.torchtitan:
        sys.exit("name the torchtitan venv's python (--torchtitan PYTHON)")
    env = {"PATH": os.environ["PATH"], "HOME": os.environ.get("HOME", "/tmp")}
    print(f"machine: {machine()}; {len(CASES)} cases\n")
    print("| module | config | overrides | Q | lanes |")
    print("| --- | --- | --- | --- | --- |")
    for module, config, override in CASES:
        done = subprocess.run(
            [args.torchtitan, "-m", "rocm_hwq_autoset", "explain", "--json",
             *case_args(module, config, override)],
            capture_output=True, text=True, env=env,
        )  # fmt: skip
        flags = f"`{' '.join(OVERRIDES[override])}`" if OVERRIDES[override] else "—"
        if done.returncode == 0:
            doc = json.loads(done.stdout)
            queues, lanes = str(doc["queues"]), ", ".join(doc["lanes"])
        else:
            queues, lanes = "—", done.stderr.strip().replace("|", "\\|")[:200]
        print(f"| {module} | {config} | {flags} | {queues} | {lanes} |", flush=True)


if __name__ == "__main__":
    main()

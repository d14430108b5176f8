"""The alternative to a start-up hook: PR #4032's helper imports torch (and
torchtitan) to read the config. What does ``import torch`` alone cost, beside
the hook's whole decision (``decision.py``, run here too)? Fresh interpreters,
``python -c pass`` and ``python -c "import torch"`` interleaved.

    python benchmarks/torch_import.py [--torchtitan PYTHON] [--runs 10] [--quick]

``--torchtitan`` (or ``$ROCM_HWQ_TORCHTITAN``) names the Python of a venv with
the CPU wheel ``torch==2.13.0`` (``.ci/run`` builds one with torchtitan); it is
not changed. ``--quick``: one run each.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys

from _launches import torchtitan_python
from _venvs import ROOT, base_env, machine, wall


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--torchtitan", default=os.environ.get("ROCM_HWQ_TORCHTITAN"))
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--quick", action="store_true", help="one run each")
    args = parser.parse_args()
    python = torchtitan_python(args.torchtitan)
    runs = 1 if args.quick else args.runs
    env = base_env(ROCM_HWQ_AUTOSET="0")
    version = subprocess.run(
        [python, "-c", "import importlib.metadata as m; print(m.version('torch'))"],
        capture_output=True, text=True, env=env, check=True,
    ).stdout.strip()  # fmt: skip
    if not args.quick:  # the page cache
        wall([python, "-c", "import torch"], env)
    bare: list[float] = []
    with_torch: list[float] = []
    for _ in range(runs):
        bare.append(wall([python, "-c", "pass"], env))
        with_torch.append(wall([python, "-c", "import torch"], env))
    decision = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "decision.py"),
         *(["--quick"] if args.quick else ["--runs", str(max(runs, 10))])],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    ms = 1e3
    print(f"machine: {machine()}")
    print(f"torch {version}, {runs} fresh interpreters each, interleaved")
    print(f"  python -c pass         min {min(bare) * ms:8.1f} ms"
          f"   median {statistics.median(bare) * ms:8.1f} ms")  # fmt: skip
    print(f"  python -c import torch min {min(with_torch) * ms:8.1f} ms"
          f"   median {statistics.median(with_torch) * ms:8.1f} ms")  # fmt: skip
    alone = statistics.median(with_torch) - statistics.median(bare)
    print(f"  import torch alone     min {(min(with_torch) - min(bare)) * ms:8.1f} ms"
          f"   median {alone * ms:8.1f} ms")  # fmt: skip
    print("the hook's decision (benchmarks/decision.py):")
    print("  " + decision.strip().replace("\n", "\n  "))


if __name__ == "__main__":
    main()

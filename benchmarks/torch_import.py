"""The alternative to a start-up hook: PR #4032's helper imports torch (and
torchtitan) to read the config. What does ``import torch`` alone cost, beside
the hook's whole decision? Uses the CPU wheel, ``pip install torch==2.13.0``.

    python benchmarks/torch_import.py [--runs 10] [--venv DIR]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
from pathlib import Path

from _venvs import ROOT, machine, make_venv, wall, workdir

TORCH = "torch==2.13.0"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--venv", type=Path, help="reuse a venv that has torch")
    args = parser.parse_args()
    if args.venv and (args.venv / "bin" / "python").exists():
        measure(str(args.venv / "bin" / "python"), args.runs)
    elif args.venv:
        measure(make_venv(args.venv, TORCH), args.runs)
    else:
        with workdir() as tmp:
            measure(make_venv(tmp / "torch", TORCH), args.runs)


def measure(python: str, runs: int) -> None:
    env = {"PATH": os.environ["PATH"]}
    version = subprocess.run(
        [python, "-c", "import torch; print(torch.__version__)"],
        capture_output=True, text=True, env=env, check=True,
    ).stdout.strip()  # fmt: skip
    bare = [wall([python, "-c", "pass"], env) for _ in range(runs)]
    with_torch = [wall([python, "-c", "import torch"], env) for _ in range(runs)]
    decision = subprocess.run(
        [python, str(ROOT / "benchmarks" / "decision.py"), "--runs", str(runs)],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    ms = 1e3
    torch_min = min(with_torch) - min(bare)
    print(f"machine: {machine()}")
    print(f"torch {version}, {runs} fresh interpreters each")
    print(f"  python -c pass         min {min(bare) * ms:8.1f} ms"
          f"   median {statistics.median(bare) * ms:8.1f} ms")  # fmt: skip
    print(f"  python -c import torch min {min(with_torch) * ms:8.1f} ms"
          f"   median {statistics.median(with_torch) * ms:8.1f} ms")  # fmt: skip
    print(f"  import torch alone     min {torch_min * ms:8.1f} ms")
    print("the hook's decision (benchmarks/decision.py):")
    print("  " + decision.strip().replace("\n", "\n  "))


if __name__ == "__main__":
    main()

"""Idle start-up cost: ``python -c pass`` in a venv with rocm-hwq-autoset
installed vs. a bare venv, interleaved; and ``-X importtime`` proof that the
package is not imported by an ordinary process.

    python benchmarks/startup.py [--runs 40]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess

from _venvs import build_wheel, instructions, machine, make_venv, summary, wall, workdir


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=40)
    args = parser.parse_args()
    with workdir() as tmp:
        wheel = build_wheel(tmp / "dist")
        bare = make_venv(tmp / "bare")
        installed = make_venv(tmp / "installed", str(wheel))
        env = {"PATH": os.environ["PATH"]}
        for python in (bare, installed):  # warm the page cache
            for _ in range(5):
                wall([python, "-c", "pass"], env)
        times: dict[str, list[float]] = {bare: [], installed: []}
        for _ in range(args.runs):
            for python in (bare, installed):
                times[python].append(wall([python, "-c", "pass"], env))
        print(f"machine: {machine()}")
        print(f"python -c pass, {args.runs} interleaved runs each")
        print(f"  bare venv        {summary(times[bare])}")
        print(f"  with the package {summary(times[installed])}")
        ratio_min = min(times[installed]) / min(times[bare])
        ratio_median = statistics.median(times[installed]) / statistics.median(
            times[bare]
        )
        print(f"  ratio            min {ratio_min:.3f}   median {ratio_median:.3f}")
        if shutil.which("valgrind"):
            # Instructions are repeatable where wall time is noisy.
            fixed = {**env, "PYTHONHASHSEED": "0"}  # counts that repeat exactly
            counts = {
                p: instructions(p, ["-c", "pass"], fixed) for p in (bare, installed)
            }
            print("python -c pass, instructions (valgrind --tool=callgrind)")
            print(f"  bare venv        {counts[bare]:>12,}")
            print(f"  with the package {counts[installed]:>12,}")
            extra = counts[installed] - counts[bare]
            print(f"  extra            {extra:>12,} ({extra / counts[bare]:+.2%})")
        trace = subprocess.run(
            [installed, "-X", "importtime", "-c", "pass"],
            capture_output=True, text=True, env=env, check=True,
        ).stderr  # fmt: skip
        ours = [line for line in trace.splitlines() if "rocm_hwq_autoset" in line]
        print(f"  -X importtime lines naming rocm_hwq_autoset: {len(ours)}")
        for line in ours:
            print("    " + line)


if __name__ == "__main__":
    main()

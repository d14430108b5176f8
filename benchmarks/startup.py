"""Idle start-up cost in wall time: ``python -c pass`` in a venv with this
checkout's wheel installed vs. a bare venv, interleaved; and ``-X importtime``
proof that an ordinary process does not import the package, nor a near miss
(``--module-path``, ``--job.config_files``, ``--module`` without torchtitan).
Instructions, which repeat where wall time does not, are
``startup_instructions.py``'s.

    python benchmarks/startup.py [--runs 40] [--quick]
"""

from __future__ import annotations

import argparse
import re
import statistics
import subprocess

from _venvs import base_env, build_wheel, machine, make_venv, summary, wall, workdir

#: Arguments the .pth line's filter lets through that make no launch: the gate
#: module turns them away without importing the package.
NEAR_MISSES = (["--module-path", "x"], ["--job.config_files", "x"], ["--module", "m"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=40)
    parser.add_argument("--quick", action="store_true", help="3 runs, no warm-up")
    args = parser.parse_args()
    runs, warm = (3, 0) if args.quick else (args.runs, 5)
    with workdir() as tmp:
        wheel = build_wheel(tmp / "dist")
        bare = make_venv(tmp / "bare")
        installed = make_venv(tmp / "installed", wheel)
        env = base_env()
        for python in (bare, installed):  # .pyc files, the page cache
            for _ in range(warm + 1):
                wall([python, "-c", "pass"], env)
        times: dict[str, list[float]] = {bare: [], installed: []}
        for _ in range(runs):
            for python in (bare, installed):
                times[python].append(wall([python, "-c", "pass"], env))
        trace = subprocess.run(
            [installed, "-X", "importtime", "-c", "pass"],
            capture_output=True, text=True, env=env, check=True,
        ).stderr  # fmt: skip
        near = {
            " ".join(args): subprocess.run(
                [installed, "-X", "importtime", "-c", "pass", *args],
                capture_output=True,
                text=True,
                env=env,
                check=True,
            ).stderr
            for args in NEAR_MISSES
        }
    print(f"machine: {machine()}")
    print(f"python -c pass, {runs} interleaved runs each")
    print(f"  bare venv        {summary(times[bare])}")
    print(f"  with the package {summary(times[installed])}")
    ratio_min = min(times[installed]) / min(times[bare])
    ratio_median = statistics.median(times[installed]) / statistics.median(times[bare])
    print(f"  ratio            min {ratio_min:.3f}   median {ratio_median:.3f}")
    ours = [line for line in trace.splitlines() if "rocm_hwq_autoset" in line]
    print(f"  -X importtime lines naming rocm_hwq_autoset: {len(ours)}")
    for line in ours:
        print("    " + line)
    for args, text in near.items():
        named = [line for line in text.splitlines()
                 if re.search(r"\brocm_hwq_autoset\b", line)]  # fmt: skip
        print(f"  near miss `{args}`: -X importtime lines naming the package:"
              f" {len(named)}")  # fmt: skip


if __name__ == "__main__":
    main()

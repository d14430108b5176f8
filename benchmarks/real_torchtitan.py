"""The ``--module``/``--config`` form against the real torchtitan 0.3.0 from
PyPI with the CPU ``torch==2.13.0``: the Q that ``explain`` gives for the
graph_trainer recipes, and the extra launch time of the start-up evaluation.

Not run by CI (it installs torch, torchtitan and their dependencies, ~1 GB).

    python benchmarks/real_torchtitan.py [--venv DIR] [--runs 5]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import time
from pathlib import Path

from _venvs import build_wheel, machine, make_venv, workdir

PACKAGES = ["torch==2.13.0", "torchtitan==0.3.0"]
RECIPES = [
    ("graph_trainer.llama3", "graph_trainer_llama3_debugmodel", []),
    ("graph_trainer.llama3", "graph_trainer_llama3_8b", []),
    ("graph_trainer.llama3", "graph_trainer_llama3_debugmodel",
     ["--compile.enable_fsdp_ag_rs_overlap"]),
    ("graph_trainer.deepseek_v3", "graph_trainer_deepseek_v3_debugmodel", []),
    ("graph_trainer.deepseek_v3", "graph_trainer_deepseek_v3_debugmodel",
     ["--parallelism.expert_parallel_degree", "2"]),
    ("graph_trainer.deepseek_v3", "graph_trainer_deepseek_v3_16b",
     ["--parallelism.expert_parallel_degree", "2",
      "--compile.enable_fsdp_ag_rs_overlap"]),
    ("graph_trainer.deepseek_v3", "graph_trainer_deepseek_v3_16b",
     ["--parallelism.expert_parallel_degree", "2",
      "--compile.disable_passes", "cudagraph_pass"]),
    ("graph_trainer.qwen3", "graph_trainer_qwen3_debugmodel", []),
    ("deepseek_v3", "deepseek_v3_debugmodel", []),
]  # fmt: skip


def run(
    python: str, args: list[str], env: dict[str, str]
) -> tuple[float, str, str, int]:
    start = time.perf_counter()
    proc = subprocess.run([python, *args], capture_output=True, text=True, env=env)
    return time.perf_counter() - start, proc.stdout, proc.stderr, proc.returncode


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--venv", type=Path)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    tmp = workdir()
    wheel = build_wheel(tmp / "dist")
    where = args.venv or tmp / "venv"
    python = str(where / "bin" / "python")
    if not Path(python).exists():
        make_venv(where, *PACKAGES)
    subprocess.run([python, "-m", "pip", "install", "--quiet", "--force-reinstall",
                    "--no-deps", str(wheel)], check=True)  # fmt: skip
    env = {"PATH": os.environ["PATH"], "HOME": os.environ.get("HOME", "/tmp")}
    versions = subprocess.run(
        [python, "-c", "import torch, importlib.metadata as m;"
         " print(torch.__version__, m.version('torchtitan'))"],
        capture_output=True, text=True, env=env, check=True,
    ).stdout.strip()  # fmt: skip
    print(f"machine: {machine()}; torch, torchtitan: {versions}")
    print("\nexplain --module M --config FN [overrides]:")
    for module, config, extra in RECIPES:
        argv = ["-m", "rocm_hwq_autoset", "explain", "--json",
                "--module", module, "--config", config, *extra]  # fmt: skip
        elapsed, out, err, code = run(python, argv, env)
        name = f"{module} {config} {' '.join(extra)}".strip()
        if code != 0:
            print(f"  {name}\n    exit {code}: {err.strip().splitlines()[-1:]}")
            continue
        doc = json.loads(out)
        print(f"  {name}\n    Q={doc['queues']} {doc['lanes']} ({elapsed:.1f} s)")
    print(
        f"\nlaunch time, {args.runs} runs each (the hook forced on: this torch is CPU):"
    )
    module, config, extra = RECIPES[5]
    launch = [
        "-c",
        "import os; print(os.environ.get('GPU_MAX_HW_QUEUES'))",
        "-m",
        "torchtitan.train",
        "--module",
        module,
        "--config",
        config,
        *extra,
    ]
    times: dict[str, list[float]] = {"off": [], "force": []}
    outputs = {}
    for _ in range(args.runs):
        for mode in times:
            elapsed, out, err, _ = run(
                python, launch, {**env, "ROCM_HWQ_AUTOSET": mode}
            )
            times[mode].append(elapsed)
            outputs[mode] = (out.strip(), err.strip())
    for mode, values in times.items():
        print(
            f"  ROCM_HWQ_AUTOSET={mode:<5} min {min(values):6.2f} s"
            f"   median {statistics.median(values):6.2f} s   saw {outputs[mode]}"
        )
    extra_s = min(times["force"]) - min(times["off"])
    print(f"  extra launch time (min): {extra_s:.2f} s, once per node")


if __name__ == "__main__":
    main()

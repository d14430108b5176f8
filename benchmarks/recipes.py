"""Q and lanes for every graph_trainer recipe torchtitan 0.3.0 ships, the debug
models with each override of the list below: ``explain --json --no-cache
--module M --config FN [override]``, run with this checkout's wheel over the
real torchtitan 0.3.0 and the CPU torch 2.13.0, one line of a Markdown table
per case. (``tests/torchtitan/test_recipes.py`` checks the same recipes,
``tools/torchtitan_venv.py``'s one list, against PR #4032's model; the
overrides are the benchmark's own.)

    python benchmarks/recipes.py [--torchtitan PYTHON] [--jobs 2] [--quick]

``--torchtitan`` (or ``$ROCM_HWQ_TORCHTITAN``) names the Python of a venv with
``torch==2.13.0 torchtitan==0.3.0 triton`` (``.ci/run`` builds one); it is not
changed. ``--quick``: one case, ``graph_trainer_deepseek_v3_16b``.
"""

from __future__ import annotations

import argparse
import json
import os
import runpy
import subprocess
from concurrent.futures import ThreadPoolExecutor

from _launches import light_venv, torchtitan_python
from _venvs import ROOT, base_env, build_wheel, machine, workdir

#: Every graph_trainer recipe torchtitan 0.3.0 ships (one list, the tools').
RECIPES = runpy.run_path(str(ROOT / "tools" / "torchtitan_venv.py"))["RECIPES"]
#: Overrides applied to each debug model.
OVERRIDES = [
    [],
    ["--parallelism.expert_parallel_degree", "2"],
    ["--parallelism.tensor-parallel-degree=2"],
    ["--parallelism.context_parallel_degree=2"],
    ["--compile.enable_fsdp_ag_rs_overlap"],
    ["--compile.disable_passes", "cudagraph_pass"],
    ["--parallelism.data_parallel_shard_degree", "1"],
]
CASES = [
    (module, config, override)
    for module, configs in RECIPES.items()
    for config in configs
    for override in (OVERRIDES if config.endswith("debugmodel") else [[]])
]
QUICK: list[tuple[str, str, list[str]]] = [
    ("graph_trainer.deepseek_v3", "graph_trainer_deepseek_v3_16b", [])
]


def explain(python: str, module: str, config: str, override: list[str]) -> str:
    """One Markdown line: the case, Q and the lanes, or why there is none."""
    done = subprocess.run(
        [python, "-m", "rocm_hwq_autoset", "explain", "--json", "--no-cache",
         "--module", module, "--config", config, *override],
        capture_output=True, text=True, env=base_env(), timeout=600,
    )  # fmt: skip
    flags = f"`{' '.join(override)}`" if override else "—"
    try:
        doc = json.loads(done.stdout)
    except ValueError:
        doc = {"error": done.stderr.strip() or f"exit {done.returncode}"}
    if "queues" in doc:
        queues, lanes = str(doc["queues"]), ", ".join(doc["lanes"])
    else:
        queues, lanes = "—", str(doc.get("error")).replace("|", "\\|")[:200]
    return f"| {module} | {config} | {flags} | {queues} | {lanes} |"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--torchtitan", default=os.environ.get("ROCM_HWQ_TORCHTITAN"))
    parser.add_argument("--jobs", type=int, default=2, help="explains at a time")
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    big = torchtitan_python(args.torchtitan)
    cases = QUICK if args.quick else CASES
    with workdir() as tmp:
        python = light_venv(tmp / "venv", build_wheel(tmp / "dist"), big)
        print(f"machine: {machine()}; {len(cases)} cases\n")
        print("| module | config | overrides | Q | lanes |")
        print("| --- | --- | --- | --- | --- |")
        with ThreadPoolExecutor(max(args.jobs, 1)) as pool:
            lines = pool.map(lambda case: explain(python, *case), cases)
            for line in lines:  # in the order of the cases
                print(line, flush=True)


if __name__ == "__main__":
    main()

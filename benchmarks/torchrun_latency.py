"""What the ``--module``/``--config`` evaluation costs a real launch: the real
``torchrun`` with the real torchtitan 0.3.0 and the CPU torch 2.13.0,
interleaved in one run:

* the evaluation alone (the child interpreter that imports torchtitan);
* one node, 2 workers: seconds from starting torchrun to its first worker's
  first line;
* two nodes on localhost, the second started 6 s after the first (nodes of a
  real job never start together): the same for node 0.

Each launch runs three ways: hook off (``ROCM_HWQ_AUTOSET=0``), ``before`` (the
package at ``--before``) and ``after`` (this checkout, with the cache of
evaluations off, so that every launch evaluates as ``before`` does; the cache is
``cache.py``'s), both forced on (the torch here is a CPU build). The workers are
stopped before they train by a probe (``_launches``) that prints what they saw.

    python benchmarks/torchrun_latency.py [--torchtitan PYTHON] [--runs 3] [--quick]

``--torchtitan`` (or ``$ROCM_HWQ_TORCHTITAN``) names the Python of a venv with
``torch==2.13.0 torchtitan==0.3.0 triton`` (``.ci/run`` builds one); it is not
changed. ``--quick``: one round, one node, hook off and ``after`` only.
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path

from _launches import TRAINING, Launch, World, light_venv, torchtitan_python
from _venvs import BEFORE, build_wheel, machine, wheel_at, workdir

NODE_GAP = 6.0
#: Each variant: the venv, and its variables.
VARIANTS = {
    "off": ("after", {"ROCM_HWQ_AUTOSET": "0"}),
    "before": ("before", {"ROCM_HWQ_AUTOSET": "force"}),
    "after": ("after", {"ROCM_HWQ_AUTOSET": "force", "ROCM_HWQ_AUTOSET_CACHE": "0"}),
}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def torchrun(python: str, *args: str) -> list[str]:
    return [str(Path(python).parent / "torchrun"), *args, "-m", "torchtitan.train",
            *TRAINING]  # fmt: skip


def one_node(world: World, python: str, env: dict[str, str]) -> tuple[float, str, int]:
    launch = Launch(world, [torchrun(python, "--standalone", "--nproc_per_node", "2")],
                    [env])  # fmt: skip
    seen, queues = launch.first_line()
    launch.finish()
    return seen, queues, launch.evaluations()


def two_nodes(world: World, python: str, env: dict[str, str]) -> tuple[float, str, int]:
    port = free_port()
    nodes = []
    for rank in (0, 1):
        command = torchrun(python, "--nnodes", "2", "--nproc_per_node", "1",
                           "--node_rank", str(rank), "--rdzv_backend", "c10d",
                           "--rdzv_endpoint", f"127.0.0.1:{port}", "--rdzv_id",
                           "hwq")  # fmt: skip
        if rank == 1:
            time.sleep(NODE_GAP)
        nodes.append(Launch(world, [command], [env]))
    seen, queues = nodes[0].first_line()
    for node in nodes:
        node.finish()
    return seen, queues, nodes[0].evaluations()


def evaluation(world: World, python: str) -> tuple[float, str, int]:
    started = time.perf_counter()
    done = subprocess.run(
        [python, "-m", "rocm_hwq_autoset._evaluation.child", "--", *TRAINING],
        cwd=world.work, env={**world.env, "ROCM_HWQ_AUTOSET": "0"},
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    elapsed = time.perf_counter() - started
    assert '"inputs"' in done.stdout, done.stdout
    return elapsed, "evaluated", 1


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--torchtitan", default=os.environ.get("ROCM_HWQ_TORCHTITAN"))
    parser.add_argument("--before", default=BEFORE, help="git revision (%(default)s)")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    big = torchtitan_python(args.torchtitan)
    variants = ["off", "after"] if args.quick else list(VARIANTS)
    kinds = ["one node"] if args.quick else ["evaluation", "one node", "two nodes"]
    runs = 1 if args.quick else args.runs
    with workdir() as tmp:
        world = World(tmp)
        try:
            pythons = {"after": light_venv(tmp / "after", build_wheel(tmp / "dist"),
                                           big)}  # fmt: skip
            if "before" in variants:
                old = wheel_at(args.before, tmp)
                pythons["before"] = light_venv(tmp / "before", old, big)
            results = measure(world, pythons, variants, kinds, runs)
        finally:
            world.end_all()
    report(results, args.before if "before" in variants else "")


def measure(
    world: World, pythons: dict[str, str], variants: list[str], kinds: list[str],
    runs: int,
) -> dict[str, list[tuple[float, str, int]]]:  # fmt: skip
    if runs > 1:  # .pyc files, the page cache
        for python in pythons.values():
            subprocess.run([python, "-c", "import torch.distributed.run"],
                           env=world.env, check=True)  # fmt: skip
    results: dict[str, list[tuple[float, str, int]]] = {}
    for run in range(runs):
        for kind in kinds:
            if kind == "evaluation":
                results.setdefault(kind, []).append(evaluation(world, pythons["after"]))
                continue
            launch_once = one_node if kind == "one node" else two_nodes
            # The order alternates: a drift in the machine's load favours no one.
            for variant in variants if run % 2 == 0 else variants[::-1]:
                venv, env = VARIANTS[variant]
                results.setdefault(f"{kind}, {variant}", []).append(
                    launch_once(world, pythons[venv], env)
                )
        print(f"  round {run + 1}/{runs} done", file=sys.stderr)
    return results


def report(results: dict[str, list[tuple[float, str, int]]], rev: str) -> None:
    print(f"machine: {machine()}")
    print(f"torchrun + torchtitan 0.3.0, -m torchtitan.train {' '.join(TRAINING)}")
    rounds = len(next(iter(results.values())))
    before = f"before = {rev}, " if rev else ""
    print(f"{before}after = this checkout (cache off); {rounds} rounds, interleaved")
    print(f"{'seconds':<24}{'min':>7}{'median':>8}   workers saw   evaluations")
    for name, values in results.items():
        times = [v[0] for v in values]
        saw = sorted({v[1] for v in values})
        counts = sorted({v[2] for v in values})
        print(f"  {name:<22}{min(times):6.2f}s{statistics.median(times):7.2f}s"
              f"   {'/'.join(saw):<13} {'/'.join(map(str, counts))}")  # fmt: skip
    evaluation = results.get("evaluation")
    alone = statistics.median(v[0] for v in evaluation) if evaluation else None
    print("  differences: the median of each round's difference")
    for kind in ("one node", "two nodes"):
        if f"{kind}, off" not in results:
            continue
        off = [v[0] for v in results[f"{kind}, off"]]
        for variant in ("before", "after"):
            if f"{kind}, {variant}" not in results:
                continue
            on = [v[0] for v in results[f"{kind}, {variant}"]]
            added = statistics.median(a - b for a, b in zip(on, off))
            share = f" ({added / alone:.0%} of the evaluation)" if alone else ""
            print(f"  {kind}, {variant}: {added:+.2f} s over hook off{share}")


if __name__ == "__main__":
    main()

"""What the ``--module``/``--config`` evaluation costs a real launch: the real
``torchrun`` (``python -m torch.distributed.run``) with the real torchtitan 0.3.0
and the CPU torch 2.13.0, interleaved in one run:

* the evaluation alone (the child interpreter that imports torchtitan);
* one node, 2 workers: seconds from starting torchrun to its first worker's
  first line;
* two nodes on localhost, the second started 6 s after the first (nodes of a
  real job never start together): the same for node 0.

Each launch runs three ways: hook off (``ROCM_HWQ_AUTOSET=0``), ``before`` (the
package at ``--before``, default the last commit before the evaluation became
asynchronous) and ``after`` (this checkout), both forced on (the torch here is a
CPU build). The workers are a probe module in the venv's own ``torchtitan``
package, so the launch is a real ``-m torchtitan.*`` launch.

    python benchmarks/torchrun_latency.py --torchtitan /path/to/venv/bin/python

``--torchtitan`` (or ``$ROCM_HWQ_TORCHTITAN``) names the Python of a venv with
``torch==2.13.0 torchtitan==0.3.0 triton``; without it one is built in a
temporary folder (on Python 3.11 the torch wheel is the CPU one this machine
keeps on disk) and removed afterwards.
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

from _venvs import build_wheel, machine, make_venv, wheel_at, workdir

REQUIREMENTS = ["torch==2.13.0", "torchtitan==0.3.0", "triton"]
BEFORE = "f6a6d2b"  # the evaluation ran in sequence, in every process
PROBE = 'import os\nprint("PROBE", os.environ.get("GPU_MAX_HW_QUEUES"), flush=True)\n'
PROBE_MODULE = "torchtitan._hwq_probe"
TRAINING = ["--module", "graph_trainer.deepseek_v3", "--config",
            "graph_trainer_deepseek_v3_16b", "--parallelism.expert_parallel_degree",
            "2", "--compile.enable_fsdp_ag_rs_overlap"]  # fmt: skip
NODE_GAP = 6.0
VARIANTS = ("off", "before", "after")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def torchrun(python: str, *args: str) -> list[str]:
    return [python, "-m", "torch.distributed.run", *args, "-m", PROBE_MODULE,
            *TRAINING]  # fmt: skip


def first_line(proc: subprocess.Popen[str], started: float) -> tuple[float, str]:
    """Seconds until the first worker line, and that line."""
    assert proc.stdout is not None
    for line in proc.stdout:
        if line.startswith("PROBE"):
            return time.perf_counter() - started, line.split()[1]
    raise RuntimeError(f"no worker line (exit {proc.wait()})")


def finish(proc: subprocess.Popen[str]) -> None:
    _, err = proc.communicate(timeout=600)
    if proc.returncode != 0:
        raise RuntimeError(f"exit {proc.returncode}: {err[-2000:]}")


def launch(command: list[str], env: dict[str, str]) -> subprocess.Popen[str]:
    return subprocess.Popen(command, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)  # fmt: skip


def one_node(python: str, env: dict[str, str]) -> tuple[float, str]:
    command = torchrun(python, "--standalone", "--nproc_per_node", "2")
    started = time.perf_counter()
    proc = launch(command, env)
    seen = first_line(proc, started)
    finish(proc)
    return seen


def two_nodes(python: str, env: dict[str, str]) -> tuple[float, str]:
    port = free_port()
    nodes = []
    for rank in (0, 1):
        command = torchrun(python, "--nnodes", "2", "--nproc_per_node", "1",
                           "--node_rank", str(rank), "--rdzv_backend", "c10d",
                           "--rdzv_endpoint", f"127.0.0.1:{port}", "--rdzv_id",
                           "hwq")  # fmt: skip
        if rank == 0:
            started = time.perf_counter()
        else:
            time.sleep(NODE_GAP)
        nodes.append(launch(command, env))
    seen = first_line(nodes[0], started)
    for proc in nodes:
        finish(proc)
    return seen


def evaluation(python: str, env: dict[str, str]) -> tuple[float, str]:
    started = time.perf_counter()
    done = subprocess.run(
        [python, "-m", "rocm_hwq_autoset._registry_child", "--", *TRAINING],
        env={**env, "ROCM_HWQ_AUTOSET": "0"}, capture_output=True, text=True,
        check=True,
    )  # fmt: skip
    return time.perf_counter() - started, done.stdout.strip()


def light_venv(where: Path, wheel: Path, site_packages: str) -> str:
    """A venv with only this package's wheel that sees the torchtitan venv's
    packages through a path line (so both versions share one torch)."""
    python = make_venv(where)
    subprocess.run([python, "-m", "pip", "install", "--quiet", "--no-deps",
                    "--disable-pip-version-check", str(wheel)], check=True)  # fmt: skip
    own = subprocess.run(
        [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True, text=True, check=True,
    ).stdout.strip()  # fmt: skip
    Path(own, "zz_torchtitan_venv.pth").write_text(site_packages + "\n")
    return python


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--torchtitan", default=os.environ.get("ROCM_HWQ_TORCHTITAN"))
    parser.add_argument("--before", default=BEFORE, help="git revision (%(default)s)")
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    with workdir() as tmp:
        big = args.torchtitan
        if not big:
            if sys.version_info[:2] != (3, 11):
                sys.exit("run with Python 3.11 (torch 2.13.0's CPU wheel) or"
                         " pass --torchtitan")  # fmt: skip
            print("building a torch/torchtitan venv (pass --torchtitan to reuse one)")
            big = make_venv(tmp / "torchtitan", *REQUIREMENTS)
        site_packages, package = subprocess.run(
            [big, "-c", "import sysconfig, os, torchtitan;"
             " print(sysconfig.get_paths()['purelib']);"
             " print(os.path.dirname(torchtitan.__file__))"],
            capture_output=True, text=True, check=True,
        ).stdout.split()  # fmt: skip
        new, old = build_wheel(tmp / "dist"), wheel_at(args.before, tmp)
        pythons = {
            "after": light_venv(tmp / "after", new, site_packages),
            "before": light_venv(tmp / "before", old, site_packages),
        }
        pythons["off"] = pythons["after"]
        probe = Path(package, "_hwq_probe.py")
        ours = not probe.exists()  # the tests write the same probe
        probe.write_text(PROBE)
        try:
            results, seen = measure(pythons, args.runs)
        finally:
            if ours:
                probe.unlink()
    report(results, seen, args.before)


def measure(
    pythons: dict[str, str], runs: int
) -> tuple[dict[str, list[float]], dict[str, str]]:
    env = {"PATH": os.environ["PATH"], "HOME": os.environ.get("HOME", "/tmp"),
           "ROCM_HWQ_AUTOSET_LOG": "quiet"}  # fmt: skip
    modes = {"off": "0", "before": "force", "after": "force"}
    results: dict[str, list[float]] = {"evaluation": []}
    seen: dict[str, str] = {}
    for run in range(runs):
        elapsed, out = evaluation(pythons["after"], env)
        results["evaluation"].append(elapsed)
        seen["evaluation"] = out
        for kind, launch_once in (("one node", one_node), ("two nodes", two_nodes)):
            for variant in VARIANTS:
                variant_env = {**env, "ROCM_HWQ_AUTOSET": modes[variant]}
                elapsed, queues = launch_once(pythons[variant], variant_env)
                results.setdefault(f"{kind}, {variant}", []).append(elapsed)
                seen[f"{kind}, {variant}"] = queues
        print(f"  round {run + 1}/{runs} done", file=sys.stderr)
    return results, seen


def report(results: dict[str, list[float]], seen: dict[str, str], rev: str) -> None:
    print(f"machine: {machine()}")
    print(f"torchrun + torchtitan 0.3.0, {' '.join(TRAINING)}")
    print(f"before = {rev}, after = this checkout; {len(results['evaluation'])} rounds")
    print(f"{'':<22}{'min':>8}{'median':>9}   workers saw")
    for name, values in results.items():
        print(f"  {name:<20}{min(values):7.2f}s{statistics.median(values):8.2f}s"
              f"   {seen[name]}")  # fmt: skip
    evaluation = statistics.median(results["evaluation"])
    for kind in ("one node", "two nodes"):
        off = statistics.median(results[f"{kind}, off"])
        for variant in ("before", "after"):
            added = statistics.median(results[f"{kind}, {variant}"]) - off
            share = added / evaluation
            print(f"  {kind}, {variant}: +{added:.2f} s over hook off"
                  f" ({share:.0%} of the evaluation)")  # fmt: skip


if __name__ == "__main__":
    main()

"""The cost of one ``status`` call on a node with 64 GPU processes (issue #38):
64 real processes (8 launchers of 7 workers each, as torchrun starts them:
each one's command line a torchtitan launch, each worker started with the
package's value and holding the device), a KFD sysfs tree laid out in KFD's
layout with each worker's queues (8 compute and 2 SDMA on its GPU, of 8), and
the rest of this machine's processes, which ``status`` lists and turns away.
The device is a file here (a ROCm node's ``/dev/kfd``); the tree a folder.

Each sample is one call of the command's own ``run`` in this process (reading
``/proc``, the tree, and writing the table, or the JSON, to a string), the
median of ``--calls`` reported: wall time (``perf_counter``) and CPU time.

    python benchmarks/status.py [--processes 64] [--calls 30] [--quick]
"""

from __future__ import annotations

import argparse
import io
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

from _venvs import ROOT, machine, workdir

sys.path.insert(0, str(ROOT))

from rocm_hwq_autoset import _node
from rocm_hwq_autoset._cli import status

#: The budget the issue names for one call.
BUDGET_MS = 50.0
GPUS = 8
#: A launch's program (its command line a TOML launch's): it holds the
#: device, then blocks on stdin.
HOLD = (
    "import os, sys; os.open(sys.argv[1], os.O_RDONLY); print(flush=True);"
    " sys.stdin.read()"
)


def lay_out(root: Path) -> Path:
    kfd = root / "kfd"
    for number in range(GPUS + 1):  # node 0: the CPU
        node = kfd / "topology" / "nodes" / str(number)
        node.mkdir(parents=True)
        (node / "gpu_id").write_text(f"{1000 + number if number else 0}\n")
    (kfd / "proc").mkdir()
    return kfd


def queues(kfd: Path, pid: int, gpu: int) -> None:
    for number in range(10):  # 8 compute, 2 SDMA
        folder = kfd / "proc" / str(pid) / "queues" / str(number)
        folder.mkdir(parents=True)
        (folder / "gpuid").write_text(f"{1001 + gpu}\n")
        (folder / "type").write_text("0\n" if number < 8 else "1\n")
        (folder / "size").write_text("1048576\n")


def start(device: Path, args: list[str], env: dict[str, str]) -> subprocess.Popen[str]:
    command = [sys.executable, "-S", "-c", HOLD, str(device), *args]
    process = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                               text=True, env=env)  # fmt: skip
    assert process.stdout is not None
    process.stdout.readline()  # it holds the device
    return process


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--processes", type=int, default=64)
    parser.add_argument("--calls", type=int, default=30)
    parser.add_argument("--quick", action="store_true", help="8 processes, 5 calls")
    opts = parser.parse_args()
    count, calls = (8, 5) if opts.quick else (opts.processes, opts.calls)
    print(machine())
    args = ["--job.config_file", "job.toml"]
    with workdir() as root:
        kfd = lay_out(root)
        device = root / "kfd-device"
        device.write_text("")
        processes: list[subprocess.Popen[str]] = []
        try:
            base = {"PATH": os.environ["PATH"]}
            while len(processes) < count:  # a launcher, then up to 7 workers
                processes.append(start(device, args, base))
                for rank in range(min(7, count - len(processes))):
                    env = {**base, "GPU_MAX_HW_QUEUES": "8", "WORLD_SIZE": "8",
                           "ROCM_HWQ_AUTOSET_ORIGIN": "8 job.config_file",
                           "LOCAL_RANK": str(rank)}  # fmt: skip
                    worker = start(device, args, env)
                    queues(kfd, worker.pid, rank % GPUS)
                    processes.append(worker)
            _node.KFD_SYSFS, _node.KFD_DEVICE = str(kfd), str(device)
            total = sum(name.isdigit() for name in os.listdir("/proc"))
            for form in ("text", "json"):
                walls, cpus = [], []
                for _ in range(calls):
                    out = io.StringIO()
                    opts_run = argparse.Namespace(
                        training=[], pid=None, json=form == "json"
                    )
                    wall, cpu = time.perf_counter(), time.process_time()
                    code = status.run(opts_run, out)
                    walls.append(time.perf_counter() - wall)
                    cpus.append(time.process_time() - cpu)
                shown = out.getvalue().count("\n")
                print(
                    f"status ({form}), {count} GPU processes among {total} on the node:"
                    f" median {statistics.median(walls) * 1e3:.1f} ms wall,"
                    f" {statistics.median(cpus) * 1e3:.1f} ms CPU"
                    f" (min {min(walls) * 1e3:.1f} ms; exit {code}; {shown} lines)"
                )
            verdict = (
                "met" if statistics.median(walls) * 1e3 <= BUDGET_MS else "NOT met"
            )
            print(f"budget {BUDGET_MS:g} ms per call: {verdict}")
        finally:
            for process in processes:
                process.kill()
                process.communicate()
    return 0


if __name__ == "__main__":
    sys.exit(main())

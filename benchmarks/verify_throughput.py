"""``verify``'s speed and memory on a large generated trace (Kineto's layout:
one event per line, kernels on several streams, CPU ops between them).

    python benchmarks/verify_throughput.py [--mb 300] [--gzip]
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import resource
import subprocess
import sys

from _venvs import ROOT, machine, workdir

MEASURE = """
import resource, sys, time
sys.path.insert(0, {root!r})
from rocm_hwq_autoset._traces import count_streams
start = time.perf_counter()
streams = count_streams({path!r})
elapsed = time.perf_counter() - start
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(elapsed, peak, {{str(k): len(v) for k, v in streams.items()}})
"""


def generate(path: str, megabytes: int, compress: bool) -> int:
    opener = gzip.open if compress else open
    target = megabytes << 20
    written = 0
    with opener(path, "wt") as out:  # type: ignore[operator]
        out.write(
            '{\n  "schemaVersion": 1,\n  "deviceProperties": [],\n  "traceEvents": [\n'
        )
        for stream in (7, 13, 20, 24, 28):
            out.write(
                json.dumps(
                    {
                        "ph": "M",
                        "name": "thread_name",
                        "pid": 0,
                        "tid": stream,
                        "args": {"name": f"stream {stream} "},
                    }
                )
            )
            out.write(",\n")
        i = 0
        while written < target:
            stream = (7, 13, 20, 24, 28)[i % 5]
            event = {
                "ph": "X", "cat": "kernel" if i % 3 else "cpu_op",
                "name": "void at::native::vectorized_elementwise_kernel<4, at::native::"
                        "CUDAFunctor_add<float>>(int,"
                        " at::native::CUDAFunctor_add<float>)",
                "pid": 0, "tid": stream, "ts": 1000.5 + i, "dur": 3.25,
                "args": {"External id": i, "device": 0, "stream": stream,
                         "correlation": i, "registers per thread": 16,
                         "grid": [1024, 1, 1], "block": [128, 1, 1]},
            }  # fmt: skip
            line = json.dumps(event) + ",\n"
            out.write(line)
            written += len(line)
            i += 1
        out.write(
            '{"ph": "i", "name": "end", "ts": 0}\n  ],\n  "traceName": "bench"\n}\n'
        )
    return written


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--mb", type=int, default=300)
    parser.add_argument("--gzip", action="store_true")
    args = parser.parse_args()
    with workdir() as tmp:
        measure(str(tmp / ("trace.json.gz" if args.gzip else "trace.json")), args)


def measure(path: str, args: argparse.Namespace) -> None:
    size = generate(path, args.mb, args.gzip)
    on_disk = os.path.getsize(path)
    out = subprocess.run(
        [sys.executable, "-c", MEASURE.format(root=str(ROOT), path=path)],
        capture_output=True, text=True, check=True,
    ).stdout.split(maxsplit=2)  # fmt: skip
    elapsed, peak_kib = float(out[0]), int(out[1])
    baseline = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(f"machine: {machine()}")
    print(f"trace: {size / 1e6:.0f} MB of JSON, {on_disk / 1e6:.0f} MB on disk"
          f"{' (gzip)' if args.gzip else ''};"
          f" streams per device: {out[2].strip()}")  # fmt: skip
    print(
        f"count_streams: {elapsed:.2f} s, {size / 1e6 / elapsed:.1f} MB/s of JSON;"
        f" peak RSS {peak_kib / 1024:.0f} MiB"
        f" (the generating process: {baseline / 1024:.0f} MiB)"
    )


if __name__ == "__main__":
    main()

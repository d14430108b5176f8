"""``verify``'s speed and memory on large generated traces (Kineto's layout:
one event per line, kernels on several streams, CPU ops between them): a plain
one of ``--mb`` MB and a gzip one of ``--gzip-mb`` MB of JSON, each counted by
``count_streams`` (what ``verify`` runs) in a fresh process, in CPU seconds:
"before" (the trace reader at ``--before``) and "after" (this checkout's), one
after the other on the same file.

    python benchmarks/verify_throughput.py [--mb 300] [--gzip-mb 100]
        [--before REV] [--quick]

``--quick``: 1 MB each.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import resource
import subprocess
import sys

from _venvs import BEFORE, ROOT, machine, workdir

#: The trace reader is one module that imports only the standard library.
READER = "rocm_hwq_autoset/_traces.py"
#: Where the reader was before the layout of 2026-12 moved it.
OLD_READER = "rocm_hwq_autoset/_cli/traces.py"
MEASURE = """
import importlib.util, resource, time
spec = importlib.util.spec_from_file_location("traces", {reader!r})
traces = importlib.util.module_from_spec(spec)
spec.loader.exec_module(traces)
count_streams = traces.count_streams
start, cpu = time.perf_counter(), time.process_time()
streams = count_streams({path!r})
elapsed, cpu = time.perf_counter() - start, time.process_time() - cpu
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(elapsed, cpu, peak, {{str(k): len(v) for k, v in streams.items()}})
"""


def generate(path: str, megabytes: int, compress: bool) -> int:
    opener = gzip.open if compress else open
    target = megabytes << 20
    written = 0
    with opener(path, "wt") as out:
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
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mb", type=int, default=300, help="plain trace, MB")
    parser.add_argument("--gzip-mb", type=int, default=100, help="gzip trace, MB")
    parser.add_argument("--before", default=BEFORE, help="git revision (%(default)s)")
    parser.add_argument("--quick", action="store_true", help="1 MB each")
    args = parser.parse_args()
    if args.quick:
        args.mb = args.gzip_mb = 1
    print(f"machine: {machine()}; before = {args.before}, after = this checkout")
    with workdir() as tmp:
        old = tmp / "traces_before.py"
        for reader in (READER, OLD_READER):
            shown = subprocess.run(
                ["git", "-C", str(ROOT), "show", f"{args.before}:{reader}"],
                capture_output=True, text=True,
            )  # fmt: skip
            if shown.returncode == 0:
                break
        if shown.returncode != 0:
            sys.exit(f"git show {args.before}:{READER} failed: {shown.stderr.strip()}")
        old.write_text(shown.stdout)
        readers = {"before": str(old), "after": str(ROOT / READER)}
        for megabytes, compress in ((args.mb, False), (args.gzip_mb, True)):
            if megabytes > 0:
                name = "trace.json.gz" if compress else "trace.json"
                measure(str(tmp / name), megabytes, compress, readers)
                (tmp / name).unlink()


def measure(path: str, megabytes: int, compress: bool, readers: dict[str, str]) -> None:
    size = generate(path, megabytes, compress)
    on_disk = os.path.getsize(path)
    baseline = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(f"trace: {size / 1e6:.0f} MB of JSON, {on_disk / 1e6:.1f} MB on disk"
          f"{' (gzip)' if compress else ''}"
          f" (the generating process: {baseline / 1024:.0f} MiB)")  # fmt: skip
    for version, reader in readers.items():
        out = subprocess.run(
            [sys.executable, "-c", MEASURE.format(reader=reader, path=path)],
            capture_output=True, text=True, check=True,
        ).stdout.split(maxsplit=3)  # fmt: skip
        elapsed, cpu, peak_kib = float(out[0]), float(out[1]), int(out[2])
        print(
            f"  {version:<6} count_streams: {elapsed:.2f} s, {cpu:.2f} s of CPU,"
            f" {size / 1e6 / cpu:.1f} MB/s of JSON per CPU second;"
            f" peak RSS {peak_kib / 1024:.0f} MiB; streams per device:"
            f" {out[3].strip()}"
        )


if __name__ == "__main__":
    main()

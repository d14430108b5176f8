"""Where the test suite's time goes: the CPU seconds each test takes, its own
process's and its children's (those it reaped, with all they reaped), and its
wall seconds; then the sum per test file, largest first.

As a pytest plugin, each process of a run (each xdist worker) appends a line
per test to ``SUITE_CPU`` (a path prefix: one file per process)::

    SUITE_CPU=/tmp/cpu PYTHONPATH=tools python -m pytest -p suite_cpu
    python tools/suite_cpu.py /tmp/cpu.*     # per file, then the 20 largest

A child that outlives its test (reaped later, or never) is counted where it is
reaped, or not at all: the sum is what the tests' own processes reaped.
"""

from __future__ import annotations

import os
import resource
import sys
import time
from collections.abc import Iterator
from typing import Any

#: The prefix of the files a run writes; each process appends ``.<pid>``.
PREFIX = "SUITE_CPU"


def _cpu() -> float:
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


try:
    import pytest
except ImportError:  # the summary alone needs no pytest
    pass
else:

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_protocol(item: Any, nextitem: Any) -> Iterator[None]:
        cpu, wall = _cpu(), time.monotonic()
        yield
        prefix = os.environ.get(PREFIX)
        if prefix:
            with open(f"{prefix}.{os.getpid()}", "a") as out:
                out.write(f"{_cpu() - cpu:.2f} {time.monotonic() - wall:.2f}"
                          f" {item.nodeid}\n")  # fmt: skip


def summary(paths: list[str]) -> str:
    """Per file: CPU and wall seconds, largest CPU first; then the 20 tests
    that took the most CPU; the totals first."""
    tests: list[tuple[float, float, str]] = []
    for path in paths:
        with open(path) as lines:
            for line in lines:
                cpu, wall, node = line.rstrip("\n").split(" ", 2)
                tests.append((float(cpu), float(wall), node))
    files: dict[str, list[float]] = {}
    for cpu, wall, node in tests:
        total = files.setdefault(node.split("::")[0], [0.0, 0.0])
        total[0] += cpu
        total[1] += wall
    out = [f"{len(tests)} tests: {sum(t[0] for t in tests):,.0f} CPU s,"
           f" {sum(t[1] for t in tests):,.0f} s of tests' wall time (summed)",
           "    CPU s   wall s  file"]  # fmt: skip
    for name, (cpu, wall) in sorted(files.items(), key=lambda f: -f[1][0]):
        out.append(f"  {cpu:7.1f}  {wall:7.1f}  {name}")
    out.append("    CPU s   wall s  test (the 20 that took the most CPU)")
    for cpu, wall, node in sorted(tests, reverse=True)[:20]:
        out.append(f"  {cpu:7.1f}  {wall:7.1f}  {node}")
    return "\n".join(out)


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(f"usage: python {sys.argv[0]} FILE...  (what SUITE_CPU=FILE wrote)")
    print(summary(sys.argv[1:]))

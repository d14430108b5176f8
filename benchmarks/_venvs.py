"""Shared by the benchmarks: build the wheel, make venvs, time fresh interpreters."""

from __future__ import annotations

import contextlib
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def machine() -> str:
    cpu = "unknown CPU"
    try:
        with open("/proc/cpuinfo") as info:
            for line in info:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return (
        f"{cpu}, {os.cpu_count()} cores, {platform.system()} {platform.release()},"
        f" CPython {platform.python_version()}"
    )


def build_wheel(out: Path, source: Path = ROOT) -> Path:
    """This package's wheel, built from ``source`` (the checkout by default)."""
    try:
        subprocess.run(
            [sys.executable, "-m", "build", "--wheel", "--no-isolation",
             "--outdir", str(out), str(source)],
            check=True, capture_output=True, text=True,
        )  # fmt: skip
    except subprocess.CalledProcessError as exc:
        sys.exit(
            f"building the wheel failed: {exc.stderr.strip().splitlines()[-1:]}\n"
            "the benchmarks need the test extras: pip install -e '.[test]'"
        )
    return next(out.glob("rocm_hwq_autoset-*.whl"))


def wheel_at(rev: str, tmp: Path) -> Path:
    """This package's wheel as it was at git revision ``rev``."""
    source = tmp / f"src-{rev}"
    source.mkdir()
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", rev],
                             capture_output=True, check=True).stdout  # fmt: skip
    subprocess.run(["tar", "-x", "-C", str(source)], input=archive, check=True)
    return build_wheel(tmp / f"dist-{rev}", source)


def instructions(python: str, args: list[str], env: dict[str, str]) -> int:
    """Instructions one run of ``python ARGS`` executes (valgrind's callgrind)."""
    out = subprocess.run(
        ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null",
         python, *args],
        capture_output=True, text=True, env=env, check=True,
    ).stderr  # fmt: skip
    match = re.search(r"Collected : (\d+)", out)
    assert match, out
    return int(match.group(1))


def make_venv(where: Path, *packages: str) -> str:
    subprocess.run([sys.executable, "-m", "venv", str(where)], check=True)
    python = str(where / "bin" / "python")
    if packages:
        subprocess.run(
            [python, "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
             *packages],
            check=True,
        )  # fmt: skip
    return python


def wall(args: list[str], env: dict[str, str] | None = None) -> float:
    """Seconds for one run of a fresh process."""
    start = time.perf_counter()
    subprocess.run(args, check=True, env=env, stdout=subprocess.DEVNULL)
    return time.perf_counter() - start


def summary(times: list[float]) -> str:
    low, middle = min(times) * 1e3, statistics.median(times) * 1e3
    return f"min {low:7.2f} ms   median {middle:7.2f} ms"


@contextlib.contextmanager
def workdir() -> Iterator[Path]:
    """A temporary folder, removed afterwards whatever happens."""
    path = Path(tempfile.mkdtemp(prefix="rocm-hwq-bench-"))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)

"""Shared by the benchmarks: build the wheel, make venvs, count instructions,
time fresh interpreters, clean up.

Every benchmark takes ``--quick`` (a few seconds, tiny sizes, one round: what
``tests/e2e/test_benchmarks.py`` runs) and removes whatever it made, even after
an error. None imports the tests, and no test imports a benchmark.
"""

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
#: The last commit before the restructure of issues #15-#18 (c06bc57).
BEFORE = "e925c77"
#: What the benchmarks need beyond the standard library.
EXTRAS = "the benchmarks need the test extras: pip install -e '.[test]'"


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


def base_env(**extra: str) -> dict[str, str]:
    """A small, fixed environment for the processes measured: nothing of the
    caller's (``PYTHONDONTWRITEBYTECODE``, ``PYTHONPATH``, our own variables)
    leaks into a figure."""
    return {"PATH": os.environ["PATH"], "HOME": os.environ.get("HOME", "/tmp"),
            **extra}  # fmt: skip


def build_wheel(out: Path, source: Path = ROOT) -> Path:
    """This package's wheel, built from ``source`` (the checkout by default)."""
    try:
        subprocess.run(
            [sys.executable, "-m", "build", "--wheel", "--no-isolation",
             "--outdir", str(out), str(source)],
            check=True, capture_output=True, text=True,
        )  # fmt: skip
    except subprocess.CalledProcessError as exc:
        said = (exc.stderr.strip() or exc.stdout.strip()).splitlines()[-1:]
        sys.exit(f"building the wheel failed: {said}\n{EXTRAS}")
    return next(out.glob("rocm_hwq_autoset-*.whl"))


def wheel_at(rev: str, tmp: Path) -> Path:
    """This package's wheel as it was at git revision ``rev``."""
    source = tmp / f"src-{rev}"
    source.mkdir()
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", rev],
                             capture_output=True)  # fmt: skip
    if archive.returncode != 0:
        said = archive.stderr.decode(errors="replace").strip()
        sys.exit(f"git archive {rev} failed: {said}")
    subprocess.run(["tar", "-x", "-C", str(source)], input=archive.stdout,
                   check=True)  # fmt: skip
    return build_wheel(tmp / f"dist-{rev}", source)


def require_valgrind() -> None:
    if not shutil.which("valgrind"):
        sys.exit("valgrind is not installed (apt-get install valgrind)")


def instructions(
    python: str, args: list[str], env: dict[str, str], cwd: Path | None = None
) -> int:
    """Instructions one run of ``python ARGS`` executes (valgrind's callgrind;
    ``PYTHONHASHSEED=0`` in ``env`` makes the count repeat exactly)."""
    out = subprocess.run(
        ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null",
         python, *args],
        capture_output=True, text=True, env=env, check=True, cwd=cwd,
    ).stderr  # fmt: skip
    match = re.search(r"Collected : (\d+)", out)
    assert match, out
    return int(match.group(1))


def make_venv(where: Path, *wheels: Path, base: str = sys.executable) -> str:
    """A venv of ``base`` without pip, with ``wheels`` installed by pip (this
    interpreter's, ``--python``) from the files alone: nothing is downloaded."""
    subprocess.run([base, "-m", "venv", "--without-pip", str(where)], check=True)
    python = str(where / "bin" / "python")
    if wheels:
        pip(python, "--no-deps", "--no-index", *map(str, wheels))
    return python


def pip(python: str, *args: str) -> None:
    """``pip install ARGS`` into the venv of ``python``."""
    subprocess.run(
        [sys.executable, "-m", "pip", "--python", python, "install", "--quiet",
         "--disable-pip-version-check", *args],
        check=True, env={**os.environ, "ROCM_HWQ_AUTOSET": "0"},
    )  # fmt: skip


def purelib(python: str) -> str:
    return subprocess.run(
        [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True, text=True, check=True, env=base_env(),
    ).stdout.strip()  # fmt: skip


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

"""Hostile inputs, end to end through the installed wheel: the interpreter
starts normally within seconds of CPU time, prints no traceback and at most one
short warning, and sets no value (or a valid one where torchtitan accepts the
input, or refuses only keys the model does not read: then the warning names
them and the value's line follows).
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from rocm_hwq_autoset._config import MAX_CONFIG_BYTES, MAX_DOTS_PER_LINE

from ..helpers import ROCM_VERSION_PY, UNSET_TAIL, Venv, fake_torch

#: One worker builds the venvs (a session fixture each worker would build again)
#: and runs every test that uses them.
pytestmark = [pytest.mark.e2e, pytest.mark.xdist_group("venvs")]

#: CPU seconds a hostile start may take (a normal one takes ~20 ms): CPU
#: time, which a busy machine does not stretch as it stretches wall time; a
#: start that blocks is caught by the run's own timeout.
LIMIT = 2.0
PROBE = "import json, os; print(json.dumps(os.environ.get('GPU_MAX_HW_QUEUES')))"


class Case:
    def __init__(self, root: Path) -> None:
        self.root = root

    def file(self, name: str, content: bytes) -> str:
        path = self.root / name
        path.write_bytes(content)
        return str(path)


def _fifo(c: Case) -> list[str]:
    os.mkfifo(c.root / "fifo")
    return ["--job.config_file", str(c.root / "fifo")]


def _huge(c: Case) -> list[str]:
    with open(c.root / "huge.toml", "wb") as f:
        f.truncate(64 << 20)
    return ["--job.config_file", str(c.root / "huge.toml")]


def _loop(c: Case) -> list[str]:
    (c.root / "loop.toml").symlink_to(c.root / "loop.toml")
    return ["--job.config_file", str(c.root / "loop.toml")]


def _toml(content: bytes, *extra: str) -> Callable[[Case], list[str]]:
    def make(c: Case) -> list[str]:
        return ["--job.config_file", c.file("job.toml", content), *extra]

    return make


DEEP_ARRAY = b"a = " + b"[" * 100_000 + b"]" * 100_000 + b"\n"
DEEP_TABLE = b"a = " + b"{b = " * 50_000 + b"1" + b"}" * 50_000 + b"\n"
DEEP_KEYS = b"[" + b".".join([b"k"] * 20_000) + b"]\n"
DEEP_DOTTED = b".".join([b"k"] * 30_000) + b" = 1\n"  # 15 s in tomllib unguarded
MOE = b"[model]\nname = 'deepseek_v3'\n"
# Valid TOML that tomllib is slowest on (benchmarks/toml_limits.py: table
# headers as deep as the dots guard lets through), as large as the hook reads.
_HEADER = "[t{}." + ".".join(["k"] * (MAX_DOTS_PER_LINE - 6)) + "]\n"
SLOW_TOML = "".join(_HEADER.format(i) for i in range(MAX_CONFIG_BYTES // 500)).encode()
SLOW_TOML = SLOW_TOML[: SLOW_TOML.rfind(b"\n", 0, MAX_CONFIG_BYTES) + 1]

# name: (argv maker, expected GPU_MAX_HW_QUEUES, warning fragment or None)
CASES: dict[str, tuple[Callable[[Case], list[str]], str | None, str | None]] = {
    "fifo": (_fifo, None, "not a regular file (a FIFO)"),
    "dev-zero": (lambda c: ["--job.config_file", "/dev/zero"], None, "character device"),
    "directory": (lambda c: ["--job.config_file", str(c.root)], None, "a directory"),
    "64-MiB": (_huge, None, "67108864 bytes, more than the 262144 read"),
    # Its tables are no fields of torchtitan's: named, and the value set.
    "deep-headers-at-the-bound": (_toml(SLOW_TOML), "4", "job.toml: t0, t1, "),
    "garbage": (lambda c: ["--job.config_file", c.file("g.toml", b"\xff\x00" * 2048)],
                None, "g.toml: not UTF-8 text"),
    "unreadable": (lambda c: ["--job.config_file", "/proc/self/mem"], None,
                   "/proc/self/mem: "),
    "symlink-loop": (_loop, None, "Too many levels of symbolic links"),
    "missing": (lambda c: ["--job.config_file", "/nonexistent/job.toml"], None,
                "No such file or directory"),
    "dangling-flag": (lambda c: ["--job.config_file"], None,
                      "--job.config_file: expects a value"),
    "empty-path": (lambda c: ["--job.config_file="], None,
                   "--job.config_file: empty path"),
    "invalid-toml": (_toml(b"[parallelism\n"), None, "invalid TOML"),
    "deep-array": (_toml(DEEP_ARRAY), None, "job.toml: "),
    "deep-inline-table": (_toml(DEEP_TABLE), None, "job.toml: "),
    "deep-keys": (_toml(DEEP_KEYS), None, "more than 256 dots"),
    "deep-dotted-assignment": (_toml(DEEP_DOTTED), None, "more than 256 dots"),
    "not-utf8": (_toml(b"[model]\nname = '\xff\xfe'\n"), None, "not UTF-8"),
    "string-degree": (_toml(b"[parallelism]\ntensor_parallel_degree = '2'\n"), None,
                      "is not an integer"),
    "float-degree": (_toml(b"[parallelism]\ntensor_parallel_degree = 2.0\n"), None,
                     "is not an integer"),
    "bool-degree": (_toml(b"[parallelism]\ntensor_parallel_degree = true\n"), None,
                    "is not an integer"),
    "huge-degree": (_toml(b"[parallelism]\ntensor_parallel_degree = 9223372036854775807\n"),
                    "4", None),
    "huge-int-literal": (_toml(b"x = " + b"9" * 5000 + b"\n"), None, "job.toml: "),
    "negative-degree": (_toml(b"[parallelism]\ntensor_parallel_degree = -2\n"), None,
                        "must be >= 1"),
    "zero-degree": (_toml(b"[parallelism]\nexpert_parallel_degree = 0\n"), None,
                    "must be >= 1"),
    "scalar-for-table": (_toml(b"parallelism = 8\n"), None, "not a table"),
    "array-for-table": (_toml(b"[[parallelism]]\nx = 1\n"), None, "not a table"),
    "list-of-ints": (_toml(b"[compile]\ndisable_passes = [1, 2]\n"), None,
                     "not a list of strings"),
    "string-for-list": (_toml(b"[compile]\ndisable_passes = 'cudagraph_pass'\n"), None,
                        "not a list of strings"),
    "bad-cli-int": (_toml(MOE, "--parallelism.expert_parallel_degree", "0x2"), None,
                    "not an integer"),
    "cli-flag-with-value": (_toml(MOE, "--compile.enable_passes", "False"), None,
                            "takes no value"),
    "cli-missing-value": (_toml(MOE, "--parallelism.expert_parallel_degree"), None,
                          "warning: --parallelism.expert_parallel_degree: expects a value"),
    "cli-typo": (_toml(MOE, "--parallelism.expert_paralel_degree", "2"), None,
                 "did you mean --parallelism.expert_parallel_degree?"),
    "toml-typo": (_toml(b"[parallelism]\nexpert_paralel_degree = 2\n"), None,
                  "did you mean parallelism.expert_parallel_degree?"),
    "cli-plus-int": (_toml(MOE, "--parallelism.expert_parallel_degree", "+2"), "4", None),
    "long-path": (lambda c: ["--job.config_file", "/" + "x" * 100_000], None,
                  "x...x"),  # the path cut in the middle, its end kept
    "newline-path": (lambda c: ["--job.config_file", "/tmp/a\nb\x1b[2J"], None, "a\\nb\\x1b[2J"),
}  # fmt: skip


@pytest.fixture(scope="module", params=["3.9", "3.13"])
def venv(request: pytest.FixtureRequest, venvs: Callable[..., Venv]) -> Venv:
    return venvs(request.param)


@pytest.mark.parametrize("name", sorted(CASES))
def test_hostile(name: str, venv: Venv, tmp_path: Path) -> None:
    make, expected, warning = CASES[name]
    argv = make(Case(tmp_path))
    rocm = fake_torch(tmp_path / "rocm", ROCM_VERSION_PY)
    before = cpu_of_children()
    proc = subprocess.run(
        [venv.python, "-c", PROBE, *argv],
        env={"PATH": os.environ["PATH"], "PYTHONPATH": str(rocm)},
        capture_output=True, text=True, timeout=30, cwd=tmp_path,
    )  # fmt: skip
    used = cpu_of_children() - before
    assert proc.returncode == 0, proc.stderr
    assert used < LIMIT, f"{used:.2f} s of CPU"
    assert json.loads(proc.stdout) == expected
    assert "Traceback" not in proc.stderr
    lines = proc.stderr.splitlines()
    if warning is None:
        assert lines == [] if expected is None else len(lines) == 1
    else:
        assert len(lines) == (1 if expected is None else 2), proc.stderr
        assert lines[0].startswith("rocm-hwq-autoset: warning: ")
        assert warning in lines[0]
        assert lines[0].endswith(f"; {UNSET_TAIL}" if expected is None else "reads")
        assert len(lines[0]) <= 400
        if expected is not None:  # the value's line, after the warning
            assert lines[1].startswith(
                f"rocm-hwq-autoset: GPU_MAX_HW_QUEUES={expected} "
            )


def test_the_slow_toml_is_as_large_as_the_hook_reads() -> None:
    """Within one of its lines of the bound (was: 64 KiB, a quarter of it)."""
    assert MAX_CONFIG_BYTES - len(_HEADER) < len(SLOW_TOML) <= MAX_CONFIG_BYTES


def cpu_of_children() -> float:
    """The CPU seconds (user and system) of this process's children reaped so
    far: a test's child is reaped by ``subprocess.run`` before it returns."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime

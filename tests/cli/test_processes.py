"""The commands as real processes of this venv: its console script and ``python
-m rocm_hwq_autoset``. The start-up hook stays out of the package's own
commands, so each says a thing once, itself."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from rocm_hwq_autoset._environ import QUEUES, QueuesSetting

from ..data import write_job
from ..helpers import child_env

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = Path(sys.executable).with_name("rocm-hwq-autoset")
LAUNCHERS = {
    "console script": [str(SCRIPT)],
    "python -m": [sys.executable, "-m", "rocm_hwq_autoset"],
}
#: Python 3.9 has no ``sys.orig_argv``: the hook reads a ``python -m M``'s
#: module from ``/proc/self/cmdline`` there, so it knows its own command too.
EACH_LAUNCHER = ["console script", "python -m"]
JOB = "models__deepseek_v3__deepseek_v3_16b.toml"


def run(
    launcher: str, args: list[str], cwd: Path, **env: str
) -> subprocess.CompletedProcess[str]:
    assert SCRIPT.is_file(), SCRIPT  # the venv's console script
    full_env = child_env({"PATH": os.environ["PATH"], "PYTHONPATH": str(ROOT),
                          "NO_COLOR": "1",
                          "ROCM_HWQ_AUTOSET_CACHE_DIR": str(cwd / "cache"),
                          **env})  # fmt: skip
    proc = subprocess.run([*LAUNCHERS[launcher], *args], cwd=cwd, env=full_env,
                          capture_output=True, text=True, timeout=60)  # fmt: skip
    assert "Traceback" not in proc.stderr, proc.stderr
    return proc


def once_each(text: str) -> bool:
    lines = [line for line in text.splitlines() if line.strip()]
    return len(lines) == len(set(lines))


@pytest.mark.parametrize("launcher", EACH_LAUNCHER)
def test_doctor_with_force_says_it_once(launcher: str, tmp_path: Path) -> None:
    """With detection skipped, the hook would set Q in doctor's own process and
    say so before doctor says it again."""
    write_job(tmp_path, JOB)
    proc = run(launcher, ["doctor", "--", "--job.config_file", JOB], tmp_path,
               ROCM_HWQ_AUTOSET="force")  # fmt: skip
    assert proc.stderr == ""
    assert proc.returncode == 0, proc.stdout
    assert once_each(proc.stdout)
    assert "GPU_MAX_HW_QUEUES      unset" in proc.stdout  # not set in doctor itself
    assert proc.stdout.count("would set GPU_MAX_HW_QUEUES=4") == 1


@pytest.mark.parametrize("launcher", EACH_LAUNCHER)
def test_export_with_an_unusable_explicit_value_says_it_once(
    launcher: str, tmp_path: Path
) -> None:
    write_job(tmp_path, JOB)
    proc = run(launcher, ["explain", "--export", "--job.config_file", JOB],
               tmp_path, GPU_MAX_HW_QUEUES="abc", ROCM_HWQ_AUTOSET="force")  # fmt: skip
    assert (proc.returncode, proc.stdout) == (2, "false\n")  # eval fails
    problem = QueuesSetting({QUEUES: "abc"}).problem
    assert proc.stderr.startswith(f"rocm-hwq-autoset: error: {problem}; ")
    assert proc.stderr.count("\n") == 1  # once: the explain golden has it whole


def test_python_m_and_console_script_agree(tmp_path: Path) -> None:
    write_job(tmp_path, JOB)
    docs = []
    for launcher in sorted(LAUNCHERS):
        proc = run(launcher, ["explain", "--json", "--job.config_file", JOB], tmp_path)
        assert proc.returncode == 0 and proc.stderr == ""
        docs.append(json.loads(proc.stdout))
    assert docs[0] == docs[1]
    assert docs[0]["queues"] == 4 and docs[0]["config"] == JOB


#: Streams that cannot hold every character: ASCII by request, the C locale
#: without Python's coercion to UTF-8.
ENCODINGS = {
    "PYTHONIOENCODING=ascii": {"PYTHONIOENCODING": "ascii"},
    "LANG=C": {"LANG": "C", "LC_ALL": "C", "PYTHONUTF8": "0",
               "PYTHONCOERCECLOCALE": "0"},
}  # fmt: skip
#: Each command, with a path it must print; ``{job}`` and ``{trace}`` are
#: filled in. Exit status 0 or 1 (a report) or 2 (a refusal), never 1 from a
#: traceback.
ENCODED_COMMANDS = [
    (["explain", "--job.config_file", "{job}"], 0),
    (["explain", "--export", "--job.config_file", "{job}"], 0),
    (["explain", "--export", "--verbose", "--job.config_file", "{job}"], 0),
    (["explain", "--json", "--job.config_file", "{job}"], 0),
    (["explain", "--job.config_file", "{job}.missing"], 2),
    (["doctor", "--", "--job.config_file", "{job}"], 0),
    (["verify", "{trace}", "--job.config_file", "{job}"], 0),
    (["verify", "{trace}.missing"], 2),
]


@pytest.mark.parametrize("name", ["cönfig/jöb.toml", b"b\xffd/job.toml"])
@pytest.mark.parametrize("encoding", sorted(ENCODINGS))
@pytest.mark.parametrize(("args", "status"), ENCODED_COMMANDS)
def test_every_command_survives_any_encoding(
    name: str | bytes, encoding: str, args: list[str], status: int, tmp_path: Path
) -> None:
    """No traceback: what the stream cannot hold is escaped (a non-UTF-8 path
    is one no encoding holds)."""
    from ..data import kernel, write_trace

    raw = os.fsencode(name) if isinstance(name, str) else name
    folder = os.path.join(os.fsencode(tmp_path), os.path.dirname(raw))
    os.makedirs(folder)
    write_job(tmp_path, JOB)
    os.rename(os.fsencode(tmp_path / JOB), os.path.join(os.fsencode(tmp_path), raw))
    job = os.fsdecode(raw)
    trace = os.path.join(os.fsdecode(folder), "tr\u00e4ce.json")
    write_trace(Path(trace), {"traceEvents": [kernel(0, 1)]})
    filled = [a.format(job=job, trace=trace) for a in args]
    env = child_env({
        "PATH": os.environ["PATH"], "PYTHONPATH": str(ROOT), "NO_COLOR": "1",
        "ROCM_HWQ_AUTOSET_CACHE_DIR": str(tmp_path / "cache"), **ENCODINGS[encoding],
    })  # fmt: skip
    proc = subprocess.run([*LAUNCHERS["console script"], *filled], cwd=tmp_path,
                          env=env, capture_output=True, timeout=60)  # fmt: skip
    said = proc.stdout + proc.stderr
    assert b"Traceback" not in said, said
    assert proc.returncode == status, said
    if encoding == "PYTHONIOENCODING=ascii":
        assert said.isascii(), said  # escaped, not lost
        assert b"\\x" in said or b"\\u" in said or b"?" in said or args[0] == "doctor"

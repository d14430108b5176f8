"""The torchtitan venv the tests and benchmarks of the real torchtitan need:
CPython 3.11 from pyenv with ``torch==2.13.0`` (the CPU wheel this machine
keeps on disk for Python 3.11: any other version, or uv, would download a
multi-GB CUDA build), ``torchtitan==0.3.0`` and ``triton``. Made once, then
kept in ``${XDG_CACHE_HOME:-~/.cache}/rocm-hwq-autoset-ci/`` while the
requirements stay the same; ``.ci/run`` uses it too.

    eval "$(python tools/torchtitan_venv.py)"    # then python -m pytest ...

Stdout is one line, ``export ROCM_HWQ_TORCHTITAN=<the venv's python>``; what
it does is said on stderr. On a failure (no CPython 3.11, pip failing) stdout
is ``false``, so that the ``eval`` fails, and the exit status 1.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
from pathlib import Path

REQUIREMENTS = "torch==2.13.0 torchtitan==0.3.0 triton"
VARIABLE = "ROCM_HWQ_TORCHTITAN"
#: The Python torch 2.13.0's CPU wheel on this machine is for.
PYTHON = "3.11"
#: What the probes of the tests and the benchmarks of the real torchtitan
#: share (``sitecustomize`` source, after ``import os, sys``). ``_unrecorded``
#: reads a variable where no recording sees it: the evaluating child runs
#: ``site``, and so the probe, under its recorder, and a per-launch log path
#: must not become a dependency of the entry (through ``os.environ`` it did:
#: every relaunch was stale). ``_on_torchtitan_import(then)``: in this
#: package's evaluating child, ``then(check)`` once, at its first import of
#: torchtitan; ``check``: it is a background check, which runs at
#: ``SCHED_IDLE`` from its start (a launcher's, or the node's one child
#: checking a peer's answer or the entry), where an evaluation goes there only
#: after it answered.
PROBE = r"""
def _unrecorded(name):
    with open("/proc/self/environ", "rb") as f:
        for item in f.read().split(b"\0"):
            key, _, value = item.partition(b"=")
            if key == name.encode():
                return value.decode()
    return None
def _on_torchtitan_import(then):
    def _count(event, args, seen=[]):
        if not seen and event == "import" and str(args[0]).startswith("torchtitan"):
            seen.append(1)
            then(os.sched_getscheduler(0) == getattr(os, "SCHED_IDLE", -1))
    sys.addaudithook(_count)
"""
#: The graph_trainer recipes torchtitan 0.3.0 ships, by config registry module:
#: the one list its tests (tests/torchtitan/test_recipes.py) and its benchmark
#: (benchmarks/recipes.py) read, each with ``runpy.run_path``.
RECIPES = {
    "graph_trainer.deepseek_v3": [
        "graph_trainer_deepseek_v3_debugmodel",
        "graph_trainer_deepseek_v3_debugmodel_mxfp8",
        "graph_trainer_deepseek_v3_debugmodel_hybridep",
        "graph_trainer_deepseek_v3_debugmodel_minimal_async_ep",
        "graph_trainer_deepseek_v3_debugmodel_eager_pp",
        "graph_trainer_deepseek_v3_16b",
        "graph_trainer_deepseek_v3_16b_minimal_async_ep",
        "graph_trainer_deepseek_v3_16b_sdpa",
        "graph_trainer_deepseek_v3_671b",
    ],
    "graph_trainer.llama3": [
        "graph_trainer_llama3_debugmodel",
        "graph_trainer_llama3_debugmodel_dist_gemm",
        "graph_trainer_llama3_debugmodel_sdpa",
        "graph_trainer_llama3_debugmodel_sdpa_cross_entropy_loss",
        "graph_trainer_llama3_debugmodel_sdpa_eager",
        "graph_trainer_llama3_8b",
        "graph_trainer_llama3_8b_mxfp8",
        "graph_trainer_llama3_70b",
        "graph_trainer_llama3_405b",
    ],
    "graph_trainer.qwen3": [
        "graph_trainer_qwen3_debugmodel",
        "graph_trainer_qwen3_debugmodel_moe",
        "graph_trainer_qwen3_14b",
    ],
    "graph_trainer.muse_glimmer": ["graph_trainer_muse_glimmer_debugmodel"],
}


def carrying(token: str) -> list[int]:
    """The processes still running (no zombie) whose environment holds
    ``token``: what the launches of a test or a benchmark of the real
    torchtitan left behind."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            environ = (entry / "environ").read_bytes()
            state = (entry / "stat").read_text().split(") ")[1][0]
        except (OSError, IndexError):
            continue
        if token.encode() in environ and state != "Z":
            found.append(int(entry.name))
    return found


def probe_world(root: Path, sitecustomize: str) -> tuple[Path, Path]:
    """Where the launches of a test or a benchmark of the real torchtitan run,
    made in ``root``: their working directory, and the folder of their probe
    (``sitecustomize``, for ``PYTHONPATH``)."""
    work = root / "work"
    work.mkdir()
    site = root / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(sitecustomize)
    return work, site


def end_carrying(token: str) -> None:
    """Kill, by pid, the processes still running that carry ``token``: what a
    failed launch of a test or a benchmark left."""
    for pid in carrying(token):
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)


def pyenv_root() -> Path:
    """``pyenv root``, else ``$PYENV_ROOT``, else ``~/.pyenv``."""
    if shutil.which("pyenv"):
        done = subprocess.run(["pyenv", "root"], capture_output=True, text=True)
        if done.returncode == 0 and done.stdout.strip():
            return Path(done.stdout.strip())
    return Path(os.environ.get("PYENV_ROOT") or Path.home() / ".pyenv")


def find_python(root: Path, version: str = PYTHON) -> Path | None:
    """The newest CPython ``version``.N under pyenv's versions, or None."""
    found = [
        (int(m.group(1)), p)
        for p in (root / "versions").glob(f"{version}.*")
        if (m := re.fullmatch(re.escape(version) + r"\.(\d+)", p.name))
        and (p / "bin" / "python3").is_file()
    ]
    return max(found)[1] / "bin" / "python3" if found else None


def keep_dir(environ: dict[str, str], requirements: str = REQUIREMENTS) -> Path:
    """Where the venv is kept: named by the requirements' hash (as ``.ci/run``
    named it: ``echo "$requirements" | sha256sum``, its first 12 digits)."""
    cache = environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    digest = hashlib.sha256((requirements + "\n").encode()).hexdigest()[:12]
    return Path(cache) / "rocm-hwq-autoset-ci" / f"torchtitan-{digest}"


def build(keep: Path, python: Path, requirements: str = REQUIREMENTS) -> None:
    """The venv at ``keep``, anew; ``ready`` marks it complete."""
    shutil.rmtree(keep, ignore_errors=True)
    keep.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run([str(python), "-m", "venv", str(keep)], check=True)
    subprocess.run(
        [str(keep / "bin" / "pip"), "install", "--quiet",
         "--disable-pip-version-check", *requirements.split()],
        check=True,
    )  # fmt: skip
    (keep / "ready").touch()


def main(argv: list[str]) -> int:
    if argv:
        print(__doc__, file=sys.stderr)
        return 2
    keep = keep_dir(dict(os.environ))
    say = f"{Path(__file__).name}:"
    if not (keep / "ready").is_file():
        root = pyenv_root()
        python = find_python(root)
        if python is None:
            print(f"{say} no CPython {PYTHON} under {root}/versions (pyenv install"
                  f" {PYTHON}); {VARIABLE} not set", file=sys.stderr)  # fmt: skip
            print("false")
            return 1
        print(f"{say} making {keep} with {python}: pip install {REQUIREMENTS}"
              " (once; kept while the requirements stay the same)",
              file=sys.stderr)  # fmt: skip
        try:
            build(keep, python)
        except (OSError, subprocess.CalledProcessError) as exc:
            print(f"{say} {exc}; {VARIABLE} not set", file=sys.stderr)
            print("false")
            return 1
    print(f"export {VARIABLE}={shlex.quote(str(keep / 'bin' / 'python'))}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

"""The real torchtitan 0.3.0, CPU torch 2.13.0 and torchrun, in the venv
``tools/torchtitan_venv.py`` makes (``.ci/run`` uses it) and names in
``ROCM_HWQ_TORCHTITAN`` (required under ``CI``, skipped with the command
elsewhere).

Every process these tests start carries a ``sitecustomize`` (on ``PYTHONPATH``)
that makes a training process report what it was started with and stop before
any training: a torchtitan program prints one ``PROBE`` line (after starting a
process, so that a pending ``--module`` evaluation is waited for, as before a
worker's start) and exits. It also counts the evaluations: a child of this
package that imports torchtitan writes its pid to ``$EVAL_LOG``, or, when it
imports it in a background check of an answer it did not evaluate (the
child's ``_check``, which the launch never waits for), to ``$EVAL_LOG.checks``;
and torchrun notes each worker start it begins (where it waits for a pending
value) in ``$EVAL_LOG.starts``. With
``PROBE_LAUNCHER`` it plays a launcher of its own instead, starting two workers
with environments made before the value arrived (``upfront``) or from two
threads at once (``threads``).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from ..helpers import NO_TORCHTITAN, missing

SITECUSTOMIZE = r"""
import json, os, sys
argv = list(getattr(sys, "orig_argv", []))
_log = os.environ.get("EVAL_LOG")  # now: the evaluation records what it reads
if any("rocm_hwq_autoset._evaluation.child" in a for a in argv) and _log:
    def _checking():  # whether the child's _check is on the stack
        frame = sys._getframe(2)
        while frame is not None:
            code = frame.f_code
            if code.co_name == "_check" and code.co_filename.endswith(
                    os.path.join("_evaluation", "child.py")):
                return True
            frame = frame.f_back
        return False

    def _count(event, args, seen=[]):
        if not seen and event == "import" and str(args[0]).startswith("torchtitan"):
            seen.append(1)
            with open(_log + ".checks" if _checking() else _log, "a") as log:
                log.write(f"{os.getpid()}\n")
    sys.addaudithook(_count)
elif sys.argv[0].endswith("/torchrun") and _log:  # the launcher: note its first
    import subprocess  # worker start, where a pending evaluation is waited for

    def _starting(self, *args, _init=subprocess.Popen.__init__, **kwargs):
        with open(_log + ".starts", "a") as log:
            log.write(f"{os.getpid()}\n")
        _init(self, *args, **kwargs)
    subprocess.Popen.__init__ = _starting
elif (sys.argv[0] == "-m" and argv[len(argv) - len(sys.argv)] == "torchtitan.train"
      or sys.argv[0].endswith("torchtitan/train.py")):  # this process trains
    import atexit, subprocess

    def report(role):
        return {"role": role, "rank": os.environ.get("RANK"),
                "queues": os.environ.get("GPU_MAX_HW_QUEUES"),
                "origin": os.environ.get("ROCM_HWQ_AUTOSET_ORIGIN"),
                "inputs": os.environ.get("ROCM_HWQ_AUTOSET_INPUTS"),
                "world_size": os.environ.get("WORLD_SIZE"), "pid": os.getpid()}

    mode = os.environ.get("PROBE_LAUNCHER")
    if mode:  # a launcher of its own: two workers
        worker = ("import json, os; os.write(1, ('PROBE ' + json.dumps({k:"
                  " os.environ.get(v) for k, v in [('rank', 'RANK'), ('queues',"
                  " 'GPU_MAX_HW_QUEUES'), ('origin', 'ROCM_HWQ_AUTOSET_ORIGIN')]})"
                  " + chr(10)).encode())")
        envs = [dict(os.environ, RANK=str(r)) for r in range(2)]  # made up front
        if mode == "upfront":
            for env in envs:
                subprocess.run([sys.executable, "-c", worker], env=env)
        else:
            import threading
            threads = [threading.Thread(target=subprocess.run,
                                        args=([sys.executable, "-c", worker],),
                                        kwargs={"env": env}) for env in envs]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
        atexit._run_exitfuncs()  # as a process that ends normally
        os._exit(0)
    subprocess.run(["true"])  # a process start: a pending value is waited for here
    # One write: workers started with "python -u" share torchrun's stdout.
    os.write(1, ("PROBE " + json.dumps(report("training")) + "\n").encode())
    atexit._run_exitfuncs()  # as a process that ends normally: the hook's own
    os._exit(0)  # handler lets an evaluation that answered store its answer
"""


@pytest.fixture(scope="session")
def python(wheelhouse: Path) -> str:
    """That venv's python, with this checkout's wheel installed (afresh)."""
    found = os.environ.get("ROCM_HWQ_TORCHTITAN", "")
    if not found or not Path(found).exists():
        missing(NO_TORCHTITAN)
    wheel = next(wheelhouse.glob("rocm_hwq_autoset-*.whl"))
    subprocess.run(
        [found, "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
         "--no-deps", "--no-index", "--force-reinstall", str(wheel)],
        check=True, env={"PATH": os.environ["PATH"], "ROCM_HWQ_AUTOSET": "0"},
    )  # fmt: skip
    return found


FIND_TORCHTITAN = "import os, torchtitan as t; print(os.path.dirname(t.__file__))"


@pytest.fixture(scope="session")
def torchtitan_dir(python: str) -> Path:
    out = subprocess.run(
        [python, "-c", FIND_TORCHTITAN],
        capture_output=True, text=True, check=True,
        env={"PATH": os.environ["PATH"], "ROCM_HWQ_AUTOSET": "0"},
    )  # fmt: skip
    return Path(out.stdout.strip())


class Launches:
    """Where a test's launches run: a working directory, a private cache, a log
    of evaluations, and a token in every process's environment, by which the
    processes a launch left behind are found."""

    def __init__(self, python: str, root: Path) -> None:
        self.python = python
        self.bin = Path(python).parent
        self.root = root
        self.work = root / "work"
        self.work.mkdir()
        site = root / "site"
        site.mkdir()
        (site / "sitecustomize.py").write_text(SITECUSTOMIZE)
        self.log = root / "evaluations"
        self.token = uuid.uuid4().hex
        self.env = {
            "PATH": os.environ["PATH"],
            "HOME": os.environ.get("HOME", "/tmp"),
            "PYTHONPATH": str(site),
            "ROCM_HWQ_AUTOSET": "force",  # a CPU torch here: no ROCm to find
            "ROCM_HWQ_AUTOSET_CACHE_DIR": str(root / "cache"),
            "EVAL_LOG": str(self.log),
            "HWQ_TEST_TOKEN": self.token,
        }

    def evaluations(self) -> int:
        """How many evaluations the launches made (or waited for): not the
        background checks."""
        return self.log.read_text().count("\n") if self.log.exists() else 0

    def checks(self) -> int:
        """How many background checks got as far as importing torchtitan (a
        launch that ends first ends its check: this many, or fewer)."""
        checks = self.log.with_name(self.log.name + ".checks")
        return checks.read_text().count("\n") if checks.exists() else 0

    def worker_starts(self) -> int:
        """How often a torchrun began to start a worker."""
        starts = self.log.with_name(self.log.name + ".starts")
        return starts.read_text().count("\n") if starts.exists() else 0

    def popen(self, args: list[str], **env: str) -> subprocess.Popen[str]:
        return subprocess.Popen(
            args, cwd=self.work, env={**self.env, **env}, text=True,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True,
        )  # fmt: skip

    def run(self, args: list[str], **env: str) -> tuple[int, str, str]:
        process = self.popen(args, **env)
        out, err = process.communicate(timeout=300)
        return process.returncode, out, err

    def torchrun(self, *args: str) -> list[str]:
        return [str(self.bin / "torchrun"), *args]

    def train(self, *args: str) -> list[str]:
        """A training process started without a launcher (srun, mpirun)."""
        return [self.python, "-m", "torchtitan.train", *args]

    def left_behind(self) -> list[int]:
        """Processes still running that carry this test's token."""
        found = []
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                environ = (entry / "environ").read_bytes()
                state = (entry / "stat").read_text().split(") ")[1][0]
            except OSError:
                continue
            if self.token.encode() in environ and state != "Z":
                found.append(int(entry.name))
        return found

    def end_all(self) -> None:
        for pid in self.left_behind():
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)


@pytest.fixture
def launches(python: str, tmp_path: Path) -> Any:
    world = Launches(python, tmp_path)
    yield world
    world.end_all()


def probes(out: str) -> list[dict[str, Any]]:
    return [json.loads(line[6:]) for line in out.splitlines()
            if line.startswith("PROBE ")]  # fmt: skip


def ours(err: str) -> list[str]:
    return [line for line in err.splitlines() if line.startswith("rocm-hwq-autoset")]


def wait_for(test: Any, seconds: float) -> bool:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if test():
            return True
        time.sleep(0.05)
    return bool(test())

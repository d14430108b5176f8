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
imports it in a background check of an answer it did not evaluate (which the
launch never waits for; a check runs at ``SCHED_IDLE`` from its start, an
evaluation only after it answered), to ``$EVAL_LOG.checks``. ``EVAL_LOG`` is
read from ``/proc/self/environ``, where the evaluation's recorder does not see
it: each test's log path differs, and a recorded read would make every
relaunch stale;
and torchrun notes each worker start it begins (where it waits for a pending
value) in ``$EVAL_LOG.starts``. With
``PROBE_LAUNCHER`` it plays a launcher of its own instead, starting two workers
with environments made before the value arrived (``upfront``) or from two
threads at once (``threads``). With ``PROBE_OUTLAST`` a training process
lasts, after its line, until every evaluation the test's launches began has
ended (``OUTLAST``), as a real training outlasts its evaluation's store.
Without it a training ends at once, and its launch gives a store still running
2 s (``STORE_SECONDS``), as a launch that fails at once does.
"""

from __future__ import annotations

import json
import os
import re
import runpy
import shutil
import subprocess
import time
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from ..helpers import NO_TORCHTITAN, ROOT, missing, shared_root

#: A training process's last act where it is to outlast the evaluations its
#: test's launches began (``PROBE_OUTLAST``): wait, 120 s at most, until each has
#: ended (each holds a lock on ``$EVAL_LOG.running.<pid>`` from its import of
#: torchtitan to its end).
OUTLAST = r"""
def outlast(log):
    import fcntl, glob, os, time
    end = time.monotonic() + 120
    for name in glob.glob(log + ".running.*"):
        fd = os.open(name, os.O_RDONLY | os.O_CLOEXEC)
        while time.monotonic() < end:
            try:
                fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
                break
            except OSError:
                time.sleep(0.05)
        os.close(fd)
"""

#: What tools/torchtitan_venv.py holds for the tests and the benchmarks alike
#: (``PROBE``: the probe's variable reader, and its hook on torchtitan's import;
#: ``probe_world``: the launches' folders; ``end_carrying``: what they left).
TOOLS = runpy.run_path(str(ROOT / "tools" / "torchtitan_venv.py"))

SITECUSTOMIZE = (
    OUTLAST
    + r"""
import json, os, sys
argv = list(getattr(sys, "orig_argv", []))
"""
    + TOOLS["PROBE"]
    + r"""
_log = _unrecorded("EVAL_LOG")
if any("rocm_hwq_autoset._evaluation.child" in a for a in argv) and _log:
    def _evaluating(check):  # a check's pid apart, in EVAL_LOG.checks
        with open(_log + ".checks" if check else _log, "a") as log:
            log.write(f"{os.getpid()}\n")
        if not check:  # held until this evaluation ends: see OUTLAST
            import fcntl
            fd = os.open(f"{_log}.running.{os.getpid()}",
                         os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC, 0o600)
            fcntl.flock(fd, fcntl.LOCK_EX)
    _on_torchtitan_import(_evaluating)
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
    if _log and os.environ.get("PROBE_OUTLAST"):  # as a real training outlasts
        outlast(_log)  # its evaluation's store
    atexit._run_exitfuncs()  # as a process that ends normally: the hook's own
    os._exit(0)  # handler lets an evaluation that answered store its answer
"""
)


@pytest.fixture(scope="session")
def python(wheelhouse: Path, tmp_path_factory: pytest.TempPathFactory) -> str:
    """That venv's python, with this checkout's wheel installed (afresh), once
    per test run: under xdist the first worker to get here installs it, and
    the others wait for that and do not install it again (a second install
    while the first worker's launches import the package broke them)."""
    found = os.environ.get("ROCM_HWQ_TORCHTITAN", "")
    if not found or not Path(found).exists():
        missing(NO_TORCHTITAN)
    import fcntl

    root = shared_root(tmp_path_factory)
    lock = os.open(root / "torchtitan.lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC)
    try:
        fcntl.flock(lock, fcntl.LOCK_EX)
        done = root / "torchtitan.installed"
        if not done.exists():
            wheel = next(wheelhouse.glob("rocm_hwq_autoset-*.whl"))
            subprocess.run(
                [found, "-m", "pip", "install", "--quiet",
                 "--disable-pip-version-check", "--no-deps", "--no-index",
                 "--force-reinstall", str(wheel)],
                check=True, env={"PATH": os.environ["PATH"], "ROCM_HWQ_AUTOSET": "0"},
            )  # fmt: skip
            done.write_text(found + "\n")
    finally:
        os.close(lock)
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
        self.work, site = TOOLS["probe_world"](root, SITECUSTOMIZE)
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
        found: list[int] = TOOLS["carrying"](self.token)
        return found

    def end_all(self) -> None:
        TOOLS["end_carrying"](self.token)


@pytest.fixture
def launches(python: str, tmp_path: Path) -> Any:
    world = Launches(python, tmp_path)
    yield world
    world.end_all()


class FirstLaunch:
    """A world whose first launch has evaluated and stored its entry, shared
    by the tests that each begin with that same launch (one evaluation for
    them all: about 7 CPU seconds saved per test). Each test begins with
    :meth:`again`, which puts the world back as the first launch left it."""

    def __init__(self, world: Launches, result: Any) -> None:
        self.world = world
        self.result = result
        """What the first launch gave (its Q and lines, say)."""
        assert wait_for(lambda: world.left_behind() == [], 10)
        self.evaluations = world.evaluations()
        self.kept = world.root / "after-the-first-launch"
        for name in self.SAVED:  # the modes and times too (copy2)
            shutil.copytree(world.root / name, self.kept / name, symlinks=True)

    #: The world's folders a test may change: its working directory, its cache.
    SAVED = ("work", "cache")

    def again(self) -> Launches:
        """The world as its first launch left it: nothing of a test before
        still runs; its working directory and cache are the first launch's
        (a file put back is a new inode with the same bytes and modification
        time: the entry takes it by its bytes); the counts of evaluations,
        checks and worker starts are the first launch's."""
        world = self.world
        world.end_all()
        assert wait_for(lambda: world.left_behind() == [], 10)
        for name in self.SAVED:
            shutil.rmtree(world.root / name)
            shutil.copytree(self.kept / name, world.root / name, symlinks=True)
        world.log.write_text("0\n" * self.evaluations)
        for other in (".checks", ".starts"):
            world.log.with_name(world.log.name + other).unlink(missing_ok=True)
        return world


def probes(out: str) -> list[dict[str, Any]]:
    return [json.loads(line[6:]) for line in out.splitlines()
            if line.startswith("PROBE ")]  # fmt: skip


def ours(err: str, waited: Sequence[str] | None = None) -> list[str]:
    """This package's lines. ``waited``: the training arguments of a
    ``--module`` launch that waits for its evaluation: one that waited past
    ``SLOW_SECONDS`` (2 s) begins with one note of what it waits for (issue
    #30), exactly that line; it is left out here (the node's other lines are
    as ever)."""
    lines = [line for line in err.splitlines() if line.startswith("rocm-hwq-autoset")]
    if waited is not None and lines and waiting_note(waited).fullmatch(lines[0]):
        del lines[0]
    return lines


def waiting_note(training: Sequence[str]) -> re.Pattern[str]:
    """The note of a launch still waiting for its evaluation past 2 s."""
    module = training[list(training).index("--module") + 1]
    config = training[list(training).index("--config") + 1]
    return re.compile(
        re.escape(
            "rocm-hwq-autoset: waiting for the --module/--config evaluation"
            f" (torchtitan builds {module}'s config {config} in a child); at most "
        )
        + r"\d+"
        + re.escape(" s more (ROCM_HWQ_AUTOSET_TIMEOUT)")
    )


def wait_for(test: Any, seconds: float) -> bool:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if test():
            return True
        time.sleep(0.05)
    return bool(test())

"""Shared by the benchmarks that launch the real torchtitan 0.3.0 (CPU torch
2.13.0, torchrun): light venvs over the torchtitan venv, a probe that stops a
training process before it trains, launches timed to their first line.

The torchtitan venv is never changed: each version of this package goes into a
light venv of its own (made from the torchtitan venv's Python, without pip)
whose one path line adds the torchtitan venv's site-packages after its own; its
``bin/torchrun`` is torch's console script with the light venv's Python.

The probe is a ``sitecustomize`` on ``PYTHONPATH``. In a process whose program
is ``torchtitan.train`` (``sys.orig_argv``, or on Python 3.9
``/proc/self/cmdline``) it prints one line, ``PROBE <RANK> <GPU_MAX_HW_QUEUES>``,
and exits: at once, or after ``import torch`` (``PROBE=torch``, the real
program's first import: a pending ``--module`` evaluation is waited for there),
or after starting a process (``PROBE=spawn``, the same wait, without torch's
import). In this package's evaluating child it appends the child's pid to
``$EVAL_LOG`` when torchtitan is first imported: one line per evaluation.
"""

from __future__ import annotations

import runpy
import subprocess
import sys
import time
import uuid
from pathlib import Path

from _venvs import ROOT, base_env, make_venv, purelib

#: What tools/torchtitan_venv.py holds for the tests and the benchmarks alike.
TOOLS = runpy.run_path(str(ROOT / "tools" / "torchtitan_venv.py"))
SITECUSTOMIZE = (
    r"""
import os, sys
_argv = list(getattr(sys, "orig_argv", []))
if not _argv:  # Python 3.9: the whole command line is the kernel's
    try:
        with open("/proc/self/cmdline", "rb") as _line:
            _argv = [os.fsdecode(w) for w in _line.read().split(b"\0")[:-1]]
    except OSError:
        pass
"""
    + TOOLS["PROBE"]
    + r"""
_log = _unrecorded("EVAL_LOG")
if any("rocm_hwq_autoset._evaluation.child" in a for a in _argv) and _log:
    def _evaluating(check):
        with open(_log, "a") as log:  # a background check marked as one
            log.write("%d%s\n" % (os.getpid(), " check" * check))
    _on_torchtitan_import(_evaluating)
elif (sys.argv[0] == "-m" and len(_argv) > len(sys.argv)
      and _argv[len(_argv) - len(sys.argv)] == "torchtitan.train"):
    _how = os.environ.get("PROBE", "")
    if _how == "torch":
        import torch
    elif _how == "spawn":
        import subprocess
        subprocess.run(["true"])
    os.write(1, ("PROBE %s %s\n" % (os.environ.get("RANK"),
                                    os.environ.get("GPU_MAX_HW_QUEUES"))).encode())
    import atexit
    atexit._run_exitfuncs()  # as a process that ends normally: the hook lets
    os._exit(0)  # an evaluation that answered store its answer first
"""
)
TORCHRUN = """#!{python}
import re
import sys
from torch.distributed.run import main
if __name__ == '__main__':
    sys.argv[0] = re.sub(r'(-script\\.pyw|\\.exe)?$', '', sys.argv[0])
    sys.exit(main())
"""
#: The launch of issue #17: DeepSeek-V3 16B, Q = 8.
TRAINING = ["--module", "graph_trainer.deepseek_v3", "--config",
            "graph_trainer_deepseek_v3_16b"]  # fmt: skip
#: A token in every process a benchmark starts, to find what a launch left.
TOKEN = "ROCM_HWQ_BENCH_TOKEN"


def torchtitan_python(given: str | None) -> str:
    """The torchtitan venv's Python: ``--torchtitan`` or ``$ROCM_HWQ_TORCHTITAN``."""
    if not given or not Path(given).exists():
        sys.exit(
            "name the python of a venv with torch==2.13.0 torchtitan==0.3.0 triton:"
            ' --torchtitan PYTHON or ROCM_HWQ_TORCHTITAN (eval "$(python'
            ' tools/torchtitan_venv.py)" makes one and names it)'
        )
    return given


def light_venv(where: Path, wheel: Path, torchtitan: str) -> str:
    """A venv with only ``wheel`` that sees the torchtitan venv's packages."""
    python = make_venv(where, wheel, base=torchtitan)
    Path(purelib(python), "zz_torchtitan_venv.pth").write_text(
        purelib(torchtitan) + "\n"
    )
    script = where / "bin" / "torchrun"
    script.write_text(TORCHRUN.format(python=python))
    script.chmod(0o755)
    return python


class World:
    """Where a benchmark's launches run: a working directory, the probe, one
    evaluation log per launch, and a token to find what was left running."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.work, site = TOOLS["probe_world"](root, SITECUSTOMIZE)
        self.logs = root / "logs"
        self.logs.mkdir()
        self.token = uuid.uuid4().hex
        self.env = base_env(PYTHONPATH=str(site), **{TOKEN: self.token})
        self.launches = 0

    def log(self) -> Path:
        """A new evaluation log."""
        self.launches += 1
        return self.logs / f"evaluations-{self.launches}"

    def popen(
        self, args: list[str], env: dict[str, str], log: Path
    ) -> subprocess.Popen[str]:
        with open(log.with_suffix(".err"), "a") as err:  # the process keeps its own
            return subprocess.Popen(
                args, cwd=self.work, env={**self.env, **env, "EVAL_LOG": str(log)},
                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=err,
                text=True, start_new_session=True,
            )  # fmt: skip

    def left_behind(self) -> list[int]:
        """Processes still running that carry this world's token."""
        return TOOLS["carrying"](f"{TOKEN}={self.token}")

    def end_all(self) -> None:
        """Kill what a failed launch left running (by pid, only ours)."""
        TOOLS["end_carrying"](f"{TOKEN}={self.token}")


class Launch:
    """One launch: its processes, when it started, what they printed."""

    def __init__(self, world: World, commands: list[list[str]],
                 envs: list[dict[str, str]]) -> None:  # fmt: skip
        self.log = world.log()
        self.started = time.perf_counter()
        self.procs = [world.popen(c, e, self.log) for c, e in zip(commands, envs)]

    def first_line(self, proc: int = 0) -> tuple[float, str]:
        """Seconds until a process's first probe line, and the value it saw."""
        out = self.procs[proc].stdout
        assert out is not None
        for line in out:
            if line.startswith("PROBE"):
                return time.perf_counter() - self.started, line.split()[2]
        raise RuntimeError(f"no probe line: {self.error()}")

    def finish(self) -> None:
        """Wait for every process; all must succeed."""
        for proc in self.procs:
            proc.communicate(timeout=600)
        if any(proc.returncode for proc in self.procs):
            codes = [proc.returncode for proc in self.procs]
            raise RuntimeError(f"exit {codes}: {self.error()}")

    def error(self) -> str:
        return self.log.with_suffix(".err").read_text()[-3000:]

    def evaluations(self) -> int:
        """Evaluations that got as far as importing torchtitan; not the cache's
        background checks (:meth:`checks`)."""
        return self._logged().count("")

    def checks(self) -> int:
        """Background checks of a cached answer that got as far."""
        return self._logged().count("check")

    def _logged(self) -> list[str]:
        lines = self.log.read_text().splitlines() if self.log.exists() else []
        return [line.partition(" ")[2] for line in lines]

    def cached(self) -> bool:
        """Whether the line said the value came from the cache."""
        return "from the cached" in self.log.with_suffix(".err").read_text()

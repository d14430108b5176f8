"""torchtitan's ``--module``/``--config`` form end to end, with a stand-in
torchtitan: real interpreters from a venv with the wheel installed; at start-up
the hook evaluates the config once per launch in a child interpreter, never in
the training process, and never again in the workers."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from rocm_hwq_autoset._argv import Launch as ArgvLaunch
from rocm_hwq_autoset._decision import CACHED
from rocm_hwq_autoset._evaluation import lines as lines_of_wait
from rocm_hwq_autoset._evaluation.child import CHECKED

from ..helpers import (
    CUDA_VERSION_PY,
    ROCM_VERSION_PY,
    UNSET_TAIL,
    Venv,
    fake_torch,
    said,
)
from ..standin import write_recipes, write_standin

#: One worker builds the venvs (a session fixture each worker would build again)
#: and runs every test that uses them.
pytestmark = [pytest.mark.e2e, pytest.mark.xdist_group("venvs")]

DS = ["--module", "graph_trainer.deepseek_v3", "--config",
      "graph_trainer_deepseek_v3_debugmodel"]  # fmt: skip
LLAMA = ["--module=graph_trainer.llama3", "--config=graph_trainer_llama3_debugmodel"]


def test_a_child_past_its_timeout_is_killed_and_reported(tmp_path: Path) -> None:
    """The parent side on its own: a config that takes 30 s to build, a 0.5 s
    timeout; the child's group is killed and the reason is one line."""
    from rocm_hwq_autoset._argv import Launch
    from rocm_hwq_autoset._evaluation import parent

    package = str(Path(parent.__file__).parents[1])
    path = os.pathsep.join([str(write_standin(tmp_path / "standin")), package])
    environ = {"PATH": os.environ["PATH"], "PYTHONPATH": path,
               "STANDIN_SLEEP": "30", "ROCM_HWQ_AUTOSET_TIMEOUT": "0.5"}  # fmt: skip
    start = time.perf_counter()
    evaluation = parent.Evaluation(Launch("--module", LLAMA, False), environ, None)
    answer = evaluation.answer()
    assert {"0.5", "(ROCM_HWQ_AUTOSET_TIMEOUT)"} <= set(str(answer.failure).split())
    assert time.perf_counter() - start < 5
    assert evaluation.child.process.returncode == -9  # SIGKILL, to its whole group


# End to end: real interpreters from a venv with the wheel installed.

#: A stand-in for torchrun, named ``torchrun``: it starts 2 workers as torch
#: elastic does (``Popen(env=<a copy of os.environ plus rank variables>)``).
LAUNCHER = """\
import json, os, subprocess, sys
me = {"queues_at_start": os.environ.get("GPU_MAX_HW_QUEUES"),
      "modules": sorted(m for m in sys.modules
                        if m.split(".")[0] in ("torch", "torchtitan"))}
i = sys.argv.index("-m")
workers = []
for rank in range(2):
    env = dict(os.environ, WORLD_SIZE="2", RANK=str(rank), LOCAL_RANK=str(rank))
    workers.append(subprocess.Popen([sys.executable, "-u", *sys.argv[i:]], env=env,
                                    stdout=subprocess.PIPE, text=True))
me["workers"] = [json.loads(w.communicate()[0]) for w in workers]
me["queues"] = os.environ.get("GPU_MAX_HW_QUEUES")
me["origin"] = os.environ.get("ROCM_HWQ_AUTOSET_ORIGIN")
print(json.dumps(me))
"""


class Launch:
    def __init__(self, root: Path, venv: Venv) -> None:
        self.venv = venv
        self.work = write_recipes(root / "work")
        self.log = root / "standin.log"
        self.rocm = fake_torch(root / "rocm", ROCM_VERSION_PY)
        self.cuda = fake_torch(root / "cuda", CUDA_VERSION_PY)
        self.standin = write_standin(root / "standin")
        (self.work / "torchrun").write_text(LAUNCHER)
        self.cache = root / "cache"

    def run(self, args: list[str], *, torch: Path | None = None,
            env: dict[str, str] | None = None, cpus: set[int] | None = None,
            prefix: tuple[str, ...] = ()) -> tuple[Any, str, float]:  # fmt: skip
        """``python ARGS`` in a session of its own, as a job starts (on the
        ``cpus`` given only, for it and all it starts; through ``prefix``, a
        command that runs the rest)."""
        path = os.pathsep.join(str(p) for p in (torch or self.rocm, self.standin))
        full_env = {"PATH": os.environ["PATH"], "PYTHONPATH": path,
                    "STANDIN_LOG": str(self.log),
                    "ROCM_HWQ_AUTOSET_CACHE_DIR": str(self.cache),
                    **(env or {})}  # fmt: skip
        pin = None if cpus is None else (lambda: os.sched_setaffinity(0, cpus))
        start = time.perf_counter()
        proc = subprocess.run([*prefix, self.venv.python, *args], cwd=self.work,
                              env=full_env,
                              capture_output=True, text=True, timeout=120,
                              start_new_session=True, preexec_fn=pin)  # fmt: skip
        elapsed = time.perf_counter() - start
        assert proc.returncode == 0, proc.stderr
        assert "Traceback" not in proc.stderr
        return json.loads(proc.stdout), proc.stderr, elapsed

    def calls(self) -> list[list[Any]]:
        if not self.log.exists():
            return []
        return [json.loads(line) for line in self.log.read_text().splitlines()]

    def survivors(self) -> list[int]:
        """Processes of this test's launches still running."""
        mark = f"STANDIN_LOG={self.log}".encode()
        found = []
        for entry in Path("/proc").iterdir():
            try:
                if entry.name.isdigit() and mark in (entry / "environ").read_bytes():
                    found.append(int(entry.name))
            except OSError:
                continue
        return found

    def evaluations(self) -> list[list[Any]]:
        return [c for c in self.calls() if c[0] == "parse_args"]


@pytest.fixture
def launch(tmp_path: Path, venvs: Callable[..., Venv]) -> Launch:
    return Launch(tmp_path, venvs("3.12"))


EP2 = [*DS, "--parallelism.expert_parallel_degree", "2"]
LINE = ("rocm-hwq-autoset: GPU_MAX_HW_QUEUES=8 (5 GPU streams: compute, all_reduce,"
        " fsdp_comm, expert_comm, cudagraph_capture)\n")  # fmt: skip


@pytest.mark.e2e
def test_torchrun_like_launch(launch: Launch) -> None:
    seen, err, _ = launch.run(["torchrun", "--nproc_per_node=2", "-m",
                               "torchtitan.train", *EP2])  # fmt: skip
    # Started at interpreter start, waited for before the first worker starts.
    assert seen["queues_at_start"] is None
    assert seen["queues"] == "8" and seen["origin"] == "8 --module"
    assert seen["modules"] == []  # neither torch nor torchtitan in the launcher
    assert [w["queues"] for w in seen["workers"]] == ["8", "8"]
    assert not any(w["torch"] for w in seen["workers"])
    evaluations = launch.evaluations()
    assert len(evaluations) == 1  # once per launch, none in the workers
    worker_pids = {w["pid"] for w in seen["workers"]}
    assert evaluations[0][1] not in worker_pids
    assert evaluations[0][2] == EP2
    assert evaluations[0][4] == "0"  # no hook in the child
    assert err == LINE


@pytest.mark.e2e
def test_a_failed_evaluation_is_not_repeated_by_the_workers(launch: Launch) -> None:
    args = ["torchrun", "--nproc_per_node=2", "-m", "torchtitan.train", *DS[:3]]
    seen, err, _ = launch.run([*args, "no_such_config"])
    assert len(launch.evaluations()) == 1
    assert seen["origin"] == "unset --module"
    assert [w["queues"] for w in seen["workers"]] == [None, None]
    assert [w["origin"] for w in seen["workers"]] == ["unset --module"] * 2
    assert err.startswith("rocm-hwq-autoset: warning: --module/--config: ")
    assert "no_such_config" in err and err.count("\n") == 1


@pytest.mark.e2e
def test_the_child_sees_the_trainings_gpus(launch: Launch) -> None:
    seen, _, _ = launch.run(["-m", "torchtitan.train", *EP2],
                            env={"HIP_VISIBLE_DEVICES": "0,1"})  # fmt: skip
    assert seen["queues"] == "8"
    [evaluation] = launch.evaluations()
    assert evaluation[3] == "0,1"


@pytest.mark.e2e
def test_a_process_that_starts_nothing_ends_the_child_at_exit(launch: Launch) -> None:
    start = time.perf_counter()
    seen, err, _ = launch.run(["-m", "torchtitan.noop", *EP2],
                              env={"STANDIN_SLEEP": "30"})  # fmt: skip
    assert seen is None and err == "" and time.perf_counter() - start < 10
    assert launch.survivors() == []  # the child ended with it


@pytest.mark.e2e
def test_single_process_launch(launch: Launch) -> None:
    seen, err, _ = launch.run(["-m", "torchtitan.train", *EP2])
    assert seen["queues"] == "8" and seen["origin"] == "8 --module"
    [evaluation] = launch.evaluations()
    assert (
        evaluation[1] != seen["pid"]
    )  # a child evaluated it, not the training process
    assert err == LINE


@pytest.mark.e2e
@pytest.mark.parametrize("cache", ["on", "off"])
def test_ranks_without_a_launcher(launch: Launch, cache: str) -> None:
    """srun or mpirun starting every rank as ``python -m torchtitan.train``: the
    ranks share no parent. With the cache a later rank uses the first one's
    evaluation; without it each evaluates its own. Only ``LOCAL_RANK`` 0 says
    so."""
    errs = []
    for rank in ("0", "1"):
        env = {"RANK": rank, "LOCAL_RANK": rank, "WORLD_SIZE": "2",
               "ROCM_HWQ_AUTOSET_CACHE": "1" if cache == "on" else "0"}  # fmt: skip
        seen, err, _ = launch.run(["-m", "torchtitan.train", *EP2], env=env)
        assert seen["queues"] == "8" and seen["origin"] == "8 --module"
        errs.append(err)
    assert len(launch.evaluations()) == (1 if cache == "on" else 2)
    assert errs == [LINE, ""]


@pytest.mark.e2e
def test_recipe_outside_torchtitan_from_the_working_directory(launch: Launch) -> None:
    seen, _, _ = launch.run(["-m", "torchtitan.train", "--module", "my_recipes",
                             "--config", "dense_tp2"])  # fmt: skip
    assert seen["queues"] == "8"  # 5 lanes: + tp_all_gather


BURN = ["-m", "torchtitan.burn", "--module", "my_recipes", "--config", "dense_tp2"]
#: The most of a CPU a check may take from a training beside it: HIP's queues
#: are not worth a training's compute. Its autogroup at nice 19 weighs 15
#: against a nice-0 group's 1024 (1.4 %); SCHED_IDLE inside its own session
#: alone weighed as much as the training's (50 %).
MOST_CHECK_SHARE = 0.03


@pytest.mark.e2e
@pytest.mark.serial  # a CPU share: beside no other test
@pytest.mark.timeout(120)
def test_a_check_takes_no_cpu_a_training_beside_it_wants(launch: Launch) -> None:
    """A relaunch takes the cached answer, and its check evaluates a config
    that computes for seconds, on the one CPU the training, pinned there,
    computes on: the check gets at most 3 % of that CPU, in a session of its
    own with the kernel's autogroup on (this machine's default, and most
    distributions'), where nice and the idle class alone rank a task only
    within its session (issue #28: it took half)."""
    launch.run(BURN, env={"STANDIN_TRAIN": "0"})  # the first: evaluates, stores
    seen, err, _ = launch.run(BURN, env={"STANDIN_BURN": "60", "STANDIN_TRAIN": "3"},
                              cpus={0})  # fmt: skip
    assert err.endswith(CACHED + "\n"), (err, seen)
    assert seen["started"] >= 1 and seen["cpu"] > 1  # the check, computing
    share = seen["others"] / (seen["cpu"] + seen["others"])
    print(seen, share)
    assert share <= MOST_CHECK_SHARE, seen


#: A launcher that restarts its one worker (as ``torchrun --max-restarts``
#: does after a failure) until the value it gets changes, for 60 s at most.
RESTARTING = """\
import json, os, subprocess, sys, time
i = sys.argv.index("-m")
seen = []
end = time.monotonic() + 60
while time.monotonic() < end:
    env = dict(os.environ, RANK="0", LOCAL_RANK="0")
    out = subprocess.run([sys.executable, "-u", *sys.argv[i:]], env=env,
                         stdout=subprocess.PIPE, text=True).stdout
    seen.append(json.loads(out)["queues"])
    if seen[-1] != seen[0] or os.environ.get("ONCE"):
        break
    time.sleep(0.1)
print(json.dumps(seen))
"""
#: A recipe whose degree comes from a file only tested for: no record sees it.
EXISTS = """\
import os
from torchtitan.experiments.graph_trainer import trainer_config
def flag():
    tp = 2 if os.path.exists("tp2.flag") else 1
    return trainer_config("m", "f", moe=False, tensor_parallel_degree=tp)
"""


@pytest.mark.e2e
@pytest.mark.timeout(120)
def test_a_checks_verdict_reaches_the_launchers_restarted_workers(
    launch: Launch,
) -> None:
    """The cached answer goes stale where no record sees it; the relaunch
    takes it (Q 4) and its check finds it stale: the worker the launcher
    restarts after that gets the corrected Q (8). Was: every restart got the
    stale value, and only the next launch was right (issue #28)."""
    recipes = launch.work / "exists_recipes"
    recipes.mkdir()
    (recipes / "__init__.py").write_text("")
    (recipes / "config_registry.py").write_text(EXISTS)
    (launch.work / "restart").mkdir()
    (launch.work / "restart" / "torchrun").write_text(RESTARTING)
    args = ["restart/torchrun", "-m", "torchtitan.train", "--module",
            "exists_recipes", "--config", "flag"]  # fmt: skip
    first, _, _ = launch.run(args, env={"ONCE": "1"})
    assert first == ["4"] * len(first)  # evaluated, stored (Q 4)
    (launch.work / "tp2.flag").write_text("")
    seen, err, _ = launch.run(args)
    assert seen[0] == "4" and seen[-1] == "8", seen
    assert f"warning: {CHECKED} was stale:" in err


@pytest.mark.e2e
@pytest.mark.timeout(300)
def test_the_bound_holds_across_host_names_and_local_ranks(launch: Launch) -> None:
    """Issue #36: pods that get a new host name at each start, one process
    each with ``LOCAL_RANK=1`` (one pod per GPU), short launches that end
    before any check: the entry went stale where no record sees it, and 5 of
    5 launches took its Q=4 (the truth 8), nothing said. The count was kept
    per host name, and only local rank "0" counted. Now a machine (its boot
    id) takes an entry at most twice before it evaluates it again."""
    if subprocess.run(["unshare", "-u", "true"], capture_output=True).returncode:
        pytest.skip("unshare -u: no UTS namespace here")
    recipes = launch.work / "exists_recipes"
    recipes.mkdir()
    (recipes / "__init__.py").write_text("")
    (recipes / "config_registry.py").write_text(EXISTS)
    args = ["-m", "torchtitan.train", "--module", "exists_recipes", "--config",
            "flag"]  # fmt: skip
    first, _, _ = launch.run(args)
    assert first["queues"] == "4"  # evaluated, stored
    assert list(launch.cache.glob("*.json")), "not stored (a busy machine?)"
    (launch.work / "tp2.flag").write_text("")  # the truth is 8 now, unseen

    def pod(n: int, cache: str = "1") -> str:
        seen, _, _ = launch.run(
            args, env={"LOCAL_RANK": "1", "ROCM_HWQ_AUTOSET_CACHE": cache},
            prefix=("unshare", "-u", "sh", "-c", 'hostname "$0" && "$@"',
                    f"pod-{n}"),  # a pod: its own init starts the training
        )  # fmt: skip
        return str(seen["queues"])

    truth = [pod(n, cache="0") for n in range(5)]
    assert truth == ["8"] * 5
    assert [pod(n) for n in range(5)] == ["4", "4", "8", "8", "8"]
    # Two ranks of one step at once, then that step again (a restart), against
    # the same launches without the cache: this machine took the entry twice
    # since it evaluated it, so they evaluate (one, the other takes its
    # answer), and the restart takes what they stored.
    (launch.work / "tp2.flag").unlink()  # the truth is 4 again, unseen

    def ranks(cache: str) -> list[str]:
        step = {"SLURM_JOB_ID": "9", "SLURM_STEP_ID": cache,
                "ROCM_HWQ_AUTOSET_CACHE": cache}  # fmt: skip
        with ThreadPoolExecutor(2) as pool:
            seen = pool.map(lambda r: launch.run(args, env={**step, "LOCAL_RANK": r}),
                            ["0", "1"])  # fmt: skip
            found = [str(s["queues"]) for s, _, _ in seen]
        again, _, _ = launch.run(args, env={**step, "LOCAL_RANK": "0"})
        return [*found, str(again["queues"])]

    assert ranks("0") == ["4"] * 3
    assert ranks("1") == ["4"] * 3


@pytest.mark.e2e
def test_timeout(launch: Launch) -> None:
    seen, err, elapsed = launch.run(
        ["-m", "torchtitan.train", *EP2],
        env={"STANDIN_SLEEP": "30", "ROCM_HWQ_AUTOSET_TIMEOUT": "1"},
    )
    assert seen["queues"] is None
    assert elapsed < 10
    level, message = said(err)  # the form, the timeout and its variable named
    assert level == "warning" and message.split()[0] == "--module/--config:"
    assert {"1", "(ROCM_HWQ_AUTOSET_TIMEOUT);"} <= set(message.split())
    assert message.endswith(f"; {UNSET_TAIL}")


@pytest.mark.e2e
def test_a_long_wait_and_a_ctrl_c_during_it_are_one_line_each(launch: Launch) -> None:
    """Issue #30: past 2 s the launch says what it waits for; Ctrl-C then
    says what it interrupted, and the process ends as Python ends on an
    uncaught KeyboardInterrupt (by SIGINT), its child with it."""
    path = os.pathsep.join(str(p) for p in (launch.rocm, launch.standin))
    env = {"PATH": os.environ["PATH"], "PYTHONPATH": path,
           "STANDIN_LOG": str(launch.log), "STANDIN_SLEEP": "60",
           "ROCM_HWQ_AUTOSET_CACHE_DIR": str(launch.cache)}  # fmt: skip
    proc = subprocess.Popen(
        [launch.venv.python, "-m", "torchtitan.train", *EP2], cwd=launch.work,
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        preexec_fn=interruptible,
    )  # fmt: skip
    assert proc.stderr is not None
    first = proc.stderr.readline()  # after 2 s of waiting
    waiting = lines_of_wait.waiting(ArgvLaunch("--module", EP2, True), 0).line({}) or ""
    assert first.split("; ")[0] == waiting.split("; ")[0], first  # the time left
    # How the process takes SIGINT as it is sent: should it go on as if none
    # had come (seen in CI before ``interruptible``), these say why.
    status = signal_state(proc.pid)
    sent = time.monotonic()
    proc.send_signal(signal.SIGINT)
    out, rest = proc.communicate(timeout=90)  # a busy machine: bounds, not speeds
    took = time.monotonic() - sent
    assert proc.returncode == -signal.SIGINT, (rest, f"{took:.1f} s", status)
    lines = rest.splitlines()
    waited = float(said(lines[0] + "\n")[1].split()[2])
    cut = lines_of_wait.interrupted(KeyboardInterrupt(), waited).line({})
    assert lines[0] + "\n" == cut, rest
    assert lines[-1] == "KeyboardInterrupt"  # Python's own, as without the hook
    # Its traceback ends where the program was (import torch), not in our wait.
    assert "select" not in rest and "import torch" in rest, rest
    assert "rocm_hwq_autoset" not in rest.replace(lines[0], ""), rest  # issue #37
    assert out == ""
    deadline = time.monotonic() + 30
    while launch.survivors() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert launch.survivors() == []


#: A torchtitan program (a script in a ``torchtitan`` folder) that catches
#: Ctrl-C during its ``import torch`` and prints the traceback itself, then
#: its frames as JSON on stdout.
CATCHER = """
import json, sys, traceback

def main():
    try:
        import torch
    except KeyboardInterrupt:
        traceback.print_exc()
        frames = traceback.extract_tb(sys.exc_info()[2])
        print(json.dumps([[f.filename, f.lineno, f.name] for f in frames]))
        sys.exit(3)

main()
"""
#: A torch whose import blocks, where the hook is off: Ctrl-C comes during it.
SLOW_TORCH = """
import sys, time
sys.stderr.write("importing torch\\n")
sys.stderr.flush()
time.sleep(60)
"""


@pytest.mark.e2e
def test_ctrl_c_caught_by_the_program_shows_its_frames_as_without_the_hook(
    launch: Launch,
) -> None:
    """Issue #37: a program that catches the KeyboardInterrupt of a Ctrl-C
    during its ``import torch`` and prints it (``traceback.print_exc()``)
    showed the package's frames (``_evaluation/parent.py``'s audit and wait)
    where the hook made it wait. On and off (``ROCM_HWQ_AUTOSET=0``, its
    ``import torch`` then blocking), the same program's frames, none of the
    package's; on, the traceback ends in the program's own import."""
    program = launch.work / "torchtitan" / "catcher.py"
    program.parent.mkdir(exist_ok=True)
    program.write_text(CATCHER)
    slow = launch.work / "slow"
    (slow / "torch").mkdir(parents=True)
    (slow / "torch" / "__init__.py").write_text(SLOW_TORCH)
    runs = {}
    for hook, torch, ready in (
        ("1", launch.rocm, "rocm-hwq-autoset: waiting for"),
        ("0", slow, "importing torch"),
    ):
        path = os.pathsep.join(str(p) for p in (torch, launch.standin))
        env = {"PATH": os.environ["PATH"], "PYTHONPATH": path,
               "STANDIN_LOG": str(launch.log), "STANDIN_SLEEP": "60",
               "ROCM_HWQ_AUTOSET": hook,
               "ROCM_HWQ_AUTOSET_CACHE_DIR": str(launch.cache)}  # fmt: skip
        proc = subprocess.Popen(
            [launch.venv.python, str(program), *EP2], cwd=launch.work, env=env,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            preexec_fn=interruptible,
        )  # fmt: skip
        assert proc.stderr is not None
        first = proc.stderr.readline()  # the wait's note, or the slow import's
        assert first.startswith(ready), first
        proc.send_signal(signal.SIGINT)
        out, rest = proc.communicate(timeout=90)  # a busy machine: a bound
        assert proc.returncode == 3, rest
        assert "rocm_hwq_autoset" not in rest.partition("Traceback")[2], rest
        runs[hook] = [tuple(frame) for frame in json.loads(out)]
    assert [f for f in runs["1"] if f[0] == str(program)] == [
        f for f in runs["0"] if f[0] == str(program)
    ]
    assert [f[2] for f in runs["1"]] == ["main"]  # ends in the program's import
    assert all("rocm_hwq_autoset" not in f[0] for f in runs["1"] + runs["0"])


@pytest.mark.e2e
def test_failure_is_one_warning(launch: Launch) -> None:
    seen, err, _ = launch.run(["-m", "torchtitan.train", *LLAMA[:1],
                               "--config=no_such_config"])  # fmt: skip
    assert seen["queues"] is None and seen["origin"] == "unset --module"
    assert err.startswith("rocm-hwq-autoset: warning: --module/--config: ")
    assert "no_such_config" in err and err.count("\n") == 1


@pytest.mark.e2e
@pytest.mark.parametrize(
    ("case", "args", "env"),
    [
        ("not torchtitan", ["prog.py", *EP2], {}),
        ("CUDA torch", ["-m", "torchtitan.train", *EP2], {"TORCH": "cuda"}),
        ("explicit value", ["-m", "torchtitan.train", *EP2],
         {"GPU_MAX_HW_QUEUES": "2"}),
        ("opted out", ["-m", "torchtitan.train", *EP2], {"ROCM_HWQ_AUTOSET": "0"}),
        ("inherited", ["-m", "torchtitan.train", *EP2],
         {"GPU_MAX_HW_QUEUES": "4", "ROCM_HWQ_AUTOSET_ORIGIN": "4 --module"}),
    ],
)  # fmt: skip
def test_no_evaluation(
    launch: Launch, case: str, args: list[str], env: dict[str, str]
) -> None:
    (launch.work / "prog.py").write_text(
        "import json, os\n"
        "print(json.dumps({'queues': os.environ.get('GPU_MAX_HW_QUEUES')}))"
    )
    torch = launch.cuda if env.pop("TORCH", None) else None
    seen, err, _ = launch.run(args, torch=torch, env=env)
    assert launch.evaluations() == []
    assert seen["queues"] == env.get("GPU_MAX_HW_QUEUES")
    assert err == ""


def signal_state(pid: int) -> str:
    """A process's signal masks (``/proc/PID/status``: blocked, ignored,
    caught), and its threads: how a signal sent to it will be taken."""
    try:
        lines = Path(f"/proc/{pid}/status").read_text().splitlines()
    except OSError as exc:
        return str(exc)
    keys = ("Threads", "SigPnd", "ShdPnd", "SigBlk", "SigIgn", "SigCgt")
    return ", ".join(line for line in lines if line.split(":")[0] in keys)


def interruptible() -> None:
    """In the child before it runs the launch: SIGINT and SIGQUIT taken as a
    shell's job takes them (their default). A pytest worker may start it while
    another of its threads runs ``system()``, which ignores both in the whole
    process for its duration: the child then inherits them ignored, and Python
    installs no Ctrl-C handler (seen in CI: ``SigIgn`` 0x1001006, SIGINT and
    SIGQUIT ignored beside the SIGPIPE and SIGXFSZ Python ignores itself; the
    launch went on as if no SIGINT had come). Which thread ignored them was
    not found; the mask is what ``system()`` leaves."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.signal(signal.SIGQUIT, signal.SIG_DFL)

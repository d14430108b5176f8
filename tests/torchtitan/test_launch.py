"""Launches with the real torchrun and torchtitan 0.3.0: one evaluation per
node, workers that get the value and the model's inputs, signals and deaths
that pass through, every launch form and its decoys (issues #15 and #16).

The cache is off here (each launch evaluates, as without it); tests/torchtitan/
test_cache.py holds the cache against the real evaluation."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from rocm_hwq_autoset._decision import CACHED
from rocm_hwq_autoset._evaluation.child import CHECKED

from ..helpers import UNSET_TAIL, set_line
from ..helpers import said as parsed
from ..unit.test_argv import TORCHRUN_LINES
from .conftest import OUTLAST, FirstLaunch, Launches, ours, probes, wait_for

pytestmark = pytest.mark.e2e

DS16 = ["--module", "graph_trainer.deepseek_v3", "--config",
        "graph_trainer_deepseek_v3_16b"]  # fmt: skip
ACCEPTED = [*DS16, "--parallelism.expert_parallel_degree", "2",
            "--compile.enable_fsdp_ag_rs_overlap"]  # fmt: skip
REJECTED = ["--module", "graph_trainer.deepseek_v3", "--config",
            "graph_trainer_deepseek_v3_debugmodel",
            "--parallelism.expert_parallel_degree", "2"]  # fmt: skip
#: A dense recipe with TP=2: the launcher counts FSDP (world size unknown), its
#: two workers do not (2 ranks // TP 2 = 1).
DENSE_TP2 = ["--module", "graph_trainer.llama3", "--config",
             "graph_trainer_llama3_debugmodel", "--parallelism.tensor_parallel_degree",
             "2"]  # fmt: skip
DENSE_TP2_TOML = """
[model]
name = "llama3"
[parallelism]
tensor_parallel_degree = 2
[compile]
enable_passes = true
"""
#: A recipe whose config function takes 20 s: the launcher is waiting for it.
SLOW = """
import time
from torchtitan.experiments.graph_trainer.deepseek_v3.config_registry import (
    graph_trainer_deepseek_v3_16b,
)

def slow():
    time.sleep(20)
    return graph_trainer_deepseek_v3_16b()
"""


@pytest.fixture
def no_cache(launches: Launches) -> Launches:
    launches.env["ROCM_HWQ_AUTOSET_CACHE"] = "0"
    return launches


def one_node(launches: Launches, *training: str, nproc: int = 2) -> list[str]:
    return launches.torchrun("--standalone", "--nproc_per_node", str(nproc), "-m",
                             "torchtitan.train", *training)  # fmt: skip


@pytest.mark.parametrize(("training", "queues"), [(ACCEPTED, "8"), (REJECTED, None)])
def test_one_node_two_workers_one_evaluation(
    no_cache: Launches, training: list[str], queues: str | None
) -> None:
    code, out, err = no_cache.run(one_node(no_cache, *training))
    assert code == 0, err[-2000:]
    seen = probes(out)
    assert sorted(p["rank"] for p in seen) == ["0", "1"]
    assert [p["queues"] for p in seen] == [queues, queues]
    assert no_cache.evaluations() == 1  # one for the node
    lines = ours(err, waited=training)
    assert len(lines) == 1 and "Traceback" not in err
    if queues is None:
        assert lines[0].startswith("rocm-hwq-autoset: warning: --module/--config: ")
        assert lines[0].endswith(f"; {UNSET_TAIL}")
        assert [p["origin"] for p in seen] == ["unset --module"] * 2


@pytest.mark.parametrize("form", ["module", "toml"])
def test_workers_apply_the_model_with_their_world_size_as_explain_says(
    no_cache: Launches, form: str
) -> None:
    """Both forms: the launcher counts FSDP (world size unknown), its 2 workers
    resolve data_parallel_shard_degree = -1 to 1 and do not; explain
    --world-size 2 says what such a worker gets, its hook line included."""
    if form == "toml":
        (no_cache.work / "job.toml").write_text(DENSE_TP2_TOML)
        training = ["--job.config_file", "job.toml"]
    else:
        training = DENSE_TP2
    code, out, err = no_cache.run(one_node(no_cache, *training))
    assert code == 0, err[-2000:]
    workers = probes(out)
    assert [w["queues"] for w in workers] == ["4", "4"]
    said = ours(err, waited=training if form == "module" else None)
    assert said[0].startswith("rocm-hwq-autoset: GPU_MAX_HW_QUEUES=8 ")
    if form == "module":
        assert no_cache.evaluations() == 1  # the workers evaluated nothing
        assert workers[0]["inputs"] and workers[0]["origin"] == "4 --module"
    for world, q in ((None, 8), (2, 4)):
        size = [] if world is None else ["--world-size", str(world)]
        explain = [no_cache.python, "-m", "rocm_hwq_autoset", "explain", "--json"]
        code, out, err = no_cache.run([*explain, *size, *training])
        assert code == 0, err
        doc = json.loads(out)
        assert doc["queues"] == q
        assert doc["environment"]["hook"] == f"would set GPU_MAX_HW_QUEUES={q}"


def test_ranks_without_a_launcher_resolve_their_world_size(no_cache: Launches) -> None:
    """srun or mpirun start each rank: its evaluation's result meets the model
    with its own WORLD_SIZE, and it gets the value torchrun's workers get."""
    code, out, err = no_cache.run(no_cache.train(*DENSE_TP2), WORLD_SIZE="2",
                                  RANK="0", LOCAL_RANK="0")  # fmt: skip
    assert code == 0, err[-2000:]
    [seen] = probes(out)
    assert seen["queues"] == "4"


def test_two_nodes_on_localhost(no_cache: Launches) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    runs = []
    for node in (0, 1):
        args = no_cache.torchrun(
            "--nnodes", "2", "--nproc_per_node", "1", "--node_rank", str(node),
            "--rdzv_backend", "c10d", "--rdzv_endpoint", f"127.0.0.1:{port}",
            "--rdzv_id", "hwq", "-m", "torchtitan.train", *ACCEPTED,
        )  # fmt: skip
        runs.append(no_cache.popen(args))
        time.sleep(1)
    for run in runs:
        out, err = run.communicate(timeout=300)
        assert run.returncode == 0, err[-2000:]
        [seen] = probes(out)
        assert seen["queues"] == "8" and seen["origin"] == "8 --module"
    assert no_cache.evaluations() == 2  # one per node


@pytest.mark.parametrize("how", ["SIGTERM", "SIGINT to the group"])
def test_a_signal_while_waiting_stops_the_launch(no_cache: Launches, how: str) -> None:
    """torchrun waits for the 20 s evaluation before its first worker; a SIGTERM
    (or Ctrl-C) then stops it as without the hook: non-zero within 2 s, no
    worker started, nothing of the launch left 2 s later."""
    (no_cache.work / "slow_recipes").mkdir()
    (no_cache.work / "slow_recipes" / "config_registry.py").write_text(SLOW)
    launcher = no_cache.popen(one_node(no_cache, "--module", "slow_recipes",
                                       "--config", "slow"))  # fmt: skip
    assert wait_for(lambda: no_cache.evaluations() == 1, 60)
    # torchrun begins to start its first worker: the wait for the value begins.
    assert wait_for(lambda: no_cache.worker_starts() == 1, 60)
    time.sleep(1)
    assert no_cache.evaluations() == 1 and launcher.poll() is None  # still waiting
    signalled = time.monotonic()
    if how == "SIGTERM":
        launcher.send_signal(signal.SIGTERM)
    else:
        os.killpg(launcher.pid, signal.SIGINT)
    out, err = launcher.communicate(timeout=30)
    # At once, not after the evaluation (about 13 s of CPU): 5 s on a machine
    # whose two cores have three tasks to run (2.05 s was seen there).
    assert time.monotonic() - signalled < 5
    assert launcher.returncode != 0, err[-2000:]
    assert probes(out) == []  # no worker started
    assert "internal error" not in err
    time.sleep(2)
    assert no_cache.left_behind() == []


def test_the_child_dies_with_a_killed_launcher(no_cache: Launches) -> None:
    (no_cache.work / "slow_recipes").mkdir()
    (no_cache.work / "slow_recipes" / "config_registry.py").write_text(SLOW)
    launcher = no_cache.popen(one_node(no_cache, "--module", "slow_recipes",
                                       "--config", "slow"))  # fmt: skip
    assert wait_for(lambda: no_cache.evaluations() == 1, 60)
    launcher.kill()
    launcher.communicate(timeout=30)
    assert wait_for(lambda: no_cache.left_behind() == [], 2)


@pytest.mark.parametrize("mode", ["upfront", "threads"])
def test_a_launcher_of_its_own_gives_every_worker_the_value(
    no_cache: Launches, mode: str
) -> None:
    """A launcher that made its workers' environments before the value arrived,
    or starts them from two threads at once: every worker gets Q and the
    marker; one evaluation."""
    code, out, err = no_cache.run(no_cache.train(*ACCEPTED), PROBE_LAUNCHER=mode)
    assert code == 0, err[-2000:]
    workers = probes(out)
    assert sorted(w["rank"] for w in workers) == ["0", "1"]
    assert [(w["queues"], w["origin"]) for w in workers] == [("8", "8 --module")] * 2
    assert no_cache.evaluations() == 1


def test_the_script_path_form(no_cache: Launches, torchtitan_dir: Path) -> None:
    script = str(torchtitan_dir / "train.py")
    code, out, err = no_cache.run(no_cache.torchrun(
        "--standalone", "--nproc_per_node", "2", script, *ACCEPTED))  # fmt: skip
    assert code == 0, err[-2000:]
    assert [p["queues"] for p in probes(out)] == ["8", "8"]
    assert no_cache.evaluations() == 1


def test_a_decoy_starts_nothing_and_sets_nothing(no_cache: Launches) -> None:
    prog = no_cache.work / "prog.py"
    prog.write_text(
        "import json, os, subprocess\n"
        "subprocess.run(['true'])\n"
        "print(json.dumps([os.environ.get('GPU_MAX_HW_QUEUES'),"
        " os.environ.get('ROCM_HWQ_AUTOSET_ORIGIN')]))\n"
    )
    code, out, err = no_cache.run([no_cache.python, str(prog), "--note",
                                   "torchtitan.x", *ACCEPTED])  # fmt: skip
    assert (code, json.loads(out), ours(err)) == (0, [None, None], [])
    assert no_cache.evaluations() == 0


def test_a_nonexistent_config_keeps_the_end_of_its_warning(no_cache: Launches) -> None:
    missing = ["--module", "graph_trainer.deepseek_v3", "--config", "nope"]
    _, _, err = no_cache.run(no_cache.train(*missing))
    [line] = ours(err, waited=missing)
    assert line.endswith(f"; {UNSET_TAIL}")
    assert "... (" in line and "in all)]" in line  # the list of configs shortened
    assert len(line) <= 400


def test_an_unknown_flag_is_named_by_torchtitans_own_parser(
    no_cache: Launches,
) -> None:
    """Issue #37: ``--parallelism.foo 2`` after ``--module M --config FN``.
    torchtitan's parser reads every flag in the child, and refuses this one:
    one warning naming it, the variable unset (torchtitan refuses the job)."""
    args = [*DS16, "--parallelism.foo", "2"]
    _, out, err = no_cache.run(no_cache.train(*args))
    [line] = ours(err, waited=args)
    assert line.startswith("rocm-hwq-autoset: warning:") and line.endswith("unset")
    assert "--parallelism.foo" in line
    assert [probe["queues"] for probe in probes(out)] == [None]


def test_torchruns_own_parser_agrees_on_the_program(python: str) -> None:
    """The launch lines of torchtitan's run_train.sh and the decoys, given to
    torch.distributed.run's own parser: it names the program this package
    finds in the same argv."""
    code = """
import contextlib, io, json, sys
from torch.distributed.run import get_args_parser
out = []
for args in json.loads(sys.argv[1]):
    try:
        with contextlib.redirect_stdout(io.StringIO()):  # --help prints there
            ns = get_args_parser().parse_args(args)
    except SystemExit:
        out.append(None)
        continue
    kind = "module" if ns.module else "executable" if ns.no_python else "script"
    out.append([kind, ns.training_script, ns.training_script_args])
print(json.dumps(out))
"""
    lines = [args for args, _ in TORCHRUN_LINES]
    done = subprocess.run([python, "-c", code, json.dumps(lines)], capture_output=True,
                          text=True, env={"PATH": os.environ["PATH"],
                                          "ROCM_HWQ_AUTOSET": "0"})  # fmt: skip
    parsed: list[Any] = json.loads(done.stdout)
    for (args, ours_), theirs in zip(TORCHRUN_LINES, parsed):
        assert (list(ours_) if ours_ else None) == (
            [theirs[0], theirs[1], theirs[2]] if theirs else None
        ), args


# The cache's background check (issue #23), with the real torchtitan.

#: A recipe whose context parallelism comes from a file it tests with
#: os.path.exists, which no recording sees: only the background check can tell.
EXISTS_RECIPE = """
import os
from torchtitan.experiments.graph_trainer.llama3.config_registry import (
    graph_trainer_llama3_debugmodel,
)

def mine():
    config = graph_trainer_llama3_debugmodel()
    if os.path.exists("cp2.flag"):
        config.parallelism.context_parallel_degree = 2
    if os.path.exists("slow.flag"):
        import time
        time.sleep(60)
    return config
"""
#: A torchtitan program (a script in a ``torchtitan`` folder) that imports
#: torch, reports its value, then, where it started with an entry there (a
#: hit: its check runs), lives until the entry changed (its check stored its
#: answer) and a second more, or 120 s: as a training run does. The entry is
#: looked at before torch is imported: the first launch's child may store its
#: answer while torch is imported, and no check ever changes that entry (was:
#: the first launch of a test waited 120 s for it, often). Where it started
#: without an entry, it lives until the evaluations it waited for ended (their
#: stores done: conftest's ``OUTLAST``), as a training run does.
WAITING = (
    OUTLAST
    + """
import glob, json, os, time
def stamp():
    where = os.environ["ROCM_HWQ_AUTOSET_CACHE_DIR"]
    return [os.stat(p).st_mtime_ns for p in glob.glob(where + "/*.json")]
first = stamp()
import torch
print("WAITED " + json.dumps(os.environ.get("GPU_MAX_HW_QUEUES")), flush=True)
deadline = time.monotonic() + 120
if first and not os.environ.get("NO_WAIT"):
    while stamp() == first and time.monotonic() < deadline:
        time.sleep(0.1)
    time.sleep(1)
elif not first:
    outlast(os.environ["EVAL_LOG"])
"""
)


@pytest.fixture(scope="module")
def exists(
    python: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[FirstLaunch]:
    """The recipe's world after its first launch (Q = 4, evaluated, stored),
    shared by the tests of the ``exists`` group (one worker runs them): each
    begins with that launch (``again``), one evaluation for them all."""
    launches = Launches(python, tmp_path_factory.mktemp("exists"))
    program = launches.root / "bin" / "torchtitan" / "wait.py"
    program.parent.mkdir(parents=True)
    program.write_text(WAITING)
    # Beside the script: ``python .../wait.py`` imports from the script's
    # folder first, not from the working directory (which holds the flags).
    recipes = program.parent / "exists_recipes"
    recipes.mkdir()
    (recipes / "config_registry.py").write_text(EXISTS_RECIPE)
    try:
        yield FirstLaunch(launches, waited(launches, wait_command(launches)))
    finally:
        launches.end_all()


def wait_command(launches: Launches) -> list[str]:
    """The launch of ``exists``'s world: its program, with the recipe."""
    program = launches.root / "bin" / "torchtitan" / "wait.py"
    return [launches.python, str(program), "--module", "exists_recipes",
            "--config", "mine"]  # fmt: skip


def waited(launches: Launches, command: list[str], **env: str) -> tuple[str, list[str]]:
    code, out, err = launches.run(command, **env)
    assert code == 0 and "Traceback" not in err, err[-2000:]
    [line] = [line for line in out.splitlines() if line.startswith("WAITED ")]
    return json.loads(line[7:]), ours(err, waited=command)


@pytest.mark.xdist_group("exists")
@pytest.mark.serial  # the check runs at the idle priority: beside nothing
def test_a_stale_hit_is_said_in_the_same_launch_and_corrected(
    exists: FirstLaunch,
) -> None:
    """First launch Q = 4; a file the recipe only tests for appears; the
    relaunch hits, gets 4 at once, and its check says in that launch what a
    fresh evaluation gives; the next launch gets it. Nothing is left running."""
    launches = exists.again()
    command = wait_command(launches)
    four = ("compute", "all_reduce", "fsdp_comm", "cudagraph_capture")
    assert exists.result == ("4", [set_line(4, four).rstrip("\n")])
    (launches.work / "cp2.flag").write_text("")
    queues, said = waited(launches, command)
    assert queues == "4" and len(said) == 2, said
    assert said[0] == set_line(4, four, where=CACHED).rstrip("\n")
    level, message = parsed(said[1] + "\n")  # the check's: what was set, what is
    assert level == "warning" and message.startswith(f"{CHECKED} was stale: ")
    assert {"GPU_MAX_HW_QUEUES=4", "8"} <= set(message.split())
    assert "8" in message.split("; ")[-1].split()  # what the cache holds now
    queues, said = waited(launches, command)
    assert queues == "8" and len(said) == 1
    assert launches.left_behind() == []


@pytest.mark.xdist_group("exists")
@pytest.mark.parametrize("how", ["exits", "is killed"])
def test_the_check_never_outlives_its_launcher(exists: FirstLaunch, how: str) -> None:
    """A check that takes a minute: the launch that started it ends (or is
    killed) first, and the check's whole group goes with it; its entry stays."""
    launches = exists.again()  # its first launch done
    command = wait_command(launches)
    [entry] = Path(launches.env["ROCM_HWQ_AUTOSET_CACHE_DIR"]).glob("*.json")
    before = entry.read_bytes()
    (launches.work / "slow.flag").write_text("")
    if how == "exits":
        assert waited(launches, command, NO_WAIT="1")[0] == "4"
    else:
        process = launches.popen(command)
        assert wait_for(lambda: checking(launches), 120)
        time.sleep(1)  # it watches its launcher by now, or ends on its own
        process.kill()
        process.communicate(timeout=30)
    assert wait_for(lambda: launches.left_behind() == [], 3)
    assert entry.read_bytes() == before


def checking(launches: Launches) -> bool:
    """Whether a check of this test's launches runs."""
    for pid in launches.left_behind():
        with contextlib.suppress(OSError):
            if b"--check" in Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0"):
                return True
    return False

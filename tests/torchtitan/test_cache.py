"""The cache of ``--module`` evaluations against the real torchtitan 0.3.0
(issue #17): a relaunch whose inputs did not change starts no child; a change
of anything the evaluation read gives the new Q on the next launch; an entry
that cannot be trusted is ignored; ranks started together evaluate once."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from rocm_hwq_autoset._decision import CACHED

from ..helpers import set_line
from .conftest import FirstLaunch, Launches, ours, probes

#: Beside other tests under xdist: a store runs at the idle priority, and these
#: trainings last until their evaluations' stores are done (``PROBE_OUTLAST``),
#: as a real training does (one that ended at once would give its store 2 s,
#: STORE_SECONDS: beside another test computing, too little).
pytestmark = pytest.mark.e2e

MINE = ["--module", "my_recipes", "--config", "mine"]
#: How the hook's line for a cached answer ends.
HIT = ", from the cached --module/--config evaluation"
#: A user's recipe in the launch's working directory: a graph_trainer config
#: whose degrees come from a helper module, a variable and a small file.
RECIPE = """
import os
from my_helper import TP
from torchtitan.experiments.graph_trainer.llama3.config_registry import (
    graph_trainer_llama3_debugmodel,
)

def mine():
    config = graph_trainer_llama3_debugmodel()
    config.parallelism.tensor_parallel_degree = TP
    config.parallelism.context_parallel_degree = int(os.environ.get("MY_CP", "1"))
    with open("shard.txt") as f:
        config.parallelism.data_parallel_shard_degree = int(f.read())
    return config
"""


def with_recipe(launches: Launches) -> Launches:
    """The world of these tests: the user's recipe, its helper and its file in
    the working directory; trainings that outlast their evaluations."""
    recipes = launches.work / "my_recipes"
    recipes.mkdir()
    (recipes / "__init__.py").write_text("")
    (recipes / "config_registry.py").write_text(RECIPE)
    (launches.work / "my_helper.py").write_text("TP = 1\n")
    (launches.work / "shard.txt").write_text("-1\n")
    launches.env["PROBE_OUTLAST"] = "1"
    return launches


@pytest.fixture
def work(launches: Launches) -> Launches:
    return with_recipe(launches)


@pytest.fixture(scope="module")
def evaluated(
    python: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[FirstLaunch]:
    """The recipe's world after its first launch (Q = 4, evaluated, stored),
    in a folder of its own, shared by the tests of the ``evaluated`` group (one
    worker runs them, one after another)."""
    world = with_recipe(Launches(python, tmp_path_factory.mktemp("evaluated")))
    try:
        first = launch(world)
        assert world.evaluations() == 1
        yield FirstLaunch(world, first)
    finally:
        world.end_all()


def launch(work: Launches, **env: str) -> tuple[str | None, list[str]]:
    """One ``python -m torchtitan.train`` (a rank started without a launcher):
    the Q it got, and what the hook said."""
    code, out, err = work.run(work.train(*MINE), **env)
    assert code == 0, err[-2000:]
    [seen] = probes(out)
    node = env.get("LOCAL_RANK", "0") == "0"  # the one that speaks for the node
    return seen["queues"], ours(err, waited=MINE if node else None)


def newer(path: Path) -> None:
    """A change of ``path`` that keeps its size: a later modification time."""
    later = path.stat().st_mtime + 5
    os.utime(path, (later, later))


@pytest.mark.xdist_group("evaluated")
def test_each_dependency_class(evaluated: FirstLaunch) -> None:
    """Each change of what the evaluation read gives the new Q on the next
    launch; an unchanged relaunch, a new job id, another rank and a new log
    file beside it start no child."""
    work = evaluated.again()
    four = ("compute", "all_reduce", "fsdp_comm", "cudagraph_capture")
    assert evaluated.result == ("4", [set_line(4, four).rstrip("\n")])
    assert work.evaluations() == 1
    queues, said = launch(work)
    assert queues == "4" and work.evaluations() == 1
    assert said[0] == set_line(4, four, where=CACHED).rstrip("\n")
    (work.work / "slurm-78.out").write_text("a new job's log\n")
    assert launch(work, SLURM_JOB_ID="78", RANK="1", LOCAL_RANK="1") == ("4", [])
    assert work.evaluations() == 1
    changes = [
        ("a helper module it imports", lambda: (work.work / "my_helper.py")
         .write_text("TP = 2\n"), {}, "8"),
        ("a file it read", lambda: (work.work / "shard.txt").write_text("1\n"), {},
         "4"),
        ("a variable it read", lambda: None, {"MY_CP": "2"}, "8"),
        ("the user's module", lambda: (work.work / "my_recipes" / "config_registry.py")
         .write_text(RECIPE.replace("    return config", "    config.compile."
                     "enable_fsdp_ag_rs_overlap = True\n    return config")),
         {"MY_CP": "2"}, "4"),
    ]  # fmt: skip
    for count, (what, change, env, queues) in enumerate(changes, start=2):
        change()
        assert launch(work, **env)[0] == queues, what
        assert work.evaluations() == count, what
        assert launch(work, **env)[0] == queues, what  # and cached again
        assert work.evaluations() == count, what


@pytest.mark.xdist_group("evaluated")
@pytest.mark.serial  # it edits a file of the torchtitan venv every test imports
def test_torchtitans_own_files_count(
    evaluated: FirstLaunch, torchtitan_dir: Path
) -> None:
    """A file of torchtitan's own whose bytes changed evaluates again, naming
    it; one whose stamp alone changed (a reinstall of the same version, a
    checkout there and back) counts by its bytes: a hit. Was (before content
    digests): a touch evaluated again."""
    work = evaluated.again()  # its first launch: evaluated, stored
    manager = torchtitan_dir / "config" / "manager.py"
    before = manager.stat()
    source = manager.read_bytes()
    try:
        newer(manager)
        queues, said = launch(work)
        assert queues == "4" and work.evaluations() == 1
        assert said[0].endswith(HIT)
        manager.write_bytes(source + b"# a line more\n")
        queues, said = launch(work, ROCM_HWQ_AUTOSET_LOG="verbose")
        assert queues == "4" and work.evaluations() == 2
        assert f"cache: stale: {manager} changed; evaluating" in "\n".join(said)
    finally:
        manager.write_bytes(source)
        os.utime(manager, ns=(before.st_atime_ns, before.st_mtime_ns))


@pytest.mark.xdist_group("evaluated")
@pytest.mark.parametrize(
    "damage", ["writable by its group or others", "owned by another user", "corrupt"]
)
def test_an_entry_that_cannot_be_trusted_is_evaluated_again(
    evaluated: FirstLaunch, damage: str
) -> None:
    work = evaluated.again()  # its first launch: evaluated, stored
    [entry] = Path(work.env["ROCM_HWQ_AUTOSET_CACHE_DIR"]).glob("*.json")
    if damage == "writable by its group or others":
        entry.chmod(0o666)
    elif damage == "owned by another user":
        if os.getuid() != 0:
            pytest.skip("chown to another user needs root")
        os.chown(entry, 65534, 65534)
    else:
        entry.write_text(entry.read_text()[:100])
    queues, said = launch(work, ROCM_HWQ_AUTOSET_LOG="verbose")
    assert queues == "4" and work.evaluations() == 2
    assert any("cache: entry ignored" in line for line in said), said
    assert not said[-1].endswith(CACHED)


def test_ranks_started_together_evaluate_once(work: Launches) -> None:
    for round_ in (1, 2):
        ranks = [work.popen(work.train(*MINE), RANK=str(r), LOCAL_RANK=str(r),
                            WORLD_SIZE="4") for r in range(4)]  # fmt: skip
        outs = [rank.communicate(timeout=300) for rank in ranks]
        for rank, (out, err) in zip(ranks, outs):
            assert rank.returncode == 0, err[-2000:]
            # 4 ranks // (tp 1 * ...) = 4: FSDP on; the same Q for everyone
            assert [p["queues"] for p in probes(out)] == ["4"]
        assert work.evaluations() == 1, round_  # first launch 1, relaunch 0
        # Local rank 0 checks what it did not evaluate (a peer's answer, the
        # entry) in the background: at most one check per round for the node.
        assert work.checks() <= round_, round_


def test_without_the_cache_every_launch_evaluates(work: Launches) -> None:
    for count in (1, 2):
        assert launch(work, ROCM_HWQ_AUTOSET_CACHE="0")[0] == "4"
        assert work.evaluations() == count
    assert not Path(work.env["ROCM_HWQ_AUTOSET_CACHE_DIR"]).exists()


def test_explain_says_where_the_evaluation_came_from(work: Launches) -> None:
    explain = [work.python, "-m", "rocm_hwq_autoset", "explain", "--json", *MINE]
    code, out, err = work.run(explain)
    assert code == 0, err
    assert json.loads(out)["evaluation"].split()[0] == "evaluated"  # a miss
    start = time.monotonic()
    code, out, _ = work.run(explain)
    hit = json.loads(out)["evaluation"]  # the entry it came from, named
    assert hit.split()[0] != "evaluated" and hit.endswith(".json)")
    assert time.monotonic() - start < 5 and work.evaluations() == 1
    code, out, _ = work.run([*explain[:5], "--no-cache", *MINE])
    assert json.loads(out)["evaluation"] == "evaluated (--no-cache)"
    assert work.evaluations() == 2


# Issue #23: what the evaluation really read, and nothing more.


def test_a_variable_read_after_a_library_walked_the_environment(
    work: Launches,
) -> None:
    """fsspec (imported by torchtitan) walks ``os.environ`` at import, while
    MY_CP is set: its later read by name by the recipe counts all the same.
    Was: a hit with the stale Q=4 (the truth is 8)."""
    assert launch(work, MY_CP="1")[0] == "4"
    assert launch(work, MY_CP="2")[0] == "8"
    assert work.evaluations() == 2
    assert launch(work, MY_CP="2")[0] == "8"  # and cached again
    assert work.evaluations() == 2


def test_what_changes_between_jobs_and_ranks_shares_one_evaluation(
    work: Launches,
) -> None:
    """A new job's ``TMPDIR`` and scheduler identifiers, ``python3`` for
    ``python``, a log named after a module beside the recipe, each rank's own
    GPU: no miss. Was: a miss for each. The ranks of one ``srun`` step (one
    job id and step id) are one launch for the bound on unchecked hits
    (``MAX_UNCHECKED``): they count once between them (they run together),
    so none of them evaluates for it (was, issue #36: the second launch of
    local rank 0 and then rank 1 evaluated)."""
    jobs = [work.root / f"job-{n}" for n in (1, 2)]
    for folder in jobs:
        folder.mkdir()

    def job(n: int, rank: int, python: str = "python") -> tuple[str | None, str]:
        """A rank's launch in verbose mode: its Q, and its cache's line."""
        env = {"TMPDIR": str(jobs[n - 1]), "SLURM_JOB_ID": f"{n}00",
               "SLURM_STEP_ID": str(n), "SLURM_GTIDS": str(rank),
               "PMIX_NAMESPACE": f"slurm.pmix.{n}00.0",
               "ROCR_VISIBLE_DEVICES": str(rank), "RANK": str(rank),
               "LOCAL_RANK": str(rank), "ROCM_HWQ_AUTOSET_LOG": "verbose"}  # fmt: skip
        code, out, err = work.run(
            [str(work.bin / python), "-m", "torchtitan.train", *MINE], **env
        )
        assert code == 0, err[-2000:]
        [seen] = probes(out)
        said = ours(err)
        cache = [line for line in said if ": cache: " in line]
        assert len(cache) <= 1, said
        if not cache:  # a hit says so
            assert said[-1].endswith(HIT), said
        return seen["queues"], cache[0] if cache else "hit"

    evaluating = "rocm-hwq-autoset: cache: {}; evaluating"
    assert job(1, 0) == ("4", evaluating.format("no entry"))
    assert job(2, 0) == ("4", "hit")  # a new job: its TMPDIR, ids
    (work.work / "torchtitan.200.log").write_text("a new job's log\n")
    (work.work / "my_recipes.200.out").write_text("and its output\n")
    assert work.evaluations() == 1
    # srun --gpus-per-task=1: a GPU of its own; the ranks run together
    from concurrent.futures import ThreadPoolExecutor

    ranks = [(0, "python"), (1, "python"), (2, "python"), (3, "python3")]
    with ThreadPoolExecutor(len(ranks)) as pool:
        seen = list(pool.map(lambda r: job(2, *r), ranks))
    assert seen == [("4", "hit")] * len(ranks)
    assert work.evaluations() == 1


def test_a_helper_edited_while_the_evaluation_runs(work: Launches) -> None:
    """The recipe's helper is edited (TP 1 to 2) while the first launch
    evaluates: that launch keeps its fresh answer, nothing is stored, and the
    next one evaluates the new helper. Was: the old answer stored with the new
    file's stamp, every later launch a stale Q=4 (the truth is 8)."""
    recipe = work.work / "my_recipes" / "config_registry.py"
    recipe.write_text(RECIPE.replace("    return config", (
        "    if os.path.exists('edit-once'):  # a stat: not a dependency\n"
        "        os.remove('edit-once')\n"
        "        os.system('echo TP = 2 > my_helper.py')  # another process\n"
        "    return config")))  # fmt: skip
    (work.work / "edit-once").write_text("")
    assert launch(work)[0] == "4"  # TP 1, as imported
    assert work.evaluations() == 1
    assert launch(work)[0] == "8"
    assert work.evaluations() == 2
    assert launch(work)[0] == "8"  # stored this time
    assert work.evaluations() == 2

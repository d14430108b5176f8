"""The child of the ``--module`` evaluation as a process (``child``), run on
the stand-in torchtitan: the answer it prints, what it stores, and how the
children of ranks started together on one node share one evaluation."""

from __future__ import annotations

import errno
import fcntl
import json
import os
import site
import stat
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from rocm_hwq_autoset._decision import internal_error
from rocm_hwq_autoset._environ import DEFAULT_TIMEOUT
from rocm_hwq_autoset._evaluation import child as child_module
from rocm_hwq_autoset._evaluation.answer import Answer
from rocm_hwq_autoset._evaluation.cache import LAUNCH_VARIABLES, Cache, host, launch_of

from ..helpers import check_lines
from ..helpers import said as parsed
from .children import (
    CHILD,
    Forked,
    answer,
    child,
    evaluations,
    flat,
    held,
    refusal,
)
from .helpers import served_on_a_full_disk

RECIPE = ["--module", "my_recipes", "--config", "dense_tp2"]


def test_the_child_s_options(request: pytest.FixtureRequest) -> None:
    """Its help pinned once (a maintainer runs ``python -m
    rocm_hwq_autoset._evaluation.child --help``); no option abbreviated, as
    the launcher never does."""
    parser = child_module.options_parser()  # argparse's own layout varies
    check_lines(request, [(f"{parser.prog} {' '.join(a.option_strings)}",
                           f"{a.metavar or ''}: {a.help}")
                          for a in parser._actions if a.dest != "help"])  # fmt: skip
    with pytest.raises(SystemExit) as exited:
        parser.parse_args(["--pare", "1"])  # --parent alone: argparse says why
    assert exited.value.code == 2
    assert parser.parse_args(["--say", "2", "--no-path0"]).say == 2


def test_the_launcher_s_stderr_is_the_child_s_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The copy of the launcher's stderr (``--say``) is not passed on to what
    the evaluation starts (torch's compile workers): they would hold the
    launcher's stderr open after it ends."""
    read, first = os.pipe()
    write = fcntl.fcntl(first, fcntl.F_DUPFD, 10)  # inheritable, past stdio,
    os.close(first)  # which the child's main replaces (closed in some runners)
    seen = tmp_path / "seen"

    def serve(options: Any, *_: Any) -> None:
        seen.write_text(json.dumps(os.get_inheritable(options.say)))

    monkeypatch.setattr(child_module, "_serve", serve)
    again = tmp_path / "site"  # site ran already (python -m): only boot() runs it
    monkeypatch.setattr(site, "main", lambda: again.write_text("ran again"))
    status, _ = Forked(tmp_path, ["--say", str(write), "--", *NO_CONFIG]).finish()
    os.close(read)
    os.close(write)
    assert (status, json.loads(seen.read_text()), again.exists()) == (0, False, False)


def test_one_json_line_and_an_entry(world: dict[str, str]) -> None:
    doc = answer(child(world, RECIPE))
    assert doc["how"] == "evaluated"
    assert doc["inputs"] == ("async_tp=0,cp=1,cudagraph=1,dist_gemm=0,dp_replicate=1,"
                             "dp_shard=-1,ep=1,ep_isolation=0,moe=0,moe_from=traverse,"
                             "overlap=0,pp=1,tp=2,trainer_cudagraph=1")  # fmt: skip
    assert doc["settings"]["parallelism.tensor_parallel_degree"] == [2, "config"]
    assert (Path(world["CACHE"]) / f"{'k' * 32}.json").is_file()
    again = answer(child(world, RECIPE))
    assert again == {**doc, "how": "cache"}
    assert evaluations(world) == 1


def test_a_child_takes_the_entry_for_its_launcher_s_launch(
    world: dict[str, str],
) -> None:
    """The launch that takes an entry is the launcher's (``--parent``): the
    child's own parent is the launcher, whose other ranks are its siblings."""
    answer(child(world, RECIPE))  # evaluated and stored
    process = child(world, RECIPE, watched=True)
    assert process.stdout is not None and process.stdin is not None
    assert flat(json.loads(process.stdout.readline()))["how"] == "cache"
    process.stdin.close()  # the launcher no longer waits: the child ends
    process.wait(timeout=60)  # ended by itself or by its reaper: either way
    assert process.stderr is not None and process.stderr.read() == ""
    [(launch, taker, _, _)] = Cache(world["CACHE"]).unchecked("k" * 32) or []
    assert (launch, taker) == (launch_of(world, os.getpid()), os.getpid())


def test_a_child_whose_launcher_stopped_listening_still_stores(
    world: dict[str, str],
) -> None:
    """An answer nobody reads any more (the launcher timed out, or exited) is
    still stored for the next launch: the write's broken pipe is no error."""
    process = child(world, RECIPE)
    assert process.stdout is not None and process.stderr is not None
    process.stdout.close()  # before the child answers: it evaluates first
    assert (process.wait(timeout=60), process.stderr.read()) == (0, "")
    assert (Path(world["CACHE"]) / f"{'k' * 32}.json").is_file()


@pytest.mark.parametrize("cache", ["open to all", "a link"])
def test_a_cache_no_longer_ours_is_passed_over(
    world: dict[str, str], cache: str
) -> None:
    """A cache that was this user's when the launcher chose it and no longer
    is, by the time its child opens it (written open to all, or replaced by
    a link): the child evaluates without it and answers, and touches
    nothing in it."""
    folder = Path(world["CACHE"])
    folder.mkdir(mode=0o700)
    if cache == "a link":
        folder.rename(folder.with_name("elsewhere"))
        folder.symlink_to(folder.with_name("elsewhere"))
    else:
        folder.chmod(0o777)
    doc = answer(child(world, RECIPE))
    assert doc["how"] == "evaluated" and doc["inputs"].endswith(
        ",tp=2,trainer_cudagraph=1"
    )
    assert os.listdir(folder) == []


def test_the_streams_left_out_reach_the_parent_and_the_cache(
    world: dict[str, str],
) -> None:
    """The child's answer, and the cache entry a relaunch takes, carry the
    inputs and fields the streams PR #4032's model leaves out depend on."""
    args = ["--module", "llama3", "--config", "llama3_debugmodel_dist_gemm",
            "--parallelism.tensor_parallel_degree", "2",
            "--compile.enable_async_tensor_parallel"]  # fmt: skip
    doc = answer(child(world, args))
    assert doc["how"] == "evaluated"
    for pair in ("async_tp=1", "dist_gemm=1", "ep_isolation=0",
                 "trainer_cudagraph=1", "tp=2"):  # fmt: skip
        assert pair in doc["inputs"].split(",")
    assert doc["settings"]["compile.enable_async_tensor_parallel"] == [True, "CLI"]
    assert doc["settings"]["compile.ep_overlap.enabled"] == [False, "config"]
    assert doc["settings"]["training.disable_cuda_graphs"] == [False, "config"]
    assert answer(child(world, args)) == {**doc, "how": "cache"}
    assert evaluations(world) == 1


def test_an_entry_is_not_reused_once_a_variable_the_config_read_changed(
    world: dict[str, str],
) -> None:
    recipes = Path(world["WORK"], "env_recipes")
    recipes.mkdir()
    (recipes / "__init__.py").write_text("")
    (recipes / "config_registry.py").write_text(
        "import os\n"
        "from torchtitan.experiments.graph_trainer import trainer_config\n"
        "def tp():\n"
        "    tp = int(os.environ['MY_TP'])\n"
        "    return trainer_config('m', 'f', moe=False, tensor_parallel_degree=tp)\n"
    )
    args = ["--module", "env_recipes", "--config", "tp"]
    docs = [answer(child(world, args, MY_TP=tp)) for tp in ("2", "2", "4")]
    assert [d["how"] for d in docs] == ["evaluated", "cache", "evaluated"]
    assert "tp=4" in docs[2]["inputs"]


def test_without_a_cache_nothing_is_written(world: dict[str, str]) -> None:
    assert answer(child(world, RECIPE, cache=False))["how"] == "evaluated"
    assert os.listdir(world["CACHE"]) == []


def test_a_failure_is_answered_and_not_stored(
    world: dict[str, str], request: pytest.FixtureRequest
) -> None:
    doc = answer(child(world, ["--module", "my_recipes", "--config", "nope"]))
    assert set(doc) == {"error", "source", "how"}
    assert (doc["source"], doc["how"]) == ("", "evaluated")
    assert {"'my_recipes.config_registry'", "'nope')"} <= set(doc["error"].split())
    check_lines(request, [("--config nope", doc["error"])])
    assert not any(name.endswith(".json") for name in os.listdir(world["CACHE"]))


@pytest.mark.parametrize(
    ("args", "reason", "source"),
    [
        (["--module", "my_recipes"], "is required (with a value); example:"
         " --module llama3 --config llama3_debugmodel", "--config"),
        ([*RECIPE, "--compile.enable_passes", "False"],
         "torchtitan rejected the arguments: Unrecognized arguments: False", ""),
        ([*RECIPE, "--compile.enable_passess"],
         "torchtitan rejected the arguments: Unrecognized options:"
         " --compile.enable_passess (did you mean --compile.enable_passes for"
         " --compile.enable_passess?)", ""),
    ],
)  # fmt: skip
def test_torchtitans_refusal_is_one_reason(
    world: dict[str, str], args: list[str], reason: str, source: str
) -> None:
    doc = answer(child(world, args))
    assert (doc["error"], doc["source"]) == (reason, source)


@pytest.mark.parametrize("outcome", ["accepted", "rejected"])
def test_ranks_started_together_share_one_evaluation(
    world: dict[str, str], outcome: str
) -> None:
    """Four ranks of one node start their children at once: one evaluates
    (holding the node's lock), the others wait for its answer."""
    args = RECIPE if outcome == "accepted" else [*RECIPE[:3], "nope"]
    children = [child(world, args, STANDIN_SLEEP="1") for _ in range(4)]
    docs = [answer(c) for c in children]
    assert evaluations(world) == 1
    assert sorted(d["how"] for d in docs) == ["evaluated", "peer", "peer", "peer"]
    assert all(("error" in d) is (outcome == "rejected") for d in docs)
    first = {k: v for k, v in docs[0].items() if k != "how"}
    assert all({k: v for k, v in d.items() if k != "how"} == first for d in docs)


def test_a_rank_that_cannot_take_the_lock_evaluates_alone(
    world: dict[str, str],
) -> None:
    os.makedirs(world["CACHE"], mode=0o700)
    os.mkdir(Path(world["CACHE"], f"{'k' * 32}.{host()}.lock"))  # not a file
    assert answer(child(world, RECIPE))["how"] == "evaluated"


def test_a_child_whose_parent_is_gone_ends_at_once(world: dict[str, str]) -> None:
    process = subprocess.run(
        [*CHILD, "--parent", "1",
         "--", *RECIPE],
        env=world, capture_output=True, text=True, timeout=30,
        start_new_session=True,
    )  # fmt: skip
    assert (process.returncode, process.stdout) == (1, "")
    assert evaluations(world) == 0


NO_CONFIG = ["--module", "my_recipes"]

NO_DEPS: dict[str, Any] = {"env": {}, "files": [], "dirs": [], "lists": []}

NO_CONFIG_ANSWER = {
    "error": "is required (with a value); example: --module llama3 --config"
    " llama3_debugmodel",
    "source": "--config",
    "how": "evaluated",
}


@pytest.mark.parametrize(
    ("timeout", "alarm"),
    [("5", 6), ("2.5", 3), ("soon", int(DEFAULT_TIMEOUT) + 1),
     ("", int(DEFAULT_TIMEOUT) + 1)],
)  # fmt: skip
def test_a_hung_evaluation_ends_a_second_after_the_timeout(
    tmp_path: Path, timeout: str, alarm: int
) -> None:
    """The safety net beside the parent's deadline, for a parent that never
    waits; a timeout it cannot read (the hook refuses one) is the default."""
    forked = Forked(tmp_path, ["--", *NO_CONFIG], ROCM_HWQ_AUTOSET_TIMEOUT=timeout)
    status, out = forked.finish()
    assert (status, flat(json.loads(out))) == (0, NO_CONFIG_ANSWER)
    assert forked.alarm.read_text() == str(alarm)


def test_an_internal_error_is_the_answer(monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(args: object) -> None:
        raise RuntimeError("a bug of ours")

    monkeypatch.setattr(child_module, "read_config", broken)
    assert child_module._evaluate_here(RECIPE).to_json() == {
        "failed": internal_error(RuntimeError("a bug of ours")),
        "how": "evaluated",
    }


@pytest.fixture
def node(tmp_path: Path) -> tuple[Cache, list[str]]:
    """A cache, and the child's options for it."""
    folder = tmp_path / "cache"
    folder.mkdir(mode=0o700)
    return Cache(str(folder)), ["--cache", str(folder), "--key", "k" * 32]


@pytest.mark.parametrize("failed", [False, True])
def test_a_rank_waits_for_the_peer_holding_the_lock_and_takes_its_answer(
    tmp_path: Path, node: tuple[Cache, list[str]], failed: bool
) -> None:
    """The peer's refusal, or its own failure, as it is."""
    cache, options = node
    with held(cache, cache.lock_file("k" * 32)):  # the peer evaluates, then ends
        forked = Forked(tmp_path, [*options, "--", *NO_CONFIG])
        forked.wait_blocked()
        peers = Answer(failure="the peer's") if failed else refusal("the peer's")
        cache.publish("k" * 32, peers, NO_DEPS)
    status, out = forked.finish()
    assert (status, flat(json.loads(out))) == (
        0, {"error": "the peer's", "source": "", "how": "peer"}
    )  # fmt: skip


def test_an_answer_published_before_the_rank_started_is_not_taken(
    tmp_path: Path, node: tuple[Cache, list[str]]
) -> None:
    """A peer that ended without answering (killed) leaves the last launch's
    answer there: this rank evaluates."""
    cache, options = node
    cache.publish("k" * 32, refusal("an earlier launch's"), NO_DEPS)
    with held(cache, cache.lock_file("k" * 32)):
        forked = Forked(tmp_path, [*options, "--", *NO_CONFIG])
        deadline = time.monotonic() + 10
        while not forked.blocked() and time.monotonic() < deadline:
            time.sleep(0.01)
    status, out = forked.finish()
    assert (status, flat(json.loads(out))) == (0, NO_CONFIG_ANSWER)
    assert flat(cache.published("k" * 32)[1]["answer"]) == NO_CONFIG_ANSWER  # the next


def test_an_answer_that_cannot_be_published_still_ends_the_child_cleanly(
    tmp_path: Path, node: tuple[Cache, list[str]]
) -> None:
    """It exits at once, without tearing torch down, whatever the cache
    refuses; its lock file is private."""
    cache, options = node
    os.mkdir(
        os.path.join(cache.path, cache.result_file("k" * 32))
    )  # not a file: publishing fails
    status, out = Forked(tmp_path, [*options, "--", *NO_CONFIG]).finish()
    assert (status, flat(json.loads(out))) == (0, NO_CONFIG_ANSWER)
    lock = Path(cache.path, f"{'k' * 32}.{host()}.lock")  # this node's, in the cache
    assert stat.S_IMODE(lock.stat().st_mode) == 0o600


@pytest.mark.parametrize("rank", ["0", "1"])
def test_a_cache_that_cannot_store_says_so_once_per_node(
    world: dict[str, str], rank: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    """Was: a read-only cache (``chattr +i``, a read-only home) cost an
    evaluation at every launch, and even verbose mode only said "no entry"
    (issue #28). Now the child says it, as the node's one process."""
    cache = Path(world["CACHE"])
    cache.mkdir(mode=0o700)
    # A folder where the entry should go: its write refused as on a
    # read-only mount (root writes anywhere: permissions cannot show it).
    (cache / f"{'k' * 32}.json").mkdir()
    read, write = os.pipe()
    process = subprocess.Popen(
        [*CHILD, "--cache",
         str(cache), "--key", "k" * 32, "--checks", "--say", str(write), "--",
         *RECIPE],
        cwd=world["WORK"], env={**world, "LOCAL_RANK": rank},
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, pass_fds=(write,),
        start_new_session=True,
    )  # fmt: skip
    os.close(write)
    out, err = process.communicate(timeout=60)
    with os.fdopen(read) as lines:
        said = lines.read()
    assert (process.returncode, err, flat(json.loads(out))["how"]) == (
        0, "", "evaluated")  # fmt: skip
    if rank == "1":
        assert said == ""
        return
    level, message = parsed(said)  # the cache named, and why it cannot hold it
    assert level == "warning" and message.split()[:2] == ["cache:", str(cache)]
    assert f"({os.strerror(errno.EISDIR)});" in message
    check_lines(request, [("an entry that is a folder", said)], tmp_path)


@pytest.mark.parametrize(
    ("published", "taken"),
    [
        ({"MY_CP": "1"}, True),
        ({"MY_CP": "2"}, False),  # another environment: its own evaluation
        (None, False),  # what the peer read is not known
    ],
)
def test_a_peers_answer_is_taken_only_if_nothing_it_read_differs_here(
    tmp_path: Path, node: tuple[Cache, list[str]], published: Any, taken: bool
) -> None:
    """Two launches of one command at once: the second took the first's answer
    unchecked, even with another environment (issue #23)."""
    cache, options = node
    deps = None if published is None else {**NO_DEPS, "env": published}
    peer = refusal("the peer's")
    with held(cache, cache.lock_file("k" * 32)):
        forked = Forked(tmp_path, [*options, "--", *NO_CONFIG], MY_CP="1")
        forked.wait_blocked()
        cache.publish("k" * 32, peer, deps)
    status, out = forked.finish()
    assert status == 0
    taken_answer = {"error": "the peer's", "source": "", "how": "peer"}
    assert flat(json.loads(out)) == (taken_answer if taken else NO_CONFIG_ANSWER)


def test_a_peers_answer_for_another_key_is_not_taken(
    tmp_path: Path, node: tuple[Cache, list[str]]
) -> None:
    cache, options = node
    with held(cache, cache.lock_file("k" * 32)):
        forked = Forked(tmp_path, [*options, "--", *NO_CONFIG])
        forked.wait_blocked()
        cache.publish("j" * 32, refusal("another's"), NO_DEPS)
        os.rename(
            os.path.join(cache.path, cache.result_file("j" * 32)),
            os.path.join(cache.path, cache.result_file("k" * 32)),
        )
    status, out = forked.finish()
    assert (status, out.count("\n"), flat(json.loads(out))) == (0, 1, NO_CONFIG_ANSWER)


@pytest.mark.parametrize("waited", [False, True])
def test_the_child_answers_first_then_stores_at_the_lowest_priority(
    tmp_path: Path,
    node: tuple[Cache, list[str]],
    monkeypatch: pytest.MonkeyPatch,
    waited: bool,
) -> None:
    """The answer goes out at the launch's own priority; what follows (what
    the evaluation read, the peers, the entry) only when the CPU is idle: the
    first launch no slower than without the cache (issue #23). But for ranks
    of the node waiting on the lock, what they wait for is published at the
    launch's own priority: was, on a busy machine, the rank that evaluated
    ended its idle child before it published, and each peer evaluated."""
    cache, options = node
    seen = tmp_path / "seen"

    def noting(self: Cache, key: str, doc: Any, deps: Any) -> None:
        idle = getattr(os, "SCHED_IDLE", None)
        policy = os.sched_getscheduler(0) if idle is not None else None
        answered = (tmp_path / "out").read_text()
        seen.write_text(json.dumps([os.nice(0), policy == idle, answered]))
        with open(steps, "a") as log:
            log.write("publish\n")

    def lowest() -> str | None:
        with open(steps, "a") as log:
            log.write("lowest\n")
        return lowest_priority()

    steps = tmp_path / "steps"
    lowest_priority = child_module.lowest_priority
    monkeypatch.setattr(child_module, "lowest_priority", lowest)
    monkeypatch.setattr(Cache, "publish", noting)
    lock = cache.lock_file("k" * 32)  # waiters on this one, on no other file
    monkeypatch.setattr(Cache, "waited_on", lambda self, name: waited and name == lock)
    before = os.nice(0)
    status, out = Forked(tmp_path, [*options, "--", *NO_CONFIG]).finish()
    assert (status, flat(json.loads(out))) == (0, NO_CONFIG_ANSWER)
    niceness, idle, answered = json.loads(seen.read_text())
    assert flat(json.loads(answered)) == NO_CONFIG_ANSWER
    assert (niceness, idle) == ((before, False) if waited else (19, True))
    order = ["publish", "lowest"] if waited else ["lowest", "publish"]
    assert steps.read_text().split() == order  # the rest at the lowest, as ever
    assert os.nice(0) == before  # the fork's, not ours


SHADOW = """
from torchtitan.experiments.graph_trainer import trainer_config

def c():
    return trainer_config("my_model", "big", moe=False, context_parallel_degree={cp})
"""


@pytest.mark.timeout(120)
@pytest.mark.parametrize(
    ("program", "interpreter", "cp"),
    [
        # python /src/torchtitan/train.py: the script's folder first, not this
        # directory: the recipe comes from PYTHONPATH (cp 1).
        (("script", "{titan}/train.py"), None, 1),
        # python -m torchtitan.train: this directory first (cp 2).
        (("module", "torchtitan.train"), None, 2),
        # python -P -m torchtitan.train (3.11+): nothing first (cp 1).
        (("module", "torchtitan.train"), (("-P",), None), 1),
    ],
)  # fmt: skip
def test_the_child_imports_from_where_the_training_does(
    world: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    program: tuple[str, str], interpreter: Any, cp: int,
) -> None:  # fmt: skip
    """Was: the child always put its working directory first (``python -m``),
    whatever the training's interpreter puts there: a recipe shadowed in the
    working directory gave the training one config and the hook another."""
    from rocm_hwq_autoset._argv import Launch
    from rocm_hwq_autoset._evaluation import parent, process

    if interpreter is not None and sys.version_info < (3, 11):
        pytest.skip("-P is Python 3.11's")
    for folder, degree in ((Path(world["WORK"]), 2), (tmp_path / "other", 1)):
        (folder / "rec").mkdir(parents=True)
        (folder / "rec" / "__init__.py").write_text("")
        (folder / "rec" / "config_registry.py").write_text(SHADOW.format(cp=degree))
    titan = tmp_path / "standin" / "torchtitan"
    kind, name = program
    launch = Launch("--module", ["--module", "rec", "--config", "c"], True,
                    (kind, name.format(titan=titan)))  # fmt: skip
    environ = dict(world, PYTHONPATH=os.pathsep.join(
        [world["PYTHONPATH"], str(tmp_path / "other")]))  # fmt: skip
    monkeypatch.chdir(world["WORK"])
    runs = interpreter or process.interpreter_of(launch, environ)
    evaluation = parent.Evaluation(launch, environ, None, "", runs)
    try:
        answer = evaluation.answer()
    finally:
        evaluation.settle()
    assert answer.config is not None, answer
    assert answer.config.inputs.cp == cp


class _Flags:
    """``sys.flags`` as the child reads it: isolated mode, and safe-path
    mode where the CPython has it (3.11+)."""

    def __init__(self, isolated: int, **safe_path: int) -> None:
        self.isolated = isolated
        self.__dict__.update(safe_path)


@pytest.mark.parametrize(
    ("flags", "kept"),
    [
        (_Flags(0, safe_path=0), False),
        (_Flags(0), False),  # a CPython before 3.11: no safe_path
        (_Flags(1, safe_path=0), True),
        (_Flags(0, safe_path=1), True),
    ],
)  # fmt: skip
def test_the_childs_first_path_entry_is_the_trainings(
    monkeypatch: pytest.MonkeyPatch, flags: _Flags, kept: bool
) -> None:
    """Its own first entry (``-m``'s folder) goes, unless isolated or safe-path
    mode kept it from being put there; the training's goes first."""
    monkeypatch.setattr(sys, "flags", flags)
    monkeypatch.setattr(sys, "path", ["/child's own", "/lib"])
    child_module.imports_from("/training's")
    assert sys.path == ["/training's", *(["/child's own"] if kept else []), "/lib"]


SITE_RECIPE = """
import builtins
from torchtitan.experiments.graph_trainer import trainer_config

def tp():
    return trainer_config("m", "f", moe=False, tensor_parallel_degree=builtins.SITE_TP)
"""


def test_a_variable_read_while_site_runs_counts(world: dict[str, str]) -> None:
    """Was: the recording began after ``site`` had run, so a
    ``sitecustomize`` (or a module a ``.pth`` line imports) that read SITE_TP
    and handed the config a value made from it left SITE_TP out of the
    record: a hit with the old Q (issue #28). The child runs site itself now,
    recorded."""
    site = Path(world["WORK"]).parent / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(
        "import builtins, os\nbuiltins.SITE_TP = int(os.environ.get('SITE_TP', '1'))\n"
    )
    recipes = Path(world["WORK"], "site_recipes")
    recipes.mkdir()
    (recipes / "__init__.py").write_text("")
    (recipes / "config_registry.py").write_text(SITE_RECIPE)
    env = {"PYTHONPATH": os.pathsep.join([str(site), world["PYTHONPATH"]])}
    args = ["--module", "site_recipes", "--config", "tp"]
    docs = [answer(child(world, args, SITE_TP=tp, **env)) for tp in ("2", "2", "4")]
    assert [d["how"] for d in docs] == ["evaluated", "cache", "evaluated"]
    assert ["tp=2" in docs[0]["inputs"], "tp=4" in docs[2]["inputs"]] == [True, True]


@pytest.mark.parametrize(
    "case", ["a trailing slash on PYTHONPATH", "a .pth in a PYTHONPATH folder"]
)
def test_what_changes_nothing_hits(world: dict[str, str], case: str) -> None:
    """Issue #28's needless misses: each of these launches evaluated again."""
    env = {}
    if case == "a trailing slash on PYTHONPATH":
        folders = world["PYTHONPATH"].split(os.pathsep)
        env["PYTHONPATH"] = os.pathsep.join(f"{folder}/" for folder in folders)
    else:  # site never reads it there
        Path(world["PYTHONPATH"].split(os.pathsep)[0], "extra.pth").write_text("")
    docs = [answer(child(world, RECIPE, **env)) for _ in range(2)]
    assert [d["how"] for d in docs] == ["evaluated", "cache"]


def test_a_check_adds_no_dependency_the_evaluation_had_not(
    world: dict[str, str], tmp_path: Path
) -> None:
    """Was: the check concluded its Q while still recording, so the entry it
    stored anew depended on WORLD_SIZE and GPU_MAX_HW_QUEUES too: a miss at
    every rank of another world size (issue #28)."""
    answer(child(world, RECIPE))
    entry = Path(world["CACHE"], f"{'k' * 32}.json")
    before = json.loads(entry.read_text())["variants"][0]["deps"]["env"]
    inputs = json.loads(entry.read_text())["variants"][0]["result"]["inputs"]
    process = subprocess.run(
        [*CHILD, "--cache", world["CACHE"], "--key", "k" * 32, "--check", inputs,
         "--", *RECIPE],
        cwd=world["WORK"], capture_output=True, text=True, timeout=60,
        env={**world, "WORLD_SIZE": "4", "GPU_MAX_HW_QUEUES": "8",
             "ROCM_HWQ_AUTOSET_ORIGIN": "8 --module"},
        start_new_session=True,
    )  # fmt: skip
    assert json.loads(process.stdout) == {"verdict": "same"}
    after = json.loads(entry.read_text())["variants"][0]["deps"]["env"]
    assert after == before and "WORLD_SIZE" not in after


@pytest.mark.forked  # the node's lock _found takes is held until the process ends
@pytest.mark.parametrize("noted", [True, False])
def test_the_entry_a_child_takes_is_noted_or_not_taken(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, noted: bool
) -> None:
    """A child notes the entry it takes as the launcher notes its hit (the
    bound on unchecked hits), whatever its launch's local rank; where that
    cannot be done it takes nothing and evaluates. Was: the child's hit was
    never counted (issue #28), then only the node's one process's (#36)."""
    from rocm_hwq_autoset._model import Config
    from tests.fake_child import INPUTS, SETTINGS

    cache = Cache(str(tmp_path))
    config = Config(INPUTS, SETTINGS)
    cache.store("k" * 32, config, {"files": [], "dirs": [], "lists": [], "env": {}})
    for names in LAUNCH_VARIABLES:  # the launch is the launcher's parent's
        for name in names:
            monkeypatch.delenv(name, raising=False)
    launcher = os.getppid()  # the child's launcher, not the child's parent
    launch = launch_of(os.environ, launcher)
    assert launch != launch_of(os.environ)
    if not noted:
        served_on_a_full_disk(monkeypatch)
    found = child_module._found(cache, "k" * 32, launcher)
    monkeypatch.undo()
    if noted:
        assert found is not None and found.config is not None
        assert found.config.inputs.as_dict() == INPUTS.as_dict()
        [(taken, taker, _, _)] = cache.unchecked("k" * 32) or []
        assert (taken, taker) == (launch, launcher)
    else:
        assert found is None  # this child evaluates
        assert cache.unchecked("k" * 32) == []

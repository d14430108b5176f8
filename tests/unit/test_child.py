"""The ``--module`` evaluation, child side (``_registry_child``), with the
stand-in torchtitan: the answer it prints, what it stores, and how the children
of ranks started together on one node share one evaluation."""

from __future__ import annotations

import fcntl
import io
import json
import os
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from rocm_hwq_autoset._config import ConfigError
from rocm_hwq_autoset._environ import DEFAULT_TIMEOUT
from rocm_hwq_autoset._evaluation import child as child_module
from rocm_hwq_autoset._evaluation.cache import Cache, host
from rocm_hwq_autoset._evaluation.child import evaluate_config, shorten_lists

from ..helpers import child_env
from ..standin import write_recipes, write_standin

ROOT = Path(__file__).resolve().parents[2]
DS = ["--module", "graph_trainer.deepseek_v3", "--config",
      "graph_trainer_deepseek_v3_debugmodel"]  # fmt: skip
RECIPE = ["--module", "my_recipes", "--config", "dense_tp2"]


@pytest.fixture
def world(tmp_path: Path) -> dict[str, str]:
    """A working directory with a recipe, the stand-in torchtitan, a cache."""
    standin = write_standin(tmp_path / "standin")
    work = write_recipes(tmp_path / "work")
    return child_env(
        {
            "PATH": os.environ["PATH"],
            "PYTHONPATH": os.pathsep.join([str(standin), str(ROOT)]),
            "STANDIN_LOG": str(tmp_path / "standin.log"),
            "CACHE": str(tmp_path / "cache"),
            "WORK": str(work),
        }
    )


def child(world: dict[str, str], args: list[str], *, cache: bool = True,
          key: str = "k" * 32, **env: str) -> subprocess.Popen[str]:  # fmt: skip
    options = ["--cache", world["CACHE"], "--key", key] if cache else []
    os.makedirs(world["CACHE"], mode=0o700, exist_ok=True)
    return subprocess.Popen(
        [sys.executable, "-m", "rocm_hwq_autoset._evaluation.child", *options, "--",
         *args],
        cwd=world["WORK"], env={**world, **env}, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True,
    )  # fmt: skip


def answer(process: subprocess.Popen[str]) -> dict[str, Any]:
    out, err = process.communicate(timeout=60)
    assert err == "" and out.count("\n") == 1, (out, err)
    doc: dict[str, Any] = json.loads(out)
    return doc


def evaluations(world: dict[str, str]) -> int:
    path = Path(world["STANDIN_LOG"])
    if not path.exists():
        return 0
    return sum(json.loads(line)[0] == "parse_args" for line in path.open())


def test_one_json_line_and_an_entry(world: dict[str, str]) -> None:
    doc = answer(child(world, RECIPE))
    assert doc["how"] == "evaluated"
    assert doc["inputs"] == ("cp=1,cudagraph=1,dp_replicate=1,dp_shard=-1,ep=1,moe=0,"
                             "moe_from=traverse,overlap=0,pp=1,tp=2")  # fmt: skip
    assert doc["settings"]["parallelism.tensor_parallel_degree"] == [2, "config"]
    assert (Path(world["CACHE"]) / f"{'k' * 32}.json").is_file()
    again = answer(child(world, RECIPE))
    assert again == {**doc, "how": "cache"}
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


def test_a_failure_is_answered_and_not_stored(world: dict[str, str]) -> None:
    doc = answer(child(world, ["--module", "my_recipes", "--config", "nope"]))
    assert doc == {
        "error": "torchtitan could not build the config (AttributeError: module"
        " 'my_recipes.config_registry' has no attribute 'nope')",
        "source": "",
        "how": "evaluated",
    }
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
        [sys.executable, "-m", "rocm_hwq_autoset._evaluation.child", "--parent", "1",
         "--", *RECIPE],
        env=world, capture_output=True, text=True, timeout=30,
    )  # fmt: skip
    assert (process.returncode, process.stdout) == (1, "")
    assert evaluations(world) == 0


def test_evaluate_config_in_process(
    world: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    for folder in [*world["PYTHONPATH"].split(os.pathsep)[:1], world["WORK"]]:
        monkeypatch.syspath_prepend(folder)
    try:
        inputs, settings = evaluate_config(
            [*DS, "--parallelism.expert_parallel_degree", "2"]
        )
        assert (inputs.moe, inputs.moe_from, inputs.ep) == (True, "traverse", 2)
        assert settings["parallelism.expert_parallel_degree"].source == "CLI"
        assert settings["compile.enable_passes"].source == "config"
        with pytest.raises(ConfigError, match="could not build the config"):
            evaluate_config(["--module", "nope", "--config", "x"])
        # A config with no model spec to traverse: the model table decides.
        old = Path(world["WORK"], "old_recipes")
        old.mkdir()
        (old / "__init__.py").write_text("")
        (old / "config_registry.py").write_text(
            "from types import SimpleNamespace as NS\n"
            "def deepseek():\n"
            "    return NS(model=NS(name='deepseek_v3', flavor='16B'))\n"
        )
        inputs, _ = evaluate_config(["--module", "old_recipes", "--config", "deepseek"])
        assert (inputs.moe, inputs.moe_from) == (True, "table")
    finally:
        for name in [m for m in sys.modules
                     if m.split(".")[0] in ("torchtitan", "my_recipes",
                                            "old_recipes")]:  # fmt: skip
            del sys.modules[name]


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("Available: ['a', 'b']", "Available: ['a', 'b']"),
        ("Available config functions: ['a', 'b', 'c', 'd', 'e', 'f', 'g']. x",
         "Available config functions: ['a', 'b', 'c', 'd', 'e', ... (7 in all)]. x"),
        ("modules: ['x.y', 'z'] and ['1', '2', '3', '4', '5', '6']",
         "modules: ['x.y', 'z'] and ['1', '2', '3', '4', '5', ... (6 in all)]"),
        ("no list here [1, 2, 3, 4, 5, 6, 7]", "no list here [1, 2, 3, 4, 5, 6, 7]"),
        ("five: ['a', 'b', 'c', 'd', 'e']", "five: ['a', 'b', 'c', 'd', 'e']"),
    ],
)  # fmt: skip
def test_long_lists_are_shortened(text: str, shown: str) -> None:
    assert shorten_lists(text) == shown


def said(*lines: str) -> io.StringIO:
    return io.StringIO("".join(line + "\n" for line in lines))


@pytest.mark.parametrize(
    ("stderr", "reason"),
    [
        (said("╭─ Parsing error ─────────────────╮",
              "│ Unrecognized options:           │",
              "│   --compile.enable_passess      │",
              "│                                 │",
              "│ ─────────────────────────────── │",
              "│ For full helptext, see -h       │",
              "╰─────────────────────────────────╯"),
         "Unrecognized options: --compile.enable_passess"),
        # A value of X's is the reason's, not the box's; a line cut short
        # (no closing bar) is not in the box.
        (said("╭─ Parsing error ─╮", "│ Unrecognized arguments: │",
              "│ XX │", "│ --model.flavor=16X │", "│ cut short", "╰─────────────────╯"),
         "Unrecognized arguments: XX --model.flavor=16X"),
        (said("usage: train [-h]", "error: the first", "error: the last"),
         "error: the last"),
        (said(), "no reason given"),
    ],
)  # fmt: skip
def test_tyros_refusal_is_read_out_of_its_box(stderr: io.StringIO, reason: str) -> None:
    assert child_module._why(stderr) == reason


def test_a_near_miss_of_a_flag_given_with_its_value_is_named_without_it() -> None:
    assert child_module._hint(["--compile.enable_passess=True"]) == (
        " (did you mean --compile.enable_passes for --compile.enable_passess?)"
    )
    assert child_module._hint(["--model.name=x"]) == ""


@pytest.mark.parametrize(
    "config",
    [SimpleNamespace(), SimpleNamespace(model_spec=SimpleNamespace())],
    ids=["no model_spec", "no model"],
)
def test_a_config_without_a_model_spec_leaves_moe_unknown(config: object) -> None:
    """Not PR #4032's form: MoE is read from the settings instead."""
    assert child_module._has_moe(config) is None


# The child's main, run in a fork of this process: no interpreter to start, and
# no torchtitan to import for the arguments given (--config is missing).

NO_CONFIG = ["--module", "my_recipes"]
NO_DEPS: dict[str, Any] = {"env": {}, "files": [], "dirs": [], "lists": []}
NO_CONFIG_ANSWER = {
    "error": "is required (with a value); example: --module llama3 --config"
    " llama3_debugmodel",
    "source": "--config",
    "how": "evaluated",
}


class Forked:
    """``_registry_child.main(argv)`` in a fork, with ``env`` added to its
    environment; the alarm it sets is noted, not set."""

    def __init__(self, tmp_path: Path, argv: list[str], **env: str) -> None:
        self.out = tmp_path / "out"
        self.alarm = tmp_path / "alarm"
        self.pid = os.fork()
        if self.pid == 0:
            try:
                fd = os.open(self.out, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
                os.dup2(fd, 1)
                os.environ.update(env)
                signal.alarm = lambda seconds: self.alarm.write_text(str(seconds)) or 0
                child_module.main(argv)
            finally:
                os._exit(3)  # main raised

    def finish(self) -> tuple[int, str]:
        """Its exit status and what it printed."""
        _, status = os.waitpid(self.pid, 0)
        return os.waitstatus_to_exitcode(status), self.out.read_text()

    def blocked(self) -> bool:
        """Whether it waits for a lock."""
        with open("/proc/locks") as locks:
            return any("->" in line and f" {self.pid} " in line for line in locks)


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
    assert (status, json.loads(out)) == (0, NO_CONFIG_ANSWER)
    assert forked.alarm.read_text() == str(alarm)


def test_an_internal_error_is_the_answer(monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(args: object) -> None:
        raise RuntimeError("a bug of ours")

    monkeypatch.setattr(child_module, "evaluate_config", broken)
    assert child_module._evaluate(RECIPE, None) == {
        "error": "internal error (RuntimeError: a bug of ours)",
        "source": "",
        "how": "evaluated",
    }


@pytest.fixture
def node(tmp_path: Path) -> tuple[Cache, list[str]]:
    """A cache, and the child's options for it."""
    folder = tmp_path / "cache"
    folder.mkdir(mode=0o700)
    return Cache(str(folder)), ["--cache", str(folder), "--key", "k" * 32]


def test_a_rank_waits_for_the_peer_holding_the_lock_and_takes_its_answer(
    tmp_path: Path, node: tuple[Cache, list[str]]
) -> None:
    cache, options = node
    lock = os.open(cache.lock_file("k" * 32), os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(lock, fcntl.LOCK_EX)  # the peer evaluates
        forked = Forked(tmp_path, [*options, "--", *NO_CONFIG])
        _wait_blocked(forked)
        cache.publish("k" * 32, {"error": "the peer's", "source": "", "how": "x"},
                      NO_DEPS)  # fmt: skip
    finally:
        fcntl.flock(lock, fcntl.LOCK_UN)  # the peer ends (the fork shares the fd)
        os.close(lock)
    status, out = forked.finish()
    assert (status, json.loads(out)) == (
        0, {"error": "the peer's", "source": "", "how": "peer"}
    )  # fmt: skip


def test_an_answer_published_before_the_rank_started_is_not_taken(
    tmp_path: Path, node: tuple[Cache, list[str]]
) -> None:
    """A peer that ended without answering (killed) leaves the last launch's
    answer there: this rank evaluates."""
    cache, options = node
    cache.publish("k" * 32, {"error": "an earlier launch's", "source": ""}, NO_DEPS)
    lock = os.open(cache.lock_file("k" * 32), os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(lock, fcntl.LOCK_EX)
        forked = Forked(tmp_path, [*options, "--", *NO_CONFIG])
        deadline = time.monotonic() + 10
        while not forked.blocked() and time.monotonic() < deadline:
            time.sleep(0.01)
    finally:
        fcntl.flock(lock, fcntl.LOCK_UN)
        os.close(lock)
    status, out = forked.finish()
    assert (status, json.loads(out)) == (0, NO_CONFIG_ANSWER)
    assert cache.published("k" * 32)[1]["answer"] == NO_CONFIG_ANSWER  # the next


def test_an_answer_that_cannot_be_published_still_ends_the_child_cleanly(
    tmp_path: Path, node: tuple[Cache, list[str]]
) -> None:
    """It exits at once, without tearing torch down, whatever the cache
    refuses; its lock file is private."""
    cache, options = node
    os.mkdir(cache.result_file("k" * 32))  # not a file: publishing fails
    status, out = Forked(tmp_path, [*options, "--", *NO_CONFIG]).finish()
    assert (status, json.loads(out)) == (0, NO_CONFIG_ANSWER)
    lock = Path(cache.path, f"{'k' * 32}.{host()}.lock")  # this node's, in the cache
    assert stat.S_IMODE(lock.stat().st_mode) == 0o600


#: Recipes whose failures have a cause of their own: a config function's own
#: invalid value, tyro's refusal of the config itself, a registry that cannot
#: import a package it needs (torchtitan's message names none).
FAULTY_RECIPES = {
    "faulty/__init__.py": "",
    "faulty/recipes/__init__.py": "",
    "faulty/recipes/config_registry.py": """
from torchtitan.config.manager import _reject
from torchtitan.experiments.graph_trainer import trainer_config

def zero_tp():
    return trainer_config("llama3", "debugmodel", moe=False, tensor_parallel_degree=0)

def refused():
    _reject("Invalid value for --training.steps: 'many'")
""",
    "faulty/masked/__init__.py": "",
    "faulty/masked/config_registry.py": "import transformers_is_not_here\n",
}


@pytest.mark.parametrize(
    ("args", "source", "reason"),
    [
        # A value from the command line names its flag, as spelled there.
        ([*DS, "--parallelism.tensor_parallel_degree=0"],
         "--parallelism.tensor_parallel_degree", "0 must be >= 1"),
        ([*DS, "--parallelism.tensor-parallel-degree", "0"],
         "--parallelism.tensor-parallel-degree", "0 must be >= 1"),
        # The config function's own value: the function, not "the arguments".
        (["--module", "faulty.recipes", "--config", "zero_tp"],
         "--config zero_tp: parallelism.tensor_parallel_degree", "0 must be >= 1"),
        (["--module", "faulty.recipes", "--config", "zero_tp",
          "--compile.enable_fsdp_ag_rs_overlap"],
         "--config zero_tp: parallelism.tensor_parallel_degree", "0 must be >= 1"),
        (["--module", "faulty.recipes", "--config", "refused"], "--config refused",
         "torchtitan refused the config: Invalid value for --training.steps:"
         " 'many'"),
        (["--module", "faulty.recipes", "--config", "refused",
          "--compile.enable_fsdp_ag_rs_overlap"], "--config refused",
         "torchtitan refused the config: Invalid value for --training.steps:"
         " 'many'"),
        # The arguments' fault: said so.
        ([*DS, "--parallelism.bogus", "1"], "",
         "torchtitan rejected the arguments: Unrecognized options:"
         " --parallelism.bogus"),
        # The import torchtitan's message hides.
        (["--module", "faulty.masked", "--config", "c"], "",
         "torchtitan could not build the config (ImportError: Cannot import module"
         " 'faulty.masked'; the import that failed: ModuleNotFoundError: No module"
         " named 'transformers_is_not_here')"),
    ],
)  # fmt: skip
def test_a_refusal_names_its_real_source(
    world: dict[str, str], monkeypatch: pytest.MonkeyPatch, args: list[str],
    source: str, reason: str,
) -> None:  # fmt: skip
    for name, text in FAULTY_RECIPES.items():
        path = Path(world["WORK"], name)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    for folder in [*world["PYTHONPATH"].split(os.pathsep)[:1], world["WORK"]]:
        monkeypatch.syspath_prepend(folder)
    try:
        with pytest.raises(ConfigError) as caught:
            evaluate_config(args)
        assert (caught.value.source, caught.value.reason) == (source, reason)
    finally:
        for name in [m for m in sys.modules
                     if m.split(".")[0] in ("torchtitan", "faulty")]:  # fmt: skip
            del sys.modules[name]


def _wait_blocked(forked: Forked) -> None:
    deadline = time.monotonic() + 10
    while not forked.blocked() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert forked.blocked()


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
    peer = {"error": "the peer's", "source": "", "how": "evaluated"}
    lock = os.open(cache.lock_file("k" * 32), os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(lock, fcntl.LOCK_EX)
        forked = Forked(tmp_path, [*options, "--", *NO_CONFIG], MY_CP="1")
        _wait_blocked(forked)
        cache.publish("k" * 32, peer, deps)
    finally:
        fcntl.flock(lock, fcntl.LOCK_UN)
        os.close(lock)
    status, out = forked.finish()
    assert status == 0
    assert json.loads(out) == ({**peer, "how": "peer"} if taken else NO_CONFIG_ANSWER)


def test_a_peers_answer_for_another_key_is_not_taken(
    tmp_path: Path, node: tuple[Cache, list[str]]
) -> None:
    cache, options = node
    lock = os.open(cache.lock_file("k" * 32), os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(lock, fcntl.LOCK_EX)
        forked = Forked(tmp_path, [*options, "--", *NO_CONFIG])
        _wait_blocked(forked)
        cache.publish("j" * 32, {"error": "another's", "source": ""}, NO_DEPS)
        os.rename(cache.result_file("j" * 32), cache.result_file("k" * 32))
    finally:
        fcntl.flock(lock, fcntl.LOCK_UN)
        os.close(lock)
    assert forked.finish() == (0, json.dumps(NO_CONFIG_ANSWER) + "\n")


def test_the_child_answers_first_then_stores_at_the_lowest_priority(
    tmp_path: Path, node: tuple[Cache, list[str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The answer goes out at the launch's own priority; what follows (what
    the evaluation read, the peers, the entry) only when the CPU is idle: the
    first launch no slower than without the cache (issue #23)."""
    _, options = node
    seen = tmp_path / "seen"

    def noting(self: Cache, key: str, doc: Any, deps: Any) -> None:
        idle = getattr(os, "SCHED_IDLE", None)
        policy = os.sched_getscheduler(0) if idle is not None else None
        answered = (tmp_path / "out").read_text()
        seen.write_text(json.dumps([os.nice(0), policy == idle, answered]))

    monkeypatch.setattr(Cache, "publish", noting)
    before = os.nice(0)
    status, out = Forked(tmp_path, [*options, "--", *NO_CONFIG]).finish()
    assert (status, json.loads(out)) == (0, NO_CONFIG_ANSWER)
    niceness, idle, answered = json.loads(seen.read_text())
    assert niceness == 19 and idle and json.loads(answered) == NO_CONFIG_ANSWER
    assert os.nice(0) == before  # the fork's, not ours


# The background check of a cached answer, with the stand-in torchtitan.

#: A recipe whose degree comes from a file read only by os.path.exists: no
#: recording sees that (no audit event), so only a check can tell.
EXISTS = """
import os
from torchtitan.experiments.graph_trainer import trainer_config
def flag():
    tp = 2 if os.path.exists("tp2.flag") else 1
    config = trainer_config("m", "f", moe=False, tensor_parallel_degree=tp)
    if os.environ.get("BREAK_TRAVERSE"):  # a failure of ours, not the config's
        config.model_spec.model.traverse = lambda cls: 1 / 0
    return config
"""
FLAG = ["--module", "exists_recipes", "--config", "flag"]
TP1 = ("cp=1,cudagraph=1,dp_replicate=1,dp_shard=-1,ep=1,moe=0,moe_from=traverse,"
       "overlap=0,pp=1,tp=1")  # fmt: skip
TP2 = TP1.replace("tp=1", "tp=2")


@pytest.fixture
def flagged(world: dict[str, str]) -> dict[str, str]:
    recipes = Path(world["WORK"], "exists_recipes")
    recipes.mkdir()
    (recipes / "__init__.py").write_text("")
    (recipes / "config_registry.py").write_text(EXISTS)
    return world


def checking(world: dict[str, str], cached: str, *, say: bool = True,
             key: str = "k" * 32, status: int = 0,
             **env: str) -> tuple[str, list[str]]:  # fmt: skip
    """A check of an entry whose inputs were ``cached``: what it printed on
    stdout, and the lines it said on the descriptor it was given."""
    os.makedirs(world["CACHE"], mode=0o700, exist_ok=True)
    read, write = os.pipe()
    options = ["--cache", world["CACHE"], "--key", key, "--check", cached]
    if say:
        options += ["--say", str(write)]
    process = subprocess.Popen(
        [sys.executable, "-m", "rocm_hwq_autoset._evaluation.child", *options, "--",
         *FLAG],
        cwd=world["WORK"], env={**world, "ROCM_HWQ_AUTOSET": "0", **env},
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, pass_fds=(write,),
        start_new_session=True,  # a check that times out ends its whole group
    )  # fmt: skip
    os.close(write)
    out, err = process.communicate(timeout=60)
    with os.fdopen(read) as lines:
        said = lines.read().splitlines()
    assert (process.returncode, err) == (status, "")
    return out, said


def entry(world: dict[str, str], key: str = "k" * 32) -> Any:
    path = Path(world["CACHE"], f"{key}.json")
    return json.loads(path.read_text()) if path.exists() else None


def test_a_check_that_agrees_refreshes_the_entry_and_says_nothing(
    flagged: dict[str, str],
) -> None:
    assert answer(child(flagged, FLAG))["inputs"] == TP1
    stamp = Path(flagged["CACHE"], f"{'k' * 32}.json").stat().st_mtime_ns
    time.sleep(0.01)
    assert checking(flagged, TP1) == ("", [])
    assert entry(flagged)["result"]["inputs"] == TP1
    assert Path(flagged["CACHE"], f"{'k' * 32}.json").stat().st_mtime_ns > stamp
    assert evaluations(flagged) == 2  # it evaluated, ignoring the entry


def test_a_check_that_finds_the_entry_stale_corrects_it_and_says_so_once(
    flagged: dict[str, str],
) -> None:
    assert answer(child(flagged, FLAG))["inputs"] == TP1
    Path(flagged["WORK"], "tp2.flag").write_text("")  # no recording sees this
    assert answer(child(flagged, FLAG))["how"] == "cache"  # the hole
    out, said = checking(flagged, TP1)
    assert out == ""
    assert said == [
        "rocm-hwq-autoset: warning: the cached --module/--config evaluation was"
        " stale: GPU_MAX_HW_QUEUES=4 was set from it; evaluated again: 8 (5 GPU"
        " streams: compute, all_reduce, fsdp_comm, tp_all_gather,"
        " cudagraph_capture); the cache now holds 8 for the next launch"
    ]
    assert entry(flagged)["result"]["inputs"] == TP2
    again = answer(child(flagged, FLAG))  # the next launch gets it
    assert (again["how"], again["inputs"]) == ("cache", TP2)


@pytest.mark.parametrize("level", ["quiet", "", "verbose"])
def test_the_checks_line_follows_the_log_level(
    flagged: dict[str, str], level: str
) -> None:
    """Quiet: nothing (the parent gives no descriptor then; given one, the
    child still says nothing); default and verbose: the one line."""
    answer(child(flagged, FLAG))
    Path(flagged["WORK"], "tp2.flag").write_text("")
    _, said = checking(flagged, TP1, ROCM_HWQ_AUTOSET_LOG=level)
    assert len(said) == (0 if level == "quiet" else 1)
    assert entry(flagged)["result"]["inputs"] == TP2  # corrected all the same


def test_a_check_while_another_of_the_node_checks_does_nothing(
    flagged: dict[str, str],
) -> None:
    answer(child(flagged, FLAG))
    Path(flagged["WORK"], "tp2.flag").write_text("")
    lock = os.open(Path(flagged["CACHE"], f"{'k' * 32}.{host()}.check"),
                   os.O_RDWR | os.O_CREAT, 0o600)  # fmt: skip
    try:
        fcntl.flock(lock, fcntl.LOCK_EX)
        assert checking(flagged, TP1) == ("", [])
    finally:
        os.close(lock)
    assert evaluations(flagged) == 1 and entry(flagged)["result"]["inputs"] == TP1


def test_a_check_that_fails_keeps_the_entry_and_says_so_only_when_verbose(
    flagged: dict[str, str],
) -> None:
    answer(child(flagged, FLAG))
    before = entry(flagged)
    for level, lines in (("", []), ("verbose", [
        "rocm-hwq-autoset: nothing to do: cache: checking the cached --module/--config"
        " evaluation: internal error (ZeroDivisionError: division by zero); the"
        " entry is kept"])):  # fmt: skip
        _, said = checking(flagged, TP1, BREAK_TRAVERSE="1", ROCM_HWQ_AUTOSET_LOG=level)
        assert said == lines
        assert entry(flagged) == before


def test_a_check_whose_evaluation_is_refused_removes_the_entry_and_says_so(
    flagged: dict[str, str],
) -> None:
    answer(child(flagged, FLAG))
    registry = Path(flagged["WORK"], "exists_recipes", "config_registry.py")
    registry.write_text("")  # the config function is gone
    _, said = checking(flagged, TP1)
    assert said == [
        "rocm-hwq-autoset: warning: the cached --module/--config evaluation was"
        " stale: GPU_MAX_HW_QUEUES=4 was set from it; evaluated again: torchtitan"
        " could not build the config (AttributeError: module"
        " 'exists_recipes.config_registry' has no attribute 'flag'); the cache no"
        " longer holds it: the next launch evaluates again"
    ]
    assert entry(flagged) is None


def test_a_check_runs_at_the_lowest_priority(flagged: dict[str, str]) -> None:
    """nice 19 and the idle scheduling class, from its start."""
    recipes = Path(flagged["WORK"], "exists_recipes", "config_registry.py")
    recipes.write_text(EXISTS + (
        "import json\n"
        "with open('priority.json', 'w') as f:\n"
        "    json.dump([os.nice(0), os.sched_getscheduler(0)], f)\n"
    ))  # fmt: skip
    checking(flagged, TP1)
    niceness, policy = json.loads(Path(flagged["WORK"], "priority.json").read_text())
    assert niceness == 19 and policy == os.SCHED_IDLE


@pytest.mark.parametrize("level", ["", "verbose"])
def test_a_check_that_takes_too_long_ends_and_keeps_the_entry(
    flagged: dict[str, str], level: str
) -> None:
    answer(child(flagged, FLAG))
    before = entry(flagged)
    Path(flagged["WORK"], "tp2.flag").write_text("")
    start = time.monotonic()
    _, said = checking(flagged, TP1, status=-signal.SIGKILL, STANDIN_SLEEP="30",
                       ROCM_HWQ_AUTOSET_TIMEOUT="0.2",
                       ROCM_HWQ_AUTOSET_LOG=level)  # fmt: skip
    assert 2 < time.monotonic() - start < 10  # ten timeouts, then the alarm's second
    assert said == ([] if not level else [
        "rocm-hwq-autoset: nothing to do: cache: checking the cached --module/--config"
        " evaluation took over 2 s; the entry is kept"])  # fmt: skip
    assert entry(flagged) == before


def test_a_stale_entry_the_check_cannot_correct_is_removed(
    flagged: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A full or read-only cache: the wrong entry must not stay for the next
    launch. The check's main in a fork of this process, storing refused."""
    answer(child(flagged, FLAG))
    Path(flagged["WORK"], "tp2.flag").write_text("")

    def full(*args: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(Cache, "store", full)
    for folder in flagged["PYTHONPATH"].split(os.pathsep)[:1]:
        monkeypatch.syspath_prepend(folder)
    monkeypatch.chdir(flagged["WORK"])
    monkeypatch.syspath_prepend(flagged["WORK"])
    read, write = os.pipe()
    options = ["--cache", flagged["CACHE"], "--key", "k" * 32, "--check", TP1,
               "--say", str(write)]  # fmt: skip
    try:
        forked = Forked(tmp_path, [*options, "--", *FLAG], ROCM_HWQ_AUTOSET="0")
        os.close(write)
        assert forked.finish() == (0, "")
        with os.fdopen(read) as lines:
            said = lines.read()
    finally:
        roots = ("torchtitan", "exists_recipes")
        for name in [m for m in sys.modules if m.split(".")[0] in roots]:
            del sys.modules[name]
    assert said.endswith(
        "; the cache no longer holds it: the next launch evaluates again\n"
    ), said
    assert entry(flagged) is None


# The child imports from where the training's interpreter does.

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
    from rocm_hwq_autoset._evaluation import parent

    if interpreter is not None and sys.version_info < (3, 11):
        pytest.skip("-P is Python 3.11's")
    for folder, degree in ((Path(world["WORK"]), 2), (tmp_path / "other", 1)):
        (folder / "rec").mkdir(parents=True)
        (folder / "rec" / "__init__.py").write_text("")
        (folder / "rec" / "config_registry.py").write_text(SHADOW.format(cp=degree))
    titan = tmp_path / "standin" / "torchtitan"
    kind, name = program
    launch = Launch("module", ["--module", "rec", "--config", "c"], True,
                    (kind, name.format(titan=titan)))  # fmt: skip
    environ = dict(world, PYTHONPATH=os.pathsep.join(
        [world["PYTHONPATH"], str(tmp_path / "other")]))  # fmt: skip
    monkeypatch.chdir(world["WORK"])
    runs = interpreter or parent.interpreter_of(launch, environ)
    evaluation = parent.Evaluation(launch.args, environ, None, "", runs)
    try:
        result, _ = evaluation.result()
    finally:
        evaluation.settle()
    assert not isinstance(result, ConfigError), result
    assert result[0].cp == cp

"""The ``--module`` evaluation, child side (``_registry_child``), with the
stand-in torchtitan: the answer it prints, what it stores, and how the children
of ranks started together on one node share one evaluation."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from rocm_hwq_autoset._config import ConfigError
from rocm_hwq_autoset._registry_child import evaluate_config, shorten_lists

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
        [sys.executable, "-m", "rocm_hwq_autoset._registry_child", *options, "--",
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
    from rocm_hwq_autoset._cache import host

    os.mkdir(Path(world["CACHE"], f"{'k' * 32}.{host()}.lock"))  # not a file
    assert answer(child(world, RECIPE))["how"] == "evaluated"


def test_a_child_whose_parent_is_gone_ends_at_once(world: dict[str, str]) -> None:
    process = subprocess.run(
        [sys.executable, "-m", "rocm_hwq_autoset._registry_child", "--parent", "1",
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
    finally:
        for name in [m for m in sys.modules
                     if m.split(".")[0] in ("torchtitan", "my_recipes")]:  # fmt: skip
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
    ],
)  # fmt: skip
def test_long_lists_are_shortened(text: str, shown: str) -> None:
    assert shorten_lists(text) == shown

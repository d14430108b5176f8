"""torchtitan's config registry read in process (``registry.read_config``),
on the stand-in torchtitan: the model's inputs, torchtitan's refusals named
by their real source, its messages shortened and read out of tyro's box."""

from __future__ import annotations

import io
import os
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from rocm_hwq_autoset._config import ConfigError
from rocm_hwq_autoset._evaluation import registry
from rocm_hwq_autoset._evaluation.registry import read_config, shorten_lists

from ..helpers import check_lines
from .children import said

DS = ["--module", "graph_trainer.deepseek_v3", "--config",
      "graph_trainer_deepseek_v3_debugmodel"]  # fmt: skip


def test_read_config_in_process(
    world: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    for folder in [*world["PYTHONPATH"].split(os.pathsep)[:1], world["WORK"]]:
        monkeypatch.syspath_prepend(folder)
    try:
        config = read_config([*DS, "--parallelism.expert_parallel_degree", "2"])
        inputs, settings = config.inputs, config.settings
        assert (inputs.moe, inputs.moe_from, inputs.ep) == (True, "traverse", 2)
        assert settings["parallelism.expert_parallel_degree"].source == "CLI"
        assert settings["compile.enable_passes"].source == "config"
        with pytest.raises(ConfigError, match="could not build the config"):
            read_config(["--module", "nope", "--config", "x"])
        # A config with no model spec to traverse: the model table decides.
        old = Path(world["WORK"], "old_recipes")
        old.mkdir()
        (old / "__init__.py").write_text("")
        (old / "config_registry.py").write_text(
            "from types import SimpleNamespace as NS\n"
            "def deepseek():\n"
            "    return NS(model=NS(name='deepseek_v3', flavor='16B'))\n"
        )
        inputs = read_config(["--module", "old_recipes", "--config", "deepseek"]).inputs
        assert (inputs.moe, inputs.moe_from) == (True, "table")
    finally:
        for name in [m for m in sys.modules
                     if m.split(".")[0] in ("torchtitan", "my_recipes",
                                            "old_recipes")]:  # fmt: skip
            del sys.modules[name]


def test_read_config_reads_the_fields_of_the_streams_left_out(
    world: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The child reads them from the config object torchtitan built (the
    nested ``compile.ep_overlap.enabled`` too), the overrides named as the
    CLI's, and the dist-GEMM projections from the model spec."""
    from rocm_hwq_autoset._model import Recommendation

    for folder in [*world["PYTHONPATH"].split(os.pathsep)[:1], world["WORK"]]:
        monkeypatch.syspath_prepend(folder)
    try:
        ep = [*DS, "--parallelism.expert_parallel_degree", "2"]
        config = read_config([*ep, "--compile.ep_overlap.enabled"])
        assert config.inputs.ep_isolation and not config.inputs.dist_gemm
        assert config.settings["compile.ep_overlap.enabled"].source == "CLI"
        assert config.settings["training.disable_cuda_graphs"].source == "config"
        assert Recommendation(config.inputs).left_out_lanes == ("ep_extra",)
        off = read_config([*ep, "--compile.ep_overlap.enabled",
                           "--compile.ep-overlap.no-enabled"])  # fmt: skip
        assert not off.inputs.ep_isolation
        assert off.settings["compile.ep_overlap.enabled"].value is False
        assert "torchtitan.models.common.dist_gemm" not in sys.modules
        gemm = ["--module", "llama3", "--config", "llama3_debugmodel_dist_gemm"]
        alone = read_config(gemm)  # no TP: the stock projections run
        assert alone.inputs.dist_gemm and not alone.inputs.cudagraph
        assert Recommendation(alone.inputs).left_out_lanes == ()
        tp2 = read_config([*gemm, "--parallelism.tensor_parallel_degree", "2",
                           "--training.disable_cuda_graphs"])  # fmt: skip
        assert Recommendation(tp2.inputs).left_out_lanes == ("symm_mem",)
        assert not tp2.inputs.trainer_cudagraph
        assert tp2.settings["training.disable_cuda_graphs"].source == "CLI"
        # Now that the module is loaded, a model without them is looked into.
        assert not read_config(DS).inputs.dist_gemm
        asynchronous = read_config(
            [
                *DS,
                "--compile.enable_async_tensor_parallel",
                "--parallelism.tensor_parallel_degree=2",
            ]
        )
        assert asynchronous.inputs.async_tp and not asynchronous.inputs.dist_gemm
        assert Recommendation(asynchronous.inputs).left_out_lanes == ("symm_mem",)
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
        ("five: ['a', 'b', 'c', 'd', 'e']", "five: ['a', 'b', 'c', 'd', 'e']"),
    ],
)  # fmt: skip
def test_long_lists_are_shortened(text: str, shown: str) -> None:
    assert shorten_lists(text) == shown


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
    assert registry._why(stderr) == reason


def test_a_near_miss_of_a_flag_given_with_its_value_is_named_without_it(
    request: pytest.FixtureRequest,
) -> None:
    hint = registry._hint(["--compile.enable_passess=True"])
    assert hint.startswith(" (") and hint.endswith("?)")  # said after the reason
    # The flag meant, and the one given, without its value.
    named = {"--compile.enable_passes", "--compile.enable_passess?)"}
    assert named <= set(hint.split())
    check_lines(request, [("--compile.enable_passess=True", hint)])
    assert registry._hint(["--model.name=x"]) == ""


@pytest.mark.parametrize(
    "config",
    [SimpleNamespace(), SimpleNamespace(model_spec=SimpleNamespace())],
    ids=["no model_spec", "no model"],
)
def test_a_config_without_a_model_spec_leaves_moe_unknown(config: object) -> None:
    """Not PR #4032's form: MoE is read from the settings instead."""
    assert registry._has_moe(config) is None


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
            read_config(args)
        assert (caught.value.source, caught.value.reason) == (source, reason)
    finally:
        for name in [m for m in sys.modules
                     if m.split(".")[0] in ("torchtitan", "faulty")]:  # fmt: skip
            del sys.modules[name]

"""Every graph_trainer recipe of the real torchtitan 0.3.0 (CPU torch 2.13.0),
read by this package's child as PR #4032's model reads it.

``tools/torchtitan_venv.py`` makes that venv and names its interpreter in
``ROCM_HWQ_TORCHTITAN``; required when ``CI`` is set, skipped with the command
elsewhere. Expected Q and
lanes come from each recipe's own config values, read by torchtitan in this
test, and PR #4032's model written out here: not from this package.
"""

from __future__ import annotations

import json
import os
import runpy
import subprocess
from pathlib import Path
from typing import Any

import pytest

from ..helpers import ROOT, check_lines

#: One worker builds every case (a module fixture) and runs the tests of them.
pytestmark = [pytest.mark.e2e, pytest.mark.xdist_group("recipes")]

#: Reads a recipe with torchtitan alone and prints the values the PR reads.
RAW = """
import contextlib, io, json, sys
from torchtitan.config import ConfigManager
from torchtitan.models.common.moe import MoE
for args in json.loads(sys.argv[1]):
  try:
    with contextlib.redirect_stderr(io.StringIO()):
      c = ConfigManager().parse_args(args)
  except BaseException:
    print("RAW null", flush=True)
    continue
  p, k = c.parallelism, c.compile
  print("RAW " + json.dumps({
    "dp_shard": p.data_parallel_shard_degree, "ep": p.expert_parallel_degree,
    "tp": p.tensor_parallel_degree, "cp": p.context_parallel_degree,
    "pp": p.pipeline_parallel_degree, "dp_replicate": p.data_parallel_replicate_degree,
    "moe": any(True for _ in c.model_spec.model.traverse(MoE.Config)),
    "enable_passes": getattr(k, "enable_passes", False),
    "disable_passes": list(getattr(k, "disable_passes", [])),
    "overlap": getattr(k, "enable_fsdp_ag_rs_overlap", False),
  }), flush=True)
"""
#: Every graph_trainer recipe torchtitan 0.3.0 ships (one list, the tools').
RECIPES = runpy.run_path(str(ROOT / "tools" / "torchtitan_venv.py"))["RECIPES"]
OVERRIDES = {
    "none": [],
    "ep2": ["--parallelism.expert_parallel_degree", "2"],
    "tp2-dashed": ["--parallelism.tensor-parallel-degree=2"],
    "cp2": ["--parallelism.context_parallel_degree=2"],
    "overlap": ["--compile.enable_fsdp_ag_rs_overlap"],
    "no-cudagraph": ["--compile.disable_passes", "cudagraph_pass"],
    "dp-shard-1": ["--parallelism.data_parallel_shard_degree", "1"],
    # The pass disabled, and torchtitan 0.3.0's own compile.passes naming
    # "cudagraph" (the TOML era's rule read it as cudagraph on): the PR reads
    # no cudagraph lane.
    "no-cudagraph-passes": ["--compile.disable_passes", "cudagraph_pass",
                            "--compile.passes", "cudagraph"],
}  # fmt: skip
CASES = [
    (module, config, name)
    for module, configs in RECIPES.items()
    for config in configs
    for name in (OVERRIDES if config.endswith("debugmodel") else ["none"])
] + [("graph_trainer.llama3", "graph_trainer_llama3_70b", "no-cudagraph-passes")]


def pr_model(raw: dict[str, Any]) -> tuple[int, list[str]]:
    """PR #4032's stream model, as its description writes it."""
    lanes = ["compute", "all_reduce"]
    if raw["dp_shard"] == -1 or raw["dp_shard"] > 1:
        if raw["overlap"]:
            lanes += ["dense_all_gather", "reduce_scatter"]
        else:
            lanes += ["fsdp_comm"]
    if raw["moe"] and raw["ep"] > 1:
        lanes += ["expert_comm"]
    if raw["tp"] > 1:
        lanes += ["tp_all_gather"]
    if raw["cp"] > 1:
        lanes += ["cp_all_gather"]
    cudagraph = raw["enable_passes"] and "cudagraph_pass" not in raw["disable_passes"]
    if cudagraph and not raw["overlap"]:
        lanes += ["cudagraph_capture"]
    return 1 << (len(lanes) - 1).bit_length(), lanes


def run(python: str, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    full = {"PATH": os.environ["PATH"], "HOME": os.environ.get("HOME", "/tmp"), **env}
    return subprocess.run([python, *args], capture_output=True, text=True, env=full,
                          timeout=300)  # fmt: skip


def case_args(module: str, config: str, override: str) -> list[str]:
    return ["--module", module, "--config", config, *OVERRIDES[override]]


#: Every case in one torchtitan process: the values torchtitan itself built
#: (RAW), and what this package's child makes of the same arguments
#: (``_evaluation.registry.read_config``, what the child runs), with the
#: recommendation for no world size and for 2 ranks.
OURS = """
import json, sys
from rocm_hwq_autoset._config import ConfigError
from rocm_hwq_autoset._model import Recommendation
from rocm_hwq_autoset._evaluation.registry import read_config
for args in json.loads(sys.argv[1]):
    try:
        inputs = read_config(args).inputs
    except ConfigError as exc:
        print("OURS " + json.dumps({"error": str(exc)}), flush=True)
        continue
    try:
        queues2 = Recommendation(inputs, 2).queues
    except ConfigError:  # ParallelDims refuses these degrees for 2 ranks
        queues2 = None
    print("OURS " + json.dumps({
        "queues": Recommendation(inputs).queues,
        "lanes": list(Recommendation(inputs).lanes),
        "queues2": queues2,
    }), flush=True)
"""


#: This package's readers (``OURS``, ``REFUSALS``, ``LEFT_OUT``), each with its
#: cases, in one torchtitan process, as each reads all its cases in one (a
#: process each took an import of torchtitan more, about 8 CPU seconds): each
#: one's lines after a line with its name; one that raises prints its
#: traceback on stderr, and the next runs.
IN_ONE = """
import json, sys, traceback
for name, source, cases in json.loads(sys.argv[1]):
    print("PROGRAM " + name, flush=True)
    sys.argv = ["-c", cases]
    try:
        exec(compile(source, name, "exec"), {"__name__": "__main__"})
    except BaseException:
        traceback.print_exc()
"""


@pytest.fixture(scope="module")
def readers(python: str) -> dict[str, str]:
    """What each of this package's readers printed, by its name."""
    programs = [
        ("OURS", OURS, [case_args(*case) for case in CASES]),
        ("REFUSALS", REFUSALS, REFUSED),
        ("LEFT_OUT", LEFT_OUT, LEFT),
    ]
    done = run(python, "-c", IN_ONE, json.dumps(
        [(name, source, json.dumps(cases)) for name, source, cases in programs]
    ), ROCM_HWQ_AUTOSET="0")  # fmt: skip
    said: dict[str, list[str]] = {}
    for line in done.stdout.splitlines():
        if line.startswith("PROGRAM "):
            said[line[8:]] = []
        elif said:
            said[list(said)[-1]].append(line)
    assert list(said) == [name for name, _, _ in programs], done.stderr[-2000:]
    return {name: "\n".join(lines) for name, lines in said.items()}


@pytest.fixture(scope="module")
def every_case(python: str, readers: dict[str, str]) -> dict[tuple[str, str, str], Any]:
    every = json.dumps([case_args(*case) for case in CASES])
    raw_out = run(python, "-c", RAW, every, ROCM_HWQ_AUTOSET="0").stdout
    ours_out = readers["OURS"]
    raw = [json.loads(line[4:]) for line in raw_out.splitlines() if line[:4] == "RAW "]
    ours = [json.loads(line[5:]) for line in ours_out.splitlines()
            if line[:5] == "OURS "]  # fmt: skip
    assert len(raw) == len(ours) == len(CASES), (raw_out[-2000:], ours_out[-2000:])
    return {case: (r, o) for case, r, o in zip(CASES, raw, ours)}


@pytest.mark.parametrize(("module", "config", "override"), CASES)
def test_the_child_reads_every_recipe_as_the_pr_model_does(
    every_case: dict[tuple[str, str, str], Any], module: str, config: str,
    override: str,
) -> None:  # fmt: skip
    raw, ours = every_case[(module, config, override)]
    if raw is None:  # torchtitan itself rejects it: so does the evaluation
        assert set(ours) == {"error"}
        return
    queues, lanes = pr_model(raw)
    assert (ours["queues"], ours["lanes"]) == (queues, lanes)
    others = raw["tp"] * raw["cp"] * raw["pp"] * raw["dp_replicate"]
    shard = 2 // others if raw["dp_shard"] == -1 else raw["dp_shard"]
    if shard < 1 or shard * others != 2:  # ParallelDims refuses 2 ranks: so do we
        assert ours["queues2"] is None
        return
    two = dict(raw, dp_shard=shard)
    assert ours["queues2"] == pr_model(two)[0]


#: How a wait past 2 s starts (tests/cli/test_module_form.py pins it).
WAITING = "rocm-hwq-autoset: waiting for the --module/--config evaluation"


@pytest.mark.parametrize(
    ("args", "queues"),
    [(case_args("graph_trainer.deepseek_v3", "graph_trainer_deepseek_v3_debugmodel",
                "overlap"), 4),
     (case_args("graph_trainer.deepseek_v3", "graph_trainer_deepseek_v3_debugmodel",
                "ep2"), None)],
)  # fmt: skip
def test_explain_end_to_end(
    python: str, tmp_path: Path, args: list[str], queues: int | None
) -> None:
    explain = run(python, "-m", "rocm_hwq_autoset", "explain", "--json", "--no-cache",
                  *args)  # fmt: skip
    if queues is None:  # torchtitan rejects it (cudagraph with expert dispatch)
        assert explain.returncode == 2, explain.stdout
        assert json.loads(explain.stdout).keys() == {"error"}
        said = explain.stderr.splitlines()
        lines = [line for line in said if not line.startswith(WAITING)]  # past 2 s
        assert len(lines) == 1 and lines[0].startswith("rocm-hwq-autoset: error: ")
        return
    assert explain.returncode == 0, explain.stderr
    doc = json.loads(explain.stdout)
    assert doc["queues"] == queues
    assert doc["config"].startswith(f"--module {args[1]} --config {args[3]}")


def test_the_issues_launch_has_no_cudagraph_lane(
    every_case: dict[tuple[str, str, str], Any],
) -> None:
    """Issue #24's row: Q=4 as PR #4032's helper gives, not 8."""
    raw, ours = every_case[
        ("graph_trainer.llama3", "graph_trainer_llama3_70b", "no-cudagraph-passes")
    ]
    assert raw["enable_passes"] and "cudagraph_pass" in raw["disable_passes"]
    assert ours["queues"] == pr_model(raw)[0] == 4
    assert "cudagraph_capture" not in ours["lanes"]


#: What the evaluation says of launches torchtitan cannot build, and whether
#: this venv has the package flux's registry imports.
REFUSALS = """
import importlib.util, json, sys
from rocm_hwq_autoset._config import ConfigError
from rocm_hwq_autoset._evaluation.registry import read_config
print("HAS " + json.dumps(importlib.util.find_spec("transformers") is not None))
for args in json.loads(sys.argv[1]):
    try:
        read_config(args)
        print("SAID " + json.dumps(None), flush=True)
    except ConfigError as exc:
        print("SAID " + json.dumps(str(exc)), flush=True)
"""


#: REFUSALS' cases: a value from the command line torchtitan refuses, and a
#: module whose registry imports a package missing here.
REFUSED = [
    [
        *case_args("graph_trainer.llama3", "graph_trainer_llama3_debugmodel", "none"),
        "--parallelism.tensor_parallel_degree=0",
    ],
    ["--module", "flux", "--config", "flux_debugmodel"],
]


def test_a_refusal_names_its_cause(
    readers: dict[str, str], request: pytest.FixtureRequest
) -> None:
    """A value from the command line names its flag; torchtitan's "Cannot
    import config_registry for module 'flux'" names the package that is really
    missing."""
    out = readers["REFUSALS"]
    has = [json.loads(line[4:]) for line in out.splitlines() if line[:4] == "HAS "]
    said = [json.loads(line[5:]) for line in out.splitlines() if line[:5] == "SAID "]
    assert len(said) == 2, out[-2000:]
    assert said[0].startswith("--parallelism.tensor_parallel_degree: 0 ")  # named
    check_lines(request, [("--parallelism.tensor_parallel_degree=0", said[0])])
    if has == [False]:  # .ci/run's venv: torchtitan without transformers
        # torchtitan's own refusal, and the package really missing, named.
        assert {"(ImportError:", "'flux'", "'transformers')"} <= set(said[1].split())


#: The streams PR #4032's model leaves out (issue #31, item 2), as this
#: package's child reads them from the config objects torchtitan builds.
LEFT_OUT = """
import json, sys
from rocm_hwq_autoset._config import ConfigError
from rocm_hwq_autoset._model import Recommendation
from rocm_hwq_autoset._evaluation.registry import read_config
for args in json.loads(sys.argv[1]):
    try:
        inputs = read_config(args).inputs
    except ConfigError as exc:
        print("LEFT " + json.dumps({"error": str(exc)}), flush=True)
        continue
    rec = Recommendation(inputs)
    print("LEFT " + json.dumps({
        "left_out": list(rec.left_out_lanes), "queues": rec.queues,
        "asked": [inputs.async_tp, inputs.dist_gemm, inputs.ep_isolation,
                  inputs.trainer_cudagraph],
    }), flush=True)
"""
TP2 = ["--parallelism.tensor_parallel_degree", "2"]
DSV3_EP2 = ["--module", "graph_trainer.deepseek_v3", "--config",
            "graph_trainer_deepseek_v3_debugmodel",
            "--parallelism.expert_parallel_degree", "2",
            "--training.disable_cuda_graphs"]  # fmt: skip


#: LEFT_OUT's cases.
LEFT = [
    ["--module", "llama3", "--config", "llama3_debugmodel_dist_gemm", *TP2],
    ["--module", "llama3", "--config", "llama3_debugmodel_dist_gemm"],
    ["--module", "llama3", "--config", "llama3_debugmodel", *TP2,
     "--compile.enable", "--compile.enable_async_tensor_parallel"],
    [*DSV3_EP2, "--compile.ep_overlap.enabled"],
    [*DSV3_EP2, "--compile.ep_overlap.enabled", "--compile.ep-overlap.no-enabled"],
]  # fmt: skip


def test_the_streams_q_leaves_out_from_real_configs(readers: dict[str, str]) -> None:
    """torchtitan 0.3.0's own recipes: the dist-GEMM projections found in the
    model spec (``llama3_debugmodel_dist_gemm``), async TP from
    ``compile.enable_async_tensor_parallel``, graph_trainer's EP overlap from
    the nested ``compile.ep_overlap.enabled`` (tyro's negation too), the core
    trainer's CUDA graphs read and never a stream; Q as without them."""
    out = readers["LEFT_OUT"]
    said = [json.loads(line[5:]) for line in out.splitlines() if line[:5] == "LEFT "]
    assert len(said) == len(LEFT), out[-2000:]
    assert [(s["left_out"], s["asked"][:3]) for s in said] == [
        (["symm_mem"], [False, True, False]),
        ([], [False, True, False]),  # no TP: the stock projections run
        (["symm_mem"], [True, False, False]),
        (["ep_extra"], [False, False, True]),
        ([], [False, False, False]),
    ]
    assert [s["asked"][3] for s in said[3:]] == [False, False]

"""The ``--module``/``--config`` form against the real torchtitan 0.3.0 (CPU torch
2.13.0) and the real ``torchrun``.

``.ci/run`` builds that venv and names its interpreter in ``ROCM_HWQ_TORCHTITAN``;
required when ``CI`` is set, skipped with the reason elsewhere. Expected Q and
lanes come from each recipe's own config values, read by torchtitan in this
test, and PR #4032's model written out here: not from this package.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from .helpers import missing

pytestmark = pytest.mark.e2e

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
    "moe": any(True for _ in c.model_spec.model.traverse(MoE.Config)),
    "enable_passes": getattr(k, "enable_passes", False),
    "disable_passes": list(getattr(k, "disable_passes", [])),
    "overlap": getattr(k, "enable_fsdp_ag_rs_overlap", False),
  }), flush=True)
"""
#: The worker torchrun starts: it reports what it saw (written into the venv's
#: own torchtitan package, so the launch is a real ``-m torchtitan.*`` launch).
PROBE = """
import json, os, sys
print("PROBE " + json.dumps({"rank": os.environ.get("RANK"),
    "queues": os.environ.get("GPU_MAX_HW_QUEUES"),
    "origin": os.environ.get("ROCM_HWQ_AUTOSET_ORIGIN")}), flush=True)
"""
PROBE_MODULE = "torchtitan._hwq_probe"
#: Counts the evaluations: a ``sitecustomize`` that logs each child interpreter.
COUNTER = """
import os, sys
if "rocm_hwq_autoset._registry_child" in getattr(sys, "orig_argv", []):
    with open(os.environ["EVAL_LOG"], "a") as log:
        log.write(f"{os.getpid()}\\n")
"""

RECIPES = {
    "graph_trainer.deepseek_v3": [
        "graph_trainer_deepseek_v3_debugmodel",
        "graph_trainer_deepseek_v3_debugmodel_mxfp8",
        "graph_trainer_deepseek_v3_debugmodel_hybridep",
        "graph_trainer_deepseek_v3_debugmodel_minimal_async_ep",
        "graph_trainer_deepseek_v3_debugmodel_eager_pp",
        "graph_trainer_deepseek_v3_16b",
        "graph_trainer_deepseek_v3_16b_minimal_async_ep",
        "graph_trainer_deepseek_v3_16b_sdpa",
        "graph_trainer_deepseek_v3_671b",
    ],
    "graph_trainer.llama3": [
        "graph_trainer_llama3_debugmodel",
        "graph_trainer_llama3_debugmodel_dist_gemm",
        "graph_trainer_llama3_debugmodel_sdpa",
        "graph_trainer_llama3_debugmodel_sdpa_cross_entropy_loss",
        "graph_trainer_llama3_debugmodel_sdpa_eager",
        "graph_trainer_llama3_8b",
        "graph_trainer_llama3_8b_mxfp8",
        "graph_trainer_llama3_70b",
        "graph_trainer_llama3_405b",
    ],
    "graph_trainer.qwen3": [
        "graph_trainer_qwen3_debugmodel",
        "graph_trainer_qwen3_debugmodel_moe",
        "graph_trainer_qwen3_14b",
    ],
    "graph_trainer.muse_glimmer": ["graph_trainer_muse_glimmer_debugmodel"],
}
OVERRIDES = {
    "none": [],
    "ep2": ["--parallelism.expert_parallel_degree", "2"],
    "tp2-dashed": ["--parallelism.tensor-parallel-degree=2"],
    "cp2": ["--parallelism.context_parallel_degree=2"],
    "overlap": ["--compile.enable_fsdp_ag_rs_overlap"],
    "no-cudagraph": ["--compile.disable_passes", "cudagraph_pass"],
    "dp-shard-1": ["--parallelism.data_parallel_shard_degree", "1"],
}
CASES = [
    (module, config, name)
    for module, configs in RECIPES.items()
    for config in configs
    for name in (OVERRIDES if config.endswith("debugmodel") else ["none"])
]


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


@pytest.fixture(scope="module")
def python() -> str:
    found = os.environ.get("ROCM_HWQ_TORCHTITAN", "")
    if not found or not Path(found).exists():
        missing(
            "no venv with torch 2.13.0 and torchtitan 0.3.0: ROCM_HWQ_TORCHTITAN"
            " names its python (.ci/run builds it)"
        )
    return found


def run(python: str, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    full = {"PATH": os.environ["PATH"], "HOME": os.environ.get("HOME", "/tmp"), **env}
    return subprocess.run([python, *args], capture_output=True, text=True, env=full,
                          timeout=300)  # fmt: skip


def case_args(module: str, config: str, override: str) -> list[str]:
    return ["--module", module, "--config", config, *OVERRIDES[override]]


@pytest.fixture(scope="module")
def raw_values(python: str) -> dict[tuple[str, str, str], Any]:
    """Every case's values, read by torchtitan in one process."""
    every = [case_args(*case) for case in CASES]
    out = run(python, "-c", RAW, json.dumps(every)).stdout
    values = [json.loads(line[4:]) for line in out.splitlines() if line[:4] == "RAW "]
    assert len(values) == len(CASES), out[-2000:]
    return dict(zip(CASES, values))


@pytest.mark.parametrize(("module", "config", "override"), CASES)
def test_explain_matches_the_pr_model_on_every_recipe(
    python: str, raw_values: dict[tuple[str, str, str], Any],
    module: str, config: str, override: str,
) -> None:  # fmt: skip
    args = case_args(module, config, override)
    raw = raw_values[(module, config, override)]
    explain = run(python, "-m", "rocm_hwq_autoset", "explain", "--json", *args)
    print(json.dumps({"case": [module, config, override], "raw": raw,
                      "explain": explain.stdout[:80] or explain.stderr}))  # fmt: skip
    if raw is None:  # torchtitan itself rejects it: one clear line
        assert explain.returncode == 2, explain.stdout
        lines = explain.stderr.splitlines()
        assert len(lines) == 1 and lines[0].startswith("rocm-hwq-autoset: error: ")
        assert "Traceback" not in explain.stderr
        return
    queues, lanes = pr_model(raw)
    assert explain.returncode == 0, explain.stderr
    doc = json.loads(explain.stdout)
    assert (doc["queues"], doc["lanes"]) == (queues, lanes)
    assert doc["config"].startswith(f"--module {module} --config {config}")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def launch_env(python: str, tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    package = Path(
        run(python, "-c", "import torchtitan, os; print(os.path.dirname("
            "torchtitan.__file__))").stdout.strip()
    )  # fmt: skip
    (package / "_hwq_probe.py").write_text(PROBE)
    site = tmp_path_factory.mktemp("counter")
    (site / "sitecustomize.py").write_text(COUNTER)
    return {"PYTHONPATH": str(site), "ROCM_HWQ_AUTOSET": "force"}  # CPU torch here


def probes(out: str) -> list[dict[str, Any]]:
    return [json.loads(line[6:]) for line in out.splitlines()
            if line.startswith("PROBE ")]  # fmt: skip


ACCEPTED = ["--module", "graph_trainer.deepseek_v3", "--config",
            "graph_trainer_deepseek_v3_16b", "--parallelism.expert_parallel_degree",
            "2", "--compile.enable_fsdp_ag_rs_overlap"]  # fmt: skip
REJECTED = ["--module", "graph_trainer.deepseek_v3", "--config",
            "graph_trainer_deepseek_v3_debugmodel",
            "--parallelism.expert_parallel_degree", "2"]  # fmt: skip


@pytest.mark.parametrize(("training", "queues"), [(ACCEPTED, "8"), (REJECTED, None)])
def test_one_node_two_workers(
    python: str, launch_env: dict[str, str], tmp_path: Path,
    training: list[str], queues: str | None,
) -> None:  # fmt: skip
    log = tmp_path / "evaluations"
    env = {**launch_env, "EVAL_LOG": str(log)}
    command = [str(Path(python).parent / "torchrun"), "--standalone",
               "--nproc_per_node", "2", "-m", PROBE_MODULE, *training]  # fmt: skip
    full = {"PATH": os.environ["PATH"], "HOME": os.environ.get("HOME", "/tmp"), **env}
    done = subprocess.run(
        command, env=full, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-2000:]
    seen = probes(done.stdout)
    assert sorted(p["rank"] for p in seen) == ["0", "1"]
    assert [p["queues"] for p in seen] == [queues, queues]
    assert log.read_text().count("\n") == 1  # one evaluation for the node
    ours = [line for line in done.stderr.splitlines() if "rocm-hwq-autoset" in line]
    assert len(ours) == 1 and "Traceback" not in done.stderr
    if queues is None:
        assert ours[0].startswith("rocm-hwq-autoset: warning: --module/--config: ")
        assert [p["origin"] for p in seen] == ["unset --module"] * 2


def test_two_nodes_on_localhost(
    python: str, launch_env: dict[str, str], tmp_path: Path
) -> None:
    port = _free_port()
    runs = []
    logs = []
    for node in (0, 1):
        log = tmp_path / f"evaluations-{node}"
        logs.append(log)
        command = [str(Path(python).parent / "torchrun"), "--nnodes", "2",
                   "--nproc_per_node", "1", "--node_rank", str(node),
                   "--rdzv_backend", "c10d", "--rdzv_endpoint", f"127.0.0.1:{port}",
                   "--rdzv_id", "hwq", "-m", PROBE_MODULE, *ACCEPTED]  # fmt: skip
        full = {"PATH": os.environ["PATH"], "HOME": os.environ.get("HOME", "/tmp"),
                **launch_env, "EVAL_LOG": str(log)}  # fmt: skip
        runs.append(subprocess.Popen(command, env=full, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True))  # fmt: skip
        time.sleep(1)
    outs = [r.communicate(timeout=300) for r in runs]
    for r, (out, err) in zip(runs, outs):
        assert r.returncode == 0, err[-2000:]
        [seen] = probes(out)
        assert seen["queues"] == "8" and seen["origin"] == "8 --module"
    assert [log.read_text().count("\n") for log in logs] == [1, 1]

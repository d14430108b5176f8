"""The 23 TOML configs torchtitan shipped before its config refactor, launched
with the overrides people use. Expected lanes are written out by hand from
reading each file."""

from __future__ import annotations

import pytest

from rocm_hwq_autoset import recommend
from rocm_hwq_autoset._toml import load_toml

from .corpus import TOML_DIR, corpus_file

BASE = ("compute", "all_reduce", "fsdp_comm")
TP = (*BASE, "tp_all_gather")
EP = (*BASE, "expert_comm")
OV = ("compute", "all_reduce", "dense_all_gather", "reduce_scatter")
OV_EP = (*OV, "expert_comm")

# name: (as shipped, with --parallelism.expert_parallel_degree 2
#        --compile.enable_fsdp_ag_rs_overlap, with WORLD_SIZE=8
#        --parallelism.tensor_parallel_degree=8 --compile.enable_passes)
TG = ("compute", "all_reduce", "tp_all_gather", "cudagraph_capture")
EXPECTED = {
    "experiments__transformers_modeling_backend__debug_model.toml": (BASE, OV_EP, TG),
    "experiments__transformers_modeling_backend__full.toml": (BASE, OV_EP, TG),
    "experiments__vlm__debug_model.toml": (BASE, OV, TG),
    "models__deepseek_v3__debug_model.toml": (BASE, OV_EP, TG),
    "models__deepseek_v3__deepseek_v3_16b.toml": (
        EP, OV_EP,
        ("compute", "all_reduce", "expert_comm", "tp_all_gather", "cudagraph_capture"),
    ),
    "models__deepseek_v3__deepseek_v3_671b.toml": (BASE, OV_EP, TG),
    "models__flux__debug_model.toml": (BASE, OV, TG),
    "models__flux__flux_dev_model.toml": (BASE, OV, TG),
    "models__flux__flux_schnell_model.toml": (BASE, OV, TG),
    "models__gpt_oss__debug_model.toml": (BASE, OV_EP, TG),
    "models__llama3__debug_model.toml": (BASE, OV, TG),
    "models__llama3__llama3_405b.toml": (TP, (*OV, "tp_all_gather"), TG),
    "models__llama3__llama3_70b.toml": (TP, (*OV, "tp_all_gather"), TG),
    "models__llama3__llama3_8b.toml": (BASE, OV, TG),
    "models__llama3_ft__debug_model.toml": (BASE, OV, TG),
    "models__llama4__debug_model.toml": (BASE, OV_EP, TG),
    "models__llama4__llama4_17bx128e.toml": (TP, (*OV_EP, "tp_all_gather"), TG),
    "models__llama4__llama4_17bx16e.toml": (TP, (*OV_EP, "tp_all_gather"), TG),
    "models__qwen3__qwen3_0.6b.toml": (BASE, OV, TG),
    "models__qwen3__qwen3_1.7b.toml": (BASE, OV, TG),
    "models__qwen3__qwen3_32b.toml": (BASE, OV, TG),
    "models__qwen3__qwen3_moe_debug.toml": (BASE, OV_EP, TG),
    "tests__integration_tests__base_config.toml": (BASE, OV, TG),
}  # fmt: skip

EP2_OVERLAP = [
    "--parallelism.expert_parallel_degree",
    "2",
    "--compile.enable_fsdp_ag_rs_overlap",
]
TP8_GRAPH = ["--parallelism.tensor_parallel_degree=8", "--compile.enable_passes"]


def test_the_table_covers_the_corpus() -> None:
    if not TOML_DIR.is_dir():
        pytest.skip(f"{TOML_DIR} is absent")
    assert sorted(p.name for p in TOML_DIR.glob("*.toml")) == sorted(EXPECTED)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_corpus_config(name: str) -> None:
    shipped, ep2_overlap, tp8_graph = EXPECTED[name]
    config = load_toml(str(corpus_file(TOML_DIR, name)))
    assert recommend(config).lanes == shipped
    assert recommend(config, argv=EP2_OVERLAP).lanes == ep2_overlap
    assert recommend(config, argv=TP8_GRAPH, world_size=8).lanes == tp8_graph
    for argv in ([], EP2_OVERLAP, TP8_GRAPH):
        rec = recommend(config, argv=argv, world_size=8)
        assert rec.queues in (2, 4, 8)

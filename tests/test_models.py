"""Which models are MoE (stream-model.md section 3)."""

from __future__ import annotations

import pytest

from rocm_hwq_autoset._model import moe_by_table


@pytest.mark.parametrize(
    ("name", "flavor", "ep", "moe"),
    [
        ("deepseek_v3", "16B", 1, True),
        ("deepseek_v3", "debugmodel", 2, True),
        ("llama4", "17bx16e", 1, True),
        ("gpt_oss", "debugmodel", 1, True),
        ("qwen3", "debugmodel_moe", 1, True),
        ("qwen3", "30B-A3B", 1, True),
        ("qwen3", "235B-A22B", 1, True),
        ("qwen3", "32B", 2, False),
        ("qwen3", "0.6B", 1, False),
        ("llama3", "8B", 8, False),
        ("llama3_ft", "debugmodel", 2, False),
        ("flux", "flux-dev", 2, False),
        ("vlm", "debugmodel", 2, False),
        ("simple_fsdp.deepseek_v3", "debugmodel", 1, True),
        ("compiler_toolkit.llama3", "debugmodel", 2, False),
        ("transformers_modeling_backend", "debugmodel", 1, False),
        ("transformers_modeling_backend", "debugmodel", 2, True),
        ("my_new_model", "x", 4, True),
    ],
)
def test_is_moe(name: str, flavor: str, ep: int, moe: bool) -> None:
    assert moe_by_table(name, flavor, ep)[0] is moe

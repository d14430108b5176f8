"""Which torchtitan models are mixtures of experts (TOML era, by ``model.name``)."""

from __future__ import annotations

#: Models whose every flavor is MoE.
MOE_MODELS = frozenset({"deepseek_v3", "llama4", "gpt_oss"})
#: Models with both dense and MoE flavors: the MoE flavors.
MOE_FLAVORS = {"qwen3": frozenset({"debugmodel_moe", "30B-A3B", "235B-A22B"})}
#: Models known to be dense (qwen3 is dense outside ``MOE_FLAVORS``).
DENSE_MODELS = frozenset({"llama3", "llama3_ft", "flux", "vlm", "qwen3"})


def is_moe(name: str, flavor: str, expert_parallel_degree: int) -> bool:
    """True when the model has experts.

    Experiments prefix a model name (``simple_fsdp.deepseek_v3``): only its last
    dotted component names the model. A model this table does not know counts as
    MoE when launched with expert parallelism, which means nothing on a dense model.
    """
    base = name.rpartition(".")[2]
    if base in MOE_MODELS:
        return True
    if base in MOE_FLAVORS and flavor in MOE_FLAVORS[base]:
        return True
    if base in DENSE_MODELS:
        return False
    return expert_parallel_degree > 1

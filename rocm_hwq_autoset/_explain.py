"""Why each lane is (or is not) counted, in torchtitan's words; text and JSON."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ._api import Recommendation
from ._fields import Value
from ._models import DENSE_MODELS, MOE_FLAVORS, MOE_MODELS
from ._term import row

ALL_LANES = (
    "compute", "all_reduce", "dense_all_gather", "reduce_scatter", "fsdp_comm",
    "expert_comm", "tp_all_gather", "cp_all_gather", "cudagraph_capture",
)  # fmt: skip


def toml_value(value: Value) -> str:
    """A value as it is written in a TOML job config."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, tuple):
        return "[" + ", ".join(f'"{v}"' for v in value) + "]"
    if isinstance(value, str):
        return f'"{value}"'
    return str(value)


def reasons(rec: Recommendation, world_size: int | None) -> dict[str, str]:
    """For every lane of the model, why it is counted or not."""
    s = rec.settings

    def show(key: str) -> str:
        value, source = s[key]
        return f"{key} = {toml_value(value)} ({source})"

    overlap = show("compile.enable_fsdp_ag_rs_overlap")
    dp = _dp_shard(rec, world_size, show)
    graph = _cudagraph(rec, show)
    expert = f"{_moe(rec)}; {show('parallelism.expert_parallel_degree')}"
    return {
        "compute": "always: the step's own kernels",
        "all_reduce": "always: PR #4032 counts one all-reduce stream",
        "dense_all_gather": f"{dp}; {overlap}",
        "reduce_scatter": f"{dp}; {overlap}",
        "fsdp_comm": f"{dp}; {overlap}",
        "expert_comm": expert,
        "tp_all_gather": show("parallelism.tensor_parallel_degree"),
        "cp_all_gather": show("parallelism.context_parallel_degree"),
        "cudagraph_capture": f"{graph}; {overlap}",
    }


def _dp_shard(rec: Recommendation, world_size: int | None, show: Any) -> str:
    key = "parallelism.data_parallel_shard_degree"
    text = show(key)
    state = "active" if rec.inputs.dp_shard_active else "inactive"
    if rec.settings[key].value != -1:
        return f"{text}: {state}"
    if world_size is None:
        return f"{text}: {state} (world size unknown, as in PR #4032)"
    parts = [
        rec.settings[f"parallelism.{name}_degree"].value
        for name in ("data_parallel_replicate", "context_parallel", "tensor_parallel",
                     "pipeline_parallel")
    ]  # fmt: skip
    product = "*".join(str(p) for p in parts)
    return f"{text}: {world_size} // ({product}) ranks: {state}"


def _moe(rec: Recommendation) -> str:
    name, flavor = rec.settings["model.name"].value, rec.settings["model.flavor"].value
    label = f"model {name} ({flavor})" if name else "the model"
    base = str(name).rpartition(".")[2]
    known = base in MOE_MODELS or base in MOE_FLAVORS or base in DENSE_MODELS
    kind = "MoE" if rec.inputs.moe else "dense"
    if not name or known:
        return f"{label} is {kind}"
    return f"{label} is not in the model table: counted {kind} by its expert degree"


def _cudagraph(rec: Recommendation, show: Any) -> str:
    parts = [show("compile.enable_passes"), show("compile.disable_passes")]
    passes = rec.settings["compile.passes"]
    if passes.source != "default":
        parts.append(show("compile.passes"))
    return ", ".join(parts)


def as_text(
    rec: Recommendation,
    *,
    config_file: str | None,
    world_size: int | None,
    environment: Mapping[str, str],
) -> str:
    """The human report: lanes with their causes, Q, and what the hook would do."""
    why = reasons(rec, world_size)
    out = [
        row("config", config_file or "none: torchtitan's defaults"),
        row(
            "world size", str(world_size) if world_size else "unknown (--world-size N)"
        ),
        "",
        "GPU streams counted:",
    ]
    out += [row(lane, why[lane], indent=2) for lane in rec.lanes]
    absent = [lane for lane in ALL_LANES if lane not in rec.lanes]
    if absent:
        out += ["", "not counted:"]
        out += [row(lane, why[lane], indent=2) for lane in absent]
    out += [
        "",
        f"GPU_MAX_HW_QUEUES={rec.queues}  ({len(rec.lanes)} streams rounded up to a"
        " power of two; HIP's default: 4)",
        "",
        "in this environment:",
    ]
    out += [row(k, v, indent=2) for k, v in environment.items()]
    return "\n".join(out) + "\n"


def as_json(
    rec: Recommendation,
    *,
    config_file: str | None,
    world_size: int | None,
    environment: Mapping[str, str | bool | None],
) -> dict[str, Any]:
    return {
        "queues": rec.queues,
        "lanes": list(rec.lanes),
        "streams": len(rec.lanes),
        "config_file": config_file,
        "world_size": world_size,
        "inputs": rec.inputs._asdict(),
        "settings": {
            key: {
                "value": list(v) if isinstance(v, tuple) else v,
                "source": source,
            }
            for key, (v, source) in rec.settings.items()
        },
        "reasons": reasons(rec, world_size),
        "environment": dict(environment),
    }

"""``explain``: the lanes, why each is (or is not) counted, Q, and what the hook
would do here. Every reason is read from what the model derived."""

from __future__ import annotations

import json
import os
import sys
import textwrap
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, TextIO

from .. import _decision as env
from .._launch import ConfigError, config_file_arg
from .._model import ALL_LANES
from .._rocm import detect
from . import describe, fail, hook_outcome, recommendation
from .term import row

if TYPE_CHECKING:
    import argparse

    from .._launch import Value
    from .._model import Recommendation


def run_explain(opts: argparse.Namespace, out: TextIO) -> int:
    training: list[str] = opts.training
    world_size = opts.world_size
    if world_size is not None and world_size < 1:
        return fail(f"--world-size {world_size}: must be >= 1")
    try:
        rec, source = recommendation(training, world_size)
    except ConfigError as exc:
        return fail(str(exc))
    # For a --module launch the hook would evaluate this very config: reuse it.
    outcome = hook_outcome(training, lambda *_: (rec.queues, rec.lanes))
    verdict = detect(sys.path, os.environ)
    current = os.environ.get(env.QUEUES)
    explicit = env.explicit_queues(os.environ)
    if opts.json:
        doc = as_json(rec, source=source, world_size=world_size)
        doc["config_file"] = config_file_arg(training)
        doc["environment"] = {
            "rocm": verdict.rocm,
            "rocm_evidence": verdict.evidence,
            "gpu_max_hw_queues": current or None,
            "explicit": explicit is not None,
            "opted_out": env.switch(os.environ) == "off",
            "hook": describe(outcome),
        }
        out.write(json.dumps(doc, indent=2) + "\n")
        return 0
    text = as_text(
        rec,
        source=source,
        world_size=world_size,
        environment={
            "ROCm": ("yes: " if verdict.rocm else "no: ") + verdict.evidence,
            env.QUEUES: (
                "unset" if not current
                else f"{current} (explicit: the hook leaves it)" if explicit
                else f"{current} (set by rocm-hwq-autoset)"
            ),
            env.SWITCH: os.environ.get(env.SWITCH, "unset"),
            "the hook": describe(outcome),
        },
    )  # fmt: skip
    if opts.export:
        sys.stderr.write(text)
        out.write(f"export {env.QUEUES}={rec.queues}\n")
    else:
        out.write(text)
    return 0


def toml_value(value: Value) -> str:
    """A value as it is written in a TOML job config."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, tuple):
        return "[" + ", ".join(f'"{v}"' for v in value) + "]"
    if isinstance(value, str):
        return f'"{value}"'
    return str(value)


def reasons(rec: Recommendation) -> dict[str, str]:
    """For every lane of the model, why it is counted, or why not."""
    s, job = rec.settings, rec.inputs

    def show(key: str) -> str:
        return f"{key} = {toml_value(s[key].value)} ({s[key].source})"

    overlap = show("compile.enable_fsdp_ag_rs_overlap")
    fsdp = _fsdp(rec, show)
    moe = _moe(rec)
    ep = show("parallelism.expert_parallel_degree")
    graph = _cudagraph(rec, show)
    why = {
        "compute": "always: the step's own kernels",
        "all_reduce": "always: PR #4032 counts one all-reduce stream",
        "expert_comm": f"{moe}; {ep}"
        if job.moe and job.expert_parallel_degree > 1
        else moe
        if not job.moe
        else f"{moe}, but {ep}: no expert parallelism",
    }
    if not job.dp_shard_active:
        for lane in ("dense_all_gather", "reduce_scatter", "fsdp_comm"):
            why[lane] = fsdp
    elif job.fsdp_ag_rs_overlap:
        why["dense_all_gather"] = why["reduce_scatter"] = f"{fsdp}; {overlap}"
        why["fsdp_comm"] = f"split into dense_all_gather and reduce_scatter: {overlap}"
    else:
        why["fsdp_comm"] = f"{fsdp}; {overlap}"
        why["dense_all_gather"] = why["reduce_scatter"] = (
            f"one fsdp_comm lane instead: {overlap}"
        )
    for lane, name, what in (
        ("tp_all_gather", "tensor", job.tensor_parallel_degree),
        ("cp_all_gather", "context", job.context_parallel_degree),
    ):
        text = show(f"parallelism.{name}_parallel_degree")
        why[lane] = text if what > 1 else f"{text}: no {name} parallelism"
    if job.cudagraph and job.fsdp_ag_rs_overlap:
        why["cudagraph_capture"] = f"{graph}; not counted with {overlap}, as in the PR"
    else:
        why["cudagraph_capture"] = graph
    return why


def _fsdp(rec: Recommendation, show: Callable[[str], str]) -> str:
    key = "parallelism.data_parallel_shard_degree"
    text = show(key)
    job = rec.inputs
    state = "FSDP on" if job.dp_shard_active else "FSDP off"
    if rec.settings[key].value != -1:
        return f"{state}: {text}"
    if job.dp_shard_degree is None:
        return f"{state}: {text}, world size unknown (as in PR #4032)"
    parts = "*".join(
        str(rec.settings[f"parallelism.{name}_degree"].value)
        for name in ("data_parallel_replicate", "context_parallel", "tensor_parallel",
                     "pipeline_parallel")
    )  # fmt: skip
    return (
        f"{state}: {text} resolves to {job.dp_shard_degree} = WORLD_SIZE // ({parts})"
    )


def _moe(rec: Recommendation) -> str:
    job = rec.inputs
    name, flavor = rec.settings["model.name"].value, rec.settings["model.flavor"].value
    kind = "MoE" if job.moe else "dense"
    if job.moe_from == "traverse":
        has = "has" if job.moe else "has no"
        return f"the model {has} MoE layers (model_spec.model.traverse(MoE.Config))"
    if job.moe_from == "given":
        return f"the model is {kind} (as given)"
    label = f"model {name} ({flavor})"
    if job.moe_from == "table":
        return f"{label} is {kind}"
    if job.moe:
        return f"{label} is not in the model table: counted MoE by its expert degree"
    return f"{label} is not in the model table and has no expert parallelism: dense"


def _cudagraph(rec: Recommendation, show: Callable[[str], str]) -> str:
    parts = [show("compile.enable_passes"), show("compile.disable_passes")]
    if rec.settings["compile.passes"].source != "default":
        parts.append(show("compile.passes"))
    state = "cudagraph on" if rec.inputs.cudagraph else "cudagraph off"
    return f"{state}: " + ", ".join(parts)


def as_text(
    rec: Recommendation,
    *,
    source: str,
    world_size: int | None,
    environment: Mapping[str, str],
) -> str:
    """The human report: lanes with their causes, Q, and what the hook would do."""
    why = reasons(rec)
    out = [
        row("config", source),
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
        textwrap.fill(
            f"{env.QUEUES}={rec.queues}  ({len(rec.lanes)} streams, rounded up to"
            f" a power of two as PR #4032 does; HIP's default:"
            f" {env.HIP_DEFAULT_QUEUES})",
            79, subsequent_indent="  ", break_long_words=False,
        ),
        "",
        "in this environment:",
    ]  # fmt: skip
    out += [row(k, v, indent=2) for k, v in environment.items()]
    return "\n".join(out) + "\n"


def as_json(
    rec: Recommendation, *, source: str, world_size: int | None
) -> dict[str, object]:
    return {
        "queues": rec.queues,
        "lanes": list(rec.lanes),
        "streams": len(rec.lanes),
        "config": source,
        "world_size": world_size,
        "inputs": rec.inputs.as_dict(),
        "settings": {
            key: {
                "value": list(s.value) if isinstance(s.value, tuple) else s.value,
                "source": s.source,
            }
            for key, s in rec.settings.items()
        },
        "reasons": reasons(rec),
    }

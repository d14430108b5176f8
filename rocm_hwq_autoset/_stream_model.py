"""The stream model of pytorch/torchtitan PR #4032: GPU streams in, queues out.

Pure functions, no I/O. HIP maps streams onto ``GPU_MAX_HW_QUEUES`` hardware
queues by ``stream_id % Q``; each *lane* below is a stream that must not share a
queue with another for its work to overlap.
"""

from __future__ import annotations

from typing import NamedTuple


class Inputs(NamedTuple):
    """What the model needs to know about a training job."""

    dp_shard_active: bool
    moe: bool
    expert_parallel_degree: int
    tensor_parallel_degree: int
    context_parallel_degree: int
    cudagraph: bool
    fsdp_ag_rs_overlap: bool


def lanes(job: Inputs) -> tuple[str, ...]:
    """The independent GPU streams of one training step, in the PR's order."""
    out = ["compute", "all_reduce"]
    if job.dp_shard_active:
        if job.fsdp_ag_rs_overlap:
            out += ["dense_all_gather", "reduce_scatter"]
        else:
            out.append("fsdp_comm")
    if job.moe and job.expert_parallel_degree > 1:
        # Expert all-gather and all-to-all never overlap: one lane.
        out.append("expert_comm")
    if job.tensor_parallel_degree > 1:
        out.append("tp_all_gather")
    if job.context_parallel_degree > 1:
        out.append("cp_all_gather")
    if job.cudagraph and not job.fsdp_ag_rs_overlap:
        out.append("cudagraph_capture")
    return tuple(out)


def queues_for(n_lanes: int) -> int:
    """The next power of two at or above ``n_lanes`` (the PR's rounding)."""
    return 1 << (max(n_lanes, 1) - 1).bit_length()

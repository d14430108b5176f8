"""Why PR #4032's model leaves out the GPU streams it has no lane for, and the
``verify`` command that settles each on a profiler trace: said by ``explain``,
``doctor`` and the verbose line, never by a launch's decision, which imports
none of it (Q stays the PR's: they are said, not counted).
"""

from __future__ import annotations

from ._environ import NAME

#: Each GPU stream a config can turn on (torchtitan 0.3.0) that PR #4032's
#: model has no lane for: why Q leaves it out, in one clause, and the pool
#: rule ``verify --pools`` is to judge its trace by (None: the one ``verify``
#: chooses). The table that decides each is ``_model.Recommendation.left_out``.
#:
#: - ``symm_mem``: async TP (inductor's micro-pipeline TP pass) and the
#:   dist-GEMM projections (``distributed/linear.py``) call
#:   ``torch.ops.symm_mem`` fused all-gather/reduce-scatter matmuls, which run
#:   on torch's one symmetric-memory backend stream
#:   (``torch/distributed/_symmetric_memory``, ``_get_backend_stream``): one
#:   lane for both, where ``tensor_parallel_degree > 1``.
#: - ``ep_extra``: graph_trainer's ``isolate_ep_process_group_pass`` gives the
#:   expert all-to-alls a process group of their own (``ep_extra``) with
#:   ``is_high_priority_stream=True`` when they share one with another
#:   collective: a high-priority NCCL stream, in a pool of its own before
#:   ROCm/rocm-systems#8485 and in the normal one with it (``_pools``).
#: - ``trainer_cudagraph``: the core trainer's capture stream
#:   (``distributed/cudagraph.py``) is made on NVIDIA only:
#:   ``wrap_with_cuda_graph`` runs the step eagerly where ``torch.version.hip``
#:   is set, whatever ``training.disable_cuda_graphs`` says, so on ROCm it is
#:   never a stream.
LEFT_OUT: dict[str, tuple[str, str | None]] = {
    "symm_mem": (
        "async TP's and dist-GEMM's fused all-gather/reduce-scatter matmuls run"
        " on torch's symmetric-memory stream, which PR #4032 has no lane for",
        None,
    ),
    "ep_extra": (
        "graph_trainer's extra EP group runs the expert all-to-alls on a"
        " high-priority NCCL stream PR #4032 has no lane for: a pool of its own"
        " before ROCm/rocm-systems#8485, the normal one with it",
        "shared",
    ),
    "trainer_cudagraph": (
        "torchtitan 0.3.0 makes the core trainer's CUDA-graph capture stream on"
        " NVIDIA only: on ROCm it runs the step eagerly",
        None,
    ),
}


def verify_command(lane: str, queues: int) -> str:
    """The ``verify`` command that settles a left-out stream on a profiler
    trace of the run: its streams per pool against Q (and the pools it is
    judged by, where the stream's priority matters)."""
    pools = LEFT_OUT[lane][1]
    option = "" if pools is None else f" --pools {pools}"
    return f"{NAME} verify --queues {queues}{option} TRACE"

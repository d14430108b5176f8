"""The stream model of pytorch/torchtitan PR #4032."""

from __future__ import annotations

import itertools

import pytest

from rocm_hwq_autoset import recommend
from rocm_hwq_autoset._model import Inputs, lanes, queues_for


def job(**kw: object) -> Inputs:
    base = dict(
        dp_shard_active=True,
        moe=False,
        expert_parallel_degree=1,
        tensor_parallel_degree=1,
        context_parallel_degree=1,
        cudagraph=False,
        fsdp_ag_rs_overlap=False,
    )
    base.update(kw)
    return Inputs(**base)  # type: ignore[arg-type]


# The PR's unit-test vectors (tp = cp = 1).
PR_VECTORS = [
    (
        job(
            moe=True, expert_parallel_degree=2, fsdp_ag_rs_overlap=True, cudagraph=True
        ),
        ("compute", "all_reduce", "dense_all_gather", "reduce_scatter", "expert_comm"),
        8,
    ),
    (
        job(moe=True, expert_parallel_degree=2, cudagraph=True),
        ("compute", "all_reduce", "fsdp_comm", "expert_comm", "cudagraph_capture"),
        8,
    ),
    (job(), ("compute", "all_reduce", "fsdp_comm"), 4),
]


@pytest.mark.parametrize(("inputs", "expected", "q"), PR_VECTORS)
def test_pr_vectors(inputs: Inputs, expected: tuple[str, ...], q: int) -> None:
    assert lanes(inputs) == expected
    assert queues_for(len(expected)) == q


@pytest.mark.parametrize(
    ("n", "q"),
    [(0, 1), (1, 1), (2, 2), (3, 4), (4, 4), (5, 8), (7, 8), (8, 8), (9, 16)],
)
def test_next_power_of_two(n: int, q: int) -> None:
    assert queues_for(n) == q


COMBINATIONS = list(
    itertools.product(
        [False, True],
        [False, True],
        [1, 2],
        [1, 2],
        [1, 2],
        [False, True],
        [False, True],
    )
)


@pytest.mark.parametrize(
    ("dp", "moe", "ep", "tp", "cp", "graph", "overlap"), COMBINATIONS
)
def test_every_combination(
    dp: bool, moe: bool, ep: int, tp: int, cp: int, graph: bool, overlap: bool
) -> None:
    got = lanes(job(dp_shard_active=dp, moe=moe, expert_parallel_degree=ep,
                    tensor_parallel_degree=tp, context_parallel_degree=cp,
                    cudagraph=graph, fsdp_ag_rs_overlap=overlap))  # fmt: skip
    # Each lane is present exactly when the PR's condition for it holds.
    want = {
        "compute": True,
        "all_reduce": True,
        "dense_all_gather": dp and overlap,
        "reduce_scatter": dp and overlap,
        "fsdp_comm": dp and not overlap,
        "expert_comm": moe and ep > 1,
        "tp_all_gather": tp > 1,
        "cp_all_gather": cp > 1,
        "cudagraph_capture": graph and not overlap,
    }
    assert set(got) == {name for name, on in want.items() if on}
    assert len(got) == len(set(got))
    q = queues_for(len(got))
    assert q & (q - 1) == 0 and q >= len(got) > q // 2
    assert 2 <= q <= 8


@pytest.mark.parametrize(
    ("dp", "moe", "ep", "tp", "cp", "graph", "overlap"), COMBINATIONS
)
def test_every_combination_through_a_config(
    dp: bool, moe: bool, ep: int, tp: int, cp: int, graph: bool, overlap: bool
) -> None:
    """The same combinations, written as a torchtitan config reads them."""
    config = {
        "model": {"name": "deepseek_v3" if moe else "llama3"},
        "parallelism": {
            "data_parallel_shard_degree": -1 if dp else 1,
            "expert_parallel_degree": ep,
            "tensor_parallel_degree": tp,
            "context_parallel_degree": cp,
        },
        "compile": {"enable_passes": graph, "enable_fsdp_ag_rs_overlap": overlap},
    }
    rec = recommend(config)
    assert rec.lanes == lanes(
        job(dp_shard_active=dp, moe=moe, expert_parallel_degree=ep,
            tensor_parallel_degree=tp, context_parallel_degree=cp,
            cudagraph=graph, fsdp_ag_rs_overlap=overlap)
    )  # fmt: skip
    assert rec.queues == queues_for(len(rec.lanes))

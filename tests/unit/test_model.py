"""The stream model of pytorch/torchtitan PR #4032 (its description and unit-test
vectors) and its inputs, which a launcher hands to its workers."""

from __future__ import annotations

import itertools
from typing import Any

import pytest

from rocm_hwq_autoset import ConfigError, recommend
from rocm_hwq_autoset._evaluation.answer import config_from_json
from rocm_hwq_autoset._model import (
    FACT_KEYS,
    MAX_QUEUES,
    MIN_LANES,
    Inputs,
    Recommendation,
    decode_inputs,
    encode_inputs,
    moe_by_table,
    queues_for,
    resolve_shard,
)

from ..helpers import check_lines

#: Every test here is known fast (the ini's 600 s is for the slow ones).
pytestmark = pytest.mark.timeout(60)

#: The PR's unit-test vectors (tp = cp = 1), as its description writes them.
PR_VECTORS = [
    (
        Inputs(moe=True, ep=2, overlap=True, cudagraph=True),
        ("compute", "all_reduce", "dense_all_gather", "reduce_scatter", "expert_comm"),
        8,
    ),
    (
        Inputs(moe=True, ep=2, cudagraph=True),
        ("compute", "all_reduce", "fsdp_comm", "expert_comm", "cudagraph_capture"),
        8,
    ),
    (Inputs(), ("compute", "all_reduce", "fsdp_comm"), 4),
]


@pytest.mark.parametrize(("inputs", "expected", "q"), PR_VECTORS)
def test_pr_vectors(inputs: Inputs, expected: tuple[str, ...], q: int) -> None:
    rec = Recommendation(inputs)
    assert rec.lanes == expected
    assert rec.queues == q


@pytest.mark.parametrize(
    ("n", "q"),
    [(0, 1), (1, 1), (2, 2), (3, 4), (4, 4), (5, 8), (7, 8), (8, 8), (9, 16)],
)
def test_next_power_of_two(n: int, q: int) -> None:
    assert queues_for(n) == q


COMBINATIONS = list(
    itertools.product(
        [False, True], [False, True], [1, 2], [1, 2], [1, 2], [False, True],
        [False, True],
    )
)  # fmt: skip


def pr_lanes(
    dp: bool, moe: bool, ep: int, tp: int, cp: int, graph: bool, overlap: bool
) -> list[str]:
    """The PR's model, as its description writes it."""
    lanes = ["compute", "all_reduce"]
    if dp:
        lanes += ["dense_all_gather", "reduce_scatter"] if overlap else ["fsdp_comm"]
    if moe and ep > 1:
        lanes.append("expert_comm")
    if tp > 1:
        lanes.append("tp_all_gather")
    if cp > 1:
        lanes.append("cp_all_gather")
    if graph and not overlap:
        lanes.append("cudagraph_capture")
    return lanes


@pytest.mark.parametrize(
    ("dp", "moe", "ep", "tp", "cp", "graph", "overlap"), COMBINATIONS
)
def test_every_combination(
    dp: bool, moe: bool, ep: int, tp: int, cp: int, graph: bool, overlap: bool
) -> None:
    inputs = Inputs(dp_shard=-1 if dp else 1, moe=moe, ep=ep, tp=tp, cp=cp,
                    cudagraph=graph, overlap=overlap)  # fmt: skip
    rec = Recommendation(inputs)
    want = pr_lanes(dp, moe, ep, tp, cp, graph, overlap)
    assert list(rec.lanes) == want  # the lanes, in the PR's order
    assert rec.queues == 1 << (len(want) - 1).bit_length()
    assert rec.queues in (2, 4, 8)
    # The table has every lane once, counted or not.
    assert sorted(name for name, _, _ in rec.table) == sorted(
        ["compute", "all_reduce", "dense_all_gather", "reduce_scatter", "fsdp_comm",
         "expert_comm", "tp_all_gather", "cp_all_gather", "cudagraph_capture"]
    )  # fmt: skip
    assert [name for name, counted, _ in rec.table if counted] == want


def test_the_fewest_lanes_and_the_largest_q_are_the_tables() -> None:
    """verify's advice reads them: the model's bounds over every combination."""
    recs = [Recommendation(Inputs(dp_shard=-1 if dp else 1, moe=moe, ep=ep, tp=tp,
                                  cp=cp, cudagraph=graph, overlap=overlap))
            for dp, moe, ep, tp, cp, graph, overlap in COMBINATIONS]  # fmt: skip
    assert min(len(rec.lanes) for rec in recs) == MIN_LANES
    assert max(rec.queues for rec in recs) == MAX_QUEUES


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
    assert list(rec.lanes) == pr_lanes(dp, moe, ep, tp, cp, graph, overlap)


def test_each_lane_names_the_facts_that_decided_it() -> None:
    rec = Recommendation(Inputs(moe=True, ep=2, tp=2, overlap=True, cudagraph=True))
    table = {name: (counted, facts) for name, counted, facts in rec.table}
    assert table == {
        "compute": (True, ()),
        "all_reduce": (True, ()),
        "dense_all_gather": (True, ("fsdp", "overlap")),
        "reduce_scatter": (True, ("fsdp", "overlap")),
        "fsdp_comm": (False, ("fsdp", "overlap")),
        "expert_comm": (True, ("moe", "expert")),
        "tp_all_gather": (True, ("tensor",)),
        "cp_all_gather": (False, ("context",)),
        "cudagraph_capture": (False, ("cudagraph", "overlap")),
    }
    assert rec.facts == {
        "fsdp": True, "overlap": True, "moe": True, "expert": True, "tensor": True,
        "context": False, "cudagraph": True, "async_tp": False, "dist_gemm": False,
        "ep_isolation": False, "trainer_cudagraph": False,
    }  # fmt: skip
    assert set(FACT_KEYS) == set(rec.facts)


@pytest.mark.parametrize(
    ("inputs", "world", "resolved"),
    [
        (Inputs(), None, None),  # the launcher: unknown
        (Inputs(), 8, 8),
        (Inputs(tp=8), 8, 1),  # one node of 8 with TP=8: no FSDP
        (Inputs(tp=4, pp=2, dp_replicate=2), 16, 1),
        (Inputs(tp=4, cp=2), 16, 2),
        (Inputs(dp_shard=4), None, 4),
        (Inputs(dp_shard=1), 1, 1),
    ],
)
def test_shard_degree_resolves_like_parallel_dims(
    inputs: Inputs, world: int | None, resolved: int | None
) -> None:
    assert resolve_shard(inputs, world) == resolved
    rec = Recommendation(inputs, world)
    assert rec.dp_shard == resolved
    assert rec.facts["fsdp"] is (resolved is None or resolved > 1)


def test_inputs_round_trip_and_refuse_anything_else() -> None:
    for inputs in (
        Inputs(),
        Inputs(
            dp_shard=4,
            dp_replicate=2,
            tp=8,
            cp=2,
            pp=4,
            ep=16,
            moe=True,
            moe_from="traverse",
            cudagraph=True,
            overlap=True,
            async_tp=True,
            dist_gemm=True,
            ep_isolation=True,
            trainer_cudagraph=True,
        ),
    ):
        assert decode_inputs(encode_inputs(inputs)) == inputs
    good = encode_inputs(Inputs())
    for bad in (
        "", "tp=1", good + ",tp=1", good.replace("tp=1", "tp=0"),
        good.replace("tp=1", "tp=-1"), good.replace("tp=1", "tp=x"),
        good.replace("tp=1", "tp=१"),  # a digit, but not an ASCII one
        good.replace("dp_shard=-1", "dp_shard=-2"), good.replace("moe=0", "moe=2"),
        good.replace("moe_from=given", "moe_from=guess"), good.replace(",", ";"),
        good.replace("overlap=0", "overlap=true"), good + ",extra=1",
    ):  # fmt: skip
        with pytest.raises(ConfigError):
            decode_inputs(bad)
    assert decode_inputs(good.replace("dp_shard=-1", "dp_shard=3")).dp_shard == 3


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


GOOD = encode_inputs(Inputs())


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("tp", "'tp' is not one of the model's inputs"),
        ("=2", "'=2' is not one of the model's inputs"),
        (GOOD + ",tp=1", "'tp=1' is not one of the model's inputs"),
        ("x" * 50, f"'{'x' * 40}' is not one of the model's inputs"),
        ("tp=1", "some of the model's inputs are missing"),
        (GOOD.replace("moe_from=given", "moe_from=" + "g" * 45),
         f"moe_from='{'g' * 40}' is unknown"),
        (GOOD.replace("moe=0", "moe=" + "1" * 45), f"moe='{'1' * 40}' is not 0 or 1"),
        (GOOD.replace("tp=1", "tp=2=3"), "tp='2=3' is not a degree"),
        (GOOD.replace("tp=1", "tp=" + "x" * 45), f"tp='{'x' * 40}' is not a degree"),
        (GOOD.replace("tp=1", "tp=0" + "0" * 45), f"tp='{'0' * 40}' is not a degree"),
    ],
)  # fmt: skip
def test_inputs_that_are_not_a_launchers_are_said(text: str, said: str) -> None:
    """A worker says why it kept its launcher's value: this is the line."""
    with pytest.raises(ConfigError) as caught:
        decode_inputs(text)
    assert str(caught.value) == said


def test_inputs_as_the_repl_shows_them(request: pytest.FixtureRequest) -> None:
    shown = repr(Inputs(tp=2, moe=True))  # every field, by name, in order
    assert eval(shown, {"Inputs": Inputs}) == Inputs(tp=2, moe=True)
    check_lines(request, [("Inputs(tp=2, moe=True)", shown)])


@pytest.mark.parametrize(
    "doc", [None, [], {}, {"inputs": 3}, {"settings": {}}, {"inputs": None}]
)
def test_what_is_not_an_evaluations_config_is_said(
    doc: object, request: pytest.FixtureRequest
) -> None:
    """A child's answer or a cache entry that is not a config: one reason,
    the same for each (one golden for every case)."""
    with pytest.raises(ConfigError) as caught:
        config_from_json(doc)
    check_lines(request, [("not a config", str(caught.value))], every_case=False)


def test_moe_given_by_the_caller_is_said_to_be_given() -> None:
    rec = recommend({"model": {"name": "llama3"}}, is_moe=True)
    assert (rec.inputs.moe, rec.inputs.moe_from) == (True, "given")
    assert "expert_comm" not in rec.lanes  # MoE, but no expert parallelism
    assert recommend(None).inputs.moe_from == "table"
    unknown = recommend({"model": {"name": "my_model"}},
                        argv=["--parallelism.expert_parallel_degree", "2"])  # fmt: skip
    assert (unknown.inputs.moe, unknown.inputs.moe_from) == (True, "expert degree")


@pytest.mark.parametrize(
    ("enable", "disable", "passes", "toml", "module"),
    [
        (False, (), (), False, False),
        (True, (), (), True, True),
        (True, ("cudagraph_pass",), (), False, False),
        (True, ("other_pass",), (), True, True),
        # The TOML era's compiler_toolkit: "cudagraph" in compile.passes.
        (False, (), ("cudagraph",), True, False),
        # The issue's launch: the pass disabled, compile.passes (0.3.0's own
        # meaning) naming cudagraph: no lane in a --module launch, as in the PR.
        (True, ("cudagraph_pass",), ("cudagraph",), True, False),
    ],
)  # fmt: skip
def test_cudagraph_is_read_as_the_pr_reads_it_in_the_module_form(
    enable: bool, disable: tuple[str, ...], passes: tuple[str, ...],
    toml: bool, module: bool,
) -> None:  # fmt: skip
    from rocm_hwq_autoset._argv import MODULE, TOML
    from rocm_hwq_autoset._config import merge
    from rocm_hwq_autoset._model import read_inputs

    config = {"compile": {"enable_passes": enable, "disable_passes": list(disable),
                          "passes": list(passes)}}  # fmt: skip
    settings = merge(config, {})
    assert read_inputs(settings).cudagraph is toml  # the TOML form by default
    assert read_inputs(settings, toolkit_passes=TOML.toolkit_passes).cudagraph is toml
    assert (
        read_inputs(settings, toolkit_passes=MODULE.toolkit_passes).cudagraph is module
    )


def test_the_forms_are_the_markers_forms() -> None:
    """Each launch form is named as ``ROCM_HWQ_AUTOSET_ORIGIN`` names it, in
    one order: a marker names one form."""
    from rocm_hwq_autoset import _argv, _environ

    assert _argv.FORMS == _environ.FORMS
    assert [type(form) for form in _argv.FORMS] == [_argv.Form] * 2


@pytest.mark.parametrize("world_size", [0, -5, True, False, "8", 8.0, 2.5])
def test_recommend_refuses_a_world_size_that_is_no_positive_int(
    world_size: object, request: pytest.FixtureRequest
) -> None:
    with pytest.raises(ConfigError) as caught:
        recommend({}, world_size=world_size)  # type: ignore[arg-type]
    said = str(caught.value)  # the argument, and the value given
    assert said.startswith(f"recommend(world_size=...): {world_size!r} ")
    said = said.replace(repr(world_size), "VALUE")
    check_lines(request, [("world_size=VALUE", said)], every_case=False)


@pytest.mark.parametrize(
    ("config", "where"),
    [({1: 2}, "the top table"), ({"parallelism": {3: 4}}, "[parallelism]"),
     ({"job": {"custom_config_module": "m"}, "compile": {"x": {(1,): 0}}},
      "[compile.x]")],
)  # fmt: skip
def test_recommend_refuses_a_key_that_is_no_string(
    config: dict[Any, Any], where: str, request: pytest.FixtureRequest
) -> None:
    """Was: a TypeError from the unknown keys' search (a custom module's
    config: ignored before that)."""
    with pytest.raises(ConfigError) as caught:
        recommend(config)
    key = str(caught.value).partition("key ")[2].partition(f" of {where} ")[0]
    assert caught.value.source == "recommend(config=...)" and key
    said = str(caught.value).replace(where, "TABLE").replace(key, "KEY")
    check_lines(request, [("config: a key no string", said)], every_case=False)


def test_recommend_takes_a_positive_int_or_none() -> None:
    assert recommend({}, world_size=1).dp_shard == 1
    assert recommend({}, world_size=8).dp_shard == 8
    assert recommend({}).dp_shard is None


@pytest.mark.parametrize("argv", ["--parallelism.expert_parallel_degree 2", b"x", [2]])
def test_recommend_refuses_argv_that_is_no_list_of_arguments(
    argv: Any, request: pytest.FixtureRequest
) -> None:
    """Was: a string was read character by character and silently ignored (Q=4
    without the expert lane)."""
    with pytest.raises(ConfigError) as caught:
        recommend({"model": {"name": "deepseek_v3"}}, argv=argv)
    assert str(caught.value).split()[0] == "recommend(argv=...):"
    check_lines(request, [("argv: no list", str(caught.value))], every_case=False)

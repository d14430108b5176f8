"""The GPU streams PR #4032's model leaves out (issue #31, item 2): which a
config turns on, read from every field in both launch forms, with Q left as
the PR computes it. Expected streams are written out here from torchtitan
0.3.0's code (the comment of ``_left_out.LEFT_OUT`` says where each is made),
not from the package's table."""

from __future__ import annotations

import itertools
import types

import pytest

from rocm_hwq_autoset import ConfigError, recommend
from rocm_hwq_autoset._argv import MODULE
from rocm_hwq_autoset._cli.verify import OPTIONS as VERIFY_OPTIONS
from rocm_hwq_autoset._config import FIELDS, Setting, merge, parse_toml
from rocm_hwq_autoset._left_out import LEFT_OUT, verify_command
from rocm_hwq_autoset._model import (
    Inputs,
    Recommendation,
    decode_inputs,
    encode_inputs,
    read_inputs,
)
from rocm_hwq_autoset._pools import OPTION, RULES

#: Every test here is known fast (the ini's 600 s is for the slow ones).
pytestmark = pytest.mark.timeout(60)

ns = types.SimpleNamespace
DEEPSEEK = {"model": {"name": "deepseek_v3", "flavor": "16B"}}


def left_out(
    tp: int, async_tp: bool, dist_gemm: bool, moe: bool, ep: int, isolation: bool
) -> list[str]:
    """The streams left out, as torchtitan 0.3.0 makes them: the
    symmetric-memory stream where TP runs through symm_mem's fused matmuls,
    the extra EP group's stream where graph_trainer isolates the expert
    all-to-alls; the core trainer's capture stream never on ROCm."""
    streams = []
    if tp > 1 and (async_tp or dist_gemm):
        streams.append("symm_mem")
    if moe and ep > 1 and isolation:
        streams.append("ep_extra")
    return streams


COMBINATIONS = list(itertools.product(
    [1, 2], [False, True], [False, True], [False, True], [1, 2], [False, True],
    [False, True],
))  # fmt: skip


@pytest.mark.parametrize(
    ("tp", "async_tp", "dist_gemm", "moe", "ep", "isolation", "graphs"), COMBINATIONS
)
def test_every_combination_and_q_stays_the_prs(
    tp: int, async_tp: bool, dist_gemm: bool, moe: bool, ep: int, isolation: bool,
    graphs: bool,
) -> None:  # fmt: skip
    given = Inputs(tp=tp, moe=moe, ep=ep, async_tp=async_tp, dist_gemm=dist_gemm,
                   ep_isolation=isolation, trainer_cudagraph=graphs)  # fmt: skip
    rec = Recommendation(given)
    want = left_out(tp, async_tp, dist_gemm, moe, ep, isolation)
    assert list(rec.left_out_lanes) == want
    assert [name for name, on, _ in rec.left_out if on] == want
    assert [name for name, _, _ in rec.left_out] == list(LEFT_OUT)
    # Q and the lanes are the PR's, as without any of the new inputs.
    pr = Recommendation(Inputs(tp=tp, moe=moe, ep=ep))
    assert (rec.queues, rec.lanes, rec.table) == (pr.queues, pr.lanes, pr.table)


def test_each_stream_names_the_facts_that_decided_it() -> None:
    rec = Recommendation(Inputs(tp=2, moe=True, ep=2, async_tp=True,
                                ep_isolation=True, trainer_cudagraph=True))  # fmt: skip
    assert {name: (on, facts) for name, on, facts in rec.left_out} == {
        "symm_mem": (True, ("tensor", "async_tp", "dist_gemm")),
        "ep_extra": (True, ("moe", "expert", "ep_isolation")),
        "trainer_cudagraph": (False, ("trainer_cudagraph",)),
    }
    assert rec.facts["trainer_cudagraph"] is True  # asked for, and still off


def test_the_fields_and_their_defaults_are_torchtitans() -> None:
    """torchtitan 0.3.0 ``config/configs.py``: ``CompileConfig.
    enable_async_tensor_parallel = False``, ``TrainingConfig.disable_cuda_graphs
    = False``; graph_trainer ``configs.py``: ``EpOverlapConfig.enabled = False``;
    the TOML era's ``Parallelism.enable_async_tensor_parallel = False``."""
    assert {key: FIELDS[key] for key in (
        "parallelism.enable_async_tensor_parallel",
        "compile.enable_async_tensor_parallel", "compile.ep_overlap.enabled",
        "training.disable_cuda_graphs",
    )} == {
        "parallelism.enable_async_tensor_parallel": ("bool", False),
        "compile.enable_async_tensor_parallel": ("bool", False),
        "compile.ep_overlap.enabled": ("bool", False),
        "training.disable_cuda_graphs": ("bool", False),
    }  # fmt: skip
    rec = recommend(None)
    inputs = rec.inputs
    assert (inputs.async_tp, inputs.dist_gemm, inputs.ep_isolation,
            inputs.trainer_cudagraph) == (False, False, False, True)  # fmt: skip
    assert rec.left_out_lanes == ()
    for key in ("compile.ep_overlap.enabled", "training.disable_cuda_graphs"):
        assert rec.settings[key] == Setting(False, "default")


TP2 = ["--parallelism.tensor_parallel_degree", "2"]


@pytest.mark.parametrize(
    ("toml", "argv", "streams"),
    [
        # The TOML era's field, as tables, dotted keys and an inline table.
        (b"[parallelism]\nenable_async_tensor_parallel = true\n", TP2, ["symm_mem"]),
        (b"parallelism.enable_async_tensor_parallel = true\n", TP2, ["symm_mem"]),
        (b"parallelism = { enable_async_tensor_parallel = true }\n", TP2,
         ["symm_mem"]),
        # Async TP without tensor parallelism starts nothing.
        (b"[parallelism]\nenable_async_tensor_parallel = true\n", [], []),
        (b"[parallelism]\nenable_async_tensor_parallel = false\n", TP2, []),
        # torchtitan 0.3.0's field, on the command line, dashes or not.
        (b"", [*TP2, "--compile.enable_async_tensor_parallel"], ["symm_mem"]),
        (b"", [*TP2, "--compile.enable-async-tensor-parallel"], ["symm_mem"]),
        # The CLI wins over the TOML, the last flag over the first.
        (b"[parallelism]\nenable_async_tensor_parallel = true\n",
         [*TP2, "--parallelism.no-enable_async_tensor_parallel"], []),
        (b"", [*TP2, "--compile.enable_async_tensor_parallel",
               "--compile.no_enable_async_tensor_parallel"], []),
    ],
)  # fmt: skip
def test_async_tp_in_the_toml_form(
    toml: bytes, argv: list[str], streams: list[str]
) -> None:
    assert list(recommend(parse_toml(toml), argv=argv).left_out_lanes) == streams


EP2 = ["--parallelism.expert_parallel_degree", "2"]
PASSES = ["--compile.enable_passes"]


@pytest.mark.parametrize(
    ("toml", "argv", "streams"),
    [
        (b"[compile.ep_overlap]\nenabled = true\n", [*EP2, *PASSES], ["ep_extra"]),
        (b"[compile]\nep_overlap = { enabled = true }\nenable_passes = true\n", EP2,
         ["ep_extra"]),
        (b"compile.ep_overlap.enabled = true\n", [*EP2, *PASSES], ["ep_extra"]),
        (b"", [*EP2, *PASSES, "--compile.ep-overlap.enabled"], ["ep_extra"]),
        (b"", [*EP2, *PASSES, "--compile.ep_overlap.enabled"], ["ep_extra"]),
        # tyro's negation of a nested field: no- before its last part.
        (b"[compile.ep_overlap]\nenabled = true\n",
         [*EP2, *PASSES, "--compile.ep-overlap.no-enabled"], []),
        (b"[compile.ep_overlap]\nenabled = true\n",
         [*EP2, *PASSES, "--compile.ep_overlap.no_enabled"], []),
        # The pass needs graph passes on, and not disabled by name.
        (b"[compile.ep_overlap]\nenabled = true\n", EP2, []),
        (b"[compile.ep_overlap]\nenabled = true\n",
         [*EP2, *PASSES, "--compile.disable_passes",
          "cudagraph_pass,isolate_ep_process_group_pass"], []),
        (b"[compile.ep_overlap]\nenabled = true\n",
         [*EP2, *PASSES, "--compile.disable_passes", "cudagraph_pass"], ["ep_extra"]),
        # Expert all-to-alls need expert parallelism.
        (b"[compile.ep_overlap]\nenabled = true\n", PASSES, []),
    ],
)  # fmt: skip
def test_ep_isolation_in_the_toml_form(
    toml: bytes, argv: list[str], streams: list[str]
) -> None:
    config = {**DEEPSEEK, **parse_toml(toml)}
    assert list(recommend(config, argv=argv).left_out_lanes) == streams


def test_ep_isolation_needs_an_moe_model() -> None:
    config = {"model": {"name": "llama3"}, **parse_toml(
        b"[compile.ep_overlap]\nenabled = true\n")}  # fmt: skip
    rec = recommend(config, argv=[*EP2, *PASSES])
    assert rec.inputs.ep_isolation and rec.left_out_lanes == ()


@pytest.mark.parametrize(
    ("toml", "argv", "asked"),
    [
        (b"", [], True),
        (b"[training]\ndisable_cuda_graphs = true\n", [], False),
        (b"[training]\ndisable_cuda_graphs = true\n",
         ["--training.no-disable_cuda_graphs"], True),
        (b"", ["--training.disable-cuda-graphs"], False),
    ],
)  # fmt: skip
def test_the_core_trainers_cuda_graphs_are_read_and_never_a_stream(
    toml: bytes, argv: list[str], asked: bool
) -> None:
    rec = recommend(parse_toml(toml), argv=argv)
    assert rec.facts["trainer_cudagraph"] is asked
    assert "trainer_cudagraph" not in rec.left_out_lanes


def test_the_module_form_reads_the_config_object() -> None:
    """A torchtitan 0.3.0 config object, read by attribute (the child's
    ``from_object``): the nested ``compile.ep_overlap.enabled`` too."""
    config = ns(
        parallelism=ns(tensor_parallel_degree=2, expert_parallel_degree=2),
        compile=ns(enable_passes=True, disable_passes=[],
                   enable_async_tensor_parallel=True, ep_overlap=ns(enabled=True)),
        training=ns(disable_cuda_graphs=True),
    )  # fmt: skip
    rec = recommend(config, is_moe=True)
    assert rec.left_out_lanes == ("symm_mem", "ep_extra")
    assert rec.settings["compile.ep_overlap.enabled"] == Setting(True, "config")
    assert rec.settings["compile.enable_async_tensor_parallel"] == Setting(
        True, "config"
    )
    assert rec.settings["training.disable_cuda_graphs"] == Setting(True, "config")
    assert not rec.facts["trainer_cudagraph"]
    # The core trainer's config: no ep_overlap (nor any graph pass), and no
    # TOML-era parallelism field: their defaults.
    core = ns(parallelism=ns(tensor_parallel_degree=2),
              compile=ns(enable_async_tensor_parallel=False))  # fmt: skip
    rec = recommend(core)
    assert rec.settings["compile.ep_overlap.enabled"] == Setting(False, "default")
    assert rec.settings["parallelism.enable_async_tensor_parallel"] == Setting(
        False, "default"
    )
    assert rec.left_out_lanes == ()
    # An override on top of the object, as torchtitan applies it.
    rec = recommend(core, argv=["--compile.enable_async_tensor_parallel"])
    assert rec.left_out_lanes == ("symm_mem",)


def test_dist_gemm_comes_from_the_model_spec_in_the_module_form() -> None:
    settings = merge(None, {"parallelism.tensor_parallel_degree": 2})
    on = read_inputs(settings, toolkit_passes=MODULE.toolkit_passes, dist_gemm=True)
    assert Recommendation(on).left_out_lanes == ("symm_mem",)
    off = read_inputs(settings, toolkit_passes=MODULE.toolkit_passes)
    assert Recommendation(off).left_out_lanes == ()
    # Without TP the dist-GEMM projections run the stock ones: no stream.
    alone = read_inputs(
        merge(None, {}), toolkit_passes=MODULE.toolkit_passes, dist_gemm=True
    )
    assert Recommendation(alone).left_out_lanes == ()


@pytest.mark.parametrize(
    ("toml", "argv", "said"),
    [
        (b"[parallelism]\nenable_async_tensor_parallel = 'yes'\n", [],
         "job.toml: parallelism.enable_async_tensor_parallel: 'yes' is not true or"
         " false"),
        (b"[compile]\nenable_async_tensor_parallel = 1\n", [],
         "job.toml: compile.enable_async_tensor_parallel: 1 is not true or false"),
        (b"[compile]\nep_overlap = 1\n", [],
         "job.toml: compile.ep_overlap: a int, not a table"),
        (b"[compile.ep_overlap]\nenabled = 'true'\n", [],
         "job.toml: compile.ep_overlap.enabled: 'true' is not true or false"),
        (b"[training]\ndisable_cuda_graphs = 0\n", [],
         "job.toml: training.disable_cuda_graphs: 0 is not true or false"),
        (b"training = 3\n", [], "job.toml: training: a int, not a table"),
        # A typo, in a nested table too, is said with what it means.
        (b"[compile.ep_overlap]\nenabeld = true\n", [],
         "job.toml: compile.ep_overlap.enabeld: not a torchtitan field; did you"
         " mean compile.ep_overlap.enabled?"),
        (b"[training]\ndisable_cuda_graph = true\n", [],
         "job.toml: training.disable_cuda_graph: not a torchtitan field; did you"
         " mean training.disable_cuda_graphs?"),
        (b"[trainng]\nsteps = 1\n", [],
         "job.toml: [trainng]: not a torchtitan section; did you mean [training]?"),
        # On the command line: a flag takes no value, and a typo is named.
        (b"", ["--compile.ep_overlap.enabled=True"],
         "--compile.ep_overlap.enabled: is a flag and takes no value (got 'True');"
         " use --compile.ep_overlap.enabled or --compile.ep_overlap.no-enabled"),
        (b"", ["--training.disable_cuda_graphs", "false"],
         "--training.disable_cuda_graphs: is a flag and takes no value (got"
         " 'false'); use --training.disable_cuda_graphs or"
         " --training.no-disable_cuda_graphs"),
        (b"", ["--compile.ep_overlap.enabeld"],
         "--compile.ep_overlap.enabeld: not a torchtitan option; did you mean"
         " --compile.ep_overlap.enabled?"),
        (b"", ["--compile.ep_overlap.no-enabeld"],
         "--compile.ep_overlap.no-enabeld: not a torchtitan option; did you mean"
         " --compile.ep_overlap.no-enabled?"),
    ],
)  # fmt: skip
def test_a_value_torchtitan_would_refuse_is_named(
    toml: bytes, argv: list[str], said: str
) -> None:
    from rocm_hwq_autoset._argv import TOML, Launch
    from rocm_hwq_autoset._decision import recommend_launch

    launch = Launch(TOML, ["--job.config_file", "job.toml", *argv], True)
    with pytest.raises(ConfigError) as caught:
        recommend_launch(launch, None, read_toml=lambda path: parse_toml(toml))
    assert str(caught.value) == said


def test_an_object_with_a_wrong_value_is_named() -> None:
    with pytest.raises(ConfigError) as caught:
        recommend(ns(compile=ns(ep_overlap=ns(enabled="yes"))))
    source, _, reason = str(caught.value).rpartition(": ")
    assert source == "config: compile.ep_overlap.enabled"  # the object, the field
    assert reason.split()[0] == "'yes'"  # the value


def test_the_verify_commands() -> None:
    verify = ["rocm-hwq-autoset", "verify", "--queues"]
    assert verify_command("symm_mem", 4).split() == [*verify, "4", "TRACE"]
    assert verify_command("ep_extra", 8).split() == [*verify, "8", "--pools", "shared",
                                                     "TRACE"]  # fmt: skip
    # Each names verify's own options, and a pool rule verify knows.
    names = {name for option in VERIFY_OPTIONS for name in option.names}
    assert {"--queues", OPTION} <= names and OPTION == "--pools"
    assert all(pools is None or pools in RULES for _, pools in LEFT_OUT.values())


def test_the_inputs_carry_them_to_the_workers() -> None:
    inputs = Inputs(tp=2, moe=True, ep=2, async_tp=True, dist_gemm=True,
                    ep_isolation=True, trainer_cudagraph=True)  # fmt: skip
    text = encode_inputs(inputs)
    assert "async_tp=1" in text and "ep_isolation=1" in text
    assert decode_inputs(text) == inputs
    assert Recommendation(decode_inputs(text), 16).left_out_lanes == (
        "symm_mem", "ep_extra"
    )  # fmt: skip
    # A launcher of the package before them (format 3) is no launcher's here.
    old = ",".join(
        pair
        for pair in text.split(",")
        if pair.partition("=")[0]
        not in ("async_tp", "dist_gemm", "ep_isolation", "trainer_cudagraph")
    )
    with pytest.raises(ConfigError, match="some of the model's inputs are missing"):
        decode_inputs(old)
    for bad in ("async_tp=2", "dist_gemm=yes", "trainer_cudagraph="):
        name = bad.partition("=")[0]
        current = next(p for p in text.split(",") if p.startswith(name + "="))
        with pytest.raises(ConfigError, match="is not 0 or 1"):
            decode_inputs(text.replace(current, bad))


def test_each_reason_is_one_clause() -> None:
    """``LEFT_OUT``'s reasons are each one clause, without the lane's own name
    (every line puts the name first)."""
    for lane, (clause, _) in LEFT_OUT.items():
        assert lane not in clause and ";" not in clause
        assert len(clause) < 200

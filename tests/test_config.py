"""Reading a TOML config and merging it with the command line, as torchtitan does."""

from __future__ import annotations

import types

import pytest

from rocm_hwq_autoset import ConfigError, recommend
from rocm_hwq_autoset._launch import Setting, parse_toml

TABLES = b"""
[model]
name = "deepseek_v3"
[parallelism]
expert_parallel_degree = 2
tensor_parallel_degree = 2
[compile]
enable_fsdp_ag_rs_overlap = true
"""
DOTTED = b"""
model.name = "deepseek_v3"
parallelism.expert_parallel_degree = 2
parallelism.tensor_parallel_degree = 2
compile.enable_fsdp_ag_rs_overlap = true
"""
INLINE = b"""
model = { name = "deepseek_v3" }
parallelism = { expert_parallel_degree = 2, tensor_parallel_degree = 2 }
compile = { enable_fsdp_ag_rs_overlap = true }
"""
LANES = (
    "compute", "all_reduce", "dense_all_gather", "reduce_scatter", "expert_comm",
    "tp_all_gather",
)  # fmt: skip


@pytest.mark.parametrize(
    "text", [TABLES, DOTTED, INLINE], ids=["tables", "dotted", "inline"]
)
def test_toml_forms_mean_the_same(text: bytes) -> None:
    rec = recommend(parse_toml(text))
    assert rec.lanes == LANES
    assert rec.queues == 8


def test_precedence_cli_over_toml_over_default() -> None:
    rec = recommend(
        parse_toml(TABLES),
        argv=[
            "--parallelism.tensor_parallel_degree=1",
            "--compile.no-enable-fsdp-ag-rs-overlap",
        ],
    )
    s = rec.settings
    assert s["parallelism.tensor_parallel_degree"] == Setting(1, "CLI")
    assert s["parallelism.expert_parallel_degree"] == Setting(2, "TOML")
    assert s["parallelism.context_parallel_degree"] == Setting(1, "default")
    assert s["compile.enable_fsdp_ag_rs_overlap"] == Setting(False, "CLI")
    assert rec.lanes == ("compute", "all_reduce", "fsdp_comm", "expert_comm")
    assert rec.queues == 4


def test_defaults_are_torchtitans() -> None:
    rec = recommend(None)
    assert rec.settings["model.name"].value == "llama3"
    assert rec.settings["parallelism.data_parallel_shard_degree"].value == -1
    assert rec.lanes == ("compute", "all_reduce", "fsdp_comm")


@pytest.mark.parametrize(
    ("world", "tp", "pp", "replicate", "active"),
    [
        (None, 8, 1, 1, True),  # the launcher: -1 is active, as in the PR
        (8, 8, 1, 1, False),  # 8 // 8 == 1
        (16, 8, 1, 1, True),
        (16, 4, 2, 2, False),
        (32, 8, 4, 1, False),  # 32 // 32
        (4, 8, 1, 1, False),  # 4 // 8 == 0
    ],
)
def test_dp_shard_minus_one_resolves_like_parallel_dims(
    world: int | None, tp: int, pp: int, replicate: int, active: bool
) -> None:
    config = {
        "parallelism": {
            "tensor_parallel_degree": tp,
            "pipeline_parallel_degree": pp,
            "data_parallel_replicate_degree": replicate,
        }
    }
    rec = recommend(config, world_size=world)
    assert rec.inputs.dp_shard_active is active
    assert ("fsdp_comm" in rec.lanes) is active


def test_explicit_dp_shard_ignores_world_size() -> None:
    config = {"parallelism": {"data_parallel_shard_degree": 1}}
    assert not recommend(config, world_size=64).inputs.dp_shard_active
    config = {"parallelism": {"data_parallel_shard_degree": 4}}
    assert recommend(config, world_size=4).inputs.dp_shard_active


@pytest.mark.parametrize(
    ("compile_", "argv", "cudagraph"),
    [
        ({"enable_passes": True}, [], True),
        ({"enable_passes": True, "disable_passes": ["cudagraph_pass"]}, [], False),
        ({"enable_passes": True}, ["--compile.disable_passes=x,cudagraph_pass"], False),
        ({}, ["--compile.enable_passes"], True),
        ({"passes": ["cudagraph"]}, [], True),  # TOML-era compiler_toolkit
        ({"passes": ["autobucketing_reordering"]}, [], False),
        ({"enable": True}, [], False),
    ],
)
def test_cudagraph(
    compile_: dict[str, object], argv: list[str], cudagraph: bool
) -> None:
    rec = recommend({"compile": compile_}, argv=argv)
    assert rec.inputs.cudagraph is cudagraph
    assert ("cudagraph_capture" in rec.lanes) is cudagraph


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (b"parallelism = 3", "not a table"),
        (b"[parallelism]\ntensor_parallel_degree = '2'", "is not an integer"),
        (b"[parallelism]\ntensor_parallel_degree = 2.0", "is not an integer"),
        (b"[parallelism]\ntensor_parallel_degree = true", "is not an integer"),
        (b"[parallelism]\ntensor_parallel_degree = 0", "must be >= 1"),
        (b"[parallelism]\nexpert_parallel_degree = -1", "must be >= 1"),
        (b"[parallelism]\ndata_parallel_shard_degree = -2", "must be -1 or >= 1"),
        (b"[compile]\nenable_passes = 'yes'", "is not true or false"),
        (b"[compile]\ndisable_passes = 'cudagraph_pass'", "not a list of strings"),
        (b"[compile]\ndisable_passes = [1, 2]", "not a list of strings"),
        (b"[model]\nname = 3", "is not a string"),
        (b"[model", "invalid TOML"),
        (b"\xff\xfe[model]", "not UTF-8"),
    ],
)
def test_bad_configs(text: bytes, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        recommend(parse_toml(text))


def test_a_cli_override_shadows_a_bad_toml_value() -> None:
    config = parse_toml(b"[parallelism]\ntensor_parallel_degree = '2'")
    rec = recommend(config, argv=["--parallelism.tensor_parallel_degree", "2"])
    assert "tp_all_gather" in rec.lanes


def test_unrelated_fields_of_any_type_are_ignored() -> None:
    config = parse_toml(
        b"[training]\nsteps = 'lots'\n[parallelism]\nfoo = [1, {a = 2}]"
    )
    assert recommend(config).queues == 4


def test_huge_degrees_are_degrees() -> None:
    config = {"parallelism": {"tensor_parallel_degree": 2**70}}
    assert "tp_all_gather" in recommend(config).lanes


def test_object_read_like_the_pr() -> None:
    ns = types.SimpleNamespace
    config = ns(
        parallelism=ns(
            data_parallel_shard_degree=-1,
            expert_parallel_degree=2,
            tensor_parallel_degree=1,
            context_parallel_degree=1,
        ),
        compile=ns(
            enable_passes=True, disable_passes=[], enable_fsdp_ag_rs_overlap=False
        ),
    )
    rec = recommend(config, is_moe=True)
    assert rec.lanes == ("compute", "all_reduce", "fsdp_comm", "expert_comm",
                         "cudagraph_capture")  # fmt: skip
    assert rec.queues == 8
    assert rec.settings["compile.enable_passes"] == Setting(True, "config")
    assert rec.settings["compile.passes"] == Setting((), "default")
    # Without the override the model is unknown: ep > 1 makes it MoE.
    assert recommend(config).inputs.moe
    assert not recommend(config, is_moe=False).inputs.moe


def test_the_dots_guard_refuses_deep_dotted_keys_before_parsing() -> None:
    """tomllib's time grows with the cube of a dotted key's depth: a line with
    more than 256 dots is refused; 256 are parsed."""
    at_limit = b".".join([b"k"] * 257) + b" = 1\n"  # 256 dots
    assert parse_toml(at_limit)["k"]["k"]["k"]
    with pytest.raises(ConfigError, match="more than 256 dots; not a job config"):
        parse_toml(b".".join([b"k"] * 30_000) + b" = 1\n")  # 15 s in tomllib alone

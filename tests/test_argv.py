"""torchtitan's command line as ConfigManager and tyro read it (section 3)."""

from __future__ import annotations

import pytest

from rocm_hwq_autoset import ConfigError
from rocm_hwq_autoset._launch import cli_overrides, config_file_arg


@pytest.mark.parametrize(
    ("args", "path"),
    [
        (["--job.config_file", "a.toml"], "a.toml"),
        (["--job.config-file", "a.toml"], "a.toml"),
        (["--job.config_file=a.toml"], "a.toml"),
        (["--job.config-file=a=b.toml"], "a=b.toml"),
        (["--job.config_file=a.toml", "--job.config_file", "b.toml"], "a.toml"),
        (["--job.config_file", "a.toml", "--job.config-file=b.toml"], "a.toml"),
        (["--training.steps", "10", "--job.config_file", "x"], "x"),
        (["--job.config_file"], None),  # dangling: torchtitan skips it
        (["--job.config_file="], ""),
        (["--job.config_files", "a.toml"], None),
        (["--job.configfile", "a.toml"], None),
        ([], None),
    ],
)
def test_config_file_arg(args: list[str], path: str | None) -> None:
    assert config_file_arg(args) == path


EP = "parallelism.expert_parallel_degree"
OVERLAP = "compile.enable_fsdp_ag_rs_overlap"


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["--parallelism.expert_parallel_degree", "2"], {EP: 2}),
        (["--parallelism.expert_parallel_degree=2"], {EP: 2}),
        (["--parallelism.expert-parallel-degree=2"], {EP: 2}),
        (["--parallelism.expert-parallel_degree", "+2"], {EP: 2}),
        (["--parallelism.expert_parallel_degree", " 4 "], {EP: 4}),
        (["--parallelism.data_parallel_shard_degree", "-1"],
         {"parallelism.data_parallel_shard_degree": -1}),
        ([f"--{EP}=2", f"--{EP}", "4"], {EP: 4}),  # the last flag wins
        (["--compile.enable_fsdp_ag_rs_overlap"], {OVERLAP: True}),
        (["--compile.enable-fsdp-ag-rs-overlap"], {OVERLAP: True}),
        (["--compile.no-enable_fsdp_ag_rs_overlap"], {OVERLAP: False}),
        (["--compile.no_enable_fsdp_ag_rs_overlap"], {OVERLAP: False}),
        (["--compile.no-enable-fsdp-ag-rs-overlap"], {OVERLAP: False}),
        ([f"--{OVERLAP}", "--compile.no-enable_fsdp_ag_rs_overlap"],
         {OVERLAP: False}),
        (["--compile.enable_passes", "--training.steps", "3"],
         {"compile.enable_passes": True}),
        (["--compile.disable_passes", "cudagraph_pass"],
         {"compile.disable_passes": ("cudagraph_pass",)}),
        (["--compile.disable_passes=cudagraph_pass,custom_codegen_pass"],
         {"compile.disable_passes": ("cudagraph_pass", "custom_codegen_pass")}),
        (["--compile.disable-passes", "a,b"], {"compile.disable_passes": ("a", "b")}),
        (["--compile.passes=cudagraph"], {"compile.passes": ("cudagraph",)}),
        (["--model.name", "deepseek_v3", "--model.flavor=16B"],
         {"model.name": "deepseek_v3", "model.flavor": "16B"}),
        # Arguments the model does not read pass untouched.
        (["--training.steps", "10", "--job.config_file", "x.toml", "--foo", "bar"], {}),
        (["--parallelism.fsdp_reshard_after_forward", "never"], {}),
        (["--compile.no-passes", "x"], {}),  # no_ only negates booleans
        (["positional", "--", "--parallelism.expert_parallel_degree=2"], {EP: 2}),
    ],
)  # fmt: skip
def test_overrides(args: list[str], expected: dict[str, object]) -> None:
    assert cli_overrides(args) == expected


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--parallelism.expert_parallel_degree", "2.0"], "not an integer"),
        (["--parallelism.expert_parallel_degree", "0x2"], "not an integer"),
        (["--parallelism.expert_parallel_degree", "two"], "not an integer"),
        (["--parallelism.expert_parallel_degree="], "not an integer"),
        (["--parallelism.expert_parallel_degree"], "expects a value"),
        (["--parallelism.expert_parallel_degree", "--training.steps", "2"],
         "expects a value"),
        (["--compile.enable_fsdp_ag_rs_overlap", "False"], "takes no value"),
        (["--compile.enable_fsdp_ag_rs_overlap=true"], "takes no value"),
        (["--compile.no-enable_passes=1"], "takes no value"),
        (["--model.name"], "expects a value"),
    ],
)  # fmt: skip
def test_errors_where_the_launch_fails(args: list[str], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        cli_overrides(args)

"""The command line, read as the programs that read it: Python (which program),
torchrun (which program it runs), torchtitan's ConfigManager and tyro (the job
config and the overrides: ``ConfigManager._maybe_load_toml`` before
pytorch/torchtitan #2386, ``_load_config`` after)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import pytest

from rocm_hwq_autoset import ConfigError
from rocm_hwq_autoset._argv import (
    Launch,
    cli_overrides,
    config_file_arg,
    custom_config_module,
    find_launch,
    is_option,
    module_args,
    program,
    suggest_flag,
    torchrun_program,
    unknown_flags,
    unknown_inputs,
)
from rocm_hwq_autoset._environ import MODULE_FORM, TOML_FORM

#: Every test here is known fast (the ini's 600 s is for the slow ones).
pytestmark = pytest.mark.timeout(60)


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
        # torchtitan takes the token after the flag, whatever it is
        (["--job.config_file", "--training.steps"], "--training.steps"),
    ],
)
def test_config_file_arg(args: list[str], path: str) -> None:
    assert config_file_arg(args) == path


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["--job.config_file"], "--job.config_file: expects a value"),
        (["--job.config_file="], "--job.config_file: empty path"),
        (["--job.config-file", ""], "--job.config-file: empty path"),
    ],
)
def test_config_file_arg_errors_name_the_flag(args: list[str], said: str) -> None:
    with pytest.raises(ConfigError) as caught:
        config_file_arg(args)
    assert str(caught.value).startswith(said)
    launch = Launch("job.config_file", args, True)  # read once, refused when asked
    with pytest.raises(ConfigError) as asked:
        launch.config_file  # noqa: B018
    assert str(asked.value) == str(caught.value)


@pytest.mark.parametrize("args", [["--job.config_files", "a.toml"], []])
def test_no_config_file_is_torchtitans_defaults(args: list[str]) -> None:
    assert config_file_arg(args) is None
    assert Launch("job.config_file", args, True).config_file is None


@pytest.mark.parametrize(
    ("args", "found"),
    [
        (["--module", "m", "--config", "c"], ("m", "c")),
        (["--module=m", "--config=c"], ("m", "c")),
        (["--module", "a", "--config", "c", "--module", "b"], ("b", "c")),  # last
        (["--config", "c", "--module", "m", "--training.steps", "2"], ("m", "c")),
        (["--module=my.recipes", "--config=run=3"], ("my.recipes", "run=3")),
    ],
)
def test_module_args(args: list[str], found: tuple[str, str]) -> None:
    assert module_args(args) == found


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["--module", "m"], "--config: is required"),
        (["--config", "c"], "--module: is required"),
        (["--config", "c", "--module"], "--module: requires a value"),
        (["--module", "m", "--config"], "--config: requires a value"),
        (["--module=", "--config=c"], "--module: is required"),
    ],
)
def test_module_args_errors_name_the_flag(args: list[str], said: str) -> None:
    with pytest.raises(ConfigError) as caught:
        module_args(args)
    assert str(caught.value).startswith(said)


@pytest.mark.parametrize(
    ("argv", "orig_argv", "found"),
    [
        (["-m", "a"], ["python", "-m", "torchtitan.train", "a"],
         ("module", "torchtitan.train")),
        (["-m"], ["python3.11", "-u", "-X", "dev", "-m", "torch.distributed.run"],
         ("module", "torch.distributed.run")),
        (["-m", "x"], ["python", "-mtorchtitan.train", "x"],
         ("module", "torchtitan.train")),
        (["-m", "x"], ["python", "-Imtorchtitan.train", "x"],
         ("module", "torchtitan.train")),
        (["-m", "x"], ["python", "-mmy_module", "x"], ("module", "my_module")),
        (["-m", "-m"], ["python", "-m", "mod", "-m"], ("module", "mod")),
        (["-m", "x"], [], ("module", "")),  # Python 3.9: no sys.orig_argv
        (["-c", "x"], ["python", "-c", "pass", "x"], ("command", "")),
        (["/venv/bin/torchrun", "x"], [], ("script", "/venv/bin/torchrun")),
        ([""], [], ("", "")),
        (["-", "x"], ["python", "-", "x"], ("", "")),  # the program from stdin
        ([], [], ("", "")),
    ],
)  # fmt: skip
def test_program(argv: list[str], orig_argv: list[str], found: tuple[str, str]) -> None:
    assert program(argv, orig_argv) == found


DS = ["--module", "graph_trainer.deepseek_v3", "--config",
      "graph_trainer_deepseek_v3_16b"]  # fmt: skip
#: Launch lines of torchtitan's run_train.sh, torchrun's own options before the
#: program, and decoys: (torchrun's argv[1:], what torchrun runs).
TORCHRUN_LINES = [
    (["--nproc_per_node=8", "--rdzv_backend", "c10d", "--rdzv_endpoint=localhost:0",
      "--local-ranks-filter", "0", "--role", "rank", "--tee", "3",
      "-m", "torchtitan.train", *DS],
     ("module", "torchtitan.train", DS)),
    (["--standalone", "--nproc_per_node", "2", "-m", "torchtitan.train", *DS],
     ("module", "torchtitan.train", DS)),
    (["--nnodes", "2", "--nproc-per-node", "1", "--node_rank", "0",
      "--rdzv-id", "hwq", "--module", "torchtitan.train", *DS],
     ("module", "torchtitan.train", DS)),
    (["--nproc_per_node=2", "/x/site-packages/torchtitan/train.py", *DS],
     ("script", "/x/site-packages/torchtitan/train.py", DS)),
    (["-r3", "-t", "3", "--nproc_per", "2", "train.py", "--job.config_file", "j"],
     ("script", "train.py", ["--job.config_file", "j"])),
    (["--nproc", "2", "train.py"], None),  # ambiguous: two spellings
    (["--nproc_per_node"], None),  # a value missing
    (["--bogus", "x", "train.py"], None),  # torchrun refuses an unknown option
    (["-mX", "train.py"], None),
    (["--standalone=1", "train.py"], None),
    (["-m", "-1"], ("module", "-1", [])),
    # "-m" is a flag (store_true), not "-m MODULE": torchrun's options after it
    # are still its own, and the program is the first positional.
    (["-m", "--standalone", "torchtitan.train", *DS],
     ("module", "torchtitan.train", DS)),
    (["--module", "--nproc_per_node", "2", "torchtitan.train", *DS],
     ("module", "torchtitan.train", DS)),
    (["-m", "--standalone", "-m", "torchtitan.train"],
     ("module", "torchtitan.train", [])),
    (["--no-python", "--standalone", "python", "-m", "torchtitan.train"],
     ("executable", "python", ["-m", "torchtitan.train"])),
    (["--log-dir", "torchtitan.train", "prog.py", *DS],  # a value, not the program
     ("script", "prog.py", DS)),
    (["--role", "-m", "prog.py"], None),  # argparse: --role expects a value
    (["--", "-weird.py", "a"], ("script", "-weird.py", ["a"])),
    (["--standalone"], None),
    (["--help"], None),
    (["-h", "-m", "torchtitan.train", *DS], None),  # torchrun prints its help
    (["--help", "-m", "torchtitan.train", *DS], None),
    (["--he", "train.py"], None),  # argparse's abbreviation of --help
    (["--standalone", "--"], None),  # nothing after "--"
    (["-m", "--", "torchtitan.train", *DS], ("module", "torchtitan.train", DS)),
    (["--no-python", "--", "python", "x"], ("executable", "python", ["x"])),
    (["--standalone", "-", "--job.config_file", "j"],  # the script on stdin
     ("script", "-", ["--job.config_file", "j"])),
    (["--standalone", "train.py", "a"], ("script", "train.py", ["a"])),
    # the last of each table: a flag, an option with its value (both
    # torchrun's: --use_env, torch.distributed.launch's, it refuses)
    (["--virtual_local_rank", "--shutdown_timeout", "9", "t.py"],
     ("script", "t.py", [])),
]  # fmt: skip


@pytest.mark.parametrize(("args", "ran"), TORCHRUN_LINES)
def test_torchrun_program(
    args: list[str], ran: tuple[str, str, list[str]] | None
) -> None:
    assert torchrun_program(args) == ran


@pytest.mark.parametrize(
    ("argv", "orig_argv", "form", "args", "in_process"),
    [
        # torchrun, a console script or a module
        (["/venv/bin/torchrun", "--standalone", "-m", "torchtitan.train", *DS], [],
         MODULE_FORM, DS, False),
        (["-m", "--standalone", "-m", "torchtitan.train", *DS],
         ["python", "-m", "torch.distributed.run", "--standalone", "-m",
          "torchtitan.train", *DS], MODULE_FORM, DS, False),
        (["/venv/bin/torchrun", "/x/torchtitan/train.py", *DS], [],
         MODULE_FORM, DS, False),
        # the training process itself
        (["-m", *DS], ["python", "-u", "-m", "torchtitan.train", *DS],
         MODULE_FORM, DS, True),
        (["torchtitan/train.py", *DS], ["python", "torchtitan/train.py", *DS],
         MODULE_FORM, DS, True),
        (["/src/torchtitan/torchtitan/train.py", *DS], [], MODULE_FORM, DS, True),
        # a TOML launch, whatever the program
        (["prog.py", "--job.config_file", "x", *DS], [], TOML_FORM,
         ["--job.config_file", "x", *DS], True),
        (["/venv/bin/torchrun", "train.py", "--job.config_file=x"], [], TOML_FORM,
         ["--job.config_file=x"], False),
        (["train.py", "--job.config_file=run=3.toml"], [], TOML_FORM,
         ["--job.config_file=run=3.toml"], True),
        # torchtitan with one of the two: a launch whose error is said later
        (["-m", "--module", "x"], ["python", "-m", "torchtitan.train", "--module",
                                   "x"], MODULE_FORM, ["--module", "x"], True),
    ],
)  # fmt: skip
def test_which_launches_are_torchtitan(
    argv: list[str], orig_argv: list[str], form: str, args: list[str],
    in_process: bool,
) -> None:  # fmt: skip
    launch = find_launch(argv, orig_argv)
    assert launch is not None
    assert (launch.form, list(launch.args), launch.in_process) == (
        form,
        args,
        in_process,
    )


@pytest.mark.parametrize(
    ("argv", "orig_argv"),
    [
        (["prog.py", *DS], ["python", "prog.py", *DS]),  # not torchtitan
        (["prog", "--note", "torchtitan.x", "--module", "a", "--config", "b"], []),
        (["/venv/bin/torchrun", "--log-dir", "torchtitan.train", "prog.py", *DS],
         []),
        (["/venv/bin/torchrun", "--standalone"], []),
        (["-m", *DS], []),  # Python 3.9: which module is unknown
        (["-c", *DS], ["python", "-c", "pass", *DS]),
        (["/x/torchtitan_tools/train.py", *DS], []),
        (["/x/torchtitan/README", *DS], []),
        (["-m", "--module", "x"], ["python", "-m", "torchtitanic", "--module", "x"]),
    ],
)  # fmt: skip
def test_decoys_are_no_launch(argv: list[str], orig_argv: list[str]) -> None:
    assert find_launch(argv, orig_argv) is None


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
        (["--compile.enable_fsdp_ag_rs_overlap", "False"],
         r"takes no value \(got 'False'\); use --compile.enable_fsdp_ag_rs_overlap"
         r" or --compile.no-enable_fsdp_ag_rs_overlap$"),
        (["--compile.enable_fsdp_ag_rs_overlap=true"],
         r"takes no value \(got 'true'\)"),
        (["--compile.no-enable_passes=1"], r"takes no value \(got '1'\)"),
        (["--model.name"], "expects a value"),
    ],
)  # fmt: skip
def test_errors_where_the_launch_fails(args: list[str], message: str) -> None:
    with pytest.raises(ConfigError, match=message) as caught:
        cli_overrides(args)
    assert caught.value.source == args[0].split("=")[0]  # the flag, named


@pytest.mark.parametrize(
    "token",
    ["-2", "-2.5", "-.5", "-5.", "-1.2.3", "-2e5", "-x", "--a", "-", "--", "x", "",
     "-\u0661", "-\u00b2", "-1.\u0661", "-1 2"],
)  # fmt: skip
def test_what_is_an_option_as_argparse_says(token: str) -> None:
    """A value that starts with "-" (a negative degree, a path "-") is a value
    where argparse (tyro's and torchrun's parser) says so."""
    negative = argparse.ArgumentParser()._negative_number_matcher.match(token)
    expected = token.startswith("-") and token != "-" and not negative
    assert is_option(token) is expected


@pytest.mark.parametrize(
    ("flag", "meant"),
    [
        ("--compile.enable_fsdp_ag_rs_overlapp", "--compile.enable_fsdp_ag_rs_overlap"),
        ("--compile.no-enable_fsdp_ag_rs_overlapp",
         "--compile.no-enable_fsdp_ag_rs_overlap"),
        ("--parallelism.expert_paralel_degree=2",
         "--parallelism.expert_parallel_degree"),
        ("--parallelism.expert-parallel-degre", "--parallelism.expert_parallel_degree"),
        ("--paralelism.tensor_parallel_degree", "--parallelism.tensor_parallel_degree"),
        ("--parallelism.tensor_parallel_degree", None),  # a field: no typo
        ("--compile.no_enable_passes", None),
        ("--compile.xyzenable_passe", None),  # its first three letters are no "no_"
        ("--parallelism.expert_tensor_parallel_degree", None),  # torchtitan's own
        ("--parallelism.pipeline_parallel_schedule", None),
        ("--training.steps", None),
        ("--module", None),
        ("-x.y", None),
        ("compile.enable_passes", None),  # a value, not a flag
        ("-compile.enable_passes", None),
    ],
)  # fmt: skip
def test_a_flag_a_typo_away_from_ours(flag: str, meant: str | None) -> None:
    assert suggest_flag(flag) == meant
    if meant is not None:
        with pytest.raises(ConfigError, match=f"did you mean {meant}"):
            cli_overrides([flag, "2"])


@pytest.mark.parametrize(
    "flag",
    ["--parallelism.tensor_parallel_degree", "--parallelism.no_tensor_parallel_degree",
     "--compile.no-enable_passes", "--training.steps", "--training.no-steps",
     "--checkpoint.no-enable", "--quantize.linear.float8.no-emulate"],
)  # fmt: skip
def test_a_flag_that_is_or_negates_a_known_one_is_not_searched(
    flag: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The did-you-mean search (``_unknown``) is neither run nor imported for
    a flag of ours or torchtitan's, or one's "no-" form: only a flag that may
    be a typo costs it."""
    monkeypatch.setitem(sys.modules, "rocm_hwq_autoset._unknown", None)  # no import
    assert suggest_flag(flag) is None


@pytest.mark.parametrize(
    ("argv", "orig_argv", "flags"),
    [
        (["-m", "--module", "llama3", "--config", "c", "--job.config_file", "j"],
         ["python", "-m", "torchtitan.train", "--module", "llama3", "--config", "c",
          "--job.config_file", "j"], "--module and --job.config_file"),
        (["/src/torchtitan/train.py", "--job.config-file=j", "--config=c"], [],
         "--config and --job.config-file"),
        (["/venv/bin/torchrun", "--nproc-per-node=2", "-m", "torchtitan.train",
          "--module=m", "--config", "c", "--job.config_file", "j"], [],
         "--module and --job.config_file"),
    ],
)  # fmt: skip
def test_both_launch_forms_at_once_are_refused_naming_both(
    argv: list[str], orig_argv: list[str], flags: str
) -> None:
    """No torchtitan takes both: 0.3.0 refuses --job.config_file, the TOML era
    --module. find_launch, which the hook and every command call, says so."""
    with pytest.raises(ConfigError) as caught:
        find_launch(argv, orig_argv)
    assert caught.value.source == flags
    # One reason for every pair (its words: tests/golden/lines/hook.txt).
    with pytest.raises(ConfigError) as pair:
        find_launch(
            ["/src/torchtitan/train.py", "--module=m", "--job.config_file=j"], []
        )
    assert caught.value.reason == pair.value.reason


def test_a_module_flag_of_another_program_beside_a_job_config_is_toml() -> None:
    launch = find_launch(["tool.py", "--module", "m", "--job.config_file", "j"])
    assert launch is not None and launch.form == TOML_FORM


def test_program_reads_the_command_line_where_python_has_no_orig_argv(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Python 3.9: ``python -m torchtitan.train ARGS`` has only ``["-m",
    ARGS...]`` in sys.argv; its own command line names the module. Only for
    this process's own arguments."""
    import _rocm_hwq_autoset_cmdline as gate

    args = ["--module", "llama3", "--config", "c"]
    line = b"".join(w.encode() + b"\0" for w in ["py", "-m", "torchtitan.train", *args])
    (tmp_path / "cmdline").write_bytes(line)
    monkeypatch.setattr(gate, "PROC_CMDLINE", str(tmp_path / "cmdline"))
    monkeypatch.setattr(sys, "argv", ["-m", *args])
    assert program(["-m", *args], []) == ("module", "torchtitan.train")
    launch = find_launch(["-m", *args], [])
    assert launch is not None and launch.form == MODULE_FORM
    assert program(["-m", *args[:2]], []) == ("module", "")  # not this process's
    monkeypatch.setattr(gate, "PROC_CMDLINE", str(tmp_path / "none"))
    assert program(["-m", *args], []) == ("module", "")  # no /proc: as before


def test_a_launch_shows_as_the_call_that_makes_it() -> None:
    """Its repr (a failing test's message) is the Launch call, its form by
    name."""
    launch = Launch(MODULE_FORM, ["--module", "m"], False)
    assert repr(launch) == "Launch('--module', ('--module', 'm'), in_process=False)"


def test_a_launch_keeps_the_program_that_makes_it() -> None:
    """The --module child imports first from where that program's
    interpreter would (``_evaluation.process.interpreter_of``)."""
    from rocm_hwq_autoset._argv import launch_in

    script = ("script", "/x/torchtitan/train.py")
    launch = launch_in(["--module", "m", "--config", "c"], script, in_process=False)
    assert launch is not None and launch.program == script


# Flags no field has: torchtitan 0.2.2's tyro refuses them; said, Q still set.


@pytest.mark.parametrize(
    ("args", "unknown"),
    [
        (["--parallelism.foo", "2"], ["--parallelism.foo"]),
        (["--parallelism.foo=2", "--parallelism.foo", "3"], ["--parallelism.foo"]),
        (["--lr-scheduler.warmup-stepz", "3", "--job.bar"],
         ["--lr-scheduler.warmup-stepz", "--job.bar"]),
        (["--training.dataloader.workers", "2"], ["--training.dataloader.workers"]),
        (["--parallelism.no-foo"], ["--parallelism.no-foo"]),
        (["--parallelism.foo.bar", "1"], ["--parallelism.foo.bar"]),  # by its section
        (["--verbose", "--foo.bar", "--parallelism.foo"], ["--parallelism.foo"]),
        # torchtitan's own, with "-" or "_", negated or not; ours
        (["--lr-scheduler.warmup-steps", "3", "--checkpoint.no-enable",
          "--quantize.linear.float8.emulate", "--job.config_file", "j.toml",
          "--compile.ep-overlap.enabled", "--training.no_disable_cuda_graphs",
          "--quantize.linear.float8.no-emulate"], []),
        # Not in a section of torchtitan's job config: not looked at.
        (["--foo.bar", "1", "--verbose", "-x", "--parallelism"], []),
        # A typo of ours: refused (cli_overrides), not merely said.
        (["--parallelism.tp", "2", "--parallelism.tensor_paralel_degree", "2"], []),
    ],
)  # fmt: skip
def test_an_unknown_flag_is_named(args: list[str], unknown: list[str]) -> None:
    assert unknown_flags(args) == unknown


@pytest.mark.parametrize(
    ("args", "module"),
    [
        (["--job.custom_config_module=m.n"], "m.n"),
        (["--job.custom-config-module", "m", "--job.custom_config_module=n"], "m"),
        (["--job.custom_config_module="], ""),
        (["--job.custom_config_module"], ""),
        (["--job.custom_config_modules=m"], ""),
    ],
)
def test_a_custom_config_module_is_read_as_torchtitan_reads_it(
    args: list[str], module: str
) -> None:
    assert custom_config_module(args) == module


def test_unknown_inputs_are_one_group_per_input() -> None:
    config = {"parallelism": {"foo": 1, "bar": 2}}
    found = unknown_inputs(["--parallelism.baz", "1"], config, "job.toml")
    assert [exc.source for exc in found] == [
        "--parallelism.baz", "job.toml: parallelism.foo, parallelism.bar"
    ]  # fmt: skip
    for module in (["--job.custom_config_module", "m"], []):
        job = {"job": {"custom_config_module": "m"}} if not module else {}
        args = [*module, "--parallelism.baz"]
        assert unknown_inputs(args, {**config, **job}, "") == ()


def test_a_list_flag_is_not_refused_for_a_second_token() -> None:
    """A list field's flag may be followed by more tokens (tyro takes several
    for a list); a one-value field's is refused for it."""
    found = cli_overrides(["--compile.disable_passes", "a", "b"])
    assert found["compile.disable_passes"] == ("a",)
    with pytest.raises(ConfigError) as raised:
        cli_overrides(["--parallelism.tensor_parallel_degree", "2", "3"])
    assert raised.value.source == "--parallelism.tensor_parallel_degree"

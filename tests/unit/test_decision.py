"""The start-up decision (``_decision``), step by step, on a plain dict
environment, through the hook's ``outcome_for`` and ``apply`` (the hook's own
parts are tests/unit/test_hook.py's)."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import pytest

from rocm_hwq_autoset import ConfigError, _decision, _environ, _hook
from rocm_hwq_autoset._argv import Launch
from rocm_hwq_autoset._decision import Outcome
from rocm_hwq_autoset._model import Config, Inputs, encode_inputs
from rocm_hwq_autoset._rocm import detect

from ..helpers import (
    CUDA_VERSION_PY,
    JOB,
    LINE,
    MODULE_ARGS,
    UNSET_TAIL,
    decide_module,
    fake_torch,
    no_read,
    run,
    said,
    set_line,
    unset_line,
)

#: Every test here is known fast (the ini's 600 s is for the slow ones).
pytestmark = pytest.mark.timeout(60)


def test_sets_and_marks(
    job: str, rocm_path: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    env: dict[str, str] = {}
    assert run(env, ["--job.config_file", job], rocm_path, capsys) == LINE
    assert env == {
        "GPU_MAX_HW_QUEUES": "8",
        "ROCM_HWQ_AUTOSET_ORIGIN": "8 job.config_file",
    }


@pytest.mark.parametrize("value", ["0", "false", "OFF", "No", " no "])
def test_opt_out(
    value: str, job: str, rocm_path: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    env = {"ROCM_HWQ_AUTOSET": value, "ROCM_HWQ_AUTOSET_LOG": "verbose"}
    err = run(env, ["--job.config_file", job], rocm_path, capsys)
    assert "opted out" in err
    assert "GPU_MAX_HW_QUEUES" not in env


@pytest.mark.parametrize("value", ["", "1", "auto", "AUTO"])
def test_normal_values(
    value: str, job: str, rocm_path: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    env = {"ROCM_HWQ_AUTOSET": value}
    run(env, [f"--job.config_file={job}"], rocm_path, capsys)
    assert env["GPU_MAX_HW_QUEUES"] == "8"


def test_force_skips_detection(
    tmp_path: Path, job: str, capsys: pytest.CaptureFixture[str]
) -> None:
    cuda = [str(fake_torch(tmp_path / "cuda", CUDA_VERSION_PY))]
    env: dict[str, str] = {"ROCM_HWQ_AUTOSET_LOG": "verbose"}
    assert "not ROCm" in run(env, ["--job.config_file", job], cuda, capsys)
    assert "GPU_MAX_HW_QUEUES" not in env
    env = {"ROCM_HWQ_AUTOSET": "force"}
    run(env, ["--job.config_file", job], cuda, capsys)
    assert env["GPU_MAX_HW_QUEUES"] == "8"


def test_explicit_value_wins(
    job: str, rocm_path: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    env = {"GPU_MAX_HW_QUEUES": "2", "ROCM_HWQ_AUTOSET_LOG": "verbose"}
    assert "set explicitly" in run(env, ["--job.config_file", job], rocm_path, capsys)
    assert env["GPU_MAX_HW_QUEUES"] == "2"
    # A marker for another value does not make the user's value ours.
    env = {"GPU_MAX_HW_QUEUES": "2", "ROCM_HWQ_AUTOSET_ORIGIN": "8 job.config_file"}
    run(env, ["--job.config_file", job], rocm_path, capsys)
    assert env["GPU_MAX_HW_QUEUES"] == "2"


def test_worker_recomputes_the_launchers_value(
    tmp_path: Path, rocm_path: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "tp.toml"
    path.write_bytes(
        b"[model]\nname='deepseek_v3'\n[parallelism]\nexpert_parallel_degree=2\n"
        b"tensor_parallel_degree=2\n[compile]\nenable_fsdp_ag_rs_overlap=true\n"
    )
    argv = ["--job.config_file", str(path)]
    launcher: dict[str, str] = {}
    six = ("compute", "all_reduce", "dense_all_gather", "reduce_scatter",
           "expert_comm", "tp_all_gather")  # fmt: skip
    assert run(launcher, argv, rocm_path, capsys) == set_line(8, six)
    for rank in range(2):
        worker = dict(launcher, WORLD_SIZE="2", RANK=str(rank), LOCAL_RANK=str(rank))
        err = run(worker, argv, rocm_path, capsys)
        # dp_shard = 2 // tp 2 = 1: no FSDP lanes on the workers.
        assert worker["GPU_MAX_HW_QUEUES"] == "4"
        assert worker["ROCM_HWQ_AUTOSET_ORIGIN"] == "4 job.config_file"
        four = ("compute", "all_reduce", "expert_comm", "tp_all_gather")
        assert err == ("" if rank else set_line(4, four))


def test_worker_with_the_same_value_is_silent(
    job: str, rocm_path: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    launcher: dict[str, str] = {}
    run(launcher, ["--job.config_file", job], rocm_path, capsys)
    worker = dict(launcher, WORLD_SIZE="16", LOCAL_RANK="0")
    assert run(worker, ["--job.config_file", job], rocm_path, capsys) == ""
    assert worker["GPU_MAX_HW_QUEUES"] == "8"


@pytest.mark.parametrize(
    ("content", "argv_extra", "reason"),
    [
        (b"[parallelism\n", [], "{path}: invalid TOML"),
        (b"[parallelism]\ntensor_parallel_degree = 'x'\n", [],
         "{path}: parallelism.tensor_parallel_degree: 'x' is not an integer"),
        (JOB, ["--parallelism.tensor_parallel_degree", "2.0"],
         "--parallelism.tensor_parallel_degree: '2.0' is not an integer"),
        (JOB, ["--compile.enable_passes", "False"],
         "--compile.enable_passes: is a flag and takes no value"),
        (JOB, ["--parallelism.expert_paralel_degree", "2"],
         "--parallelism.expert_paralel_degree: not a torchtitan option; did you"
         " mean --parallelism.expert_parallel_degree?"),
        (b"[parallelism]\nexpert_paralel_degree = 2\n", [],
         "{path}: parallelism.expert_paralel_degree: not a torchtitan field; did"
         " you mean parallelism.expert_parallel_degree?"),
        (b"[paralelism]\nexpert_parallel_degree = 2\n", [],
         "{path}: [paralelism]: not a torchtitan section; did you mean"
         " [parallelism]?"),
    ],
)  # fmt: skip
def test_bad_input_warns_once_and_sets_nothing(
    tmp_path: Path, rocm_path: list[str], capsys: pytest.CaptureFixture[str],
    content: bytes, argv_extra: list[str], reason: str,
) -> None:  # fmt: skip
    path = tmp_path / "bad.toml"
    path.write_bytes(content)
    env: dict[str, str] = {}
    err = run(env, ["--job.config_file", str(path), *argv_extra], rocm_path, capsys)
    assert err.startswith("rocm-hwq-autoset: warning: " + reason.format(path=path))
    assert err.endswith(f"; {UNSET_TAIL}\n")
    assert err.count("\n") == 1
    # Nothing set; the marker tells the launcher's workers not to try again.
    assert env == {"ROCM_HWQ_AUTOSET_ORIGIN": "unset job.config_file"}
    worker = dict(env, WORLD_SIZE="2", LOCAL_RANK="0")
    assert run(worker, ["--job.config_file", str(path), *argv_extra], rocm_path,
               capsys) == ""  # fmt: skip
    assert worker == dict(env, WORLD_SIZE="2", LOCAL_RANK="0")


def test_bad_world_size(
    job: str, rocm_path: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    env = {"WORLD_SIZE": "eight"}
    err = run(env, ["--job.config_file", job], rocm_path, capsys)
    problem = _environ.world_size(env)[1]
    assert err == unset_line("job.config_file", ConfigError(problem, "WORLD_SIZE"))
    assert "GPU_MAX_HW_QUEUES" not in env


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["--job.config_file"], "--job.config_file: expects a value: the TOML job"
         " config; GPU_MAX_HW_QUEUES left unset"),
        (["--job.config_file", ""], "--job.config_file: empty path;"
         " GPU_MAX_HW_QUEUES left unset"),
        (["--job.config_file="], "--job.config_file: empty path;"
         " GPU_MAX_HW_QUEUES left unset"),
    ],
)  # fmt: skip
def test_a_config_flag_without_a_path_is_named(
    args: list[str], said: str, rocm_path: list[str],
    capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    env: dict[str, str] = {}
    assert run(env, args, rocm_path, capsys) == f"rocm-hwq-autoset: warning: {said}\n"
    assert "GPU_MAX_HW_QUEUES" not in env


@pytest.mark.parametrize("value", ["disable", "disabled", "none", "OF", "bogus"])
def test_a_switch_value_it_cannot_read_never_turns_it_on(
    value: str, job: str, rocm_path: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    env = {"ROCM_HWQ_AUTOSET": value}
    err = run(env, ["--job.config_file", job], rocm_path, capsys)
    level, message = said(err)
    assert level == "warning" and message.startswith(f"ROCM_HWQ_AUTOSET={value!r}")
    assert message.startswith(f"{_environ.switch(env)[1]}; ")
    assert env == {"ROCM_HWQ_AUTOSET": value}


@pytest.mark.parametrize("value", ["1", "on", "TRUE", "yes", "auto", ""])
def test_every_on_value(
    value: str, job: str, rocm_path: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    env = {"ROCM_HWQ_AUTOSET": value}
    assert run(env, ["--job.config_file", job], rocm_path, capsys) == LINE


@pytest.mark.parametrize("value", ["abc", "0", "-3", " ", "-1"])
def test_an_explicit_value_hip_cannot_use_is_kept_with_a_warning(
    value: str, job: str, rocm_path: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    env = {"GPU_MAX_HW_QUEUES": value}
    err = run(env, ["--job.config_file", job], rocm_path, capsys)
    reads = _environ.hip_reads(value)
    level, message = said(err)
    assert level == "warning"
    assert message.startswith(f"GPU_MAX_HW_QUEUES={value!r}: HIP reads {reads},")
    assert message.startswith(f"{_environ.QueuesSetting(env).problem}; ")
    assert env == {"GPU_MAX_HW_QUEUES": value}


RESULT = Config(Inputs(moe=True, moe_from="traverse", ep=2, cudagraph=True), {})


def test_a_module_launch_is_pending_and_never_evaluated_in_process(
    rocm_path: list[str],
) -> None:
    outcome = _hook.outcome_for(
        {}, ["-m", *MODULE_ARGS], ["python", "-m", "torchtitan.train", *MODULE_ARGS],
        rocm=lambda: _detect(rocm_path), read_toml=no_read,
    )  # fmt: skip
    assert isinstance(outcome, Launch)
    assert list(outcome.args) == MODULE_ARGS
    final = _decision.conclude({}, outcome, RESULT)
    assert (final.queues, final.marker) == (8, "8 --module")
    lanes = ("compute", "all_reduce", "fsdp_comm", "expert_comm", "cudagraph_capture")
    assert final.line({}) == set_line(8, lanes)
    assert final.inputs == RESULT.inputs
    for where in (_decision.CACHED, _decision.PEER):  # not evaluated by this launch
        told = _decision.conclude({}, outcome, RESULT, where=where)
        assert told.line({}) == set_line(8, lanes, where=where) != final.line({})
    failed = _decision.conclude({}, outcome, ConfigError("no"))
    assert failed.queues is None and failed.marker == "unset --module"
    assert failed.line({}) == unset_line("--module", ConfigError("no"))
    assert failed.text.split()[0] == "--module/--config:"  # no source: the form's
    named = _decision.conclude({}, outcome, ConfigError("no", "--config"))
    assert named.line({}) == unset_line("--module", ConfigError("no", "--config"))
    assert named.text.split()[0] == "--config:"
    # A WORLD_SIZE torchtitan refuses, beside the evaluation's config.
    refused = _decision.conclude({"WORLD_SIZE": "0"}, outcome, RESULT)
    assert (refused.level, refused.queues) == ("warning", None)
    assert (refused.text.split(":")[0], refused.marker) == (
        "WORLD_SIZE",
        "unset --module",
    )


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["--module", "m"], "--config: is required"),
        (["--config", "c"], "--module: is required"),
        (["--config", "c", "--module"], "--module: requires a value"),
        (["--module=", "--config", "c"], "--module: is required"),
    ],
)
def test_a_module_launch_missing_a_flag_is_named(
    args: list[str], said: str, rocm_path: list[str]
) -> None:
    outcome = _hook.outcome_for(
        {}, ["-m", *args], ["python", "-m", "torchtitan.train", *args],
        rocm=lambda: _detect(rocm_path), read_toml=no_read,
    )  # fmt: skip
    assert isinstance(outcome, Outcome) and outcome.level == _decision.WARNING
    assert outcome.text.startswith(said), outcome.text
    assert outcome.marker == "unset --module"


def test_the_world_size_reaches_the_module_launch(rocm_path: list[str]) -> None:
    """A rank started without a launcher knows WORLD_SIZE: its Q resolves
    data_parallel_shard_degree = -1 as a TOML launch's does."""
    outcome = _hook.outcome_for(
        {"WORLD_SIZE": "2"}, ["-m", *MODULE_ARGS],
        ["python", "-m", "torchtitan.train", *MODULE_ARGS],
        rocm=lambda: _detect(rocm_path), read_toml=no_read,
    )  # fmt: skip
    assert isinstance(outcome, Launch)
    dense_tp2 = Config(Inputs(tp=2, cudagraph=True), {})
    # 2 ranks // tp 2 = 1: no FSDP lane; without the world size it would count.
    final = _decision.conclude({"WORLD_SIZE": "2"}, outcome, dense_tp2)
    assert final.queues == 4 and "fsdp_comm" not in final.message
    unknown = _decision.conclude({}, outcome, dense_tp2)
    assert unknown.queues == 8 and "fsdp_comm" in unknown.message


def test_a_worker_of_a_module_launcher_recomputes_with_its_world_size() -> None:
    """The launcher hands its workers the model's inputs; a worker that knows
    WORLD_SIZE applies the same model, with no child and no torch."""
    inputs = Inputs(tp=8, cudagraph=True)  # one node of 8, TP=8, dp_shard = -1
    launcher = {
        "GPU_MAX_HW_QUEUES": "8",
        "ROCM_HWQ_AUTOSET_ORIGIN": "8 --module",
        "ROCM_HWQ_AUTOSET_INPUTS": encode_inputs(inputs),
    }
    args = ["-m", *MODULE_ARGS]
    orig = ["python", "-m", "torchtitan.train", *MODULE_ARGS]
    worker = dict(launcher, WORLD_SIZE="8", LOCAL_RANK="0")
    outcome = _hook.outcome_for(worker, args, orig, rocm=_no_rocm, read_toml=no_read)
    assert isinstance(outcome, Outcome)
    assert (outcome.level, outcome.queues) == ("set", 4)  # 8 // 8 = 1: no FSDP
    assert outcome.marker == "4 --module" and outcome.inputs == inputs
    # Without WORLD_SIZE, or without the inputs: the launcher's value stands.
    for env in (dict(launcher), {k: v for k, v in worker.items()
                                 if k != "ROCM_HWQ_AUTOSET_INPUTS"}):  # fmt: skip
        same = _hook.outcome_for(env, args, orig, rocm=_no_rocm, read_toml=no_read)
        assert isinstance(same, Outcome) and same.level == "skip"
        assert same.queues is None
    # Inputs that are not the launcher's: said, and the value kept.
    bad = dict(worker, ROCM_HWQ_AUTOSET_INPUTS="tp=x")
    said = _hook.outcome_for(bad, args, orig, rocm=_no_rocm, read_toml=no_read)
    assert isinstance(said, Outcome) and said.level == "warning"
    assert said.message.startswith("ROCM_HWQ_AUTOSET_INPUTS: ")
    assert said.queues is None and said.tail.split()[0] == "GPU_MAX_HW_QUEUES=8"
    # A WORLD_SIZE torchtitan refuses: named as itself, not as the inputs.
    bad = dict(worker, WORLD_SIZE="x")
    said = _hook.outcome_for(bad, args, orig, rocm=_no_rocm, read_toml=no_read)
    assert isinstance(said, Outcome) and said.level == "warning"
    assert said.text.split(":")[0] == "WORLD_SIZE" and said.queues is None


@pytest.mark.forked
@pytest.mark.parametrize("rank", ["0", "1"])
def test_a_bad_timeout_is_one_line_and_the_launch_goes_on(
    rocm_path: list[str], monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str], rank: str,
) -> None:  # fmt: skip
    """Was: the whole launch dropped ("GPU_MAX_HW_QUEUES left unset"); now
    the evaluation starts with the default timeout, said once per node."""
    from rocm_hwq_autoset import _evaluation

    monkeypatch.setattr(sys, "argv", ["-m", *MODULE_ARGS])
    monkeypatch.setattr(sys, "orig_argv", ["python", "-m", "torchtitan.train",
                                           *MODULE_ARGS], raising=False)  # fmt: skip
    monkeypatch.setenv("ROCM_HWQ_AUTOSET_TIMEOUT", "2m")
    monkeypatch.setenv("LOCAL_RANK", rank)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(rocm_path))
    monkeypatch.setattr(_hook, "_detect", lambda: _detect(rocm_path))
    started: list[Any] = []
    monkeypatch.setattr(_evaluation, "start", lambda launch, apply: started.append(
        launch))  # fmt: skip
    _hook.run()
    assert [list(launch.args) for launch in started] == [MODULE_ARGS]
    err = capsys.readouterr().err
    if rank == "1":
        assert err == ""
    else:
        problem = _environ.timeout({"ROCM_HWQ_AUTOSET_TIMEOUT": "2m"})[1]
        assert said(err) == ("warning", problem)


def test_the_world_size_resolves_the_shard_degree_in_both_forms(
    tmp_path: Path,
) -> None:
    """``recommend_launch`` hands the world size to the model in both forms: a
    ``data_parallel_shard_degree = -1`` is FSDP on 8 ranks of TP 2 (shard 4),
    not on 2 (shard 1); a --module launch's Q comes from its evaluation's
    inputs, not from its settings."""
    path = tmp_path / "job.toml"
    path.write_text(
        "[parallelism]\ntensor_parallel_degree = 2\n"
        "[compile]\nenable_fsdp_ag_rs_overlap = true\n"
    )
    toml = Launch("job.config_file", ["--job.config_file", str(path)], True)
    module = Launch("--module", MODULE_ARGS, True)
    from rocm_hwq_autoset._config import load_toml

    evaluated = Config(Inputs(dp_shard=-1, tp=2, overlap=True), {})
    fsdp = ("compute", "all_reduce", "dense_all_gather", "reduce_scatter",
            "tp_all_gather")  # fmt: skip
    for world, lanes in ((2, fsdp[:2] + fsdp[4:]), (8, fsdp), (None, fsdp)):
        a = _decision.recommend_launch(toml, world, read_toml=load_toml)
        b = _decision.recommend_launch(module, world, config=evaluated)
        assert a.lanes == b.lanes == lanes, world
        assert b.settings == {}  # nothing read in this process
    with pytest.raises(ConfigError, match=r"^a --module/--config launch needs its"
                       r" evaluation$"):  # fmt: skip
        _decision.recommend_launch(module, None)
    with pytest.raises(ConfigError, match=r"^a TOML launch needs its reader$"):
        _decision.recommend_launch(toml, None)


def _detect(path: list[str]) -> tuple[bool, str]:
    return detect(path, {})


def _no_rocm() -> tuple[bool, str]:
    raise AssertionError("a worker of a launcher does not detect again")


def test_a_module_flag_for_another_program_is_no_launch() -> None:
    outcome = decide_module({"ROCM_HWQ_AUTOSET_LOG": "verbose"}, MODULE_ARGS, "mytool")
    assert isinstance(outcome, Outcome)
    assert (outcome.level, outcome.queues, outcome.marker) == ("skip", None, None)


def test_a_switch_it_cannot_read_is_a_warning() -> None:
    outcome = decide_module(
        {"ROCM_HWQ_AUTOSET": "maybe"}, MODULE_ARGS, "torchtitan.train"
    )
    assert outcome.level == "warning" and outcome.queues is None
    assert outcome.text == _environ.switch({"ROCM_HWQ_AUTOSET": "maybe"})[1]


def test_one_is_a_value_hip_can_use(
    job: str, rocm_path: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    env = {"GPU_MAX_HW_QUEUES": "1", "ROCM_HWQ_AUTOSET_LOG": "verbose"}
    err = run(env, ["--job.config_file", job], rocm_path, capsys)
    level, message = said(err)
    assert level == "skip" and message.split()[0] == "GPU_MAX_HW_QUEUES=1"
    assert env["GPU_MAX_HW_QUEUES"] == "1"
    env = {"WORLD_SIZE": "1"}  # one rank: no FSDP lane, no overlap's lanes
    three = ("compute", "all_reduce", "expert_comm")
    assert run(env, ["--job.config_file", job], rocm_path, capsys) == set_line(4, three)


def test_a_worker_of_a_module_launcher_without_its_world_size_says_why() -> None:
    launcher = {"GPU_MAX_HW_QUEUES": "8", "ROCM_HWQ_AUTOSET_ORIGIN": "8 --module"}
    outcome = decide_module(launcher, MODULE_ARGS, "torchtitan.train")
    assert (outcome.level, outcome.queues, outcome.marker) == ("skip", None, None)
    assert outcome.text.split()[0] == "GPU_MAX_HW_QUEUES=8"  # the launcher's


@pytest.mark.parametrize(
    ("form", "said"), [("--module", "--module"), ("job.config_file", "job.config_file")]
)
def test_a_worker_of_a_launcher_that_failed_does_nothing_and_says_why(
    form: str, said: str
) -> None:
    """The launcher warned once for the node; its workers neither evaluate
    again nor warn again (verbose mode says why)."""
    outcome = decide_module({"ROCM_HWQ_AUTOSET_ORIGIN": f"unset {form}"}, MODULE_ARGS,
                      "torchtitan.train")  # fmt: skip
    assert (outcome.level, outcome.queues, outcome.marker) == ("skip", None, None)
    assert said in outcome.text.split()


def test_a_marker_whose_value_is_gone_is_no_value() -> None:
    """The value was removed, its marker left: decided afresh, evaluated."""
    outcome = decide_module({"ROCM_HWQ_AUTOSET_ORIGIN": "8 --module"}, MODULE_ARGS,
                      "torchtitan.train")  # fmt: skip
    assert isinstance(outcome, Launch)


def test_a_launcher_whose_parent_set_the_same_value_hands_it_on() -> None:
    """A --module launcher started with the value already set (by a parent's
    TOML launch) concludes the same Q: its workers' mappings get the value,
    the --module marker and the inputs all the same."""
    environ = {"GPU_MAX_HW_QUEUES": "8", "ROCM_HWQ_AUTOSET_ORIGIN": "8 job.config_file"}
    pending = decide_module(environ, MODULE_ARGS, "torchtitan.train")
    assert isinstance(pending, Launch)
    outcome = _decision.conclude(environ, pending, RESULT)
    assert (outcome.level, outcome.queues) == ("skip", 8)  # said by the parent
    worker: dict[str, str] = {}
    _hook.apply(outcome, worker, quiet=True)
    assert worker == {
        "GPU_MAX_HW_QUEUES": "8",
        "ROCM_HWQ_AUTOSET_ORIGIN": "8 --module",
        "ROCM_HWQ_AUTOSET_INPUTS": encode_inputs(RESULT.inputs),
    }


def test_a_toml_launch_reads_the_toolkits_cudagraph_pass(
    tmp_path: Path, rocm_path: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    """The TOML era's compiler_toolkit: ``"cudagraph"`` in ``compile.passes``
    turns cudagraph on, a fifth lane beside TP's."""
    job = tmp_path / "job.toml"
    job.write_text(
        '[parallelism]\ntensor_parallel_degree = 2\n[compile]\npasses = ["cudagraph"]\n'
    )
    env: dict[str, str] = {}
    run(env, ["--job.config_file", str(job)], rocm_path, capsys)
    assert env["GPU_MAX_HW_QUEUES"] == "8"

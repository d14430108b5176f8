"""Every line the start-up hook and its decision can say, for one
representative input each, against one golden file (input, then the line):
each wording is pinned here once and reviewed in one place. The other tests
assert the outcome's level, its value and the input a line names."""

from __future__ import annotations

from pathlib import Path

import pytest

from rocm_hwq_autoset import ConfigError, _decision, _early, _environ, _hook, recommend
from rocm_hwq_autoset._argv import Launch
from rocm_hwq_autoset._decision import DETAIL, Outcome
from rocm_hwq_autoset._evaluation import lines
from rocm_hwq_autoset._model import Config, Inputs, encode_inputs

from ..helpers import (
    CUDA_VERSION_PY,
    GOLDEN,
    MODULE_ARGS,
    check_golden,
    decide_module,
    fake_torch,
    lines_report,
    run,
)

pytestmark = pytest.mark.timeout(60)

VERBOSE = {"ROCM_HWQ_AUTOSET_LOG": "verbose"}
#: DeepSeek-V3 with EP, CUDA graphs: its --module evaluation's config.
RESULT = Config(Inputs(moe=True, moe_from="traverse", ep=2, cudagraph=True), {})


def _line(outcome: Outcome | Launch | None) -> str | None:
    assert isinstance(outcome, Outcome)
    return outcome.line(VERBOSE)


def test_every_line_of_the_hook(
    job: str, rocm_path: list[str], tmp_path: Path,
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    def hook(env: dict[str, str], *args: str, path: list[str] = rocm_path) -> str:
        return run(dict(env), ["--job.config_file", job, *args], path, capsys)

    def boom(*args: object, **kwargs: object) -> None:
        raise RuntimeError("boom")

    monkeypatch.setattr(_hook, "outcome_for", boom)
    monkeypatch.setattr(_hook, "decided", None)
    _hook.run()  # the hook's own failure: what it says, as it says it
    internal_error = _hook.decided
    capsys.readouterr()
    bad = tmp_path / "bad.toml"
    bad.write_text("[parallelism]\ntensor_parallel_degree = 'two'\n")
    cuda = [str(fake_torch(tmp_path / "cuda", CUDA_VERSION_PY))]
    pending = decide_module({}, MODULE_ARGS, "torchtitan.train")
    assert isinstance(pending, Launch)
    launcher = {"GPU_MAX_HW_QUEUES": "8", "ROCM_HWQ_AUTOSET_ORIGIN": "8 --module"}
    inputs = encode_inputs(Inputs(tp=8))
    worker = dict(launcher, WORLD_SIZE="8", ROCM_HWQ_AUTOSET_INPUTS=inputs)
    left_out = Inputs(tp=2, async_tp=True, dist_gemm=True, trainer_cudagraph=True)
    parent = {"GPU_MAX_HW_QUEUES": "8", "ROCM_HWQ_AUTOSET_ORIGIN": "8 job.config_file"}
    eight = recommend(
        {"parallelism": {"tensor_parallel_degree": 2, "expert_parallel_degree": 2}},
        world_size=8, is_moe=True,
    )  # fmt: skip
    set_eight = Outcome("set", "", rec=eight)
    entries = [
        ("job.toml: DeepSeek-V3, EP 2, overlap", hook({})),
        ("job.toml, WORLD_SIZE=1", hook({"WORLD_SIZE": "1"})),
        ("ROCM_HWQ_AUTOSET=0, verbose", hook({"ROCM_HWQ_AUTOSET": "0", **VERBOSE})),
        ("ROCM_HWQ_AUTOSET=bogus", hook({"ROCM_HWQ_AUTOSET": "bogus"})),
        ("GPU_MAX_HW_QUEUES=abc", hook({"GPU_MAX_HW_QUEUES": "abc"})),
        ("GPU_MAX_HW_QUEUES=1, verbose", hook({"GPU_MAX_HW_QUEUES": "1", **VERBOSE})),
        ("a CUDA torch, verbose", hook(VERBOSE, path=cuda)),
        ("no launch, verbose", _line(decide_module(VERBOSE, MODULE_ARGS, "mytool"))),
        ("own command, verbose",
         _line(decide_module(VERBOSE, MODULE_ARGS, "rocm_hwq_autoset.__main__"))),
        ("WORLD_SIZE=eight", hook({"WORLD_SIZE": "eight"})),
        ("LOCAL_RANK=one", hook({"LOCAL_RANK": "one"})),
        ("bad.toml: tensor_parallel_degree = 'two'",
         run({}, ["--job.config_file", str(bad)], rocm_path, capsys)),
        ("--job.config_file (no value)",
         run({}, ["--job.config_file"], rocm_path, capsys)),
        ("--job.config_file= (empty)",
         run({}, ["--job.config_file="], rocm_path, capsys)),
        ("--module and --job.config_file",
         _line(decide_module({}, [*MODULE_ARGS, "--job.config_file", "j.toml"],
                             "torchtitan.train"))),
        ("--module without --config",
         _line(decide_module({}, ["--module", "m"], "torchtitan.train"))),
        ("--module: evaluated", _line(_decision.conclude({}, pending, RESULT))),
        ("--module: from the cache",
         _line(_decision.conclude({}, pending, RESULT, where=_decision.CACHED))),
        ("--module: another launch evaluated it while this one looked",
         _line(_decision.conclude({}, pending, RESULT, where=_decision.PEER))),
        ("--module: the evaluation failed (no source)",
         _line(_decision.conclude({}, pending, ConfigError("no")))),
        ("--module: the evaluation failed (--config)",
         _line(_decision.conclude({}, pending, ConfigError("no", "--config")))),
        ("--module: the parent set the same value",
         _line(_decision.conclude(parent, pending, RESULT))),
        ("worker of a --module launcher, no WORLD_SIZE",
         _line(decide_module(dict(launcher, **VERBOSE), MODULE_ARGS,
                             "torchtitan.train"))),
        ("worker of a --module launcher, ROCM_HWQ_AUTOSET_INPUTS=tp=x",
         _line(decide_module(dict(worker, ROCM_HWQ_AUTOSET_INPUTS="tp=x"),
                             MODULE_ARGS, "torchtitan.train"))),
        ("worker of a --module launcher that failed",
         _line(decide_module({"ROCM_HWQ_AUTOSET_ORIGIN": "unset --module", **VERBOSE},
                             MODULE_ARGS, "torchtitan.train"))),
        ("worker, WORLD_SIZE=2, async TP and dist GEMM left out, verbose",
         _line(decide_module(dict(launcher, WORLD_SIZE="2",
                                  ROCM_HWQ_AUTOSET_INPUTS=encode_inputs(left_out)),
                             MODULE_ARGS, "torchtitan.train"))),
        ("an internal error", _line(internal_error)),
        ("HIP started before Q=8, two .pth files ran first",
         _line(_early.too_late(set_eight, during="at interpreter start",
                               early=["/site/aaa_gpu_probe.pth",
                                      "/site/aab_probe.pth"]))),
        ("HIP started before Q=8, no start-up file ran first",
         _line(_early.too_late(set_eight, during="at interpreter start"))),
        ("a detail: the cache folder /c of mode 777",
         _line(Outcome(DETAIL, "cache: /c: writable by its group or others;"
                       " not used", "evaluating without it"))),
        ("a --module launch waits, 42 s left at most",
         _line(lines.waiting(pending, 42.4))),
        ("Ctrl-C after 1.5 s of waiting",
         _line(lines.interrupted(KeyboardInterrupt(), 1.53))),
        ("a path with control characters, 1000 characters long",
         run({}, ["--job.config_file", "a\nb\x1b[31m" + "x" * 1000], rocm_path,
             capsys)),
    ]  # fmt: skip
    check_golden(GOLDEN / "lines" / "hook.txt", lines_report(entries, tmp_path))


def test_every_problem_of_a_variable() -> None:
    """What each reader of ``_environ`` says of a value it cannot read: the
    hook and the commands say it as it is, their own tail after it."""
    beyond = str(2**31)
    entries = [
        ("ROCM_HWQ_AUTOSET=maybe", _environ.switch({"ROCM_HWQ_AUTOSET": "maybe"})[1]),
        ("ROCM_HWQ_AUTOSET_CACHE=sometimes",
         _environ.cache_switch({"ROCM_HWQ_AUTOSET_CACHE": "sometimes"})[1]),
        ("ROCM_HWQ_AUTOSET_LOG=bogus",
         _environ.log_level({"ROCM_HWQ_AUTOSET_LOG": "bogus"})[1]),
        ("ROCM_HWQ_AUTOSET_TIMEOUT=2m",
         _environ.timeout({"ROCM_HWQ_AUTOSET_TIMEOUT": "2m"})[1]),
        ("WORLD_SIZE=eight", _environ.world_size({"WORLD_SIZE": "eight"})[1]),
        ("LOCAL_RANK=one", _environ.local_rank_problem({"LOCAL_RANK": "one"})),
        (f"GPU_MAX_HW_QUEUES={beyond}",
         _environ.QueuesSetting({"GPU_MAX_HW_QUEUES": beyond}).problem),
        ("GPU_MAX_HW_QUEUES=-3",
         _environ.QueuesSetting({"GPU_MAX_HW_QUEUES": "-3"}).problem),
        (f"DEBUG_HIP_IGNORE_STREAM_PRIORITY={beyond}",
         _environ.ignore_priority({"DEBUG_HIP_IGNORE_STREAM_PRIORITY": beyond})[1]),
        ("DEBUG_HIP_IGNORE_STREAM_PRIORITY=yes",
         _environ.ignore_priority({"DEBUG_HIP_IGNORE_STREAM_PRIORITY": "yes"})[1]),
    ]  # fmt: skip
    check_golden(GOLDEN / "lines" / "environ.txt", lines_report(entries))

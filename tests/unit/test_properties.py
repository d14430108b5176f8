"""Property-based tests (hypothesis) of the decision, the argv and TOML
readers and the trace reader. ``HYPOTHESIS_PROFILE=soak`` (benchmarks/soak.py)
runs 10,000 examples per property; CI runs the default profile, 100 examples
each (the cases that matter most are the other tests' tables: mutation testing,
docs/mutation.md, found what these properties miss)."""

from __future__ import annotations

import contextlib
import json
import os
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from _rocm_hwq_autoset_gate import may_be_launch
from rocm_hwq_autoset import ConfigError, _traces, recommend
from rocm_hwq_autoset._argv import Launch, cli_overrides, config_file_arg, find_launch
from rocm_hwq_autoset._config import FIELDS, parse_toml
from rocm_hwq_autoset._decision import Outcome
from rocm_hwq_autoset._hook import outcome_for
from rocm_hwq_autoset._traces import TraceError

settings.register_profile("ci", max_examples=100, deadline=None)
settings.register_profile(
    "soak", max_examples=10_000, deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)  # fmt: skip
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))

KEYS = sorted(FIELDS)
FLAG_NAMES = st.sampled_from(
    [f"--{k}" for k in KEYS]
    + [f"--{k.replace('_', '-')}" for k in KEYS]
    + [f"--{k.split('.')[0]}.no-{k.split('.')[1]}" for k in KEYS]
    + [
        "--job.config_file",
        "--job.config-file",
        "--training.steps",
        "--",
        "-x",
        "--module",
        "--config",
        "--module-path",
        "--modules",
        "--job.config_files",
    ]
)
VALUES = st.one_of(
    st.sampled_from(["1", "2", "-1", "0", "+2", "2.0", "0x2", "8", "", "a,b",
                     "cudagraph_pass", "cudagraph", "deepseek_v3", "qwen3", "True"]),
    st.text(max_size=8),
)  # fmt: skip
TOKEN = st.one_of(
    FLAG_NAMES,
    VALUES,
    st.builds(lambda f, v: f"{f}={v}", FLAG_NAMES, VALUES),
)
ARGV = st.lists(TOKEN, max_size=12)

SCALARS = st.one_of(
    st.integers(min_value=-(2**70), max_value=2**70), st.booleans(), st.floats(),
    st.text(max_size=10), st.none(),
)  # fmt: skip
FIELD_VALUES = st.one_of(
    SCALARS,
    st.lists(st.one_of(st.text(max_size=12), st.integers()), max_size=4),
    st.sampled_from([-1, 1, 2, 4, 8, "deepseek_v3", "llama4", "qwen3", "30B-A3B",
                     ["cudagraph_pass"], ["cudagraph"], True, False]),
)  # fmt: skip
SECTIONS = st.dictionaries(
    st.sampled_from(["model", "parallelism", "compile", "training"]),
    st.one_of(
        st.dictionaries(
            st.sampled_from([k.split(".")[1] for k in KEYS] + ["other"]),
            FIELD_VALUES, max_size=6,
        ),
        SCALARS,
    ),
    max_size=4,
)  # fmt: skip


@given(ARGV)
def test_argv_reader_raises_only_config_error(argv: list[str]) -> None:
    with contextlib.suppress(ConfigError):
        config_file_arg(argv)
    try:
        overrides = cli_overrides(argv)
    except ConfigError as exc:
        error = str(exc)
    else:
        assert set(overrides) <= set(FIELDS)
        return
    assert "\n" not in error


PROGRAMS = st.sampled_from(
    [["train.py"], ["-m"], ["-c"], ["/venv/bin/torchrun", "--standalone", "-m",
     "torchtitan.train"], ["/x/torchtitan/train.py"], ["/venv/bin/rocm-hwq-autoset"],
     [""]]
)  # fmt: skip
ORIGS = st.sampled_from(
    [
        [],
        ["python", "-m", "torchtitan.train"],
        ["python", "-m", "torch.distributed.run"],
    ]
)
ENVIRON = st.dictionaries(
    st.sampled_from(["ROCM_HWQ_AUTOSET", "GPU_MAX_HW_QUEUES", "ROCM_HWQ_AUTOSET_ORIGIN",
                     "ROCM_HWQ_AUTOSET_INPUTS", "WORLD_SIZE", "LOCAL_RANK",
                     "ROCM_HWQ_AUTOSET_TIMEOUT", "ROCM_HWQ_AUTOSET_LOG"]),
    st.one_of(VALUES, st.sampled_from(["force", "8 --module", "unset --module",
                                       "4 job.config_file", "off"])),
    max_size=5,
)  # fmt: skip


@given(PROGRAMS, ORIGS, ARGV, ENVIRON, SECTIONS)
def test_the_decision_is_total(
    program: list[str], orig: list[str], argv: list[str],
    environ: dict[str, str], config: dict[str, Any],
) -> None:  # fmt: skip
    """Whatever the environment and the command line: an outcome or a pending
    launch, never an exception, and one line to say it."""
    full = [*program, *argv]
    result = outcome_for(
        environ, full, [*orig, *argv] if orig else [],
        rocm=lambda: (True, "test"), read_toml=lambda path: config,
    )  # fmt: skip
    if isinstance(result, Launch):
        assert result.form == "--module"
        assert find_launch(full, [*orig, *argv] if orig else []) is not None
        return
    assert isinstance(result, Outcome)
    assert "\n" not in result.message
    if result.queues is not None:
        assert result.queues in (2, 4, 8)
        assert result.marker is not None


@given(PROGRAMS, ORIGS, ARGV)
def test_the_gate_never_stays_shut_for_a_launch(
    program: list[str], orig: list[str], argv: list[str]
) -> None:
    """The gate is the hook's own test made cheap: wherever ``find_launch``
    finds a launch (or both forms at once) through a ``--job.config_file`` or a
    ``--module`` flag, the gate opens. ``sys.orig_argv`` as CPython makes it:
    the interpreter, its options, then ``sys.argv`` (the module's name for
    ``-m``); none on 3.9."""
    full = [*program, *argv]
    if program[0] == "-m":
        orig_full = [*orig, *argv] if orig else []
    else:
        orig_full = ["python", *full] if orig else []
    try:
        launch = find_launch(full, orig_full) is not None
    except ConfigError:  # both forms at once: the hook says so
        launch = True
    flags = {arg.partition("=")[0] for arg in full}
    if launch and flags & {"--job.config_file", "--job.config-file", "--module"}:
        assert may_be_launch(full, {}, orig_full or None)


@given(SECTIONS, ARGV, st.one_of(st.none(), st.integers(1, 4096)))
def test_decision_is_total_and_q_is_a_power_of_two(
    config: dict[str, Any], argv: list[str], world_size: int | None
) -> None:
    try:
        rec = recommend(config, argv=argv, world_size=world_size)
    except ConfigError as exc:
        message = str(exc)
        assert "\n" not in message
        return
    q = rec.queues
    assert q & (q - 1) == 0
    assert 2 <= q <= 8
    assert q >= len(rec.lanes) > q // 2
    assert rec.lanes[:2] == ("compute", "all_reduce")


@given(st.binary(max_size=512))
def test_toml_reader_raises_only_config_error_on_bytes(data: bytes) -> None:
    with contextlib.suppress(ConfigError):
        parse_toml(data)


TOML_ATOMS = st.sampled_from(
    ["[", "]", "[[", "]]", "{", "}", "=", ",", ".", "\n", " ", '"', "'", "'''", "#",
     "parallelism", "model", "compile", "tensor_parallel_degree", "name", "1", "-1",
     "2.0", "true", "1979-05-27", "inf", "nan", "0x2", "\\u00e9", "é"]
)  # fmt: skip


@given(st.lists(TOML_ATOMS, max_size=40))
def test_toml_reader_and_decision_on_toml_like_text(atoms: list[str]) -> None:
    try:
        config = parse_toml("".join(atoms).encode())
        recommend(config)
    except ConfigError:
        pass


EVENT = st.one_of(
    st.builds(
        lambda d, s, cat: {"ph": "X", "cat": cat, "args": {"device": d, "stream": s}},
        st.integers(0, 3), st.integers(0, 2**40),
        st.sampled_from(["kernel", "gpu_memcpy", "gpu_memset", "cpu_op", "cuda_sync"]),
    ),
    st.builds(
        lambda p, t, name: {"ph": "M", "name": "thread_name", "pid": p, "tid": t,
                            "args": {"name": name}},
        st.integers(0, 3), st.integers(0, 100),
        st.sampled_from(["stream 1 ", "thread 5 (python)", "stream", "Device 0"]),
    ),
    st.dictionaries(st.text(max_size=4), st.one_of(st.text(max_size=6), st.integers()),
                    max_size=3),
)  # fmt: skip


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(EVENT, max_size=30), st.integers(1, 64), st.sampled_from([None, 1]))
def test_trace_reader_matches_json_load(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    events: list[dict[str, Any]], chunk: int, indent: int | None,
) -> None:  # fmt: skip
    doc = {"schemaVersion": 1, "traceEvents": events, "other": {"é": [1, 2]}}
    path = tmp_path / "t.json"
    path.write_text(json.dumps(doc, indent=indent, ensure_ascii=False))
    monkeypatch.setattr(_traces, "CHUNK", chunk)
    expected: dict[Any, set[Any]] = {}
    work = False
    for event in events:
        found = _traces._gpu_stream(event)
        if found is not None:
            expected.setdefault((found[0], found[2]), set()).add(found[1])
            work = work or found[3]
    if not work:  # a trace with no GPU work says so
        with pytest.raises(TraceError):
            _traces.count_streams(str(path))
        return
    assert _traces.count_streams(str(path)) == expected


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.binary(max_size=200))
def test_trace_reader_raises_only_trace_error(tmp_path: Path, data: bytes) -> None:
    path = tmp_path / "t.json"
    path.write_bytes(data)
    with contextlib.suppress(TraceError):
        _traces.count_streams(str(path))

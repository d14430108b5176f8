"""``verify``: stream counts from real and generated profiler traces."""

from __future__ import annotations

import gzip
import json
import random
from pathlib import Path
from typing import Any

import pytest

from rocm_hwq_autoset._cli import main
from rocm_hwq_autoset._cli import traces as _traces
from rocm_hwq_autoset._cli.traces import TraceError

from .helpers import TRACE_DIR, by_device, corpus_file

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = str(ROOT / "examples" / "deepseek_v3_16b.toml")


@pytest.mark.parametrize(
    ("name", "streams", "devices"),
    [
        ("a100_event_sync_multi_stream.json.gz", 3, {0: {20, 24, 28}}),
        ("mi250_rocm6_2_minitoy_train.json.gz", 1, {2: {0}}),
        ("sampled_rank-0.json.gz", 5, {0: {7, 23, 25, 84, 203}}),
    ],
)
def test_corpus_traces(name: str, streams: int, devices: dict[int, set[int]]) -> None:
    assert by_device(str(corpus_file(TRACE_DIR, name))) == devices


def kernel(device: int, stream: int, cat: str = "kernel") -> dict[str, Any]:
    return {"ph": "X", "cat": cat, "name": "k", "pid": device, "tid": stream,
            "ts": 1, "dur": 2,
            "args": {"device": device, "stream": stream}}  # fmt: skip


def thread_name(pid: int, tid: int, name: str) -> dict[str, Any]:
    return {
        "ph": "M",
        "name": "thread_name",
        "pid": pid,
        "tid": tid,
        "args": {"name": name},
    }


def trace(events: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
    return {"schemaVersion": 1, "deviceProperties": [{"id": 0}], "traceEvents": events,
            "traceName": "x", **extra}  # fmt: skip


def write(path: Path, doc: Any, *, gz: bool = False, indent: int | None = None) -> str:
    data = json.dumps(doc, indent=indent).encode()
    path.write_bytes(gzip.compress(data) if gz else data)
    return str(path)


SEVERAL_DEVICES = trace([
    kernel(0, 7), kernel(0, 7), kernel(0, 13, "gpu_memcpy"),
    kernel(0, 20, "gpu_memset"),
    kernel(1, 7), kernel(1, 9),
    thread_name(1, 11, "stream 11 "), thread_name(1, 7, "stream 7 "),
    thread_name(4242, 4242, "thread 4242 (python)"),  # a CPU thread
    {"ph": "X", "cat": "cuda_sync", "pid": 0, "tid": 99,
     "args": {"device": 0, "stream": 99}},  # not GPU work
    {"ph": "X", "cat": "cpu_op", "pid": 1, "tid": 1, "args": {"stream": 3}},
    {"ph": "X", "cat": "cuda_runtime", "args": {"stream": "0x0"}},
])  # fmt: skip


@pytest.mark.parametrize("gz", [False, True])
@pytest.mark.parametrize("indent", [None, 1])
def test_several_devices(tmp_path: Path, gz: bool, indent: int | None) -> None:
    path = write(tmp_path / "t.json", SEVERAL_DEVICES, gz=gz, indent=indent)
    assert by_device(path) == {0: {7, 13, 20}, 1: {7, 9, 11}}


def test_array_form_and_no_gpu_work(tmp_path: Path) -> None:
    assert by_device(write(tmp_path / "a.json", [kernel(3, 1)])) == {3: {1}}
    assert by_device(write(tmp_path / "b.json", trace([]))) == {}


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"", "empty file"),
        (b"   \n", "empty file"),
        (b"hello", "not JSON"),
        (b'{"foo": 1, "bar": [1, 2]}', "no traceEvents"),
        (b'"just a string"', "not JSON"),
        (b'{"traceEvents": {"a": 1}}', r"expected '\['"),
        (b'{"traceEvents": [{"ph": "X"}, ', "truncated"),
        (b'{"traceEvents": [{"ph": "X"', "truncated"),
        (b'{"traceEvents": [{"ph": "X"}]', "truncated"),
        (b'{"traceEvents": [1 2]}', r"expected '\]'"),
        (b'\xff\xfe{"traceEvents": []}', "unreadable"),
    ],
)
def test_bad_input(tmp_path: Path, content: bytes, message: str) -> None:
    path = tmp_path / "bad.json"
    path.write_bytes(content)
    with pytest.raises(TraceError, match=message):
        by_device(str(path))


def test_truncated_gzip_and_missing(tmp_path: Path) -> None:
    data = gzip.compress(json.dumps(SEVERAL_DEVICES).encode())
    path = tmp_path / "cut.json.gz"
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(TraceError, match=r"unreadable|truncated"):
        by_device(str(path))
    with pytest.raises(TraceError, match="No such file"):
        by_device(str(tmp_path / "missing.json"))
    with pytest.raises(TraceError, match="directory"):
        by_device(str(tmp_path))


def reference_count(doc: Any) -> dict[Any, set[Any]]:
    """The obvious, load-everything implementation the streaming one must match."""
    events = doc["traceEvents"] if isinstance(doc, dict) else doc
    out: dict[Any, set[Any]] = {}
    for e in events:
        a = e.get("args", {})
        if (
            e.get("ph") == "X"
            and "device" in a
            and "stream" in a
            and any(k in e.get("cat", "") for k in ("kernel", "memcpy", "memset"))
        ):
            out.setdefault(a["device"], set()).add(a["stream"])
        if (
            e.get("ph") == "M"
            and e.get("name") == "thread_name"
            and str(a.get("name", "")).startswith("stream ")
        ):
            out.setdefault(e["pid"], set()).add(e["tid"])
    return out


@pytest.mark.parametrize("chunk", [1, 7, 64, 4096])
@pytest.mark.parametrize("seed", range(5))
def test_chunk_boundaries(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, chunk: int, seed: int
) -> None:
    """Events, numbers and multi-byte characters cut at any byte."""
    rng = random.Random(seed)
    events = []
    for _ in range(200):
        d, s = rng.randrange(4), rng.randrange(1, 10 ** rng.randrange(1, 7))
        events.append(kernel(d, s, rng.choice(["kernel", "gpu_memcpy", "cpu_op"])))
        events.append({"ph": "X", "cat": "cpu_op", "name": "é€😀" * rng.randrange(3),
                       "args": {"n": 1.5e10}})  # fmt: skip
    doc = trace(events, distributedInfo={"rank": 0, "name": "ünï"})
    path = write(tmp_path / "t.json", doc, indent=rng.choice([None, 2]))
    monkeypatch.setattr(_traces, "CHUNK", chunk)
    assert by_device(path) == reference_count(doc)


def verify(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(["verify", *args])
    out, err = capsys.readouterr()
    return code, out, err


def test_queue_sources_and_exit_codes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("GPU_MAX_HW_QUEUES", raising=False)
    five = write(tmp_path / "five.json", trace([kernel(0, s) for s in range(5)]))
    three = write(
        tmp_path / "three.json.gz", trace([kernel(0, s) for s in range(3)]), gz=True
    )

    code, out, _ = verify(capsys, three)
    assert code == 0 and "Q = 4, from HIP's default" in out
    assert "needs Q >= 3 (PR #4032 would set 4)" in out

    code, out, _ = verify(capsys, three, five)
    assert code == 1 and "short" in out

    code, out, _ = verify(capsys, "--queues", "8", three, five)
    assert code == 0 and "from --queues" in out

    monkeypatch.setenv("GPU_MAX_HW_QUEUES", "8")
    code, out, _ = verify(capsys, five)
    assert code == 0 and "from GPU_MAX_HW_QUEUES in the environment" in out

    monkeypatch.delenv("GPU_MAX_HW_QUEUES")
    code, out, _ = verify(capsys, "--json", three, five, "--job.config_file", EXAMPLE,
                          "--parallelism.expert_parallel_degree", "2",
                          "--compile.enable_fsdp_ag_rs_overlap")  # fmt: skip
    doc = json.loads(out)
    assert code == 0 and doc["queues"] == 8 and doc["ok"] is True
    assert doc["queues_source"].startswith("the training arguments")
    assert [(t["path"], t["streams"], t["needed"]) for t in doc["traces"]] == [
        (three, 3, 3), (five, 5, 5)
    ]  # fmt: skip
    assert [t["pr_recommends"] for t in doc["traces"]] == [4, 8]
    assert all(isinstance(t["streams"], int) for t in doc["traces"])


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ([], "needs at least one TRACE"),
        (["/nonexistent.json"], "/nonexistent.json: No such file"),
        (["--queues", "0", "x"], "--queues 0: must be >= 1"),
    ],
)
def test_errors_exit_2(
    args: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = verify(capsys, *args)
    assert code == 2 and out == "" and message in err and err.count("\n") == 1


def test_bad_trace_among_good_exits_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    good = write(tmp_path / "good.json", trace([kernel(0, 1)]))
    bad = tmp_path / "bad.json"
    bad.write_text('{"traceEvents": [')
    code, _, err = verify(capsys, good, str(bad))
    assert code == 2 and f"{bad}: " in err and "Traceback" not in err


def test_bad_training_args_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    good = write(tmp_path / "good.json", trace([kernel(0, 1)]))
    code, _, err = verify(capsys, good, "--job.config_file", "/nonexistent.toml")
    assert code == 2 and "No such file" in err


def test_hips_rule_not_the_power_of_two(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Five streams fit five queues (HIP needs Q >= streams), not only eight."""
    five = write(tmp_path / "five.json", trace([kernel(0, s) for s in range(5)]))
    code, out, _ = verify(capsys, "--queues", "5", five)
    assert code == 0 and out.splitlines()[1].startswith("ok")
    code, out, _ = verify(capsys, "--queues", "4", five)
    assert code == 1 and out.splitlines()[1].startswith("short")


def test_devices_are_counted_apart_through_the_command(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Each device has its own queues: 3 + 3 streams on two devices fit Q = 4."""
    events = [kernel(d, s) for d in (0, 1) for s in range(3)]
    path = write(tmp_path / "two.json", trace(events))
    code, out, _ = verify(capsys, "--queues", "4", path)
    assert code == 0 and "(device 0: 3, device 1: 3)" in out
    wide = write(tmp_path / "wide.json", trace([*events, kernel(1, 7), kernel(1, 8)]))
    code, out, _ = verify(capsys, "--json", "--queues", "4", wide)
    doc = json.loads(out)
    assert code == 1 and doc["traces"][0]["devices"] == {"device 0": 3, "device 1": 5}


def test_priorities_are_separate_pools(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """HIP keeps one pool per stream priority: where a trace gives priorities,
    four normal and two high-priority streams fit Q = 4."""
    events = [kernel(0, s) for s in range(4)]
    for s in (10, 11):
        event = kernel(0, s)
        event["args"]["priority"] = -1
        events.append(event)
    path = write(tmp_path / "prio.json", trace(events))
    code, out, _ = verify(capsys, "--queues", "4", path)
    assert code == 0 and "device 0: 4" in out and "device 0 priority -1: 2" in out

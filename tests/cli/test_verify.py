"""``verify``: stream counts from generated profiler traces (and the shared
corpus's real ones where it exists), where Q comes from, and one line saying
what a file is when it is no trace to check."""

from __future__ import annotations

import argparse
import bz2
import errno
import fcntl
import gzip
import io
import json
import lzma
import os
import random
import re
import shlex
import struct
import termios
import threading
import time
from functools import partial
from pathlib import Path
from typing import Any

import pytest

from rocm_hwq_autoset import _pools, _traces
from rocm_hwq_autoset._cli import CUT_SHORT, main
from rocm_hwq_autoset._cli import verify as _verify
from rocm_hwq_autoset._cli.term import paint
from rocm_hwq_autoset._cli.verify import ALIKE
from rocm_hwq_autoset._environ import QUEUES, QueuesSetting
from rocm_hwq_autoset._pools import NOTHING_SAYS
from rocm_hwq_autoset._traces import NO_ACTIVITY, TraceError, count_streams

from ..data import (
    TRACE_DEVICES,
    TRACE_DIR,
    TRACE_POOLS,
    TRACE_SHARED_DEVICES,
    TRACE_SHARED_STREAMS,
    TRACE_STREAMS,
    corpus_dir,
    kernel,
    profiler_trace,
    sorted_by_time,
    thread_name,
    write_trace,
)
from ..helpers import GOLDEN, by_device, check_golden
from .commands import case, transcript

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = str(ROOT / "examples" / "deepseek_v3_16b.toml")
PREFIX = "rocm-hwq-autoset: error: "

#: The shared corpus's real traces, and their streams per device.
CORPUS_TRACES = {
    "a100_event_sync_multi_stream.json.gz": {0: {20, 24, 28}},
    "mi250_rocm6_2_minitoy_train.json.gz": {2: {0}},
    "sampled_rank-0.json.gz": {0: {7, 23, 25, 84, 203}},
}


def test_corpus_traces() -> None:
    """Real traces (a CUDA A100, a ROCm MI250, a sampled training rank) count as
    they always have. Only where the shared corpus exists."""
    folder = corpus_dir(TRACE_DIR)
    assert sorted(p.name for p in folder.glob("*.json.gz")) == sorted(CORPUS_TRACES)
    for name, devices in CORPUS_TRACES.items():
        assert by_device(str(folder / name)) == devices, name


@pytest.fixture(autouse=True)
def wide_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each line of the report whole, as the tests pin them (their wrapping to
    the terminal: ``test_the_lines_fit_the_terminal``)."""
    monkeypatch.setenv("COLUMNS", "1000")


def trace(events: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
    return {"schemaVersion": 1, "deviceProperties": [{"id": 0}], "traceEvents": events,
            "traceName": "x", **extra}  # fmt: skip


@pytest.mark.parametrize("gz", [False, True])
@pytest.mark.parametrize("indent", [None, 1])
def test_the_generated_trace(tmp_path: Path, gz: bool, indent: int | None) -> None:
    """Several devices, priorities and streams; kernels, copies and memsets;
    lanes named by metadata; CPU ops, runtime calls and syncs that do not count."""
    name = "t.json.gz" if gz else "t.json"
    path = write_trace(tmp_path / name, profiler_trace(), gz=gz, indent=indent)
    assert count_streams(path) == TRACE_POOLS


@pytest.mark.parametrize("gz", [False, True])
def test_the_generated_trace_through_the_command(
    tmp_path: Path, gz: bool, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write_trace(tmp_path / ("t.json.gz" if gz else "t.json"), profiler_trace(),
                       gz=gz)  # fmt: skip
    code, out, _ = verify(capsys, "--json", "--pools", "separate", path)
    doc = json.loads(out)
    assert code == 0 and doc["queues"] == 4 and doc["ok"] is True
    [report] = doc["traces"]
    [judged] = report["verdicts"]
    assert judged["pools"] == "separate" and judged["devices"] == TRACE_DEVICES
    assert judged["streams"] == judged["needed"] == TRACE_STREAMS
    assert judged["power_of_two"] == 4
    code, out, _ = verify(capsys, "--queues", str(TRACE_STREAMS - 1), "--pools",
                          "separate", path)  # fmt: skip
    assert code == 1 and out.splitlines()[2].startswith("short")
    assert listing(TRACE_DEVICES) in out


def test_array_form(tmp_path: Path) -> None:
    assert by_device(write_trace(tmp_path / "a.json", [kernel(3, 1)])) == {3: {1}}


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"", "empty file"),
        (b"   \n", "empty file"),
        (b"hello", "not JSON"),
        (b"42abc", "not JSON"),
        (b"-", "not JSON"),
        (b"\xc3", "binary data, not JSON text"),  # a character cut short
        (b'{"foo": 1, "bar": [1, 2]}',
         "JSON, but not a profiler trace: an object without traceEvents"),
        (b'"just a string"', "JSON, but not a profiler trace: a JSON string"),
        (b"3.5", "JSON, but not a profiler trace: a JSON number"),
        (b"true", "JSON, but not a profiler trace: a JSON boolean"),
        (b"null", "JSON, but not a profiler trace: a JSON null"),
        (b'{"traceEvents": {"a": 1}}',
         "expected '[' traceEvents, found '{' (truncated?)"),
        (b'{"traceEvents": [{"ph": "X"}, ',
         "invalid or truncated JSON: Expecting value"),
        (b'{"traceEvents": [{"ph": "X"}',
         "expected ']' to close traceEvents, found the end of the file (truncated?)"),
        (b'{"traceEvents": [{"ph": "X"}]',
         "invalid or truncated JSON after 'traceEvents'"),
        (b'{"traceEvents": [1 2]}',
         "expected ']' to close traceEvents, found '2' (truncated?)"),
        (b"[1 2]", "expected ']' to close the event array, found '2' (truncated?)"),
        (b"{1: 2}", "invalid JSON object key"),
        (b'{"a" 1}', "expected ':' after 'a', found '1' (truncated?)"),
        (b'{"a": 1 "b": 2}', "invalid or truncated JSON after 'a'"),
        (b'\xff\xfe{"traceEvents": []}', "binary data, not JSON text"),
        (bytes(range(256)) * 4, "binary data, not JSON text"),
    ],
)  # fmt: skip
def test_bad_input(tmp_path: Path, content: bytes, message: str) -> None:
    path = tmp_path / "bad.json"
    path.write_bytes(content)
    with pytest.raises(TraceError) as caught:
        count_streams(str(path))
    assert str(caught.value) == message


def test_truncated_gzip_and_missing(tmp_path: Path) -> None:
    data = gzip.compress(json.dumps(profiler_trace()).encode())
    path = tmp_path / "cut.json.gz"
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(TraceError, match=r"unreadable|truncated"):
        count_streams(str(path))
    with pytest.raises(TraceError, match="No such file"):
        count_streams(str(tmp_path / "missing.json"))
    with pytest.raises(TraceError, match="directory"):
        count_streams(str(tmp_path))


def test_white_space_around_the_document_and_none_inside(tmp_path: Path) -> None:
    """A trace written without spaces (``separators=(",", ":")``), with blank
    lines before and after, counts as the spaced one does."""
    compact = json.dumps(profiler_trace(), separators=(",", ":"))
    path = tmp_path / "compact.json"
    path.write_text(f"\n  {compact}\n\n")
    assert count_streams(str(path)) == TRACE_POOLS


def test_the_lanes_named_by_metadata(tmp_path: Path) -> None:
    """A ``thread_name`` event named ``stream N`` is a lane of device ``pid``:
    stream ``tid``, or N where the event has no ``tid``. Other metadata naming
    a stream, and thread names of CPU threads, are no lanes."""
    events = [
        kernel(0, 1),
        thread_name(0, 5, "stream 9 "),
        {"ph": "M", "name": "thread_name", "pid": 1, "args": {"name": "stream 12 "}},
        {"ph": "M", "name": "process_name", "pid": 2, "tid": 3,
         "args": {"name": "stream 3"}},
        thread_name(3, 4, "thread 4 (python)"),
    ]  # fmt: skip
    path = write_trace(tmp_path / "t.json", trace(events))
    assert count_streams(path) == {(0, None): {1, 5}, (1, None): {12}}


def test_devices_and_streams_given_as_text(tmp_path: Path) -> None:
    """A number written as text is that number: device "1" is device 1, stream
    "5" stream 5. A name stays a name, and true is no device 1."""
    events = [kernel(1, 5), kernel("1", "5"), kernel(1, "6"), kernel("gpu", "a"),
              kernel(True, 1)]  # fmt: skip
    path = write_trace(tmp_path / "t.json", trace(events))
    assert count_streams(path) == {
        (1, None): {5, 6}, ("gpu", None): {"a"}, ("True", None): {1}
    }  # fmt: skip


def test_a_trace_is_read_a_chunk_at_a_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Memory stays flat whatever the trace's size: the first event comes
    after a chunk or two of the file, not all of it."""
    monkeypatch.setattr(_traces, "CHUNK", 64)
    path = write_trace(tmp_path / "t.json", trace([kernel(0, s) for s in range(200)]))
    with open(path, "rb") as raw:
        assert next(_traces.events(raw)) == kernel(0, 0)
        assert raw.tell() <= 6 * 64 < Path(path).stat().st_size // 100


def test_a_json_value_longer_than_the_limit_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A bound on memory for bad input: an event (or another field) of
    ``MAX_VALUE_CHARS`` characters is read, a longer one refused; the bound is
    on each value, so many small ones in a large chunk are fine."""
    monkeypatch.setattr(_traces, "MAX_VALUE_CHARS", 100)

    def event(chars: int) -> dict[str, Any]:
        doc = {"ph": "X", "cat": "kernel", "name": "",
               "args": {"device": 0, "stream": 1}}  # fmt: skip
        doc["name"] = "n" * (chars - len(json.dumps(doc)))
        assert len(json.dumps(doc)) == chars
        return doc

    monkeypatch.setattr(_traces, "CHUNK", 1)
    fits = write_trace(tmp_path / "fits.json", [event(100)])
    assert count_streams(fits) == {(0, None): {1}}
    long = write_trace(tmp_path / "long.json", [event(101)])
    with pytest.raises(TraceError) as caught:
        count_streams(long)
    assert re.findall(r"\d+", str(caught.value)) == ["100"]  # wording: the golden
    monkeypatch.setattr(_traces, "CHUNK", 4096)
    many = [{**event(90), "args": {"device": 0, "stream": s}} for s in range(100)]
    path = write_trace(tmp_path / "many.json", many)
    assert count_streams(path) == {(0, None): set(range(100))}


@pytest.mark.parametrize("cat", ["kernel", "Kernel", "gpu_memcpy", "gpu_memset"])
def test_each_category_kineto_names_gpu_work_is_gpu_work(
    tmp_path: Path, cat: str
) -> None:
    """Kineto's categories of GPU work, as its versions write them (``Kernel``
    capitalised in some): a trace of only those counts their streams."""
    path = write_trace(tmp_path / "t.json", trace([kernel(0, s, cat) for s in (3, 7)]))
    assert count_streams(path) == {(0, None): {3, 7}}


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
            and any(
                k in e.get("cat", "").lower() for k in ("kernel", "memcpy", "memset")
            )
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
    """Events, numbers and multi-byte characters cut at any byte. Every kind of
    token is there in a few events; the long traces are for the large chunks."""
    rng = random.Random(seed)
    events = []
    for _ in range(200 if chunk >= 64 else 40):
        d, s = rng.randrange(4), rng.randrange(1, 10 ** rng.randrange(1, 7))
        cats = ["kernel", "Kernel", "gpu_memcpy", "gpu_memset", "cpu_op"]
        events.append(kernel(d, s, rng.choice(cats)))
        events.append({"ph": "X", "cat": "cpu_op", "name": "é€😀" * rng.randrange(3),
                       "args": {"n": 1.5e10}})  # fmt: skip
    events.append(thread_name(rng.randrange(4), 99, "stream 99 "))
    doc = trace(events, distributedInfo={"rank": 0, "name": "ünï"})
    path = write_trace(tmp_path / "t.json", doc, indent=rng.choice([None, 2]))
    monkeypatch.setattr(_traces, "CHUNK", chunk)
    assert by_device(path) == reference_count(doc)


def verify(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(["verify", *args])
    out, err = capsys.readouterr()
    return code, out, err


def listing(devices: dict[str, int]) -> str:
    """A verdict's pools as its line lists them (the wording: the golden)."""
    return "(" + ", ".join(f"{d}: {n}" for d, n in devices.items()) + ")"


def trace_error(path: str) -> str:
    """What the trace reader says of a file it cannot judge."""
    with pytest.raises(TraceError) as caught:
        count_streams(path)
    return str(caught.value)


def head(doc: dict[str, Any]) -> str:
    """The report's first line, from its ``--json``'s Q and where it came from."""
    return f"Q = {doc['queues']}, from {doc['queues_source']}"


def verdicts_of(doc: dict[str, Any]) -> list[str]:
    """The verdict lines of each trace read, as the text report writes them,
    from its ``--json``'s reports."""
    return [line for report in doc["traces"] if "error" not in report
            for line in _verify.verdict_lines(report, io.StringIO())]  # fmt: skip


def both_forms(
    capsys: pytest.CaptureFixture[str], *args: str
) -> tuple[int, list[str], dict[str, Any]]:
    """The text report's lines and the ``--json`` of the same arguments, which
    exit alike."""
    code, out, _ = verify(capsys, *args)
    json_code, doc_text, _ = verify(capsys, "--json", *args)
    assert json_code == code
    doc: dict[str, Any] = json.loads(doc_text)
    return code, out.splitlines(), doc


def refused(capsys: pytest.CaptureFixture[str], *args: str) -> str:
    """The one error line of a ``verify`` that exits 2, without its prefix."""
    code, out, err = verify(capsys, *args)
    assert (code, out) == (2, ""), out + err
    assert err.startswith(PREFIX) and err.count("\n") == 1, err
    return err[len(PREFIX) : -1]


def test_queue_sources_and_exit_codes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    five = write_trace(tmp_path / "five.json", trace([kernel(0, s) for s in range(5)]))
    three = write_trace(tmp_path / "three.json.gz",
                        trace([kernel(0, s) for s in range(3)]), gz=True)  # fmt: skip

    code, lines, doc = both_forms(capsys, three)
    [judged, _] = doc["traces"][0]["verdicts"]
    assert (code, doc["queues"], judged["needed"], judged["power_of_two"]) == (
        0,
        4,
        3,
        4,
    )
    assert "default" in doc["queues_source"] and QUEUES in doc["queues_source"]
    assert lines[0] == head(doc) and lines[2:] == verdicts_of(doc)
    default = doc["queues_source"]

    code, out, _ = verify(capsys, three, five)
    assert code == 1 and "short" in out

    code, out, _ = verify(capsys, "--queues", "8", three, five)
    assert code == 0 and "from --queues" in out

    for value, origin in (("8", None), ("8.0", None), ("8", "8 job.config_file")):
        monkeypatch.setenv("GPU_MAX_HW_QUEUES", value)  # HIP's atoi reads 8.0 as 8
        if origin is not None:
            monkeypatch.setenv("ROCM_HWQ_AUTOSET_ORIGIN", origin)
        setting = QueuesSetting(os.environ)
        code, lines, doc = both_forms(capsys, five)
        assert (code, doc["queues"], setting.queues) == (0, 8, 8)
        assert (
            doc["queues_source"] == f"{QUEUES} in the environment: {setting.describe()}"
        )
        assert lines[0] == head(doc) and doc["queues_source"] != default
        assert (setting.explicit is None) == (origin is not None)

    monkeypatch.delenv("GPU_MAX_HW_QUEUES")
    code, out, _ = verify(capsys, "--json", three, five, "--job.config_file", EXAMPLE,
                          "--parallelism.expert_parallel_degree", "2",
                          "--compile.enable_fsdp_ag_rs_overlap")  # fmt: skip
    doc = json.loads(out)
    assert code == 0 and doc["queues"] == 8 and doc["ok"] is True
    assert doc["queues_source"].startswith("the training arguments")
    # No priorities in them: both rules' verdicts are the same.
    for t in doc["traces"]:
        assert t["pool_rule"]["rule"] == "both"
        separate, shared = t["verdicts"]
        assert {**separate, "pools": "shared"} == shared
    judged = [t["verdicts"][0] for t in doc["traces"]]
    assert [(t["path"], v["streams"], v["needed"]) for t, v in
            zip(doc["traces"], judged)] == [(three, 3, 3), (five, 5, 5)]  # fmt: skip
    assert [v["power_of_two"] for v in judged] == [4, 8]
    assert all(isinstance(v["streams"], int) for v in judged)


@pytest.mark.parametrize("value", ["eight", "0", "-1", " "])
@pytest.mark.parametrize("marked", [False, True])
def test_a_value_hip_cannot_use_is_named_never_taken_for_unset(
    value: str, marked: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    """HIP cannot use it, whoever set it: ``verify`` says so and checks nothing
    rather than checking HIP's default."""
    path = write_trace(tmp_path / "T.json.gz", profiler_trace(), gz=True)
    monkeypatch.setenv("GPU_MAX_HW_QUEUES", value)
    if marked:
        monkeypatch.setenv("ROCM_HWQ_AUTOSET_ORIGIN", f"{value} job.config_file")
    said = refused(capsys, path)
    problem = QueuesSetting(os.environ).problem
    reads = value.strip() if value.strip().lstrip("-").isdigit() else "0"
    assert problem is not None and said.startswith(f"{problem}; ")
    assert problem.startswith(f"{QUEUES}={value!r}: ")
    assert QueuesSetting(os.environ).hip == int(reads)
    assert said.endswith(" --queues N") and "unset" not in said
    code, _, _ = verify(capsys, "--queues", "4", "--pools", "separate", path)
    assert code == 0


@pytest.mark.parametrize(
    ("content", "said"),
    [
        (b"[]", "no GPU activity: a trace with no events"),
        (b'{"traceEvents": []}', "no GPU activity: a trace with no events"),
        (b"[1,2,3]", "JSON, but not a profiler trace: its event list holds 3 values"
         ' and no trace event (an object with "ph")'),
        (b'[{"name": "x"}]', "JSON, but not a profiler trace: its event list holds"
         ' 1 value and no trace event (an object with "ph")'),
        (b'{"traceEvents": [{"ph": "X", "cat": "cpu_op", "args": {"stream": 1}}]}',
         "no GPU activity: no kernel, memcpy or memset events (a CPU-only trace?)"),
        (b'{"schemaVersion": 1}',
         "JSON, but not a profiler trace: an object without traceEvents"),
        (b'{"traceEvents": [{"ph": "M", "name": "thread_name", "pid": 0, "tid": 7,'
         b' "args": {"name": "stream 7 "}}]}',
         "no GPU activity: no kernel, memcpy or memset events (a CPU-only trace?)"),
    ],
)  # fmt: skip
def test_json_without_gpu_activity_is_said(
    content: bytes, said: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "x.json"
    path.write_bytes(content)
    assert refused(capsys, str(path)) == f"{path}: {said}"
    code, out, _ = verify(capsys, "--json", str(path))
    assert code == 2 and json.loads(out)["traces"] == [
        {"path": str(path), "error": f"{path}: {said}", "ok": False}
    ]


@pytest.mark.parametrize("first", [0, 1])
@pytest.mark.parametrize("gz", [False, True])
def test_a_trace_from_a_pipe(tmp_path: Path, gz: bool, first: int) -> None:
    """``verify <(zcat T)``: a pipe, which cannot seek back to its start (was:
    a traceback), and whose first read may hold fewer bytes than tell the
    trace's form (``first``: the first byte alone, the rest once the reader
    took it; was: a gzip trace read as JSON)."""
    path = write_trace(tmp_path / "t.json.gz", profiler_trace(), gz=gz)
    read, write = os.pipe()
    writer = threading.Thread(
        target=_write_and_close, args=(write, Path(path), first, read)
    )
    writer.start()
    try:
        assert count_streams(f"/dev/fd/{read}") == TRACE_POOLS
    finally:
        writer.join()
        os.close(read)


def test_a_pipe_is_opened_on_its_first_bytes(tmp_path: Path) -> None:
    """``open_trace`` reads only the bytes that tell a trace's form before it
    hands the stream on: a producer still writing (``verify <(slow ...)``) is
    read as it writes, never waited for to the end."""
    read, write = os.pipe()
    os.write(write, b'{"traceEvents": [')  # more than the head; still open
    opened: list[Any] = []
    reader = threading.Thread(
        target=lambda: opened.append(_traces.open_trace(f"/dev/fd/{read}"))
    )
    reader.start()
    reader.join(timeout=30)
    waited = reader.is_alive()  # for the writer to end
    os.close(write)
    reader.join()
    assert not waited and opened
    with opened[0] as stream:
        assert stream.read() == b'{"traceEvents": ['
    os.close(read)


def test_a_file_that_fails_to_read_is_said_unreadable() -> None:
    """Its first read fails (``/proc/self/mem`` at offset 0: EIO)."""
    with pytest.raises(TraceError) as caught:
        count_streams("/proc/self/mem")
    assert (
        str(caught.value) == f"unreadable: {OSError(errno.EIO, os.strerror(errno.EIO))}"
    )


def _write_and_close(fd: int, path: Path, first: int = 0, read: int = -1) -> None:
    """A file's bytes into a pipe: its ``first`` bytes alone, then, once the
    reader at ``read`` took them (or after 10 s), the rest."""
    data = path.read_bytes()
    with open(fd, "wb") as pipe:
        if first:
            pipe.write(data[:first])
            pipe.flush()
            for _ in range(1000):
                unread = fcntl.ioctl(read, termios.FIONREAD, bytes(4))
                if not struct.unpack("i", unread)[0]:
                    break
                time.sleep(0.01)
        pipe.write(data[first:])


def test_a_plain_trace_named_gz_is_read_as_it_is(tmp_path: Path) -> None:
    """Only a file that is no trace is told it is not gzip-compressed."""
    plain = tmp_path / "T.json.gz"
    plain.write_text(json.dumps(profiler_trace()))
    assert count_streams(str(plain)) == TRACE_POOLS


@pytest.mark.parametrize(
    ("name", "content", "said"),
    [
        ("T.json.gz", b"hello, world\n",
         "named .gz but not gzip-compressed, and not JSON"),
        ("T.json.gz", bytes(range(256)) * 8,
         "named .gz but not gzip-compressed, and binary data, not JSON text"),
        ("T.json", bytes(range(128, 256)) * 8, "binary data, not JSON text"),
        ("T.json", b"\x00\x01\x02\x03" * 64, "binary data, not JSON text"),
        ("T.json.gz", gzip.compress(bytes(range(256)) * 8, mtime=0),
         "binary data, not JSON text"),
        ("T.json.gz", gzip.compress(b"hello, world\n", mtime=0), "not JSON"),
        ("T.json.gz", b"\x1f\x8b" + bytes(64), "not gzip data after a gzip header"),
    ],
)  # fmt: skip
def test_what_a_file_is(
    name: str, content: bytes, said: str, tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    path = tmp_path / name
    path.write_bytes(content)
    assert refused(capsys, str(path)).startswith(f"{path}: {said}")


@pytest.mark.parametrize(
    ("kind", "packed", "unpack"),
    [
        ("xz", lzma.compress(b"{}"), "xz -dk"),
        ("bzip2", bz2.compress(b"{}"), "bunzip2 -k"),
        ("zstd", b"\x28\xb5\x2f\xfd" + bytes(16), "zstd -d"),
        ("zip", b"PK\x03\x04" + bytes(26), "unzip"),
    ],
)
def test_a_trace_compressed_otherwise_than_gzip_is_named(
    kind: str, packed: bytes, unpack: str, tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    """Was: "binary data, not JSON text" for each. The line names the file, its
    compression, and the command that unpacks it, the path quoted for a shell."""
    path = tmp_path / "a b" / "t.json.x"
    path.parent.mkdir()
    path.write_bytes(packed)
    said = refused(capsys, str(path))
    assert said.startswith(f"{path}: {kind}-compressed")
    assert f"({unpack} {shlex.quote(str(path))})" in said


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ([], "verify needs at least one TRACE"),
        (["/nonexistent.json"], "/nonexistent.json: No such file"),
        (["--queues", "0", "x"], "--queues: 0 must be >= 1"),
    ],
)
def test_errors_exit_2(
    args: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert refused(capsys, *args).startswith(message)


def test_every_traces_verdict_and_the_worst_status(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``verify a.json cpu_only.json b.json``: the good traces' verdicts are
    shown, the bad one is named on stdout and on stderr, and the status is the
    worst of them (2: a trace not read; 1: one short; 0: all fit)."""
    a = write_trace(tmp_path / "a.json", trace([kernel(0, 1)]))
    cpu_op = {"ph": "X", "cat": "cpu_op", "name": "aten::mm"}
    cpu = write_trace(tmp_path / "cpu_only.json", trace([cpu_op]))
    b = write_trace(tmp_path / "b.json", trace([kernel(0, s) for s in range(6)]))
    error = f"{cpu}: {trace_error(cpu)}"
    assert trace_error(cpu).startswith(NO_ACTIVITY)
    code, lines, doc = both_forms(capsys, a, cpu, b)
    assert code == 2 and doc["ok"] is False and lines[0] == head(doc)
    assert (doc["queues"], lines[1]) == (4, f"pools: {NOTHING_SAYS}")
    assert lines[2:] == [verdicts_of(doc)[0], f"unread  {error}",
                         verdicts_of(doc)[1], _verify.advice(6, True)]  # fmt: skip
    assert [line.split()[:2] for line in verdicts_of(doc)] == [["ok", a], ["short", b]]
    code, out, err = verify(capsys, a, cpu, b)
    assert err == f"{PREFIX}{error}\n"
    assert [t.get("ok") for t in doc["traces"]] == [True, False, False]
    assert doc["traces"][1] == {"path": cpu, "error": error, "ok": False}
    # Without the bad one, the worst is the short one; without it, all fit.
    assert verify(capsys, a, b)[0] == 1
    assert verify(capsys, a)[0] == 0
    # Two bad ones and nothing read: each named once, nothing on stdout (was:
    # the last line joined every error, the first said twice).
    missing = str(tmp_path / "missing.json")
    code, out, err = verify(capsys, cpu, missing)
    assert (code, out) == (2, "") and err.count(PREFIX) == 2
    assert (err.count(cpu), err.count(missing)) == (1, 1)


@pytest.mark.parametrize("unread", [1, 2])
def test_json_gives_each_unread_trace_its_entry_however_many(
    unread: int, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Was: ``{"error": ...}`` for one unreadable trace alone, an entry under
    ``traces`` beside a trace read. Each is named on stderr too; exit 2."""
    paths = [str(tmp_path / f"missing{i}.json") for i in range(unread)]
    code, out, err = verify(capsys, "--json", *paths)
    doc = json.loads(out)
    assert (code, doc["ok"], doc["queues"]) == (2, False, 4)
    assert doc["traces"] == [
        {"path": p, "error": f"{p}: {os.strerror(errno.ENOENT)}", "ok": False}
        for p in paths
    ]
    assert err.count(PREFIX) == unread


def test_the_q_the_job_ran_with(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """An explicit GPU_MAX_HW_QUEUES wins over the training arguments, as in the
    hook: a job that ran with 4 on five streams is short, even where its
    arguments give 8; both are said. --queues wins over both."""
    five = write_trace(tmp_path / "five.json", trace([kernel(0, s) for s in range(5)]))
    args = ["--job.config_file", EXAMPLE, "--parallelism.expert_parallel_degree", "2",
            "--compile.enable_fsdp_ag_rs_overlap"]  # fmt: skip
    code, _, doc = both_forms(capsys, five, *args)  # Q = 8 from the arguments
    assert (code, doc["queues"], "note" in doc) == (0, 8, False)
    from_args = doc["queues_source"]
    monkeypatch.setenv("GPU_MAX_HW_QUEUES", "4")
    code, lines, doc = both_forms(capsys, five, *args)
    assert (code, doc["queues"], doc["ok"]) == (1, 4, False)
    assert lines[:2] == [head(doc), f"note: {doc['note']}"]
    assert QUEUES in doc["queues_source"] and QUEUES in doc["note"]
    assert re.findall(r"Q = (\d+)", doc["note"]) == ["8", "4"]  # theirs, the job's
    different = doc["note"]
    assert verify(capsys, "--queues", "8", five, *args)[0] == 0
    monkeypatch.setenv("GPU_MAX_HW_QUEUES", "8")
    code, lines, doc = both_forms(capsys, five, *args)
    assert (code, doc["queues"], lines[1]) == (0, 8, f"note: {doc['note']}")
    assert doc["note"] != different and not re.findall(r"\d", doc["note"])
    # A value of this package's is decided anew for these arguments, as a
    # worker would: the arguments' Q.
    monkeypatch.setenv("GPU_MAX_HW_QUEUES", "4")
    monkeypatch.setenv("ROCM_HWQ_AUTOSET_ORIGIN", "4 job.config_file")
    code, lines, doc = both_forms(capsys, five, *args)
    assert (code, doc["queues"], doc["queues_source"]) == (0, 8, from_args)
    assert lines[0] == head(doc) and "note" not in doc


@pytest.mark.parametrize(
    ("args", "named", "flag"),
    [
        (["--job.config_file", "job.toml", "five.json"], "five.json",
         "--job.config_file"),
        (["--job.config_file", "five.json.gz"], "five.json.gz", "--job.config_file"),
        (["a.json", "--job.config_file=job.toml", "--training.steps", "3",
          "b.JSON"], "b.JSON", "--training.steps"),
    ],
)  # fmt: skip
def test_a_trace_taken_as_a_flags_value_is_named(
    args: list[str], named: str, flag: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """The line names the trace and the flag that took it as its value."""
    said = refused(capsys, *args)
    first = next(i for i, arg in enumerate(args) if arg.startswith("--"))
    assert said == _verify.misplaced_trace(args[first:], args[:first])
    assert said.startswith(f"{named!r} ") and f" {flag}," in said
    assert said.endswith(f" {named} {flag} ...")


def test_a_json_file_as_a_flags_only_value_is_a_value(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """With a TRACE given, a ``.json`` that is a flag's only value is that
    flag's (a tokenizer file, say); one after the value is not."""
    t = write_trace(tmp_path / "t.json", trace([kernel(0, 1)]))
    args = ["--job.config_file", EXAMPLE, "--model.tokenizer_path", "tok.json"]
    assert verify(capsys, t, *args)[0] == 0
    assert verify(capsys, t, *args[:2], "--model.tokenizer_path=tok.json")[0] == 0
    cases = [([*args, "b.json"], "--model.tokenizer_path"),
             ([*args[:2], "--a.b=x.json", "b.json"], "--a.b")]  # fmt: skip
    for training, flag in cases:
        said = refused(capsys, t, *training)
        assert said == _verify.misplaced_trace(training, [t])
        assert said.startswith("'b.json' ") and f" {flag}," in said


@pytest.mark.parametrize("traces", [[], ["t.json"]])
def test_a_trace_after_the_double_dash_is_named(
    traces: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    """Before any flag, nothing after ``--`` is a flag's value: a trace there
    is named, a TRACE given or not."""
    training = ["five.json", "--job.config_file", "job.toml"]
    said = refused(capsys, *traces, "--", *training)
    assert said == _verify.misplaced_trace(training, traces)
    assert said.startswith("'five.json' ") and "'--'" in said
    assert said != _verify.misplaced_trace(["--job.config_file", "job.toml",
                                            "five.json"], traces)  # fmt: skip


def test_more_than_eight_streams_names_the_cost_of_q16(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Twelve streams: the advice is not "raise GPU_MAX_HW_QUEUES" to 16 but
    what PR #4032 measured Q=16 to cost."""
    twelve = write_trace(tmp_path / "12.json", trace([kernel(0, s) for s in range(12)]))
    code, out, _ = verify(capsys, "--queues", "8", twelve)
    said = out.splitlines()[-1]
    assert code == 1 and said == _verify.advice(12, True)
    assert _verify.Q16_COST in said and f"{QUEUES}=" not in said
    for streams in (6, 8):  # up to the model's largest Q, the Q that fits
        many = write_trace(tmp_path / f"{streams}.json",
                           trace([kernel(0, s) for s in range(streams)]))  # fmt: skip
        code, out, _ = verify(capsys, many)
        said = out.splitlines()[-1]
        assert code == 1 and said == _verify.advice(streams, True)
        assert f" {QUEUES}=8 " in said and _verify.Q16_COST not in said


def without_args(event: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in event.items() if k != "args"}


def test_kernel_events_without_args(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Kineto may leave ``args`` out: its GPU events sit on pid = device and
    tid = stream (as on every real trace, which repeats both in ``args``)."""
    events = [without_args(kernel(d, s)) for d in (0, 1) for s in (3, 5, 9)]
    events.append(without_args(kernel(0, 11, "gpu_memcpy")))
    events.append(kernel(1, 13, priority=-1))  # with args, beside them
    path = write_trace(tmp_path / "noargs.json", trace(events))
    assert count_streams(path) == {(0, None): {3, 5, 9, 11}, (1, None): {3, 5, 9},
                                   (1, -1): {13}}  # fmt: skip
    code, out, _ = verify(capsys, path)
    pools = {_verify._label(pool): n for pool, n in
             [((0, None), 4), ((1, None), 3), ((1, -1), 1)]}  # fmt: skip
    assert code == 0 and listing(pools) in out
    # Without args, without pid or tid: no stream to count.
    bare = [{k: v for k, v in without_args(kernel(0, 1)).items() if k != "tid"}]
    lost = write_trace(tmp_path / "bare.json", trace(bare))
    cpu = write_trace(tmp_path / "cpu.json", trace([{"ph": "X", "cat": "cpu_op"}]))
    assert refused(capsys, lost) == f"{lost}: {trace_error(cpu)}"
    assert trace_error(cpu).startswith(f"{NO_ACTIVITY}: ")


@pytest.mark.parametrize("gz", [False, True])
def test_a_trace_saved_with_a_byte_order_mark(tmp_path: Path, gz: bool) -> None:
    data = b"\xef\xbb\xbf" + json.dumps(profiler_trace()).encode()
    path = tmp_path / ("bom.json.gz" if gz else "bom.json")
    path.write_bytes(gzip.compress(data) if gz else data)
    assert count_streams(str(path)) == TRACE_POOLS


def test_bad_training_args_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    good = write_trace(tmp_path / "good.json", trace([kernel(0, 1)]))
    said = refused(capsys, good, "--job.config_file", "/nonexistent.toml")
    assert said == f"/nonexistent.toml: {os.strerror(errno.ENOENT)}"
    said = refused(capsys, good, "--job.config_file", EXAMPLE,
                   "--parallelism.tensor_parallel_degree", "2.0")  # fmt: skip
    assert said.startswith("--parallelism.tensor_parallel_degree: '2.0' ")


def test_hips_rule_not_the_power_of_two(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Five streams fit five queues (HIP needs Q >= streams), not only eight."""
    five = write_trace(tmp_path / "five.json", trace([kernel(0, s) for s in range(5)]))
    code, out, _ = verify(capsys, "--queues", "5", five)
    assert code == 0 and out.splitlines()[2].startswith("ok")
    code, out, _ = verify(capsys, "--queues", "4", five)
    assert code == 1 and out.splitlines()[2].startswith("short")


def test_devices_are_counted_apart_through_the_command(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Each device has its own queues: 3 + 3 streams on two devices fit Q = 4."""
    events = [kernel(d, s) for d in (0, 1) for s in range(3)]
    path = write_trace(tmp_path / "two.json", trace(events))
    code, out, _ = verify(capsys, "--queues", "4", path)
    assert code == 0 and listing({"device 0": 3, "device 1": 3}) in out
    wide = write_trace(tmp_path / "wide.json",
                       trace([*events, kernel(1, 7), kernel(1, 8)]))  # fmt: skip
    code, out, _ = verify(capsys, "--json", "--queues", "4", wide)
    doc = json.loads(out)
    assert code == 1
    assert [v["devices"] for v in doc["traces"][0]["verdicts"]] == [
        {"device 0": 3, "device 1": 5}
    ] * 2


def test_priorities_are_separate_pools_or_one(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A HIP before ROCm/rocm-systems#8485 keeps one pool per stream priority:
    four normal and two high-priority streams fit Q = 4. With it, they share
    the device's one pool: six streams do not."""
    events = [kernel(0, s) for s in range(4)]
    events += [kernel(0, s, priority=-1) for s in (10, 11)]
    path = write_trace(tmp_path / "prio.json", trace(events))
    code, out, _ = verify(capsys, "--queues", "4", "--pools", "separate", path)
    apart = {_verify._label((0, None)): 4, _verify._label((0, -1)): 2}
    assert code == 0 and listing(apart) in out
    code, out, _ = verify(capsys, "--queues", "4", "--pools", "shared", path)
    assert code == 1 and listing({"device 0": 6}) in out
    assert verify(capsys, "--queues", "6", "--pools", "shared", path)[0] == 0


def test_a_single_stream_is_never_given_a_q_the_model_cannot_have(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The model's Q is 2, 4 or 8 (docs/stream-model.md): verify's rounding of a
    one-stream trace says 2, not 1."""
    path = tmp_path / "one.json"
    path.write_text(json.dumps({"traceEvents": [kernel(0, 7)]}))
    code, lines, doc = both_forms(capsys, "--queues", "1", str(path))
    judged = doc["traces"][0]["verdicts"][0]
    assert (code, judged["needed"], judged["power_of_two"]) == (0, 1, 2)
    assert lines[2:] == verdicts_of(doc)
    assert lines[2].endswith(": 2)")


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_the_report_in_full_on_a_terminal(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Each trace's line, its status in colour, its pools in order: devices by
    number, then by name; in each, the streams without a priority first, then
    each priority in order. Then what to do when one is short. (The report in
    full: the golden of ``test_the_wording_of_verify``.)"""
    one, missing, wide = terminal_traces(tmp_path)
    out = _Tty()
    opts = argparse.Namespace(traces=[one, missing, wide], queues=1, training=[],
                              json=False, pools="separate")  # fmt: skip
    assert _verify.run(opts, out) == 2
    lines = out.getvalue().splitlines()
    marks = [(paint("ok", "green", out), one), (paint("unread", "red", out), missing),
             (paint("short", "red", out), wide)]  # fmt: skip
    assert [tuple(line.split()[:2]) for line in lines[2:5]] == [
        (mark, f"{path}:") for mark, path in marks
    ]
    assert lines[5] == _verify.advice(2, True)
    assert (
        capsys.readouterr().err == f"{PREFIX}{missing}: {os.strerror(errno.ENOENT)}\n"
    )
    _, out_text, _ = verify(capsys, "--json", "--pools", "separate", wide)
    order = [(2, None), (2, -1), (2, 0), (10, None), ("gpu_a", None), ("gpu_b", None)]
    devices = json.loads(out_text)["traces"][0]["verdicts"][0]["devices"]
    assert list(devices) == [_verify._label(pool) for pool in order]
    assert listing(devices) in lines[4]


def terminal_traces(tmp_path: Path) -> tuple[str, str, str]:
    """A trace that fits Q = 1, one missing, and one whose pools sort."""
    one = write_trace(tmp_path / "one.json", trace([kernel(0, 7)]))
    events = [kernel("gpu_b", 1), kernel(10, 1), kernel(10, 2),
              kernel(2, 3, priority=0), kernel("gpu_a", 4), kernel(2, 5),
              kernel(2, 8, priority=-1),
              kernel(2, 9, priority=-1)]  # fmt: skip
    wide = write_trace(tmp_path / "wide.json", trace(events))
    return one, str(tmp_path / "missing.json"), wide


def pools_line(rule: _pools.PoolRule) -> list[str]:
    """The lines that say a pool rule: its warnings, then why."""
    return [*(f"warning: {w}" for w in rule.warnings), f"pools: {rule.why}"]


def as_json(rule: _pools.PoolRule) -> dict[str, Any]:
    """A pool rule as ``verify --json`` gives it."""
    said: dict[str, Any] = {"rule": rule.rule, "source": rule.source, "why": rule.why}
    return {**said, "warnings": list(rule.warnings)} if rule.warnings else said


def test_the_json_report_in_full(tmp_path: Path) -> None:
    three = write_trace(
        tmp_path / "three.json", trace([kernel(0, s) for s in range(3)])
    )
    out = io.StringIO()
    opts = argparse.Namespace(traces=[three], queues=None, training=[], json=True,
                              pools=None)  # fmt: skip
    assert _verify.run(opts, out) == 0
    judged = {"devices": {"device 0": 3}, "streams": 3, "needed": 3,
              "power_of_two": 4, "ok": True}  # fmt: skip
    rule = {"rule": "both", "source": "none", "why": NOTHING_SAYS}
    report = {"path": three, "queues": 4, "pool_rule": rule,
              "verdicts": [{"pools": "separate", **judged},
                           {"pools": "shared", **judged}], "ok": True}  # fmt: skip
    doc = {"queues": 4, "queues_source": "HIP's default (GPU_MAX_HW_QUEUES unset)",
           "ok": True, "traces": [report]}  # fmt: skip
    assert out.getvalue() == json.dumps(doc, indent=2) + "\n"


@pytest.mark.parametrize(
    ("args", "said"),
    [
        ([], "verify needs at least one TRACE"),
        (["--queues", "0", "x.json"], "--queues: 0 must be >= 1"),
    ],
)
def test_errors_in_json_too(
    args: list[str], said: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = verify(capsys, "--json", *args)
    assert code == 2 and json.loads(out) == {"error": said}
    assert err == f"{PREFIX}{said}\n"


# The pool rule: separate pools per priority (HIP before ROCm/rocm-systems#8485)
# or one per device (with it), chosen by --pools, else the variable, else the
# trace's HIP version, else both verdicts.

VARIABLE = "DEBUG_HIP_IGNORE_STREAM_PRIORITY"


def generated(tmp_path: Path, name: str = "t.json", **top: Any) -> str:
    """The generated trace (three normal and two high-priority streams on
    device 0), with top-level fields such as ``hip_runtime_version``."""
    return write_trace(tmp_path / name, {**profiler_trace(), **top})


def lines_of(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, list[str]]:
    code, out, err = verify(capsys, *args)
    assert err == ""
    return code, out.splitlines()


def test_the_option_chooses_the_pools(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--pools`` wins over the variable and the trace's HIP version: apart,
    Q = 4 fits; shared, device 0's five streams do not."""
    monkeypatch.setenv(VARIABLE, "1")
    path = generated(tmp_path, hip_runtime_version=60241134)
    code, lines, doc = both_forms(capsys, "--pools", "separate", path)
    [report] = doc["traces"]
    assert (code, report["pool_rule"]["rule"], report["pool_rule"]["source"]) == (
        0, "separate", "--pools"
    )  # fmt: skip
    assert report["pool_rule"]["why"] == _pools.choose("separate", {}, None).why
    assert [v["devices"] for v in report["verdicts"]] == [TRACE_DEVICES]
    assert lines == [head(doc), *pools_line(_pools.choose("separate", {}, None)),
                     *verdicts_of(doc)]  # fmt: skip
    assert lines[2].startswith(f"ok  {path}: ")
    monkeypatch.setenv(VARIABLE, "0")
    code, lines, doc = both_forms(capsys, path, "--pools=shared")
    [report] = doc["traces"]
    assert code == 1 and report["ok"] is False
    assert report["pool_rule"] == as_json(_pools.choose("shared", {}, None))
    assert report["pool_rule"]["source"] == "--pools"
    assert report["verdicts"] == [
        {"pools": "shared", "devices": TRACE_SHARED_DEVICES,
         "streams": TRACE_SHARED_STREAMS, "needed": TRACE_SHARED_STREAMS,
         "power_of_two": 8, "ok": False}
    ]  # fmt: skip
    advice = _verify.advice(TRACE_SHARED_STREAMS, True)
    assert lines == [head(doc), f"pools: {report['pool_rule']['why']}",
                     *verdicts_of(doc), advice]  # fmt: skip
    assert lines[2].startswith(f"short  {path}: ")


@pytest.mark.parametrize("value", ["both", "apart", "Shared", ""])
def test_the_option_takes_a_rule_only(
    value: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = generated(tmp_path)
    with pytest.raises(SystemExit) as stop:
        main(["verify", "--pools", value, path])
    assert stop.value.code == 2
    assert "--pools: invalid choice" in capsys.readouterr().err


def test_the_option_after_the_double_dash_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    said = refused(capsys, generated(tmp_path), "--", "--pools", "shared")
    assert said.startswith("--pools: ") and "verify's" in said and "'--'" in said


@pytest.mark.parametrize(
    ("value", "shared", "plain"),
    [("1", True, True), ("true", True, True), ("0", False, True),
     ("false", False, True), ("yes", False, False), ("TRUE", False, False),
     ("", False, False), ("2x", True, False)],
)  # fmt: skip
def test_the_variable_as_the_jobs_hip_reads_it(
    value: str, shared: bool, plain: bool, tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    """``DEBUG_HIP_IGNORE_STREAM_PRIORITY`` in verify's environment, read as
    HIP's clr reads a bool flag (``"true"``, or a number ``atoi`` reads as
    nonzero), wins over the trace's HIP version; a value HIP reads otherwise
    than it reads gets one warning line, in the text and in the JSON."""
    monkeypatch.setenv(VARIABLE, value)
    version = 70253211 if shared else 60241134
    path = generated(tmp_path, hip_runtime_version=version)
    code, lines, doc = both_forms(capsys, path)
    rule = "shared" if shared else "separate"
    chosen = _pools.choose(None, {VARIABLE: value}, version)
    [report] = doc["traces"]
    said = (chosen.rule, chosen.source, len(chosen.warnings))
    assert said == (rule, VARIABLE, int(not plain))
    assert f"{VARIABLE}={value!r}" in chosen.why and _pools.MEANS[rule] in chosen.why
    assert all(w.startswith(f"{VARIABLE}={value!r}: ") for w in chosen.warnings)
    assert report["pool_rule"] == as_json(chosen)
    assert [v["pools"] for v in report["verdicts"]] == [rule]
    advice = [_verify.advice(TRACE_SHARED_STREAMS, True)] if shared else []
    assert lines == [head(doc), *pools_line(chosen), *verdicts_of(doc), *advice]
    assert [line.split()[:2] for line in verdicts_of(doc)] == [
        ["short" if shared else "ok", f"{path}:"]
    ]
    assert code == int(shared)


def test_a_variable_hip_reads_no_way_is_passed_over(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv(VARIABLE, "2147483648")
    code, lines = lines_of(capsys, generated(tmp_path, hip_runtime_version=60241134))
    chosen = _pools.choose(None, os.environ, 60241134)
    assert code == 0 and lines[1:3] == pools_line(chosen)
    assert chosen == _pools.choose(None, {}, 60241134)._replace(
        warnings=chosen.warnings
    )  # judged as if unset
    [warning] = chosen.warnings
    assert warning.startswith(f"{VARIABLE}='2147483648' ")
    assert chosen.rule == "separate" and chosen.source == "hip_runtime_version"


def test_a_trace_naming_a_hip_before_the_change_keeps_pools_apart(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Kineto's ``hip_runtime_version`` (HIP_VERSION) of a line all of whose
    releases came out before ROCm/rocm-systems#8485: one verdict, apart."""
    path = generated(tmp_path, hip_runtime_version=60241134)
    code, lines, doc = both_forms(capsys, path)
    [report] = doc["traces"]
    why = report["pool_rule"]["why"]
    assert code == 0 and report["pool_rule"] == {
        "rule": "separate", "source": "hip_runtime_version", "why": why
    }  # fmt: skip
    assert "HIP 6.2" in why and "60241134" in why and _pools.PR in why
    assert why.endswith(_pools.MEANS["separate"])
    assert [v["devices"] for v in report["verdicts"]] == [TRACE_DEVICES]
    assert lines == [head(doc), f"pools: {why}", *verdicts_of(doc)]
    assert lines[2].startswith(f"ok  {path}: ")


def test_a_trace_naming_a_hip_that_may_have_the_change_gets_both_verdicts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """HIP 7.2: its releases so far predate the change, but the trace cannot
    say which 7.2.x ran, so both verdicts; the worse (shared) decides, and the
    advice says it holds only under shared pools."""
    path = generated(tmp_path, hip_runtime_version=70253211)
    code, lines, doc = both_forms(capsys, path)
    [report] = doc["traces"]
    why = report["pool_rule"]["why"]
    assert (code, doc["ok"], report["ok"]) == (1, False, False)
    assert report["pool_rule"] == {"rule": "both", "source": "hip_runtime_version",
                                   "why": why}  # fmt: skip
    assert "HIP 7.2" in why and "70253211" in why and why.endswith(_pools.CHOOSE)
    assert [(v["pools"], v["devices"], v["ok"]) for v in report["verdicts"]] == [
        ("separate", TRACE_DEVICES, True), ("shared", TRACE_SHARED_DEVICES, False)
    ]  # fmt: skip
    assert lines == [head(doc), f"pools: {why}", *verdicts_of(doc),
                     _verify.advice(TRACE_SHARED_STREAMS, False)]  # fmt: skip
    assert [line.split()[:3] for line in lines[2:4]] == [
        ["ok", path, "(separate"],
        ["short", path, "(shared"],
    ]
    # Both fit Q = 5: exit 0.
    assert verify(capsys, "--queues", "5", path)[0] == 0


def test_nothing_says_so_both_verdicts_through_the_command(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """No option, no variable, no version: both verdicts, one line saying why
    and how to choose; the exit status is the worse verdict's."""
    path = generated(tmp_path)
    code, lines, doc = both_forms(capsys, path)
    [report] = doc["traces"]
    assert code == 1
    assert lines[1:] == [f"pools: {NOTHING_SAYS}", *verdicts_of(doc),
                         _verify.advice(TRACE_SHARED_STREAMS, False)]  # fmt: skip
    assert report["pool_rule"] == {"rule": "both", "source": "none",
                                   "why": NOTHING_SAYS}  # fmt: skip
    assert [(v["pools"], v["ok"]) for v in report["verdicts"]] == [
        ("separate", True),
        ("shared", False),
    ]
    # Where both are short, the advice is sure; where none is, none is given.
    code, lines = lines_of(capsys, "--queues", "2", path)
    assert code == 1 and lines[-1] == _verify.advice(TRACE_SHARED_STREAMS, True)
    assert [line.split("  ")[0] for line in lines[2:4]] == ["short", "short"]
    code, lines = lines_of(capsys, "--queues", "5", path)
    assert code == 0 and [line.split("  ")[0] for line in lines[2:]] == ["ok", "ok"]


def test_a_version_that_is_none_is_said_once_per_rule(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = generated(tmp_path, hip_runtime_version="7.2")
    code, lines, doc = both_forms(capsys, path)
    chosen = _pools.choose(None, {}, "7.2")
    [warning] = chosen.warnings
    assert warning.startswith("hip_runtime_version '7.2' ")
    assert chosen == _pools.choose(None, {}, None)._replace(warnings=(warning,))
    assert code == 1 and lines[1:3] == pools_line(chosen)
    assert doc["traces"][0]["pool_rule"] == as_json(chosen)


def test_each_trace_by_its_own_version_the_rule_said_when_it_changes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Two ranks of HIP 6.2 share one ``pools`` line; a HIP 7.2 trace after
    them gets its own, and a trace that cannot be read none."""
    a = generated(tmp_path, "a.json", hip_runtime_version=60241134)
    b = generated(tmp_path, "b.json", hip_runtime_version=60241134)
    c = generated(tmp_path, "c.json", hip_runtime_version=70253211)
    missing = str(tmp_path / "missing.json")
    code, out, _ = verify(capsys, "--queues", "5", a, b, missing, c)
    lines = out.splitlines()
    assert code == 2
    assert [line.split(":")[0] for line in lines[1:]] == [
        "pools", f"ok  {a}", f"ok  {b}", f"unread  {missing}", "pools",
        f"ok  {c} (separate pools)", f"ok  {c} (shared pools)",
    ]  # fmt: skip
    assert lines[1] == f"pools: {_pools.choose(None, {}, 60241134).why}"
    assert lines[5] == f"pools: {_pools.choose(None, {}, 70253211).why}"


def test_the_lines_fit_the_terminal(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Was: a ``pools:`` line of 370 characters, ``COLUMNS`` not followed. The
    prose is wrapped at word breaks; a trace's verdict stays one line (one
    per trace, for ``grep``)."""
    monkeypatch.setenv("COLUMNS", "60")
    path = generated(tmp_path, hip_runtime_version=70253211)
    code, lines = lines_of(capsys, "--queues", "8", path)
    verdicts = [line for line in lines if line.startswith("ok  ")]
    assert code == 0 and len(verdicts) == 2
    prose = [line for line in lines if line not in verdicts]
    why = _pools.choose(None, {}, 70253211).why
    assert " ".join(" ".join(prose[1:]).split()) == f"pools: {why}"
    assert len(prose) > 4 and all(len(line) < 60 for line in prose), prose
    assert all(line.startswith("  ") for line in prose[2:]), prose


def test_a_trace_without_priorities_gets_one_line_for_both_rules(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Kineto writes no stream priority on ROCm: both rules give the same
    pools, said in one line (the JSON keeps both verdicts)."""
    path = write_trace(tmp_path / "t.json", trace([kernel(0, s) for s in range(5)]))
    code, lines, doc = both_forms(capsys, path)
    assert code == 1 and lines[2:] == [*verdicts_of(doc), _verify.advice(5, True)]
    assert lines[2].startswith(f"short  {path} {ALIKE}: ")
    assert len(doc["traces"][0]["verdicts"]) == 2


@pytest.mark.parametrize("chunk", [1, 64, 1 << 20])
@pytest.mark.parametrize("where", ["first", "last"])
def test_the_hip_version_is_read_where_it_is(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, chunk: int, where: str
) -> None:
    """Before ``traceEvents`` (where Kineto writes it) or after, whatever the
    chunk; an array-form trace, or one without the field, names none."""
    monkeypatch.setattr(_traces, "CHUNK", chunk)
    events = profiler_trace()["traceEvents"]
    doc = ({"hip_runtime_version": 70253211, "traceEvents": events}
           if where == "first" else
           {"traceEvents": events, "hip_runtime_version": 70253211})  # fmt: skip
    path = write_trace(tmp_path / "t.json", doc)
    assert _traces.read_trace(path) == (TRACE_POOLS, 70253211)
    assert _traces.read_trace(write_trace(tmp_path / "a.json", events)) == (
        TRACE_POOLS, None
    )  # fmt: skip
    assert _traces.read_trace(generated(tmp_path)).hip_version is None


def test_the_real_rocm_trace_names_no_hip_version() -> None:
    """The ROCm 6.2 MI250 trace of the shared corpus (PyTorch of late 2024)
    names its HIP nowhere: no ``hip_runtime_version``, and its
    ``deviceProperties`` hold no version either. Only where the corpus exists."""
    path = corpus_dir(TRACE_DIR) / "mi250_rocm6_2_minitoy_train.json.gz"
    assert _traces.read_trace(str(path)) == ({(2, None): {0}}, None)
    with gzip.open(path) as raw:
        doc = json.load(raw)
    assert not any("version" in key.lower() and key != "schemaVersion" for key in doc)
    assert all(not any("version" in k.lower() for k in props)
               for props in doc["deviceProperties"])  # fmt: skip


@pytest.mark.parametrize("rule", ["separate", "shared"])
def test_names_before_the_kernels_give_the_same_pools(
    rule: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A trace sorted by time has its ``stream N`` names (``ts`` 0) before the
    kernels, where Kineto writes them after: the same streams, priorities
    included, and so the same pools under either rule."""
    doc = profiler_trace()
    ordered = sorted_by_time(doc)
    kinds = [
        (e["ph"], e.get("args", {}).get("name", "")) for e in ordered["traceEvents"]
    ]
    first_kernel = next(i for i, e in enumerate(ordered["traceEvents"])
                        if e.get("cat") == "kernel")  # fmt: skip
    named = [i for i, (ph, name) in enumerate(kinds) if name.startswith("stream ")]
    assert named and max(named) < first_kernel  # names first, really
    last = write_trace(tmp_path / "last.json", doc)
    first = write_trace(tmp_path / "first.json", ordered)
    assert count_streams(first) == count_streams(last) == TRACE_POOLS
    reports = []
    for path in (first, last):
        code, out, _ = verify(capsys, "--json", "--pools", rule, path)
        [report] = json.loads(out)["traces"]
        reports.append((code, report["verdicts"]))
    assert reports[0] == reports[1]
    devices = TRACE_DEVICES if rule == "separate" else TRACE_SHARED_DEVICES
    assert reports[0][1][0]["devices"] == devices


def test_the_advice_follows_the_sure_verdicts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """With Q = 6, a trace short under shared pools only (6 + 6 streams) and
    one short under both (7): the advice is for the seven that surely shared
    a queue, not for the twelve that did only if the pools were one."""
    events = [kernel(0, s) for s in range(6)]
    events += [kernel(0, s, priority=-1) for s in range(10, 16)]
    maybe = write_trace(tmp_path / "maybe.json", trace(events))
    surely = write_trace(
        tmp_path / "surely.json", trace([kernel(0, s) for s in range(7)])
    )
    code, lines = lines_of(capsys, "--queues", "6", maybe, surely)
    assert code == 1 and lines[-1] == _verify.advice(7, True)
    code, lines = lines_of(capsys, "--queues", "6", maybe)
    assert code == 1 and lines[-1] == _verify.advice(12, False)
    assert len({_verify.advice(n, s) for n in (7, 12) for s in (True, False)}) == 4


def test_in_json_a_misplaced_trace_is_an_error(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """``--json`` answers ``{"error": ...}`` for a trace among the training
    arguments (a trace not read is an entry of ``traces``: above)."""
    code, out, err = verify(capsys, "--json", "--job.config_file", "job.toml", "t.json")
    said = _verify.misplaced_trace(["--job.config_file", "job.toml", "t.json"], [])
    assert code == 2 and json.loads(out) == {"error": said}
    assert err == f"{PREFIX}{said}\n"


def test_no_note_without_training_arguments(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """An explicit ``GPU_MAX_HW_QUEUES`` and no training arguments to hold it
    against: nothing to note, in the text or in the JSON."""
    monkeypatch.setenv("GPU_MAX_HW_QUEUES", "8")
    path = write_trace(tmp_path / "t.json", trace([kernel(0, 1)]))
    code, lines = lines_of(capsys, path)
    assert code == 0 and len(lines) == 3 and lines[1].startswith("pools: ")
    code, out, _ = verify(capsys, "--json", path)
    assert code == 0 and "note" not in json.loads(out)


def test_the_events_alone_of_a_trace_naming_its_hip(tmp_path: Path) -> None:
    """``events`` without a place to keep the version reads past it."""
    doc = {"hip_runtime_version": 70253211, "traceEvents": [kernel(0, 1)]}
    path = write_trace(tmp_path / "t.json", doc)
    with open(path, "rb") as raw:
        assert list(_traces.events(raw)) == [kernel(0, 1)]


@pytest.mark.parametrize("json_form", [False, True])
def test_ctrl_c_during_a_big_trace_is_one_line(
    json_form: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    """Was: a ``KeyboardInterrupt`` traceback through the trace reader."""
    path = generated(tmp_path)

    def interrupted(path: str) -> Any:
        raise KeyboardInterrupt

    monkeypatch.setattr(_verify, "read_trace", interrupted)
    code, out, err = verify(capsys, *(["--json"] if json_form else []), path)
    assert code == 130  # the wording: the golden
    assert err == f"rocm-hwq-autoset: {CUT_SHORT}\n"
    assert (json.loads(out) if json_form else out) == (
        {"error": CUT_SHORT} if json_form else ""
    )


@pytest.mark.parametrize("json_form", [False, True])
def test_ctrl_c_with_stdout_full_is_still_one_line(
    json_form: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    """The answer that says it was cut short cannot be written (``> /dev/full``):
    still the one line on stderr and exit 130, never a traceback."""
    path = generated(tmp_path)

    def interrupted(path: str) -> Any:
        raise KeyboardInterrupt

    class Full(io.StringIO):
        def write(self, text: str) -> int:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(_verify, "read_trace", interrupted)
    monkeypatch.setattr("sys.stdout", Full())
    code = main(["verify", *(["--json"] if json_form else []), path])
    assert (code, capsys.readouterr().err) == (130, f"rocm-hwq-autoset: {CUT_SHORT}\n")


def test_the_wording_of_verify(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Every line ``verify`` writes, for each case the tests above judge by
    their values: the wording is pinned here, once (``UPDATE_GOLDEN=1``)."""
    streams = {n: write_trace(tmp_path / f"{n}.json",
                              trace([kernel(0, s) for s in range(n)]))
               for n in (1, 3, 5, 6, 7, 12)}  # fmt: skip
    cpu_op = {"ph": "X", "cat": "cpu_op", "name": "aten::mm"}
    cpu = write_trace(tmp_path / "cpu_only.json", trace([cpu_op]))
    events = [kernel(0, s) for s in range(6)]
    events += [kernel(0, s, priority=-1) for s in range(10, 16)]
    maybe = write_trace(tmp_path / "maybe.json", trace(events))
    hip62 = generated(tmp_path, "hip62.json", hip_runtime_version=60241134)
    hip72 = generated(tmp_path, "hip72.json", hip_runtime_version=70253211)
    bad_version = generated(tmp_path, "bad_version.json", hip_runtime_version="7.2")
    plain = generated(tmp_path)
    args = ["--job.config_file", EXAMPLE, "--parallelism.expert_parallel_degree", "2",
            "--compile.enable_fsdp_ag_rs_overlap"]  # fmt: skip
    packed = {
        "xz": lzma.compress(b"{}"),
        "bzip2": bz2.compress(b"{}"),
        "zstd": b"\x28\xb5\x2f\xfd" + bytes(16),
        "zip": b"PK\x03\x04" + bytes(26),
    }
    for kind, data in packed.items():
        (tmp_path / f"{kind}.json.x").write_bytes(data)
    cases: list[tuple[str, dict[str, str], list[str]]] = [
        ("HIP's default", {}, [streams[3]]),
        ("one short", {}, [streams[3], streams[5]]),
        ("--queues", {}, ["--queues", "8", streams[3], streams[5]]),
        ("an explicit value", {"GPU_MAX_HW_QUEUES": "8"}, [streams[5]]),
        ("a value HIP reads otherwise", {"GPU_MAX_HW_QUEUES": "8.0"}, [streams[5]]),
        ("the package's value",
         {"GPU_MAX_HW_QUEUES": "8", "ROCM_HWQ_AUTOSET_ORIGIN": "8 job.config_file"},
         [streams[5]]),
        ("a value HIP cannot use", {"GPU_MAX_HW_QUEUES": "eight"}, [streams[5]]),
        ("the package's value HIP cannot use",
         {"GPU_MAX_HW_QUEUES": "0", "ROCM_HWQ_AUTOSET_ORIGIN": "0 job.config_file"},
         [streams[5]]),
        ("the training arguments", {}, [streams[3], streams[5], *args]),
        ("an explicit value against the arguments", {"GPU_MAX_HW_QUEUES": "4"},
         [streams[5], *args]),
        ("an explicit value the arguments agree with", {"GPU_MAX_HW_QUEUES": "8"},
         [streams[5], *args]),
        ("the package's value for other arguments",
         {"GPU_MAX_HW_QUEUES": "4", "ROCM_HWQ_AUTOSET_ORIGIN": "4 job.config_file"},
         [streams[5], *args]),
        *((f"{kind}-compressed", {}, [str(tmp_path / f"{kind}.json.x")])
          for kind in packed),
        ("a trace not read among others", {}, [streams[1], cpu, streams[6]]),
        ("no trace", {}, []),
        ("no trace, in JSON", {}, ["--json"]),
        ("no such trace", {}, ["/nonexistent.json"]),
        ("--queues 0", {}, ["--queues", "0", "x.json"]),
        ("--queues 0, in JSON", {}, ["--json", "--queues", "0", "x.json"]),
        ("a trace as a flag's value", {},
         ["--job.config_file", "job.toml", "five.json"]),
        ("a trace as a flag's value, in JSON", {},
         ["--json", "--job.config_file", "job.toml", "five.json"]),
        ("a trace after a flag's value", {},
         ["a.json", "--job.config_file=job.toml", "--training.steps", "3", "b.JSON"]),
        ("a trace after '--'", {}, ["--", "five.json", "--job.config_file", "j.toml"]),
        ("--pools after '--'", {}, [plain, "--", "--pools", "shared"]),
        ("no such config", {}, [streams[1], "--job.config_file", "/nonexistent.toml"]),
        ("a bad training argument", {},
         [streams[1], "--job.config_file", EXAMPLE,
          "--parallelism.tensor_parallel_degree", "2.0"]),
        ("one stream", {}, ["--queues", "1", streams[1]]),
        ("the model's largest Q fits", {}, [streams[6]]),
        ("more streams than the model counts", {}, ["--queues", "8", streams[12]]),
        ("short for sure", {}, ["--queues", "6", maybe, streams[7]]),
        ("short under shared pools only", {}, ["--queues", "6", maybe]),
        ("--pools separate", {"DEBUG_HIP_IGNORE_STREAM_PRIORITY": "1"},
         ["--pools", "separate", hip62]),
        ("--pools shared", {"DEBUG_HIP_IGNORE_STREAM_PRIORITY": "0"},
         ["--pools=shared", hip62]),
        *(("the pools' variable", {VARIABLE: value},
           [hip72 if value in ("1", "true", "2x") else hip62])
          for value in ("1", "true", "0", "false", "yes", "TRUE", "", "2x")),
        ("the pools' variable beyond C's int", {VARIABLE: "2147483648"}, [hip62]),
        ("HIP 6.2", {}, [hip62]),
        ("HIP 7.2", {}, [hip72]),
        ("nothing says", {}, [plain]),
        ("no HIP version", {}, [bad_version]),
        ("the rule said when it changes", {},
         ["--queues", "5", hip62, str(tmp_path / "missing.json"), hip72]),
    ]  # fmt: skip
    text = []
    for title, env, argv in cases:
        command, code, out, err = case(monkeypatch, env, partial(verify, capsys),
                                       "verify", *argv)  # fmt: skip
        text.append(transcript(f"{title}: {command}", code, out, err,
                               {"T": str(tmp_path), "EXAMPLE": EXAMPLE}))  # fmt: skip
    terminal = _Tty()
    (tmp_path / "terminal").mkdir()
    opts = argparse.Namespace(traces=list(terminal_traces(tmp_path / "terminal")),
                              queues=1, training=[], json=False,
                              pools="separate")  # fmt: skip
    code = _verify.run(opts, terminal)
    terminal_err = capsys.readouterr().err
    text.append(transcript("on a terminal, in colour", code, terminal.getvalue(),
                           terminal_err, {"T": str(tmp_path)}))  # fmt: skip

    def interrupted(path: str) -> Any:
        raise KeyboardInterrupt

    with monkeypatch.context() as patch:
        patch.setattr(_verify, "read_trace", interrupted)
        code, out, err = verify(capsys, streams[1])
    text.append(transcript("Ctrl-C", code, out, err, {"T": str(tmp_path)}))
    monkeypatch.setattr(_traces, "MAX_VALUE_CHARS", 10)
    monkeypatch.setattr(_traces, "CHUNK", 1)
    code, out, err = verify(capsys, streams[1])
    text.append(transcript("a JSON value longer than the limit (10 characters)",
                           code, out, err, {"T": str(tmp_path)}))  # fmt: skip
    check_golden(GOLDEN / "cli" / "verify.txt", "".join(text))

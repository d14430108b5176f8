"""Counting the GPU streams of a PyTorch profiler (Kineto) trace, streaming.

Traces reach hundreds of MB: the file is decoded one event at a time from a
1 MiB window, so memory stays flat whatever its size. Plain and gzip files,
UTF-8 with or without a byte-order mark (as some editors and Windows tools save);
a trace compressed otherwise (xz, bzip2, zstd, zip) is named, with the command
that unpacks it.

Where a GPU event's stream is: Kineto's Chrome trace writer puts each GPU
event on ``pid`` = the device and ``tid`` = the stream, and repeats both in
``args`` (``device``, ``stream``), with the ``priority`` where it knows it.
Every real trace read so far (a CUDA A100, a ROCm 6.2 MI250, a sampled training
rank) holds ``pid == args.device`` and ``tid == args.stream`` on every kernel,
memcpy and memset. ``args`` may be absent (a trimmed or converted trace, a
writer that omits it): then ``pid`` and ``tid`` say the device and the stream.

A stream's ``priority`` is kept, so that either of HIP's pool rules
(``_pools``) can be applied after reading. Kineto writes one for CUDA kernels
(``CudaMetadataFields.h``: ``priority``) and none on ROCm
(``RocmMetadataFields.h`` has no such field). Of the top-level fields, only the
HIP version is kept (:data:`HIP_VERSION_FIELD`).
"""

from __future__ import annotations

import codecs
import gzip
import io
import json
import shlex
import zlib
from collections.abc import Iterator
from typing import IO, Any, NamedTuple


class TraceError(ValueError):
    """A profiler trace cannot be read: not JSON, not a trace, truncated."""


#: Bytes read at a time.
CHUNK = 1 << 20
#: Largest single JSON value held at once (an event, or a top-level field other
#: than traceEvents such as deviceProperties); a bound on memory for bad input.
MAX_VALUE_CHARS = 64 << 20
#: Event categories of GPU work, as Kineto names them (CUDA and ROCm alike).
GPU_WORK = ("kernel", "memcpy", "memset")
#: The top-level field where Kineto names the run's HIP runtime: its
#: ``HipVersionLogger`` (``libkineto/src/VersionLogger.cpp``) records
#: ``hipRuntimeGetVersion``, which is ``HIP_VERSION``, and the trace writer puts
#: each such record at the top level (``ChromeTraceLogger::metadataToJSON``).
#: Older Kineto writes none: no real trace read so far has it.
HIP_VERSION_FIELD = "hip_runtime_version"

_WHITESPACE = " \t\r\n"
_DECODER = json.JSONDecoder()
#: How a top-level JSON value other than an object or an array can start.
_SCALAR_STARTS = '"-0123456789tfn'
_JSON_NAMES = {"str": "string", "int": "number", "float": "number",
               "bool": "boolean", "NoneType": "null"}  # fmt: skip
NOT_A_TRACE = "JSON, but not a profiler trace"
NO_ACTIVITY = "no GPU activity"


class _Window:
    """A sliding text window over a byte stream, with a JSON value reader."""

    def __init__(self, raw: IO[bytes]) -> None:
        self.raw = raw
        # utf-8-sig: a leading byte-order mark is dropped, as JSON readers may.
        self.decoder = codecs.getincrementaldecoder("utf-8-sig")()
        self.buf = ""
        self.pos = 0
        self.eof = False

    def fill(self) -> bool:
        """Read more text; False when the file has no more."""
        if self.eof:
            return False
        data = self.raw.read(CHUNK)
        self.eof = not data
        # At the end, a character cut short raises UnicodeDecodeError.
        self.buf = self.buf[self.pos :] + self.decoder.decode(data, final=self.eof)
        self.pos = 0
        return not self.eof

    def peek(self) -> str:
        """The next non-space character ("" at the end)."""
        while True:
            while self.pos < len(self.buf) and self.buf[self.pos] in _WHITESPACE:
                self.pos += 1
            if self.pos < len(self.buf):
                return self.buf[self.pos]
            if not self.fill():
                return ""

    def take(self, char: str, where: str) -> None:
        found = self.peek()
        if found != char:
            got = repr(found) if found else "the end of the file"
            raise TraceError(f"expected {char!r} {where}, found {got} (truncated?)")
        self.pos += 1

    def value(self) -> Any:
        self.peek()
        while True:
            try:
                value, end = _DECODER.raw_decode(self.buf, self.pos)
            except json.JSONDecodeError as exc:
                # That many characters and no whole value: it is longer.
                if len(self.buf) - self.pos >= MAX_VALUE_CHARS:
                    raise TraceError(
                        f"a JSON value larger than {MAX_VALUE_CHARS} characters"
                    ) from None
                if self.fill():
                    continue
                raise TraceError(f"invalid or truncated JSON: {exc.msg}") from None
            if end == len(self.buf) and self.fill():
                continue  # a number may go on in the next chunk
            self.pos = end
            return value

    def array(self, where: str) -> Iterator[Any]:
        self.take("[", where)
        if self.peek() == "]":
            self.pos += 1
            return
        while True:
            yield self.value()
            if self.peek() == ",":
                self.pos += 1
                continue
            self.take("]", f"to close {where}")
            return


def events(raw: IO[bytes], kept: dict[str, Any] | None = None) -> Iterator[Any]:
    """The trace events of a Chrome-trace JSON document, object or array form;
    the top-level :data:`HIP_VERSION_FIELD`, where there is one, into ``kept``."""
    window = _Window(raw)
    first = window.peek()
    if first == "[":
        yield from window.array("the event array")
        return
    if first != "{":
        if not first:
            raise TraceError("empty file")
        if not first.isprintable():
            raise TraceError("binary data, not JSON text")
        if first not in _SCALAR_STARTS:
            raise TraceError("not JSON")
        try:
            kind = type(window.value()).__name__
        except TraceError:
            raise TraceError("not JSON") from None
        if window.peek():  # "42abc": a number, then something else
            raise TraceError("not JSON")
        raise TraceError(f"{NOT_A_TRACE}: a JSON {_JSON_NAMES[kind]}")
    window.pos += 1
    found = False
    while window.peek() != "}":
        key = window.value()
        if not isinstance(key, str):
            raise TraceError("invalid JSON object key")
        window.take(":", f"after {key!r}")
        if key == "traceEvents":
            found = True
            yield from window.array("traceEvents")
        else:
            value = window.value()
            if key == HIP_VERSION_FIELD and kept is not None:
                kept[key] = value
        if window.peek() == ",":
            window.pos += 1
        elif window.peek() != "}":
            raise TraceError(f"invalid or truncated JSON after {key!r}")
    if not found:
        raise TraceError(f"{NOT_A_TRACE}: an object without traceEvents")


def open_trace(path: str) -> IO[bytes]:
    """A binary stream of the trace, gunzipped when the file is gzip."""
    try:
        raw = open(path, "rb", buffering=0)  # noqa: SIM115 - handed to the caller
    except OSError as exc:
        raise TraceError(exc.strerror or type(exc).__name__) from None
    head = b""
    try:  # a pipe's read may give fewer bytes: read them all
        while len(head) < HEAD and (more := raw.read(HEAD - len(head))):
            head += more
    except OSError as exc:
        raw.close()
        raise TraceError(f"unreadable: {exc}") from None
    stream = io.BufferedReader(_Replayed(head, raw))
    if head.startswith(GZIP_MAGIC):
        return gzip.GzipFile(fileobj=stream)  # type: ignore[return-value]
    for magic, (kind, unpack) in COMPRESSED.items():
        if head.startswith(magic):
            stream.close()
            raise TraceError(
                f"{kind}-compressed, which verify does not read: unpack it"
                f" ({unpack} {shlex.quote(path)}) and give the JSON file"
            )
    return stream


GZIP_MAGIC = b"\x1f\x8b"
#: Compressed forms a trace is saved in that are not gzip: each by its magic
#: bytes, with its name and the command that unpacks it.
COMPRESSED = {
    b"\xfd7zXZ\x00": ("xz", "xz -dk"),
    b"BZh": ("bzip2", "bunzip2 -k"),
    b"\x28\xb5\x2f\xfd": ("zstd", "zstd -d"),
    b"PK\x03\x04": ("zip", "unzip"),
}


#: The bytes of a trace's start that tell its form: the longest magic.
HEAD = max(len(magic) for magic in (GZIP_MAGIC, *COMPRESSED))


class _Replayed(io.RawIOBase):
    """A file read again from its start after its :data:`HEAD` was read to
    tell its form, without seeking back (a pipe, ``verify <(zcat T)``,
    cannot)."""

    def __init__(self, head: bytes, rest: io.FileIO) -> None:
        self.head, self.rest = head, rest

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int | None:
        if not self.head:
            return self.rest.readinto(buffer)
        size = min(len(buffer), len(self.head))
        memoryview(buffer)[:size] = self.head[:size]
        self.head = self.head[size:]
        return size

    def close(self) -> None:
        self.rest.close()
        super().close()


class Trace(NamedTuple):
    """What ``verify`` reads of a trace."""

    pools: dict[tuple[Any, Any], set[Any]]
    """The streams per ``(device, priority)`` (see :func:`count_streams`)."""
    hip_version: Any
    """The top-level :data:`HIP_VERSION_FIELD` as written, None where absent."""


def count_streams(path: str) -> dict[tuple[Any, Any], set[Any]]:
    """The GPU streams that ran work (kernel, memcpy, memset) or that the trace
    names as ``stream N`` lanes, per pool: ``(device, priority)``, the priority
    None where the trace does not give one. ``TraceError`` says what the file
    is when it is no profiler trace, or one with no GPU activity."""
    return read_trace(path).pools


def read_trace(path: str) -> Trace:
    """The trace's streams (:func:`count_streams`) and the HIP version it
    names, in one pass; ``TraceError`` as :func:`count_streams`."""
    per_device: dict[Any, dict[Any, Any]] = {}
    kept: dict[str, Any] = {}
    stream = open_trace(path)
    gzipped = isinstance(stream, gzip.GzipFile)
    traced = worked = False
    values = 0
    try:
        for event in events(stream, kept):
            values += 1
            if isinstance(event, dict) and "ph" in event:
                traced = True
            found = _gpu_stream(event)
            if found is not None:
                device, lane, priority, work = found
                worked = worked or work
                streams = per_device.setdefault(device, {})
                if priority is not None or lane not in streams:
                    streams[lane] = priority
    except UnicodeDecodeError:
        raise TraceError(_what("binary data, not JSON text", path, gzipped)) from None
    except gzip.BadGzipFile:
        raise TraceError("not gzip data after a gzip header (damaged?)") from None
    except (OSError, EOFError, zlib.error) as exc:
        raise TraceError(f"unreadable: {exc}") from None
    except TraceError as exc:
        raise TraceError(_what(str(exc), path, gzipped)) from None
    finally:
        stream.close()
    if not values:
        raise TraceError(f"{NO_ACTIVITY}: a trace with no events")
    if not traced:
        plural = "" if values == 1 else "s"
        raise TraceError(
            f"{NOT_A_TRACE}: its event list holds {values} value{plural} and no"
            ' trace event (an object with "ph")'
        )
    if not worked:
        raise TraceError(
            f"{NO_ACTIVITY}: no kernel, memcpy or memset events (a CPU-only trace?)"
        )
    pools: dict[tuple[Any, Any], set[Any]] = {}
    for device, streams in per_device.items():
        for lane, priority in streams.items():
            pools.setdefault((device, priority), set()).add(lane)
    return Trace(pools, kept.get(HIP_VERSION_FIELD))


def _what(problem: str, path: str, gzipped: bool) -> str:
    if path.endswith(".gz") and not gzipped:
        return f"named .gz but not gzip-compressed, and {problem}"
    return problem


def _gpu_stream(event: Any) -> tuple[Any, Any, Any, bool] | None:
    """``(device, stream, priority or None, is GPU work)`` of an event on a GPU
    stream: work on it, or the metadata naming it."""
    if not isinstance(event, dict):
        return None
    phase = event.get("ph")
    args = event.get("args")
    if not isinstance(args, dict):
        args = {}  # Kineto may leave them out: pid and tid say where it ran
    if phase == "X":
        category = str(event.get("cat")).lower()  # no "cat": "none"
        device = args.get("device", event.get("pid"))
        stream = args.get("stream", event.get("tid"))
        if (
            device is not None
            and stream is not None
            and any(k in category for k in GPU_WORK)
        ):
            priority = args.get("priority")
            return (
                _key(device),
                _key(stream),
                None if priority is None else _key(priority),
                True,
            )
    elif phase == "M" and event.get("name") == "thread_name":
        name = args.get("name")
        # GPU lanes are named "stream 7 " (sic); CPU threads "thread 123 (python)".
        if isinstance(name, str) and name.startswith("stream "):
            tid = event.get("tid")
            number = name[len("stream ") :].strip()
            return (
                _key(event.get("pid")),
                _key(tid if tid is not None else number),
                None,
                False,
            )
    return None


def _key(value: Any) -> int | str:
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, int):
        return value
    try:
        return int(str(value))
    except ValueError:
        return str(value)

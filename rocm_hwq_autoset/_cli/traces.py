"""Counting the GPU streams of a PyTorch profiler (Kineto) trace, streaming.

Traces reach hundreds of MB: the file is decoded one event at a time from a
1 MiB window, so memory stays flat whatever its size. Plain and gzip files.
"""

from __future__ import annotations

import codecs
import gzip
import json
import zlib
from collections.abc import Iterator
from typing import IO, Any


class TraceError(ValueError):
    """A profiler trace cannot be read: not JSON, not a trace, truncated."""


#: Bytes read at a time.
CHUNK = 1 << 20
#: Largest single JSON value held at once (an event, or a top-level field other
#: than traceEvents such as deviceProperties); a bound on memory for bad input.
MAX_VALUE_CHARS = 64 << 20
#: Event categories of GPU work, as Kineto names them (CUDA and ROCm alike).
GPU_WORK = ("kernel", "memcpy", "memset")

_WHITESPACE = " \t\r\n"
_DECODER = json.JSONDecoder()


class _Window:
    """A sliding text window over a byte stream, with a JSON value reader."""

    def __init__(self, raw: IO[bytes]) -> None:
        self.raw = raw
        self.decoder = codecs.getincrementaldecoder("utf-8")()
        self.buf = ""
        self.pos = 0
        self.eof = False

    def fill(self) -> bool:
        """Read more text; False when the file has no more."""
        if self.eof:
            return False
        data = self.raw.read(CHUNK)
        self.eof = not data
        text = self.decoder.decode(data, final=self.eof)
        self.buf = self.buf[self.pos :] + text
        self.pos = 0
        return bool(text) or not self.eof

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
                if len(self.buf) - self.pos > MAX_VALUE_CHARS:
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


def events(raw: IO[bytes]) -> Iterator[Any]:
    """The trace events of a Chrome-trace JSON document, object or array form."""
    window = _Window(raw)
    first = window.peek()
    if first == "[":
        yield from window.array("the event array")
        return
    if first != "{":
        raise TraceError("not JSON" if first else "empty file")
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
            window.value()
        if window.peek() == ",":
            window.pos += 1
        elif window.peek() != "}":
            raise TraceError(f"invalid or truncated JSON after {key!r}")
    if not found:
        raise TraceError("no traceEvents: JSON, but not a profiler trace")


def open_trace(path: str) -> IO[bytes]:
    """A binary stream of the trace, gunzipped when the file is gzip."""
    try:
        raw = open(path, "rb")  # noqa: SIM115 - handed to the caller
    except OSError as exc:
        raise TraceError(exc.strerror or type(exc).__name__) from None
    if raw.read(2) == b"\x1f\x8b":
        raw.seek(0)
        return gzip.GzipFile(fileobj=raw, mode="rb")  # type: ignore[return-value]
    raw.seek(0)
    return raw


def count_streams(path: str) -> dict[tuple[Any, Any], set[Any]]:
    """The GPU streams that ran work (kernel, memcpy, memset) or that the trace
    names as ``stream N`` lanes, per pool: ``(device, priority)``, the priority
    None where the trace does not give one."""
    per_device: dict[Any, dict[Any, Any]] = {}
    stream = open_trace(path)
    try:
        for event in events(stream):
            found = _gpu_stream(event)
            if found is not None:
                device, lane, priority = found
                streams = per_device.setdefault(device, {})
                if priority is not None or lane not in streams:
                    streams[lane] = priority
    except (OSError, EOFError, zlib.error, UnicodeDecodeError) as exc:
        raise TraceError(f"unreadable: {exc}") from None
    finally:
        stream.close()
    pools: dict[tuple[Any, Any], set[Any]] = {}
    for device, streams in per_device.items():
        for lane, priority in streams.items():
            pools.setdefault((device, priority), set()).add(lane)
    return pools


def _gpu_stream(event: Any) -> tuple[Any, Any, Any] | None:
    """``(device, stream, priority or None)`` of an event on a GPU stream."""
    if not isinstance(event, dict):
        return None
    phase = event.get("ph")
    args = event.get("args")
    if not isinstance(args, dict):
        return None
    if phase == "X":
        category = str(event.get("cat", "")).lower()
        if (
            "device" in args
            and "stream" in args
            and any(k in category for k in GPU_WORK)
        ):
            priority = args.get("priority")
            return (
                _key(args["device"]),
                _key(args["stream"]),
                None if priority is None else _key(priority),
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

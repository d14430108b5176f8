"""``verify``: hold Q against the GPU streams a profiler trace really used.

HIP's rule (ROCm's clr, ``rocdevice.cpp``): each new stream of a priority gets
its own hardware queue until ``GPU_MAX_HW_QUEUES`` exist, then it shares the
least-used one. So a device fits when its streams of one priority number at most
Q. Kineto traces record no priority for most streams; there all streams of a
device count as one pool, which can only over-count.
"""

from __future__ import annotations

import json
import os
from typing import TYPE_CHECKING, Any, TextIO

from .._config import ConfigError
from .._environ import PACKAGE, QUEUES, QueuesSetting
from .._model import queues_for
from .._traces import TraceError, count_streams
from ._common import Reading, fail, training_environ
from .term import paint

if TYPE_CHECKING:
    import argparse

#: The fewest lanes PR #4032's model counts (compute, all_reduce).
MODEL_MIN_LANES = 2


def queues_and_source(opts: argparse.Namespace) -> tuple[int, str]:
    """Q from --queues, else the training arguments, else the environment, else
    HIP's default; with where it came from. ``ConfigError`` for a Q that HIP
    cannot use."""
    if opts.queues is not None:
        if opts.queues < 1:
            raise ConfigError(f"{opts.queues} must be >= 1", "--queues")
        return opts.queues, "--queues"
    if opts.training:
        reading = Reading(opts.training, training_environ(None))
        return reading.rec.queues, "the training arguments (as explain computes it)"
    setting = QueuesSetting(os.environ)
    if setting.text is None:
        return setting.queues or 0, f"HIP's default ({QUEUES} unset)"
    if setting.problem is not None:  # explicit or not: never HIP's default
        raise ConfigError(f"{setting.problem}; give --queues N")
    who = "set by rocm-hwq-autoset" if setting.who == PACKAGE else "set explicitly"
    return setting.queues or 0, f"{QUEUES}={setting.reading} in the environment ({who})"


def run(opts: argparse.Namespace, out: TextIO) -> int:
    json_out = out if opts.json else None
    if not opts.traces:
        return fail("verify needs at least one TRACE", json_out)
    try:
        queues, source = queues_and_source(opts)
    except ConfigError as exc:
        return fail(str(exc), json_out)
    reports: list[dict[str, Any]] = []
    for path in opts.traces:
        try:
            pools = count_streams(path)
        except TraceError as exc:
            return fail(f"{path}: {exc}", json_out)
        # One pool per device and priority; the widest decides.
        devices = {_label(pool): len(streams)
                   for pool, streams in sorted(pools.items(), key=_order)}  # fmt: skip
        streams = max(devices.values())
        reports.append({
            "path": path,
            "streams": streams,
            "devices": devices,
            "needed": streams,
            # What the PR's rounding makes of it: the model always counts
            # compute and all_reduce, so its Q is never below 2.
            "power_of_two": queues_for(max(streams, MODEL_MIN_LANES)),
            "queues": queues,
            "ok": streams <= queues,
        })  # fmt: skip
    all_ok = all(r["ok"] for r in reports)
    if opts.json:
        doc = {"queues": queues, "queues_source": source, "ok": all_ok,
               "traces": reports}  # fmt: skip
        out.write(json.dumps(doc, indent=2) + "\n")
        return 0 if all_ok else 1
    out.write(f"Q = {queues}, from {source}\n")
    for r in reports:
        status = paint("ok", "green", out) if r["ok"] else paint("short", "red", out)
        listed = ", ".join(f"{d}: {n}" for d, n in r["devices"].items())
        plural = "" if r["streams"] == 1 else "s"
        out.write(
            f"{status}  {r['path']}: at most {r['streams']} GPU stream{plural}"
            f" per device ({listed}): needs Q >= {r['needed']} (PR #4032's"
            f" rounding, at least 2 lanes: {r['power_of_two']})\n"
        )
    if not all_ok:
        out.write(
            "short: a device ran more streams than Q, so some shared a hardware"
            f" queue; raise {QUEUES} or check the config\n"
        )
    return 0 if all_ok else 1


def _order(item: tuple[tuple[Any, Any], object]) -> tuple[object, ...]:
    """Devices in order (numbers before names), each with its default pool
    (no priority given) first, then its priorities in order."""
    device, priority = item[0]
    return (*_sortable(device), priority is not None, *_sortable(priority))


def _sortable(value: object) -> tuple[bool, int | str]:
    """Numbers first, in order, then names (a pool's priority may be None)."""
    if isinstance(value, int):
        return False, value
    return True, str(value)


def _label(pool: tuple[object, object]) -> str:
    device, priority = pool
    return f"device {device}" + ("" if priority is None else f" priority {priority}")

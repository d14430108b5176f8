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

from .. import _decision as env
from .._launch import ConfigError
from .._model import queues_for
from . import fail, recommendation
from .term import paint
from .traces import TraceError, count_streams

if TYPE_CHECKING:
    import argparse


def queues_and_source(opts: argparse.Namespace) -> tuple[int, str]:
    """Q from --queues, else the training args, else the environment, else HIP's
    default; with where it came from."""
    if opts.queues is not None:
        return opts.queues, "--queues"
    if opts.training:
        rec, _ = recommendation(opts.training)
        return rec.queues, "the training arguments (as explain computes it)"
    value = env.positive_int(os.environ.get(env.QUEUES, ""))
    if value is not None:
        return value, f"{env.QUEUES} in the environment"
    return env.HIP_DEFAULT_QUEUES, f"HIP's default ({env.QUEUES} unset)"


def run_verify(opts: argparse.Namespace, out: TextIO) -> int:
    if not opts.traces:
        return fail("verify needs at least one TRACE")
    if opts.queues is not None and opts.queues < 1:
        return fail(f"--queues {opts.queues}: must be >= 1")
    try:
        queues, source = queues_and_source(opts)
    except ConfigError as exc:
        return fail(str(exc))
    reports: list[dict[str, Any]] = []
    for path in opts.traces:
        try:
            pools = count_streams(path)
        except TraceError as exc:
            return fail(f"{path}: {exc}")
        # One pool per device and priority; the widest decides.
        devices = {_label(pool): len(streams) for pool, streams in sorted(
            pools.items(), key=lambda item: str(item[0]))}  # fmt: skip
        streams = max(devices.values(), default=0)
        reports.append({
            "path": path,
            "streams": streams,
            "devices": devices,
            "needed": streams,
            "pr_recommends": queues_for(streams) if streams else 0,
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
            f" per device ({listed or 'no GPU work'}): needs Q >= {r['needed']}"
            f" (PR #4032 would set {r['pr_recommends']})\n"
        )
    if not all_ok:
        out.write(
            "short: a device ran more streams than Q, so some shared a hardware"
            f" queue; raise {env.QUEUES} or check the config\n"
        )
    return 0 if all_ok else 1


def _label(pool: tuple[object, object]) -> str:
    device, priority = pool
    return f"device {device}" + ("" if priority is None else f" priority {priority}")

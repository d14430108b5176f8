"""``verify``: hold Q against the GPU streams a profiler trace really used."""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any, TextIO

from . import _environment as env
from ._errors import ConfigError, TraceError
from ._stream_model import queues_for
from ._term import paint
from ._traces import count_streams

#: HIP's default when GPU_MAX_HW_QUEUES is unset (CLR's flags).
HIP_DEFAULT_QUEUES = 4


def queues_and_source(opts: argparse.Namespace) -> tuple[int, str]:
    """Q from --queues, else the training args, else the environment, else HIP's
    default; with where it came from."""
    if opts.queues is not None:
        return opts.queues, "--queues"
    if opts.training:
        from ._api import recommend
        from ._argv import config_file_arg
        from ._toml import load_toml

        path = config_file_arg(opts.training)
        config = load_toml(path) if path is not None else None
        rec = recommend(config, argv=opts.training)
        return rec.queues, "the training arguments (as explain computes it)"
    value = os.environ.get(env.QUEUES, "")
    if value.strip().isdigit() and int(value) > 0:
        return int(value), f"{env.QUEUES} in the environment"
    return HIP_DEFAULT_QUEUES, "HIP's default (GPU_MAX_HW_QUEUES unset)"


def run_verify(opts: argparse.Namespace, out: TextIO) -> int:
    if not opts.traces:
        sys.stderr.write("rocm-hwq-autoset: error: verify needs at least one TRACE\n")
        return 2
    if opts.queues is not None and opts.queues < 1:
        sys.stderr.write(
            f"rocm-hwq-autoset: error: --queues {opts.queues}: must be >= 1\n"
        )
        return 2
    try:
        queues, source = queues_and_source(opts)
    except ConfigError as exc:
        sys.stderr.write(f"rocm-hwq-autoset: error: {exc}\n")
        return 2
    reports: list[dict[str, Any]] = []
    for path in opts.traces:
        try:
            per_device = count_streams(path)
        except TraceError as exc:
            sys.stderr.write(f"rocm-hwq-autoset: error: {path}: {exc}\n")
            return 2
        streams = max((len(s) for s in per_device.values()), default=0)
        needed = queues_for(streams) if streams else 0
        reports.append({
            "path": path,
            "streams": streams,
            "devices": {str(d): len(s) for d, s in sorted(per_device.items(), key=str)},
            "needed": needed,
            "queues": queues,
            "ok": queues >= needed,
        })  # fmt: skip
    all_ok = all(r["ok"] for r in reports)
    if opts.json:
        doc = {
            "queues": queues,
            "queues_source": source,
            "ok": all_ok,
            "traces": reports,
        }
        out.write(json.dumps(doc, indent=2) + "\n")
    else:
        out.write(f"Q = {queues}, from {source}\n")
        for r in reports:
            status = (
                paint("ok", "green", out) if r["ok"] else paint("short", "red", out)
            )
            devices = ", ".join(f"device {d}: {n}" for d, n in r["devices"].items())
            out.write(
                f"{status}  {r['path']}: {r['streams']} GPU stream"
                f"{'' if r['streams'] == 1 else 's'}"
                f" ({devices or 'no GPU work'}), needs {r['needed']}\n"
            )
        if not all_ok:
            out.write(
                "short: some trace used more streams than Q queues serve apart;"
                " raise GPU_MAX_HW_QUEUES or check the config\n"
            )
    return 0 if all_ok else 1

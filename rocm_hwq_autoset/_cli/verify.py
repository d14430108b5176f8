"""``verify``: hold Q against the GPU streams a profiler trace really used.

HIP's rule (ROCm's clr, ``rocdevice.cpp``): each new stream gets its own
hardware queue until ``GPU_MAX_HW_QUEUES`` exist in its pool, then it shares the
least-used one. So a device fits when the streams of each of its pools number at
most Q. A pool is a device and a stream priority in every HIP before
ROCm/rocm-systems#8485, the whole device with it (``_pools``: the rule, and how
it is chosen for a trace). Where no rule can be chosen, each trace gets both
verdicts, and the worse counts. Kineto traces record no priority for most
streams; there all streams of a device count as one pool under either rule.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any, TextIO

from .._argv import is_option
from .._config import ConfigError
from .._environ import HIP_DEFAULT_QUEUES, QUEUES, QueuesSetting
from .._model import MAX_QUEUES, MIN_LANES, queues_for
from .._pools import BOTH, OPTION, RULES, PoolRule, choose, pool_sizes
from .._traces import TraceError, read_trace
from ._common import Option, Reading, add_options, fail, training_environ
from .term import json_text, paint, wrap

if TYPE_CHECKING:
    import argparse

HELP = (
    "Count the GPU streams per device in PyTorch profiler traces and check Q"
    " against them: HIP gives each new stream its own hardware queue until Q"
    " exist in its pool, then shares one, so a device fits when each of its"
    " pools has at most Q streams: one pool per stream priority (every HIP"
    " before ROCm/rocm-systems#8485) or one per device (with it)."
)
EXAMPLE = """\
example:
  rocm-hwq-autoset verify rank0.json.gz --job.config_file job.toml"""
#: verify's own options; its traces come before the training arguments.
OPTIONS = (
    Option("--json", takes_value=False, action="store_true",
           help="one JSON object on stdout"),
    Option("--queues", takes_value=True, type=int, metavar="N",
           help="the Q to check"),
    Option(OPTION, takes_value=True, choices=RULES, dest="pools",
           help="how the job's HIP pooled the hardware queues: separate (one"
           " pool per stream priority: every HIP before ROCm/rocm-systems#8485)"
           " or shared (one per device: with it, or with"
           " DEBUG_HIP_IGNORE_STREAM_PRIORITY=1); default: that variable as HIP"
           " reads it, else the HIP version the trace names, else both"
           " verdicts"),
)  # fmt: skip


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_options(parser, OPTIONS)
    parser.add_argument("traces", nargs="*", metavar="TRACE")


#: What PR #4032 measured for Q=16 against Q=8 (EP=2 2-node DeepSeek-V3,
#: MI355X, ROCm 7.2, tok/s/GPU).
Q16_COST = (
    "PR #4032 measured Q=16 at -13.6 % on torchtitan fec3e19 and -3.8 % on 1ac4653"
)
#: A trace's one verdict line where both rules give the same pools: where it
#: has no stream priorities (a ROCm trace: Kineto writes none there).
ALIKE = "(both rules alike: no stream priorities)"
#: A training argument named like this is surely a trace given in the wrong place.
TRACE_SUFFIXES = (".json", ".json.gz", ".pt.trace.json", ".gz")


def queues_and_source(opts: argparse.Namespace) -> tuple[int, str, str | None]:
    """The Q the job ran with, as the hook leaves it: ``--queues``, else an
    explicit ``GPU_MAX_HW_QUEUES`` (it wins over the training arguments, as in
    the hook), else the training arguments' Q, else the environment's value
    (this package's), else HIP's default; with where it came from, and a note
    where the training arguments give another Q than the one the job ran with.
    ``ConfigError`` for a Q that HIP cannot use, or arguments it cannot read."""
    if opts.queues is not None:
        if opts.queues < 1:
            raise ConfigError(f"{opts.queues} must be >= 1", "--queues")
        if QueuesSetting({QUEUES: str(opts.queues)}).queues is None:
            raise ConfigError(  # as GPU_MAX_HW_QUEUES, HIP's atoi is undefined
                f"{opts.queues} is beyond C's int: no Q HIP reads", "--queues"
            )
        return opts.queues, "--queues", None
    setting = QueuesSetting(os.environ)
    from_args = None
    if opts.training:
        # Judging a run: evaluated now, never a cached answer.
        reading = Reading(opts.training, training_environ(None), fresh=True)
        from_args = reading.rec.queues
    if setting.explicit is None and from_args is not None:
        return from_args, "the training arguments (as explain computes it)", None
    if setting.text is None:
        return HIP_DEFAULT_QUEUES, f"HIP's default ({QUEUES} unset)", None
    if setting.queues is None:  # explicit or not: never HIP's default
        raise ConfigError(f"{setting.problem}; give --queues N")
    source = f"{QUEUES} in the environment: {setting.describe()}"
    note = None
    if from_args is not None:
        note = (
            "the training arguments give the same Q"
            if from_args == setting.queues
            else f"the training arguments give Q = {from_args}, but the explicit"
            f" {QUEUES} wins over them, as in the hook: the job ran with"
            f" Q = {setting.queues}"
        )
    return setting.queues, source, note


def misplaced_trace(training: list[str], traces: list[str]) -> str | None:
    """The message for a trace taken as a training argument's value, or None.

    A torchtitan flag takes one value (lists are one comma-separated token), so
    a trace-named argument after a flag's value, or after ``--`` with no flag
    before it, is a TRACE in the wrong place. One that is a flag's only value
    (``--model.tokenizer_path tokenizer.json``) may be meant so: it is named
    only when no TRACE was given."""
    flag, values = "", 0
    for arg in training:
        if is_option(arg):
            flag, values = arg.partition("=")[0], int("=" in arg)
            continue
        values += 1
        if not arg.lower().endswith(TRACE_SUFFIXES) or (
            values == 1 and traces and flag
        ):
            continue
        if not flag:  # only "--" puts a bare argument among them
            return (
                f"{arg!r} comes after '--', where everything is a training"
                " argument: put every TRACE before the training arguments"
            )
        return (
            f"{arg!r} was read as a value of {flag}, a training argument (each"
            " takes the values that follow it): put every TRACE before the"
            f" training arguments: verify {arg} {flag} ..."
        )
    return None


def run(opts: argparse.Namespace, out: TextIO) -> int:
    """Each trace's verdict, the worst status; ``ConfigError`` where nothing
    can be judged (the dispatcher says it)."""
    misplaced = misplaced_trace(opts.training, opts.traces)
    if misplaced is not None:
        raise ConfigError(misplaced)
    if not opts.traces:
        raise ConfigError("verify needs at least one TRACE")
    queues, source, note = queues_and_source(opts)
    reports: list[dict[str, Any]] = []
    errors: list[str] = []
    for path in opts.traces:
        try:
            trace = read_trace(path)
        except TraceError as exc:
            errors.append(f"{path}: {exc}")
            reports.append({"path": path, "error": errors[-1], "ok": False})
            continue
        rule = choose(opts.pools, os.environ, trace.hip_version)
        reports.append(judge(path, trace.pools, rule, queues))
    read = [r for r in reports if "error" not in r]
    # The worst verdict: a trace not read (2), one short (1), all fitting (0).
    status = 2 if errors else 0 if all(r["ok"] for r in read) else 1
    if opts.json:  # the same shape whatever was read: each trace an entry
        doc = {"queues": queues, "queues_source": source, "ok": status == 0,
               "traces": reports}  # fmt: skip
        if note is not None:
            doc["note"] = note
        out.write(json_text(doc, indent=2) + "\n")
        for error in errors:
            fail(error)
        return status
    if not read:  # nothing to report but what is wrong
        for error in errors[:-1]:
            fail(error)
        raise ConfigError(errors[-1])  # the others said above
    out.write(wrap(f"Q = {queues}, from {source}") + "\n")
    if note is not None:
        out.write(wrap(f"note: {note}") + "\n")
    # The pool rule last said: said again when it changes.
    said: dict[str, Any] = {}
    for r in reports:
        if "error" in r:
            out.write(f"{paint('unread', 'red', out)}  {r['error']}\n")
            continue
        if r["pool_rule"] != said:
            said = r["pool_rule"]
            for warning in said.get("warnings", ()):
                out.write(wrap(f"warning: {warning}") + "\n")
            out.write(wrap(f"pools: {said['why']}") + "\n")
        for line in verdict_lines(r, out):
            out.write(line + "\n")
    short = [r for r in read if not r["ok"]]
    if short:
        # Sure where every verdict of a trace is short, not only the shared one.
        sure = [r for r in short if not any(v["ok"] for v in r["verdicts"])]
        needed = max(v["needed"] for r in sure or short for v in r["verdicts"])
        out.write(wrap(advice(needed, bool(sure))) + "\n")
    for error in errors:
        fail(error)
    return status


def judge(
    path: str, pools: dict[tuple[Any, Any], set[Any]], rule: PoolRule, queues: int
) -> dict[str, Any]:
    """A trace's report: the pool rule, each verdict it calls for (both rules,
    separate first, where it is :data:`BOTH`), and whether all fit."""
    verdicts = [verdict(pools, r, queues)
                for r in (RULES if rule.rule == BOTH else (rule.rule,))]  # fmt: skip
    said: dict[str, Any] = {"rule": rule.rule, "source": rule.source, "why": rule.why}
    if rule.warnings:
        said["warnings"] = list(rule.warnings)
    return {"path": path, "queues": queues, "pool_rule": said, "verdicts": verdicts,
            "ok": all(v["ok"] for v in verdicts)}  # fmt: skip


def verdict(
    pools: dict[tuple[Any, Any], set[Any]], rule: str, queues: int
) -> dict[str, Any]:
    """The verdict of one pool rule: the streams of each pool, the widest, and
    whether it fits Q."""
    sizes = pool_sizes(pools, rule)
    devices = {_label(pool): n for pool, n in sorted(sizes.items(), key=_order)}
    streams = max(devices.values())
    return {
        "pools": rule,
        "devices": devices,
        "streams": streams,
        "needed": streams,
        # What the PR's rounding makes of it: the model always counts
        # compute and all_reduce, so its Q is never below 2.
        "power_of_two": queues_for(max(streams, MIN_LANES)),
        "ok": streams <= queues,
    }


def verdict_lines(report: dict[str, Any], out: TextIO) -> list[str]:
    """A trace's verdicts as lines: one per rule, tagged with it where there
    are two, one for both where they are the same (no priorities in it)."""
    path, verdicts = report["path"], report["verdicts"]
    if len(verdicts) == 1:
        return [_line(path, verdicts[0], out)]
    if verdicts[0]["devices"] == verdicts[1]["devices"]:
        return [_line(f"{path} {ALIKE}", verdicts[0], out)]
    return [_line(f"{path} ({v['pools']} pools)", v, out) for v in verdicts]


def _line(named: str, v: dict[str, Any], out: TextIO) -> str:
    mark = paint("ok", "green", out) if v["ok"] else paint("short", "red", out)
    listed = ", ".join(f"{d}: {n}" for d, n in v["devices"].items())
    plural = "" if v["streams"] == 1 else "s"
    return (
        f"{mark}  {named}: at most {v['streams']} GPU stream{plural} per device"
        f" ({listed}): needs Q >= {v['needed']} (PR #4032's rounding, at least 2"
        f" lanes: {v['power_of_two']})"
    )


def advice(needed: int, sure: bool) -> str:
    """What to do when a device ran more streams than Q; not ``sure`` where
    only the shared pools' verdict says so."""
    said = (
        "short: a device ran more streams than Q, so some shared a hardware queue;"
        if sure
        else "short under shared pools only: if the job's HIP had one pool per"
        " device, a device ran more streams than Q, so some shared a hardware"
        " queue;"
    )
    if needed <= MAX_QUEUES:
        fitting = queues_for(max(needed, MIN_LANES))
        return f"{said} {QUEUES}={fitting} fits them; or check the config"
    return (
        f"{said} {needed} streams are more than PR #4032's model ever counts"
        f" (at most {MAX_QUEUES}), and more queues are not free: {Q16_COST}"
        f" against Q=8. Find what starts the extra streams before raising {QUEUES}"
        " past 8, and measure if you do"
    )


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

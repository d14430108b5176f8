"""HIP's pools of hardware queues: which GPU streams share the Q queues of one
pool, and which rule the job's HIP followed.

HIP (ROCm's clr, ``rocdevice.cpp``) gives each new stream its own hardware
queue until ``GPU_MAX_HW_QUEUES`` exist in the stream's pool, then shares the
least-used one. Every HIP released before ROCm/rocm-systems#8485 (merged
2026-07-13) keeps one pool per device and stream priority (:data:`SEPARATE`).
That pull request made ``DEBUG_HIP_IGNORE_STREAM_PRIORITY`` default to true:
high-priority streams draw from the normal pool, so a device has one pool
(:data:`SHARED`), unless the job sets the variable false. Which ROCm release
first ships it is not known.

The rule is chosen (:func:`choose`) from, in this order: ``verify --pools``;
the variable, as HIP reads it (``_environ.ignore_priority``); the HIP version
the trace names (:func:`hip_line`, :data:`LAST_LINE_APART`); else both rules
are applied (:data:`BOTH`) and the worse verdict decides.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any, NamedTuple

from ._environ import IGNORE_PRIORITY, ignore_priority

SEPARATE, SHARED, BOTH = "separate", "shared", "both"
#: The two rules, in the order both are reported.
RULES = (SEPARATE, SHARED)
#: ``verify``'s option that chooses the rule (its ``OPTIONS`` table names it so).
OPTION = "--pools"
#: Where the rule came from, as ``verify --json`` names it.
FROM_OPTION, FROM_VARIABLE, FROM_TRACE, FROM_NOTHING = (
    OPTION, IGNORE_PRIORITY, "hip_runtime_version", "none",
)  # fmt: skip
#: ``HIP_VERSION`` (``hip_version.h``, what ``hipRuntimeGetVersion`` returns):
#: major * 10000000 + minor * 100000 + patch, the patch a build number.
MAJOR_UNIT, MINOR_UNIT = 10_000_000, 100_000
#: The newest HIP line (major, minor) all of whose releases came out before
#: ROCm/rocm-systems#8485 merged, so that it keeps pools apart: 7.1 (its last,
#: 7.1.1, on 2025-11-26; 7.2.0 followed on 2026-01-21). Not 7.2: its releases
#: up to 7.2.4 (2026-05-28) came before, but a trace names no patch release
#: (``HIP_VERSION``'s patch is a build number) and a later 7.2.x may carry it.
LAST_LINE_APART = (7, 1)
#: The change, and when it merged: every HIP released before keeps pools apart.
PR, MERGED = "ROCm/rocm-systems#8485", "merged 2026-07-13"
#: What each rule means, as every line that names one says it.
MEANS = {
    SEPARATE: "each stream priority of a device has its own Q queues",
    SHARED: "all streams of a device share its Q queues",
}
#: How to choose where both verdicts are given.
CHOOSE = (
    f"the worse decides; choose with {OPTION} separate (a HIP without it) or"
    f" {OPTION} shared (one with it)"
)


class PoolRule(NamedTuple):
    """The rule a trace is judged by: :data:`SEPARATE`, :data:`SHARED` or
    :data:`BOTH`; where it came from (``FROM_*``); why, as one line starting
    with the rule; and a warning for each value that was not read as written."""

    rule: str
    source: str
    why: str
    warnings: tuple[str, ...]


def pool_sizes(
    pools: Mapping[tuple[Any, Any], Collection[Any]], rule: str
) -> dict[tuple[Any, Any], int]:
    """The streams of each pool under ``rule`` (:data:`SEPARATE` or
    :data:`SHARED`), from streams per ``(device, priority)``: apart, or each
    device's priorities added up in ``(device, None)`` (a stream has one
    priority, so it is counted once)."""
    sizes: dict[tuple[Any, Any], int] = {}
    for (device, priority), streams in pools.items():
        key = (device, priority if rule == SEPARATE else None)
        sizes[key] = sizes.get(key, 0) + len(streams)
    return sizes


def hip_line(value: Any) -> tuple[int, int] | None:
    """The HIP line ``(major, minor)`` of a trace's ``hip_runtime_version``
    (Kineto writes ``HIP_VERSION`` as a number), or None for anything else: a
    boolean, a string, a number without a major version."""
    if isinstance(value, bool) or not isinstance(value, int) or value < MAJOR_UNIT:
        return None
    return value // MAJOR_UNIT, value % MAJOR_UNIT // MINOR_UNIT


def choose(
    chosen: str | None, environ: Mapping[str, str], hip_version: Any
) -> PoolRule:
    """The rule for one trace: ``chosen`` (``--pools``), else the variable as
    HIP reads it in ``environ``, else HIP's default for the version the trace
    names (``hip_version``, as written; None where it names none), else both."""
    if chosen is not None:
        why = f"{chosen}, as {OPTION} says: {MEANS[chosen]}"
        return PoolRule(chosen, FROM_OPTION, why, ())
    flag, problem = ignore_priority(environ)
    if flag is not None:
        return _by_variable(flag, environ[IGNORE_PRIORITY], problem)
    unread = () if problem is None else (f"{problem}; judged as if it were unset",)
    return _by_version(hip_version, unread)


#: Where nothing says which rule HIP followed.
NOTHING_SAYS = (
    f"both verdicts: nothing says whether the job's HIP has {PR} ({MERGED}): no"
    f" {OPTION}, no readable {IGNORE_PRIORITY}, and the trace names no HIP version"
    f" (only newer Kineto writes {FROM_TRACE}); {CHOOSE}"
)


def _by_variable(flag: bool, text: str, problem: str | None) -> PoolRule:
    rule = SHARED if flag else SEPARATE
    why = (
        f"{rule}, as HIP reads {IGNORE_PRIORITY}={text!r} ({str(flag).lower()}):"
        f" {MEANS[rule]}"
    )
    if flag:
        why += f" (a HIP older than the flag ignores it: {OPTION} separate then)"
    warnings = () if problem is None else (f"{problem}; judged so: {MEANS[rule]}",)
    return PoolRule(rule, FROM_VARIABLE, why, warnings)


def _by_version(value: Any, warnings: tuple[str, ...]) -> PoolRule:
    line = hip_line(value)
    if line is None:
        if value is not None:
            warnings += (
                f"{FROM_TRACE} {value!r} in the trace is no HIP version (Kineto"
                f" writes HIP_VERSION: major * {MAJOR_UNIT} + minor * {MINOR_UNIT}"
                " + patch); judged as a trace that names none",
            )
        return PoolRule(BOTH, FROM_NOTHING, NOTHING_SAYS, warnings)
    hip = f"HIP {line[0]}.{line[1]}"
    named = f"({FROM_TRACE} {value} in the trace)"
    if line <= LAST_LINE_APART:
        why = (
            f"{SEPARATE}, as {hip} does {named}, released before {PR} ({MERGED}):"
            f" {MEANS[SEPARATE]}"
        )
        return PoolRule(SEPARATE, FROM_TRACE, why, warnings)
    why = (
        f"both verdicts: {hip} {named} may have {PR} ({MERGED}): its first release"
        f" is not known; {CHOOSE}"
    )
    return PoolRule(BOTH, FROM_TRACE, why, warnings)

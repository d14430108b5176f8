"""HIP's pools (``_pools``): what a pool is under each rule, and which rule a
trace is judged by: ``--pools``, else ``DEBUG_HIP_IGNORE_STREAM_PRIORITY`` as
HIP reads it, else the HIP version the trace names, else both."""

from __future__ import annotations

from typing import Any

import pytest

from rocm_hwq_autoset._environ import ignore_priority
from rocm_hwq_autoset._pools import (
    BOTH,
    MEANS,
    NOTHING_SAYS,
    SEPARATE,
    SHARED,
    PoolRule,
    choose,
    hip_line,
    pool_sizes,
)

from ..data import TRACE_POOLS, TRACE_SHARED
from ..helpers import GOLDEN, check_golden, lines_report

#: Every test here is known fast (the ini's 600 s is for the slow ones).
pytestmark = pytest.mark.timeout(60)

VARIABLE = "DEBUG_HIP_IGNORE_STREAM_PRIORITY"
APART, ONE = MEANS[SEPARATE], MEANS[SHARED]
#: HIP_VERSION of real releases' lines: 6.2, 7.1, 7.2 (major * 10000000 +
#: minor * 100000 + a build number).
HIP_6_2, HIP_7_1, HIP_7_2 = 60241134, 70151234, 70253211


def test_separate_pools_are_the_traces_own() -> None:
    assert pool_sizes(TRACE_POOLS, SEPARATE) == {
        pool: len(streams) for pool, streams in TRACE_POOLS.items()
    }


def test_shared_pools_add_up_each_devices_priorities() -> None:
    """Device 0's three normal and two high-priority streams make five in its
    one pool; a device without priorities keeps its count."""
    assert pool_sizes(TRACE_POOLS, SHARED) == TRACE_SHARED
    pools = {(0, -1): {1}, (0, None): {2, 3}, (0, 0): {4}, ("gpu", 2): {5, 6}}
    assert pool_sizes(pools, SHARED) == {(0, None): 4, ("gpu", None): 2}
    assert pool_sizes(pools, SEPARATE) == {(0, -1): 1, (0, None): 2, (0, 0): 1,
                                           ("gpu", 2): 2}  # fmt: skip


@pytest.mark.parametrize(
    ("value", "line"),
    [
        (HIP_6_2, (6, 2)), (HIP_7_1, (7, 1)), (HIP_7_2, (7, 2)),
        (70000000, (7, 0)), (71000000, (7, 10)), (100000000, (10, 0)),
        (10000000, (1, 0)), (9999999, None), (0, None), (-60241134, None),
        (True, None), (False, None), ("60241134", None), (6.2, None),
        (60241134.0, None), (None, None), ([6, 2], None),
    ],
)  # fmt: skip
def test_the_hip_line_of_hip_version(value: Any, line: tuple[int, int] | None) -> None:
    """HIP_VERSION as Kineto writes it (a number); 7.10 comes after 7.1 and
    7.2, as numbers do."""
    assert hip_line(value) == line


def test_every_reason_and_warning() -> None:
    """Each rule's line, and each warning, for one input each: the wording's
    one home; the tests below assert the rule, its source and the input named."""
    entries = [
        ("--pools separate", choose(SEPARATE, {}, HIP_7_2)),
        ("--pools shared", choose(SHARED, {}, HIP_6_2)),
        (f"{VARIABLE}=1", choose(None, {VARIABLE: "1"}, HIP_6_2)),
        (f"{VARIABLE}=0", choose(None, {VARIABLE: "0"}, HIP_7_2)),
        (f"{VARIABLE}=yes", choose(None, {VARIABLE: "yes"}, HIP_7_2)),
        (f"{VARIABLE}=2147483648, HIP 6.2", choose(None, {VARIABLE: "2147483648"},
                                                   HIP_6_2)),
        ("hip_runtime_version 60241134 (6.2)", choose(None, {}, HIP_6_2)),
        ("hip_runtime_version 70253211 (7.2)", choose(None, {}, HIP_7_2)),
        ("nothing", choose(None, {}, None)),
        ("hip_runtime_version '6.2'", choose(None, {}, "6.2")),
    ]  # fmt: skip
    report = lines_report([(given, "\n".join([rule.why, *rule.warnings]))
                           for given, rule in entries])  # fmt: skip
    check_golden(GOLDEN / "lines" / "pools.txt", report)


def test_the_option_wins_over_everything() -> None:
    for chosen, environ, version in ((SEPARATE, {VARIABLE: "1"}, HIP_7_2),
                                     (SHARED, {VARIABLE: "0"}, HIP_6_2)):  # fmt: skip
        rule = choose(chosen, environ, version)
        assert rule[:2] == (chosen, "--pools") and rule.warnings == ()
        assert rule.why.split(",")[0] == chosen and rule.why.endswith(MEANS[chosen])


#: A set variable: what HIP reads (clr's Flag::setValue: "true", or atoi
#: nonzero), and whether it reads as written.
FLAGS = [
    ("1", True, True), ("true", True, True), (" 2 ", True, True), ("-1", True, True),
    ("+1", True, True), ("0", False, True), ("false", False, True),
    (" 0\n", False, True), ("1abc", True, False), ("yes", False, False),
    ("TRUE", False, False), ("True", False, False), (" true", False, False),
    ("on", False, False), ("", False, False), (" ", False, False),
    ("0x1", False, False), ("+", False, False),
]  # fmt: skip


@pytest.mark.parametrize(("text", "flag", "plain"), FLAGS)
def test_the_variable_as_hip_reads_it(text: str, flag: bool, plain: bool) -> None:
    """It wins over the trace's version; true is one pool per device, false
    one per priority; a value HIP reads otherwise than it reads gets a warning
    saying what HIP reads and how the trace is judged."""
    rule = choose(None, {VARIABLE: text}, HIP_6_2 if flag else HIP_7_2)
    read = "true" if flag else "false"
    assert rule[:2] == ((SHARED if flag else SEPARATE), VARIABLE)
    assert rule.why.split(",")[0] == rule.rule
    assert f"{VARIABLE}={text!r} ({read}): {MEANS[rule.rule]}" in rule.why
    if plain:
        assert rule.warnings == ()
    else:  # the variable's own problem, and how the trace is judged
        problem = ignore_priority({VARIABLE: text})[1]
        assert rule.warnings == (f"{problem}; judged so: {MEANS[rule.rule]}",)


@pytest.mark.parametrize("text", ["2147483648", "-99999999999"])
def test_a_variable_hip_reads_no_way_is_not_used(text: str) -> None:
    """``atoi`` is undefined beyond C's int: the variable is said and passed
    over, and the trace's version decides."""
    rule = choose(None, {VARIABLE: text}, HIP_6_2)
    assert rule[:2] == (SEPARATE, "hip_runtime_version")
    problem = ignore_priority({VARIABLE: text})[1]
    assert problem is not None and f"{VARIABLE}={text!r}" in problem
    [warning] = rule.warnings
    assert warning.startswith(f"{problem}; ") and warning != problem
    rule = choose(None, {VARIABLE: text}, None)
    assert rule[:2] == (BOTH, "none") and len(rule.warnings) == 1


@pytest.mark.parametrize("version", [HIP_6_2, HIP_7_1, 50731921, 10000000])
def test_a_hip_released_before_the_change_keeps_pools_apart(version: int) -> None:
    line = f"{version // 10000000}.{version % 10000000 // 100000}"
    rule = choose(None, {}, version)
    assert rule[:2] == (SEPARATE, "hip_runtime_version") and rule.warnings == ()
    assert rule.why.split(",")[0] == SEPARATE and rule.why.endswith(APART)
    assert f"HIP {line} " in rule.why and f"hip_runtime_version {version} " in rule.why


@pytest.mark.parametrize("version", [HIP_7_2, 70200000, 71000000, 100000000])
def test_a_hip_that_may_have_the_change_gets_both_verdicts(version: int) -> None:
    line = f"{version // 10000000}.{version % 10000000 // 100000}"
    rule = choose(None, {}, version)
    assert rule[:2] == (BOTH, "hip_runtime_version") and rule.warnings == ()
    assert rule.why.startswith(f"{BOTH} ") and rule.why.endswith(NOTHING_SAYS[-80:])
    assert f"HIP {line} " in rule.why and f"hip_runtime_version {version} " in rule.why


def test_nothing_says_so_both_verdicts() -> None:
    assert choose(None, {"GPU_MAX_HW_QUEUES": "1"}, None) == PoolRule(
        BOTH, "none", NOTHING_SAYS, ()
    )
    # It names every input that could have said, and how to choose.
    for named in ("--pools", f"{VARIABLE},", "hip_runtime_version);"):
        assert named in NOTHING_SAYS.split(), named


@pytest.mark.parametrize("value", ["60241134", "6.2", True, 9999999, 6.2, {}])
def test_a_version_that_is_none_is_said(value: Any) -> None:
    rule = choose(None, {}, value)
    assert rule[:3] == (BOTH, "none", NOTHING_SAYS)
    [warning] = rule.warnings
    assert warning.startswith(f"hip_runtime_version {value!r} ")


def test_two_values_not_read_are_both_said() -> None:
    rule = choose(None, {VARIABLE: "4294967296"}, "x")
    assert rule[:2] == (BOTH, "none")
    assert [w.split(" ")[0] for w in rule.warnings] == [
        f"{VARIABLE}='4294967296'",
        "hip_runtime_version",
    ]

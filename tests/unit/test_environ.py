"""The environment's vocabulary (``_environ``): every reader, the one reading
of ``GPU_MAX_HW_QUEUES`` (HIP's: C's ``atoi``), and the literal copies of the
switch's off values that the start-up gate keeps, held to :data:`OFF_VALUES`."""

from __future__ import annotations

import ast
import ctypes
import random
import re
from pathlib import Path

import pytest

import _rocm_hwq_autoset_gate as gate_module
import rocm_hwq_autoset
from rocm_hwq_autoset import _environ
from rocm_hwq_autoset._environ import (
    CACHE,
    FORCE_VALUE,
    LOCAL_RANKS,
    LOG,
    OFF_VALUES,
    ON_VALUES,
    SWITCH,
    QueuesSetting,
    cache_switch,
    hip_reads,
    hip_reads_flag,
    ignore_priority,
    local_rank,
    log_level,
    positive_int,
    prints_for_node,
    switch,
    world_size,
)

#: Every test here is known fast (the ini's 600 s is for the slow ones).
pytestmark = pytest.mark.timeout(60)

ROOT = Path(__file__).resolve().parents[2]


# The switch's off values: one rule, one literal copy (the gate's).


def test_every_copy_of_the_off_values_is_off_values() -> None:
    """The start-up gate (``_rocm_hwq_autoset_gate``, which the ``.pth`` line
    and the ``.start`` entry call) tests the off values before importing
    anything of the package, so it keeps a literal copy: it is
    :data:`OFF_VALUES`, read as :func:`switch` reads them. The ``.pth`` line
    and the package's ``__init__`` keep none."""
    pth = (ROOT / "rocm_hwq_autoset.pth").read_text()
    assert not any(f'"{value}"' in pth or f"'{value}'" in pth for value in OFF_VALUES)
    init = Path(rocm_hwq_autoset.__file__).read_text()
    assert not any(f'"{value}"' in init for value in OFF_VALUES)
    for path in (ROOT / "_rocm_hwq_autoset_gate.py",):
        gate = next(
            node for node in ast.walk(ast.parse(path.read_text()))
            if isinstance(node, ast.FunctionDef) and node.name == "may_be_launch"
        )  # fmt: skip
        tuples = [
            ast.literal_eval(node.comparators[0])
            for node in ast.walk(gate)
            if isinstance(node, ast.Compare) and isinstance(node.ops[0], ast.In)
            and isinstance(node.comparators[0], ast.Tuple)
        ]  # fmt: skip
        assert tuples == [OFF_VALUES], path.name
    for value in [*OFF_VALUES, *ON_VALUES, FORCE_VALUE, "bogus", "of"]:
        for spelled in (value, f" {value.upper()} ", f"\t{value.title()}"):
            environ = {SWITCH: spelled}
            opens = gate_module.may_be_launch(["x", "--job.config_file"], environ)
            assert opens is (switch(environ)[0] != _environ.OFF), spelled


@pytest.mark.parametrize(
    ("value", "mode"),
    [("", "on"), ("1", "on"), (" Yes ", "on"), ("AUTO", "on"), ("true", "on"),
     ("on", "on"), ("0", "off"), ("FALSE", "off"), (" off", "off"), ("no", "off"),
     ("force", "force"), (" Force ", "force"), ("disable", "invalid"),
     ("2", "invalid"), ("of", "invalid")],
)  # fmt: skip
def test_switch(value: str, mode: str) -> None:
    found, problem = switch({SWITCH: value})
    assert found == mode
    if mode == "invalid":
        assert problem is not None  # its words: tests/golden/lines/environ.txt
        assert problem.split()[0] == f"ROCM_HWQ_AUTOSET={value!r}"
    else:
        assert problem is None
    assert switch({}) == ("on", None)


@pytest.mark.parametrize(
    ("value", "on", "bad"),
    [(None, True, False), ("", True, False), ("auto", True, False),
     (" YES", True, False), ("0", False, False), ("off", False, False),
     ("force", False, True), ("maybe", False, True)],
)  # fmt: skip
def test_cache_switch(value: str | None, on: bool, bad: bool) -> None:
    environ = {} if value is None else {CACHE: value}
    found, problem = cache_switch(environ)
    assert found is on
    if bad:
        assert problem is not None
        assert problem.split()[0] == f"ROCM_HWQ_AUTOSET_CACHE={value!r}"
        assert problem.split()[-1] != "force"  # not among the cache's values
    else:
        assert problem is None


@pytest.mark.parametrize(
    ("value", "level", "bad"),
    [(None, "default", False), ("", "default", False), (" ", "default", False),
     ("quiet", "quiet", False), (" QUIET ", "quiet", False),
     ("Verbose", "verbose", False), ("debug", "default", True)],
)  # fmt: skip
def test_log_level(value: str | None, level: str, bad: bool) -> None:
    environ = {} if value is None else {LOG: value}
    found, problem = log_level(environ)
    assert found == level
    assert (problem is not None) is bad
    if bad:
        assert problem is not None
        assert problem.split()[0] == f"ROCM_HWQ_AUTOSET_LOG={value!r}"


@pytest.mark.parametrize(
    ("rank", "prints"),
    [(None, True), ("0", True), (" 0 ", True), ("3", False), ("1", False),
     ("00", True), ("+1", False), (" 1", False), ("01", False), ("-1", False),
     # as int() reads them: torch's device
     ("", True), ("x", True)],  # no rank torch reads: each says so (was silent)
)  # fmt: skip
def test_prints_for_node(rank: str | None, prints: bool) -> None:
    """As torch reads it (``int``): ``00`` is local rank 0, the node's one
    process, which checks the entries it takes (issue #36: it never did); a
    rank torch cannot read is refused before any evaluation, and each process
    says so (issue #37)."""
    environ = {} if rank is None else {"LOCAL_RANK": rank}
    assert prints_for_node(environ) is prints


#: Each launcher's local rank, as it names it (no LOCAL_RANK: no torchrun).
LAUNCHERS = {
    "srun": "SLURM_LOCALID", "mpirun (Open MPI)": "OMPI_COMM_WORLD_LOCAL_RANK",
    "MVAPICH2": "MV2_COMM_WORLD_LOCAL_RANK", "hydra (MPICH, Intel MPI)":
    "MPI_LOCALRANKID", "flux run": "FLUX_TASK_LOCAL_ID",
    "PALS mpiexec": "PALS_LOCAL_RANKID", "jsrun (LSF)": "JSM_NAMESPACE_LOCAL_RANK",
}  # fmt: skip


@pytest.mark.parametrize("launcher", sorted(LAUNCHERS))
def test_ranks_a_launcher_started_print_once_per_node(launcher: str) -> None:
    """Was: 4 ranks started by srun (SLURM_LOCALID 0-3, no LOCAL_RANK) or by
    mpirun printed 4 lines; the README says one per node."""
    name = LAUNCHERS[launcher]
    printed = [prints_for_node({name: str(rank), "RANK": str(rank + 4)})
               for rank in range(4)]  # fmt: skip
    assert printed == [True, False, False, False]
    assert local_rank({name: "2"}) == (name, "2")


def test_local_rank_is_torchruns_first_then_the_launchers_in_order() -> None:
    """torchrun under srun: its workers' LOCAL_RANK, not the SLURM_LOCALID
    they all inherit from the one srun task that started torchrun."""
    assert local_rank({"SLURM_LOCALID": "0", "LOCAL_RANK": "3"}) == ("LOCAL_RANK", "3")
    assert not prints_for_node({"SLURM_LOCALID": "0", "LOCAL_RANK": "3"})
    everything = {name: str(i + 1) for i, name in enumerate(LOCAL_RANKS)}
    for name in LOCAL_RANKS:
        assert local_rank(everything) == (name, everything[name])
        del everything[name]
    assert local_rank({}) is None and prints_for_node({"RANK": "5"})


@pytest.mark.parametrize(
    ("text", "value"),
    [("8", 8), (" 8 ", 8), ("08", 8), ("1", 1), ("0", None), ("-1", None),
     ("+8", None), ("8.0", None), ("", None), ("٨", None), ("8a", None)],
)  # fmt: skip
def test_positive_int(text: str, value: int | None) -> None:
    assert positive_int(text) == value


@pytest.mark.parametrize(
    ("raw", "found"),
    [(None, (None, None)), ("8", (8, None)), (" 16 ", (16, None)),
     ("0", (None, "'0' is not a positive integer")),
     ("eight", (None, "'eight' is not a positive integer")),
     ("", (None, "'' is not a positive integer"))],
)  # fmt: skip
def test_world_size(raw: str | None, found: tuple[int | None, str | None]) -> None:
    environ = {} if raw is None else {"WORLD_SIZE": raw}
    assert world_size(environ) == found


# GPU_MAX_HW_QUEUES as HIP reads it: C's atoi.

#: The issue's table: what HIP reads, and whether it is a queue count.
HIP_TABLE = [
    (" 8 ", 8, True), ("08", 8, True), ("8.0", 8, True), ("8abc", 8, True),
    ("+8", 8, True), ("\t\n8", 8, True), ("1", 1, True),
    ("abc", 0, False), ("0", 0, False), ("-1", -1, False), ("", 0, False),
    (" ", 0, False), ("- 8", 0, False), ("0x8", 0, False), ("\u00a08", 0, False),
    ("٨", 0, False), ("X8", 0, False),
]  # fmt: skip


@pytest.mark.parametrize(("text", "reads", "usable"), HIP_TABLE)
def test_what_hip_reads(text: str, reads: int, usable: bool) -> None:
    assert hip_reads(text) == reads
    setting = QueuesSetting({"GPU_MAX_HW_QUEUES": text})
    assert setting.hip == reads
    assert (setting.queues is not None) is usable


def _atoi(text: str) -> int:
    """C's own ``atoi`` (this process's libc), on the bytes HIP's ``getenv``
    would see."""
    libc = ctypes.CDLL(None)
    libc.atoi.argtypes = [ctypes.c_char_p]
    libc.atoi.restype = ctypes.c_int
    return int(libc.atoi(text.encode("utf-8", "surrogateescape")))


def _generated(count: int) -> list[str]:
    """Strings made of the pieces ``atoi`` reads and stops at: blanks, signs,
    digits (at most 9, inside C's ``int``), letters, dots, non-ASCII."""
    pieces = [" ", "\t", "\n", "\v", "\f", "\r", "+", "-", "0", "1", "7", "9",
              "12", "8", ".", "a", "x", "e", "٨", "\u00a0", "é", "_"]  # fmt: skip
    rng = random.Random(4032)
    out = []
    while len(out) < count:
        text = "".join(rng.choice(pieces) for _ in range(rng.randint(0, 7)))
        digits = re.findall(r"\d+", text)
        if all(len(d) <= 9 for d in digits):
            out.append(text)
    return out


def test_hip_reads_as_cs_atoi() -> None:
    """A few hundred generated strings, and the table: the same as libc's."""
    cases = [text for text, _, _ in HIP_TABLE] + _generated(400)
    for text in cases:
        assert hip_reads(text) == _atoi(text), repr(text)


@pytest.mark.parametrize("text", ["2147483647", "-2147483648", "  +0002147483647"])
def test_the_ends_of_cs_int(text: str) -> None:
    assert hip_reads(text) == _atoi(text) == int(text)


@pytest.mark.parametrize("text", ["2147483648", "-2147483649", "99999999999999999"])
def test_beyond_cs_int_is_no_reading(text: str) -> None:
    """``atoi`` is undefined there: no value, and said so."""
    assert hip_reads(text) is None
    setting = QueuesSetting({"GPU_MAX_HW_QUEUES": text})
    assert setting.queues is None
    assert (setting.hip, setting.problem is None) == (None, False)
    assert str(setting.problem).split()[0] == f"GPU_MAX_HW_QUEUES={text!r}:"


# DEBUG_HIP_IGNORE_STREAM_PRIORITY as HIP reads a bool flag: "true", or atoi.


def _hip_flag(text: str) -> bool:
    """ROCclr's ``Flag::setValue`` for a bool, in this process's libc:
    ``strcmp(value, "true") == 0 || atoi(value) != 0``, on the value
    ``Flag::init`` hands it (an empty one as ``" "``)."""
    libc = ctypes.CDLL(None)
    libc.strcmp.argtypes = [ctypes.c_char_p, ctypes.c_char_p]
    libc.strcmp.restype = ctypes.c_int
    value = (text or " ").encode("utf-8", "surrogateescape")
    return libc.strcmp(value, b"true") == 0 or _atoi(text or " ") != 0


def test_hip_reads_a_bool_flag_as_clr_does() -> None:
    """The pieces atoi reads, and the words a user might write."""
    words = ["true", "false", "TRUE", "True", " true", "true ", "yes", "no", "on",
             "off", "y", "t", "truex", "1true", "true1", ""]  # fmt: skip
    for text in words + [text for text, _, _ in HIP_TABLE] + _generated(300):
        assert hip_reads_flag(text) is _hip_flag(text), repr(text)


@pytest.mark.parametrize("text", ["2147483648", "-2147483649"])
def test_a_flag_beyond_cs_int_is_no_reading(text: str) -> None:
    assert hip_reads_flag(text) is None
    value, problem = ignore_priority({"DEBUG_HIP_IGNORE_STREAM_PRIORITY": text})
    assert value is None and problem is not None
    assert problem.split()[0] == f"DEBUG_HIP_IGNORE_STREAM_PRIORITY={text!r}"


@pytest.mark.parametrize(
    ("text", "read", "plain"),
    [
        (None, None, True), ("1", True, True), ("true", True, True),
        ("\t-3 ", True, True), ("0", False, True), ("false", False, True),
        ("\vfalse\r", False, True), ("007", True, True), ("yes", False, False),
        ("TRUE", False, False), ("", False, False), ("1abc", True, False),
        ("- 1", False, False), ("\u00a01", False, False), ("٣", False, False),
        ("+-1", False, False),
    ],
)  # fmt: skip
def test_ignore_priority(text: str | None, read: bool | None, plain: bool) -> None:
    """A value HIP reads as anyone reads it says nothing more; any other is
    named, with what HIP reads and how it reads."""
    environ = {} if text is None else {"DEBUG_HIP_IGNORE_STREAM_PRIORITY": text}
    value, problem = ignore_priority(environ)
    assert value is read
    if plain:
        assert problem is None
    else:
        assert problem is not None  # said how HIP reads it: what it read
        word = "true" if read else "false"
        assert problem.startswith(f"DEBUG_HIP_IGNORE_STREAM_PRIORITY={text!r}: HIP")
        assert problem.split(": ")[1] == f"HIP reads {word}"


@pytest.mark.parametrize(
    ("environ", "who", "explicit", "queues", "described"),
    [
        ({}, "nobody", None, 4, "unset (HIP's default: 4)"),
        ({"GPU_MAX_HW_QUEUES": ""}, "nobody", None, None, "'' (HIP reads 0): empty"),
        ({"GPU_MAX_HW_QUEUES": "8"}, "user", "8", 8,
         "8, set explicitly: it always wins"),
        ({"GPU_MAX_HW_QUEUES": "8.0"}, "user", "8.0", 8,
         "'8.0' (HIP reads 8), set explicitly: it always wins"),
        ({"GPU_MAX_HW_QUEUES": "abc"}, "user", "abc", None,
         "'abc' (HIP reads 0), set explicitly: not a queue count HIP can use"),
        ({"GPU_MAX_HW_QUEUES": "8", "ROCM_HWQ_AUTOSET_ORIGIN": "8 --module"},
         "rocm-hwq-autoset", None, 8, "8, set by rocm-hwq-autoset (--module)"),
        ({"GPU_MAX_HW_QUEUES": "8",
          "ROCM_HWQ_AUTOSET_ORIGIN": "8 job.config_file"},
         "rocm-hwq-autoset", None, 8,
         "8, set by rocm-hwq-autoset (job.config_file)"),
        # A failed launcher's marker, no value: nobody's, and no form.
        ({"ROCM_HWQ_AUTOSET_ORIGIN": "unset --module"}, "nobody", None, 4,
         "unset (HIP's default: 4)"),
        # A marker for another value: the user changed it since.
        ({"GPU_MAX_HW_QUEUES": "4", "ROCM_HWQ_AUTOSET_ORIGIN": "8 --module"},
         "user", "4", 4, "4, set explicitly: it always wins"),
    ],
)  # fmt: skip
def test_queues_setting(
    environ: dict[str, str], who: str, explicit: str | None,
    queues: int | None, described: str,
) -> None:  # fmt: skip
    setting = QueuesSetting(environ)
    assert (setting.who, setting.explicit, setting.queues) == (who, explicit, queues)
    assert setting.describe() == described
    marked = environ.get("ROCM_HWQ_AUTOSET_ORIGIN", "").partition(" ")[2]
    assert setting.form == (marked if who == "rocm-hwq-autoset" else None)
    assert (setting.problem is None) is (queues is not None)


@pytest.mark.parametrize(
    ("raw", "seconds"),
    [("", 120.0), (" ", 120.0), ("0.5", 0.5), ("30", 30.0), ("1e3", 1000.0),
     ("86400", 86400.0), ("0", None), ("-1", None), ("inf", None), ("nan", None),
     ("soon", None), ("86400.5", None), ("1e10", None)],
)  # fmt: skip
def test_the_timeout(raw: str, seconds: float | None) -> None:
    environ = {"ROCM_HWQ_AUTOSET_TIMEOUT": raw}
    if seconds is not None:
        assert _environ.timeout(environ) == (seconds, None)
        return
    value, problem = _environ.timeout(environ)
    assert value == 120.0 and problem is not None
    assert problem.split()[0] == f"ROCM_HWQ_AUTOSET_TIMEOUT={raw!r}"
    assert "(120 s)" in problem  # the default it uses, named


@pytest.mark.parametrize(
    ("environ", "found"),
    [
        ({"GPU_MAX_HW_QUEUES": "8", "ROCM_HWQ_AUTOSET_ORIGIN": "8 --module"},
         ("8", "--module")),
        ({"GPU_MAX_HW_QUEUES": "8", "ROCM_HWQ_AUTOSET_ORIGIN": "8 job.config_file"},
         ("8", "job.config_file")),
        ({"ROCM_HWQ_AUTOSET_ORIGIN": "unset --module"}, ("unset", "--module")),
        ({"GPU_MAX_HW_QUEUES": "", "ROCM_HWQ_AUTOSET_ORIGIN": "unset job.config_file"},
         ("unset", "job.config_file")),
        ({"GPU_MAX_HW_QUEUES": "4", "ROCM_HWQ_AUTOSET_ORIGIN": "8 --module"}, None),
        ({"GPU_MAX_HW_QUEUES": "4", "ROCM_HWQ_AUTOSET_ORIGIN": "unset --module"}, None),
        ({"ROCM_HWQ_AUTOSET_ORIGIN": " --module"}, None),  # no value: not ours
        ({"GPU_MAX_HW_QUEUES": "", "ROCM_HWQ_AUTOSET_ORIGIN": " --module"}, None),
        ({"GPU_MAX_HW_QUEUES": "8", "ROCM_HWQ_AUTOSET_ORIGIN": "8 --other"}, None),
        ({"GPU_MAX_HW_QUEUES": "8"}, None),
        # Ours is "<Q> <form>": a marker of more words is not ours.
        ({"GPU_MAX_HW_QUEUES": "8 x", "ROCM_HWQ_AUTOSET_ORIGIN": "8 x --module"}, None),
    ],
)  # fmt: skip
def test_the_marker_names_our_value_or_nothing(
    environ: dict[str, str], found: tuple[str, str] | None
) -> None:
    assert _environ.marker(environ) == found

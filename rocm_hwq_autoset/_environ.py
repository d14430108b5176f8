"""The environment's vocabulary: every variable the package reads or writes,
the values each may take, and how each is read.

One home for each: the hook, the cache and the commands import from here. It
imports nothing of the package (nor anything else), so that any layer can. The
start-up gate (``_rocm_hwq_autoset_gate``, beside the package, which the ``.pth``
line imports) and its copy in ``__init__`` test the switch's off values before
importing anything of the package; they keep literal copies, which
``tests/unit/test_environ.py`` holds to :data:`OFF_VALUES`.

A reader returns the value and, for a value it cannot read, what is wrong with
it (``None`` when all is well): a whole warning naming the variable, or, for
the numbers (:func:`world_size`, :func:`timeout`), the reason alone, which the
caller names after the variable (``ConfigError(reason, WORLD_SIZE)``). What to
do then is the caller's choice.
"""

TYPE_CHECKING = False  # not typing's: start-up imports as little as it can
if TYPE_CHECKING:
    from collections.abc import Mapping

#: The package's name as it shows itself: its distribution (``pip list``), its
#: command, the prefix of its lines, its cache's folder, who set a value it set.
NAME = "rocm-hwq-autoset"
#: Its start-up files in a site-packages folder: the ``.pth`` line, and Python
#: 3.15's entry point (PEP 829).
PTH = "rocm_hwq_autoset.pth"
START = "rocm_hwq_autoset.start"

# HIP's own variable.

#: HIP's flag: the hardware queues per device and stream priority.
QUEUES = "GPU_MAX_HW_QUEUES"
#: CLR's default when the flag is unset (``release(uint, GPU_MAX_HW_QUEUES, 4, ...)``).
HIP_DEFAULT_QUEUES = 4
#: HIP's bool flag (``release(bool, DEBUG_HIP_IGNORE_STREAM_PRIORITY, ...)``):
#: true puts the streams of every priority in the normal pool, so a device has
#: one pool of Q queues. Its default became true with ROCm/rocm-systems#8485
#: (merged 2026-07-13); a HIP older than the flag ignores it. Read by ``verify``
#: only, to judge a trace by the pools the job's HIP had (``_pools.choose``).
IGNORE_PRIORITY = "DEBUG_HIP_IGNORE_STREAM_PRIORITY"

# The switch.

#: ``0/false/off/no`` opt out, ``force`` skips ROCm detection, and the rest of
#: :data:`ON_VALUES` leave it on (any case, blanks ignored). Anything else is
#: refused with a warning, and the hook does nothing: a value it cannot read
#: never turns it on.
SWITCH = "ROCM_HWQ_AUTOSET"
OFF_VALUES = ("0", "false", "off", "no")
ON_VALUES = ("", "1", "on", "true", "yes", "auto")
FORCE_VALUE = "force"
OFF, ON, FORCE, INVALID = "off", "on", "force", "invalid"
_ON_OFF = "1/on/true/yes/auto (on), 0/off/false/no (off)"

#: The cache of ``--module`` evaluations: on or off, with the switch's values
#: (``force`` means nothing here).
CACHE = "ROCM_HWQ_AUTOSET_CACHE"
#: Where the cache lives, before ``$XDG_CACHE_HOME/rocm-hwq-autoset`` and
#: ``~/.cache/rocm-hwq-autoset``.
CACHE_DIR = "ROCM_HWQ_AUTOSET_CACHE_DIR"

#: ``quiet``: print nothing. ``verbose``: every rank prints, and says why it did
#: nothing. Unset or empty: one line per node (the launcher or ``LOCAL_RANK`` 0).
LOG = "ROCM_HWQ_AUTOSET_LOG"
QUIET, VERBOSE, DEFAULT_LOG = "quiet", "verbose", "default"

#: Seconds the ``--module``/``--config`` evaluation may take: importing torch and
#: torchtitan takes 6-10 s on a busy 2-core machine; 120 s leaves room for a slow
#: shared file system without letting a hung import hold a launch for long.
TIMEOUT = "ROCM_HWQ_AUTOSET_TIMEOUT"
DEFAULT_TIMEOUT = 120.0
#: The longest allowed: a day is past any evaluation, and ten of them (a
#: check's) stay within the system's own timers (``poll`` takes milliseconds
#: in a C ``int``: 24 days).
MAX_TIMEOUT = 86400.0

# What the package writes beside the value.

#: ``"<Q> <form>"`` beside ``GPU_MAX_HW_QUEUES``: a value this package set (here
#: or in a parent such as the torchrun launcher) is not explicit. A launcher
#: whose evaluation failed sets ``"unset <form>"``, so that its workers neither
#: evaluate again nor warn again.
ORIGIN = "ROCM_HWQ_AUTOSET_ORIGIN"
#: The two launch forms, by the flag that makes each, as the marker names them:
#: a TOML job config (torchtitan until early 2026), or torchtitan >= 0.3.0's
#: config registry (``--module M --config FN``).
TOML_FORM, MODULE_FORM = "job.config_file", "--module"
#: The origin ``explain --export`` gives its value: the package's own, so
#: that a later export or launch decides again (not an explicit value it keeps).
EXPORTED = "explain --export"
FORMS = (TOML_FORM, MODULE_FORM)
#: Who a marker may name: a launch form, or an export.
ORIGINS = (*FORMS, EXPORTED)
UNSET = "unset"
#: Set beside it by a ``--module`` launcher: the model's inputs, from which a
#: worker that knows ``WORLD_SIZE`` applies the model itself.
INPUTS = "ROCM_HWQ_AUTOSET_INPUTS"

# What launchers set.

#: torchrun's, srun's and mpirun's ranks have it; torchrun's launcher has not.
WORLD_SIZE = "WORLD_SIZE"
#: torchrun's workers have it; its launcher has not.
LOCAL_RANK = "LOCAL_RANK"
#: Each launcher's own name for a process's rank on its node, read where
#: ``LOCAL_RANK`` is unset (ranks started by the launcher, no torchrun), in
#: this order: Slurm's srun (``SLURM_LOCALID``), Open MPI's mpirun, MVAPICH2,
#: MPICH's and Intel MPI's hydra, Flux, HPE PALS (PBS Pro's mpiexec), LSF's
#: jsrun. (PMIx gives its local rank through ``PMIx_Get``, not a variable.)
LOCAL_RANKS = (
    "SLURM_LOCALID", "OMPI_COMM_WORLD_LOCAL_RANK", "MV2_COMM_WORLD_LOCAL_RANK",
    "MPI_LOCALRANKID", "FLUX_TASK_LOCAL_ID", "PALS_LOCAL_RANKID",
    "JSM_NAMESPACE_LOCAL_RANK",
)  # fmt: skip


def switch(environ: "Mapping[str, str]") -> "tuple[str, str | None]":
    """:data:`ON`, :data:`OFF`, :data:`FORCE` or :data:`INVALID`, and the
    warning for an invalid value."""
    value = environ.get(SWITCH, "").strip().lower()
    if value in OFF_VALUES:
        return OFF, None
    if value in ON_VALUES:
        return ON, None
    if value == FORCE_VALUE:
        return FORCE, None
    return INVALID, f"{SWITCH}={environ[SWITCH]!r} is not {_ON_OFF} or force"


def cache_switch(environ: "Mapping[str, str]") -> "tuple[bool, str | None]":
    """Whether the cache is on, and the warning for a value that is no switch
    value (the cache is off then)."""
    value = environ.get(CACHE, "").strip().lower()
    if value in ON_VALUES:
        return True, None
    if value in OFF_VALUES:
        return False, None
    return False, f"{CACHE}={environ[CACHE]!r} is not {_ON_OFF}"


def log_level(environ: "Mapping[str, str]") -> "tuple[str, str | None]":
    """:data:`QUIET`, :data:`VERBOSE` or :data:`DEFAULT_LOG`, and a warning for a
    value that is none of them (the default is used then)."""
    value = environ.get(LOG, "").strip().lower()
    if not value:
        return DEFAULT_LOG, None
    if value in (QUIET, VERBOSE):
        return value, None
    return DEFAULT_LOG, (
        f"{LOG}={environ[LOG]!r} is not quiet or verbose;"
        " using the default (one line per node)"
    )


def local_rank(environ: "Mapping[str, str]") -> "tuple[str, str] | None":
    """The variable that gives this process's rank on its node, and its value:
    ``LOCAL_RANK``, else the first of :data:`LOCAL_RANKS` set; None for a
    process that has none (a launcher, a process of its own)."""
    for name in (LOCAL_RANK, *LOCAL_RANKS):
        value = environ.get(name)
        if value is not None:
            return name, value
    return None


def prints_for_node(environ: "Mapping[str, str]") -> bool:
    """Whether this process prints by default: once per node (a process with
    no local rank, such as torchrun's launcher, or local rank 0), and a process
    whose local rank cannot be read (each would otherwise stay silent: an empty
    ``LOCAL_RANK`` is no rank 0)."""
    found = local_rank(environ)
    return found is None or _int(found[1]) in (0, None)


def local_rank_problem(environ: "Mapping[str, str]") -> "str | None":
    """What is wrong with ``LOCAL_RANK`` as torchtitan reads it, or None:
    ``int(os.environ["LOCAL_RANK"])`` for the device, which refuses an empty
    value or a word, so that the job fails at its start."""
    value = environ.get(LOCAL_RANK)
    if value is None or _int(value) is not None:
        return None
    return (
        f"{value!r} is not an integer: torchtitan reads it with int(), which"
        " refuses it, so the job fails at its start"
    )


def _int(text: str) -> "int | None":
    """``text`` as Python's ``int()`` reads it (torch's and torchtitan's
    reading of a rank), else None."""
    try:
        return int(text)
    except ValueError:
        return None


def positive_int(text: str) -> "int | None":
    """``text`` as a positive decimal integer (blanks around it allowed), else
    None: how the package reads the numbers it is given."""
    text = text.strip()
    if not text.isdigit() or not text.isascii():
        return None
    value = int(text)
    return value if value > 0 else None


def world_size(environ: "Mapping[str, str]") -> "tuple[int | None, str | None]":
    """``WORLD_SIZE`` (None where unset: torchrun's launcher), and the problem
    with a value that is no positive integer."""
    raw = environ.get(WORLD_SIZE)
    if raw is None:
        return None, None
    size = positive_int(raw)
    if size is None:
        return None, f"{raw!r} is not a positive integer"
    return size, None


def timeout(environ: "Mapping[str, str]") -> "tuple[float, str | None]":
    """Seconds for the ``--module``/``--config`` evaluation, and the problem with
    a value that is no positive number up to :data:`MAX_TIMEOUT` (the default
    is used then)."""
    raw = environ.get(TIMEOUT, "")
    if not raw.strip():
        return DEFAULT_TIMEOUT, None
    try:
        value = float(raw)
    except ValueError:
        value = 0.0
    if not 0 < value <= MAX_TIMEOUT:
        return DEFAULT_TIMEOUT, (
            f"{TIMEOUT}={raw!r} is not a positive number of seconds up to"
            f" {MAX_TIMEOUT:g}; using the default ({DEFAULT_TIMEOUT:g} s)"
        )
    return value, None


# GPU_MAX_HW_QUEUES as it is set, and as HIP reads it.

#: The largest value C's ``int`` holds: ``atoi`` of anything beyond is undefined.
_INT_MAX = 2**31 - 1


def hip_reads(text: str) -> "int | None":
    """A set ``GPU_MAX_HW_QUEUES`` as HIP reads it: ROCclr's ``Flag::setValue``
    parses an unsigned flag with C's ``atoi`` (``rocclr/utils/flags.cpp``):
    leading blanks skipped, a sign, digits up to the first non-digit, no digit
    0; an empty value is stored as ``" "``, so 0 too. None where ``atoi`` is
    undefined (beyond C's ``int``)."""
    i = 0
    while i < len(text) and text[i] in " \t\n\v\f\r":
        i += 1
    sign = 1
    if i < len(text) and text[i] in "+-":
        sign = -1 if text[i] == "-" else 1
        i += 1
    j = i
    while j < len(text) and "0" <= text[j] <= "9":
        j += 1
    value = sign * int(text[i:j]) if j > i else 0
    return value if -_INT_MAX - 1 <= value <= _INT_MAX else None


#: What C's ``atoi`` skips before a number (``isspace`` in the C locale).
_C_BLANKS = " \t\n\v\f\r"


def hip_reads_flag(text: str) -> "bool | None":
    """A set bool flag as HIP reads it: ROCclr's ``Flag::setValue`` takes
    ``strcmp(value, "true") == 0 || atoi(value) != 0`` (``rocclr/utils/flags.cpp``):
    exactly ``true``, or a number ``atoi`` reads as nonzero (``1``, `` 2``,
    ``-1``, ``1abc``); anything else is false (``false``, ``yes``, ``TRUE``,
    `` true``, an empty value, which ``Flag::init`` stores as ``" "``). None
    where ``atoi`` is undefined (beyond C's ``int``)."""
    if text == "true":
        return True
    value = hip_reads(text)
    return None if value is None else value != 0


def _plain_flag(text: str) -> bool:
    """Whether HIP reads ``text`` as it reads to anyone: ``true``, ``false`` or
    a whole number (blanks around it allowed)."""
    word = text.strip(_C_BLANKS)
    digits = word[1:] if word[:1] in ("+", "-") else word
    return text == "true" or word == "false" or (digits.isdigit() and digits.isascii())


def ignore_priority(environ: "Mapping[str, str]") -> "tuple[bool | None, str | None]":
    """``DEBUG_HIP_IGNORE_STREAM_PRIORITY`` as HIP reads it (None where unset,
    or where what HIP reads is undefined), and the problem with a value that
    HIP reads otherwise than it reads (``yes``, ``TRUE``, empty: false), or not
    at all: a warning naming the variable, without what the caller does."""
    text = environ.get(IGNORE_PRIORITY)
    if text is None:
        return None, None
    value = hip_reads_flag(text)
    if value is None:
        return None, (
            f"{IGNORE_PRIORITY}={text!r} is a number beyond C's int: what HIP"
            " reads there is undefined"
        )
    if _plain_flag(text):
        return value, None
    return value, (
        f"{IGNORE_PRIORITY}={text!r}: HIP reads {'true' if value else 'false'}:"
        ' it takes "true" or a number, nonzero as true, and anything else as false'
    )


def marker(environ: "Mapping[str, str]") -> "tuple[str, str] | None":
    """``(value, form)`` of ``ROCM_HWQ_AUTOSET_ORIGIN`` when it describes the
    current ``GPU_MAX_HW_QUEUES`` (the same value, or ``unset`` with none set)."""
    value, _, marked = environ.get(ORIGIN, "").partition(" ")
    if marked not in ORIGINS:
        return None
    current = environ.get(QUEUES) or UNSET  # unset or empty: not one of ours
    return (value, marked) if value == current else None


#: Who set ``GPU_MAX_HW_QUEUES``: nobody (unset, or empty: the hook replaces an
#: empty value, which HIP would read as 0), this package, or the user.
NOBODY, PACKAGE, USER = "nobody", NAME, "user"


class QueuesSetting:
    """``GPU_MAX_HW_QUEUES`` in an environment: who set it, its text, and what
    HIP reads. One reading for the hook, ``explain``, ``doctor`` and ``verify``."""

    __slots__ = ("form", "hip", "text", "who")

    def __init__(self, environ: "Mapping[str, str]") -> None:
        text = environ.get(QUEUES)
        self.text = text
        """The value as set, or None."""
        marked = marker(environ) if text else None
        self.who = NOBODY if not text else PACKAGE if marked else USER
        self.form = marked[1] if marked else None
        """For a value of this package's, the launch form it came from."""
        self.hip = None if text is None else hip_reads(text)
        """What HIP reads: None where unset (or beyond C's ``int``)."""

    @property
    def explicit(self) -> "str | None":
        """The text of a value someone else set, which always wins; else None."""
        return self.text if self.who == USER else None

    @property
    def queues(self) -> "int | None":
        """The queues HIP uses: what it reads, or its default when unset; None
        when that is no queue count."""
        if self.text is None:
            return HIP_DEFAULT_QUEUES
        return self.hip if self.hip is not None and self.hip >= 1 else None

    @property
    def reading(self) -> str:
        """The value, with what HIP reads where that differs from its text:
        ``8``, ``'8.0' (HIP reads 8)``, ``unset (HIP's default: 4)``."""
        if self.text is None:
            return f"unset (HIP's default: {HIP_DEFAULT_QUEUES})"
        if self.hip is not None and self.text == str(self.hip):
            return self.text
        return f"{self.text!r} (HIP reads {self._reads})"

    @property
    def _reads(self) -> str:
        return "beyond C's int" if self.hip is None else str(self.hip)

    @property
    def problem(self) -> "str | None":
        """Why HIP cannot use the value as a queue count, or None."""
        if self.queues is not None:
            return None
        return f"{QUEUES}={self.text!r}: HIP reads {self._reads}, not a queue count"

    def describe(self) -> str:
        """Who set it and what HIP makes of it, in the words every command
        prints."""
        if self.who == PACKAGE:
            return f"{self.reading}, set by {NAME} ({self.form})"
        if self.who == NOBODY:
            return self.reading if self.text is None else f"{self.reading}: empty"
        if self.queues is None:
            return f"{self.reading}, set explicitly: not a queue count HIP can use"
        return f"{self.reading}, set explicitly: it always wins"

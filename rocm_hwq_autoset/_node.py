"""A node's view, read from outside: the processes that use a GPU through HIP
or are a torchtitan launch, each with the ``GPU_MAX_HW_QUEUES`` it started
with, whether HIP has started in it, and its hardware queues per GPU.

Everything is read, nothing written or evaluated, from two roots a test can
point elsewhere: ``/proc`` (a process's command line, start environment,
parent, descriptors) and KFD's sysfs (``/sys/class/kfd/kfd``: one folder per
process that opened ``/dev/kfd``, named by the host's pid, holding one folder
per hardware queue with its ``gpuid`` and ``type``, Linux >= 5.7; its
``topology/nodes/*/gpu_id`` map queue ids to GPUs). :func:`read_node` reads;
:func:`setting_of` and :func:`verdict` decide, as values; ``_cli/status``
prints. What cannot be read or matched is said as a line (:attr:`Node.notes`,
:attr:`Proc.notes`), never guessed.
"""

from __future__ import annotations

import os

from ._argv import Launch, find_launch
from ._config import ConfigError, read_up_to
from ._decision import decide
from ._environ import (
    HIP_DEFAULT_QUEUES,
    MODULE_FORM,
    NAME,
    NOBODY,
    OFF,
    PACKAGE,
    PTH,
    QUEUES,
    START,
    SWITCH,
    UNSET,
    WORLD_SIZE,
    QueuesSetting,
    marker,
    switch,
)

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable
    from typing import Any

PROC = "/proc"
KFD_SYSFS = "/sys/class/kfd/kfd"
#: The device HIP's runtime holds open once started (``_rocm.KFD``'s twin,
#: here a parameter: a test lays out its own).
KFD_DEVICE = "/dev/kfd"
#: KFD's queue types (``type`` in a queue's folder): 0 compute, 1 SDMA (copy).
#: Other numbers moved in a 2025 kernel; only 0 is counted as compute.
COMPUTE, SDMA = 0, 1
#: Most bytes read of a process's command line or environment: the kernel's
#: own bound for both together is ``ARG_MAX`` (a quarter of the stack limit,
#: 2 MiB with the usual 8 MiB); a longer one is said, not read.
MAX_PROC_BYTES = 4 << 20
#: Most bytes of a sysfs value (``gpuid``, ``type``, ``gpu_id``): a number.
MAX_SYSFS_BYTES = 64
#: The substrings that make a command line worth parsing as a launch: the
#: gate's own filter (``--job.config_file``, ``--module``).
LAUNCH_WORDS = (b"--job.config", b"--module")


class Proc:
    """One process as read from ``/proc``: its command line, the environment
    it started with (None: not readable), its parent, the launch its command
    line makes (``_argv.find_launch``), whether it holds ``/dev/kfd`` (None:
    cannot tell), its hardware queues (GPU label → ``[compute, other]``; None:
    no KFD folder matched), and the parent's start value of
    ``GPU_MAX_HW_QUEUES`` (for who set its own)."""

    __slots__ = ("environ", "hip", "hook", "launch", "notes", "parent_value",
                 "pid", "ppid", "queues", "words")  # fmt: skip

    def __init__(self, pid: int, words: list[str]) -> None:
        self.pid = pid
        self.words = words
        self.ppid: int | None = None
        self.environ: dict[str, str] | None = None
        self.launch: Launch | None = None
        self.hip: bool | None = None
        self.queues: dict[str, list[int]] | None = None
        self.parent_value: str | bool | None = False
        """The parent's start value (None: unset there); False: not read."""
        self.hook: str | None = None
        """Where a launch's interpreter has this package's start-up file, if
        found (looked for only where the value is not in its environment)."""
        self.notes: list[str] = []


class Node:
    """What :func:`read_node` found: the processes (by pid), the GPUs (KFD
    ``gpu_id`` → label), and the lines that say what could not be read or
    matched."""

    __slots__ = ("gpus", "notes", "processes", "unshown")

    def __init__(self) -> None:
        self.processes: dict[int, Proc] = {}
        self.gpus: dict[int, str] = {}
        self.notes: list[str] = []
        self.unshown: dict[int, str] = {}
        """Why a process is not shown, by pid (its line is in the notes too)."""


def python_argv(words: list[str]) -> list[str] | None:
    """``sys.argv`` of a Python process whose command line is ``words``, as
    CPython sets it at start-up (``["-m", ARGS...]``, ``["-c", ...]``,
    ``[SCRIPT, ...]``); None where ``words`` runs no Python program (not an
    interpreter, or an interactive one). A console script (``torchrun``) runs
    as ``python SCRIPT``: the kernel puts its ``#!`` interpreter first."""
    if not words or not _is_python(words[0]):
        return None
    i = 1
    while i < len(words):
        word = words[i]
        if word == "-" or not word.startswith("-"):
            return words[i:]
        if word == "--":
            return words[i + 1 :] or None
        if word.startswith("--"):  # --check-hash-based-pycs MODE, else no value
            i += 2 if word == "--check-hash-based-pycs" else 1
            continue
        for at in range(1, len(word)):  # a cluster: -Im, -Wd, -Xdev, -uc
            letter, rest = word[at], word[at + 1 :]
            if letter in "cm":  # the value ends the interpreter's options
                after = words[i + 1 :] if rest else words[i + 2 :]
                return [f"-{letter}", *after]
            if letter in "WX":
                i += 0 if rest else 1  # its value is the rest, or the next word
                break
        i += 1
    return None


def _is_python(path: str) -> bool:
    """An interpreter's name: ``python``, ``python3``, ``python3.12``,
    ``python3.13t`` (a free-threaded build)."""
    name = os.path.basename(path)
    tail = name[len("python") :].rstrip("dmt")
    return name.startswith("python") and all(c.isdigit() or c == "." for c in tail)


def launch_of(words: list[str]) -> Launch | None:
    """The torchtitan launch a process with this command line makes, as the
    hook finds it in that process (``_argv.find_launch``); None for none (a
    command line it would refuse is no launch either)."""
    argv = python_argv(words)
    if argv is None:
        return None
    try:
        return find_launch(argv, words)
    except ConfigError:
        return None


def read_node(
    proc: str = PROC,
    kfd: str = KFD_SYSFS,
    device: str = KFD_DEVICE,
    pids: Iterable[int] | None = None,
) -> Node:
    """The processes of ``proc`` that use a GPU through HIP (a KFD folder, or
    ``device`` among their descriptors) or make a torchtitan launch, or the
    ``pids`` given; what cannot be read is a note. Raises ``OSError`` only
    where ``proc`` itself cannot be listed."""
    node = Node()
    node.gpus = _topology(kfd, node.notes)
    folders = _kfd_folders(kfd, node)
    try:
        identity: tuple[int, int] | None = _identity(os.stat(device))
    except OSError:
        identity = None
    wanted = None if pids is None else set(pids)
    names = sorted(int(n) for n in os.listdir(proc) if n.isdigit())
    for pid in names if wanted is None else sorted(wanted):
        found = _read_process(proc, pid, identity, folders, wanted, node)
        if found is not None:
            node.processes[pid] = found
    for pid, found in node.processes.items():
        if folders is not None and pid in folders:
            found.queues = _queues(os.path.join(kfd, "proc", str(pid)), found, node)
        setting = QueuesSetting(found.environ or {})
        if setting.explicit is not None:
            found.parent_value = _parent_value(proc, found.ppid)
        elif setting.text is None and found.launch is not None:
            found.hook = _hook_beside(found.words)
    if folders is not None:
        for pid in sorted(folders - set(names)):
            node.notes.append(
                f"{kfd}/proc/{pid}: a queue folder of no process here (it ended,"
                " or runs in another pid namespace): not shown"
            )
    return node


def _kfd_folders(kfd: str, node: Node) -> set[int] | None:
    """The pids KFD has a folder for, where they can be matched to this
    ``/proc``'s; None where there is no KFD sysfs, or this process runs in a
    pid namespace of its own (KFD names folders by the host's pids)."""
    try:
        names = os.listdir(os.path.join(kfd, "proc"))
    except OSError as exc:
        node.notes.append(
            f"{kfd}/proc: {exc.strerror}: hardware queues cannot be shown"
            " (KFD's sysfs needs Linux >= 5.7 and the amdgpu driver)"
        )
        return None
    nested = _own_pid_namespaces()
    if nested > 1:
        node.notes.append(
            f"this process runs in a pid namespace of its own ({nested} levels):"
            f" {kfd}/proc names queue folders by the host's pids, which cannot be"
            " matched to the processes seen here; hardware queues not shown"
        )
        return None
    return {int(n) for n in names if n.isdigit()}


def _own_pid_namespaces() -> int:
    """How many pid namespaces this process is seen in (``NSpid``: 1 on the
    host's; more inside a container's)."""
    try:
        with open("/proc/self/status", "rb") as f:
            for line in f:
                if line.startswith(b"NSpid:"):
                    return len(line.split()) - 1
    except OSError:
        pass
    return 1


def _topology(kfd: str, notes: list[str]) -> dict[int, str]:
    """KFD's GPU ids, each with its label: ``GPU <n>``, n counting the
    topology's GPU nodes (``gpu_id`` not 0) in node order, as HIP numbers the
    devices it sees when all are visible."""
    root = os.path.join(kfd, "topology", "nodes")
    try:
        nodes = sorted(int(n) for n in os.listdir(root) if n.isdigit())
    except OSError:
        return {}
    gpus: dict[int, str] = {}
    for number in nodes:
        path = os.path.join(root, str(number), "gpu_id")
        value = _number(path, notes, "its GPU is not named")
        if value:  # 0: a CPU node
            gpus[value] = f"GPU {len(gpus)}"
    return gpus


def _read_process(
    proc: str,
    pid: int,
    identity: tuple[int, int] | None,
    folders: set[int] | None,
    wanted: set[int] | None,
    node: Node,
) -> Proc | None:
    """One process, if it is one to show (or asked for by pid) and can be
    read; a process that ended meanwhile is none."""
    base = os.path.join(proc, str(pid))
    try:
        raw = _read(os.path.join(base, "cmdline"))
    except FileNotFoundError:
        if wanted is not None:
            _unshown(node, pid, f"pid {pid}: no such process")
        return None
    except (OSError, ValueError) as exc:
        why = getattr(exc, "strerror", None) or str(exc)
        _unshown(node, pid, f"pid {pid}: its command line cannot be read ({why})")
        return None
    words = [os.fsdecode(w) for w in raw.split(b"\0")[:-1]] if raw else []
    found = Proc(pid, words)
    if any(word in raw for word in LAUNCH_WORDS):
        found.launch = launch_of(words)
    in_kfd = folders is not None and pid in folders
    if found.launch is None and not in_kfd and wanted is None:
        # Neither a launch nor in KFD's folders, which name every process that
        # opened the device: looked for among its descriptors only where those
        # folders cannot tell (no KFD sysfs, another pid namespace).
        if identity is None or folders is not None:
            return None
        found.hip = _holds(base, identity)
        if not found.hip:
            return None
    else:
        found.hip = in_kfd if identity is None else _holds(base, identity)
    try:
        found.environ = _environ(_read(os.path.join(base, "environ")))
        found.ppid = _ppid(_read(os.path.join(base, "stat")))
    except FileNotFoundError:
        return None  # it ended
    except (OSError, ValueError) as exc:
        owner = _owner(base)
        why = getattr(exc, "strerror", None) or str(exc)
        what = _what(found, in_kfd)
        line = f"pid {pid}{owner}: {what}its environment cannot be read"
        _unshown(node, pid, f"{line} ({why}): not shown")
        return None
    return found


def _unshown(node: Node, pid: int, line: str) -> None:
    node.unshown[pid] = line
    node.notes.append(line)


def _what(found: Proc, in_kfd: bool) -> str:
    """Why a process would be shown, said before why it is not. (One found by
    its descriptors has an environment this process may read: the kernel
    lets read both or neither.)"""
    if found.launch is not None:
        return "a torchtitan launch, but "
    return "it has GPU queues, but " if in_kfd else ""


def _owner(base: str) -> str:
    try:
        uid = os.stat(base).st_uid
    except OSError:
        return ""
    return "" if uid == os.getuid() else f" (uid {uid}: another user's)"


def _read(path: str, limit: int = MAX_PROC_BYTES) -> bytes:
    """The bytes of a ``/proc`` or sysfs file (whose size ``stat`` does not
    give), at most ``limit``; ``ValueError`` (a ``ConfigError``) beyond."""
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW)
    try:
        return read_up_to(fd, limit)
    except ConfigError as exc:
        raise exc.within(path) from None
    finally:
        os.close(fd)


def _environ(raw: bytes) -> dict[str, str]:
    environ = {}
    for item in raw.split(b"\0"):
        key, eq, value = item.partition(b"=")
        if eq and key:
            environ[os.fsdecode(key)] = os.fsdecode(value)
    return environ


def _ppid(raw: bytes) -> int:
    """The parent's pid from ``/proc/<pid>/stat``: after the command name in
    parentheses (which may hold any character), the state, then the ppid."""
    return int(raw.rpartition(b")")[2].split()[1])


def _identity(info: os.stat_result) -> tuple[int, int]:
    return info.st_dev, info.st_ino


def _holds(base: str, identity: tuple[int, int]) -> bool | None:
    """Whether the process at ``base`` holds the device open, matched by
    device and inode as ``_rocm.hip_started`` matches its own; None where its
    descriptors cannot be read (another user's)."""
    fds = os.path.join(base, "fd")
    try:
        names = os.listdir(fds)
    except FileNotFoundError:
        return False
    except OSError:
        return None
    for name in names:
        try:
            if _identity(os.stat(os.path.join(fds, name))) == identity:
                return True
        except OSError:  # closed meanwhile, or a socket's link
            continue
    return False


def _parent_value(proc: str, ppid: int | None) -> str | bool | None:
    """``GPU_MAX_HW_QUEUES`` as the parent started with it (None: unset);
    False where there is no parent to read."""
    if not ppid:
        return False
    try:
        return _environ(_read(os.path.join(proc, str(ppid), "environ"))).get(QUEUES)
    except (OSError, ValueError):
        return False


def _hook_beside(words: list[str]) -> str | None:
    """This package's start-up file in a site-packages folder of the
    interpreter a command line names by its path (``PREFIX/bin/python``:
    ``PREFIX/lib*/python*/site-packages``); None where none is found there
    (another folder may still hold it: the user's site, a base's)."""
    if not words or not os.path.isabs(words[0]):
        return None
    prefix = os.path.dirname(os.path.dirname(words[0]))
    try:
        libs = [lib for lib in os.listdir(prefix) if lib.startswith("lib")]
        for lib in sorted(libs):
            for version in sorted(os.listdir(os.path.join(prefix, lib))):
                folder = os.path.join(prefix, lib, version, "site-packages")
                for name in (PTH, START):
                    if version.startswith("python") and os.path.isfile(
                        os.path.join(folder, name)
                    ):
                        return os.path.join(folder, name)
    except OSError:
        return None
    return None


def _number(
    path: str, notes: list[str], cost: str, folder: int | None = None
) -> int | None:
    """A sysfs file's number (``path`` relative to the open ``folder``, if
    given); None (with a note naming the file and what that costs) where it is
    malformed or cannot be read; FileNotFoundError passes for the caller (a
    queue that ended). A sysfs value comes whole in one read."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW, dir_fd=folder)
        try:
            raw = os.read(fd, MAX_SYSFS_BYTES + 1)
        finally:
            os.close(fd)
    except FileNotFoundError:
        raise
    except OSError as exc:
        notes.append(f"{_named(path, folder)}: {exc.strerror}: {cost}")
        return None
    text = raw.decode("ascii", "replace").strip()
    if not text.isdigit() or len(raw) > MAX_SYSFS_BYTES:
        notes.append(f"{_named(path, folder)}: {text[:20]!r} is not a number: {cost}")
        return None
    return int(text)


def _named(path: str, folder: int | None) -> str:
    """A path relative to an open folder, whole (for a line that names it)."""
    if folder is None:
        return path
    return os.path.join(os.readlink(f"/proc/self/fd/{folder}"), path)


def _queues(folder: str, found: Proc, node: Node) -> dict[str, list[int]]:
    """A process's hardware queues by GPU: ``[compute, other]`` each. Its
    ``queues`` folder is opened once and each file read relative to it: a
    node of 64 processes has some 1,000 queue files (benchmarks/status.py)."""
    counts: dict[str, list[int]] = {}
    root = os.path.join(folder, "queues")
    try:
        fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except FileNotFoundError:
        return counts  # no queue yet, or the process ended
    except OSError as exc:
        found.notes.append(f"{root}: {exc.strerror}: its queues cannot be counted")
        return counts
    try:
        names = sorted(os.listdir(fd), key=lambda n: (len(n), n))
        for name in names:
            try:
                gpu = _number(f"{name}/gpuid", found.notes, NOT_COUNTED, fd)
                kind = None if gpu is None else _number(
                    f"{name}/type", found.notes, NOT_COUNTED, fd)  # fmt: skip
            except FileNotFoundError:
                line = f"{root}/{name}: the queue ended while it was read: not counted"
                found.notes.append(line)
                continue
            if gpu is None or kind is None:
                continue
            label = node.gpus.get(gpu)
            if label is None:
                label = f"gpu_id {gpu}"
                note = (
                    f"{root}/{name}/gpuid: {gpu} is no GPU of {KFD_SYSFS}/topology:"
                    " shown as is"
                )
                if note not in found.notes:
                    found.notes.append(note)
            counts.setdefault(label, [0, 0])[0 if kind == COMPUTE else 1] += 1
    finally:
        os.close(fd)
    return counts


#: What a queue file that cannot be read costs.
NOT_COUNTED = "queue not counted"


# Who set the value, and what a count means: decisions on what was read.


class Setting:
    """A shown process's ``GPU_MAX_HW_QUEUES``: the queues HIP uses (None: not
    known from outside, or no queue count), its text, who set it (one of
    :data:`SET_BY`) and the words that say so."""

    __slots__ = ("q", "set_by", "text", "words")

    def __init__(self, q: int | None, set_by: str, text: str | None, words: str):
        self.q = q
        self.set_by = set_by
        self.text = text
        self.words = words


#: Who set a value, as ``status --json`` names it: this package (its marker
#: matches), the process's launcher (its parent started without that value),
#: the user (the parent started with it too), the environment (set before the
#: process started; its parent cannot be read), nobody (HIP's default), or
#: unknown (set inside the process, if at all: not visible from outside).
SET_BY = (NAME, "launcher", "user", "environment", NOBODY, "unknown")


def setting_of(found: Proc, parent: str = "") -> Setting:
    """Who set ``found``'s value, from its start environment (``parent``:
    how its parent is named)."""
    environ = found.environ or {}
    setting = QueuesSetting(environ)
    mode, _ = switch(environ)
    if setting.who == PACKAGE:
        return _inherited(found, setting, on=mode != OFF)
    if setting.text is not None:  # set before it started: by whom?
        value = found.parent_value
        if value is False:
            set_by, whom = (
                "environment",
                "before it started (its parent cannot be read)",
            )
        elif value == setting.text:
            set_by, whom = "user", "in the job's environment (its parent has it too)"
        else:
            set_by, whom = (
                "launcher",
                f"by its launcher{parent} (which started without it)",
            )
        words = f"{setting.reading}, set {whom}"
        if setting.problem:
            words += f": {setting.problem.rpartition(': ')[2]}"
        return Setting(setting.queues, set_by, setting.text, words)
    default = f"unset: HIP's default ({HIP_DEFAULT_QUEUES})"
    marked = marker(environ)
    if marked is not None and marked[0] == UNSET:
        words = f"{default}; its launcher's {marked[1]} launch set none"
        return Setting(HIP_DEFAULT_QUEUES, NOBODY, None, words)
    if found.launch is not None and mode != OFF:
        if found.hook is not None:
            words = (
                f"unset at its start; its interpreter runs {NAME}'s hook"
                f" ({found.hook}), which sets it inside the process at start-up:"
                " not visible from outside"
            )
        else:
            words = (
                f"unset at its start; {NAME} not found in its interpreter's"
                " site-packages, but may run from another folder and set it"
                " inside the process: not visible from outside"
            )
        return Setting(None, "unknown", None, words)
    if found.launch is not None:
        words = f"{default}; the hook is off ({SWITCH}={environ[SWITCH]})"
        return Setting(HIP_DEFAULT_QUEUES, NOBODY, None, words)
    return Setting(HIP_DEFAULT_QUEUES, NOBODY, None, default)


def _inherited(found: Proc, setting: QueuesSetting, *, on: bool) -> Setting:
    """A value this package set in the process's launcher, which the process
    started with. Its own hook (a worker's: it makes the launch too) decides
    again inside with its ``WORLD_SIZE``: for a ``--module`` launch from the
    launcher's inputs alone (``ROCM_HWQ_AUTOSET_INPUTS``), the decision itself
    (``_decision.decide``, which reads nothing for it); for a TOML launch by
    reading the job config, which this reads not."""
    environ = found.environ or {}
    words = setting.describe()
    size = environ.get(WORLD_SIZE)
    if found.launch is None or not on or size is None:
        return Setting(setting.queues, NAME, setting.text, words)
    if setting.form == MODULE_FORM:
        outcome = decide(environ, found.launch, rocm=_unasked, recommend=_unasked)
        queues = getattr(outcome, "queues", None)
        if queues is not None and str(queues) != setting.text:
            words += (
                f"; its hook applied the same model for {WORLD_SIZE}={size}: {queues}"
            )
            return Setting(queues, NAME, str(queues), words)
        return Setting(setting.queues, NAME, setting.text, words)
    words += (
        f"; its own hook decided again inside for {WORLD_SIZE}={size}, which /proc"
        " cannot show: the same unless data_parallel_shard_degree = -1 resolves"
        " otherwise"
    )
    return Setting(setting.queues, NAME, setting.text, words)


def _unasked(*_args: object) -> Any:
    """What a worker's decision never asks for a ``--module`` launcher's
    value (ROCm, a config): asked, it is a bug here."""
    raise AssertionError("a --module worker's decision asks for nothing")


#: What a count of KFD queues can and cannot mean, said with every verdict.
UPPER_BOUND = "an upper bound: ROCr's own queues count too"
BELOW, AT, PAST, UNKNOWN = "below", "at", "past", "unknown"


def verdict(gpu: str, compute: int, q: int | None) -> tuple[str, str]:
    """The level (:data:`BELOW`, :data:`AT`, :data:`PAST`, :data:`UNKNOWN`)
    and words for ``compute`` queues on one GPU of a process whose HIP uses
    ``q`` queues per pool (one pool per stream priority, each up to Q)."""
    head = f"{compute} compute queue{'s' * (compute != 1)} on {gpu}"
    if q is None:
        return UNKNOWN, f"{head}, Q not visible: cannot say whether streams share"
    if compute < q:
        return BELOW, f"{head}, Q={q}: below the cap; {UPPER_BOUND}"
    if compute == q:
        return AT, f"{head}, Q={q}: at the cap, streams may share queues; {UPPER_BOUND}"
    return PAST, (
        f"{head}, Q={q}: past one pool's cap (a pool per stream priority, each"
        f" up to Q), streams may share queues; {UPPER_BOUND}"
    )


def explain_command(found: Proc) -> str | None:
    """The ``explain`` command that says what the hook decides for this
    process's launch (its training arguments, its ``WORLD_SIZE``), where it
    makes one."""
    if found.launch is None:
        return None
    import shlex

    world = (found.environ or {}).get(WORLD_SIZE)
    size = f" --world-size {shlex.quote(world)}" if world else ""
    args = " ".join(shlex.quote(a) for a in found.launch.args)
    return f"{NAME} explain{size} -- {args}"

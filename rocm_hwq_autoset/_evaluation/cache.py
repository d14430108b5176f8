"""The cache of ``--module`` evaluations: where it lives, when an entry is
trusted, how entries are written and pruned, and the per-host lock through which
the ranks of one node share one evaluation.

An entry is a JSON file named after a key: what a later launch must match
exactly (the training arguments, the interpreter, the working directory, the
variables that shape ``sys.path`` and the visible GPUs).
It names its key, and holds variants: each an evaluation's result (the model's
inputs and every field with its source) and what the evaluation read
(``deps``), checked before every use; one per machine whose evaluation read
something else (a node-local file).

Safety: the directory is created private (0700, and the folders on the way to
it, whatever the umask); it is opened once without following a link, tested
on that descriptor, and every file of it is reached through it (``dir_fd``);
it and an entry are trusted
only when the current user owns them and nobody else can write them; entries are
written to a temporary file and renamed (atomic on local file systems and NFS);
at most :data:`MAX_ENTRIES` are kept, the least recently used pruned. Only
names of the cache's own form (:data:`OWN_NAME`) are ever pruned, and only in a
directory that holds nothing else: one that does (``ROCM_HWQ_AUTOSET_CACHE_DIR``
set to a folder of the user's) is used, never pruned. Any failure, reading or
checking an entry included (one nested past the recursion limit, of the wrong
types anywhere, too big for memory), means no cache: the caller evaluates as if
there were none.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import secrets
import stat
import sys
import time
from typing import Any

from .._config import ConfigError, read_open
from .._environ import CACHE_DIR, NAME, cache_switch
from .answer import Answer, config_from_json, config_to_json
from .deps import DEVICES, changed

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from .._model import Config


#: The layout of an entry; another layout is not read (it is in the key too).
#: 3: an ``id``; 4: the inputs and fields of the streams the model leaves out
#: (``_model.LEFT_OUT``), without which a format-3 entry cannot be decoded;
#: 5: the entry names its key, and holds variants (one per machine whose
#: evaluation read something else: a node-local file).
FORMAT = 5
#: The most launches of one machine that take an entry without this machine
#: evaluating it since (a check that completes, or a launch that evaluates):
#: the next launch evaluates before training starts. Another machine's
#: evaluation does not count for this one.
MAX_UNCHECKED = 2
#: Variants an entry keeps: the machines sharing a cache whose evaluations
#: read different files (a node-local one) each keep theirs.
MAX_VARIANTS = 8
#: Entries kept: one per distinct launch (arguments, directory, interpreter); a
#: few hundred KB each with torchtitan 0.3.0 (the paths of ~3,900 files).
MAX_ENTRIES = 32
#: Largest entry read: torchtitan 0.3.0's are ~0.5 MB.
MAX_ENTRY_BYTES = 16 << 20
#: The kernel's list of the locks held and waited for (Linux).
PROC_LOCKS = "/proc/locks"
#: Temporary, lock and result files older than this are left-overs.
STALE_SECONDS = 24 * 3600
#: Largest record of the launches that took an entry read: a line of 17 bytes
#: each, at most :data:`MAX_UNCHECKED` launches (a larger one is not ours, and
#: counts as the most).
MAX_SERVED_BYTES = 4096
#: Variables read before any Python code of the child runs (the interpreter's
#: own: those that shape ``sys.path``, and those that change how code runs,
#: ``__debug__`` and asserts, warnings as errors, the text encoding, the CPU
#: count) or by C code (the GPUs HIP and CUDA can see: :data:`.deps.DEVICES`,
#: by their count): part of the key, since no recording sees them.
KEY_VARIABLES = (
    "PYTHONPATH", "PYTHONHOME", "PYTHONSAFEPATH", "PYTHONNOUSERSITE",
    "PYTHONUSERBASE", "PYTHONPLATLIBDIR",
    "PYTHONOPTIMIZE", "PYTHONDEVMODE", "PYTHONWARNINGS", "PYTHONUTF8",
    "PYTHONWARNDEFAULTENCODING", "PYTHONINTMAXSTRDIGITS", "PYTHON_CPU_COUNT",
    *DEVICES,
)  # fmt: skip
#: Of those, the lists of folders: in the key as the folders they name
#: (``/x/`` and ``/x`` are one folder).
PATH_VARIABLES = ("PYTHONPATH",)
#: Of those, single folders.
FOLDER_VARIABLES = ("PYTHONHOME", "PYTHONUSERBASE")


#: A host's part of a file name (:func:`host`).
_HOST = r"[A-Za-z0-9_.-]{1,64}"
#: The names the cache makes, and the only ones it ever removes: an entry
#: (``<key>.json``), a node's lock and published answer (``<key>.<host>.lock``,
#: ``<key>.<host>.result``), the lock of a node's background check
#: (``<key>.<host>.check``), a machine's record of the launches that took the
#: entry unchecked (``<key>.<machine>.served``) and the temporary file of any
#: of those (``<name>.<host>.<pid>.tmp``).
OWN_NAME = re.compile(
    rf"[0-9a-f]{{32}}(?:\.json|\.{_HOST}\.(?:lock|result|check|served))"
    rf"(?:\.{_HOST}\.[0-9]{{1,10}}\.tmp)?",
    re.ASCII,
)
#: The names of entries.
ENTRY_NAME = re.compile(r"[0-9a-f]{32}\.json", re.ASCII)
#: An entry's id: a new one at each store.
ID = re.compile(r"[0-9a-f]{16}", re.ASCII)
#: The mark of a directory the cache made itself: the Cache Directory
#: Tagging convention's file (backup tools skip such directories). Only a
#: directory that holds it, and nothing but names of the cache's own form, is
#: ever pruned: a name of that form in a folder of the user's may be theirs.
TAG = "CACHEDIR.TAG"
TAG_TEXT = (
    "Signature: 8a477f597d28d172789f06886806bc55\n"
    f"# This file is a cache directory tag created by {NAME}.\n"
    "# For information about cache directory tags see https://bford.info/cachedir/\n"
)


def location(environ: Mapping[str, str]) -> str | None:
    """The cache directory for this environment: ``ROCM_HWQ_AUTOSET_CACHE_DIR``,
    else ``$XDG_CACHE_HOME/rocm-hwq-autoset``, else ``~/.cache/rocm-hwq-autoset``;
    None where there is no home (:func:`_home`): no cache then, never a folder
    in a directory others can write (the system's temporary one), a literal
    ``~`` in the working directory, nor a home made for it.
    ``ConfigError`` for a ``ROCM_HWQ_AUTOSET_CACHE_DIR`` under a home there is
    none of."""
    chosen = environ.get(CACHE_DIR)
    home = _home(environ)
    if chosen:
        path = chosen
        if chosen == "~" or chosen.startswith("~/"):
            if home is None:
                problem = f"{chosen!r}: there is no home directory here"
                raise ConfigError(problem, CACHE_DIR)
            path = home + chosen[1:]
        return os.path.abspath(os.path.expanduser(path))  # "~user/..." too
    xdg = environ.get("XDG_CACHE_HOME", "")
    if os.path.isabs(xdg):  # the XDG spec ignores a relative one
        return os.path.join(xdg, NAME)
    if home is None:
        return None
    return os.path.join(home, ".cache", NAME)


def _home(environ: Mapping[str, str]) -> str | None:
    """This user's home: ``HOME`` when it is an absolute path to a directory
    that is there, else the passwd entry's when it is one; None for a uid with
    neither. A home that is not there is none (``HOME=/nonexistent``,
    ``nobody``'s passwd entry, a container's user without a home): the cache
    makes its folders in a home, never the home itself (was: a root launch
    made ``/nonexistent/.cache/rocm-hwq-autoset``)."""
    home = environ.get("HOME", "")
    if os.path.isabs(home) and os.path.isdir(home):
        return home
    try:
        import pwd

        found = pwd.getpwuid(os.getuid()).pw_dir
    except (ImportError, KeyError):  # a uid with no passwd entry
        return None
    return found if os.path.isabs(found) and os.path.isdir(found) else None


#: Why a lookup takes no entry that is there: its own words, one home each.
READ_ONLY = "read-only: no use of an entry can be noted, none is taken"
OTHER_FORMAT = "entry of another format"
OTHER_LAUNCH = "entry ignored: it is another launch's"
CORRUPT = "entry ignored: corrupt"

#: Why there is no cache where there is no home.
NO_HOME = (
    f"no home directory and no {CACHE_DIR}: no cache, each --module launch evaluates"
)


def key(
    args: Sequence[str],
    environ: Mapping[str, str],
    interpreter: tuple[Sequence[str], str | None] = ((), None),
) -> str:
    """What a launch must match exactly to use an entry, hashed: 32 hex digits.
    The entry's format; the interpreter (:func:`_interpreter`) and its
    version (``venv/bin/python``, ``python3``, a console script's shebang
    and the venv reached through a link or a bind mount share entries; two
    venvs of one Python do not); the working directory, the
    arguments and :data:`KEY_VARIABLES` (the visible GPUs by how many each
    lists, not which: ranks bound to one GPU each share an entry), in that
    order; the interpreter's options that change where imports come from and
    the first ``sys.path`` entry it puts (``parent.interpreter_of``). JSON
    escapes every character that is not ASCII (an argument of undecodable bytes
    too)."""
    fields = [
        FORMAT,
        *_interpreter(),
        sys.version,
        os.getcwd(),
        list(args),
        list(interpreter[0]),
        interpreter[1],
        [_key_value(name, environ.get(name)) for name in KEY_VARIABLES],
    ]
    return hashlib.sha256(json.dumps(fields).encode()).hexdigest()[:32]


def _interpreter() -> list[Any]:
    """The interpreter, as the key holds it: a venv by its ``pyvenv.cfg``
    (inode, size, modification and change time: the same through a link or a
    bind mount, and on every NFS client, where device numbers differ; another
    venv's differs), its executable by its real path within the venv; else the
    real paths of ``sys.executable`` and ``sys.prefix``."""
    prefix = os.path.realpath(sys.prefix)
    executable = os.path.realpath(sys.executable)
    try:
        info = os.stat(os.path.join(prefix, "pyvenv.cfg"))
    except OSError:  # no venv
        return [executable, prefix]
    if executable.startswith(prefix + os.sep):  # a venv of copies
        executable = os.path.relpath(executable, prefix)
    venv = ["venv", info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns]
    return [executable, venv]


def _key_value(name: str, value: str | None) -> Any:
    """A variable of the key as the interpreter takes it: the visible GPUs by
    their count, folders normalised (``PYTHONPATH=/x/`` is ``/x``)."""
    if name in DEVICES:
        return _devices(value)
    if value and name in PATH_VARIABLES:
        return [os.path.normpath(p) if p else p for p in value.split(os.pathsep)]
    if value and name in FOLDER_VARIABLES:
        return os.path.normpath(value)
    return value


def _devices(value: str | None) -> int | None:
    """How many devices a ``*_VISIBLE_DEVICES`` value lists (comma-separated);
    None when unset, 0 when empty."""
    if value is None:
        return None
    return sum(1 for item in value.split(",") if item.strip())


def host() -> str:
    """This node's name, as a file name: the ranks of one host share an
    evaluation through its lock."""
    return _file_name(os.uname().nodename or "localhost")


def _file_name(name: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in name)[:64]


#: The kernel's id of this boot: the same in every container and UTS namespace
#: of the computer (``/proc/sys/kernel/random/boot_id`` is not namespaced),
#: another on every other computer.
BOOT_ID = "/proc/sys/kernel/random/boot_id"


def machine() -> str:
    """This computer, as a file name: its boot id, which a new host name (a pod
    restarted, ``unshare -u``) or a restarted container does not change, and
    which differs on each host of a cache shared over NFS; the host name where
    there is none (not Linux)."""
    try:
        fd = os.open(BOOT_ID, os.O_RDONLY | os.O_CLOEXEC)
        try:
            found = os.read(fd, 64).decode("ascii").strip().replace("-", "")
        finally:
            os.close(fd)
    except (OSError, UnicodeDecodeError):
        return host()
    return found if re.fullmatch(r"[0-9a-f]{32}", found) else host()


#: Variables naming one launch of a job (a ``srun`` step, an ``mpirun``): its
#: ranks, alive together, take an entry once between them. Without them, the
#: processes one process started (a script starting its ranks with ``&``) are
#: one launch.
LAUNCH_VARIABLES = (
    ("SLURM_JOB_ID", "SLURM_STEP_ID"), ("PMIX_NAMESPACE",),
    ("OMPI_MCA_ess_base_jobid",), ("FLUX_JOB_ID",),
)  # fmt: skip
#: A launch's line in the record of the times an entry was taken: its 16 hex
#: digits, the process that took it for the launch (pid, start time) and when
#: (seconds since the epoch): a rank of that launch takes it again while that
#: process lives, or within :data:`LAUNCH_SECONDS` (ranks start together, and
#: one may end at once); after, the same identifiers (a requeued job's step 0,
#: the next launch of a loop in one step or one script) are another launch.
LAUNCH = re.compile(rb"([0-9a-f]{16}) ([0-9]{1,10}) ([0-9]{1,20}) ([0-9]{1,12})\n",
                    re.ASCII)  # fmt: skip
LAUNCH_SECONDS = 10


def launch_of(environ: Mapping[str, str], launcher: int | None = None) -> str:
    """The launch of the process ``launcher`` (this one by default), as 16 hex
    digits: its job step's identifiers, else the process that started it (its
    pid and start time); a process whose parent cannot be told is a launch of
    its own."""
    for names in LAUNCH_VARIABLES:
        values = [environ.get(name) for name in names]
        if all(values):
            found: list[Any] = [names, values]
            break
    else:
        stat_fields = _stat(os.getpid() if launcher is None else launcher)
        parent = None if stat_fields is None else int(stat_fields[1])
        found = ["parent", parent, parent and _started(parent)]
        if None in found:
            found.append(_OWN)
    return hashlib.sha256(json.dumps(found).encode()).hexdigest()[:16]


def _stat(pid: int) -> list[bytes] | None:
    """The fields of ``/proc/PID/stat`` after the command's name (the parent's
    pid is the second, the start time the twentieth), or None."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat_file:
            fields = stat_file.read(4096).rpartition(b")")[2].split()
    except OSError:
        return None
    return fields if len(fields) > 19 else None


def _started(pid: int) -> int | None:
    """When the process ``pid`` started (clock ticks since boot: a pid used
    again is another process), or None when there is none."""
    fields = _stat(pid)
    try:
        return None if fields is None else int(fields[19])
    except ValueError:
        return None


_OWN = secrets.token_hex(8)


class Cache:
    """A usable cache directory (see :func:`open_cache`), reached through one
    descriptor opened without following a link and tested, as it is open, to
    be a directory of this user's that no one else can write: every file of it
    is opened, written, renamed and removed relative to that descriptor
    (``dir_fd``), never by a path another user could redirect. ``OSError`` if
    it cannot be opened, ``ConfigError`` if it cannot be trusted."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.fd = -1
        self._identity: tuple[int, int] | None = None
        self.dir()

    def dir(self) -> int:
        """The directory's descriptor, opened again after :meth:`close` (and
        then it must be the same directory)."""
        if self.fd >= 0:
            return self.fd
        planted = _planted_on_the_way(self.path)
        if planted:
            raise ConfigError(planted)
        flags = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
        fd = os.open(self.path, flags)
        try:
            info = os.fstat(fd)
            problem = _untrusted(info)
            if problem:
                raise ConfigError(problem)
            identity = (info.st_dev, info.st_ino)
            if self._identity not in (None, identity):
                raise ConfigError("replaced since it was opened")
        except BaseException:
            os.close(fd)
            raise
        self.fd, self._identity = fd, identity
        return fd

    def close(self) -> None:
        """Let go of the descriptor (a training process keeps none open)."""
        if self.fd >= 0:
            fd, self.fd = self.fd, -1
            with contextlib.suppress(OSError):
                os.close(fd)

    def entry(self, key: str) -> str:
        return os.path.join(self.path, f"{key}.json")

    def lookup(
        self,
        key: str,
        environ: Mapping[str, str],
        *,
        take: bool = False,
        launcher: int | None = None,
    ) -> tuple[Config | None, str]:
        """The entry's config when it is trusted, names ``key``, one of its variants
        depended on nothing that changed, and this machine took it fewer than
        :data:`MAX_UNCHECKED` times since it last evaluated it; else None. And
        one phrase saying which. ``take``: the launch takes it, noted
        (:meth:`take`). A cache where a use cannot be noted (read-only) has no
        entry to take: nothing would bound how often it is taken unchecked."""
        try:
            data = _read_trusted(f"{key}.json", MAX_ENTRY_BYTES, self.dir())
        except FileNotFoundError:
            return None, "no entry"
        except (OSError, ConfigError) as exc:
            return None, f"entry ignored: {exc}"
        if not os.access(".", os.W_OK | os.X_OK, dir_fd=self.dir()):  # read-only
            return None, READ_ONLY
        try:
            doc = json.loads(data)
            if doc["format"] != FORMAT:
                return None, OTHER_FORMAT
            if doc["key"] != key:
                return None, OTHER_LAUNCH
            change = None
            for variant in doc["variants"]:
                change = changed(variant["deps"], environ)
                if change is None:
                    break
            if change is not None:
                return None, f"stale: {change}"
            if not isinstance(variant["id"], str) or not ID.fullmatch(variant["id"]):
                raise ValueError("no id")
            found = config_from_json(variant["result"])
        except Exception:  # hostile or damaged: RecursionError, MemoryError ...
            return None, CORRUPT
        if take:
            refused = self.take(key, environ, launcher)
        else:
            launch = launch_of(environ, launcher)
            refused = _over(self.unchecked(key), launch)[0]
        if refused:
            return None, refused
        with contextlib.suppress(OSError):
            os.utime(f"{key}.json", dir_fd=self.dir())  # recently used
        return found, "hit"

    def served_file(self, key: str) -> str:
        return f"{key}.{machine()}.served"

    def unchecked(self, key: str) -> list[tuple[str, int, int, int]] | None:
        """The launches that took the entry on this machine since it last
        evaluated it (None: a record that cannot be trusted or read, counted
        as the most)."""
        try:
            data = _read_trusted(self.served_file(key), MAX_SERVED_BYTES, self.dir())
        except FileNotFoundError:
            return []
        except (OSError, ConfigError):
            return None
        return _launches(data)

    def take(
        self, key: str, environ: Mapping[str, str], launcher: int | None = None
    ) -> str:
        """Note that this launch takes the entry; "" once noted (or noted
        already, by another rank of it), else why not: the machine took it
        :data:`MAX_UNCHECKED` times since it evaluated it, or the record
        cannot be written (a read-only cache, a full disk: nothing would bound
        how often it is taken unchecked). Atomic under the record's lock, so
        that launches at once count each. ``launcher``: the process whose
        launch it is (:func:`launch_of`)."""
        mine = launch_of(environ, launcher)
        taker = os.getpid() if launcher is None else launcher
        flags = os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK
        try:
            fd = os.open(self.served_file(key), flags, 0o600, dir_fd=self.dir())
        except OSError as exc:
            return f"cannot note that the entry is taken ({exc.strerror})"
        try:
            _lock(fd)
            info = os.fstat(fd)
            ours = stat.S_ISREG(info.st_mode) and info.st_size <= MAX_SERVED_BYTES
            problem = _untrusted(info) or ("" if ours else "?")
            launches = None if problem else _launches(read_open(fd, MAX_SERVED_BYTES))
            refused, counted = _over(launches, mine)
            if refused or counted:
                return refused
            os.lseek(fd, 0, os.SEEK_END)
            line = f"{mine} {taker} {_started(taker) or 0} {int(time.time())}\n"
            os.write(fd, line.encode())
        except (OSError, ConfigError) as exc:
            why = getattr(exc, "strerror", None) or str(exc)
            return f"cannot note that the entry is taken ({why})"
        finally:
            os.close(fd)
        return ""

    def evaluated(self, key: str) -> None:
        """This machine evaluated the launch: the times it took the entry
        unchecked start again (another machine's evaluation never does)."""
        flags = os.O_WRONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK
        try:
            fd = os.open(self.served_file(key), flags, dir_fd=self.dir())
        except OSError:  # none yet
            return
        try:
            _lock(fd)
            if not _untrusted(os.fstat(fd)):
                os.ftruncate(fd, 0)
        except OSError:
            pass
        finally:
            os.close(fd)

    def remove(self, key: str) -> None:
        """Remove the entry (an evaluation found it wrong); ``OSError`` if it
        cannot."""
        os.unlink(f"{key}.json", dir_fd=self.dir())

    def store(self, key: str, config: Config, deps: dict[str, Any]) -> None:
        """Write the entry atomically: this evaluation's variant first, with a
        new ``id``, and the other machines' (at most :data:`MAX_VARIANTS` in
        all; one of the same result and record is this one); then prune.
        ``OSError`` if it cannot."""
        me = machine()
        variant = {"id": secrets.token_hex(8), "machine": me,
                   "result": config_to_json(config), "deps": deps}  # fmt: skip
        variants = [variant]
        this = _content(variant)
        for other in self._variants(key):
            if other.get("machine") != me and _content(other) != this:
                variants.append(other)
        doc = {"format": FORMAT, "key": key, "variants": variants[:MAX_VARIANTS]}
        self._write(f"{key}.json", json.dumps(doc, separators=(",", ":")))
        self.evaluated(key)
        self.prune()

    def _variants(self, key: str) -> list[dict[str, Any]]:
        """The variants of the entry now, if it is a trusted one of this
        format for ``key``; else none."""
        try:
            doc = json.loads(_read_trusted(f"{key}.json", MAX_ENTRY_BYTES, self.dir()))
            if doc["format"] == FORMAT and doc["key"] == key:
                return [v for v in doc["variants"] if isinstance(v, dict)]
        except Exception:  # none, or damaged: replaced
            pass
        return []

    def _write(self, name: str, text: str) -> None:
        temp = f"{name}.{host()}.{os.getpid()}.tmp"
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
        where = self.dir()
        fd = os.open(temp, flags, 0o600, dir_fd=where)
        try:
            with os.fdopen(fd, "wb") as out:
                out.write(text.encode())  # JSON: ASCII
            os.replace(temp, name, src_dir_fd=where, dst_dir_fd=where)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(temp, dir_fd=where)
            raise

    def count(self) -> int:
        return len(self._entries()[0])

    def _entries(self) -> tuple[list[tuple[float, str]], list[os.DirEntry[str]], bool]:
        """The entries (modification time, name), oldest first; the other files
        of the cache's own form; and whether the directory holds anything else
        (a name not of that form, or one of it that is not a regular file)."""
        found = []
        others = []
        foreign = False
        with os.scandir(self.dir()) as listing:
            for entry in listing:
                if entry.name == TAG:
                    continue
                if not OWN_NAME.fullmatch(entry.name):
                    foreign = True
                    continue
                try:
                    if not entry.is_file(follow_symlinks=False):  # a link ...
                        foreign = True
                    elif ENTRY_NAME.fullmatch(entry.name):
                        info = entry.stat(follow_symlinks=False)
                        found.append((info.st_mtime, entry.name))
                    else:
                        others.append(entry)
                except OSError:  # another rank pruned it meanwhile
                    continue
        return sorted(found), others, foreign

    def prune(self) -> None:
        """Keep the :data:`MAX_ENTRIES` most recently used entries; remove
        left-over temporary, lock and result files. Only names of the cache's
        own form, and only when the directory holds nothing else: a directory
        that does is not the cache's alone, and its files may be the user's."""
        entries, others, foreign = self._entries()
        if foreign or not self.tagged():
            return
        doomed = [name for _, name in entries[: max(len(entries) - MAX_ENTRIES, 0)]]
        old = time.time() - STALE_SECONDS
        for entry in others:
            with contextlib.suppress(OSError):  # another rank pruned it
                if entry.stat(follow_symlinks=False).st_mtime < old:
                    doomed.append(entry.name)
        for name in doomed:
            with contextlib.suppress(OSError):
                os.unlink(name, dir_fd=self.dir())

    def tagged(self) -> bool:
        """Whether the directory holds the cache's own tag: a regular file of
        ours that nobody else can write, with :data:`TAG_TEXT`."""
        try:
            data = _read_trusted(TAG, len(TAG_TEXT), self.dir())
        except (OSError, ConfigError):
            return False
        return data == TAG_TEXT.encode()

    def tag(self) -> None:
        """Mark the directory as the cache's (``OSError`` if it cannot)."""
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
        try:
            fd = os.open(TAG, flags, 0o600, dir_fd=self.dir())
        except FileExistsError:  # another rank tagged it, or it is there
            return
        with os.fdopen(fd, "w") as out:
            out.write(TAG_TEXT)

    # The ranks of one node: one evaluates, the others wait for its result.

    def lock(self, name: str, *, wait: bool) -> bool:
        """Take the lock file ``name`` of the cache (``flock``, held until this
        process ends; never through a link), waiting for it or not: True when
        this process holds it, or when locks cannot be had there (it goes on
        alone); False when another holds it and ``wait`` is false."""
        flags = os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK
        try:
            fd = os.open(name, flags, 0o600, dir_fd=self.dir())
        except (OSError, ConfigError):
            return True
        import fcntl

        try:
            fcntl.flock(fd, fcntl.LOCK_EX if wait else fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return False
        except OSError:  # no locks here (an NFS mount without them): alone
            pass
        return True

    def waited_on(self, name: str) -> bool:
        """Whether a process of this host waits for the lock file ``name``
        (its blocked ``flock``, a ``->`` line of Linux's ``/proc/locks`` on the
        file's inode number: a device as ``stat`` gives it may not be the one
        listed, and a match of another file's only costs the caller some CPU).
        False where that cannot be told."""
        try:
            inode = str(os.stat(name, dir_fd=self.dir(), follow_symlinks=False).st_ino)
            with open(PROC_LOCKS, "rb") as locks:
                listed = locks.read().decode("ascii", "replace").splitlines()
        except (OSError, ConfigError):
            return False
        return any(  # "1: -> FLOCK ADVISORY WRITE <pid> <major>:<minor>:<inode> ..."
            fields[1:2] == ["->"] and fields[6:7] != []
            and fields[6].endswith(f":{inode}")
            for fields in map(str.split, listed)
        )  # fmt: skip

    def lock_file(self, key: str) -> str:
        return f"{key}.{host()}.lock"

    def result_file(self, key: str) -> str:
        return f"{key}.{host()}.result"

    def check_lock_file(self, key: str) -> str:
        """The lock of this node's background check of the entry: one at a
        time, apart from the evaluation's lock (a launch evaluating never waits
        for a check)."""
        return f"{key}.{host()}.check"

    def publish(self, key: str, answer: Answer, deps: dict[str, Any] | None) -> None:
        """The evaluator's answer, success or failure, for the ranks that waited
        on its lock, with the key and what the evaluation read: a peer uses it
        only if nothing of that changed for it. ``OSError`` if it cannot be
        written."""
        published = {"format": FORMAT, "key": key, "answer": answer.to_json(),
                     "deps": deps}  # fmt: skip
        self._write(self.result_file(key), json.dumps(published))

    def published(self, key: str) -> tuple[tuple[int, int, int] | None, Any]:
        """The identity of the result file (changed by each :meth:`publish`) and
        its document, or ``(None, None)``."""
        try:
            info: list[os.stat_result] = []
            data = _read_trusted(self.result_file(key), MAX_ENTRY_BYTES, self.dir(),
                                 info)  # fmt: skip
            found = (info[0].st_dev, info[0].st_ino, info[0].st_mtime_ns)
            return found, json.loads(data)
        except Exception:  # hostile or damaged, as an entry
            return None, None

    def peer_answer(
        self, doc: Any, key: str, environ: Mapping[str, str]
    ) -> Answer | None:
        """A published document's answer, if it is for ``key`` and nothing its
        evaluation read changed for ``environ``; else None. Checked as an
        entry is: any failure means no answer."""
        try:
            if doc["format"] != FORMAT or doc["key"] != key or doc["deps"] is None:
                return None
            if changed(doc["deps"], environ) is not None:
                return None
            return Answer.from_json(doc["answer"])
        except Exception:
            return None


def _content(variant: dict[str, Any]) -> str:
    """A variant's result and record, as JSON reads them back."""
    found = [variant.get("result"), variant.get("deps")]
    return json.dumps(found, sort_keys=True, separators=(",", ":"))


def _launches(data: bytes) -> list[tuple[str, int, int, int]] | None:
    """The launches of a record of the times an entry was taken, each with the
    process that took it (None: not a record of ours)."""
    lines = data.splitlines(keepends=True)
    found = [LAUNCH.fullmatch(line) for line in lines]
    if not all(found):
        return None
    return [(m.group(1).decode(), int(m.group(2)), int(m.group(3)), int(m.group(4)))
            for m in found if m is not None]  # fmt: skip


def _over(
    launches: list[tuple[str, int, int, int]] | None, mine: str
) -> tuple[str, bool]:
    """Why the launch ``mine`` cannot take an entry taken by ``launches``
    (None: as many as may be), or ""; and whether it took it already (a rank
    of it, while the process that took it for the launch lives, or within
    :data:`LAUNCH_SECONDS`)."""
    if launches is None:
        counted = False
    else:
        now = time.time()
        counted = any(
            launch == mine
            and (0 <= now - at < LAUNCH_SECONDS or (start and _started(pid) == start))
            for launch, pid, start, at in launches
        )
        if counted or len(launches) < MAX_UNCHECKED:
            return "", counted
    refused = (f"taken {MAX_UNCHECKED} times on this machine with no evaluation of"
               " it here since")  # fmt: skip
    return refused, counted


def _lock(fd: int) -> None:
    """An exclusive ``flock`` on ``fd``, waited for; none where locks cannot
    be had (the record is then kept without)."""
    import fcntl

    with contextlib.suppress(OSError):
        fcntl.flock(fd, fcntl.LOCK_EX)


def open_cache(
    environ: Mapping[str, str], *, create: bool = True
) -> tuple[Cache | None, str]:
    """The cache, or None with why not (``""`` when it is simply turned off).
    ``ConfigError`` for a value of the switch, or of the directory, it cannot
    read."""
    on, problem = cache_switch(environ)
    if problem is not None:
        raise ConfigError(problem)
    if not on:
        return None, ""
    path = location(environ)
    if path is None:
        return None, NO_HOME
    try:
        existed = os.path.lexists(path)
        if create and not existed:
            make_private(path)
        cache = Cache(path)
    except OSError as exc:
        if os.path.islink(path):  # never followed: another user's, maybe
            return None, f"{path}: a symbolic link; not used"
        return None, f"{path}: {exc.strerror}"  # "Not a directory": a file
    except ConfigError as exc:
        return None, f"{path}: {exc}; not used"
    if create and not existed:  # the cache made it: its own to prune
        with contextlib.suppress(OSError):
            cache.tag()
    return cache, ""


#: How many links a path may go through, as Linux's ``MAXSYMLINKS``.
MAX_LINKS = 40


def _planted_on_the_way(path: str) -> str:
    """Why a folder on the way to ``path`` (an absolute path; not ``path``
    itself, which is opened without following a link) could lead elsewhere
    than its user chose, or ``""``: a symbolic link that another user owns, or
    that lies in a folder another user owns or can write without its sticky
    bit (they could put their own there). Each link is followed as the kernel
    would; a folder missing from there on is made by :func:`make_private`."""
    trusted = (0, os.getuid())
    todo = path.split(os.sep)[1:-1]  # the folders on the way
    todo.reverse()  # taken from the end: first to last
    here, links = os.sep, 0
    while todo:
        name = todo.pop()
        if name in ("", "."):
            continue
        if name == "..":
            here = os.path.dirname(here)
            continue
        step = os.path.join(here, name)
        try:
            info = os.lstat(step)
        except OSError:  # missing, or not a folder: as without this test
            return ""
        if not stat.S_ISLNK(info.st_mode):
            here = step
            continue
        links += 1
        if links > MAX_LINKS:  # a loop: opening it fails, and says so
            return ""
        folder = os.lstat(here)
        writable = folder.st_mode & (stat.S_IWGRP | stat.S_IWOTH)
        if (
            info.st_uid not in trusted
            or folder.st_uid not in trusted
            or (writable and not folder.st_mode & stat.S_ISVTX)
        ):
            return f"{step}, on the way, is a link another user could have made"
        target = os.readlink(step)
        if os.path.isabs(target):
            here = os.sep
        todo.extend(target.split(os.sep)[::-1])
    return ""


def make_private(path: str) -> None:
    """Make the folder ``path`` and any missing folder on the way to it 0700,
    whatever the umask (``os.makedirs`` makes those on the way 0777 less the
    umask: ``~/.cache`` world-writable under ``umask 000``). ``ConfigError``,
    and nothing made, where the way to it could lead elsewhere
    (:func:`_planted_on_the_way`, which :meth:`Cache.dir` asks too)."""
    planted = _planted_on_the_way(path)
    if planted:
        raise ConfigError(planted)
    missing = []
    head = path
    while head and not os.path.lexists(head):  # ends at "/" or at ""
        missing.append(head)
        head = os.path.dirname(head)
    for folder in reversed(missing):
        try:
            os.mkdir(folder, 0o700)
        except FileExistsError:  # another rank made it
            continue
        fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
        try:
            os.fchmod(fd, 0o700)  # an umask of 0o7xx took the owner's bits
        finally:
            os.close(fd)


def _untrusted(info: os.stat_result) -> str:
    """Why a file or directory of the cache cannot be trusted, or ``""``."""
    if info.st_uid != os.getuid():
        return "owned by another user"
    if info.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        return "writable by its group or others"
    return ""


def _read_trusted(
    name: str, limit: int, dir_fd: int, info: list[os.stat_result] | None = None
) -> bytes:
    """A cache file's bytes, if it is a regular file of ours that nobody else
    can write (never following a link; ``info`` gets its stat)."""
    flags = os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC
    fd = os.open(name, flags, dir_fd=dir_fd)
    try:
        found = os.fstat(fd)
        problem = _untrusted(found)
        if problem:
            raise ConfigError(problem)
        if info is not None:
            info.append(found)
        return read_open(fd, limit)
    finally:
        os.close(fd)

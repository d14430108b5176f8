"""What a ``--module`` evaluation depended on, and whether that has changed.

The child records what the evaluation actually read, through Python's audit
events (``open``, ``os.listdir``, ``os.scandir``), a finder first on
``sys.meta_path`` that sees every module looked up (``import`` statements and
``importlib.import_module`` alike, found or not), and a recording
``os.environ`` (and ``os.environb``); :func:`check` tells a later launch whether
any of it changed. The real evaluation reads a lot (torchtitan 0.3.0: ~430
variables, ~500 directories, ~3,900 files), so what counts is a rule, written
down here and in docs/design.md ("The cache of evaluations"):

* **Files**: every module it imported (its source or extension file; a module
  loaded from a valid ``.pyc``, by ``import`` or by path, counts by its source)
  and every other file it opened to read (``r+`` too; bytes paths too), by
  modification time (ns), size, inode and change time (ns), as git's index
  checks its files; a file it opened that did not exist must still not exist.
  A file whose stamps changed counts by its bytes (a digest of it, for files
  of :data:`MAX_DIGEST_BYTES` or less): a ``touch`` or a checkout there and back
  changes nothing. Not counted: files it only wrote, compiled ``.pyc`` files of
  a source (the source counts), and ``/proc``, ``/sys``, ``/dev`` but for
  ``/dev/shm`` (they describe the process, not the config).
* **Directories the import system searched** (``sys.path``, packages'
  ``__path__``, whether they existed or not, and the user site): only their
  entries that could be imported as a module it looked up (``name`` as a
  package, ``name`` + any of ``importlib.machinery.all_suffixes()``) and
  ``.pth`` files; ``site``'s own look-ups (``sitecustomize``,
  ``usercustomize``) count as looked up. A new log file beside the job script,
  ``torchtitan.<jobid>.log`` included, changes nothing; a module now shadowing
  another, or one that was missing and now exists, does. A directory listed by
  the import machinery itself (``importlib.metadata``, ``pkgutil``): every
  entry that could be imported.
* **Other directories it listed** (``os.listdir``, ``os.scandir``, ``glob``,
  ``pathlib``): every entry, even when the directory is also on the import path.
* **Environment variables it read by name** (``os.environ[...]``, ``get``,
  ``in``, ``os.getenv``, ``os.environb``), with their values (or absence),
  whatever walked the environment before. Not counted: a variable read *inside*
  a walk over the whole environment (the key a loop over ``os.environ`` just
  gave, ``items()``, ``values()``, ``copy()``, ``dict(os.environ)``); per-rank
  and per-job identifiers, ``TMPDIR``, shell bookkeeping (:data:`NOT_CONFIG`),
  but for a folder variable under whose value it read a file or a directory;
  the visible GPUs (their count is in the key); this package's own variables.

Stamps are taken when a file is read or a directory listed; when something
read changed before the evaluation ended, :meth:`Recorder.deps` raises
:class:`ChangedDuring` and nothing is stored. One changed (its ``ctime``) as
the evaluation began is stored as *racy*: it counts by its bytes or entries at
every check, whatever its stamps say. A directory is listed again only when
its stamp changed, so a check costs one ``stat`` per file and directory.
"""

from __future__ import annotations

import contextlib
import os
import sys
import time
from collections.abc import Iterator, KeysView, Mapping
from typing import Any, NamedTuple

from .._config import ConfigError, read_open
from .._environ import LOCAL_RANKS, SWITCH

#: Variables that never change what a config builds, although the evaluation may
#: read them by name: per-rank and per-node identifiers, per-job identifiers
#: and folders, the rendezvous endpoint, shell and terminal bookkeeping. Sizes
#: (``SLURM_NNODES``, ``SLURM_STEP_NUM_TASKS``, ``WORLD_SIZE``) and node lists
#: (``SLURM_JOB_NODELIST``, ``PBS_NODEFILE``) do count: a config may size itself
#: by them; so do a job's names (``SLURM_JOB_NAME``, ``PBS_JOBNAME``): a
#: config may pick its variant by one, and a requeued job keeps it.
NOT_CONFIG = frozenset({
    # per rank / node
    "RANK", "LOCAL_RANK", "GROUP_RANK", "ROLE_RANK", "NODE_RANK", "ROLE_NAME",
    "SLURM_PROCID", "SLURM_LOCALID", "SLURM_NODEID", "SLURM_TASK_PID",
    "SLURMD_NODENAME", "SLURM_TOPOLOGY_ADDR", "SLURM_TOPOLOGY_ADDR_PATTERN",
    "SLURM_GTIDS", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_LOCAL_RANK",
    "OMPI_COMM_WORLD_NODE_RANK", "OMPI_MCA_ess_base_vpid", "PMI_RANK",
    "PMIX_RANK", "PMIX_ID", "PMIX_HOSTNAME", "PMI_FD", "PMI_PORT", "PMI_ID",
    "MV2_COMM_WORLD_RANK", "MV2_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID",
    "FLUX_TASK_RANK", "FLUX_TASK_LOCAL_ID", "PBS_TASKNUM", "PBS_NODENUM",
    "PBS_VNODENUM", "HOSTNAME", "HOST", "PALS_RANKID", "JSM_NAMESPACE_RANK",
    *LOCAL_RANKS,
    # per job: identifiers, times, ports, folders
    "SLURM_JOB_ID", "SLURM_JOBID", "SLURM_STEP_ID",
    "SLURM_STEPID", "SLURM_ARRAY_JOB_ID", "SLURM_HET_JOB_ID",
    "SLURM_RESTART_COUNT", "SLURM_JOB_START_TIME", "SLURM_JOB_END_TIME",
    "SLURM_SRUN_COMM_PORT", "SLURM_SRUN_COMM_HOST", "SLURM_STEP_LAUNCHER_PORT",
    "SLURM_STEP_RESV_PORTS", "SLURM_LAUNCH_NODE_IPADDR", "SLURM_JOB_TMPDIR",
    "PMIX_NAMESPACE", "PMIX_SERVER_TMPDIR", "PMIX_SYSTEM_TMPDIR",
    "OMPI_MCA_ess_base_jobid", "OMPI_MCA_orte_hnp_uri", "OMPI_FILE_LOCATION",
    "PMI_JOBID", "PBS_JOBID", "PBS_JOBCOOKIE", "PBS_MOMPORT",
    "PBS_JOBDIR", "PBS_TMPDIR", "PBS_ARRAY_ID", "LSB_JOBID",
    "JOB_ID", "FLUX_JOB_ID", "FLUX_URI", "COBALT_JOBID",
    "MASTER_ADDR", "MASTER_PORT", "TMPDIR", "TEMP", "TMP",
    # shell and terminal
    "PWD", "OLDPWD", "SHLVL", "_", "TERM", "COLUMNS", "LINES", "PS1", "PS2", "PS4",
    "PROMPT_COMMAND", "HISTFILE", "HISTSIZE", "HISTFILESIZE", "HISTCONTROL",
    "DISPLAY", "WINDOWID", "TMUX", "TMUX_PANE", "STY", "WINDOW", "MAIL",
    "LS_COLORS", "LESSOPEN", "LESSCLOSE", "COLORTERM", "TERM_PROGRAM",
    "TERM_PROGRAM_VERSION", "TERM_SESSION_ID", "XDG_SESSION_ID",
    "XDG_RUNTIME_DIR", "DBUS_SESSION_BUS_ADDRESS", "KRB5CCNAME",
})  # fmt: skip
#: This package's own variables, each named after the switch: never a
#: dependency, not even by presence.
OURS = SWITCH
#: Prefixes of such variables: torch elastic's per-run ones, the PMIx server's
#: and Open MPI's runtime's per-job ones, SSH's session, this package's own.
NOT_CONFIG_PREFIXES = (
    "TORCHELASTIC_", "PMIX_SERVER_", "PMIX_DSTORE_", "OMPI_MCA_orte_", "SSH_", OURS,
)  # fmt: skip
#: The GPUs HIP and CUDA can see: the key holds how many each lists, so they do
#: not count by value (ranks bound to one GPU each share one evaluation).
DEVICES = (
    "HIP_VISIBLE_DEVICES", "CUDA_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES",
    "GPU_DEVICE_ORDINAL",
)  # fmt: skip
#: Folders that describe the running system, not the config; but for
#: :data:`REAL`, which holds files.
VIRTUAL = ("/proc/", "/sys/", "/dev/")
REAL = ("/dev/shm/",)
#: A file changed less than a tick of the file system's clock before it was
#: read (or stamped) may change again within that tick, its stamp staying as
#: it was: such a file is "racy" (git's racy index entries), and counts by its
#: bytes (:data:`MAX_DIGEST_BYTES`) at every check, not by its stamp. The tick
#: is a jiffy (at most 10 ms: :data:`RACY_NS` holds twice that) where stamps
#: keep fractions of a second; where a stamp is whole seconds (ext4 with
#: 128-byte inodes, many NFS servers, FAT's 2 s), :data:`COARSE_RACY_NS`. A
#: file server whose clock runs ahead of this node's makes every file it
#: recently changed racy: a hash each, never a miss.
RACY_NS = 20_000_000
COARSE_RACY_NS = 2_000_000_000
#: Largest file recorded by its bytes too (a hash): the sources and configs an
#: evaluation reads are a few KB to a few hundred (torchtitan 0.3.0: 3,868 files
#: of 105 MB, hashed in 0.24 s); an extension module's tens of MB count by their
#: stamp alone. A file whose stamp changed but whose bytes did not (``touch``,
#: a ``git checkout`` to another branch and back) changes nothing.
MAX_DIGEST_BYTES = 1 << 20
#: Modules ``site`` imports at start-up when they can be found.
SITE_LOOKUPS = ("sitecustomize", "usercustomize")
#: The import system's own code: a listing it makes is a look-up, which counts
#: by what was looked for. (From Python 3.11 ``os`` and ``site`` are frozen too:
#: their listings are the standard library walking a folder for its caller.)
IMPORT_SYSTEM = frozenset({
    "<frozen importlib._bootstrap>", "<frozen importlib._bootstrap_external>",
    "<frozen zipimport>",
})  # fmt: skip


def counts(name: str) -> bool:
    """Whether a variable read by name is a dependency."""
    return (
        name not in NOT_CONFIG
        and name not in DEVICES
        and not name.startswith(NOT_CONFIG_PREFIXES)
    )


def counts_by_presence(name: str) -> bool:
    """Whether a variable tested for (``"SLURM_JOB_ID" in os.environ``) that
    does not count by value counts by whether it is set: a per-job identifier
    differs between jobs, but a config may build another variant under Slurm."""
    return not counts(name) and name not in DEVICES and not name.startswith(OURS)


def _names_a_folder_read(value: str | None, paths: list[str]) -> bool:
    """Whether a variable's value is a folder under which the evaluation read
    something: then a per-job folder (``TMPDIR``, ``SLURM_JOB_TMPDIR`` ...)
    counts after all, as a config reading ``$TMPDIR/tp.txt`` depends on which
    job's file it is (its path is recorded as it was, another job's folder
    is not looked at)."""
    if not value or not os.path.isabs(value):
        return False
    folder = os.path.normpath(value)
    inside = folder.rstrip(os.sep) + os.sep
    return any(path == folder or path.startswith(inside) for path in paths)


def _virtual(path: str) -> bool:
    if path.startswith(REAL):
        return False
    return path.startswith(VIRTUAL) or path in ("/proc", "/sys", "/dev")


class ChangedDuring(Exception):
    """Something the evaluation read changed while it ran (or just before),
    or the recording failed: its answer may match neither the old nor the new
    state, so no entry."""


# Recording, in the child.


def _path(path: object, dir_fd: int | None = None) -> str | None:
    """An audit event's path as an absolute ``str``: relative to the folder
    ``dir_fd`` is open on, when one was given; a descriptor's, for one (None
    when it names none)."""
    if isinstance(path, int):
        return _fd_path(path)
    if isinstance(path, bytes):
        path = os.fsdecode(path)
    if not isinstance(path, str):
        return None
    if dir_fd is not None and not os.path.isabs(path):
        base = _fd_path(dir_fd)
        return None if base is None else os.path.normpath(os.path.join(base, path))
    return os.path.abspath(path)


def _fd_path(fd: int) -> str | None:
    """What the descriptor ``fd`` is open on (Linux's ``/proc/self/fd``)."""
    try:
        found = os.readlink(f"/proc/self/fd/{fd}")
    except OSError:
        return None
    return found if os.path.isabs(found) else None


class Recorder:
    """Records what the evaluation reads, between :meth:`start` and
    :meth:`deps`. Runs only in the ``--module`` child."""

    def __init__(self) -> None:
        self.opened: dict[str, list[int | None]] = {}
        """Each file read, with its stamp when it was first opened."""
        self.when: dict[str, int] = {}
        """When each file read was stamped (the racy window's end)."""
        self.listed: dict[str, tuple[list[int | None], int, list[str] | None]] = {}
        """Each directory the config listed, with its stamp, the time, and its
        entries then."""
        self.digests: dict[str, str | None] = {}
        """The bytes of each racy file, hashed when it was read."""
        self.modules_listed: set[str] = set()
        """Directories the import machinery listed for modules."""
        self.site_listed: set[str] = set()
        """Directories ``site`` listed for ``.pth`` files."""
        self.searched: set[tuple[str, tuple[str, ...] | None]] = set()
        """Each module looked up, and the folders it was looked for in then
        (None: ``sys.path`` at the end)."""
        self.read: dict[str, str | None] = {}
        """Each variable read by name, with its value then (None: absent)."""
        self.present: dict[str, bool] = {}
        """Each variable tested for that counts by presence, and whether it was
        set then."""
        self.set_here: set[str] = set()
        """Each variable the evaluation set or deleted itself, through
        ``os.environ`` or ``os.environb``: not an input."""
        self.dir_fd: int | None = None
        """The folder descriptor of the ``os.open`` under way, if one."""
        self.on = False
        self.broken = False
        """The recording failed: what was read is not known."""
        self.why = ""
        """Why the recording failed, if it did."""
        self._machinery: tuple[str, ...] = ()

    def start(self) -> None:
        from importlib.util import source_from_cache  # in the child only

        self._source_from_cache = source_from_cache
        stdlib = os.path.dirname(os.__file__)
        self._machinery = (
            os.path.join(stdlib, "importlib") + os.sep,
            os.path.join(stdlib, "pkgutil.py"),
        )
        self._site = ("<frozen site>", os.path.join(stdlib, "site.py"))
        sys.addaudithook(self._audit)
        sys.meta_path.insert(0, _Lookups(self))
        # The "open" event does not say which folder a dir_fd names: the call
        # does.
        opening = os.open

        def opened_in(path: Any, flags: int, mode: int = 0o777, *,
                      dir_fd: int | None = None) -> int:  # fmt: skip
            self.dir_fd = dir_fd
            try:
                return opening(path, flags, mode, dir_fd=dir_fd)
            finally:
                self.dir_fd = None

        os.open = opened_in
        current = os.environ
        # The same variables, now recorded.
        os.environ = _RecordingEnviron(  # noqa: B003
            self,
            str,
            current._data,  # type: ignore[attr-defined]
            current.encodekey,
            current.decodekey,
            current.encodevalue,
            current.decodevalue,
        )
        bytes_environ = getattr(os, "environb", None)
        if bytes_environ is not None:  # POSIX: the same variables, as bytes
            os.environb = _RecordingEnviron(
                self,
                os.fsdecode,
                bytes_environ._data,
                bytes_environ.encodekey,
                bytes_environ.decodekey,
                bytes_environ.encodevalue,
                bytes_environ.decodevalue,
            )
        self.on = True

    @contextlib.contextmanager
    def paused(self) -> Iterator[None]:
        """Nothing recorded meanwhile: the child's own reads (the cache's)."""
        was, self.on = self.on, False
        try:
            yield
        finally:
            self.on = was and not self.broken

    def _audit(self, event: str, args: tuple[Any, ...]) -> None:
        if not self.on or event not in ("open", "os.listdir", "os.scandir"):
            return
        try:
            self._note(event, args)
        except Exception as exc:  # an open or a listing must never fail for it
            self.on = False  # nor be recorded in part: no entry
            self.broken = True
            self.why = f"{type(exc).__name__}: {exc}"

    def _note(self, event: str, args: tuple[Any, ...]) -> None:
        if event == "open":
            if isinstance(args[0], int):
                return  # an open descriptor, wrapped
            path = _path(args[0], self.dir_fd)
            if path is None or _folder(args[2]) or os.path.isdir(path):
                return  # a folder opened to walk it by its descriptor
            if not _reads(args[2]):
                return  # an output; a file it read before still counts
            if path.endswith(".pyc"):
                # A module's compiled form: its source counts (the loader only
                # stat'ed it), stamped now; a sourceless .pyc, or one no source
                # maps to, is its own source.
                with contextlib.suppress(ValueError, NotImplementedError):
                    path = self._source_from_cache(path)
            if path not in self.opened:
                self.when[path] = when = time.time_ns()
                self.opened[path] = stamp = _stamp(path)
                if _racy(stamp, when):  # its bytes as they are read
                    with self.paused():
                        self.digests[path] = _digest(path)
        elif event in ("os.listdir", "os.scandir"):
            path = _path("." if args[0] is None else args[0])
            if path is None:
                return
            caller = sys._getframe(2).f_code.co_filename  # past _audit
            if caller in IMPORT_SYSTEM:
                return  # the import system's finder: its look-ups count
            if caller in self._site:
                self.site_listed.add(path)  # for .pth files
            elif caller.startswith(self._machinery):
                if os.path.basename(path) != "__pycache__":
                    self.modules_listed.add(path)
            elif path not in self.listed:
                when = time.time_ns()
                with self.paused():  # our own listing: not the config's
                    self.listed[path] = (_dir_stamp(path), when, _names(path))

    def deps(self, exclude: str) -> dict[str, Any]:
        """What was read, as the JSON document :func:`check` takes; files under
        the folder ``exclude`` (the cache) do not count. :class:`ChangedDuring`
        when something read changed after the evaluation began."""
        self.on = False
        if self.broken:
            raise ChangedDuring(f"the recording failed ({self.why})")
        then = dict.fromkeys(_module_files())
        then.update(self.opened)
        files = {}
        for path, stamp in then.items():
            if _virtual(path) or path.startswith(exclude + os.sep):
                continue
            files[path] = self._file(path, stamp, self.when.get(path))
        for path in _pth_files():
            files[path] = self._file(path, None, None)
        user_site = _user_site()
        if user_site is not None and not os.path.exists(user_site):
            # It must stay missing.
            files[user_site] = FileRecord._make([*_stamp(user_site), None, False])
        lookups = set(self.searched)
        lookups.update((name, None) for name in SITE_LOOKUPS)
        searched = _import_dirs(lookups)
        for path in self.modules_listed:
            searched.setdefault(path, set()).add(ANY)
        for path in {*self.site_listed, *_site_dirs()}:
            searched.setdefault(path, set()).add(PTH)  # its .pth files
        dirs = []
        seen = _finders()
        for path, names in sorted(searched.items()):
            when = time.time_ns()
            stamp = _dir_stamp(path)
            entries = _matching(path, names)
            if path in seen and _select(seen[path], names) != entries:
                raise ChangedDuring(f"a module appeared or went in {path}")
            racy = _racy(stamp, when)  # its entries count, not its stamp
            dirs.append([path, stamp, sorted(names), entries, racy])
        lists = []
        for path, (stamp, when, listing) in sorted(self.listed.items()):
            if _virtual(path) or os.path.basename(path) == "__pycache__":
                continue
            now = _dir_stamp(path)
            if stamp != now or _names(path) != listing:
                raise ChangedDuring(f"{path} changed during the evaluation")
            # Racy as of the listing (the evaluation's own __pycache__ may
            # have been made in it since it began).
            lists.append([path, now, listing, _racy(now, when)])
        paths = [*files, *(str(d[0]) for d in dirs), *(str(x[0]) for x in lists)]
        return {
            "files": [[p, *s] for p, s in sorted(files.items())],
            "dirs": dirs,
            "lists": lists,
            "env": {
                name: value
                for name, value in sorted(self.read.items())
                if counts(name)
                or (counts_by_presence(name) and _names_a_folder_read(value, paths))
            },
            "present": dict(sorted(self.present.items())),
        }

    def _file(
        self, path: str, then: list[int | None] | None, when: int | None
    ) -> FileRecord:
        """A file's record: its stamp, the hash of its bytes (None for one too
        big, or missing), and whether it is racy as of when it was read
        (``when``; now, for one stamped only now): then it counts by the hash
        alone. :class:`ChangedDuring` if it changed since it was read (stamp
        ``then``), by its stamp or, racy, by its bytes; or is racy and too big
        to hash."""
        if when is None:
            when = time.time_ns()
        now = _stamp(path)
        if then is not None and then != now:
            raise ChangedDuring(f"{path} changed during the evaluation")
        digest = _digest(path)
        racy = _racy(now, when)
        if racy:
            if digest is None and now[0] is not None:
                raise ChangedDuring(f"{path} changed as the evaluation ran")
            if path in self.digests and self.digests[path] != digest:
                raise ChangedDuring(f"{path} changed during the evaluation")
        return FileRecord._make([*now, digest, racy])


class FileRecord(NamedTuple):
    """A file an evaluation read, as its record keeps it (after its path, in
    this order, in an entry's JSON): its stamp (:func:`_stamp`), the hash of
    its bytes (None for one too big, or missing), and whether it was racy as
    of when it was read (then it counts by the hash alone)."""

    mtime: int | None
    size: int | None
    inode: int | None
    ctime: int | None
    digest: str | None
    racy: bool

    @property
    def stamp(self) -> list[int | None]:
        return [self.mtime, self.size, self.inode, self.ctime]


def _folder(flags: object) -> bool:
    return isinstance(flags, int) and bool(flags & os.O_DIRECTORY)


def _reads(flags: object) -> bool:
    """Whether an ``open`` reads the file, by its audit event's flags (the
    built-in ``open``'s mode made into them: ``r``, ``r+`` and ``a+`` read):
    ``O_RDONLY``, ``O_RDWR`` without ``O_TRUNC`` or ``O_EXCL`` (a file it
    creates, as ``tempfile.mkstemp`` does); not a pure write."""
    if isinstance(flags, int):
        access = flags & os.O_ACCMODE
        if access == os.O_WRONLY:
            return False
        return not (access == os.O_RDWR and flags & (os.O_TRUNC | os.O_EXCL))
    return True


class _Keys(KeysView[str]):
    """``keys()`` of the recording environment: a listing ``dict()`` then reads
    key by key (``dict(os.environ)``, ``copy()``, ``{**os.environ}``)."""

    _mapping: _RecordingEnviron

    def __iter__(self) -> Iterator[str]:
        return self._mapping._walk(listing=True)


class _RecordingEnviron(os._Environ[Any]):
    """``os.environ`` (or ``os.environb``) that remembers each variable read by
    name, with its value then (None: absent), whatever walked the environment
    before. Not reads by name: reads inside a walk over the whole environment
    (of the key an iteration just handed out and is not done with: a loop over
    ``os.environ``, ``items()``, ``values()``; or, right after a listing
    through ``keys()``, of its keys in its order: ``dict(os.environ)``,
    ``copy()``), and reads of a variable the evaluation set itself."""

    def __init__(self, recorder: Recorder, text: Any, *args: Any) -> None:
        super().__init__(*args)
        self.recorder = recorder
        self.read = recorder.read
        self.present = recorder.present
        self.text = text
        """A key or value as ``str`` (``os.fsdecode`` for ``os.environb``)."""
        self.set_here = recorder.set_here
        self.current: dict[int, Any] = {}
        """The key each unfinished iteration handed out last, by iteration."""
        self.replay: list[Any] = []
        """A listing just made, reversed: the reads that may follow it, from the
        same call (:attr:`listing_site`)."""
        self.listing_site: tuple[Any, int] | None = None
        """The frame and instruction that asked for ``keys()``: ``dict()``,
        ``copy()``, ``{**os.environ}`` read them back from C, in that one
        instruction; a read from anywhere else is a read by name."""

    def _walk(self, listing: bool = False) -> Iterator[Any]:
        keys = list(self._data)  # type: ignore[attr-defined]  # as os._Environ
        walk = object()
        self.replay = []
        try:
            for encoded in keys:
                key = self.decodekey(encoded)
                self.current[id(walk)] = key
                yield key
            if listing:
                self.replay = [self.decodekey(k) for k in reversed(keys)]
        finally:
            self.current.pop(id(walk), None)

    def __iter__(self) -> Iterator[Any]:
        return self._walk()

    def keys(self) -> KeysView[Any]:
        caller = sys._getframe(1)
        self.listing_site = (caller, caller.f_lasti)
        return _Keys(self)

    def _in_walk(self, key: Any, reader: Any) -> bool:
        """Whether a read of ``key`` from the frame ``reader`` is a walk's."""
        if self.replay:
            site = self.listing_site
            same_call = site is not None and site == (reader, reader.f_lasti)
            if same_call and self.replay[-1] == key:
                self.replay.pop()
                return True
            self.replay = []  # not the listing's reads: it is over
        return key in self.current.values()

    def __contains__(self, key: Any) -> bool:
        name = ""
        try:
            name = self.text(key)
            by_presence = (self.recorder.on and counts_by_presence(name)
                           and name not in self.set_here)  # fmt: skip
        except Exception:  # never fail a test for the recording
            by_presence = False
        if not by_presence:
            return super().__contains__(key)  # a read: counted by value, or not
        try:
            present = self.encodekey(key) in self._data  # type: ignore[attr-defined]
        except Exception:
            return super().__contains__(key)
        self.present.setdefault(name, present)
        return present

    def __getitem__(self, key: Any) -> Any:
        try:
            reader = sys._getframe(1)
            counted = (self.recorder.on and not self._in_walk(key, reader)
                       and self.text(key) not in self.set_here)  # fmt: skip
        except Exception:  # never fail a read for the recording: count it
            counted = True
        try:
            value = super().__getitem__(key)
        except KeyError:
            if counted:
                self.read.setdefault(self.text(key), None)
            raise
        if counted:
            self.read.setdefault(self.text(key), self.text(value))
        return value

    def _set_here(self, key: Any) -> None:
        with contextlib.suppress(Exception):  # no name: the write fails
            self.set_here.add(self.text(key))

    def __setitem__(self, key: Any, value: Any) -> None:
        self._set_here(key)
        self.replay = []
        super().__setitem__(key, value)

    def __delitem__(self, key: Any) -> None:
        self._set_here(key)
        self.replay = []
        super().__delitem__(key)


def _module_files() -> set[str]:
    """The file of every module loaded from one (its source, or a sourceless
    .pyc, an extension module): not built-in or frozen ones, nor objects put
    in ``sys.modules`` that are no modules."""
    from importlib.machinery import ModuleSpec  # in the child only

    files = set()
    for module in list(sys.modules.values()):
        spec = getattr(module, "__spec__", None)
        if (
            isinstance(spec, ModuleSpec)
            and spec.has_location
            and isinstance(spec.origin, str)
        ):
            files.add(os.path.abspath(spec.origin))
    return files


def _site_dirs() -> list[str]:
    """The site directories: the only ones whose ``.pth`` files ``site``
    reads."""
    import site

    return [os.path.abspath(f) for f in (*site.getsitepackages(),
                                          site.getusersitepackages())]  # fmt: skip


def _pth_files() -> set[str]:
    """The ``.pth`` files of the site directories: ``site`` read them before
    any recording could start, and they shape ``sys.path``."""
    found: set[str] = set()
    for folder in _site_dirs():
        with contextlib.suppress(OSError):  # no such folder
            names = os.listdir(folder)
            found.update(os.path.join(folder, n) for n in names if n.endswith(".pth"))
    return found


def _user_site() -> str | None:
    """The user site folder when ``site`` would add it (``pip install --user``
    may create it later), else None."""
    import site

    if not site.ENABLE_USER_SITE:
        return None
    return os.path.abspath(site.getusersitepackages())


class _Lookups:
    """A finder that finds nothing: it notes each module looked up and where
    (``path``: the parent package's ``__path__``, or None for ``sys.path``)."""

    def __init__(self, recorder: Recorder) -> None:
        self.recorder = recorder

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> None:
        if self.recorder.on:
            try:  # sys.path as it is now: a folder may be on it only a while
                where = tuple(sys.path if path is None else path)
            except TypeError:
                return None
            self.recorder.searched.add((name, where))
        return None


def _import_dirs(
    searched: set[tuple[str, tuple[str, ...] | None]],
) -> dict[str, set[str]]:
    """Each directory the import system searched, existing or not, with the
    module names it looked for there (the last part of each name)."""
    found: dict[str, set[str]] = {}
    for name, path in searched:
        last = name.rpartition(".")[2]
        for entry in sys.path if path is None else path:
            if isinstance(entry, str):
                folder = os.path.abspath(entry)  # "": the working directory
                found.setdefault(folder, set()).add(last)
    return found


def _finders() -> dict[str, set[str]]:
    """What the import system's finders last listed of each directory."""
    seen = {}
    for finder in list(sys.path_importer_cache.values()):
        names = getattr(finder, "_path_cache", None)
        folder = getattr(finder, "path", None)
        if (
            isinstance(names, set)
            and isinstance(folder, str)
            and getattr(finder, "_path_mtime", -1) != -1
        ):
            seen[os.path.abspath(folder)] = names
    return seen


# Checking, in a later launch.


def _stamp(path: str) -> list[int | None]:
    """What tells a file changed: modification time (ns), size, inode, change
    time (ns) (a file replaced by ``cp -p``, ``rsync -a``, ``mv`` keeps the
    first two)."""
    try:
        info = os.stat(path)
    except OSError:
        return [None, None, None, None]
    return [info.st_mtime_ns, info.st_size, info.st_ino, info.st_ctime_ns]


def _racy(stamp: list[int | None], when: int) -> bool:
    """Whether a stamp taken at ``when`` (ns) cannot tell a change in the same
    tick of the file system's clock from none: its change time (its last) is
    less than a tick before ``when``, or later. A stamp of whole seconds (its
    modification and change time) has a tick of :data:`COARSE_RACY_NS`."""
    changed, modified = stamp[-1], stamp[0]
    if changed is None:
        return False
    coarse = changed % 1_000_000_000 == 0 and (modified or 0) % 1_000_000_000 == 0
    return changed + (COARSE_RACY_NS if coarse else RACY_NS) > when


def _digest(path: str) -> str | None:
    """The hash of a file's bytes, or None: missing, unreadable, not a regular
    file, or bigger than :data:`MAX_DIGEST_BYTES`."""
    import hashlib  # the child, and a check of a changed stamp

    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        data = read_open(fd, MAX_DIGEST_BYTES)  # a regular file, bounded
    except ConfigError:
        return None
    finally:
        os.close(fd)
    return hashlib.blake2b(data, digest_size=16).hexdigest()


def _dir_stamp(path: str) -> list[int | None]:
    """When to list a directory again: modification and change time, inode
    (of its zip file, for a folder inside one)."""
    try:
        info = os.stat(path)
    except NotADirectoryError:  # inside a file: a zip on the path
        archive = _archive(path)
        return [None, None, None] if archive is None else _dir_stamp(archive[0])
    except OSError:
        return [None, None, None]
    return [info.st_mtime_ns, info.st_ino, info.st_ctime_ns]


def _names(path: str) -> list[str] | None:
    """The entries of a directory, or of a zip file (or a folder inside one)
    on the import path; None when it cannot be listed."""
    try:
        return sorted(os.listdir(path))
    except NotADirectoryError:
        pass
    except OSError:
        return None
    archive = _archive(path)
    if archive is None:
        return None
    import zipfile  # a zip on the import path: rare

    zip_file, inner = archive
    prefix = f"{inner}/" if inner else ""
    try:
        with zipfile.ZipFile(zip_file) as opened:
            listed = opened.namelist()
    except (OSError, zipfile.BadZipFile):
        return None
    return sorted({n[len(prefix) :].split("/")[0] for n in listed
                   if n.startswith(prefix) and n[len(prefix) :]})  # fmt: skip


def _archive(path: str) -> tuple[str, str] | None:
    """``(zip file, folder inside it)`` for a path into a file, else None."""
    inner: list[str] = []
    head = path
    while head and head != os.sep:
        if os.path.isfile(head):
            return head, "/".join(reversed(inner))
        head, tail = os.path.split(head)
        inner.append(tail)
    return None


#: A look-up of any module: a directory the import machinery listed.
ANY = "*"
#: A look-up of ``.pth`` files: a directory ``site`` read (only there can one
#: change what is imported; one in a ``PYTHONPATH`` folder is never read).
PTH = "*.pth"


def _select(listing: set[str] | list[str], names: set[str] | list[str]) -> list[str]:
    """The entries of ``listing`` that could be imported as one of ``names``
    (``name`` as a package, ``name.py``, ``name.cpython-311-x86_64-linux-gnu.so``
    ...: any of ``importlib.machinery.all_suffixes()``; any module for
    :data:`ANY`), and ``.pth`` files for :data:`PTH`."""
    from importlib.machinery import all_suffixes

    suffixes = tuple(all_suffixes())
    wanted = set(names)
    anything = ANY in wanted
    pth = PTH in wanted
    found = []
    for entry in listing:
        if entry == "__pycache__":
            continue
        if (pth and entry.endswith(".pth")) or entry in wanted:
            found.append(entry)
            continue
        stem, dot, _ = entry.partition(".")
        if not dot:
            if anything:
                found.append(entry)  # a package, or a namespace folder
        elif (anything or stem in wanted) and any(
            entry == stem + suffix for suffix in suffixes
        ):
            found.append(entry)
        elif anything and entry.endswith((".dist-info", ".egg-info")):
            found.append(entry)  # metadata: entry points
    return sorted(found)


def _matching(path: str, names: set[str] | list[str]) -> list[str] | None:
    """The entries of a searched directory that matter (:func:`_select`), or
    None when it cannot be listed (missing: it must stay so)."""
    listing = _names(path)
    if listing is None:
        return None
    return _select(listing, names)


def changed(deps: Mapping[str, Any], environ: Mapping[str, str]) -> str | None:
    """None when nothing the evaluation read has changed, else what did (one
    phrase). ``deps`` comes from the cache: a malformed one raises
    ``ValueError``, ``TypeError`` or ``KeyError``, which callers treat as
    corrupt."""
    for name, value in deps["env"].items():
        if environ.get(name) != value:
            return f"{name} changed"
    for name, present in deps.get("present", {}).items():
        if (name in environ) is not present:
            return f"{name} appeared or went"
    for path, *kept in deps["files"]:
        file = FileRecord._make(kept)
        now = _stamp(path)
        if now == file.stamp and not file.racy:
            continue
        if file.digest is None or now[0] is None or _digest(path) != file.digest:
            return f"{path} changed"  # by its bytes, where they were hashed
    for path, stamp, names, entries, racy in deps["dirs"]:
        now = _dir_stamp(path)
        if (now != stamp or racy) and (
            None in (now[0], stamp[0]) or _matching(path, names) != entries
        ):  # it appeared (a folder or a zip file) or went, or its modules did
            return f"a module appeared or went in {path}"
    for path, stamp, entries, racy in deps["lists"]:
        if (_dir_stamp(path) != stamp or racy) and _names(path) != entries:
            return f"{path} gained or lost an entry"
    return None

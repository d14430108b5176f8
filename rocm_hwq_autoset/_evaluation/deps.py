"""What a ``--module`` evaluation depended on, and whether that has changed.

The child records what the evaluation actually read, through Python's audit
events (``open``, ``os.listdir``, ``os.scandir``), a finder first on
``sys.meta_path`` that sees every module looked up (``import`` statements and
``importlib.import_module`` alike, found or not), and a recording
``os.environ``; :func:`check` tells a later launch whether any of it changed.
The real evaluation reads a lot (torchtitan 0.3.0: ~460 variables, ~500
directories, ~3,900 files), so what counts is a rule, written down here and in
docs/design.md ("The cache of evaluations"):

* **Files**: every module it imported (its source or extension file) and every
  other file it opened for reading, by modification time (ns) and size, as
  ``__pycache__`` checks sources; a file it opened that did not exist must still
  not exist. Not counted: files it wrote, compiled ``.pyc`` files (their source
  counts), and ``/proc``, ``/sys``, ``/dev`` (they describe the process, not
  the config).
* **Directories the import system searched** (``sys.path`` and packages'
  ``__path__``): only their entries that could be a module it imported or tried
  to import (``name``, ``name.*``) and ``.pth`` files. A new log file beside the
  job script changes nothing; a module now shadowing another, or one that was
  missing and now exists, does.
* **Other directories it listed**: every entry.
* **Environment variables it read by name**, with their values (or absence). Not
  counted: variables a library read while walking the whole environment (tqdm,
  fsspec, networkx do at import); per-rank and per-job identifiers; shell
  bookkeeping (:data:`NOT_CONFIG`); this package's own variables.

A directory is listed again only when its modification time changed, so a check
costs one ``stat`` per file and directory.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator, Mapping
from typing import Any

#: Variables that never change what a config builds, although the evaluation may
#: read them by name: per-rank and per-node identifiers, per-job identifiers,
#: the rendezvous endpoint, shell and terminal bookkeeping.
NOT_CONFIG = frozenset({
    # per rank / node
    "RANK", "LOCAL_RANK", "GROUP_RANK", "ROLE_RANK", "NODE_RANK", "ROLE_NAME",
    "SLURM_PROCID", "SLURM_LOCALID", "SLURM_NODEID", "SLURM_TASK_PID",
    "SLURMD_NODENAME", "SLURM_TOPOLOGY_ADDR", "OMPI_COMM_WORLD_RANK",
    "OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_NODE_RANK", "PMI_RANK",
    "PMIX_RANK", "PMI_FD", "MV2_COMM_WORLD_RANK", "MV2_COMM_WORLD_LOCAL_RANK",
    "MPI_LOCALRANKID", "FLUX_TASK_RANK", "FLUX_TASK_LOCAL_ID", "HOSTNAME", "HOST",
    # per job
    "SLURM_JOB_ID", "SLURM_JOBID", "SLURM_STEP_ID", "SLURM_STEPID",
    "SLURM_JOB_START_TIME", "SLURM_JOB_END_TIME", "SLURM_SRUN_COMM_PORT",
    "SLURM_STEP_LAUNCHER_PORT", "SLURM_LAUNCH_NODE_IPADDR", "PBS_JOBID",
    "LSB_JOBID", "JOB_ID", "FLUX_JOB_ID", "COBALT_JOBID", "MASTER_ADDR",
    "MASTER_PORT",
    # shell and terminal
    "PWD", "OLDPWD", "SHLVL", "_", "TERM", "COLUMNS", "LINES", "PS1", "PS2", "PS4",
    "PROMPT_COMMAND", "HISTFILE", "HISTSIZE", "HISTFILESIZE", "HISTCONTROL",
    "DISPLAY", "WINDOWID", "TMUX", "TMUX_PANE", "STY", "WINDOW", "MAIL",
    "LS_COLORS", "LESSOPEN", "LESSCLOSE", "COLORTERM", "TERM_PROGRAM",
    "TERM_PROGRAM_VERSION", "TERM_SESSION_ID", "XDG_SESSION_ID",
    "XDG_RUNTIME_DIR", "DBUS_SESSION_BUS_ADDRESS", "KRB5CCNAME",
})  # fmt: skip
#: Prefixes of such variables: torch elastic's per-run ones, SSH's session.
NOT_CONFIG_PREFIXES = ("TORCHELASTIC_", "SSH_", "ROCM_HWQ_AUTOSET")
#: Folders that describe the running system, not the config.
VIRTUAL = ("/proc/", "/sys/", "/dev/")


def counts(name: str) -> bool:
    """Whether a variable read by name is a dependency."""
    return name not in NOT_CONFIG and not name.startswith(NOT_CONFIG_PREFIXES)


def _virtual(path: str) -> bool:
    return path.startswith(VIRTUAL) or path in ("/proc", "/sys", "/dev")


# Recording, in the child.


class Recorder:
    """Records what the evaluation reads, between :meth:`start` and
    :meth:`deps`. Runs only in the ``--module`` child."""

    def __init__(self) -> None:
        self.opened: set[str] = set()
        self.written: set[str] = set()
        self.listed: set[str] = set()
        self.searched: set[tuple[str, tuple[str, ...] | None]] = set()
        self.read: dict[str, str | None] = {}
        """Each variable read by name, with its value then (None: absent)."""
        self.on = False

    def start(self) -> None:
        sys.addaudithook(self._audit)
        sys.meta_path.insert(0, _Lookups(self))
        current = os.environ
        # The same variables, now recorded.
        os.environ = _RecordingEnviron(  # noqa: B003
            self.read,
            current._data,  # type: ignore[attr-defined]
            current.encodekey,
            current.decodekey,
            current.encodevalue,
            current.decodevalue,
        )
        self.on = True

    def _audit(self, event: str, args: tuple[Any, ...]) -> None:
        if not self.on:
            return
        if event == "open":
            path, mode, flags = args
            if not isinstance(path, str):
                return
            if _writes(mode, flags):
                self.written.add(os.path.abspath(path))
            else:
                self.opened.add(os.path.abspath(path))
        elif event in ("os.listdir", "os.scandir"):
            path = args[0]
            if path is None:
                path = "."
            if isinstance(path, str):
                self.listed.add(os.path.abspath(path))

    def deps(self, exclude: str) -> dict[str, Any]:
        """What was read, as the JSON document :func:`check` takes; files under
        the folder ``exclude`` (the cache) do not count."""
        self.on = False
        files = _module_files()
        for path in self.opened - self.written:
            # Compiled files: a module's source counts (a sourceless one's
            # .pyc is its source: _module_files has it).
            if _virtual(path) or path.endswith(".pyc"):
                continue
            if not path.startswith(exclude + os.sep):
                files.add(path)
        files.update(_pth_files())
        searched = _import_dirs(self.searched)
        listings = {
            p: None
            for p in self.listed
            if p not in searched and not _virtual(p)
            and os.path.basename(p) != "__pycache__"
        }  # fmt: skip
        return {
            "files": [[p, *_stamp(p)] for p in sorted(files)],
            "dirs": [
                [p, _mtime(p), sorted(names), _matching(p, names)]
                for p, names in sorted(searched.items())
            ],
            "lists": [[p, _mtime(p), _names(p)] for p in sorted(listings)],
            "env": {k: v for k, v in sorted(self.read.items()) if counts(k)},
        }


def _writes(mode: object, flags: object) -> bool:
    if isinstance(mode, str):
        return any(c in mode for c in "wax+")
    if isinstance(flags, int):
        return bool(flags & (os.O_WRONLY | os.O_RDWR | os.O_CREAT))
    return False


class _RecordingEnviron(os._Environ[str]):
    """``os.environ`` that remembers each variable read by name, with its value
    then (None: absent). Not reads by name: reads of keys just handed out by a
    walk over the whole environment (``items()``, ``copy()``,
    ``dict(os.environ)``), and reads of a variable the evaluation set itself."""

    def __init__(self, read: dict[str, str | None], *args: Any) -> None:
        super().__init__(*args)
        self.read = read
        self.walked: set[str] = set()
        self.set_here: set[str] = set()

    def __getitem__(self, key: str) -> str:
        counted = key not in self.walked and key not in self.set_here
        self.walked.discard(key)
        try:
            value: str = super().__getitem__(key)
        except KeyError:
            if counted:
                self.read.setdefault(key, None)
            raise
        if counted:
            self.read.setdefault(key, value)
        return value

    def __setitem__(self, key: str, value: str) -> None:
        self.set_here.add(key)
        super().__setitem__(key, value)

    def __delitem__(self, key: str) -> None:
        self.set_here.add(key)
        super().__delitem__(key)

    def __iter__(self) -> Iterator[str]:
        for key in super().__iter__():
            self.walked.add(key)
            yield key


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


def _pth_files() -> set[str]:
    """The ``.pth`` files of the site directories: ``site`` read them before
    any recording could start, and they shape ``sys.path``."""
    import site

    found: set[str] = set()
    for folder in [*site.getsitepackages(), site.getusersitepackages()]:
        with contextlib.suppress(OSError):  # no such folder
            names = os.listdir(folder)
            found.update(os.path.join(folder, n) for n in names if n.endswith(".pth"))
    return found


class _Lookups:
    """A finder that finds nothing: it notes each module looked up and where
    (``path``: the parent package's ``__path__``, or None for ``sys.path``)."""

    def __init__(self, recorder: Recorder) -> None:
        self.recorder = recorder

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> None:
        if self.recorder.on:
            try:
                where = None if path is None else tuple(path)
            except TypeError:
                return None
            self.recorder.searched.add((name, where))
        return None


def _import_dirs(
    searched: set[tuple[str, tuple[str, ...] | None]],
) -> dict[str, set[str]]:
    """Each directory the import system searched, with the module names it
    looked for there (the last part of each name)."""
    found: dict[str, set[str]] = {}
    for name, path in searched:
        last = name.rpartition(".")[2]
        for entry in sys.path if path is None else path:
            if isinstance(entry, str):
                folder = os.path.abspath(entry)  # "": the working directory
                if os.path.isdir(folder):
                    found.setdefault(folder, set()).add(last)
    return found


# Checking, in a later launch.


def _stamp(path: str) -> list[int | None]:
    try:
        info = os.stat(path)
    except OSError:
        return [None, None]
    return [info.st_mtime_ns, info.st_size]


def _mtime(path: str) -> int | None:
    try:
        return os.stat(path).st_mtime_ns
    except OSError:
        return None


def _names(path: str) -> list[str] | None:
    try:
        return sorted(os.listdir(path))
    except OSError:
        return None


def _matching(path: str, names: set[str] | list[str]) -> list[str] | None:
    """The entries of a searched directory that could be one of ``names``
    (``name``, ``name.py``, ``name.cpython-311-x86_64-linux-gnu.so`` ...) or a
    ``.pth`` file."""
    listing = _names(path)
    if listing is None:
        return None
    wanted = set(names)
    return [e for e in listing if e.partition(".")[0] in wanted or e.endswith(".pth")]


def check(deps: Mapping[str, Any], environ: Mapping[str, str]) -> str | None:
    """None when nothing the evaluation read has changed, else what did (one
    phrase). ``deps`` comes from the cache: a malformed one raises
    ``ValueError``, ``TypeError`` or ``KeyError``, which callers treat as
    corrupt."""
    for name, value in deps["env"].items():
        if environ.get(name) != value:
            return f"{name} changed"
    for path, mtime, size in deps["files"]:
        if _stamp(path) != [mtime, size]:
            return f"{path} changed"
    for path, mtime, names, entries in deps["dirs"]:
        if _mtime(path) != mtime and _matching(path, names) != entries:
            return f"a module appeared or went in {path}"
    for path, mtime, entries in deps["lists"]:
        if _mtime(path) != mtime and _names(path) != entries:
            return f"{path} gained or lost an entry"
    return None

"""The cache of ``--module`` evaluations: where it lives, when an entry is
trusted, how entries are written and pruned, and the per-host lock through which
the ranks of one node share one evaluation.

An entry is a JSON file named after a key: what a later launch must match
exactly (the training arguments, the interpreter, the working directory, the
variables that shape ``sys.path`` and the visible GPUs).
It holds the evaluation's result (the model's inputs and every field with its
source) and what the evaluation read (``deps``), checked before every use.

Safety: the directory is created private (0700); it and an entry are trusted
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
import errno
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


#: The layout of an entry; another layout is not read.
FORMAT = 3
#: The most times a node takes an entry in a row without a check of it
#: completing (anywhere): the next launch evaluates before training starts.
#: A check that completes stores the entry anew, with a new ``id``.
MAX_UNCHECKED = 2
#: Entries kept: one per distinct launch (arguments, directory, interpreter); a
#: few hundred KB each with torchtitan 0.3.0 (the paths of ~3,900 files).
MAX_ENTRIES = 32
#: Largest entry read: torchtitan 0.3.0's are ~0.5 MB.
MAX_ENTRY_BYTES = 16 << 20
#: Temporary, lock and result files older than this are left-overs.
STALE_SECONDS = 24 * 3600
#: Largest record of an entry's times taken unchecked read: its lines are an
#: entry's id each, 17 bytes; over half of it, the records start again.
MAX_SERVED_BYTES = 4096
#: Variables read before any Python code of the child runs (the interpreter's
#: own, which shape ``sys.path``) or by C code (the GPUs HIP and CUDA can see:
#: :data:`.deps.DEVICES`, by their count): part of the key, since no recording
#: sees them.
KEY_VARIABLES = (
    "PYTHONPATH", "PYTHONHOME", "PYTHONSAFEPATH", "PYTHONNOUSERSITE",
    "PYTHONUSERBASE", "PYTHONPLATLIBDIR", *DEVICES,
)  # fmt: skip


#: A host's part of a file name (:func:`host`).
_HOST = r"[A-Za-z0-9_.-]{1,64}"
#: The names the cache makes, and the only ones it ever removes: an entry
#: (``<key>.json``), a node's lock and published answer (``<key>.<host>.lock``,
#: ``<key>.<host>.result``), the lock of a node's background check
#: (``<key>.<host>.check``), the node's record of the times it took the entry
#: unchecked (``<key>.<host>.served``) and the temporary file of any of those
#: (``<name>.<host>.<pid>.tmp``).
OWN_NAME = re.compile(
    rf"[0-9a-f]{{32}}(?:\.json|\.{_HOST}\.(?:lock|result|check|served))"
    rf"(?:\.{_HOST}\.[0-9]{{1,10}}\.tmp)?",
    re.ASCII,
)
#: The names of entries.
ENTRY_NAME = re.compile(r"[0-9a-f]{32}\.json", re.ASCII)
#: An entry's id: a new one at each store.
ID = re.compile(r"[0-9a-f]{16}", re.ASCII)
#: The mark of a directory the cache made (or found empty): the Cache Directory
#: Tagging convention's file (backup tools skip such directories). Only a
#: directory that holds it, and nothing but names of the cache's own form, is
#: ever pruned: a name of that form in a folder of the user's may be theirs.
TAG = "CACHEDIR.TAG"
TAG_TEXT = (
    "Signature: 8a477f597d28d172789f06886806bc55\n"
    f"# This file is a cache directory tag created by {NAME}.\n"
    "# For information about cache directory tags see https://bford.info/cachedir/\n"
)


def location(environ: Mapping[str, str]) -> str:
    """The cache directory for this environment: ``ROCM_HWQ_AUTOSET_CACHE_DIR``,
    else ``$XDG_CACHE_HOME/rocm-hwq-autoset``, else ``~/.cache/rocm-hwq-autoset``;
    where there is no home (``HOME`` unset or relative, and no passwd entry),
    a folder of this user's in the system's temporary directory, never a
    literal ``~`` in the working directory. ``ConfigError`` for a
    ``ROCM_HWQ_AUTOSET_CACHE_DIR`` under a home there is none of."""
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
        import tempfile

        return os.path.join(tempfile.gettempdir(), f"{NAME}-{os.getuid()}")
    return os.path.join(home, ".cache", NAME)


def _home(environ: Mapping[str, str]) -> str | None:
    """This user's home: ``HOME`` when it is an absolute path, else the passwd
    entry's; None for a uid with neither."""
    home = environ.get("HOME", "")
    if os.path.isabs(home):
        return home
    try:
        import pwd

        found = pwd.getpwuid(os.getuid()).pw_dir
    except (ImportError, KeyError):  # a uid with no passwd entry
        return None
    return found if os.path.isabs(found) else None


def key(
    args: Sequence[str],
    environ: Mapping[str, str],
    interpreter: tuple[Sequence[str], str | None] = ((), None),
) -> str:
    """What a launch must match exactly to use an entry, hashed: 32 hex digits.
    The entry's format; the interpreter, by its real path, ``sys.prefix``'s
    and version (``venv/bin/python``, ``python3``, a console script's shebang
    and the venv reached through a link share entries; two venvs of one Python
    do not); the working directory, the
    arguments and :data:`KEY_VARIABLES` (the visible GPUs by how many each
    lists, not which: ranks bound to one GPU each share an entry), in that
    order; the interpreter's options that change where imports come from and
    the first ``sys.path`` entry it puts (``parent.interpreter_of``). JSON
    escapes every character that is not ASCII (an argument of undecodable bytes
    too)."""
    fields = [FORMAT, os.path.realpath(sys.executable), os.path.realpath(sys.prefix),
              sys.version,
              os.getcwd(), list(args), list(interpreter[0]), interpreter[1],
              [_devices(environ.get(name)) if name in DEVICES else environ.get(name)
               for name in KEY_VARIABLES]]  # fmt: skip
    return hashlib.sha256(json.dumps(fields).encode()).hexdigest()[:32]


def _devices(value: str | None) -> int | None:
    """How many devices a ``*_VISIBLE_DEVICES`` value lists (comma-separated);
    None when unset, 0 when empty."""
    if value is None:
        return None
    return sum(1 for item in value.split(",") if item.strip())


def host() -> str:
    """This node's name, as a file name: the coordination never spans nodes."""
    name = os.uname().nodename or "localhost"
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in name)[:64]


class Entry:
    """An entry taken from the cache: its config, and its ``id`` (new at each
    store: a completed check stores the entry anew)."""

    __slots__ = ("config", "id")

    def __init__(self, config: Config, id: str) -> None:
        self.config = config
        self.id = id


class Cache:
    """A usable cache directory (see :func:`open_cache`)."""

    def __init__(self, path: str) -> None:
        self.path = path

    def entry(self, key: str) -> str:
        return os.path.join(self.path, f"{key}.json")

    def lookup(self, key: str, environ: Mapping[str, str]) -> tuple[Entry | None, str]:
        """The entry when it is trusted, nothing it depended on changed, and
        this node took it fewer than :data:`MAX_UNCHECKED` times since a check
        of it completed; else None. And one phrase saying which."""
        path = self.entry(key)
        try:
            data = _read_trusted(path, MAX_ENTRY_BYTES)
        except FileNotFoundError:
            return None, "no entry"
        except (OSError, ConfigError) as exc:
            return None, f"entry ignored: {exc}"
        try:
            doc = json.loads(data)
            if doc["format"] != FORMAT:
                return None, "entry of another format"
            change = changed(doc["deps"], environ)
            if change is not None:
                return None, f"stale: {change}"
            if not isinstance(doc["id"], str) or not ID.fullmatch(doc["id"]):
                raise ValueError("no id")
            found = Entry(config_from_json(doc["result"]), doc["id"])
        except Exception:  # hostile or damaged: RecursionError, MemoryError ...
            return None, "entry ignored: corrupt"
        if self.unchecked(key, found.id) >= MAX_UNCHECKED:
            return None, (
                f"taken {MAX_UNCHECKED} times on this node with no check of it"
                " completed"
            )
        with contextlib.suppress(OSError):
            os.utime(path)  # recently used: pruned last
        return found, "hit"

    def served_file(self, key: str) -> str:
        return os.path.join(self.path, f"{key}.{host()}.served")

    def unchecked(self, key: str, entry_id: str) -> int:
        """How many times this node took the entry ``entry_id`` unchecked (a
        record that cannot be trusted or read: as many as may be)."""
        try:
            data = _read_trusted(self.served_file(key), MAX_SERVED_BYTES)
        except FileNotFoundError:
            return 0
        except (OSError, ConfigError):
            return MAX_UNCHECKED
        return data.split().count(entry_id.encode())

    def served(self, key: str, entry_id: str) -> None:
        """Note that this node took the entry ``entry_id``, unchecked as yet
        (one short line, appended: a record of another id is a stale one).
        ``OSError`` if it cannot."""
        path = self.served_file(key)
        flags = os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW | os.O_CLOEXEC
        fd = os.open(path, flags, 0o600)
        try:
            if os.fstat(fd).st_size > MAX_SERVED_BYTES // 2:  # old records
                os.ftruncate(fd, 0)
            os.write(fd, f"{entry_id}\n".encode())
        finally:
            os.close(fd)

    def remove(self, key: str) -> None:
        """Remove the entry (an evaluation found it wrong); ``OSError`` if it
        cannot."""
        os.unlink(self.entry(key))

    def store(self, key: str, config: Config, deps: dict[str, Any]) -> None:
        """Write an entry atomically, with a new ``id``, then prune. ``OSError``
        if it cannot."""
        doc = {"format": FORMAT, "id": secrets.token_hex(8),
               "result": config_to_json(config), "deps": deps}  # fmt: skip
        self._write(self.entry(key), json.dumps(doc, separators=(",", ":")))
        self.prune()

    def _write(self, path: str, text: str) -> None:
        temp = f"{path}.{host()}.{os.getpid()}.tmp"
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW
        fd = os.open(temp, flags, 0o600)
        try:
            with os.fdopen(fd, "wb") as out:
                out.write(text.encode())  # JSON: ASCII
            os.replace(temp, path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(temp)
            raise

    def count(self) -> int:
        return len(self._entries()[0])

    def _entries(self) -> tuple[list[tuple[float, str]], list[os.DirEntry[str]], bool]:
        """The entries (modification time, path), oldest first; the other files
        of the cache's own form; and whether the directory holds anything else
        (a name not of that form, or one of it that is not a regular file)."""
        found = []
        others = []
        foreign = False
        with os.scandir(self.path) as listing:
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
                        found.append((entry.stat().st_mtime, entry.path))
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
        doomed = [path for _, path in entries[: max(len(entries) - MAX_ENTRIES, 0)]]
        old = time.time() - STALE_SECONDS
        for entry in others:
            with contextlib.suppress(OSError):  # another rank pruned it
                if entry.stat(follow_symlinks=False).st_mtime < old:
                    doomed.append(entry.path)
        for path in doomed:
            with contextlib.suppress(OSError):
                os.unlink(path)

    def tagged(self) -> bool:
        """Whether the directory holds the cache's own tag: a regular file of
        ours that nobody else can write, with :data:`TAG_TEXT`."""
        try:
            data = _read_trusted(os.path.join(self.path, TAG), len(TAG_TEXT))
        except (OSError, ConfigError):
            return False
        return data == TAG_TEXT.encode()

    def tag(self) -> None:
        """Mark the directory as the cache's (``OSError`` if it cannot)."""
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW
        try:
            fd = os.open(os.path.join(self.path, TAG), flags, 0o600)
        except FileExistsError:  # another rank tagged it, or it is there
            return
        with os.fdopen(fd, "w") as out:
            out.write(TAG_TEXT)

    # The ranks of one node: one evaluates, the others wait for its result.

    def lock_file(self, key: str) -> str:
        return os.path.join(self.path, f"{key}.{host()}.lock")

    def result_file(self, key: str) -> str:
        return os.path.join(self.path, f"{key}.{host()}.result")

    def check_lock_file(self, key: str) -> str:
        """The lock of this node's background check of the entry: one at a
        time, apart from the evaluation's lock (a launch evaluating never waits
        for a check)."""
        return os.path.join(self.path, f"{key}.{host()}.check")

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
        path = self.result_file(key)
        try:
            info = os.stat(path)  # a link is refused by the read
            data = _read_trusted(path, MAX_ENTRY_BYTES)
            return (info.st_dev, info.st_ino, info.st_mtime_ns), json.loads(data)
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
    try:
        existed = os.path.lexists(path)
        if create and not existed:
            os.makedirs(path, mode=0o700, exist_ok=True)
        info = os.stat(path)
    except OSError as exc:  # a folder on the way is a file: "Not a directory"
        return None, f"{path}: {exc.strerror}"
    if not stat.S_ISDIR(info.st_mode):  # the same words, made or not
        return None, f"{path}: {os.strerror(errno.ENOTDIR)}"
    problem = _untrusted(info)
    if problem:
        return None, f"{path}: {problem}; not used"
    cache = Cache(path)
    if create and not existed:  # the cache made it: its own to prune
        with contextlib.suppress(OSError):
            cache.tag()
    return cache, ""


def _untrusted(info: os.stat_result) -> str:
    """Why a file or directory of the cache cannot be trusted, or ``""``."""
    if info.st_uid != os.getuid():
        return "owned by another user"
    if info.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        return "writable by its group or others"
    return ""


def _read_trusted(path: str, limit: int) -> bytes:
    """A cache file's bytes, if it is a regular file of ours that nobody else
    can write (never following a link)."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        problem = _untrusted(os.fstat(fd))
        if problem:
            raise ConfigError(problem)
        return read_open(fd, limit)
    finally:
        os.close(fd)

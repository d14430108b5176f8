"""What ran before the hook, and the warning where it matters: a value put in
this process's own environment after its HIP runtime started (``_rocm.hip_started``)
comes too late for it (:func:`too_late`), and the start-up files ``site`` ran
code from before ours, in the running Python's order, are what may have
started HIP first (:func:`run_before_ours`; ``doctor`` asks it too).

The hook imports this module only where HIP had started: a launch whose value
comes in time never loads it.
"""

from __future__ import annotations

import os
import sys

from ._config import ConfigError, read_small_file
from ._decision import WARNING, Outcome
from ._environ import HIP_DEFAULT_QUEUES, NAME, PTH, QUEUES, START

TYPE_CHECKING = False  # not typing's: start-up imports as little as it can
if TYPE_CHECKING:
    from collections.abc import Sequence

#: Largest start-up file read (a ``.pth``, a ``.start``).
MAX_START_FILE_BYTES = 64 << 10


def too_late(outcome: Outcome, *, during: str, early: Sequence[str] = ()) -> Outcome:
    """The warning of a process whose HIP runtime started before the value was
    put in place (``during``: when it was put; ``early``: the start-up files
    ``site`` ran code from before this package's hook): HIP read its flags
    already, so this process runs with HIP's default; its children get the
    value."""
    before = (
        f"; start-up files site ran before ours: {', '.join(early)}" if early else ""
    )
    return Outcome(
        WARNING,
        f"HIP had started in this process {during}, before {QUEUES}="
        f"{outcome.queues} was set{before}: this process runs with HIP's default"
        f" ({HIP_DEFAULT_QUEUES})",
        f"set {QUEUES}={outcome.queues} in the job's environment ({NAME} explain"
        " --export), or start HIP later",
    )


def site_dirs() -> list[str]:
    """The directories ``site`` ran ``.pth`` files in, in its order: the site
    directories (this environment's, its base's, the user's) as they stand on
    ``sys.path``, where ``site`` puts each before it runs its ``.pth`` files
    (Python 3.12 and older run a venv's from ``site.venv``, before the list
    ``site.getsitepackages`` gives says it is one)."""
    import site

    prefixes = [sys.prefix, sys.exec_prefix, sys.base_prefix, sys.base_exec_prefix]
    known = {*site.getsitepackages(prefixes), site.getusersitepackages()}
    return [entry for entry in dict.fromkeys(sys.path) if entry in known]


#: The first Python whose ``site`` runs ``.start`` entry points (PEP 829),
#: and runs them after every ``.pth`` import line of every site folder.
PEP_829_PYTHON = (3, 15)


def run_before_ours(folders: Sequence[str], version: Sequence[int]) -> list[str] | None:
    """The start-up files whose code ``site`` runs before this package's hook,
    in ``site``'s order, for a Python of ``version`` whose site folders are
    ``folders`` (in discovery order); None where ``site`` never runs ours.

    Python 3.14 and older: folder by folder, each one's ``.pth`` files by name,
    each file's ``import`` lines as it is read: the ``.pth`` files before ours
    (:data:`PTH`) that have such a line.

    Python 3.15 and newer (PEP 829): first every ``.pth`` import line of every
    folder (folders in order, files by name), but not those of a ``<name>.pth``
    with a ``<name>.start`` beside it, even an empty one; then every ``.start``
    file's entry points, in the same order. Ours runs from :data:`START`
    (where it names an entry point; an empty one turns our ``.pth`` line off
    and the hook never runs), or from :data:`PTH` where no ``.start`` of ours
    is beside it: every other import line runs before it, and, for our entry
    point, every ``.start`` entry found before it."""
    listings: list[tuple[str, list[str]]] = []
    for folder in folders:
        try:
            listings.append((folder, sorted(os.listdir(folder))))
        except OSError:
            continue
    if tuple(version[:2]) < PEP_829_PYTHON:
        found: list[str] = []
        for folder, names in listings:
            for name in names:
                if name == PTH:
                    return found
                path = os.path.join(folder, name)
                if name.endswith(".pth") and _runs_code(path):
                    found.append(path)
        return None
    imports: list[str] = []
    entries: list[str] = []
    our_import = our_entry = None
    for folder, names in listings:
        for name in names:
            path = os.path.join(folder, name)
            stem, _, kind = name.rpartition(".")
            if kind == "pth" and f"{stem}.start" not in names:
                if name == PTH and our_import is None:
                    our_import = len(imports)
                elif name != PTH and _runs_code(path):
                    imports.append(path)
            elif kind == "start" and has_entry(path):
                if name == START and our_entry is None:
                    our_entry = len(entries)
                elif name != START:
                    entries.append(path)
    if our_import is not None:
        return imports[:our_import]
    if our_entry is not None:
        return imports + entries[:our_entry]
    return None


def early_start_files(version: Sequence[int] | None = None) -> list[str] | None:
    """The start-up files ``site`` ran (or runs) code from before this
    package's hook, in this interpreter (:func:`site_dirs`; ``version``: the
    running Python's): what may have started HIP before the hook
    (:func:`run_before_ours`; None where ``site`` never runs it)."""
    return run_before_ours(site_dirs(), version or tuple(sys.version_info[:2]))


def _runs_code(path: str) -> bool:
    """Whether a ``.pth`` file has a line ``site`` executes."""
    return any(line.startswith(("import ", "import\t")) for line in _lines(path))


def has_entry(path: str) -> bool:
    """Whether a ``.start`` file names an entry point: a line that is neither
    blank nor a ``#`` comment (PEP 829)."""
    return any(line.strip() and not line.startswith("#") for line in _lines(path))


def _lines(path: str) -> list[str]:
    """A start-up file's lines, read bounded (none where it cannot be read)."""
    try:
        text = read_small_file(path, MAX_START_FILE_BYTES).decode("utf-8", "replace")
    except ConfigError:
        return []
    return text.splitlines()

"""Is this a ROCm machine, decided without importing torch; and has HIP's
runtime already started in this process?

torch's ``torch/version.py`` is generated at build time with ``hip`` set to the
HIP version on ROCm builds and to ``None`` on CUDA and CPU builds; PR #4032 acts
iff ``torch.version.hip`` is set. We read that file as text, never execute it.
Without torch on the path, the HIP runtime library decides.

HIP reads ``GPU_MAX_HW_QUEUES`` once, when its runtime starts (``hipInit``, or
any first HIP call); ``import torch`` alone does not start it. Starting it runs
``hsa_init``, whose thunk (libhsakmt) opens ``/dev/kfd`` and keeps it open: a
process that holds it has started HIP (:func:`hip_started`).
"""

from __future__ import annotations

import os

from ._config import ConfigError, read_small_file

TYPE_CHECKING = False  # not typing's: start-up imports as little as it can
if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping, Sequence

HIP_LIBRARY = "libamdhip64.so"
#: The device HIP's runtime opens as it starts, and keeps open.
KFD = "/dev/kfd"
#: This package's start-up files: the ``.pth`` line, and Python 3.15's entry
#: point (PEP 829). The files ``site`` runs before them may have started HIP.
PTH = "rocm_hwq_autoset.pth"
START = "rocm_hwq_autoset.start"
DEFAULT_ROCM_PATH = "/opt/rocm"
#: Largest ``torch/version.py`` read; PyTorch's is a few hundred bytes.
MAX_VERSION_PY_BYTES = 64 << 10


def detect(path_entries: Iterable[str], environ: Mapping[str, str]) -> tuple[bool, str]:
    """Whether this is ROCm, and the evidence (one line: the file that decided
    and what it says). ROCm iff the first ``torch`` package on the path is a
    HIP build, or, with no torch there, iff a HIP runtime is installed."""
    for entry in path_entries:
        package = os.path.join(entry or os.curdir, "torch")
        if not os.path.isfile(os.path.join(package, "__init__.py")):
            continue
        version_py = os.path.join(package, "version.py")
        hip = torch_hip_version(version_py)
        if hip is None:
            return False, f"{version_py}: hip = None (a CUDA or CPU build)"
        if hip:
            return True, f"{version_py}: hip = {hip!r}"
        break  # torch is there but says nothing we can read: ask the runtime
    library = hip_runtime(environ)
    if library:
        return True, f"no ROCm torch found; HIP runtime {library}"
    return False, (
        "no torch with hip and no HIP runtime "
        f"({HIP_LIBRARY} under ROCM_PATH, HIP_PATH or {DEFAULT_ROCM_PATH})"
    )


def torch_hip_version(version_py: str) -> str | None:
    """``hip`` as assigned in a torch ``version.py``: the string, ``None`` for
    ``hip = None``, ``""`` when the file is unreadable or has no such line."""
    try:
        text = read_small_file(version_py, MAX_VERSION_PY_BYTES).decode(
            "utf-8", "replace"
        )
    except ConfigError:
        return ""
    for line in text.splitlines():
        name, eq, value = line.partition("=")
        # "hip = '6.2.41133-dd7f95766'" or "hip: Optional[str] = None"
        if not eq or name.split(":")[0].strip() != "hip" or line[:1].isspace():
            continue
        value = value.split("#")[0].strip()
        if value == "None":
            return None
        if len(value) >= 3 and value[0] == value[-1] and value[0] in "'\"":
            return value[1:-1]
        return ""
    return ""


def hip_runtime(environ: Mapping[str, str]) -> str:
    """The path of an installed HIP runtime library, or ``""``."""
    roots = [environ.get("ROCM_PATH"), environ.get("HIP_PATH"), DEFAULT_ROCM_PATH]
    for root in roots:
        if not root:
            continue
        lib = os.path.join(root, "lib")
        try:
            names = sorted(os.listdir(lib))
        except OSError:
            continue
        for name in names:
            if name.startswith(HIP_LIBRARY):
                return os.path.join(lib, name)
    return ""


def hip_started() -> bool:
    """Whether HIP's runtime has started in this process: it holds :data:`KFD`
    open. No device, no start (one ``stat``); else one listing of
    ``/proc/self/fd`` and an ``fstat`` per descriptor, matched by the device
    file's identity (device and inode: the name a descriptor's link gives
    depends on the mount namespace that opened it); benchmarks/in_time.py.
    False where that cannot be told."""
    try:
        device = os.stat(KFD)
        descriptors = os.listdir("/proc/self/fd")
    except OSError:
        return False
    identity = (device.st_dev, device.st_ino)
    for fd in descriptors:
        try:
            held = os.fstat(int(fd))
        except OSError:  # the listing's own descriptor, closed meanwhile
            continue
        if (held.st_dev, held.st_ino) == identity:
            return True
    return False


def site_dirs() -> list[str]:
    """The directories ``site`` ran ``.pth`` files in, in its order: the site
    directories (this environment's, its base's, the user's) as they stand on
    ``sys.path``, where ``site`` puts each before it runs its ``.pth`` files
    (Python 3.12 and older run a venv's from ``site.venv``, before the list
    ``site.getsitepackages`` gives says it is one)."""
    import site
    import sys

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
    import sys

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
        text = read_small_file(path, MAX_VERSION_PY_BYTES).decode("utf-8", "replace")
    except ConfigError:
        return []
    return text.splitlines()

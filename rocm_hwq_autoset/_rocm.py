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
    from collections.abc import Iterable, Mapping

HIP_LIBRARY = "libamdhip64.so"
#: The device HIP's runtime opens as it starts, and keeps open.
KFD = "/dev/kfd"
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

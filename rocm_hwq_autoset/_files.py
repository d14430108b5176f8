"""Reading a small file without ever blocking, following a loop or filling memory.

Start-up code runs in every process: a config path may name a FIFO, a device, a
directory or a huge file, and none of these may hang or slow the interpreter.
"""

from __future__ import annotations

import os
import stat

from ._errors import ConfigError

#: Largest job config read. torchtitan's biggest shipped TOML is under 4 KiB;
#: 64 KiB leaves room for generated configs, and bounds the parse: tomllib
#: spends ~3 s per MiB on adversarial but valid TOML (benchmarks/toml_limits.py).
MAX_CONFIG_BYTES = 64 << 10
#: Largest ``torch/version.py`` read; PyTorch's is a few hundred bytes.
MAX_VERSION_PY_BYTES = 64 << 10

# O_NONBLOCK: opening a FIFO must not wait for a writer. O_NOCTTY: a terminal
# device must not become the controlling terminal.
_OPEN_FLAGS = (
    os.O_RDONLY
    | getattr(os, "O_NONBLOCK", 0)
    | getattr(os, "O_NOCTTY", 0)
    | getattr(os, "O_CLOEXEC", 0)
)


def read_small_file(path: str, limit: int) -> bytes:
    """The bytes of a regular file of at most ``limit`` bytes, else ``ConfigError``."""
    if not path:
        raise ConfigError("empty path")
    try:
        fd = os.open(path, _OPEN_FLAGS)
    except OSError as exc:
        raise ConfigError(exc.strerror or type(exc).__name__) from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise ConfigError(f"not a regular file ({_kind(info.st_mode)})")
        if info.st_size > limit:
            raise ConfigError(f"{info.st_size} bytes, more than the {limit} read")
        chunks = []
        left = limit + 1  # a file that grows past its stat() size is caught too
        while left > 0:
            chunk = os.read(fd, left)
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
    except OSError as exc:
        raise ConfigError(exc.strerror or type(exc).__name__) from None
    finally:
        os.close(fd)
    data = b"".join(chunks)
    if len(data) > limit:
        raise ConfigError(f"more than the {limit} bytes read")
    return data


def _kind(mode: int) -> str:
    for test, name in (
        (stat.S_ISDIR, "a directory"),
        (stat.S_ISFIFO, "a FIFO"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISSOCK, "a socket"),
    ):
        if test(mode):
            return name
    return "not a plain file"

"""Python 3.9's ``sys.orig_argv``: this process's whole command line, read
from ``/proc/self/cmdline``, for a ``python -m M`` whose ``sys.argv`` lacks M.

Its one home, beside the package: the start-up gate (``_rocm_hwq_autoset_gate``,
for a ``--module`` argument only) and ``_argv.program`` (for this process's own
``sys.argv`` only) both import it, and only on the path that needs it, never
on the idle one. It imports only ``os``, and nothing of the package.
"""

import os

TYPE_CHECKING = False  # not typing's: importing typing costs start-up time
if TYPE_CHECKING:
    from collections.abc import Sequence

#: Where Linux keeps a process's whole command line, each argument ended by a
#: NUL: what ``sys.orig_argv`` holds on 3.10+.
PROC_CMDLINE = "/proc/self/cmdline"
#: Most bytes of it read. The kernel's own limit for one argument is 128 KiB
#: (``MAX_ARG_STRLEN``); a torchtitan launch's line is a few hundred bytes. A
#: longer line is not read: the process is then taken as Python 3.9 sees it.
MAX_CMDLINE_BYTES = 128 << 10


def command_line(argv: "Sequence[object]") -> "list[str] | None":
    """This process's whole command line, as ``sys.orig_argv`` gives it on
    Python 3.10+, for a process whose ``sys.argv`` is ``argv``: at start-up a
    ``python -m M ARGS`` has ``["-m", ARGS...]`` there, without M. From
    :data:`PROC_CMDLINE`, bounded; None where there is none (not
    Linux), it is longer than :data:`MAX_CMDLINE_BYTES`, or it does not end
    with the arguments ``argv`` holds (not this process's, or changed)."""
    try:
        fd = os.open(PROC_CMDLINE, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
    except OSError:
        return None
    data = b""
    try:
        while len(data) <= MAX_CMDLINE_BYTES:
            chunk = os.read(fd, MAX_CMDLINE_BYTES + 1 - len(data))
            if not chunk:
                break
            data += chunk
    except OSError:
        return None
    finally:
        os.close(fd)
    if len(data) > MAX_CMDLINE_BYTES or not data.endswith(b"\0"):
        return None
    words = [os.fsdecode(word) for word in data[:-1].split(b"\0")]
    args = [str(arg) for arg in argv[1:]]
    if len(words) < len(args) + 2 or words[len(words) - len(args) :] != args:
        return None  # the interpreter and the module, at least, before ARGS
    return words

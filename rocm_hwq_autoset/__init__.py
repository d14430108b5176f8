"""Set ``GPU_MAX_HW_QUEUES`` for torchtitan launches on ROCm at interpreter start.

``rocm_hwq_autoset.pth`` filters the arguments, and the gate module beside the
package (``_rocm_hwq_autoset_gate``) tests them and the switch exactly, importing
this package only for a training launch. On Python 3.15+,
``rocm_hwq_autoset.start`` names :func:`start` instead, and this module is the
gate every process passes: so it imports only ``os`` and ``sys``, and
:func:`may_be_launch` is the same exact test; the hook (``_hook``) is imported
when the gate opens. Nothing here raises for its own failures, hangs, writes a
file or imports torch.

The public API, loaded on first use: :func:`recommend`, :class:`Recommendation`
and :class:`ConfigError`.
"""

import os
import sys

TYPE_CHECKING = False  # not typing's: importing typing costs start-up time
if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from ._api import recommend
    from ._config import ConfigError
    from ._model import Recommendation

__version__ = "0.3.0"
__all__ = ["ConfigError", "Recommendation", "__version__", "recommend"]

_LAZY = {
    "recommend": "._api",
    "Recommendation": "._model",
    "ConfigError": "._config",
}


def __getattr__(name: str) -> object:
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name], __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


# The gate. ``_rocm_hwq_autoset_gate`` (which the .pth line imports) makes the
# same test before importing anything of the package; ``_environ`` holds the
# switch's full meaning and ``_argv.find_launch`` the launch's
# (tests/unit/test_gate.py and test_environ.py hold them in agreement).

#: An argument that is one of these (alone or ``=VALUE``) makes a TOML launch.
CONFIG_FILE_FLAGS = ("--job.config_file", "--job.config-file")
#: One that is this makes a launch where the command line names torchtitan.
MODULE_FLAG = "--module"


def may_be_launch(
    argv: "Sequence[object] | None" = None,
    environ: "Mapping[str, str] | None" = None,
    orig_argv: "Sequence[object] | None" = None,
) -> bool:
    """False for every process that is surely not a torchtitan launch: the
    switch is off (``ROCM_HWQ_AUTOSET=0/false/off/no``), or no argument is
    ``--job.config_file``/``--job.config-file``, nor ``--module`` on a command
    line that names torchtitan: the program, or what torchrun runs, somewhere
    in ``sys.orig_argv`` after the interpreter's path (``sys.argv`` on 3.9, or
    ``argv`` when given alone). The hook (``_argv.find_launch``) then decides
    exactly. ``--module-path``, ``--modules``, ``--job.config_files`` or
    ``mypy --module m`` never open it."""
    environ = os.environ if environ is None else environ
    if environ.get("ROCM_HWQ_AUTOSET", "").strip().lower() in (
        "0",
        "false",
        "off",
        "no",
    ):
        return False
    if argv is None:
        argv = getattr(sys, "argv", None) or ()
        if orig_argv is None:
            orig_argv = getattr(sys, "orig_argv", None)
    flags = [str(arg).partition("=")[0] for arg in argv]
    if CONFIG_FILE_FLAGS[0] in flags or CONFIG_FILE_FLAGS[1] in flags:
        return True
    if MODULE_FLAG not in flags:
        return False
    named = list(orig_argv or [""])[1:] or argv
    return any("torchtitan" in str(arg) for arg in named)


def start() -> None:
    """Run the hook when :func:`may_be_launch`; never raise."""
    try:
        if may_be_launch():
            from ._hook import run

            run()
    except Exception:
        pass

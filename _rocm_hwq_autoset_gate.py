"""The start-up gate of rocm-hwq-autoset: the one test, in every Python process
whose arguments may make a torchtitan launch, of whether this one does.

It stands beside the package, not in it, so that a process it turns away never
imports the package, and it imports only ``os`` and ``sys`` (both loaded
before ``site`` runs; for a launch below Python 3.13, the built-in ``gc``).
``rocm_hwq_autoset.pth`` (written by tools/pth_line.py) runs a substring
filter in every process and calls :func:`start` where it matches; on Python
3.15+ ``rocm_hwq_autoset.start`` names :func:`start` (PEP 829) and ``site``
calls it in every process. :func:`start` runs the hook
(``rocm_hwq_autoset._hook``) only for a launch, and never raises, prints or
writes. It decides, and does nothing else; the package never imports it.

The switch's off values are a literal copy of ``_environ.OFF_VALUES``
(tests/unit/test_environ.py holds them equal); whether arguments make a launch
is then decided exactly by ``_argv.find_launch``, for which this test never
stays shut (tests/unit/test_gate.py, tests/unit/test_properties.py).

The flags that open it are a literal copy of the launch forms' own
(``_argv.Form.opens``; tests/unit/test_gate.py holds them equal). Python 3.9
has no ``sys.orig_argv``: there, for a ``--module`` argument only, the
process's command line comes from ``_rocm_hwq_autoset_cmdline`` beside it.
Where the package cannot be imported, the verbose line says so in the words
of ``_rocm_hwq_autoset_reinstall`` (which the console script,
``_rocm_hwq_autoset_cli``, says too).
"""

import os
import sys

TYPE_CHECKING = False  # not typing's: importing typing costs start-up time
if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

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
    own = argv is None
    if argv is None:
        argv = getattr(sys, "argv", None) or ()
        if orig_argv is None:
            orig_argv = getattr(sys, "orig_argv", None)
    flags = [str(arg).partition("=")[0] for arg in argv]
    if CONFIG_FILE_FLAGS[0] in flags or CONFIG_FILE_FLAGS[1] in flags:
        return True
    if MODULE_FLAG not in flags:
        return False
    if own and orig_argv is None and argv[0] == "-m":  # Python 3.9's python -m M
        orig_argv = _command_line(argv)
    named = list(orig_argv or [""])[1:] or argv
    return any("torchtitan" in str(arg) for arg in named)


def _command_line(argv: "Sequence[object]") -> "list[str] | None":
    """This process's command line where Python has no ``sys.orig_argv``
    (3.9): ``_rocm_hwq_autoset_cmdline``'s, its one home; None without it."""
    try:
        from _rocm_hwq_autoset_cmdline import command_line
    except ImportError:
        return None
    return command_line(argv)


def start() -> None:
    """Run the hook when :func:`may_be_launch`; never raise. Below Python
    3.13 the garbage collector is paused while the hook is imported and runs
    (as it was after: a collection due then runs later), so none runs inside
    the decision: 1.1-1.9 M instructions less of a TOML launch's 7.9-8.3 M.
    On 3.13, where it costs 0.5 M more (and importing ``gc`` 0.2 M), it is
    not. Where the package cannot be imported (its files gone, as under an
    editable install whose checkout lost them), say so in one line in verbose
    mode only (``ROCM_HWQ_AUTOSET_LOG=verbose``: the hook's own rule), else
    nothing."""
    try:
        if not may_be_launch():
            _say_near_miss()
        elif sys.version_info >= (3, 13):  # the pause costs more there
            _run()
        else:
            import gc  # built in: no file to read

            paused = gc.isenabled()
            if paused:
                gc.disable()
            try:
                _run()
            finally:
                if paused:
                    gc.enable()
    except Exception:
        pass


def _run() -> None:
    """Import the hook and run it; where the package cannot be imported, say so
    in verbose mode only."""
    try:
        from rocm_hwq_autoset._hook import run
    except ImportError as exc:
        level = os.environ.get("ROCM_HWQ_AUTOSET_LOG", "")
        if level.strip().lower() == "verbose" and not _said:
            from _rocm_hwq_autoset_reinstall import unimportable

            _said.append(True)  # site may run the .pth line twice
            if sys.stderr is not None:
                sys.stderr.write(
                    f"{PROG}: warning: {unimportable(exc)};"
                    " GPU_MAX_HW_QUEUES left unset\n"
                )
                sys.stderr.flush()
        return
    run()


def _say_near_miss() -> None:
    """In verbose mode, a process turned away whose flag is a slip for the
    config file's (``--job.config``, ``--job.config_files``): one line, since
    torchtitan refuses it too (was: silence however verbose)."""
    level = os.environ.get("ROCM_HWQ_AUTOSET_LOG", "")
    if level.strip().lower() != "verbose" or _said or sys.stderr is None:
        return
    if not may_be_launch([CONFIG_FILE_FLAGS[0]]):  # only where the switch is off
        return
    for arg in getattr(sys, "argv", None) or ():
        flag = str(arg).partition("=")[0]
        if flag.startswith("--job.config") and flag not in CONFIG_FILE_FLAGS:
            _said.append(True)  # site may run the .pth line twice
            sys.stderr.write(
                f"{PROG}: nothing to do: {flag} is no torchtitan flag (torchtitan"
                f" refuses it); did you mean {CONFIG_FILE_FLAGS[0]}?\n"
            )
            sys.stderr.flush()
            return


#: How a line of the package starts (``_environ.NAME``).
PROG = "rocm-hwq-autoset"
#: Whether :func:`start` said that the package cannot be imported: once a
#: process (a venv can list its site-packages twice).
_said: "list[bool]" = []

"""The start-up gate of rocm-hwq-autoset: the one test, in every Python process
whose arguments may make a torchtitan launch, of whether this one does.

It stands beside the package, not in it, so that a process it turns away never
imports the package, and it imports only ``os`` and ``sys`` (both loaded
before ``site`` runs). ``rocm_hwq_autoset.pth`` (written by tools/pth_line.py)
runs a substring filter in every process and calls :func:`start` where it
matches; on Python 3.15+ ``rocm_hwq_autoset.start`` names :func:`start` (PEP
829) and ``site`` calls it in every process. :func:`start` runs the hook
(``rocm_hwq_autoset._hook``) only for a launch, and never raises, prints or
writes. The ``doctor`` command asks :func:`may_be_launch` too.

The switch's off values are a literal copy of ``_environ.OFF_VALUES``
(tests/unit/test_environ.py holds them equal); whether arguments make a launch
is then decided exactly by ``_argv.find_launch``, for which this test never
stays shut (tests/unit/test_gate.py, tests/unit/test_properties.py).

Python 3.9 has no ``sys.orig_argv``: there :func:`command_line` reads the
process's command line from ``/proc/self/cmdline`` where a ``python -m M``
needs it (the gate and ``_argv.program``), never on the idle path. The
console script's entry is :func:`main` here too: this module stays where the
package's files may be gone (an editable install whose checkout moved), and
says so in one line.
"""

import os
import sys

TYPE_CHECKING = False  # not typing's: importing typing costs start-up time
if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence
    from typing import TextIO

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
        orig_argv = command_line(argv)
    named = list(orig_argv or [""])[1:] or argv
    return any("torchtitan" in str(arg) for arg in named)


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


def start() -> None:
    """Run the hook when :func:`may_be_launch`; never raise. Where the package
    cannot be imported (its files gone, as under an editable install whose
    checkout lost them), say so in one line in verbose mode only
    (``ROCM_HWQ_AUTOSET_LOG=verbose``: the hook's own rule), else nothing."""
    try:
        if may_be_launch():
            try:
                from rocm_hwq_autoset._hook import run
            except ImportError as exc:
                level = os.environ.get("ROCM_HWQ_AUTOSET_LOG", "")
                if level.strip().lower() == "verbose" and not _said:
                    _said.append(True)  # site may run the .pth line twice
                    write_line(
                        sys.stderr,
                        f"{PROG}: warning: {unimportable(exc)};"
                        " GPU_MAX_HW_QUEUES left unset\n",
                    )
                return
            run()
    except Exception:
        pass


PROG = "rocm-hwq-autoset"
DISTRIBUTION = "rocm-hwq-autoset"
#: Whether :func:`start` said that the package cannot be imported: once a
#: process (a venv can list its site-packages twice).
_said: "list[bool]" = []


def main() -> int:
    """The ``rocm-hwq-autoset`` console script: the package's command line
    (``rocm_hwq_autoset._cli.main``). Where the package cannot be imported,
    one line on stderr naming what is missing and the command that
    reinstalls it, exit 2; with ``--json``, ``{"error": ...}`` on stdout, and
    with ``--export``, ``false`` (so that ``eval "$(...)"`` fails), as the
    command line itself answers a failure (``_cli.failure_output``)."""
    try:
        from rocm_hwq_autoset._cli import main as cli
    except ImportError as exc:
        message = unimportable(exc)
        args = list(sys.argv[1:])
        own = args[: args.index("--")] if "--" in args else args
        names = {arg.partition("=")[0] for arg in own}
        if "--json" in names:
            import json

            write_line(sys.stdout, json.dumps({"error": message}) + "\n")
        elif "--export" in names:
            write_line(sys.stdout, "false\n")
        write_line(sys.stderr, f"{PROG}: error: {message}\n")
        return 2
    return cli()


def unimportable(exc: ImportError) -> str:
    """What an import of the package that failed says: the module missing and
    the command that reinstalls it."""
    try:
        how, command = reinstall()
    except Exception:  # a broken distribution's metadata: the plain command
        how, command = "", f"pip install --force-reinstall --no-deps {DISTRIBUTION}"
    return (
        f"the package cannot be imported ({type(exc).__name__}: {exc}):"
        f" its files are missing{how}; reinstall: {command}"
    )


def reinstall() -> "tuple[str, str]":
    """How this interpreter's ``rocm-hwq-autoset`` was installed (`` (an
    editable install of PATH)``, `` (installed from PATH)``, or ``""`` for one
    from the index), and the command that installs it again the same way, as
    the distribution's ``direct_url.json`` (PEP 610) records it: ``pip install
    -e CHECKOUT`` for an editable install, ``pip install --force-reinstall
    --no-deps`` of the same source otherwise (the name alone: the index)."""
    import json
    import shlex
    from importlib import metadata
    from urllib.parse import unquote, urlsplit

    pip = f"{shlex.quote(sys.executable)} -m pip install"
    again = f"{pip} --force-reinstall --no-deps"
    try:
        recorded = metadata.distribution(DISTRIBUTION).read_text("direct_url.json")
    except metadata.PackageNotFoundError:  # run from a checkout, never installed
        return " (no installed distribution)", f"{pip} CHECKOUT (or a wheel)"
    if not recorded:  # from the package index
        return "", f"{again} {DISTRIBUTION}"
    info = json.loads(recorded)
    url = str(info.get("url", ""))
    parts = urlsplit(url)
    if parts.scheme == "file":
        where = unquote(parts.path)
        if (info.get("dir_info") or {}).get("editable"):
            return (
                f" (an editable install of {where})",
                f"{pip} -e {shlex.quote(where)}",
            )
        return f" (installed from {where})", f"{again} {shlex.quote(where)}"
    vcs_info = info.get("vcs_info") or {}
    vcs, commit = vcs_info.get("vcs"), vcs_info.get("commit_id")
    source = f"{vcs}+{url}" + (f"@{commit}" if commit else "") if vcs else url
    return f" (installed from {source})", f"{again} {shlex.quote(source)}"


def write_line(stream: "TextIO | None", text: str) -> None:
    """``text`` on a stream that may be closed (None) or refuse it, written
    whole or not at all: a text stream's buffer keeps what it could not write,
    and Python flushes it again at exit, where failing makes the exit status
    120 (stderr on a full disk). So the stream's own pending text is flushed
    first (its order kept), and ``text`` goes straight to its descriptor; a
    stream without one (a test's) takes it as any text."""
    if stream is None:
        return
    try:
        fd = stream.fileno()
    except Exception:  # no descriptor: io.StringIO, pytest's capture ...
        fd = -1
    try:
        if fd < 0:
            stream.write(text)
            stream.flush()
            return
        # The program's own text first; its failure is its own. (contextlib
        # is not loaded at start-up.)
        try:  # noqa: SIM105
            stream.flush()
        except Exception:
            pass
        data = text.encode(stream.encoding or "utf-8", "backslashreplace")
        while data:
            data = data[os.write(fd, data) :]
    except Exception:
        pass

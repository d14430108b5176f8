"""``rocm-hwq-autoset`` / ``python -m rocm_hwq_autoset``: the dispatcher.

It knows the commands by name only (``explain``, ``doctor``, ``verify``,
``status``) and imports a command's module when it runs (or when ``--help``
lists them all).
Each command module owns its options, as pip's commands own ``add_options()``:
its :data:`OPTIONS` table (``_common.Option``), which its ``add_arguments``
adds to the command's parser and which :func:`split_args` reads to tell the
command's own arguments from torchtitan's, its ``HELP`` and ``EXAMPLE``, and
its ``run(opts, out)`` (a command that takes no training arguments says
``TRAINING = False``). No command imports this module; what they share is in
``_common``.

A *training argument* is ``--module``, ``--config``, or a dotted flag
``--section.field`` (with ``=VALUE`` or not), with the values that follow it
up to the next option; everything after ``--`` is training arguments too. Any
other option is a usage error (exit 2) naming it, with the closest real option;
a command's own option after ``--`` is refused with the place it belongs.

Every failure is one line on stderr and exit 2, here: a command raises
``ConfigError``. What stdout gets then is this module's rule too
(:data:`FAILURE_OUTPUT`): ``{"error": ...}`` for a command asked for JSON,
``false`` for an export (``eval "$(...)"`` then fails), else nothing. A stdout
that cannot be written (full, closed) is one line and exit 2; a reader that
went away (``| head``) is no error.
"""

from __future__ import annotations

import argparse
import contextlib
import difflib
import importlib
import shutil
import sys
import textwrap
from collections.abc import Callable, Collection, Sequence
from types import ModuleType
from typing import Any, NoReturn

from .. import __version__
from .._argv import CONFIG_FILE_FLAGS, CONFIG_FLAG, MODULE_FLAG, is_option
from .._config import ConfigError
from .._unknown import shorthands
from ._common import PROG, TRAINING_ARGS_HELP, fail, option_table
from .term import Stdout, Unwritable, discard, json_text, write_stderr

COMMANDS = ("explain", "doctor", "verify", "status")
#: A command's exit status after Ctrl-C: a shell's for a job SIGINT ended
#: (128 + 2), so that a script tells it from a failure (2).
INTERRUPTED = 130
CUT_SHORT = "interrupted (Ctrl-C): nothing was decided"
#: argparse gives every command these.
HELP_OPTIONS = {"-h": False, "--help": False}


class _Formatter(argparse.RawDescriptionHelpFormatter):
    """argparse's layout, at most 80 columns wide whatever the terminal."""

    def __init__(self, prog: str) -> None:
        super().__init__(prog, width=min(79, shutil.get_terminal_size().columns))


class _Parser(argparse.ArgumentParser):
    """argparse's parser, whose usage error is raised as ``ConfigError`` (named
    after the command) where stdout has an answer to a failure, so that the
    dispatcher gives it (``--json``, ``--export``); else argparse's usage and
    error line, exit 2."""

    raising = False

    def error(self, message: str) -> NoReturn:
        if self.raising:
            raise ConfigError(message, self.prog[len(PROG) :].strip())
        super().error(message)


#: What stdout gets when a command fails, by the option that asked for an
#: answer a program reads (the first given, in this order): JSON gets the
#: error as JSON, whole; an export a line that makes ``eval "$(...)"`` fail,
#: so that a ``set -e`` script stops there (``false``, never ``exit``, which
#: would end an interactive shell).
FAILURE_OUTPUT: dict[str, Callable[[str], str]] = {
    "--json": lambda message: json_text({"error": message}),
    "--export": lambda message: "false",
}


def failure_output(
    args: Sequence[str], options: Collection[str] | None = None
) -> Callable[[str], str] | None:
    """The answer stdout gets if the command fails, from its arguments (those
    before ``--``), among ``options`` (the command's own; any, for a command
    that does not exist); None for none."""
    own = args[: list(args).index("--")] if "--" in args else args
    given = {arg.partition("=")[0] for arg in own}
    for name, answer in FAILURE_OUTPUT.items():
        if name in given and (options is None or name in options):
            return answer
    return None


def command_module(name: str) -> ModuleType:
    """A command's module, imported now."""
    return importlib.import_module(f".{name}", __name__)


def build_parser(
    names: Sequence[str] = COMMANDS, *, raising: bool
) -> argparse.ArgumentParser:
    """The parser, with a sub-parser for each command named (each imported);
    with ``raising``, a usage error is raised as ``ConfigError``."""
    modules = [command_module(name) for name in names]
    parser = _Parser(
        prog=PROG,
        description="GPU_MAX_HW_QUEUES for torchtitan launches on ROCm: see what\n"
        "the start-up hook decides and why, export it, check the install,\n"
        "check Q against profiler traces, see a node's processes against Q.",
        epilog="\n\n".join(module.EXAMPLE for module in modules),
        formatter_class=_Formatter,
        allow_abbrev=False,
    )
    parser.add_argument("--version", action="version", version=f"{PROG} {__version__}")
    sub = parser.add_subparsers(metavar="COMMAND", required=True)
    for name, module in zip(names, modules):
        description = textwrap.fill(module.HELP, 79)
        if getattr(module, "TRAINING", True):
            description += "\n\n" + textwrap.fill(TRAINING_ARGS_HELP, 79)
        command = sub.add_parser(
            name, help=module.HELP, description=description,
            epilog=module.EXAMPLE, formatter_class=_Formatter, allow_abbrev=False,
        )  # fmt: skip
        module.add_arguments(command)
    for each in (parser, *sub.choices.values()):
        each.raising = raising
    return parser


def is_training_arg(arg: str) -> bool:
    """Whether an option is shaped like a torchtitan flag: ``--section.field``
    (with ``=VALUE`` or not), ``--module`` or ``--config``."""
    name = arg.partition("=")[0]
    if name in (MODULE_FLAG, CONFIG_FLAG):
        return True
    section, dot, field = name[2:].partition(".")
    return name.startswith("--") and bool(section) and bool(dot) and bool(field)


def split_args(
    command: str, options: dict[str, bool], args: Sequence[str]
) -> tuple[list[str], list[str]]:
    """The command's own arguments and the training arguments, in order, given
    the command's own options (each with whether it takes a value).
    ``ConfigError`` names an argument that is neither, or one of the command's
    own options among the training arguments after ``--``."""
    own: list[str] = []
    training: list[str] = []
    in_training = False  # after a training flag: its values
    i = 0
    while i < len(args):
        arg = args[i]
        name = arg.partition("=")[0]
        if arg == "--":
            training += args[i + 1 :]
            _refuse_own(command, options, args[i + 1 :])
            break
        if name in options:
            own.append(arg)
            if options[name] and "=" not in arg and i + 1 < len(args):
                if is_option(args[i + 1]):  # `--world-size --job.config_file ...`
                    raise ConfigError(
                        f"expects a value, but {args[i + 1]} follows it",
                        f"{command}: {name}",
                    )
                own.append(args[i + 1])
                i += 1
            in_training = False
        elif name in CONFIG_FILE_SLIPS:
            _refuse_slip(command, args, i)
        elif is_training_arg(arg):
            training.append(arg)
            in_training = True
        elif is_option(arg):
            close = difflib.get_close_matches(name, options)  # the closest first
            field = BARE_SHORTHANDS.get(name[2:].replace("-", "_"))
            hint = (
                f"; did you mean --{field}?" if field  # `--ep 2`: torchtitan's flag
                else f"; did you mean {close[0]}?" if close else ""
            )  # fmt: skip
            raise ConfigError(f"unrecognized option{hint}", f"{command}: {name}")
        elif in_training:
            training.append(arg)
        elif command == "verify" and not training:
            own.append(arg)  # a trace: they come before the training arguments
        elif arg.endswith(".toml"):
            raise ConfigError(
                f"unexpected argument {arg!r}; did you mean"
                f" {CONFIG_FILE_FLAGS[0]} {arg}?",
                command,
            )
        else:
            raise ConfigError(
                f"unexpected argument {arg!r}; {TRAINING_ARGS_HELP}", command
            )
        i += 1
    return own, training


#: A parallel degree's shorthand without its section (``--ep``, ``--tp``), by
#: the torchtitan field it means.
BARE_SHORTHANDS = {
    short.rpartition(".")[2]: field for short, field in shorthands().items()
}
#: What a hurried hand types for ``--job.config_file``: no torchtitan ever had
#: these (tyro refuses each), and a dotted one would otherwise pass as a
#: training argument and leave the launch without its config file.
CONFIG_FILE_SLIPS = (
    "--config_file", "--config-file", "--job.config", "--job-config-file",
    "--job_config_file", "--job.configfile",
)  # fmt: skip


def _refuse_slip(command: str, args: Sequence[str], at: int) -> None:
    """``ConfigError`` for a slip for ``--job.config_file`` at ``args[at]``,
    naming the flag meant, with the file given (``=PATH`` or the next
    argument) where there is one."""
    name, eq, value = args[at].partition("=")
    if not eq and at + 1 < len(args) and not is_option(args[at + 1]):
        value = args[at + 1]
    meant = f"{CONFIG_FILE_FLAGS[0]} {value}" if value else CONFIG_FILE_FLAGS[0]
    raise ConfigError(
        f"unrecognized option; did you mean {meant}?", f"{command}: {name}"
    )


def _refuse_own(
    command: str, options: dict[str, bool], training: Sequence[str]
) -> None:
    """After ``--`` all is torchtitan's: one of the command's own options there
    would be handed to torchtitan and never read by the command; a TOML file
    first is a positional, which tyro refuses (was: the file ignored,
    torchtitan's defaults read)."""
    if training and training[0].endswith(".toml"):  # (verify names a trace)
        meant = f"{CONFIG_FILE_FLAGS[0]} {training[0]}"
        raise ConfigError(
            f"unexpected argument {training[0]!r} after '--', where torchtitan"
            f" takes no file alone (it refuses it); did you mean {meant}?",
            command,
        )
    for at, arg in enumerate(training):
        name = arg.partition("=")[0]
        if name in CONFIG_FILE_SLIPS:
            _refuse_slip(command, training, at)
        if name in options and name not in HELP_OPTIONS:
            raise ConfigError(
                f"is {command}'s own option: put it before '--' (after '--'"
                " everything is a training argument)",
                name,
            )


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    for stream in (sys.stdout, sys.stderr):
        _escape_what_cannot_be_printed(stream)
    module = command_module(args[0]) if args and args[0] in COMMANDS else None
    options = {**HELP_OPTIONS, **option_table(module.OPTIONS)} if module else None
    answer = failure_output(args, options)  # (a command's name is no option)
    if sys.stdout is None:  # started with it closed (`>&-`)
        return fail("stdout is closed: the answer cannot be written")
    out = Stdout(sys.stdout)
    try:
        try:
            return _dispatch(args, module, options or {}, answer, out)
        except ConfigError as exc:  # whole for a person; JSON has it whole
            if answer is not None:
                out.write(answer(str(exc)) + "\n")
            return fail(str(exc), whole=answer is None)
    except BrokenPipeError:  # `... | head` is fine
        discard(sys.stdout)
        return 0
    except KeyboardInterrupt:  # Ctrl-C: what was cut short, not where
        with contextlib.suppress(Unwritable):  # (Stdout takes a broken pipe)
            if answer is not None:  # an eval of an export fails
                out.write(answer(CUT_SHORT) + "\n")
        write_stderr(f"{PROG}: {CUT_SHORT}\n")
        return INTERRUPTED
    except Unwritable as exc:  # `> /dev/full`
        discard(sys.stdout)
        return fail(f"stdout: {exc}: the answer could not be written")


def _dispatch(
    args: list[str],
    module: ModuleType | None,
    options: dict[str, bool],
    answer: Callable[[str], str] | None,
    out: Stdout,
) -> int:
    """Parse, then run the command; ``ConfigError`` for a usage error."""
    if module is None:  # --help, --version, or a usage error
        build_parser(raising=answer is not None).parse_args(args)
        return 2  # pragma: no cover - parse_args exits or raises
    name = args[0]
    own, training = split_args(name, options, args[1:])
    parser = build_parser([name], raising=answer is not None)
    opts: Any = parser.parse_args([name, *own])
    opts.training = training
    return int(module.run(opts, out))


def _escape_what_cannot_be_printed(stream: object) -> None:
    """A path or a value the stream's encoding cannot hold (``LANG=C``,
    ``PYTHONIOENCODING=ascii``) is written escaped (``\\xf6``), never a
    traceback."""
    reconfigure = getattr(stream, "reconfigure", None)
    if reconfigure is not None and getattr(stream, "errors", None) == "strict":
        reconfigure(errors="backslashreplace")

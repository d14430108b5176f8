"""``rocm-hwq-autoset`` / ``python -m rocm_hwq_autoset``: the dispatcher.

It knows the commands by name (``explain``, ``doctor``, ``verify``) and their
options, splits each command's own options from torchtitan's training
arguments, and imports the command's module only when it runs. No command
imports it; what they share is in ``_common``.

A *training argument* is ``--module``, ``--config``, or a dotted flag
``--section.field`` (with ``=VALUE`` or not), with the values that follow it
up to the next option; everything after ``--`` is training arguments too. Any
other option is a usage error (exit 2) naming it, with the closest real option.
"""

from __future__ import annotations

import argparse
import difflib
import importlib
import os
import shutil
import sys
import textwrap
from collections.abc import Sequence

from .. import __version__
from .._argv import CONFIG_FLAG, MODULE_FLAG, is_option
from .._config import ConfigError
from ._common import PROG, fail

TRAINING_ARGS_HELP = (
    "training arguments: --module, --config, and dotted torchtitan flags"
    " (--section.field, --section.field=VALUE), each with the values that follow"
    " it; everything after '--'. Any other option is an error."
)
EXPLAIN_EXAMPLE = """\
examples:
  rocm-hwq-autoset explain --job.config_file job.toml \\
      --parallelism.expert_parallel_degree 2
  rocm-hwq-autoset explain --module graph_trainer.deepseek_v3 \\
      --config graph_trainer_deepseek_v3_16b
  exports="$(rocm-hwq-autoset explain --export --job.config_file job.toml)"
  eval "$exports"     # a failure above stops a 'set -e' script"""
DOCTOR_EXAMPLE = """\
example:
  rocm-hwq-autoset doctor -- --job.config_file job.toml \\
      --parallelism.expert_parallel_degree 2"""
VERIFY_EXAMPLE = """\
example:
  rocm-hwq-autoset verify rank0.json.gz --job.config_file job.toml"""
COMMANDS = ("explain", "doctor", "verify")


class _Formatter(argparse.RawDescriptionHelpFormatter):
    """argparse's layout, at most 80 columns wide whatever the terminal."""

    def __init__(self, prog: str) -> None:
        super().__init__(prog, width=min(79, shutil.get_terminal_size().columns))


def build_parser() -> tuple[
    argparse.ArgumentParser, dict[str, argparse.ArgumentParser]
]:
    """The parser, and each command's own."""
    parser = argparse.ArgumentParser(
        prog=PROG,
        description="GPU_MAX_HW_QUEUES for torchtitan launches on ROCm: see what\n"
        "the start-up hook decides and why, export it, check the install,\n"
        "check Q against profiler traces.",
        epilog=f"{EXPLAIN_EXAMPLE}\n\n{DOCTOR_EXAMPLE}\n\n{VERIFY_EXAMPLE}",
        formatter_class=_Formatter,
        allow_abbrev=False,
    )
    parser.add_argument("--version", action="version", version=f"{PROG} {__version__}")
    sub = parser.add_subparsers(metavar="COMMAND", required=True)

    def command(name: str, help_: str, example: str) -> argparse.ArgumentParser:
        return sub.add_parser(
            name, help=help_,
            description=textwrap.fill(help_, 79) + "\n\n"
            + textwrap.fill(TRAINING_ARGS_HELP, 79),
            epilog=example, formatter_class=_Formatter,
        )  # fmt: skip

    explain = command(
        "explain",
        "Show the lanes, their causes and Q for a training command line, and what"
        " the start-up hook would do here.",
        EXPLAIN_EXAMPLE,
    )
    form = explain.add_mutually_exclusive_group()
    form.add_argument("--json", action="store_true", help="one JSON object on stdout")
    form.add_argument(
        "--export", action="store_true",
        help="print 'export GPU_MAX_HW_QUEUES=N' as the only line of stdout, the"
        " report on stderr; an explicit GPU_MAX_HW_QUEUES is exported as it is;"
        " on any failure nothing on stdout and exit 2",
    )  # fmt: skip
    explain.add_argument(
        "--world-size", type=int, metavar="N",
        help="resolve data_parallel_shard_degree = -1 as torchtitan does for N"
        " ranks, as a worker does (default: WORLD_SIZE, if set)",
    )  # fmt: skip
    explain.add_argument(
        "--no-cache", action="store_true",
        help="evaluate a --module/--config launch now, without the cache",
    )  # fmt: skip

    doctor = command(
        "doctor",
        "Check that the hook is installed where site runs it, what it saw, and"
        " what it would do for the training arguments (after '--').",
        DOCTOR_EXAMPLE,
    )

    verify = command(
        "verify",
        "Count the GPU streams per device in PyTorch profiler traces and check Q"
        " against them: HIP gives each new stream its own hardware queue until Q"
        " exist, then shares one, so a device fits when its streams (of one"
        " priority, where the trace shows priorities) number at most Q.",
        VERIFY_EXAMPLE,
    )
    verify.add_argument("--json", action="store_true", help="one JSON object on stdout")
    verify.add_argument("--queues", type=int, metavar="N", help="the Q to check")
    verify.add_argument("traces", nargs="*", metavar="TRACE")
    return parser, {"explain": explain, "doctor": doctor, "verify": verify}


def is_training_arg(arg: str) -> bool:
    """Whether an option is shaped like a torchtitan flag: ``--section.field``
    (with ``=VALUE`` or not), ``--module`` or ``--config``."""
    name = arg.partition("=")[0]
    if name in (MODULE_FLAG, CONFIG_FLAG):
        return True
    section, dot, field = name[2:].partition(".")
    return name.startswith("--") and bool(section) and bool(dot) and bool(field)


def own_options(parser: argparse.ArgumentParser) -> dict[str, bool]:
    """A command's own options, each with whether it takes a value."""
    return {
        option: action.nargs != 0
        for action in parser._actions
        for option in action.option_strings
    }


def split_args(
    command: str, options: dict[str, bool], args: Sequence[str]
) -> tuple[list[str], list[str]]:
    """The command's own arguments and the training arguments, in order.
    ``ConfigError`` names an argument that is neither."""
    own: list[str] = []
    training: list[str] = []
    in_training = False  # after a training flag: its values
    i = 0
    while i < len(args):
        arg = args[i]
        name = arg.partition("=")[0]
        if arg == "--":
            training += args[i + 1 :]
            break
        if name in options:
            own.append(arg)
            if options[name] and "=" not in arg and i + 1 < len(args):
                own.append(args[i + 1])
                i += 1
            in_training = False
        elif is_training_arg(arg):
            training.append(arg)
            in_training = True
        elif is_option(arg):
            close = difflib.get_close_matches(name, options)  # the closest first
            hint = f"; did you mean {close[0]}?" if close else ""
            raise ConfigError(f"unrecognized option{hint}", f"{command}: {name}")
        elif in_training:
            training.append(arg)
        elif command == "verify" and not training:
            own.append(arg)  # a trace: they come before the training arguments
        else:
            raise ConfigError(
                f"unexpected argument {arg!r}; {TRAINING_ARGS_HELP}", command
            )
        i += 1
    return own, training


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    parser, commands = build_parser()
    if not args or args[0] not in COMMANDS:
        parser.parse_args(args)  # --help, --version, or a usage error
        return 2  # pragma: no cover - parse_args exits
    try:
        own, training = split_args(args[0], own_options(commands[args[0]]), args[1:])
    except ConfigError as exc:
        return fail(str(exc))
    opts = parser.parse_args([args[0], *own])
    opts.training = training
    run = importlib.import_module(f".{args[0]}", __name__).run
    try:
        return int(run(opts, sys.stdout))
    except BrokenPipeError:  # `... | head` is fine
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0

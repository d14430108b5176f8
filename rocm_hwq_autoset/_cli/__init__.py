"""``rocm-hwq-autoset`` / ``python -m rocm_hwq_autoset``: explain, doctor, verify.

Each command takes its own options and torchtitan's training arguments. A
*training argument* is ``--module``, ``--config``, or a dotted flag
``--section.field`` (with ``=VALUE`` or not), with the values that follow it
up to the next option; everything after ``--`` is training arguments too. Any
other option is a usage error (exit 2) naming it, with the closest real option.
"""

from __future__ import annotations

import argparse
import difflib
import os
import shutil
import sys
import textwrap
from collections.abc import Callable, Sequence

from .. import __version__
from .. import _decision as env
from .._decision import PENDING, SET, SKIP, WARNING, Outcome, conclude, decide
from .._launch import ConfigError, find_launch, flag_value, is_option, is_training_arg
from .._model import Recommendation, recommend

PROG = "rocm-hwq-autoset"

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


class _Formatter(argparse.RawDescriptionHelpFormatter):
    """argparse's layout, at most 80 columns wide whatever the terminal."""

    def __init__(self, prog: str) -> None:
        super().__init__(prog, width=min(79, shutil.get_terminal_size().columns))


def build_parser() -> argparse.ArgumentParser:
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
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    def command(name: str, help_: str, example: str) -> argparse.ArgumentParser:
        return sub.add_parser(
            name, help=help_,
            description=textwrap.fill(help_, 79) + "\n\n"
            + textwrap.fill(TRAINING_ARGS_HELP, 79),
            epilog=example, allow_abbrev=False, formatter_class=_Formatter,
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
        " report on stderr; on any failure nothing on stdout and exit 2",
    )  # fmt: skip
    explain.add_argument(
        "--world-size", type=int, metavar="N",
        help="resolve data_parallel_shard_degree = -1 as torchtitan does for N ranks",
    )  # fmt: skip

    command(
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
    return parser


#: Each command's own options and how many values they take.
OWN_OPTIONS = {
    "explain": {"--json": 0, "--export": 0, "--world-size": 1, "-h": 0, "--help": 0},
    "doctor": {"-h": 0, "--help": 0},
    "verify": {"--json": 0, "--queues": 1, "-h": 0, "--help": 0},
}


def split_args(command: str, args: Sequence[str]) -> tuple[list[str], list[str]]:
    """The command's own arguments and the training arguments, in order.
    ``ConfigError`` names an argument that is neither."""
    own: list[str] = []
    training: list[str] = []
    options = OWN_OPTIONS[command]
    in_training = False  # after a training flag: its values
    i = 0
    while i < len(args):
        arg = args[i]
        name = arg.split("=", 1)[0]
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
            raise ConfigError(_unknown(command, name))
        elif in_training:
            training.append(arg)
        elif command == "verify" and not training:
            own.append(arg)  # a trace: they come before the training arguments
        else:
            raise ConfigError(
                f"{command}: unexpected argument {arg!r}; {TRAINING_ARGS_HELP}"
            )
        i += 1
    return own, training


def _unknown(command: str, name: str) -> str:
    close = difflib.get_close_matches(name, OWN_OPTIONS[command], n=1, cutoff=0.6)
    hint = f"; did you mean {close[0]}?" if close else ""
    return f"{command}: unrecognized option {name!r}{hint}"


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    if not args or args[0] not in OWN_OPTIONS:
        parser.parse_args(args)  # --help, --version, or a usage error
        return 2  # pragma: no cover - parse_args exits
    try:
        own, training = split_args(args[0], args[1:])
    except ConfigError as exc:
        return fail(str(exc))
    opts = parser.parse_args([args[0], *own])
    opts.training = training
    try:
        if opts.command == "explain":
            from .explain import run_explain

            return run_explain(opts, sys.stdout)
        if opts.command == "doctor":
            from .doctor import run_doctor

            return run_doctor(opts.training, sys.stdout)
        from .verify import run_verify

        return run_verify(opts, sys.stdout)
    except BrokenPipeError:  # `... | head` is fine
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0


def fail(message: str) -> int:
    """A usage or input error: one line on stderr, exit status 2."""
    sys.stderr.write(f"{PROG}: error: {message}\n")
    return 2


def recommendation(
    training: Sequence[str], world_size: int | None = None
) -> tuple[Recommendation, str]:
    """The recommendation for these training arguments, and the config it read
    (a TOML file, or ``--module M --config FN`` evaluated here, importing
    torchtitan). ``ConfigError`` names the input that is wrong."""
    launch = find_launch(training, ["-m", "torchtitan.train"])
    if launch is not None and launch.config_file is None:
        from .._registry_child import evaluate  # imports torchtitan, here only

        source = (
            f"--module {flag_value(training, ('--module',))}"
            f" --config {flag_value(training, ('--config',))}"
            " (torchtitan's config registry)"
        )
        return evaluate(launch.args, world_size), source
    config_file = launch.config_file if launch else None
    if config_file is None:
        rec = recommend(None, argv=training, world_size=world_size)
        return rec, "none: torchtitan's defaults"
    from .._launch import load_toml

    try:
        rec = recommend(load_toml(config_file), argv=training, world_size=world_size)
    except ConfigError as exc:
        raise ConfigError(f"{config_file}: {exc}") from None
    return rec, config_file


def hook_outcome(
    training: Sequence[str],
    evaluate: Callable[[Sequence[str], dict[str, str], int | None],
                       tuple[int, tuple[str, ...]]] | None = None,
) -> Outcome:  # fmt: skip
    """What the start-up hook would decide in this environment for a launch
    with these training arguments, as ``python -m torchtitan.train ARGS``.

    A value this package set (here or in a parent) is recomputed, as a worker
    would. A ``--module`` launch is evaluated by ``evaluate`` (explain passes the
    answer it already has), else by a child, as the hook does.
    """
    scratch = dict(os.environ)
    if env.explicit_queues(scratch) is None:
        scratch.pop(env.QUEUES, None)
        scratch.pop(env.ORIGIN, None)
    from .._launch import load_toml
    from .._rocm import detect

    outcome = decide(
        scratch,
        training,
        ["-m", "torchtitan.train", *training],
        rocm=lambda: detect(sys.path, scratch),
        read_config=load_toml,
    )
    if outcome.level != PENDING or outcome.launch is None:
        return outcome
    if evaluate is None:
        from .._registry_parent import evaluate as in_child

        evaluate = in_child
    try:
        result: tuple[int, tuple[str, ...]] | ConfigError = evaluate(
            outcome.launch.args, scratch, outcome.world_size
        )
    except ConfigError as exc:
        result = exc
    return conclude(scratch, outcome, result)


def describe(outcome: Outcome) -> str:
    """The outcome as ``explain`` and ``doctor`` show it."""
    if outcome.level == SET or (outcome.level == SKIP and outcome.queues):
        return f"would set {env.QUEUES}={outcome.queues}"
    if outcome.level == WARNING:
        return f"warning: {outcome.message}"
    return f"nothing to do: {outcome.message}"

"""``rocm-hwq-autoset`` / ``python -m rocm_hwq_autoset``: explain, doctor, verify."""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import textwrap
from collections.abc import Sequence

from . import __version__

PROG = "rocm-hwq-autoset"

EXPLAIN_EXAMPLE = (
    "examples:\n"
    "  rocm-hwq-autoset explain --job.config_file job.toml \\\n"
    "      --parallelism.expert_parallel_degree 2\n"
    '  eval "$(rocm-hwq-autoset explain --export --job.config_file job.toml)"'
)
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
            name, help=help_, description=textwrap.fill(help_, 79), epilog=example,
            allow_abbrev=False,
            formatter_class=_Formatter,
        )  # fmt: skip

    explain = command(
        "explain",
        "Show the lanes, their causes and Q for a training command line; arguments"
        " explain does not know pass through as training arguments.",
        EXPLAIN_EXAMPLE,
    )
    form = explain.add_mutually_exclusive_group()
    form.add_argument("--json", action="store_true", help="one JSON object on stdout")
    form.add_argument(
        "--export", action="store_true",
        help="print 'export GPU_MAX_HW_QUEUES=N' as the last line of stdout, the"
        " report on stderr",
    )  # fmt: skip
    explain.add_argument(
        "--world-size", type=int, metavar="N",
        help="resolve data_parallel_shard_degree = -1 as torchtitan does for N ranks",
    )  # fmt: skip
    explain.add_argument("training", nargs="*", metavar="TRAINING_ARGS")

    doctor = command(
        "doctor",
        "Check that the hook is installed where site runs it, what it saw, and"
        " what it would do for the training arguments after '--'.",
        DOCTOR_EXAMPLE,
    )
    doctor.add_argument("training", nargs="*", metavar="TRAINING_ARGS")

    verify = command(
        "verify",
        "Count the GPU streams in PyTorch profiler traces and check Q against them.",
        VERIFY_EXAMPLE,
    )
    verify.add_argument("--json", action="store_true", help="one JSON object on stdout")
    verify.add_argument("--queues", type=int, metavar="N", help="the Q to check")
    verify.add_argument("traces", nargs="*", metavar="TRACE")
    return parser


#: Each command's own options and how many values they take; every other
#: argument is a training argument, passed through untouched.
OWN_OPTIONS = {
    "explain": {"--json": 0, "--export": 0, "--world-size": 1, "-h": 0, "--help": 0},
    "doctor": {"-h": 0, "--help": 0},
    "verify": {"--json": 0, "--queues": 1, "-h": 0, "--help": 0},
}


def split_args(command: str, args: Sequence[str]) -> tuple[list[str], list[str]]:
    """The command's own arguments and the training arguments, in order."""
    own: list[str] = []
    training: list[str] = []
    options = OWN_OPTIONS[command]
    i = 0
    while i < len(args):
        arg = args[i]
        if arg == "--":
            training += args[i + 1 :]
            break
        name = arg.split("=", 1)[0]
        if name in options:
            own.append(arg)
            if options[name] and "=" not in arg and i + 1 < len(args):
                own.append(args[i + 1])
                i += 1
        elif command == "verify" and not training and not arg.startswith("-"):
            own.append(arg)  # a trace: they come before the training arguments
        else:
            training.append(arg)
        i += 1
    return own, training


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    if not args or args[0] not in OWN_OPTIONS:
        parser.parse_args(args)  # --help, --version, or a usage error
        return 2  # pragma: no cover - parse_args exits
    own, training = split_args(args[0], args[1:])
    opts = parser.parse_args([args[0], *own])
    opts.training = training
    try:
        if opts.command == "explain":
            return _explain(opts)
        if opts.command == "doctor":
            return _doctor(opts)
        return _verify(opts)
    except BrokenPipeError:  # `... | head` is fine
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0


def _fail(message: str) -> int:
    sys.stderr.write(f"{PROG}: error: {message}\n")
    return 2


def _explain(opts: argparse.Namespace) -> int:
    from . import _environment as env
    from ._api import recommend
    from ._argv import config_file_arg
    from ._errors import ConfigError
    from ._explain import as_json, as_text
    from ._registry import evaluate, module_launch
    from ._rocm import detect
    from ._startup import preview
    from ._toml import load_toml

    training: list[str] = opts.training
    config_file = config_file_arg(training)
    world_size = opts.world_size
    if world_size is not None and world_size < 1:
        return _fail(f"--world-size {world_size}: must be >= 1")
    known = None
    try:
        if config_file is None and module_launch(training):
            rec = evaluate(training, world_size)  # imports torchtitan, here only
            known = (rec.queues, rec.lanes)
        else:
            config = load_toml(config_file) if config_file is not None else None
            rec = recommend(config, argv=training, world_size=world_size)
    except ConfigError as exc:
        where = f"{config_file}: " if config_file is not None else ""
        return _fail(f"{where}{exc}")
    verdict = detect(sys.path, os.environ)
    explicit = env.explicit_queues(os.environ)
    # For a --module launch the hook would evaluate this very config: reuse it.
    hook = preview(
        os.environ, training, sys.path, (lambda *_: known) if known else None
    )
    if opts.json:
        environment: dict[str, str | bool | None] = {
            "rocm": verdict.rocm,
            "rocm_evidence": verdict.evidence,
            "gpu_max_hw_queues": os.environ.get(env.QUEUES) or None,
            "explicit": explicit is not None,
            "opted_out": env.switch(os.environ) == "off",
            "hook": hook,
        }
        doc = as_json(rec, config_file=config_file, world_size=world_size,
                      environment=environment)  # fmt: skip
        sys.stdout.write(json.dumps(doc, indent=2) + "\n")
        return 0
    current = os.environ.get(env.QUEUES)
    text = as_text(
        rec,
        config_file=config_file,
        world_size=world_size,
        environment={
            "ROCm": ("yes: " if verdict.rocm else "no: ") + verdict.evidence,
            env.QUEUES: (
                "unset" if not current
                else f"{current} (explicit: the hook leaves it)" if explicit
                else f"{current} (set by rocm-hwq-autoset)"
            ),
            env.SWITCH: os.environ.get(env.SWITCH, "unset"),
            "the hook": hook,
        },
    )  # fmt: skip
    if opts.export:
        sys.stderr.write(text)
        sys.stdout.write(f"export {env.QUEUES}={rec.queues}\n")
    else:
        sys.stdout.write(text)
    return 0


def _doctor(opts: argparse.Namespace) -> int:
    startup = sys.modules.get("rocm_hwq_autoset._startup")
    hook_ran = bool(getattr(startup, "_ran", False))
    from ._doctor import run_doctor

    return run_doctor(opts.training, sys.stdout, hook_ran=hook_ran)


def _verify(opts: argparse.Namespace) -> int:
    from ._verify import run_verify

    return run_verify(opts, sys.stdout)

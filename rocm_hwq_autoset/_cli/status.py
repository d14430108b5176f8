"""``status``: this node's processes that use a GPU through HIP or are a
torchtitan launch: each one's ``GPU_MAX_HW_QUEUES`` and who set it, whether
HIP has started, its hardware queues per GPU against Q, and what that count
can and cannot mean. It reads ``/proc`` and KFD's sysfs (``_node``); it
evaluates no config (it names the ``explain`` command that would)."""

from __future__ import annotations

import json
import os
from typing import TYPE_CHECKING, Any, TextIO

from .. import _node
from .._config import ConfigError
from .._decision import cut_middle, printable
from .._node import AT, PAST, Node, Proc, Setting, explain_command, setting_of, verdict
from ._common import Option, add_options

if TYPE_CHECKING:
    import argparse

HELP = (
    "Show this node's processes that use a GPU through HIP or are a torchtitan"
    " launch: each one's GPU_MAX_HW_QUEUES and who set it, whether HIP has"
    " started, its hardware queues per GPU against Q. Exit 0: no process at"
    " the cap; 1: some process at or past it on a GPU (its streams may share"
    " queues); 2: an error."
)
EXAMPLE = """\
examples:
  rocm-hwq-autoset status
  rocm-hwq-autoset status --pid 4242 --json"""
OPTIONS = (
    Option("--json", takes_value=False, action="store_true",
           help="one JSON object on stdout: the processes, the GPUs, the notes"),
    Option("--pid", takes_value=True, type=int, metavar="N",
           help="this process only (any process, launch or not)"),
)  # fmt: skip

#: It reads the node, not a launch: no training arguments.
TRAINING = False
#: Exit statuses a script can test.
CLEAR, AT_CAP = 0, 1
#: The widest a command line is shown in the table (cut in its middle).
RUNS_WIDTH = 60


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_options(parser, OPTIONS)


class Row:
    """One shown process: what was read, who set its value, its verdicts,
    and its depth in its launcher's tree."""

    __slots__ = ("depth", "proc", "setting", "verdicts")

    def __init__(self, proc: Proc, setting: Setting, depth: int) -> None:
        self.proc = proc
        self.setting = setting
        self.depth = depth
        self.verdicts = [
            verdict(gpu, counts[0], setting.q)
            for gpu, counts in sorted((proc.queues or {}).items())
        ]

    @property
    def at_cap(self) -> bool:
        return any(level in (AT, PAST) for level, _ in self.verdicts)

    def doc(self) -> dict[str, Any]:
        proc = self.proc
        queues = sorted((proc.queues or {}).items())
        return {
            "pid": proc.pid,
            "ppid": proc.ppid,
            "command": proc.words,
            "launch": None if proc.launch is None else proc.launch.form,
            "q": self.setting.q,
            "value": self.setting.text,
            "set_by": self.setting.set_by,
            "set_by_words": self.setting.words,
            "hip_started": proc.hip,
            "hw_queues": {gpu: counts[0] for gpu, counts in queues},
            "other_queues": {gpu: counts[1] for gpu, counts in queues},
            "verdicts": [{"level": lvl, "text": words} for lvl, words in self.verdicts],
            "explain": explain_command(proc) if self.setting.q is None else None,
            "notes": proc.notes,
        }


def rows_of(node: Node) -> list[Row]:
    """The processes in their launchers' trees: each after its parent (when
    shown too), by pid."""
    procs = node.processes
    children: dict[int | None, list[int]] = {}
    for pid, proc in sorted(procs.items()):
        parent = proc.ppid if proc.ppid in procs and proc.ppid != pid else None
        # (a process whose parent is not shown starts a tree of its own)
        children.setdefault(parent, []).append(pid)
    rows: list[Row] = []

    def walk(parent: int | None, depth: int) -> None:
        for pid in children.get(parent, []):
            proc = procs[pid]
            named = f" (pid {parent}: {_name(procs[parent])})" if parent else ""
            rows.append(Row(proc, setting_of(proc, named), depth))
            walk(pid, depth + 1)

    walk(None, 0)
    return rows


def _name(proc: Proc) -> str:
    """A process as its children's rows name their launcher: its program."""
    return _runs(proc).partition(" -")[0]


def _runs(proc: Proc) -> str:
    """What a process runs, without its interpreter's path: ``torchrun ARGS``
    (a script by its name), ``python -m M ARGS``, else its command line with
    its program's name."""
    words = proc.words
    argv = _node.python_argv(words)
    if argv and argv[0] == "-m":
        shown = ["python", "-m", words[len(words) - len(argv)], *argv[1:]]
    elif argv and argv[0] not in ("-c", "-"):
        shown = [os.path.basename(argv[0]), *argv[1:]]
    else:
        shown = [os.path.basename(words[0]), *words[1:]] if words else ["?"]
    return printable(" ".join(shown))


def run(opts: argparse.Namespace, out: TextIO) -> int:
    if opts.training:
        raise ConfigError("takes no training arguments", "status")
    pids = None if opts.pid is None else [opts.pid]
    try:
        node = _node.read_node(_node.PROC, _node.KFD_SYSFS, _node.KFD_DEVICE, pids)
    except OSError as exc:
        raise ConfigError(exc.strerror or str(exc), _node.PROC) from None
    if pids and opts.pid not in node.processes:
        raise ConfigError(node.unshown.get(opts.pid, "not shown"), f"--pid {opts.pid}")
    rows = rows_of(node)
    if opts.json:
        doc = {
            "processes": [row.doc() for row in rows],
            "gpus": {label: gpu_id for gpu_id, label in node.gpus.items()},
            "notes": node.notes,
            "at_cap": [row.proc.pid for row in rows if row.at_cap],
        }
        out.write(json.dumps(doc, indent=2) + "\n")
    else:
        out.write(text(rows, node))
    return AT_CAP if any(row.at_cap for row in rows) else CLEAR


def text(rows: list[Row], node: Node) -> str:
    """The table, one row per process, then what each row's value and counts
    mean, then what could not be read."""
    if not rows:
        lines = ["no process here uses a GPU through HIP or is a torchtitan launch"]
    else:
        lines = [f"{'PID':<9} {'Q':>3}  {'SET BY':<17} {'HIP':<4} {'QUEUES':<15} RUNS"]
        for row in rows:
            proc = row.proc
            pid = " " * 2 * row.depth + str(proc.pid)
            q = "?" if row.setting.q is None else str(row.setting.q)
            hip = {True: "yes", False: "no", None: "?"}[proc.hip]
            queues = ", ".join(
                f"{gpu.split()[-1]}:{c[0]}+{c[1]}"
                for gpu, c in sorted((proc.queues or {}).items())
            )
            runs = _runs(proc)
            if len(runs) > RUNS_WIDTH:
                runs = cut_middle(runs, RUNS_WIDTH)
            lines.append(f"{pid:<9} {q:>3}  {row.setting.set_by:<17} {hip:<4}"
                         f" {queues or '-':<15} {runs}")  # fmt: skip
        lines.append("")
        lines.append("QUEUES: compute+other hardware queues per GPU, from KFD")
        for row in rows:
            lines.append(f"{row.proc.pid}: GPU_MAX_HW_QUEUES {row.setting.words}")
            if row.setting.q is None and row.proc.launch is not None:
                lines.append(f"  what the hook decides: {explain_command(row.proc)}")
            if row.proc.hip is None:
                lines.append("  HIP: cannot tell (its descriptors cannot be read)")
            lines += [f"  {words}" for _, words in row.verdicts]
            lines += [f"  {printable(note)}" for note in row.proc.notes]
    lines += [printable(note) for note in node.notes]
    return "\n".join(lines) + "\n"

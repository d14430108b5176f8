"""What ``--help`` says: each command's usage, description, options and
examples, as the dispatcher writes them (argparse lays them out: only what is
ours is held here, so any Python's argparse passes)."""

from __future__ import annotations

import pytest

from rocm_hwq_autoset._cli import main

TRAINING = (
    "training arguments: --module, --config, and dotted torchtitan flags"
    " (--section.field, --section.field=VALUE), each with the values that follow"
    " it; everything after '--'. Any other option is an error."
)
EXPLAIN = [
    "rocm-hwq-autoset explain --job.config_file job.toml \\",
    "    --parallelism.expert_parallel_degree 2",
    "rocm-hwq-autoset explain --module graph_trainer.deepseek_v3 \\",
    "    --config graph_trainer_deepseek_v3_16b",
    "# in a job script: on a failure the eval fails, and 'set -e' stops there",
    'eval "$(rocm-hwq-autoset explain --export --job.config_file job.toml)"',
]
DOCTOR = [
    "rocm-hwq-autoset doctor -- --job.config_file job.toml \\",
    "    --parallelism.expert_parallel_degree 2",
]
VERIFY = ["rocm-hwq-autoset verify rank0.json.gz --job.config_file job.toml"]
STATUS = ["rocm-hwq-autoset status", "rocm-hwq-autoset status --pid 4242 --json"]

#: The program's usage and what it is for, as ``--help`` begins.
PROGRAM = (
    "usage: rocm-hwq-autoset [-h] [--version] COMMAND ...\n\n"
    "GPU_MAX_HW_QUEUES for torchtitan launches on ROCm: see what\nthe start-up"
    " hook decides and why, export it, check the install,\ncheck Q against"
    " profiler traces, see a node's processes against Q.\n\n"
)
#: For each command: its usage, what its help says in words (whitespace aside),
#: and its examples, line by line.
HELP = {
    "explain": (
        "usage: rocm-hwq-autoset explain [-h] [--json | --export] [--verbose]"
        " [--world-size N] [--no-cache]",
        [
            "Show the lanes, their causes and Q for a training command line, and"
            " what the start-up hook would do here.",
            TRAINING,
            "--json one JSON object on stdout",
            "--export print 'export GPU_MAX_HW_QUEUES=N' as the only line of stdout"
            " (N: the number HIP reads; with ROCM_HWQ_AUTOSET_ORIGIN, which tells a"
            " later export or launch that the value is the package's own), one"
            " summary line on stderr (the report with --verbose); an explicit"
            " GPU_MAX_HW_QUEUES is exported as HIP reads it;"
            " on any failure 'false' on stdout (its eval fails) and exit 2",
            "--verbose with --export: the whole report on stderr",
            "--world-size N resolve data_parallel_shard_degree = -1 as torchtitan"
            " does for N ranks, as a worker does (default: WORLD_SIZE, if set)",
            "--no-cache evaluate a --module/--config launch now, without the cache",
        ],
        ["examples:", *EXPLAIN],
    ),
    "doctor": (
        "usage: rocm-hwq-autoset doctor [-h]",
        [
            "Check that the hook is installed where site runs it, what it saw, and"
            " what it would do for the training arguments (after '--'), as on a"
            " ROCm node.",
            TRAINING,
        ],
        ["example:", *DOCTOR],
    ),
    "verify": (
        "usage: rocm-hwq-autoset verify [-h] [--json] [--queues N]"
        " [--pools {separate,shared}] [TRACE ...]",
        [
            "Count the GPU streams per device in PyTorch profiler traces and check"
            " Q against them: HIP gives each new stream its own hardware queue until"
            " Q exist in its pool, then shares one, so a device fits when each of"
            " its pools has at most Q streams: one pool per stream priority (every"
            " HIP before ROCm/rocm-systems#8485) or one per device (with it).",
            TRAINING,
            "--json one JSON object on stdout",
            "--queues N the Q to check",
            "--pools {separate,shared} how the job's HIP pooled the hardware"
            " queues: separate (one pool per stream priority: every HIP before"
            " ROCm/rocm-systems#8485) or shared (one per device: with it, or with"
            " DEBUG_HIP_IGNORE_STREAM_PRIORITY=1); default: that variable as HIP"
            " reads it, else the HIP version the trace names, else both verdicts",
        ],
        ["example:", *VERIFY],
    ),
    "status": (
        "usage: rocm-hwq-autoset status [-h] [--json] [--pid N]",
        [
            "Show this node's processes that use a GPU through HIP or are a"
            " torchtitan launch: each one's GPU_MAX_HW_QUEUES and who set it,"
            " whether HIP has started, its hardware queues per GPU against Q."
            " Exit 0: no process at the cap; 1: some process at or past it on a"
            " GPU (its streams may share queues); 2: an error.",
            "--json one JSON object on stdout: the processes, the GPUs, the notes",
            "--pid N this process only (any process, launch or not)",
        ],
        ["examples:", *STATUS],
    ),
}


def help_of(capsys: pytest.CaptureFixture[str], *args: str) -> str:
    with pytest.raises(SystemExit) as stop:
        main([*args, "--help"])
    assert stop.value.code == 0
    out, err = capsys.readouterr()
    assert err == ""
    return out


@pytest.fixture(autouse=True)
def wide_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    """However wide the terminal, the help is laid out for 79 columns."""
    monkeypatch.setenv("COLUMNS", "200")


@pytest.mark.parametrize("command", sorted(HELP))
def test_each_commands_help(command: str, capsys: pytest.CaptureFixture[str]) -> None:
    usage, said, examples = HELP[command]
    text = help_of(capsys, command)
    assert " ".join(text.split("\n\n")[0].split()) == usage
    # The description and the training arguments (for a command that takes
    # them), each a paragraph filled to 79 columns: no line could have taken
    # the next line's first word.
    paragraphs = 2 if TRAINING in said else 1
    for paragraph, words in zip(text.split("\n\n")[1 : 1 + paragraphs], said):
        assert " ".join(paragraph.split()) == words
        lines = paragraph.splitlines()
        for line, after in zip(lines, lines[1:]):
            assert len(line) <= 79 < len(line) + 1 + len(after.split()[0])
    flat = " ".join(text.split())
    for words in said:
        assert words in flat
    assert (TRAINING in flat) is (TRAINING in said)  # only where it takes them
    lines = text.splitlines()
    assert "\n".join(lines[-len(examples) :]) == "\n".join(
        ("  " + line if i else line) for i, line in enumerate(examples)
    )
    assert max(len(line) for line in lines) <= 79


def test_the_programs_help(capsys: pytest.CaptureFixture[str]) -> None:
    text = help_of(capsys)
    assert text.startswith(PROGRAM)
    flat = " ".join(text.split())
    for command, (_, said, _) in HELP.items():
        assert f"{command} {said[0]}" in flat  # each command, with its words
    assert text.endswith(
        "\n\n".join(
            "\n".join(("  " + line if i else line) for i, line in enumerate(block))
            for block in (["examples:", *EXPLAIN], ["example:", *DOCTOR],
                          ["example:", *VERIFY], ["examples:", *STATUS])
        ) + "\n"
    )  # fmt: skip


@pytest.mark.parametrize(
    "args", [["--vers"], ["explain", "--jso"], ["verify", "--queue", "4"]]
)
def test_options_are_never_abbreviated(
    args: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    """An abbreviation could one day name another option: it is refused."""
    try:
        code = main(args)
    except SystemExit as stop:
        code = int(stop.code or 0)
    assert code == 2
    assert capsys.readouterr().out == ""

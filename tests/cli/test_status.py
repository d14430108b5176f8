"""``status`` in this process, on a KFD tree laid out by the test and real
processes: its exit statuses and its one-line failures. Whole launches:
tests/e2e/test_status.py; what it reads: tests/unit/test_node.py."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from rocm_hwq_autoset import _node
from rocm_hwq_autoset._cli import main
from rocm_hwq_autoset._cli import status as status_command

from ..helpers import GOLDEN, check_golden
from .commands import PREFIX


@pytest.fixture
def worker(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[tuple[int, Path]]:
    """A process started with GPU_MAX_HW_QUEUES=4 that holds the device
    (a file, here), and the KFD tree ``status`` reads (one GPU, no queue
    yet)."""
    device = tmp_path / "kfd"
    device.write_text("")
    tree = tmp_path / "sysfs"
    (tree / "topology" / "nodes" / "1").mkdir(parents=True)
    (tree / "topology" / "nodes" / "1" / "gpu_id").write_text("7\n")
    (tree / "proc").mkdir()
    monkeypatch.setattr(_node, "KFD_SYSFS", str(tree))
    monkeypatch.setattr(_node, "KFD_DEVICE", str(device))
    code = (
        f"import os, sys; os.open({str(device)!r}, 0); print(flush=True);"
        " sys.stdin.read()"
    )
    child = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, text=True,
                             env={"GPU_MAX_HW_QUEUES": "4"})  # fmt: skip
    assert child.stdout is not None
    child.stdout.readline()  # it holds the device
    yield child.pid, tree
    child.kill()
    child.communicate()


def queues(tree: Path, pid: int, compute: int) -> None:
    for number in range(compute):
        folder = tree / "proc" / str(pid) / "queues" / str(number)
        folder.mkdir(parents=True)
        (folder / "gpuid").write_text("7\n")
        (folder / "type").write_text("0\n")


def status(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(["status", *args])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize(("compute", "code"), [(3, 0), (4, 1), (5, 1)])
def test_the_exit_status_says_whether_a_process_is_at_the_cap(
    worker: tuple[int, Path], compute: int, code: int,
    capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    pid, tree = worker
    queues(tree, pid, compute)
    done, out, err = status(capsys, "--json", "--pid", str(pid))
    [row] = json.loads(out)["processes"]
    assert (done, err) == (code, "")
    assert (row["q"], row["hip_started"], row["hw_queues"]) == (
        4,
        True,
        {"GPU 0": compute},
    )
    assert row["set_by"] in ("launcher", "user")  # as this test run started
    text = status(capsys, "--pid", str(pid))[1]
    assert f"{compute} compute queue" in text and text.splitlines()[1].startswith(
        str(pid)
    )


@pytest.mark.parametrize(
    ("args", "line"),
    [
        (["--pid", "4194305"], "--pid 4194305: pid 4194305: no such process"),
        (["--job.config_file", "j.toml"], "status: takes no training arguments"),
    ],
)
def test_a_failure_is_one_line_and_exit_2(
    args: list[str], line: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert status(capsys, *args) == (2, "", f"{PREFIX}{line}\n")
    code, out, _ = status(capsys, "--json", *args)
    assert (code, json.loads(out)) == (2, {"error": line})


def _proc(
    pid: int, words: list[str], ppid: int, environ: dict[str, str], **read: object
) -> _node.Proc:
    """A process as ``read_node`` reads it (the launch its words make)."""
    found = _node.Proc(pid, words)
    found.ppid, found.environ = ppid, environ
    found.launch = _node.launch_of(words)
    for name, value in read.items():
        setattr(found, name, value)
    return found


PYTHON = "/opt/venv/bin/python3"
TRAIN = ["-m", "torchtitan.train", "--job.config_file", "j.toml"]
LONG = [PYTHON, "-c", "import time; " + "time.sleep(1); " * 8]


def _node_of_a_launch() -> _node.Node:
    """torchrun (100) and its two workers (102: queues on two GPUs, its
    descriptors not readable); trees of their own (their parent not shown): a
    long command line (7), a program read from stdin with a value its launcher
    set (8), a command line that cannot be read (9), one just as wide as its
    column (11); and a note."""
    node = _node.Node()
    node.gpus = {7: "GPU 0", 9: "GPU 1"}
    node.notes = ["/sys/x: no\tGPU"]
    value = {"GPU_MAX_HW_QUEUES": "4"}
    for found in (
        _proc(102, [PYTHON, "-u", *TRAIN], 100, value, parent_value=None,
              hip=None, queues={"GPU 1": [5, 2], "GPU 0": [3, 0]}, notes=["odd"]),
        _proc(100, [PYTHON, "/opt/venv/bin/torchrun", "--nproc-per-node", "2",
                    *TRAIN], 1, {}, hip=False),
        _proc(101, [PYTHON, "-u", *TRAIN], 100, value, parent_value=None,
              hip=True, queues={"GPU 0": [4, 1]}),
        _proc(7, LONG, 3, {}, hip=True),
        _proc(8, [PYTHON, "-"], 3, {"GPU_MAX_HW_QUEUES": "2"}, hip=True,
              parent_value=None),
        _proc(11, [PYTHON, "-c", "y" * (status_command.RUNS_WIDTH - 11)], 3, {},
              hip=True),
        _proc(9, [], 3, {}, hip=True),
    ):  # fmt: skip
        node.processes[found.pid] = found
    return node


def test_the_rows_are_the_launchers_trees() -> None:
    rows = status_command.rows_of(_node_of_a_launch())
    assert [(row.proc.pid, row.depth) for row in rows] == [
        (7, 0),
        (8, 0),
        (9, 0),
        (11, 0),
        (100, 0),
        (101, 1),
        (102, 1),
    ]
    assert [row.setting.set_by for row in rows] == [
        "nobody",
        "launcher",
        "nobody",
        "nobody",
        "unknown",
        "launcher",
        "launcher",
    ]
    assert [row.at_cap for row in rows] == [False] * 5 + [True, True]
    assert [level for row in rows for level, _ in row.verdicts] == [
        _node.AT,
        _node.BELOW,
        _node.PAST,
    ]


def test_the_table_and_what_it_means(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The whole text once, as a golden: the launcher's name in its workers'
    lines, a long command line cut in its middle, each row's lines in order."""
    node = _node_of_a_launch()
    monkeypatch.setattr(_node, "read_node", lambda *_: node)
    code, out, err = status(capsys)
    assert (code, err) == (1, "")
    monkeypatch.setattr(_node, "read_node", lambda *_: _node.Node())
    none = status(capsys)
    assert none[0] == 0
    check_golden(GOLDEN / "status.txt", f"{out}\n(no process)\n{none[1]}")


def test_the_json_fields(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    node = _node_of_a_launch()
    monkeypatch.setattr(_node, "read_node", lambda *_: node)
    code, out, _ = status(capsys, "--json")
    doc = json.loads(out)
    assert code == 1
    assert (doc["gpus"], doc["notes"], doc["at_cap"]) == (
        {"GPU 0": 7, "GPU 1": 9},
        ["/sys/x: no\tGPU"],
        [101, 102],
    )
    rows = {row["pid"]: row for row in doc["processes"]}
    assert list(rows) == [7, 8, 9, 11, 100, 101, 102]
    worker = rows[102]
    assert {key: worker[key] for key in (
        "ppid", "command", "launch", "q", "value", "set_by", "hip_started",
        "hw_queues", "other_queues", "explain", "notes")} == {
        "ppid": 100, "command": [PYTHON, "-u", *TRAIN],
        "launch": "job.config_file", "q": 4, "value": "4", "set_by": "launcher",
        "hip_started": None, "hw_queues": {"GPU 0": 3, "GPU 1": 5},
        "other_queues": {"GPU 0": 0, "GPU 1": 2}, "explain": None,
        "notes": ["odd"],
    }  # fmt: skip
    assert [v["level"] for v in worker["verdicts"]] == [_node.BELOW, _node.PAST]
    assert (rows[100]["q"], rows[100]["launch"], rows[7]["launch"]) == (
        None,
        "job.config_file",
        None,
    )
    assert rows[100]["explain"].endswith("explain -- --job.config_file j.toml")
    text = status(capsys)[1]
    assert rows[101]["verdicts"][0]["text"] in text
    for pid, row in rows.items():
        assert f"{pid}: GPU_MAX_HW_QUEUES {row['set_by_words']}\n" in text


def test_the_json_is_indented(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(_node, "read_node", lambda *_: _node.Node())
    code, out, _ = status(capsys, "--json")
    assert (code, out.splitlines()[:2]) == (0, ["{", '  "processes": [],'])


@pytest.mark.parametrize(
    ("error", "line"),
    [
        (PermissionError(13, "Permission denied"), "/proc: Permission denied"),
        (OSError("no proc"), "/proc: no proc"),
    ],
)
def test_a_proc_that_cannot_be_listed_is_exit_2(
    error: OSError,
    line: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    def fail(*_: object) -> _node.Node:
        raise error

    monkeypatch.setattr(_node, "read_node", fail)
    code, out, _ = status(capsys, "--json")
    assert (code, json.loads(out)) == (2, {"error": line})


def test_a_pid_not_shown_for_no_reason_read(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A process that ended between its command line and its environment."""
    monkeypatch.setattr(_node, "read_node", lambda *_: _node.Node())
    code, out, _ = status(capsys, "--json", "--pid", "5")
    assert (code, json.loads(out)) == (2, {"error": "--pid 5: not shown"})

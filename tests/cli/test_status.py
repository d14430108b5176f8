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

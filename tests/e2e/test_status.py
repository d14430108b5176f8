"""``status`` on real processes: a torchrun-like launch of the stand-in
torchtitan with two workers, and a single TOML launch, each holding the
``/dev/kfd`` of a mount namespace of their own (as the in-time tests lay it
out), with a KFD sysfs tree laid out in KFD's documented layout and bound over
``/sys/class`` there: ``kfd/kfd/topology/nodes/<n>/gpu_id`` and
``kfd/kfd/proc/<pid>/queues/<id>/{gpuid,type,size}``, named by the real pids.
``status`` runs in a namespace laid out alike and reads the real ``/proc``."""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from ..helpers import JOB, Venv
from .test_in_time import namespace  # noqa: F401 - the fixture, used by name
from .test_module_launch import EP2, Launch

pytestmark = [pytest.mark.e2e, pytest.mark.xdist_group("venvs")]

#: Two GPUs, as KFD's topology numbers them (node 0: the CPU).
GPU_IDS = (43117, 28851)
COMPUTE, SDMA = 0, 1
#: Binds the laid-out ``class`` folder over ``/sys/class``, then runs the rest.
BIND_CLASS = 'mount --bind "$0" /sys/class && exec "$@"'


class Kfd:
    """KFD's sysfs, laid out under ``root/class/kfd/kfd``."""

    def __init__(self, root: Path) -> None:
        self.classes = root / "class"
        self.kfd = self.classes / "kfd" / "kfd"
        for number, gpu_id in enumerate((0, *GPU_IDS)):
            node = self.kfd / "topology" / "nodes" / str(number)
            node.mkdir(parents=True)
            (node / "gpu_id").write_text(f"{gpu_id}\n")
        (self.kfd / "proc").mkdir()

    def queues(self, pid: int, *queues: tuple[int, int]) -> None:
        """The process's hardware queues, each ``(gpu_id, type)``."""
        folder = self.kfd / "proc" / str(pid) / "queues"
        folder.mkdir(parents=True)
        for number, (gpu_id, kind) in enumerate(queues):
            queue = folder / str(number)
            queue.mkdir()
            (queue / "gpuid").write_text(f"{gpu_id}\n")
            (queue / "type").write_text(f"{kind}\n")
            (queue / "size").write_text("1048576\n")


@pytest.fixture
def kfd(tmp_path: Path) -> Kfd:
    return Kfd(tmp_path / "sys")


@pytest.fixture
def launch(tmp_path: Path, venvs: Callable[..., Venv]) -> Launch:
    return Launch(tmp_path, venvs("3.12"))


class Running:
    """A launch that runs until :meth:`stop`: each training process leaves
    its pid in ``ready`` once HIP has started in it (it opened the device),
    then waits for its stdin to close."""

    def __init__(self, launch: Launch, prefix: tuple[str, ...], args: list[str],
                 ready: Path, count: int) -> None:  # fmt: skip
        ready.mkdir()
        path = os.pathsep.join(str(p) for p in (launch.rocm, launch.standin))
        env = {"PATH": os.environ["PATH"], "PYTHONPATH": path,
               "ROCM_HWQ_AUTOSET_CACHE_DIR": str(launch.cache),
               "STANDIN_START_HIP": "/dev/kfd", "STANDIN_HOLD": str(ready)}  # fmt: skip
        self.process = subprocess.Popen(
            [*prefix, launch.venv.python, *args], cwd=launch.work, env=env,
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            text=True, start_new_session=True,
        )  # fmt: skip
        deadline = time.monotonic() + 60
        while len(list(ready.iterdir())) < count:
            assert self.process.poll() is None, self.process.communicate()
            assert time.monotonic() < deadline, "the launch never got ready"
            time.sleep(0.05)
        self.pids = sorted(int(p.name) for p in ready.iterdir())

    def stop(self) -> str:
        _, err = self.process.communicate(timeout=60)  # stdin closed first
        assert self.process.returncode == 0, err
        return err


@pytest.fixture
def running() -> Iterator[list[Running]]:
    started: list[Running] = []
    yield started
    for each in started:
        if each.process.poll() is None:
            each.process.kill()
            each.process.communicate()


def status(launch: Launch, prefix: tuple[str, ...], *args: str) -> tuple[int, str]:
    done = subprocess.run([*prefix, launch.venv.python, "-m", "rocm_hwq_autoset",
                           "status", *args], capture_output=True, text=True,
                          timeout=60)  # fmt: skip
    assert done.returncode in (0, 1), done.stderr
    assert done.stderr == ""
    return done.returncode, done.stdout


def ours(doc: dict[str, Any], pids: set[int]) -> dict[int, dict[str, Any]]:
    """The rows of the processes of this test's launch (the machine may run
    other launches: other tests)."""
    return {p["pid"]: p for p in doc["processes"] if p["pid"] in pids}


def test_a_torchrun_launch_with_two_workers(
    launch: Launch, kfd: Kfd, namespace: tuple[str, ...],  # noqa: F811
    running: list[Running], tmp_path: Path,
) -> None:  # fmt: skip
    """The launcher and its workers together; each worker's Q, set by the
    package in the launcher (the marker), HIP started, its queues per GPU and
    the verdict; exit 1: a worker is at the cap."""
    prefix = (*namespace, "sh", "-c", BIND_CLASS, str(kfd.classes))
    args = ["torchrun", "--nproc_per_node=2", "-m", "torchtitan.train", *EP2]
    job = Running(launch, prefix, args, tmp_path / "ready", 2)
    running.append(job)
    first, second = job.pids
    kfd.queues(first, *[(GPU_IDS[0], COMPUTE)] * 8, *[(GPU_IDS[0], SDMA)] * 2)
    kfd.queues(second, *[(GPU_IDS[1], COMPUTE)] * 3, (GPU_IDS[1], SDMA))
    code, out = status(launch, prefix, "--json")
    doc = json.loads(out)
    workers = ours(doc, {first, second})
    launcher = {w["ppid"] for w in workers.values()}
    assert len(launcher) == 1
    rows = ours(doc, {first, second, *launcher})
    [parent] = launcher
    assert (rows[parent]["q"], rows[parent]["set_by"]) == (None, "unknown")
    assert rows[parent]["hip_started"] is False
    seen = [(w["q"], w["set_by"], w["hip_started"], w["launch"])
            for w in workers.values()]  # fmt: skip
    assert seen == [(8, "rocm-hwq-autoset", True, "--module")] * 2
    assert workers[first]["hw_queues"] == {"GPU 0": 8}
    assert workers[first]["other_queues"] == {"GPU 0": 2}
    assert workers[second]["hw_queues"] == {"GPU 1": 3}
    assert [v["level"] for v in workers[first]["verdicts"]] == ["at"]
    assert [v["level"] for v in workers[second]["verdicts"]] == ["below"]
    assert first in doc["at_cap"] and second not in doc["at_cap"]
    assert doc["gpus"] == {"GPU 0": GPU_IDS[0], "GPU 1": GPU_IDS[1]}
    assert code == 1
    _, text = status(launch, prefix)
    print(out, text, sep="\n")  # the report shows both
    table = [line.split(maxsplit=1)[0] for line in text.splitlines() if line]
    at = table.index(str(parent))
    assert table[at + 1 : at + 3] == [str(first), str(second)]  # its tree
    assert job.stop().count("\n") == 1  # the launch's own line, nothing more


def test_a_single_toml_launch(
    launch: Launch, kfd: Kfd, namespace: tuple[str, ...],  # noqa: F811
    running: list[Running], tmp_path: Path,
) -> None:  # fmt: skip
    """The hook set Q inside the process: not in its start environment, so
    not visible; status says so, names the explain command, and exits 0."""
    prefix = (*namespace, "sh", "-c", BIND_CLASS, str(kfd.classes))
    (launch.work / "job.toml").write_bytes(JOB)
    args = ["-m", "torchtitan.train", "--job.config_file", "job.toml"]
    job = Running(launch, prefix, args, tmp_path / "ready", 1)
    running.append(job)
    [pid] = job.pids
    kfd.queues(pid, *[(GPU_IDS[0], COMPUTE)] * 4)
    code, out = status(launch, prefix, "--json", "--pid", str(pid))
    [row] = json.loads(out)["processes"]
    assert (row["pid"], row["q"], row["set_by"], row["hip_started"]) == (
        pid, None, "unknown", True)  # fmt: skip
    assert row["hw_queues"] == {"GPU 0": 4}
    hook = launch.venv.site_packages / "rocm_hwq_autoset.pth"
    assert f"({hook})," in row["set_by_words"].split()  # the hook that would set it
    assert [v["level"] for v in row["verdicts"]] == ["unknown"]
    explain = ["rocm-hwq-autoset", "explain", "--", "--job.config_file", "job.toml"]
    assert row["explain"].split() == explain  # the command that shows its value
    assert code == 0
    _, text = status(launch, prefix, "--pid", str(pid))
    print(out, text, sep="\n")
    assert "GPU_MAX_HW_QUEUES=8" in job.stop()  # set inside, as status says

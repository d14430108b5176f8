"""``_node``: a process's command line read as CPython reads it, who set its
value, what a queue count means, and one line for each thing that cannot be
read or matched (a KFD tree laid out in its documented layout, real processes
in the real ``/proc``). Whole launches: tests/e2e/test_status.py."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from rocm_hwq_autoset._model import Inputs, encode_inputs
from rocm_hwq_autoset._node import (
    AT,
    BELOW,
    PAST,
    UNKNOWN,
    Proc,
    launch_of,
    python_argv,
    read_node,
    setting_of,
    verdict,
)

from ..helpers import GOLDEN, check_golden, lines_report

ROOT = Path(__file__).resolve().parents[2]
#: A program that prints its own ``sys.argv``, as a script, a module and -c.
SHOW = "import json, sys; print(json.dumps(sys.argv))"


@pytest.mark.parametrize(
    ("options", "module"),
    [
        (["-m", "show", "--module", "m"], True),
        (["-u", "-W", "ignore", "-X", "dev", "-m", "show", "a"], True),
        (["-Wignore", "-Xdev", "-uBm", "show", "--job.config_file", "j.toml"], True),
        (["-mshow", "x"], True),
        (["-E", "-s", "-O", "show.py", "-m", "torchtitan.train"], False),
        (["--check-hash-based-pycs", "always", "show.py", "a"], False),
        (["-c", SHOW, "--job.config_file", "j.toml"], False),
        (["-uc", SHOW, "-m", "x"], False),
        (["-bb", "--", "show.py", "--module"], False),
    ],
)  # fmt: skip
def test_argv_is_what_the_interpreter_gives(
    options: list[str], module: bool, tmp_path: Path
) -> None:
    """python_argv(command line) is the real interpreter's own sys.argv (for
    ``-m``, as it is at start-up: ``"-m"``, where a running module sees its
    path)."""
    (tmp_path / "show.py").write_text(SHOW)
    words = [sys.executable, *options]
    real = subprocess.run(words, cwd=tmp_path, capture_output=True, text=True,
                          check=True, env={"PATH": os.environ["PATH"]})  # fmt: skip
    argv = json.loads(real.stdout)
    if module:
        argv[0] = "-m"
    assert python_argv(words) == argv


@pytest.mark.parametrize(
    "words",
    [["bash", "run_train.sh", "--job.config_file", "j.toml"], ["python"],
     ["python3", "-i"], [], ["pythonista", "s.py"]],
)  # fmt: skip
def test_no_python_program(words: list[str]) -> None:
    assert python_argv(words) is None


def test_launches_as_the_hook_finds_them() -> None:
    torchrun = ["/v/bin/python3.12", "/v/bin/torchrun", "--nproc_per_node=2",
                "-m", "torchtitan.train", "--module", "m", "--config", "c"]  # fmt: skip
    launch = launch_of(torchrun)
    assert launch is not None and (launch.form, launch.in_process) == (
        "--module",
        False,
    )
    worker = ["/v/bin/python3.12", "-u", "-m", "torchtitan.train", "--module", "m"]
    assert launch_of(worker) is not None
    assert launch_of(["python", "-m", "mypy", "--module", "m"]) is None
    assert launch_of(["python", "-c", "", "--job.config_file", "j"]) is not None
    both = ["python", "-m", "torchtitan.train", "--module", "m", "--job.config_file=j"]
    assert launch_of(both) is None  # torchtitan refuses it: no launch


def proc(environ: dict[str, str] | None, *, launch: bool = True,
         parent: str | bool | None = False,
         hook: str | None = None) -> Proc:  # fmt: skip
    words = ["python", "-m", "torchtitan.train", "--job.config_file", "j.toml"]
    found = Proc(42, words if launch else ["python", "x.py"])
    found.launch = launch_of(found.words)
    found.environ = environ
    found.parent_value = parent
    found.hook = hook
    return found


#: A --module launcher's inputs for tp 2: 5 lanes (8) without the world
#: size, 4 lanes (4) for 2 ranks (data_parallel_shard_degree -1 → 1).
INPUTS = encode_inputs(Inputs(tp=2, cudagraph=True))


@pytest.mark.parametrize(
    ("environ", "kwargs", "expected"),
    [
        ({"GPU_MAX_HW_QUEUES": "8", "ROCM_HWQ_AUTOSET_ORIGIN": "8 job.config_file"},
         {}, (8, "rocm-hwq-autoset")),
        ({"GPU_MAX_HW_QUEUES": "8", "ROCM_HWQ_AUTOSET_ORIGIN": "8 --module",
          "ROCM_HWQ_AUTOSET_INPUTS": INPUTS, "WORLD_SIZE": "2"},
         {}, (4, "rocm-hwq-autoset")),  # its own hook's value, not its start's
        ({"GPU_MAX_HW_QUEUES": "8", "ROCM_HWQ_AUTOSET_ORIGIN": "8 --module",
          "ROCM_HWQ_AUTOSET_INPUTS": INPUTS}, {}, (8, "rocm-hwq-autoset")),
        ({"GPU_MAX_HW_QUEUES": "2"}, {"parent": "2"}, (2, "user")),
        ({"GPU_MAX_HW_QUEUES": "2"}, {"parent": None}, (2, "launcher")),
        ({"GPU_MAX_HW_QUEUES": "2"}, {"parent": "4"}, (2, "launcher")),
        ({"GPU_MAX_HW_QUEUES": "2"}, {}, (2, "environment")),
        ({"GPU_MAX_HW_QUEUES": "abc"}, {"parent": "abc"}, (None, "user")),
        ({}, {}, (None, "unknown")),
        ({}, {"hook": "/v/site-packages/rocm_hwq_autoset.pth"}, (None, "unknown")),
        ({"ROCM_HWQ_AUTOSET": "0"}, {}, (4, "nobody")),
        ({"ROCM_HWQ_AUTOSET_ORIGIN": "unset --module"}, {}, (4, "nobody")),
        ({}, {"launch": False}, (4, "nobody")),
        ({"GPU_MAX_HW_QUEUES": "8", "ROCM_HWQ_AUTOSET_ORIGIN": "4 job.config_file"},
         {"parent": None}, (8, "launcher")),  # the marker is not this value's
    ],
)  # fmt: skip
def test_who_set_it(environ: dict[str, str], kwargs: dict[str, object],
                    expected: tuple[int | None, str]) -> None:  # fmt: skip
    setting = setting_of(proc(environ, **kwargs))  # type: ignore[arg-type]
    assert (setting.q, setting.set_by) == expected


def test_what_a_count_means() -> None:
    counts = [("GPU 1", 8, 8), ("GPU 0", 3, 4), ("GPU 0", 12, 4), ("GPU 2", 3, None)]
    said = [(f"{gpu}, {n} queues, Q={q}", verdict(gpu, n, q)) for gpu, n, q in counts]
    report = lines_report([(given, line) for given, (_, line) in said])
    check_golden(GOLDEN / "lines" / "node_verdicts.txt", report)
    assert [kind for _, (kind, _) in said] == [AT, BELOW, PAST, UNKNOWN]
    assert all(f" {gpu}, Q={q}:" in line for (gpu, _, q), (_, (_, line))
               in zip(counts, said) if q)  # fmt: skip
    assert [verdict("GPU 0", n, 4)[0] for n in (0, 3, 4, 5, 12)] == [
        BELOW, BELOW, AT, PAST, PAST]  # fmt: skip
    assert verdict("GPU 0", 3, None)[0] == UNKNOWN


class Tree:
    """KFD's sysfs in its documented layout, under a folder of the test's."""

    def __init__(self, root: Path) -> None:
        self.root = root
        for number, gpu_id in enumerate((0, 1111, 2222)):
            node = root / "topology" / "nodes" / str(number)
            node.mkdir(parents=True)
            (node / "gpu_id").write_text(f"{gpu_id}\n")
        (root / "proc").mkdir()

    def queue(self, pid: int, number: int, **files: str) -> Path:
        folder = self.root / "proc" / str(pid) / "queues" / str(number)
        folder.mkdir(parents=True)
        for name, text in files.items():
            (folder / name).write_text(text)
        return folder


@pytest.fixture
def held(tmp_path: Path) -> Iterator[tuple[subprocess.Popen[str], Path]]:
    """A process that holds a file open (the device, to this test) and whose
    command line makes a TOML launch."""
    device = tmp_path / "kfd"
    device.write_text("")
    code = f"import os, sys; fd = os.open({str(device)!r}, 0); sys.stdin.read()"
    child = subprocess.Popen([sys.executable, "-c", code, "--job.config_file", "j"],
                             stdin=subprocess.PIPE, text=True,
                             env={"GPU_MAX_HW_QUEUES": "4"})  # fmt: skip
    for _ in range(200):  # until it holds the file
        fds = Path(f"/proc/{child.pid}/fd")
        if any(os.path.realpath(fd) == str(device) for fd in fds.iterdir()):
            break
        subprocess.run(["sleep", "0.02"], check=True)
    yield child, device
    child.kill()
    child.communicate()


def test_one_line_for_each_thing_that_cannot_be_read(
    tmp_path: Path, held: tuple[subprocess.Popen[str], Path]
) -> None:
    """A queue whose files went while it was read (as when it ends between
    the listing and the read), a malformed ``type``, a ``gpuid`` of no GPU,
    and a queue folder of no process here: one line each, naming the file;
    the good queues are counted."""
    child, device = held
    tree = Tree(tmp_path / "sysfs")
    for number in range(4):
        tree.queue(child.pid, number, gpuid="2222\n", type="0\n", size="4096\n")
    tree.queue(child.pid, 4, gpuid="2222\n", type="1\n")
    gone = tree.queue(child.pid, 5, type="0\n")  # no gpuid: it went
    bad = tree.queue(child.pid, 6, gpuid="1111\n", type="abc\n")
    stray = tree.queue(child.pid, 7, gpuid="999\n", type="0\n")
    ghost = 2**22 + 1  # above the largest pid Linux gives
    tree.queue(ghost, 0, gpuid="1111\n", type="0\n")
    node = read_node("/proc", str(tree.root), str(device), [child.pid])
    found = node.processes[child.pid]
    assert found.hip is True and found.queues == {"GPU 1": [4, 1], "gpu_id 999": [1, 0]}
    # One note each, naming the file; their words: tests/golden/lines/node.txt.
    named = [note.split(": ")[0] for note in found.notes]
    assert named == [str(gone), f"{bad}/type", f"{stray}/gpuid"]
    assert [note.split(": ")[0] for note in node.notes] == [f"{tree.root}/proc/{ghost}"]
    missing = read_node("/proc", str(tmp_path / "none"), str(device)).notes[0]
    notes = [("a queue folder without gpuid", found.notes[0]),
             ("type abc", found.notes[1]), ("gpuid 999", found.notes[2]),
             (f"a queue folder of pid {ghost}", node.notes[0]),
             ("no KFD tree", missing)]  # fmt: skip
    report = lines_report(notes, tmp_path).replace(f"/{child.pid}/", "/PID/")
    check_golden(GOLDEN / "lines" / "node.txt", report)
    assert node.gpus == {1111: "GPU 0", 2222: "GPU 1"}
    assert setting_of(found).q == 4


def test_every_process_is_looked_at_only_for_its_launch_or_its_folder(
    tmp_path: Path, held: tuple[subprocess.Popen[str], Path]
) -> None:
    """Without a KFD tree, a process holding the device is found by its
    descriptors; with one, KFD's folders say which processes opened it."""
    child, device = held
    node = read_node("/proc", str(tmp_path / "none"), str(device))
    assert child.pid in node.processes and node.processes[child.pid].hip is True
    assert node.notes[0].startswith(str(tmp_path / "none"))  # tests/golden/lines


#: The user a test reads another user's processes as.
NOBODY = 65534


def python_for(user: int | None) -> str:
    """An interpreter ``user`` may run (this one may live in root's home)."""
    for python in (sys.executable, "/usr/bin/python3"):
        try:
            done = subprocess.run([python, "-c", "import json"], user=user,
                                  group=user, capture_output=True)  # fmt: skip
        except OSError:  # not allowed to run it
            continue
        if done.returncode == 0:
            return python
    pytest.skip(f"no Python that uid {user} may run")


def in_child(code: str, *prefix: str, user: int | None = None) -> object:
    """What ``code`` prints (JSON), run in a fresh interpreter (through
    ``prefix``; as ``user``)."""
    env = {"PATH": os.environ["PATH"], "PYTHONPATH": str(ROOT)}
    done = subprocess.run([*prefix, python_for(user), "-c", code], env=env,
                          capture_output=True, text=True, timeout=60,
                          user=user, group=user)  # fmt: skip
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


READ = (
    "import json; from rocm_hwq_autoset._node import read_node;"
    " node = read_node('/proc', {kfd!r}, {device!r}, {pids});"
    " print(json.dumps([sorted(node.processes), node.notes]))"
)


@pytest.mark.skipif(
    os.geteuid() != 0, reason="needs root to start a process as another user"
)
def test_another_users_process_is_said_not_shown(
    tmp_path: Path, held: tuple[subprocess.Popen[str], Path]
) -> None:
    child, device = held
    tmp_path.chmod(0o755)
    code = READ.format(kfd=str(tmp_path / "none"), device=str(device), pids=[child.pid])
    shown, notes = in_child(code, user=NOBODY)  # type: ignore[misc]
    assert shown == []
    assert len(notes) == 2 and notes[1].startswith(f"pid {child.pid} (uid 0:")
    said = notes[1].replace(str(child.pid), "PID")
    check_golden(GOLDEN / "lines" / "node_other_user.txt", said + "\n")


def test_a_pid_namespace_of_its_own_is_said_and_nothing_matched(tmp_path: Path) -> None:
    """KFD names its folders by the host's pids: seen from a pid namespace of
    its own, none is matched to a process (never guessed)."""
    if shutil.which("unshare") is None:
        pytest.skip("needs unshare (util-linux)")
    probe = subprocess.run(["unshare", "--pid", "--fork", "true"], capture_output=True)
    if probe.returncode != 0:
        pytest.skip("no pid namespace here (needs root)")
    tree = Tree(tmp_path / "sysfs")
    tree.queue(1, 0, gpuid="1111\n", type="0\n")  # pid 1: there in any namespace
    code = READ.format(kfd=str(tree.root), device="/nonexistent", pids=None)
    _, notes = in_child(code, "unshare", "--pid", "--fork")  # type: ignore[misc]
    assert len(notes) == 1 and f"{tree.root}/proc" in notes[0].split()
    said = notes[0].replace(str(tmp_path), "TMP")
    check_golden(GOLDEN / "lines" / "node_namespace.txt", said + "\n")


def test_the_hook_is_looked_for_beside_the_interpreter(tmp_path: Path) -> None:
    """A launch with no value in its environment: this package's start-up
    file in its interpreter's site-packages (``PREFIX/bin/python``)."""
    from rocm_hwq_autoset._node import _hook_beside

    site = tmp_path / "lib" / "python3.12" / "site-packages"
    site.mkdir(parents=True)
    python = str(tmp_path / "bin" / "python")
    assert _hook_beside([python, "-m", "torchtitan.train"]) is None
    (site / "rocm_hwq_autoset.pth").write_text("")
    assert _hook_beside([python]) == str(site / "rocm_hwq_autoset.pth")
    assert _hook_beside(["python"]) is None  # found on PATH: its folder unknown

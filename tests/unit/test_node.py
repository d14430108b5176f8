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
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from rocm_hwq_autoset import _node
from rocm_hwq_autoset._model import Inputs, encode_inputs
from rocm_hwq_autoset._node import (
    AT,
    BELOW,
    PAST,
    UNKNOWN,
    Proc,
    explain_command,
    launch_of,
    python_argv,
    read_node,
    setting_of,
    verdict,
)

from ..helpers import GOLDEN, check_golden, check_lines, child_env, lines_report

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
        (["-Wd", "show.py", "-m"], False),
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
     ["python3", "-i"], [], ["pythonista", "s.py"], ["python3X", "s.py"]],
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


#: Who set a process's value, from its start environment (and its parent's
#: value, its launch, its hook): the queues HIP uses, and ``set_by``.
WHO = [
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
        ({"GPU_MAX_HW_QUEUES": "0"}, {"parent": "0"}, (None, "user")),
        ({"GPU_MAX_HW_QUEUES": "a: b"}, {"parent": "a: b"}, (None, "user")),
        ({"GPU_MAX_HW_QUEUES": "8", "ROCM_HWQ_AUTOSET_ORIGIN": "8 --module",
          "ROCM_HWQ_AUTOSET_INPUTS": INPUTS, "WORLD_SIZE": "2",
          "ROCM_HWQ_AUTOSET": "0"}, {}, (8, "rocm-hwq-autoset")),  # its hook off
        ({"GPU_MAX_HW_QUEUES": "4", "ROCM_HWQ_AUTOSET_ORIGIN": "4 --module",
          "ROCM_HWQ_AUTOSET_INPUTS": INPUTS, "WORLD_SIZE": "2"},
         {}, (4, "rocm-hwq-autoset")),  # its hook's value is the same
        ({"GPU_MAX_HW_QUEUES": "8", "ROCM_HWQ_AUTOSET_ORIGIN": "8 job.config_file",
          "WORLD_SIZE": "2"}, {}, (8, "rocm-hwq-autoset")),
        ({"GPU_MAX_HW_QUEUES": "8", "ROCM_HWQ_AUTOSET_ORIGIN": "8 job.config_file",
          "WORLD_SIZE": "2", "ROCM_HWQ_AUTOSET": "0"}, {}, (8, "rocm-hwq-autoset")),
        ({"GPU_MAX_HW_QUEUES": "8", "ROCM_HWQ_AUTOSET_ORIGIN": "8 job.config_file",
          "WORLD_SIZE": "2"}, {"launch": False}, (8, "rocm-hwq-autoset")),
        ({"GPU_MAX_HW_QUEUES": "8", "ROCM_HWQ_AUTOSET_ORIGIN": "8 --module",
          "WORLD_SIZE": "2"}, {}, (8, "rocm-hwq-autoset")),  # no inputs
]  # fmt: skip


@pytest.mark.parametrize(("environ", "kwargs", "expected"), WHO)
def test_who_set_it(environ: dict[str, str], kwargs: dict[str, object],
                    expected: tuple[int | None, str]) -> None:  # fmt: skip
    setting = setting_of(proc(environ, **kwargs))  # type: ignore[arg-type]
    assert (setting.q, setting.set_by) == expected


def test_what_each_setting_says() -> None:
    """The words of each case above, as ``status`` shows them (one golden:
    the wording is pinned there only)."""
    lines = []
    for environ, kwargs, _ in WHO:
        found = proc(environ, **kwargs)  # type: ignore[arg-type]
        setting = setting_of(found, " (pid 1: torchrun)")
        lines.append(f"{setting.set_by} {setting.text}: {setting.words}")
    # A launcher not named (none shown):
    lines.append(setting_of(proc({"GPU_MAX_HW_QUEUES": "2"}, parent=None)).words)
    check_golden(GOLDEN / "node_set_by.txt", "\n".join(lines) + "\n")


def test_the_explain_command_of_a_launch() -> None:
    """It gives explain the launch's own arguments and WORLD_SIZE, each a
    shell word."""
    found = proc({"WORLD_SIZE": "2 x"})
    found.launch = launch_of(
        ["python", "-m", "torchtitan.train", "--job.config_file", "my j.toml"]
    )
    assert explain_command(found) == (
        "rocm-hwq-autoset explain --world-size '2 x' -- --job.config_file 'my j.toml'"
    )
    assert explain_command(proc({})) == (
        "rocm-hwq-autoset explain -- --job.config_file j.toml"
    )
    assert explain_command(proc({}, launch=False)) is None


def test_what_a_count_means() -> None:
    counts = [("GPU 1", 8, 8), ("GPU 0", 3, 4), ("GPU 0", 12, 4), ("GPU 2", 3, None),
              ("GPU 0", 1, 2), ("GPU 0", 2, 2), ("GPU 3", 1, None)]  # fmt: skip
    said = [(f"{gpu}, {n} queues, Q={q}", verdict(gpu, n, q)) for gpu, n, q in counts]
    report = lines_report([(given, line) for given, (_, line) in said])
    check_golden(GOLDEN / "lines" / "node_verdicts.txt", report)
    assert [kind for _, (kind, _) in said] == [AT, BELOW, PAST, UNKNOWN, BELOW, AT,
                                               UNKNOWN]  # fmt: skip
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
    code = (f"import os, sys; fd = os.open({str(device)!r}, 0); print(flush=True);"
            " sys.stdin.read()")  # fmt: skip
    child = subprocess.Popen([sys.executable, "-c", code, "--job.config_file", "j"],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                             env={"GPU_MAX_HW_QUEUES": "4"})  # fmt: skip
    assert child.stdout is not None
    assert child.stdout.readline() == "\n"  # it holds the file (was: a poll of
    # its descriptors, which found one the interpreter closed meanwhile)
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
    env = child_env({"PATH": os.environ["PATH"], "PYTHONPATH": str(ROOT)})
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


@pytest.mark.skipif(
    os.geteuid() != 0, reason="needs root to start a process as another user"
)
def test_another_users_process_with_queues_is_said_not_shown(
    tmp_path: Path,
    held: tuple[subprocess.Popen[str], Path],
    request: pytest.FixtureRequest,
) -> None:
    """A process KFD has a folder for, no launch: why it would be shown is
    said (its folder), then why it is not."""
    _, device = held
    tmp_path.chmod(0o755)
    other = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"],
                             stdin=subprocess.PIPE)  # fmt: skip
    # A tree the other user may read (pytest's base folder is root's alone).
    readable = Path(tempfile.mkdtemp())
    readable.chmod(0o755)
    try:
        tree = Tree(readable / "sysfs")
        tree.queue(other.pid, 0, gpuid="1111\n", type="0\n")
        code = READ.format(kfd=str(tree.root), device=str(device), pids=None)
        shown, notes = in_child(code, user=NOBODY)  # type: ignore[misc]
        code = READ.format(kfd=str(readable / "none"), device=str(device),
                           pids=[other.pid])  # fmt: skip
        _, asked = in_child(code, user=NOBODY)  # type: ignore[misc]
    finally:
        other.kill()
        other.wait()
        shutil.rmtree(readable)
    assert other.pid not in shown  # type: ignore[operator]
    [line] = [n for n in notes if n.startswith(f"pid {other.pid} ")]  # type: ignore[attr-defined]
    # Asked for by pid, neither a launch nor in KFD's folders: no why.
    said = [("in KFD's folders", line), ("asked for by pid", asked[-1])]  # type: ignore[index]
    check_lines(request, [(k, v.replace(str(other.pid), "PID")) for k, v in said])


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


def test_each_queue_file_that_cannot_be_read_is_a_line(
    tmp_path: Path, held: tuple[subprocess.Popen[str], Path]
) -> None:
    """Queue files read in number order (9 before 10), each refusal a line
    naming the file (one per queue: a bad ``gpuid`` is not followed by its
    ``type``): a link (never followed), a folder, a value of more bytes than
    a number has, one not ASCII; a value of exactly the most bytes is read.
    A ``queues`` that is no folder is a line too."""
    child, device = held
    tree = Tree(tmp_path / "sysfs")
    most = "0" * (_node.MAX_SYSFS_BYTES - 4) + "2222"
    tree.queue(child.pid, 10, gpuid="x" * 30 + "\n", type="x\n")
    tree.queue(child.pid, 9, gpuid="2222\n", type="\xe9\n")
    tree.queue(child.pid, 1, gpuid=most, type="0\n")
    tree.queue(child.pid, 2, gpuid=most + "0", type="0\n")
    (tree.queue(child.pid, 3, type="0\n") / "gpuid").symlink_to(tmp_path / "kfd")
    (tree.queue(child.pid, 4, type="0\n") / "gpuid").mkdir()
    (tree.root / "topology" / "nodes" / "3").mkdir()
    (tree.root / "topology" / "nodes" / "3" / "gpu_id").write_text("gpu\n")
    node = read_node("/proc", str(tree.root), str(device), [child.pid])
    found = node.processes[child.pid]
    assert found.queues == {"GPU 1": [1, 0]}
    text = "\n".join(node.notes + found.notes) + "\n"
    text = text.replace(f"{tree.root}/proc/{child.pid}", "SYSFS/proc/PID")
    text = text.replace(str(tree.root), "SYSFS")
    check_golden(GOLDEN / "node_queue_files.txt", text)

    other = tmp_path / "other"
    other.mkdir()
    (Tree(other).root / "proc" / str(child.pid)).mkdir()
    (other / "proc" / str(child.pid) / "queues").write_text("")
    node = read_node("/proc", str(other), str(device), [child.pid])
    assert node.processes[child.pid].queues == {}
    assert [n.split(": ")[0] for n in node.processes[child.pid].notes] == [
        f"{other}/proc/{child.pid}/queues"
    ]


def test_a_pid_asked_for_that_is_no_process_is_a_note(tmp_path: Path) -> None:
    ghost = 2**22 + 1
    node = read_node("/proc", str(tmp_path), "/nonexistent", [ghost])
    assert node.processes == {}
    assert node.unshown[ghost] in node.notes


def test_a_relative_interpreter_is_not_looked_beside(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``v/bin/python`` names no folder status can know (the process's own
    working directory, not status's): no hook is claimed found."""
    from rocm_hwq_autoset._node import _hook_beside

    site = tmp_path / "v" / "lib" / "python3.12" / "site-packages"
    site.mkdir(parents=True)
    (site / "rocm_hwq_autoset.pth").write_text("")
    monkeypatch.chdir(tmp_path)
    assert _hook_beside(["v/bin/python"]) is None
    assert _hook_beside([str(tmp_path / "v" / "bin" / "python")]) is not None


def test_what_is_read_of_each_process(
    tmp_path: Path, held: tuple[subprocess.Popen[str], Path]
) -> None:
    """A launch holding the device: its words, launch, start environment,
    parent and its parent's value; a launch with no value: the hook beside
    its interpreter; a process that is neither a launch nor holds the device
    is not shown, unless KFD has a folder for it (then HIP started in it where
    the device cannot be matched); a process that only holds the device is
    found by its descriptors where there are no KFD folders to tell."""
    child, device = held
    plain = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"],
                             stdin=subprocess.PIPE)  # fmt: skip
    bare = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()",
                             "--job.config_file", "j"], stdin=subprocess.PIPE,
                            env={})  # fmt: skip
    code = (
        f"import os, sys; fd = os.open({str(device)!r}, 0); print(flush=True);"
        " sys.stdin.read()"
    )
    holder = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)  # fmt: skip
    assert holder.stdout is not None
    holder.stdout.readline()  # it holds the device
    tree = Tree(tmp_path / "sysfs")
    tree.queue(plain.pid, 0, gpuid="1111\n", type="0\n")
    try:
        node = read_node("/proc", str(tmp_path / "none"), str(device))
        kfd = read_node("/proc", str(tree.root), "/nonexistent")
        both = read_node("/proc", str(tree.root), str(device))
    finally:
        for started in (plain, bare, holder):
            started.kill()
            started.wait()
    assert plain.pid not in node.processes and os.getpid() not in node.processes
    assert node.processes[holder.pid].hip is True  # found by its descriptors
    assert holder.pid not in kfd.processes and holder.pid not in both.processes
    assert both.processes[plain.pid].hip is False  # a folder, not the device
    found = node.processes[child.pid]
    assert found.launch is not None
    assert (found.words, found.launch.form, found.environ, found.ppid, found.hip) == (
        child.args,
        "job.config_file",
        {"GPU_MAX_HW_QUEUES": "4"},
        os.getpid(),
        True,
    )
    start = Path(f"/proc/{os.getpid()}/environ").read_bytes().split(b"\0")
    value = [v[len(b"GPU_MAX_HW_QUEUES=") :] for v in start
             if v.startswith(b"GPU_MAX_HW_QUEUES=")]  # fmt: skip
    assert found.parent_value == (value[0].decode() if value else None)
    assert found.hook is None  # its value is in its environment
    site = Path(sys.executable).parent.parent / "lib"
    pth = sorted(site.glob("python*/site-packages/rocm_hwq_autoset.pth"))
    assert node.processes[bare.pid].hook == (str(pth[0]) if pth else None)
    assert node.processes[bare.pid].parent_value is False  # not read
    assert (kfd.processes[plain.pid].hip, kfd.processes[child.pid].hip) == (True, False)
    assert kfd.processes[plain.pid].queues == {"GPU 0": [1, 0]}
    assert kfd.processes[child.pid].queues is None


def test_a_proc_tree_read_as_the_kernel_lays_it_out(tmp_path: Path) -> None:
    """A ``/proc`` of the test's (``read_node`` takes its root): a container's
    pid 1 with a value (its parent, 0, cannot be read), a worker it started
    with another value, one whose parent is gone; a command name holding
    ``)``; environment entries holding ``=``, without one, empty; an
    environment longer than the most read, and a command line that is a
    link (never followed): one line each, not shown."""
    proc = tmp_path / "proc"
    launch = b"python\0-m\0torchtitan.train\0--job.config_file\0j.toml\0"

    def process(pid: int, ppid: int, environ: bytes, cmdline: bytes = launch) -> Path:
        folder = proc / str(pid)
        folder.mkdir(parents=True)
        (folder / "cmdline").write_bytes(cmdline)
        (folder / "environ").write_bytes(environ)
        (folder / "stat").write_bytes(f"{pid} (a) b) S {ppid} 1 1 0".encode())
        return folder

    process(1, 0, b"GPU_MAX_HW_QUEUES=4\0A=1=2\0B= x\0JUNK\0\0")
    process(7, 1, b"GPU_MAX_HW_QUEUES=2\0")
    process(8, 99, b"GPU_MAX_HW_QUEUES=2\0")
    process(9, 1, b"A=" + b"x" * _node.MAX_PROC_BYTES)
    process(12, 1, b"", b"x" * (_node.MAX_PROC_BYTES + 1))
    (process(10, 1, b"", b"") / "cmdline").unlink()
    (proc / "10" / "cmdline").symlink_to(proc / "1" / "cmdline")
    asked = [1, 7, 8, 9, 10, 12]
    node = read_node(str(proc), str(tmp_path / "none"), "/nonexistent", asked)
    shown = node.processes
    assert sorted(shown) == [1, 7, 8]
    assert shown[1].environ == {"GPU_MAX_HW_QUEUES": "4", "A": "1=2", "B": " x"}
    assert shown[1].words == ["python", "-m", "torchtitan.train", "--job.config_file",
                              "j.toml"]  # fmt: skip
    assert [(p.ppid, p.parent_value) for p in shown.values()] == [
        (0, False),
        (1, "4"),
        (99, False),
    ]
    assert [setting_of(p).set_by for p in shown.values()] == [
        "environment",
        "launcher",
        "environment",
    ]
    assert sorted(node.unshown) == [9, 10, 12]
    assert f"{proc}/9/environ" in node.unshown[9]
    check_golden(
        GOLDEN / "node_unshown.txt",
        "\n".join(node.unshown.values()).replace(str(proc), "PROC") + "\n",
    )


def test_environment_entries() -> None:
    from rocm_hwq_autoset._node import _environ, _holds

    assert _environ(b"A=1=2\0B= x\0JUNK\0=v\0\0") == {"A": "1=2", "B": " x"}
    assert _holds("/proc/nonexistent", (0, 0)) is False


@pytest.mark.parametrize(
    ("words", "argv"),
    [
        (["python", "-", "a"], ["-", "a"]),  # the program from stdin
        (["python", "-u", "--", "-c", "x"], ["-c", "x"]),  # a script named -c
        (["/v/python3.13t", "-mx", "a"], ["-m", "a"]),  # free-threaded
        (["python3.12d", "s.py"], ["s.py"]),
    ],
)
def test_argv_of_programs_not_started_here(words: list[str], argv: list[str]) -> None:
    assert python_argv(words) == argv

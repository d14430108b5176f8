"""The evaluating child as a process (``process``): what it is told, how its
answer is read, the deadline, how it is ended and reaped, that it never
outlives its parent, and the interpreter it runs in. With a fake child
(``tests/fake_child.py``) and a fake clock."""

from __future__ import annotations

import errno
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from rocm_hwq_autoset._argv import Launch
from rocm_hwq_autoset._config import ConfigError
from rocm_hwq_autoset._environ import MODULE_FORM
from rocm_hwq_autoset._evaluation import parent as parent
from rocm_hwq_autoset._evaluation import process
from rocm_hwq_autoset._evaluation.cache import Cache
from rocm_hwq_autoset._model import Config, encode_inputs
from tests.fake_child import INPUTS
from tests.helpers import check_lines, child_env

from .helpers import (
    ARGS,
    EVALUATED,
    POPEN,
    ROOT,
    Applied,
    _alive,
    _gone_within,
    _state,
    await_started,
    launch_key,
    pending,
    popen_args,
    started,
)


def result_of(evaluation: parent.Evaluation) -> tuple[Config | ConfigError, bool]:
    """An evaluation's answer as the launcher takes it: the config or the error,
    and whether it was found without evaluating."""
    answer = evaluation.answer()
    return answer.result(), answer.how != "evaluated"


def test_the_child_is_told_what_to_do(
    fake_child: dict[str, str], tmp_path: Path
) -> None:
    cache = Cache(str(tmp_path))
    evaluation = parent.Evaluation(pending(), fake_child, cache, "k" * 32)
    result, cached = result_of(evaluation)
    assert result == EVALUATED and cached is False
    [child] = started(fake_child)
    assert child["argv"] == ["--parent", str(os.getpid()), "--cache", str(tmp_path),
                             "--key", "k" * 32, "--", *ARGS]  # fmt: skip
    assert child["switch"] == "0"  # no hook in the child
    assert child["pgid"] == child["pid"]  # its own process group
    evaluation.settle()  # it answered; it ends on its own
    assert evaluation.child.process.returncode == 0


@pytest.mark.parametrize(
    ("out", "status", "reason", "cached"),
    [
        ('{"refused": {"reason": "no", "source": "--config"}, "how": "evaluated"}',
         "0", "--config: no", False),
        ('{"refused": {"reason": "no", "source": ""}, "how": "evaluated"}', "0", "no",
         False),
        ('{"failed": "internal error (KeyError: 1)", "how": "evaluated"}', "0",
         "internal error (KeyError: 1)", False),
        ('{"error": "no", "how": "evaluated"}', "0",
         "the evaluating child ended with status 0", False),
        ("not json", "3", "the evaluating child ended with status 3", False),
        ("", "0", "the evaluating child ended with status 0", False),
        ('{"config": {"inputs": "tp=x"}, "how": "evaluated"}', "0",
         "the evaluating child ended with status 0", False),
        (json.dumps({"config": {"inputs": encode_inputs(INPUTS), "settings": None},
                     "how": "evaluated"}), "0",
         "the evaluating child ended with status 0", False),
    ],
)  # fmt: skip
def test_every_answer_of_the_child_is_an_evaluation_or_one_reason(
    fake_child: dict[str, str], out: str, status: str, reason: str, cached: bool
) -> None:
    environ = dict(fake_child, FAKE_CHILD_OUT=out, FAKE_CHILD_EXIT=status)
    result, was_cached = result_of(parent.Evaluation(pending(), environ))
    assert isinstance(result, ConfigError) and str(result) == reason
    assert was_cached is cached


@pytest.mark.parametrize("how", ["cache", "peer"])
def test_an_answer_found_without_evaluating_says_so(
    fake_child: dict[str, str], how: str
) -> None:
    from tests.fake_child import ANSWER

    environ = dict(fake_child, FAKE_CHILD_OUT=json.dumps({**ANSWER, "how": how}))
    result, cached = result_of(parent.Evaluation(pending(), environ))
    assert result == EVALUATED and cached is True


class Clock:
    """Real time, from 1000.0, moved forward at will."""

    def __init__(self) -> None:
        self.ahead = 1000.0 - time.perf_counter()

    def __call__(self) -> float:
        return time.perf_counter() + self.ahead


def test_the_deadline_is_set_once_when_the_child_starts(
    fake_child: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A launcher that waits late waits only for what is left of the timeout,
    never its own work plus the whole timeout."""
    clock = Clock()
    monkeypatch.setattr(process.time, "monotonic", clock)
    environ = dict(fake_child, FAKE_CHILD_SLEEP="5", ROCM_HWQ_AUTOSET_TIMEOUT="60")
    evaluation = parent.Evaluation(pending(), environ)
    assert 1060.0 <= evaluation.deadline < 1061.0
    clock.ahead += 59.8  # the launcher's own work took most of the timeout
    start = time.perf_counter()
    result, _ = result_of(evaluation)
    assert time.perf_counter() - start < 3
    assert isinstance(result, ConfigError)
    assert {"60", "(ROCM_HWQ_AUTOSET_TIMEOUT)"} <= set(str(result).split())
    assert evaluation.child.process.returncode == -signal.SIGKILL


def test_at_the_deadline_the_launcher_waits_no_more(
    fake_child: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """With the clock stopped: exactly at the deadline, no wait; just before
    it, the wait goes on until the answer comes."""
    now = [1000.0]
    monkeypatch.setattr(process.time, "monotonic", lambda: now[0])
    evaluation = parent.Evaluation(pending(), fake_child)
    now[0] = evaluation.deadline
    result, _ = result_of(evaluation)
    assert isinstance(result, ConfigError)
    assert {"120", "(ROCM_HWQ_AUTOSET_TIMEOUT)"} <= set(str(result).split())
    evaluation = parent.Evaluation(pending(), fake_child)
    now[0] = evaluation.deadline - 0.5
    assert result_of(evaluation) == (EVALUATED, False)
    monkeypatch.undo()
    evaluation.settle()


def test_the_answer_is_taken_at_its_end_of_line_and_the_child_ends_by_the_deadline(
    fake_child: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The child goes on after its answer (it stores it in the cache): the
    launcher does not wait for that, and ends it at the deadline at the
    latest (past it: at once)."""
    clock = Clock()
    monkeypatch.setattr(process.time, "monotonic", clock)
    environ = dict(fake_child, FAKE_CHILD_LINGER="30", ROCM_HWQ_AUTOSET_TIMEOUT="60")
    evaluation = parent.Evaluation(pending(), environ)
    start = time.perf_counter()
    assert result_of(evaluation) == (EVALUATED, False)
    assert time.perf_counter() - start < 10
    clock.ahead += 65  # the launcher's own work outlasted the timeout
    start = time.perf_counter()
    evaluation.settle()
    assert time.perf_counter() - start < 0.7
    assert evaluation.child.process.returncode == -signal.SIGKILL


def test_a_child_that_answers_nonsense_and_goes_on_is_ended_at_once(
    fake_child: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(process, "REAP_SECONDS", 0.05)
    environ = dict(fake_child, FAKE_CHILD_OUT="not json", FAKE_CHILD_LINGER="30")
    evaluation = parent.Evaluation(pending(), environ)
    start = time.monotonic()
    result, _ = result_of(evaluation)
    assert time.monotonic() - start < 10
    assert isinstance(result, ConfigError) and str(result).split()[-1] == "9"


def test_a_child_ended_by_a_signal_says_which(
    fake_child: dict[str, str], request: pytest.FixtureRequest
) -> None:
    """Killed before it could answer (the OOM killer, say)."""
    environ = dict(fake_child, FAKE_CHILD_SIGNAL="15")
    result, cached = result_of(parent.Evaluation(pending(), environ))
    assert isinstance(result, ConfigError) and cached is False
    assert str(result).split()[-1] == str(signal.SIGTERM.value)
    check_lines(request, [("SIGTERM", str(result))])


def test_a_long_answer_is_read_whole_and_only_its_line(
    fake_child: dict[str, str],
) -> None:
    """An answer longer than a pipe holds comes in pieces."""
    from tests.fake_child import ANSWER

    long = json.dumps({**ANSWER, "padding": "x" * 100_000})
    environ = dict(fake_child, FAKE_CHILD_OUT=long + "\nanything after it")
    assert result_of(parent.Evaluation(pending(), environ)) == (EVALUATED, False)


def test_a_line_past_the_limit_is_no_answer(
    fake_child: dict[str, str], request: pytest.FixtureRequest
) -> None:
    """A child that writes more than :data:`process.MAX_LINE_BYTES` with no end
    of line: read up to the limit, then taken as no answer (not as a wait
    until the deadline)."""
    times = str(process.MAX_LINE_BYTES // 1000 + 200)
    environ = dict(fake_child, FAKE_CHILD_OUT="x" * 1000, FAKE_CHILD_OUT_TIMES=times)
    evaluation = parent.Evaluation(pending(), environ)
    answer = evaluation.answer()
    assert answer.failure is not None
    check_lines(request, [("a line past the limit", answer.failure)])


def test_the_wait_for_an_answer_is_one_poll_not_a_spin(
    fake_child: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The launcher sleeps in the kernel until the child answers or the
    deadline comes: a handful of polls for a child that answers after 0.5 s,
    never one per millisecond."""
    polls = []
    poll = process.select.poll

    class Counted:
        def __init__(self) -> None:
            self.poller = poll()

        def register(self, fd: int, mask: int) -> None:
            self.poller.register(fd, mask)

        def poll(self, timeout: int) -> list[tuple[int, int]]:
            polls.append(timeout)
            return self.poller.poll(timeout)

    monkeypatch.setattr(process.select, "poll", Counted)
    environ = dict(fake_child, FAKE_CHILD_SLEEP="0.5")
    assert result_of(parent.Evaluation(pending(), environ)) == (EVALUATED, False)
    assert 1 <= len(polls) <= 5, polls


def test_at_exit_a_child_with_nothing_to_store_ends_at_once(
    fake_child: dict[str, str],
) -> None:
    """Only a child given time to store an answer (``linger``) goes on after
    its launcher exits: this one, which would answer in 0.5 s, is ended."""
    environ = dict(fake_child, FAKE_CHILD_SLEEP="0.5")
    child = process.Child(None, [], ["--module", "m"], environ)
    await_started(fake_child)
    child.at_exit()
    assert child.process.returncode == -signal.SIGKILL


def _forked(run: Any) -> int:
    """The wait status of a fork that runs ``run()``, then exits with 0."""
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the fork's
        try:
            run()
        finally:
            os._exit(0)
    return os.waitpid(pid, 0)[1]


@pytest.mark.parametrize("refused", ["nice", "sched_setscheduler", "autogroup"])
def test_a_step_the_kernel_refuses_never_stops_the_lowering(
    monkeypatch: pytest.MonkeyPatch, refused: str
) -> None:
    """``lowest_priority`` in a child of its own session: a step the kernel
    (or a container's seccomp) refuses, or a group it cannot read, is passed
    over, never raised."""

    def refuse(*args: Any) -> Any:
        raise PermissionError(errno.EPERM, os.strerror(errno.EPERM))

    if refused == "autogroup":
        monkeypatch.setattr(process, "AUTOGROUP", "/nonexistent/autogroup")
    else:
        monkeypatch.setattr(process.os, refused, refuse)

    def lower() -> None:
        os.setsid()
        process.lowest_priority()
        os._exit(7)

    status = _forked(lower)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 7


@pytest.mark.parametrize(
    ("code", "retried"),
    [(errno.ENOENT, False), (errno.EAGAIN, True), (None, False)],  # None: no errno
    ids=["refused", "busy", "nameless"],
)
def test_a_session_group_that_cannot_be_lowered_says_why(
    tmp_path: Path, code: int | None, retried: bool
) -> None:
    """Where the kernel groups by session and the group cannot be set to nice
    19, ``lowest_priority`` says why (the caller's line, its verdict): a busy
    group is tried again after a pause, up to its tries; anything else at
    once. Never None: the group would stay at the training's priority."""
    error = OSError() if code is None else OSError(code, os.strerror(code))
    why = "OSError" if code is None else os.strerror(code)  # no text: its type
    switch, group, seen = tmp_path / "switch", tmp_path / "group", tmp_path / "seen"
    switch.write_text("1\n")
    group.write_text("/autogroup-1 nice 0\n")
    opened: list[str] = []
    pauses: list[float] = []
    real_open = os.open

    def refused(path: str, *args: Any, **kwargs: Any) -> int:
        if path != str(group):  # another's (a tool's record of calls)
            return real_open(path, *args, **kwargs)
        opened.append(path)
        raise error

    def lower() -> None:
        os.setsid()
        process.AUTOGROUP_SWITCH, process.AUTOGROUP = str(switch), str(group)
        process.os.open, process.time.sleep = refused, pauses.append  # type: ignore[assignment]
        said = process.lowest_priority()
        seen.write_text(json.dumps([said, len(opened), pauses]))

    assert _forked(lower) == 0
    said, attempts, paused = json.loads(seen.read_text())
    tries = process.AUTOGROUP_TRIES if retried else 1
    assert (said, attempts) == (f"{group} cannot be set to nice 19 ({why})", tries)
    assert paused == ([process.AUTOGROUP_PAUSE] * tries if retried else [])


def test_a_child_whose_launcher_is_gone_before_its_watch_ends() -> None:
    status = _forked(lambda: process.watch(0))  # 0: never our parent
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 1


def test_ending_the_group_ends_what_the_child_started() -> None:
    """``end_group``: the child's whole process group, its children too."""
    read, write = os.pipe()

    def group_with_a_grandchild() -> None:
        os.setpgid(0, 0)
        grandchild = subprocess.Popen(["sleep", "60"])
        os.write(write, f"{grandchild.pid}\n".encode())
        process.end_group()

    status = _forked(group_with_a_grandchild)
    os.close(write)
    grandchild = int(os.read(read, 64))
    os.close(read)
    assert os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL
    for _ in range(100):  # reaped by whoever adopted it, or a zombie
        try:
            state = Path(f"/proc/{grandchild}/stat").read_text().rsplit(")", 1)[1]
        except FileNotFoundError:
            break
        if state.split()[0] == "Z":
            break
        time.sleep(0.05)
    else:
        os.kill(grandchild, signal.SIGKILL)
        pytest.fail("the child's own child outlived its group's end")


def test_ending_the_group_ends_the_child_s_own_group(tmp_path: Path) -> None:
    """``end_group`` signals the group of the process that calls it, none
    other (where init's group is 0, a mutant's ``getpgid(1)`` is ours too)."""
    seen = tmp_path / "seen"

    def leader() -> None:
        os.setpgid(0, 0)
        process.os.killpg = lambda *sent: seen.write_text(  # type: ignore[assignment]
            json.dumps([os.getpid(), *sent])
        )
        process.end_group()

    status = _forked(leader)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 1
    leader_pid, pgid, sent = json.loads(seen.read_text())
    assert (pgid, sent) == (leader_pid, signal.SIGKILL)  # its own group: its pid


#: A descriptor ``select()`` cannot watch (``FD_SETSIZE``: 1024 on Linux).
PAST_SELECT = 1024


def test_an_answer_is_read_on_a_descriptor_select_cannot_watch(
    fake_child: dict[str, str],
) -> None:
    """A launcher started with over a thousand descriptors open (a job
    system's, inherited): its pipe to the child has a number past 1023. Was:
    ``select()`` refused it, and every ``--module`` launch of that shape left
    the value unset with an internal error, the cache off too."""
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    need = PAST_SELECT + 64
    if hard != resource.RLIM_INFINITY and hard < need:
        pytest.skip(f"at most {hard} open files here")
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, need), hard))
    held: list[int] = []
    try:
        while not held or held[-1] < PAST_SELECT:
            held.append(os.open(os.devnull, os.O_RDONLY | os.O_CLOEXEC))
        evaluation = parent.Evaluation(pending(), fake_child)
        assert evaluation.child.process.stdout is not None
        assert evaluation.child.process.stdout.fileno() > PAST_SELECT
        assert result_of(evaluation) == (EVALUATED, False)
        evaluation.settle()
    finally:
        for fd in held:
            os.close(fd)
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


@pytest.mark.parametrize("spare", [True, False])
def test_the_child_says_its_line_on_a_copy_of_our_stderr(
    fake_child: dict[str, str], monkeypatch: pytest.MonkeyPatch, spare: bool
) -> None:
    """With no descriptor to spare for the copy (EMFILE), it is given none,
    never another of ours."""
    if not spare:

        def no_more(fd: int) -> int:
            raise OSError(errno.EMFILE, os.strerror(errno.EMFILE))

        monkeypatch.setattr(process.os, "dup", no_more)
    child = process.Child(None, [], ["--module", "m"], fake_child, say=True)
    try:
        [record] = await_started(fake_child)
    finally:
        child.end()
    stderr = os.fstat(2)
    assert record.get("say") == ([stderr.st_dev, stderr.st_ino] if spare else None)


def test_nothing_the_child_says_on_stderr_reaches_the_launchers(
    fake_child: dict[str, str], capfd: pytest.CaptureFixture[str]
) -> None:
    """A warning at the child's start, before it silences itself."""
    environ = dict(fake_child, FAKE_CHILD_STDERR="DeprecationWarning: x\n")
    assert result_of(parent.Evaluation(pending(), environ)) == (EVALUATED, False)
    assert capfd.readouterr().err == ""


def test_a_launcher_that_closed_the_pipe_is_told_so(
    fake_child: dict[str, str], request: pytest.FixtureRequest
) -> None:
    """A launcher that closes every descriptor (as a daemon does) meanwhile:
    one reason, no exception, no child left."""
    evaluation = parent.Evaluation(pending(), dict(fake_child, FAKE_CHILD_SLEEP="60"))
    assert evaluation.child.process.stdout is not None
    os.close(evaluation.child.process.stdout.fileno())
    result, cached = result_of(evaluation)
    assert isinstance(result, ConfigError)
    assert str(result).endswith(f": {os.strerror(errno.EBADF)}")  # the system's
    check_lines(request, [("stdout closed", str(result))])
    assert cached is False
    assert evaluation.child.process.returncode == -signal.SIGKILL


def test_a_child_that_answered_and_ended_is_reaped_at_the_next_start(
    fake_child: dict[str, str],
) -> None:
    """A launcher that goes on starting workers leaves no zombie behind."""
    evaluation = parent.Evaluation(pending(), fake_child)
    w = parent.Waiter(pending(), Applied(), evaluation=evaluation)
    try:
        w.audit(POPEN, popen_args({}))  # the child answers, then ends
        pid = evaluation.child.pid
        deadline = time.monotonic() + 10
        while _alive(pid) and time.monotonic() < deadline:
            time.sleep(0.02)
        w.audit(POPEN, popen_args({}))  # the next worker's start
        assert _state(pid) == ""
    finally:
        evaluation.child.end()


def test_end_kills_the_whole_group_in_bounded_time(fake_child: dict[str, str]) -> None:
    environ = dict(fake_child, FAKE_CHILD_SLEEP="60", FAKE_CHILD_GRANDCHILD="1")
    evaluation = parent.Evaluation(pending(), environ)
    [child] = await_started(environ)
    pipes = [evaluation.child.process.stdin, evaluation.child.process.stdout]
    start = time.monotonic()
    evaluation.child.end()
    assert time.monotonic() - start < process.REAP_SECONDS + 1
    assert all(pipe is not None and pipe.closed for pipe in pipes)  # no fd leaks
    assert _gone_within([child["pid"], child["grandchild"]], 2)


def test_a_child_that_ends_as_it_is_ended_is_no_error(
    fake_child: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    killpg = os.killpg

    def racing(pgid: int, signum: int) -> None:
        killpg(pgid, signum)
        raise ProcessLookupError("it ended meanwhile")

    evaluation = parent.Evaluation(pending(), dict(fake_child, FAKE_CHILD_SLEEP="60"))
    monkeypatch.setattr(process.os, "killpg", racing)
    evaluation.child.end()
    assert evaluation.child.process.returncode == -signal.SIGKILL


def test_a_child_that_will_not_die_holds_the_launcher_a_bounded_time(
    fake_child: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A child stuck in the GPU driver ignores even SIGKILL for a while."""
    environ = dict(fake_child, FAKE_CHILD_SLEEP="60", FAKE_CHILD_STUCK="1")
    evaluation = parent.Evaluation(pending(), environ)
    monkeypatch.setattr(process.os, "killpg", lambda pgid, signum: None)
    monkeypatch.setattr(process, "REAP_SECONDS", 0.05)
    start = time.monotonic()
    try:
        evaluation.child.end()
        assert time.monotonic() - start < 2
    finally:
        monkeypatch.undo()
        os.killpg(evaluation.child.pid, signal.SIGKILL)
        evaluation.child.process.wait(10)


PARENT = """
import os, sys, time
sys.path.insert(0, {root!r})
from rocm_hwq_autoset._evaluation import parent as parent
from rocm_hwq_autoset._evaluation import process
process.CHILD = "tests.fake_child"
from rocm_hwq_autoset._argv import Launch
parent.Evaluation(Launch("--module", {args!r}, False), dict(os.environ))
log = os.environ["FAKE_CHILD_LOG"]
while not (os.path.exists(log) and open(log).read().endswith("\\n")):
    time.sleep(0.05)
time.sleep(0.3)
{death}
"""

#: The parent ends, and a copy of it made by C code's fork (no at-fork handler
#: closed its copy of the child's pipe) lives on.
FORKED_FROM_C = """
import ctypes
if ctypes.CDLL(None).fork() == 0:
    time.sleep(3)
os._exit(0)
"""


@pytest.mark.parametrize(
    "death",
    ["os.kill(os.getpid(), 9)", "os._exit(0)", "raise SystemExit(1)", FORKED_FROM_C],
    ids=["SIGKILL", "os._exit", "exit", "a copy lives on"],
)
def test_the_child_never_outlives_its_parent(
    fake_child: dict[str, str], death: str
) -> None:
    """Whatever ends the parent (SIGKILL, os._exit, a normal exit), its child
    and the child's own process end within a second, even while a copy of the
    parent holds the pipe the child watches."""
    environ = dict(fake_child, FAKE_CHILD_SLEEP="60", FAKE_CHILD_GRANDCHILD="1")
    code = PARENT.format(root=str(ROOT), args=ARGS, death=death)
    subprocess.run([sys.executable, "-c", code], env=environ, timeout=30)
    [child] = started(environ)
    assert _gone_within([child["pid"], child["grandchild"]], 1.5)


#: The parent stops its child at once, before the child's interpreter reaches
#: its watch, and dies: nothing the child runs could ask for its end.
STOPPED = """
import os, signal, sys
sys.path.insert(0, {root!r})
from rocm_hwq_autoset._evaluation import parent as parent
from rocm_hwq_autoset._evaluation import process
process.CHILD = "tests.fake_child"
from rocm_hwq_autoset._argv import Launch
child = parent.Evaluation(Launch("--module", {args!r}, False), dict(os.environ)).child
os.kill(child.pid, signal.SIGSTOP)
print(child.pid, flush=True)
os.kill(os.getpid(), signal.SIGKILL)
"""


def test_a_child_stopped_before_its_watch_never_outlives_its_parent(
    fake_child: dict[str, str],
) -> None:
    """Its end is asked of the kernel before it runs (issue #36: it lived on,
    stopped, under pid 1, holding the launcher's pipes)."""
    environ = dict(fake_child, FAKE_CHILD_SLEEP="60")
    code = STOPPED.format(root=str(ROOT), args=ARGS)
    done = subprocess.run([sys.executable, "-c", code], env=environ, timeout=30,
                          capture_output=True, text=True)  # fmt: skip
    pid = int(done.stdout)
    try:
        assert _gone_within([pid], 1.5), _state(pid)
    finally:
        if _alive(pid):
            os.kill(pid, signal.SIGKILL)


#: A parent with no stdio starts its child, then lists what it holds.
NO_STDIO = """
import json, os, sys
sys.path.insert(0, {root!r})
from rocm_hwq_autoset._evaluation import parent as parent
from rocm_hwq_autoset._evaluation import process
process.CHILD = "tests.fake_child"
from rocm_hwq_autoset._argv import Launch
for fd in (0, 1, 2):
    os.close(fd)
sys.stdin = sys.stdout = sys.stderr = None
evaluation = parent.Evaluation(Launch("--module", {args!r}, False), dict(os.environ))
held = []
for fd in sorted(int(name) for name in os.listdir("/proc/self/fd")):
    try:
        os.fstat(fd)
        held.append(fd)
    except OSError:  # the listing's own, closed
        pass
with open({out!r}, "w") as out:
    json.dump([held, evaluation.child.read_line(evaluation.deadline) is not None], out)
"""


def test_a_parent_without_stdio_finds_no_pipe_of_ours_on_its_numbers(
    fake_child: dict[str, str], tmp_path: Path
) -> None:
    """Its pipes to the child never take 0, 1 or 2, where a program's C code
    writes stderr (issue #36: with stdio closed, a pipe of ours was its 2)."""
    out = tmp_path / "held.json"
    code = NO_STDIO.format(root=str(ROOT), args=ARGS, out=str(out))
    subprocess.run([sys.executable, "-c", code], env=fake_child, timeout=30)
    held, answered = json.loads(out.read_text())
    assert answered
    assert not set(held) & {0, 1, 2}, held


class Flags:
    """``sys.flags`` as a test sets it."""

    def __init__(self, **on: int) -> None:
        for name in ("isolated", "ignore_environment", "no_user_site", "safe_path",
                     "optimize", "bytes_warning"):  # fmt: skip
            setattr(self, name, on.get(name, 0))


def test_the_interpreter_the_training_runs_with(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The child's options and first path entry are the training's: this
    process's, when it is the training (``python -I ...``, a script's folder
    with its links resolved); none of torchrun's, whose workers run ``python
    -u PROGRAM`` in the environment. Part of the cache's key."""
    real = tmp_path / "real"
    real.mkdir()
    (tmp_path / "link").symlink_to(real)
    script = ("script", str(tmp_path / "link" / "train.py"))
    module = ("module", "torchtitan.train")
    monkeypatch.setattr(sys, "flags", Flags())
    monkeypatch.setattr(sys, "warnoptions", [])
    monkeypatch.setattr(sys, "_xoptions", {})
    here = Launch(MODULE_FORM, ARGS, True, script)
    assert process.interpreter_of(here, {}) == ((), str(real))
    assert process.interpreter_of(Launch(MODULE_FORM, ARGS, True, module), {}) == (
        (), os.getcwd())  # fmt: skip
    every = Flags(isolated=True, ignore_environment=True, no_user_site=True,
                  safe_path=True)  # fmt: skip
    monkeypatch.setattr(sys, "flags", every)
    assert process.interpreter_of(here, {}) == (("-I", "-E", "-s", "-P"), None)
    monkeypatch.setattr(sys, "flags", Flags(no_user_site=True))
    assert process.interpreter_of(here, {}) == (("-s",), str(real))
    worker = Launch(MODULE_FORM, ARGS, False, script)
    assert process.interpreter_of(worker, {}) == ((), str(real))  # not ours: -s
    safe = process.interpreter_of(worker, {"PYTHONSAFEPATH": "1"})
    assert safe == ((), None if sys.version_info >= (3, 11) else str(real))
    boot = process.BOOT.format(folder=process.FOLDER, child=process.CHILD)
    assert process.child_command(((("-s",), None)), "--parent", "1") == [
        sys.executable, "-s", "-S", "-c", boot, "--parent", "1", "--no-path0",
    ]  # fmt: skip
    keys = {launch_key(launch, {}) for launch in (
        here, Launch(MODULE_FORM, ARGS, True, module), worker)}  # fmt: skip
    assert len(keys) == 3
    for alone in ("isolated", "safe_path"):  # each puts nothing first
        monkeypatch.setattr(sys, "flags", Flags(**{alone: 1}))
        assert process.interpreter_of(here, {})[1] is None
    before_311 = Flags()  # no safe_path (-P) before CPython 3.11
    del before_311.safe_path  # type: ignore[attr-defined]
    monkeypatch.setattr(sys, "flags", before_311)
    assert process.interpreter_of(here, {}) == ((), str(real))


def test_a_copy_made_by_fork_lets_go_and_never_ends_the_child(
    fake_child: dict[str, str],
) -> None:
    """A forked copy of the parent (a worker started by ``os.fork``) closes
    its copies of the pipes and never ends, nor waits on, the child; the
    parent's own still does."""
    evaluation = parent.Evaluation(pending(), dict(fake_child, FAKE_CHILD_SLEEP="60"))
    child = evaluation.child
    copy = os.fork()
    if copy == 0:  # pragma: no cover - the copy
        let_go = bool(child.process.stdin.closed and child.process.stdout.closed)
        child.at_exit()
        child.end()
        os._exit(0 if let_go else 1)
    _, status = os.waitpid(copy, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert child.process.poll() is None  # the copy left it alone
    child.end()
    assert child.process.returncode == -signal.SIGKILL


@pytest.mark.parametrize(
    ("options", "passed"),
    [
        ([], []),
        (["-O"], ["-O"]),
        (["-OO", "-b"], ["-O", "-O", "-b", "-W", "default::BytesWarning"]),
        (["-W", "error::DeprecationWarning"], ["-W", "error::DeprecationWarning"]),
        (["-X", "utf8=0", "-X", "warn_default_encoding"],
         ["-X", "utf8=0", "-X", "warn_default_encoding"]),
    ],
)  # fmt: skip
def test_the_options_that_change_how_code_runs_reach_the_child(
    options: list[str], passed: list[str]
) -> None:
    """``python -O -m torchtitan.train --module ...``: the config's asserts and
    ``__debug__`` as the training has them, in the child and in the cache's
    key. Was: the child ran without ``-O``, so even the cache off answered for
    another program (issue #28, an adversarial try-out)."""
    code = (
        "import json, sys\n"
        "from rocm_hwq_autoset._argv import Launch\n"
        "from rocm_hwq_autoset._evaluation.process import interpreter_of\n"
        "launch = Launch('--module', ['--module', 'm', '--config', 'c'], True,"
        " ('module', 'torchtitan.train'))\n"
        "print(json.dumps(interpreter_of(launch, {})[0]))"
    )
    env = child_env({"PATH": os.environ["PATH"], "PYTHONPATH": str(ROOT)})
    done = subprocess.run([sys.executable, *options, "-c", code], env=env,
                          capture_output=True, text=True, timeout=30)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == passed


#: How a test starts a child: leading a session of its own; leading only a
#: process group of its own, in the test's session (a shell's job, a launcher
#: started from one); or in the test's own group and session.
STARTS: dict[str, dict[str, Any]] = {
    "own session": {"start_new_session": True},
    "own process group": {"preexec_fn": os.setpgrp},
    "shared": {},
}


@pytest.mark.parametrize("start", STARTS)
def test_the_lowest_priority_never_lowers_a_session_it_shares(
    start: str, request: pytest.FixtureRequest
) -> None:
    """Where the kernel groups tasks by session, a child lowers its session's
    group to nice 19 only where it leads that session: started in another's
    (a test's, a shell's, a launcher's by mistake), it would leave every
    process there ~1.4 % of a CPU. Was: it lowered the group it was in. A
    process group's leader is not a session's: asking for the group (getpgid)
    instead of the session would lower a launcher's whole session, training
    included."""
    own_session = start == "own session"
    try:
        grouped = Path(process.AUTOGROUP_SWITCH).read_text().strip() == "1"
    except OSError:
        grouped = False
    if not grouped:
        pytest.skip("the kernel does not group tasks by session here")
    code = (
        "from rocm_hwq_autoset._evaluation.process import lowest_priority\n"
        "print(lowest_priority())\n"
        "print(open('/proc/self/autogroup').read().split()[-1:])"
    )
    env = child_env({"PATH": os.environ["PATH"], "PYTHONPATH": str(ROOT)})
    done = subprocess.run([sys.executable, "-c", code], env=env, text=True,
                          capture_output=True, timeout=30,
                          **STARTS[start])  # fmt: skip
    assert done.returncode == 0, done.stderr
    said, nice = done.stdout.splitlines()
    if own_session:
        assert (said, nice) == ("None", "['19']")
    else:
        assert said != "None"  # not lowered, and said why: not its own session
        check_lines(request, [("in a session of another", said)], every_case=False)
        # The session's group as found (empty where the session is in the
        # kernel's root group, as a CI runner's started from init's can be).
        assert nice == str(Path("/proc/self/autogroup").read_text().split()[-1:])


def test_the_parent_lowers_its_child_at_once() -> None:
    """A child that leads its own session, from its parent: nice 19, the idle
    class, its session's group at nice 19 (where the kernel groups by
    session), before it runs an instruction of its own."""
    child = subprocess.Popen(["sleep", "30"], **STARTS["own session"])
    try:
        process.lower_priority_of(child.pid)
        assert os.getpriority(os.PRIO_PROCESS, child.pid) == 19
        assert os.sched_getscheduler(child.pid) == os.SCHED_IDLE
        if Path(process.AUTOGROUP_SWITCH).read_text().strip() == "1":
            group = Path(f"/proc/{child.pid}/autogroup").read_text()
            assert group.split()[-1:] == ["19"]
    finally:
        child.kill()
        child.wait()


@pytest.mark.parametrize("start", ["own process group", "shared"])
def test_the_parent_never_lowers_a_session_its_child_shares(start: str) -> None:
    """``lower_priority_of`` lowers a child's session's group only where the
    child leads that session: a child started in the test's own session is
    refused (EPERM), even where it leads a process group of its own, and the
    session's group stays as it was."""
    before = Path("/proc/self/autogroup").read_text().split()[-1:]
    child = subprocess.Popen(["sleep", "30"], **STARTS[start])
    try:
        with pytest.raises(PermissionError, match="not the leader") as refused:
            process.lower_priority_of(child.pid)
        assert refused.value.errno == errno.EPERM
        assert Path("/proc/self/autogroup").read_text().split()[-1:] == before
    finally:
        child.kill()
        child.wait()

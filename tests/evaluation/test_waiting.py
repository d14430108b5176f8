"""The launcher waits for a pending ``--module`` value only when it is needed
(``parent.Waiter``, ``spawns``): which events wait, what passes through,
what a forked copy does, what happens at exit. With a fake evaluation (no
process)."""

from __future__ import annotations

import inspect
import json
import os
import signal
import sys
import threading
import time
import traceback
from pathlib import Path
from typing import Any

import pytest

from rocm_hwq_autoset._argv import MODULE
from rocm_hwq_autoset._config import ConfigError
from rocm_hwq_autoset._decision import CACHED, PEER, Outcome, failed, internal_error
from rocm_hwq_autoset._evaluation import lines, spawns
from rocm_hwq_autoset._evaluation import parent as parent
from rocm_hwq_autoset._model import Config, Inputs, encode_inputs
from tests.fake_child import INPUTS, SETTINGS

from ..helpers import set_line, unset_line
from .helpers import POPEN, Applied, FakeEvaluation, pending, popen_args

#: The warning of the package's own failure while a launch waits.
BUG_LINE = unset_line(
    "--module", ConfigError(internal_error(RuntimeError("a bug of ours")))
)
#: What a launcher that waits was doing when it needed the value.
STARTED_A_PROCESS = inspect.signature(parent.Waiter.need).parameters["during"].default

Q8 = {"GPU_MAX_HW_QUEUES": "8", "ROCM_HWQ_AUTOSET_ORIGIN": "8 --module",
      "ROCM_HWQ_AUTOSET_INPUTS": encode_inputs(INPUTS)}  # fmt: skip


@pytest.mark.parametrize("event", sorted(spawns.SPAWN_EVENTS))
def test_every_process_start_waits_once(
    waiter: tuple[parent.Waiter, FakeEvaluation, Applied], event: str
) -> None:
    w, evaluation, applied = waiter
    w.audit(event, ("x",))
    w.audit(event, ("x",))
    w.audit(POPEN, popen_args(None))
    assert evaluation.calls == ["answer"]
    [(outcome, environs, quiet, _)] = applied.calls
    assert (outcome.level, outcome.queues, environs, quiet) == ("set", 8, (), False)
    assert w.outcome is outcome


@pytest.mark.parametrize(
    ("event", "args"),
    [
        ("open", ("/etc/passwd", "r", 0)),
        ("os.listdir", ("/tmp",)),
        ("import", ("numpy", None, [], [], [])),
        ("import", ("torch", None, [], [], [])),  # a launcher imports torch too
        ("import", ("torchvision", None, [], [], [])),
        ("exec", (None,)),
        ("subprocess.Popenx", ("x",)),
    ],
)
def test_other_events_do_not_wait(
    waiter: tuple[parent.Waiter, FakeEvaluation, Applied],
    event: str, args: tuple[Any, ...],
) -> None:  # fmt: skip
    w, evaluation, applied = waiter
    w.audit(event, args)
    assert evaluation.calls == [] and applied.calls == []


def test_only_a_popen_mapping_is_given_the_value_at_its_event(
    waiter: tuple[parent.Waiter, FakeEvaluation, Applied],
) -> None:
    """The events as CPython raises them: os.fork's has no arguments;
    os.posix_spawn and os.exec have read their mapping before it (their wrappers
    gave it the value): the caller's mapping is left as it is."""
    w, evaluation, applied = waiter
    w.audit("os.fork", ())
    assert evaluation.calls == ["answer"] and len(applied.calls) == 1
    env: dict[str, str] = {}
    w.audit("os.posix_spawn", ("/bin/true", ["true"], env))
    w.audit("os.exec", ("/bin/true", ["true"], env))
    assert env == {} and len(applied.calls) == 1


def test_the_training_process_waits_before_it_imports_torch() -> None:
    evaluation = FakeEvaluation()
    w = parent.Waiter(pending(in_process=True), Applied(), evaluation=evaluation)  # type: ignore[arg-type]
    w.audit("import", ("torchvision", None, [], [], []))
    assert evaluation.calls == []
    w.audit("import", ("torch", None, [], [], []))
    assert evaluation.calls == ["answer"]  # at torch itself, before its modules
    w.audit("import", ("torch.cuda", None, [], [], []))
    assert evaluation.calls == ["answer"]
    # A torch module first (a launcher's own import hook may hide torch's): too.
    evaluation = FakeEvaluation()
    w = parent.Waiter(pending(in_process=True), Applied(), evaluation=evaluation)  # type: ignore[arg-type]
    w.audit("import", ("torch.cuda", None, [], [], []))
    assert evaluation.calls == ["answer"]


def test_a_worker_environment_made_before_the_value_gets_it(
    waiter: tuple[parent.Waiter, FakeEvaluation, Applied],
) -> None:
    """torch elastic makes each worker's env up front, from os.environ plus the
    rank's variables; the first start waits, every later one gets the value."""
    w, evaluation, _ = waiter
    envs: list[dict[str, str]] = [{"RANK": str(r)} for r in range(3)]
    for env in envs:
        w.audit(POPEN, popen_args(env))
    assert evaluation.calls == ["answer"]
    for rank, env in enumerate(envs):
        assert env == {"RANK": str(rank), **Q8}


@pytest.mark.parametrize(
    "own",
    [{"GPU_MAX_HW_QUEUES": "2"}, {"GPU_MAX_HW_QUEUES": ""},
     {"ROCM_HWQ_AUTOSET_ORIGIN": "unset --module"}],
)  # fmt: skip
def test_a_value_the_launcher_put_there_stays(
    waiter: tuple[parent.Waiter, FakeEvaluation, Applied], own: dict[str, str]
) -> None:
    w, _, _ = waiter
    env = dict(own)
    w.audit(POPEN, popen_args(env))
    assert env == own


def test_a_failed_evaluation_marks_every_worker(
    waiter: tuple[parent.Waiter, FakeEvaluation, Applied],
) -> None:
    w, evaluation, applied = waiter
    evaluation.gives = ConfigError("no such config", "--config")
    envs: list[dict[str, str]] = [{}, {}]
    for env in envs:
        w.audit(POPEN, popen_args(env))
    assert envs == [{"ROCM_HWQ_AUTOSET_ORIGIN": "unset --module"}] * 2
    [(outcome, *_)] = [call for call in applied.calls if not call[2]]
    said = unset_line("--module", ConfigError("no such config", "--config"))
    assert outcome.line({}) == said


DENSE_TP2 = Config(Inputs(tp=2, cudagraph=True), {})


def test_a_rank_started_without_a_launcher_counts_its_world_size(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """srun or mpirun start ``python -m torchtitan.train`` with WORLD_SIZE set:
    2 ranks // TP 2 leave no FSDP lane, so Q is 4, not 8."""
    monkeypatch.setenv("WORLD_SIZE", "2")
    applied = Applied()
    evaluation = FakeEvaluation(DENSE_TP2)
    w = parent.Waiter(pending(in_process=True), applied, evaluation=evaluation)  # type: ignore[arg-type]
    w.audit("import", ("torch", None, [], [], []))
    [(outcome, *_)] = applied.calls
    assert (outcome.queues, outcome.marker) == (4, "4 --module")
    assert "fsdp_comm" not in outcome.message


def test_two_threads_starting_workers_both_wait_and_both_get_it() -> None:
    evaluation = FakeEvaluation(delay=0.3)
    w = parent.Waiter(pending(), Applied(), evaluation=evaluation)  # type: ignore[arg-type]
    envs: list[dict[str, str]] = [{}, {}]
    threads = [threading.Thread(target=w.audit, args=(POPEN, popen_args(env)))
               for env in envs]  # fmt: skip
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(5)
    assert evaluation.calls == ["answer"]
    assert envs == [Q8, Q8]


class Stop(Exception):
    """Like torch elastic's SignalException: an Exception its handler raises."""


@pytest.mark.parametrize("how", ["handler", "KeyboardInterrupt", "SystemExit"])
def test_a_signal_or_an_exit_passes_through_and_ends_the_child(
    how: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    evaluation = FakeEvaluation()
    if how == "KeyboardInterrupt":
        evaluation.raises = KeyboardInterrupt()
    elif how == "SystemExit":
        evaluation.raises = SystemExit(3)
    applied = Applied()
    w = parent.Waiter(pending(), applied, evaluation=evaluation)  # type: ignore[arg-type]
    expected = {"handler": Stop, "KeyboardInterrupt": KeyboardInterrupt,
                "SystemExit": SystemExit}[how]  # fmt: skip

    def handler(signum: int, frame: object) -> None:
        raise Stop(f"got signal {signum}")

    previous = signal.signal(signal.SIGUSR1, handler)
    try:
        if how == "handler":  # the signal arrives while the launcher waits
            evaluation.delay = 5.0
            threading.Timer(0.2, os.kill, (os.getpid(), signal.SIGUSR1)).start()
        start = time.monotonic()
        monkeypatch.setattr(sys, "excepthook", sys.excepthook)
        with pytest.raises(expected) as raised:
            w.audit(POPEN, popen_args({}))
        assert time.monotonic() - start < 2
    finally:
        signal.signal(signal.SIGUSR1, previous)
    assert w.abandoned and w.outcome is None
    # One line says what the signal cut short; the launcher stops as it would.
    [(said, environs, quiet, _)] = applied.calls
    assert (said.level, environs, quiet) == ("warning", (), False)
    waited = float(said.text.split()[2])  # what cut it short, after how long
    assert 0 <= waited < 2 and said.text.split()[:2] == [expected.__name__, "after"]
    assert said.message == lines.interrupted(expected(), waited).message
    env: dict[str, str] = {}
    w.audit(POPEN, popen_args(env))  # a later start does not wait again
    assert evaluation.calls == ["answer"] and env == {}
    if os.environ.get("MUTANT_UNDER_TEST") == "stats":  # tools/mutation.py's
        return  # counting: mutmut's trampolines run a call as it passes (their
    # finally), and a call on the way takes the cut off (_cut_at), as it must
    # Caught by the program (here, the test's frame), its traceback ends in the
    # program's own frame, as without the hook (was: parent.py's audit and
    # need, shown by a program's traceback.print_exc(), issue #37).
    frames = traceback.extract_tb(raised.value.__traceback__)
    assert [(f.filename, f.name) for f in frames] == [
        (__file__, "test_a_signal_or_an_exit_passes_through_and_ends_the_child")
    ]
    assert sys.gettrace() is None  # the cut's trace is off again, in the
    assert sys._getframe().f_trace is None  # program's frame too (a debugger's)
    # Printed as the program's end: its own frames, none of the wait's.
    capsys.readouterr()
    sys.excepthook(expected, raised.value, raised.value.__traceback__)
    printed = capsys.readouterr().err
    assert "test_waiting.py" in printed and "parent.py" not in printed, printed


def test_under_a_tracer_the_traceback_python_prints_ends_in_the_program(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Where a tracer already runs (a debugger's, coverage's), the wait leaves
    it in place and the program's traceback as it is; the one Python prints
    (``sys.excepthook``) ends in the program's frame. Another exception, and
    this one again, are printed as they come."""
    evaluation = FakeEvaluation(raises=KeyboardInterrupt())
    w = parent.Waiter(pending(), Applied(), evaluation=evaluation)  # type: ignore[arg-type]
    printed: list[tuple[type[BaseException], BaseException, list[tuple[str, str]]]] = []

    def program_s_hook(
        kind: type[BaseException], value: BaseException, tb: Any
    ) -> None:
        frames = [(f.filename, f.name) for f in traceback.extract_tb(tb)]
        assert value.__traceback__ is tb  # one traceback, whichever it prints
        printed.append((kind, value, frames))

    def tracer(frame: Any, event: str, arg: Any) -> None:
        return None

    monkeypatch.setattr(sys, "excepthook", program_s_hook)
    before = sys.gettrace()
    sys.settrace(tracer)
    try:
        with pytest.raises(KeyboardInterrupt) as raised:
            w.audit(POPEN, popen_args({}))
        traced = sys.gettrace()
    finally:
        sys.settrace(before)
    assert traced is tracer
    exc = raised.value
    caught = {f.filename for f in traceback.extract_tb(exc.__traceback__)}
    assert parent.__file__ in caught  # the tracer's view: nothing cut
    other = ValueError("the program's own")  # (its __traceback__: None)
    sys.excepthook(ValueError, other, None)
    sys.excepthook(KeyboardInterrupt, exc, exc.__traceback__)
    name = "test_under_a_tracer_the_traceback_python_prints_ends_in_the_program"
    assert printed == [(ValueError, other, []),
                       (KeyboardInterrupt, exc, [(__file__, name)])]  # fmt: skip


def test_our_own_failure_is_one_warning_never_an_exception() -> None:
    evaluation = FakeEvaluation(raises=RuntimeError("a bug of ours"))
    applied = Applied()
    w = parent.Waiter(pending(), applied, evaluation=evaluation)  # type: ignore[arg-type]
    env: dict[str, str] = {}
    w.audit(POPEN, popen_args(env))  # no exception: the worker starts
    [(outcome, *_)] = [call for call in applied.calls if not call[2]]
    assert outcome.level == "warning"
    assert outcome.line({}) == BUG_LINE
    assert env == {"ROCM_HWQ_AUTOSET_ORIGIN": "unset --module"}


@pytest.mark.parametrize("cached", [False, True])
def test_another_launch_s_answer_is_said_to_be_one(
    waiter: tuple[parent.Waiter, FakeEvaluation, Applied], cached: bool
) -> None:
    w, evaluation, applied = waiter
    evaluation.cached = cached
    w.need()
    [(outcome, _, quiet, _)] = applied.calls
    assert not quiet
    five = ("compute", "all_reduce", "fsdp_comm", "expert_comm", "cudagraph_capture")
    assert outcome.line({}) == set_line(8, five, where=PEER if cached else "")


@pytest.mark.parametrize("in_process", [False, True])
def test_another_launch_s_answer_is_checked_and_its_verdict_heeded(
    in_process: bool,
) -> None:
    """The child that took a peer's answer goes on to check it: a launcher
    heeds its verdict for the processes it starts from then on; a launch that
    trains in its own process has none to start (the child says it itself)."""
    from rocm_hwq_autoset._evaluation.answer import Answer, Verdict

    evaluation = FakeEvaluation(cached=True)
    check = Checking()
    evaluation.child = check  # type: ignore[assignment]
    w = parent.Waiter(pending(in_process), Applied(), evaluation=evaluation)  # type: ignore[arg-type]
    w.need()
    assert w.check is (None if in_process else check)
    if in_process:
        return
    check.lines.append(
        json.dumps(Verdict("stale", Answer(config=Q4)).to_json()).encode()
    )
    later: dict[str, str] = {}
    w.audit(POPEN, popen_args(later))
    assert later["GPU_MAX_HW_QUEUES"] == "4"


def test_our_own_failure_after_the_answer_is_one_warning(
    waiter: tuple[parent.Waiter, FakeEvaluation, Applied],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def broken(*args: object, **kwargs: object) -> Outcome:
        raise RuntimeError("a bug of ours")

    monkeypatch.setattr(parent, "conclude", broken)
    w, _, applied = waiter
    env: dict[str, str] = {}
    w.audit(POPEN, popen_args(env))
    [(outcome, *_)] = [call for call in applied.calls if not call[2]]
    assert (outcome.level, outcome.marker) == ("warning", "unset --module")
    assert outcome.line({}) == BUG_LINE
    assert env == {"ROCM_HWQ_AUTOSET_ORIGIN": "unset --module"}


def test_a_process_the_evaluation_starts_while_waited_for_does_not_wait() -> None:
    """An audited start inside the wait (the evaluation's own) passes: the
    evaluation is asked once and its answer applied once."""
    applied = Applied()
    evaluation = FakeEvaluation()
    w = parent.Waiter(pending(), applied, evaluation=evaluation)  # type: ignore[arg-type]
    evaluation.meanwhile = lambda: w.audit(POPEN, popen_args(None))
    w.need()
    assert evaluation.calls == ["answer"]
    [(outcome, environs, quiet, _)] = applied.calls
    assert (outcome.queues, environs, quiet) == (8, (), False)


def test_the_launchers_own_environment_is_not_given_the_value_twice(
    waiter: tuple[parent.Waiter, FakeEvaluation, Applied],
) -> None:
    """``Popen(env=os.environ)``: the value went into os.environ when it came
    (here the stand-in apply sets nothing there); nothing more is said."""
    w, _, applied = waiter
    w.audit(POPEN, popen_args(os.environ))
    assert [(o.queues, envs, quiet) for o, envs, quiet, _ in applied.calls] == [
        (8, (), False)
    ]


class Refusing(dict):  # type: ignore[type-arg]
    """A mapping a launcher made that takes no new variables."""

    def __setitem__(self, key: str, value: str) -> None:
        raise TypeError("read-only")


def test_a_mapping_that_refuses_the_value_never_fails_the_start(
    waiter: tuple[parent.Waiter, FakeEvaluation, Applied],
) -> None:
    w, evaluation, _ = waiter
    env = Refusing()
    w.audit(POPEN, popen_args(env))  # no exception: the worker starts without it
    assert evaluation.calls == ["answer"] and env == {}


def test_is_foreign() -> None:
    def handler(signum: int, frame: object) -> None:
        raise Stop("signal")

    previous = signal.signal(signal.SIGUSR2, handler)
    try:
        with pytest.raises(Stop) as caught:
            handler(0, None)
        assert parent.is_foreign(caught.value)  # raised by an installed handler
    finally:
        signal.signal(signal.SIGUSR2, previous)
    with pytest.raises(Stop) as caught:
        handler(0, None)
    assert not parent.is_foreign(caught.value)  # the same code, no handler now
    assert parent.is_foreign(KeyboardInterrupt())
    assert parent.is_foreign(SystemExit(0))
    assert not parent.is_foreign(ValueError("ours"))


class Agent:
    """A launcher whose signal handler is a method of its own."""

    def on_signal(self, signum: int, frame: object) -> None:
        raise Stop("signal")


def test_an_exception_from_a_handler_that_is_a_method_is_foreign() -> None:
    agent = Agent()
    previous = signal.signal(signal.SIGUSR2, agent.on_signal)
    try:
        with pytest.raises(Stop) as caught:
            agent.on_signal(0, None)
        assert parent.is_foreign(caught.value)
    finally:
        signal.signal(signal.SIGUSR2, previous)


def test_a_forked_copy_never_waits_for_the_evaluation(
    waiter: tuple[parent.Waiter, FakeEvaluation, Applied],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    w, evaluation, applied = waiter
    monkeypatch.setattr(parent.os, "getpid", lambda: w.owner + 1)
    w.audit(POPEN, popen_args({}))
    w.at_exit()
    assert evaluation.calls == [] and applied.calls == []


def test_at_exit_no_more_waiting(
    waiter: tuple[parent.Waiter, FakeEvaluation, Applied],
) -> None:
    w, evaluation, _ = waiter
    w.at_exit()
    w.audit(POPEN, popen_args({}))  # exiting: no more waiting
    assert evaluation.calls == [] and evaluation.child.linger == 0


def test_a_child_that_answered_may_store_its_answer_at_exit(
    waiter: tuple[parent.Waiter, FakeEvaluation, Applied],
) -> None:
    w, evaluation, _ = waiter
    w.audit(POPEN, popen_args({}))
    assert evaluation.calls == ["answer"]
    assert evaluation.child.linger == parent.STORE_SECONDS


def test_functions_that_read_the_environment_first_wait_first(
    waiter: tuple[parent.Waiter, FakeEvaluation, Applied],
) -> None:
    """os.posix_spawn and os.execve convert their environment before their audit
    event: the wrapper waits first, and a mapping of their own gets the value."""
    w, evaluation, _ = waiter
    seen: list[Any] = []
    wrapped = w.wrappers.waiting_first(
        lambda *args, **kwargs: seen.append((args, kwargs))
    )
    env: dict[str, str] = {}
    wrapped("/bin/true", ["true"], env)
    assert evaluation.calls == ["answer"] and env == Q8
    env2: dict[str, str] = {}
    wrapped("/bin/true", ["true"], env=env2)
    assert env2 == Q8
    assert seen == [(("/bin/true", ["true"], env), {}),
                    (("/bin/true", ["true"]), {"env": env2})]  # fmt: skip


@pytest.mark.forked
def test_wrappers_are_put_back_once_the_value_is_in(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import _posixsubprocess

    originals = [os.posix_spawn, os.execve, _posixsubprocess.fork_exec]
    applied = Applied()
    w = parent.Waiter(pending(), applied, evaluation=FakeEvaluation())  # type: ignore[arg-type]
    monkeypatch.setattr(sys, "addaudithook", lambda hook: None)  # not for the tests
    monkeypatch.delattr(os, "posix_spawnp")  # a platform without it: no matter
    w.install()
    assert not hasattr(os, "posix_spawnp")
    assert [os.posix_spawn, os.execve, _posixsubprocess.fork_exec] != originals
    w.need()
    assert [os.posix_spawn, os.execve, _posixsubprocess.fork_exec] == originals


@pytest.mark.forked
def test_a_wrapped_function_removed_meanwhile_does_not_stop_the_value(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    applied = Applied()
    w = parent.Waiter(pending(), applied, evaluation=FakeEvaluation())  # type: ignore[arg-type]
    monkeypatch.setattr(sys, "addaudithook", lambda hook: None)  # not for the tests
    w.install()
    del os.execve  # a library of the launcher took it away
    env: dict[str, str] = {}
    w.audit(POPEN, popen_args(env))
    assert [(o.queues, quiet) for o, _, quiet, _ in applied.calls] == [
        (8, False),
        (8, True),
    ]
    assert env == Q8


@pytest.mark.forked
@pytest.mark.parametrize(
    "how", ["posix_spawn", "spawn", "forkserver", "execv", "frozen mapping"]
)
def test_processes_started_without_a_mapping_of_their_own_get_the_value(
    how: str, tmp_path: Path
) -> None:
    """The real hook's apply, in a forked test process: os.posix_spawn with
    os.environ, multiprocessing's spawn (no audit event), os.execv (C environ)."""
    from rocm_hwq_autoset import _hook

    for name in ("GPU_MAX_HW_QUEUES", "ROCM_HWQ_AUTOSET_ORIGIN", "LOCAL_RANK"):
        os.environ.pop(name, None)
    os.environ["ROCM_HWQ_AUTOSET_LOG"] = "quiet"
    w = parent.Waiter(pending(), _hook.apply, evaluation=FakeEvaluation(delay=0.2))
    w.install()
    out = tmp_path / "seen"
    write = (f"import os; open({str(out)!r}, 'w')"
             ".write(os.environ.get('GPU_MAX_HW_QUEUES', 'none'))")  # fmt: skip
    if how == "posix_spawn":
        pid = os.posix_spawn(sys.executable, [sys.executable, "-c", write], os.environ)
        os.waitpid(pid, 0)
    elif how in ("spawn", "forkserver"):  # no audit event: the wrapper waits
        import multiprocessing

        context = multiprocessing.get_context(how)
        process = context.Process(target=exec, args=(write,))
        process.start()
        process.join(30)
    elif how == "frozen mapping":  # a limit: a mapping the value cannot go into
        import types

        frozen = types.MappingProxyType(dict(os.environ))
        pid = os.posix_spawn(sys.executable, [sys.executable, "-c", write], frozen)
        os.waitpid(pid, 0)
        assert out.read_text() == "none"  # it started without the value ...
        assert os.environ["GPU_MAX_HW_QUEUES"] == "8"  # ... which is here now
        return
    else:
        pid = os.fork()  # audited: it waits here, before the copy exists
        if pid == 0:
            os.execv(sys.executable, [sys.executable, "-c", write])
        os.waitpid(pid, 0)
    assert out.read_text() == "8"


@pytest.mark.forked
def test_a_fork_made_from_c_code_never_waits_nor_ends_the_evaluation(
    tmp_path: Path,
) -> None:
    """libc's fork runs no Python at-fork handler: the copy still holds the
    waiter. It starts without the value, and never waits on the evaluation nor
    ends it; the parent's evaluation goes on."""
    import ctypes

    evaluation = FakeEvaluation(delay=0.2)
    w = parent.Waiter(pending(), Applied(), evaluation=evaluation)  # type: ignore[arg-type]
    seen = tmp_path / "seen"
    pid = ctypes.CDLL(None).fork()
    if pid == 0:  # the copy: as far from Python's fork as code can be
        try:
            env: dict[str, str] = {}
            w.audit(POPEN, popen_args(env))
            w.at_exit()
            seen.write_text(json.dumps([evaluation.calls, env]))
        finally:
            os._exit(0)
    os.waitpid(pid, 0)
    assert json.loads(seen.read_text()) == [[], {}]
    w.audit(POPEN, popen_args({}))
    assert evaluation.calls == ["answer"]  # the parent still waits, once


class Checking:
    """A check child without a process: its verdict line comes when given (an
    ``OSError`` given is raised); it is never waited for."""

    def __init__(self) -> None:
        self.lines: list[bytes | OSError] = []
        self.asked = 0
        self.linger = 0.0

    def read_line(self, deadline: float) -> bytes | None:
        self.asked += 1
        assert deadline <= time.monotonic()  # waits for nothing
        line = self.lines.pop(0) if self.lines else None
        if isinstance(line, OSError):
            raise line
        return line

    def reap(self) -> None:
        pass


Q4 = Config(Inputs(cudagraph=False), SETTINGS)  # compute, all_reduce, fsdp_comm


class Removals:
    """Stands for the wrappers of a waiter (``spawns.Wrappers``): how often
    they were taken off."""

    def __init__(self) -> None:
        self.removed = 0

    def remove(self) -> None:
        self.removed += 1


def test_a_forked_copy_never_reads_the_check_s_verdict() -> None:
    """A process forked from the launcher (multiprocessing's fork) shares the
    check's pipe: were it to read the verdict, the launcher would never get
    it. Only the process that started the check reads it."""
    check = Checking()
    cached = conclude_cached()
    w = parent.Waiter(pending(), Applied(), outcome=cached, check=check)  # type: ignore[arg-type]
    w.owner = os.getpid() + 1  # this process as a forked copy sees it
    env: dict[str, str] = {}
    w.audit(POPEN, popen_args(env))
    assert check.asked == 0 and env == Q8  # the value it has, all the same


def test_a_signal_passes_through_even_when_its_line_cannot_be_said() -> None:
    """Ctrl-C while the launcher waits, with stderr full: the line that says
    what it cut short cannot be written, and the KeyboardInterrupt goes on
    as it came (never an OSError of ours instead)."""

    class Full(Applied):
        def __call__(self, outcome: Outcome, *environs: Any, **kwargs: Any) -> None:
            raise OSError(28, "No space left on device")

    evaluation = FakeEvaluation(raises=KeyboardInterrupt())
    w = parent.Waiter(pending(), Full(), evaluation=evaluation)  # type: ignore[arg-type]
    with pytest.raises(KeyboardInterrupt):
        w.audit(POPEN, popen_args({}))
    assert w.abandoned and w.outcome is None


def conclude_cached() -> Outcome:
    from rocm_hwq_autoset._decision import conclude

    return conclude({}, pending(), Config(INPUTS, {}), where=CACHED)


@pytest.mark.parametrize("verdict", ["stale", "same", "unchecked", "no line", "error"])
def test_a_checks_verdict_serves_the_rest_of_the_launch(verdict: str) -> None:
    """torchrun ``--max-restarts``: the check finds the cached answer stale
    during the first run; every worker started after that gets the corrected
    value, also through a mapping made before (torch elastic copies
    os.environ first). Was: every restart got the stale value (issue #28)."""
    from rocm_hwq_autoset._decision import conclude
    from rocm_hwq_autoset._evaluation.answer import Answer, Verdict

    launch = pending()
    cached = conclude({}, launch, Config(INPUTS, {}), where=CACHED)
    check = Checking()
    applied = Applied()
    w = parent.Waiter(launch, applied, outcome=cached, check=check)  # type: ignore[arg-type]
    w.wrappers = removals = Removals()  # type: ignore[assignment]
    first: dict[str, str] = {}
    w.audit(POPEN, popen_args(first))
    assert first == Q8  # no verdict yet
    assert removals.removed == 0  # the starts to come are still watched
    made_before = dict(Q8)  # copied from os.environ before the next start
    check.lines.append({
        "stale": json.dumps(Verdict("stale", Answer(config=Q4)).to_json()).encode(),
        "same": json.dumps(Verdict("same").to_json()).encode(),
        "unchecked": json.dumps(Verdict("unchecked").to_json()).encode(),
        "no line": b"",
        "error": OSError(5, "Input/output error"),  # as no line: never again
    }[verdict])  # fmt: skip
    w.audit(POPEN, popen_args(made_before))
    later: dict[str, str] = {}
    w.audit(POPEN, popen_args(later))
    if verdict == "stale":
        corrected = {"GPU_MAX_HW_QUEUES": "4", "ROCM_HWQ_AUTOSET_ORIGIN": "4 --module",
                     "ROCM_HWQ_AUTOSET_INPUTS": encode_inputs(Q4.inputs)}  # fmt: skip
        assert made_before == corrected and later == corrected
        [(outcome, _, quiet, _)] = [c for c in applied.calls if c[1] == ()]
        assert (outcome.queues, quiet) == (4, True)  # the check said it
    else:
        assert made_before == Q8 and later == Q8
    assert check.asked == 2  # read once it came: then no more
    assert removals.removed > 0  # nothing more to watch for
    own = {"GPU_MAX_HW_QUEUES": "2"}  # the launcher's own value stays
    w.audit(POPEN, popen_args(own))
    assert own == {"GPU_MAX_HW_QUEUES": "2"}


def test_the_wait_says_what_ended_it(
    waiter: tuple[parent.Waiter, FakeEvaluation, Applied],
) -> None:
    """The hook checks, as the value goes in, that HIP has not started in this
    process; its warning says when that was (issue #31)."""
    w, _, applied = waiter
    w.launch = pending(in_process=True)
    w.audit("import", ("torch.cuda", None, [], [], []))
    [during] = [during for *_, during in applied.calls]
    assert "torch.cuda" in during.split() and during != STARTED_A_PROCESS
    spawned = Applied()
    w2 = parent.Waiter(pending(), spawned, evaluation=FakeEvaluation())  # type: ignore[arg-type]
    w2.audit(POPEN, popen_args({}))
    assert [c[-1] for c in spawned.calls if c[1] == ()] == [STARTED_A_PROCESS]


def test_a_long_wait_says_once_what_it_waits_for(
    waiter: tuple[parent.Waiter, FakeEvaluation, Applied],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Issue #30: past ``SLOW_SECONDS`` one line (once per node, as every
    line: ``Outcome.line``) names the evaluation and the time left; it sets
    nothing. A quick answer says only its value."""
    monkeypatch.setattr(parent, "SLOW_SECONDS", 0.1)
    w, evaluation, applied = waiter
    evaluation.delay = 0.4
    w.audit(POPEN, popen_args({}))
    note, value = [c[0] for c in applied.calls if c[1] == ()]
    assert (note.level, note.queues, note.marker) == ("note", None, None)
    assert note.message == lines.waiting(w.launch, 0).message  # 0 s left
    assert note.line({}) == "rocm-hwq-autoset: " + note.message + "\n"
    assert note.line({"LOCAL_RANK": "1"}) is None
    assert value.queues is not None
    quick = Applied()
    w2 = parent.Waiter(pending(), quick, evaluation=FakeEvaluation())  # type: ignore[arg-type]
    w2.audit(POPEN, popen_args({}))
    assert [c[0].level for c in quick.calls if c[1] == ()] == ["set"]


def test_taking_back_a_failure_removes_its_marker_only() -> None:
    """A stale answer that set no value (a cached failure: only its marker)
    takes back the marker, never a value or inputs it did not set."""
    inputs = Q8["ROCM_HWQ_AUTOSET_INPUTS"]
    failure = failed(MODULE, ConfigError("refused"))
    environ = {"GPU_MAX_HW_QUEUES": "None", "ROCM_HWQ_AUTOSET_INPUTS": inputs,
               "ROCM_HWQ_AUTOSET_ORIGIN": str(failure.marker)}  # fmt: skip
    spawns.take_back(failure, environ)
    assert environ == {"GPU_MAX_HW_QUEUES": "None", "ROCM_HWQ_AUTOSET_INPUTS": inputs}

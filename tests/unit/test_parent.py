"""The ``--module`` evaluation, parent side (``_registry_parent``): which events
wait, what the child is told, how long a wait may last, what passes through,
what a forked copy does, what happens at exit. With a fake evaluation (no
process) for the waiting, and a fake child (``tests/fake_child.py``) and a fake
clock for the process."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import MutableMapping
from pathlib import Path
from typing import Any, ClassVar

import pytest

from rocm_hwq_autoset._argv import Launch
from rocm_hwq_autoset._config import ConfigError
from rocm_hwq_autoset._decision import Outcome
from rocm_hwq_autoset._evaluation import parent as parent
from rocm_hwq_autoset._evaluation import spawns
from rocm_hwq_autoset._evaluation.cache import Cache
from rocm_hwq_autoset._evaluation.result_text import encode_inputs
from rocm_hwq_autoset._model import Inputs

ROOT = Path(__file__).resolve().parents[2]
ARGS = ["--module", "graph_trainer.deepseek_v3", "--config", "c"]
from tests.fake_child import INPUTS, SETTINGS  # noqa: E402
from tests.helpers import child_env  # noqa: E402

EVALUATED = (INPUTS, SETTINGS)
Q8 = {"GPU_MAX_HW_QUEUES": "8", "ROCM_HWQ_AUTOSET_ORIGIN": "8 --module",
      "ROCM_HWQ_AUTOSET_INPUTS": encode_inputs(INPUTS)}  # fmt: skip


def pending(in_process: bool = False) -> Launch:
    return Launch("module", ARGS, in_process)


class FakeEvaluation:
    """An evaluation without a process: its answer is given, as is how long it
    takes and what it raises."""

    def __init__(self, answer: Any = EVALUATED, *, delay: float = 0.0,
                 raises: BaseException | None = None, cached: bool = False,
                 meanwhile: Any = None) -> None:  # fmt: skip
        self.answer = answer
        self.delay = delay
        self.raises = raises
        self.cached = cached
        self.meanwhile = meanwhile
        """Called while the launcher waits: what else happens in it then."""
        self.calls: list[str] = []

    def result(self) -> tuple[Any, bool]:
        self.calls.append("result")
        if self.meanwhile is not None:
            self.meanwhile()
        time.sleep(self.delay)
        if self.raises is not None:
            raise self.raises
        return self.answer, self.cached

    def end(self) -> None:
        self.calls.append("end")

    def settle(self, limit: float | None = None) -> None:
        self.calls.append(f"settle {limit}")

    def reap(self) -> None:
        pass

    def disown(self) -> None:
        self.calls.append("disown")


class Applied:
    """Stands for ``_hook.apply``: records each call, and sets the values in the
    mappings it is given (never in this process's ``os.environ``)."""

    def __init__(self) -> None:
        self.calls: list[
            tuple[Outcome, tuple[MutableMapping[str, str], ...], bool]
        ] = []

    def __call__(
        self, outcome: Outcome, *environs: MutableMapping[str, str], quiet: bool = False
    ) -> None:
        self.calls.append((outcome, environs, quiet))
        from rocm_hwq_autoset._hook import apply

        for environ in environs:
            apply(outcome, environ, quiet=True)


@pytest.fixture(autouse=True)
def clean_environ(monkeypatch: pytest.MonkeyPatch) -> None:
    """No value of ours from elsewhere: the outcome is decided afresh."""
    for name in ("GPU_MAX_HW_QUEUES", "ROCM_HWQ_AUTOSET_ORIGIN",
                 "ROCM_HWQ_AUTOSET_INPUTS", "WORLD_SIZE"):  # fmt: skip
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def waiter() -> tuple[parent.Waiter, FakeEvaluation, Applied]:
    evaluation = FakeEvaluation()
    applied = Applied()
    w = parent.Waiter(pending(), evaluation, applied)  # type: ignore[arg-type]
    return w, evaluation, applied


POPEN = "subprocess.Popen"


def popen_args(env: Any) -> tuple[Any, ...]:
    return ("python", ["python", "-m", "torchtitan.train"], None, env)


@pytest.mark.parametrize("event", sorted(spawns.SPAWN_EVENTS))
def test_every_process_start_waits_once(
    waiter: tuple[parent.Waiter, FakeEvaluation, Applied], event: str
) -> None:
    w, evaluation, applied = waiter
    w.audit(event, ("x",))
    w.audit(event, ("x",))
    w.audit(POPEN, popen_args(None))
    assert evaluation.calls == ["result"]
    [(outcome, environs, quiet)] = applied.calls
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
    assert evaluation.calls == ["result"] and len(applied.calls) == 1
    env: dict[str, str] = {}
    w.audit("os.posix_spawn", ("/bin/true", ["true"], env))
    w.audit("os.exec", ("/bin/true", ["true"], env))
    assert env == {} and len(applied.calls) == 1


def test_the_training_process_waits_before_it_imports_torch() -> None:
    evaluation = FakeEvaluation()
    w = parent.Waiter(pending(in_process=True), evaluation, Applied())  # type: ignore[arg-type]
    w.audit("import", ("torchvision", None, [], [], []))
    assert evaluation.calls == []
    w.audit("import", ("torch", None, [], [], []))
    assert evaluation.calls == ["result"]  # at torch itself, before its modules
    w.audit("import", ("torch.cuda", None, [], [], []))
    assert evaluation.calls == ["result"]
    # A torch module first (a launcher's own import hook may hide torch's): too.
    evaluation = FakeEvaluation()
    w = parent.Waiter(pending(in_process=True), evaluation, Applied())  # type: ignore[arg-type]
    w.audit("import", ("torch.cuda", None, [], [], []))
    assert evaluation.calls == ["result"]


def test_a_worker_environment_made_before_the_value_gets_it(
    waiter: tuple[parent.Waiter, FakeEvaluation, Applied],
) -> None:
    """torch elastic makes each worker's env up front, from os.environ plus the
    rank's variables; the first start waits, every later one gets the value."""
    w, evaluation, _ = waiter
    envs: list[dict[str, str]] = [{"RANK": str(r)} for r in range(3)]
    for env in envs:
        w.audit(POPEN, popen_args(env))
    assert evaluation.calls == ["result"]
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
    evaluation.answer = ConfigError("no such config", "--config")
    envs: list[dict[str, str]] = [{}, {}]
    for env in envs:
        w.audit(POPEN, popen_args(env))
    assert envs == [{"ROCM_HWQ_AUTOSET_ORIGIN": "unset --module"}] * 2
    [(outcome, _, _)] = [call for call in applied.calls if not call[2]]
    assert outcome.message == "--config: no such config; GPU_MAX_HW_QUEUES left unset"


DENSE_TP2 = (Inputs(tp=2, cudagraph=True), {})


def test_a_rank_started_without_a_launcher_counts_its_world_size(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """srun or mpirun start ``python -m torchtitan.train`` with WORLD_SIZE set:
    2 ranks // TP 2 leave no FSDP lane, so Q is 4, not 8."""
    monkeypatch.setenv("WORLD_SIZE", "2")
    applied = Applied()
    evaluation = FakeEvaluation(DENSE_TP2)
    w = parent.Waiter(pending(in_process=True), evaluation, applied)  # type: ignore[arg-type]
    w.audit("import", ("torch", None, [], [], []))
    [(outcome, _, _)] = applied.calls
    assert (outcome.queues, outcome.marker) == (4, "4 --module")
    assert "fsdp_comm" not in outcome.message


def test_two_threads_starting_workers_both_wait_and_both_get_it() -> None:
    evaluation = FakeEvaluation(delay=0.3)
    w = parent.Waiter(pending(), evaluation, Applied())  # type: ignore[arg-type]
    envs: list[dict[str, str]] = [{}, {}]
    threads = [threading.Thread(target=w.audit, args=(POPEN, popen_args(env)))
               for env in envs]  # fmt: skip
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(5)
    assert evaluation.calls == ["result"]
    assert envs == [Q8, Q8]


class Stop(Exception):
    """Like torch elastic's SignalException: an Exception its handler raises."""


@pytest.mark.parametrize("how", ["handler", "KeyboardInterrupt", "SystemExit"])
def test_a_signal_or_an_exit_passes_through_and_ends_the_child(how: str) -> None:
    evaluation = FakeEvaluation()
    if how == "KeyboardInterrupt":
        evaluation.raises = KeyboardInterrupt()
    elif how == "SystemExit":
        evaluation.raises = SystemExit(3)
    applied = Applied()
    w = parent.Waiter(pending(), evaluation, applied)  # type: ignore[arg-type]
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
        with pytest.raises(expected):
            w.audit(POPEN, popen_args({}))
        assert time.monotonic() - start < 2
    finally:
        signal.signal(signal.SIGUSR1, previous)
    assert w.abandoned and w.outcome is None
    assert applied.calls == []  # nothing said: the launcher stops as it would
    env: dict[str, str] = {}
    w.audit(POPEN, popen_args(env))  # a later start does not wait again
    assert evaluation.calls == ["result"] and env == {}


def test_our_own_failure_is_one_warning_never_an_exception() -> None:
    evaluation = FakeEvaluation(raises=RuntimeError("a bug of ours"))
    applied = Applied()
    w = parent.Waiter(pending(), evaluation, applied)  # type: ignore[arg-type]
    env: dict[str, str] = {}
    w.audit(POPEN, popen_args(env))  # no exception: the worker starts
    [(outcome, _, _)] = [call for call in applied.calls if not call[2]]
    assert outcome.level == "warning"
    assert outcome.message == (
        "--module/--config: internal error (RuntimeError: a bug of ours);"
        " GPU_MAX_HW_QUEUES left unset"
    )
    assert env == {"ROCM_HWQ_AUTOSET_ORIGIN": "unset --module"}


def test_a_cached_answer_is_said_to_be_one(
    waiter: tuple[parent.Waiter, FakeEvaluation, Applied],
) -> None:
    w, evaluation, applied = waiter
    evaluation.cached = True
    w.need()
    [(outcome, _, quiet)] = applied.calls
    assert not quiet
    assert outcome.message == (
        "GPU_MAX_HW_QUEUES=8 (5 GPU streams: compute, all_reduce, fsdp_comm,"
        " expert_comm, cudagraph_capture), from the cached --module/--config"
        " evaluation"
    )


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
    [(outcome, _, _)] = [call for call in applied.calls if not call[2]]
    assert (outcome.level, outcome.marker) == ("warning", "unset --module")
    assert outcome.message == (
        "--module/--config: internal error (RuntimeError: a bug of ours);"
        " GPU_MAX_HW_QUEUES left unset"
    )
    assert env == {"ROCM_HWQ_AUTOSET_ORIGIN": "unset --module"}


def test_a_process_the_evaluation_starts_while_waited_for_does_not_wait() -> None:
    """An audited start inside the wait (the evaluation's own) passes: the
    evaluation is asked once and its answer applied once."""
    applied = Applied()
    evaluation = FakeEvaluation()
    w = parent.Waiter(pending(), evaluation, applied)  # type: ignore[arg-type]
    evaluation.meanwhile = lambda: w.audit(POPEN, popen_args(None))
    w.need()
    assert evaluation.calls == ["result"]
    [(outcome, environs, quiet)] = applied.calls
    assert (outcome.queues, environs, quiet) == (8, (), False)


def test_the_launchers_own_environment_is_not_given_the_value_twice(
    waiter: tuple[parent.Waiter, FakeEvaluation, Applied],
) -> None:
    """``Popen(env=os.environ)``: the value went into os.environ when it came
    (here the stand-in apply sets nothing there); nothing more is said."""
    w, _, applied = waiter
    w.audit(POPEN, popen_args(os.environ))
    assert [(o.queues, envs, quiet) for o, envs, quiet in applied.calls] == [
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
    assert evaluation.calls == ["result"] and env == {}


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


def test_a_forked_copy_never_waits_nor_ends_the_evaluation(
    waiter: tuple[parent.Waiter, FakeEvaluation, Applied],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    w, evaluation, applied = waiter
    monkeypatch.setattr(parent.os, "getpid", lambda: w.owner + 1)
    w.forked()
    w.audit(POPEN, popen_args({}))
    w.at_exit()
    assert evaluation.calls == ["disown"] and applied.calls == []


def test_exit_ends_the_child_only_in_its_owner(
    waiter: tuple[parent.Waiter, FakeEvaluation, Applied],
) -> None:
    w, evaluation, _ = waiter
    w.forked()  # not forked: nothing happens
    w.at_exit()
    assert evaluation.calls == ["end"]
    w.audit(POPEN, popen_args({}))  # exiting: no more waiting
    assert evaluation.calls == ["end"]


def test_at_exit_a_child_that_answered_may_store_its_answer(
    waiter: tuple[parent.Waiter, FakeEvaluation, Applied],
) -> None:
    w, evaluation, _ = waiter
    w.audit(POPEN, popen_args({}))
    w.at_exit()
    assert evaluation.calls == ["result", f"settle {parent.STORE_SECONDS}"]


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
    assert evaluation.calls == ["result"] and env == Q8
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
    w = parent.Waiter(pending(), FakeEvaluation(), applied)  # type: ignore[arg-type]
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
    w = parent.Waiter(pending(), FakeEvaluation(), applied)  # type: ignore[arg-type]
    monkeypatch.setattr(sys, "addaudithook", lambda hook: None)  # not for the tests
    w.install()
    del os.execve  # a library of the launcher took it away
    env: dict[str, str] = {}
    w.audit(POPEN, popen_args(env))
    assert [(o.queues, quiet) for o, _, quiet in applied.calls] == [
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
    w = parent.Waiter(pending(), FakeEvaluation(delay=0.2), _hook.apply)
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


# The process: a fake child, a fake clock.


@pytest.fixture
def fake_child(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> dict[str, str]:
    monkeypatch.setattr(parent, "CHILD", "tests.fake_child")
    return child_env({"PATH": os.environ["PATH"], "PYTHONPATH": str(ROOT),
                      "FAKE_CHILD_LOG": str(tmp_path / "child.log")})  # fmt: skip


def started(environ: dict[str, str]) -> list[dict[str, Any]]:
    text = Path(environ["FAKE_CHILD_LOG"]).read_text()
    return [json.loads(line) for line in text.splitlines()]


def test_the_child_is_told_what_to_do(
    fake_child: dict[str, str], tmp_path: Path
) -> None:
    cache = Cache(str(tmp_path))
    evaluation = parent.Evaluation(ARGS, fake_child, cache, "k" * 32)
    result, cached = evaluation.result()
    assert result == EVALUATED and cached is False
    [child] = started(fake_child)
    assert child["argv"] == ["--parent", str(os.getpid()), "--cache", str(tmp_path),
                             "--key", "k" * 32, "--", *ARGS]  # fmt: skip
    assert child["switch"] == "0"  # no hook in the child
    assert child["pgid"] == child["pid"]  # its own process group
    evaluation.settle()  # it answered; it ends on its own
    assert evaluation.child.returncode == 0


@pytest.mark.parametrize(
    ("out", "status", "reason", "cached"),
    [
        ('{"error": "no", "source": "--config"}', "0", "--config: no", False),
        ('{"error": "no"}', "0", "no", False),
        ("not json", "3", "the evaluating child ended with status 3", False),
        ("", "0", "the evaluating child ended with status 0", False),
        ('{"inputs": "tp=x"}', "0", "the evaluating child ended with status 0", False),
        (json.dumps({"inputs": encode_inputs(INPUTS), "settings": None}), "0",
         "the evaluating child ended with status 0", False),
    ],
)  # fmt: skip
def test_every_answer_of_the_child_is_an_evaluation_or_one_reason(
    fake_child: dict[str, str], out: str, status: str, reason: str, cached: bool
) -> None:
    environ = dict(fake_child, FAKE_CHILD_OUT=out, FAKE_CHILD_EXIT=status)
    result, was_cached = parent.Evaluation(ARGS, environ).result()
    assert isinstance(result, ConfigError) and str(result) == reason
    assert was_cached is cached


@pytest.mark.parametrize("how", ["cache", "peer"])
def test_an_answer_found_without_evaluating_says_so(
    fake_child: dict[str, str], how: str
) -> None:
    from tests.fake_child import RESULT

    environ = dict(fake_child, FAKE_CHILD_OUT=json.dumps({**RESULT, "how": how}))
    result, cached = parent.Evaluation(ARGS, environ).result()
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
    monkeypatch.setattr(parent.time, "monotonic", clock)
    environ = dict(fake_child, FAKE_CHILD_SLEEP="5", ROCM_HWQ_AUTOSET_TIMEOUT="60")
    evaluation = parent.Evaluation(ARGS, environ)
    assert 1060.0 <= evaluation.deadline < 1061.0
    clock.ahead += 59.8  # the launcher's own work took most of the timeout
    start = time.perf_counter()
    result, _ = evaluation.result()
    assert time.perf_counter() - start < 3
    assert isinstance(result, ConfigError)
    assert "evaluating took over 60 s (ROCM_HWQ_AUTOSET_TIMEOUT)" in str(result)
    assert evaluation.child.returncode == -signal.SIGKILL


def test_at_the_deadline_the_launcher_waits_no_more(
    fake_child: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """With the clock stopped: exactly at the deadline, no wait; just before
    it, the wait goes on until the answer comes."""
    now = [1000.0]
    monkeypatch.setattr(parent.time, "monotonic", lambda: now[0])
    evaluation = parent.Evaluation(ARGS, fake_child)
    now[0] = evaluation.deadline
    result, _ = evaluation.result()
    assert str(result) == "evaluating took over 120 s (ROCM_HWQ_AUTOSET_TIMEOUT)"
    evaluation = parent.Evaluation(ARGS, fake_child)
    now[0] = evaluation.deadline - 0.5
    assert evaluation.result() == (EVALUATED, False)
    monkeypatch.undo()
    evaluation.settle()


def test_the_answer_is_taken_at_its_end_of_line_and_the_child_ends_by_the_deadline(
    fake_child: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The child goes on after its answer (it stores it in the cache): the
    launcher does not wait for that, and ends it at the deadline at the
    latest (past it: at once)."""
    clock = Clock()
    monkeypatch.setattr(parent.time, "monotonic", clock)
    environ = dict(fake_child, FAKE_CHILD_LINGER="30", ROCM_HWQ_AUTOSET_TIMEOUT="60")
    evaluation = parent.Evaluation(ARGS, environ)
    start = time.perf_counter()
    assert evaluation.result() == (EVALUATED, False)
    assert time.perf_counter() - start < 10
    clock.ahead += 65  # the launcher's own work outlasted the timeout
    start = time.perf_counter()
    evaluation.settle()
    assert time.perf_counter() - start < 0.7
    assert evaluation.child.returncode == -signal.SIGKILL


def test_a_child_that_answers_nonsense_and_goes_on_is_ended_at_once(
    fake_child: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(parent, "REAP_SECONDS", 0.05)
    environ = dict(fake_child, FAKE_CHILD_OUT="not json", FAKE_CHILD_LINGER="30")
    evaluation = parent.Evaluation(ARGS, environ)
    start = time.monotonic()
    result, _ = evaluation.result()
    assert time.monotonic() - start < 10
    assert str(result) == "the evaluating child ended with signal 9"


def test_a_child_ended_by_a_signal_says_which(fake_child: dict[str, str]) -> None:
    """Killed before it could answer (the OOM killer, say)."""
    environ = dict(fake_child, FAKE_CHILD_SIGNAL="15")
    result, cached = parent.Evaluation(ARGS, environ).result()
    assert (str(result), cached) == ("the evaluating child ended with signal 15", False)


def test_a_long_answer_is_read_whole_and_only_its_line(
    fake_child: dict[str, str],
) -> None:
    """An answer longer than a pipe holds comes in pieces."""
    from tests.fake_child import RESULT

    long = json.dumps({**RESULT, "how": "evaluated", "padding": "x" * 100_000})
    environ = dict(fake_child, FAKE_CHILD_OUT=long + "\nanything after it")
    assert parent.Evaluation(ARGS, environ).result() == (EVALUATED, False)


def test_nothing_the_child_says_on_stderr_reaches_the_launchers(
    fake_child: dict[str, str], capfd: pytest.CaptureFixture[str]
) -> None:
    """A warning at the child's start, before it silences itself."""
    environ = dict(fake_child, FAKE_CHILD_STDERR="DeprecationWarning: x\n")
    assert parent.Evaluation(ARGS, environ).result() == (EVALUATED, False)
    assert capfd.readouterr().err == ""


def test_a_launcher_that_closed_the_pipe_is_told_so(fake_child: dict[str, str]) -> None:
    """A launcher that closes every descriptor (as a daemon does) meanwhile:
    one reason, no exception, no child left."""
    evaluation = parent.Evaluation(ARGS, dict(fake_child, FAKE_CHILD_SLEEP="60"))
    assert evaluation.child.stdout is not None
    os.close(evaluation.child.stdout.fileno())
    result, cached = evaluation.result()
    assert str(result) == "reading the evaluation: Bad file descriptor"
    assert cached is False
    assert evaluation.child.returncode == -signal.SIGKILL


def _state(pid: int) -> str:
    """The process's state (``R``, ``S``, ``Z`` for a zombie ...), or ``""``
    once it is gone and reaped."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rpartition(") ")[2][0]
    except FileNotFoundError:
        return ""


def _alive(pid: int) -> bool:
    return _state(pid) not in ("", "Z")  # a zombie is gone for our purpose


def test_a_child_that_answered_and_ended_is_reaped_at_the_next_start(
    fake_child: dict[str, str],
) -> None:
    """A launcher that goes on starting workers leaves no zombie behind."""
    evaluation = parent.Evaluation(ARGS, fake_child)
    w = parent.Waiter(pending(), evaluation, Applied())
    try:
        w.audit(POPEN, popen_args({}))  # the child answers, then ends
        pid = evaluation.child.pid
        deadline = time.monotonic() + 10
        while _alive(pid) and time.monotonic() < deadline:
            time.sleep(0.02)
        w.audit(POPEN, popen_args({}))  # the next worker's start
        assert _state(pid) == ""
    finally:
        evaluation.end()


def _gone_within(pids: list[int], seconds: float) -> bool:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if not any(_alive(pid) for pid in pids):
            return True
        time.sleep(0.05)
    return False


def test_end_kills_the_whole_group_in_bounded_time(fake_child: dict[str, str]) -> None:
    environ = dict(fake_child, FAKE_CHILD_SLEEP="60", FAKE_CHILD_GRANDCHILD="1")
    evaluation = parent.Evaluation(ARGS, environ)
    deadline = time.monotonic() + 10
    while not Path(environ["FAKE_CHILD_LOG"]).exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    [child] = started(environ)
    pipes = [evaluation.child.stdin, evaluation.child.stdout]
    start = time.monotonic()
    evaluation.end()
    assert time.monotonic() - start < parent.REAP_SECONDS + 1
    assert all(pipe is not None and pipe.closed for pipe in pipes)  # no fd leaks
    assert _gone_within([child["pid"], child["grandchild"]], 2)


def test_a_child_that_ends_as_it_is_ended_is_no_error(
    fake_child: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    killpg = os.killpg

    def racing(pgid: int, signum: int) -> None:
        killpg(pgid, signum)
        raise ProcessLookupError("it ended meanwhile")

    evaluation = parent.Evaluation(ARGS, dict(fake_child, FAKE_CHILD_SLEEP="60"))
    monkeypatch.setattr(parent.os, "killpg", racing)
    evaluation.end()
    assert evaluation.child.returncode == -signal.SIGKILL


def test_a_child_that_will_not_die_holds_the_launcher_a_bounded_time(
    fake_child: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A child stuck in the GPU driver ignores even SIGKILL for a while."""
    environ = dict(fake_child, FAKE_CHILD_SLEEP="60", FAKE_CHILD_STUCK="1")
    evaluation = parent.Evaluation(ARGS, environ)
    monkeypatch.setattr(parent.os, "killpg", lambda pgid, signum: None)
    monkeypatch.setattr(parent, "REAP_SECONDS", 0.05)
    start = time.monotonic()
    try:
        evaluation.end()
        assert time.monotonic() - start < 2
    finally:
        monkeypatch.undo()
        os.killpg(evaluation.child.pid, signal.SIGKILL)
        evaluation.child.wait(10)


PARENT = """
import os, sys, time
sys.path.insert(0, {root!r})
from rocm_hwq_autoset._evaluation import parent as parent
parent.CHILD = "tests.fake_child"
parent.Evaluation({args!r}, dict(os.environ))
while not os.path.exists(os.environ["FAKE_CHILD_LOG"]):
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


@pytest.mark.forked
def test_a_fork_made_from_c_code_never_waits_nor_ends_the_evaluation(
    tmp_path: Path,
) -> None:
    """libc's fork runs no Python at-fork handler: the copy still holds the
    waiter. It starts without the value, and never waits on the evaluation nor
    ends it; the parent's evaluation goes on."""
    import ctypes

    evaluation = FakeEvaluation(delay=0.2)
    w = parent.Waiter(pending(), evaluation, Applied())  # type: ignore[arg-type]
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
    assert evaluation.calls == ["result"]  # the parent still waits, once


# start(): at interpreter start, the cache's answer, or a child and a waiter.


class Installed:
    """Stands for ``Waiter``: what ``start`` hands it, and whether it installed
    it (the real one adds an audit hook to this process for good)."""

    made: ClassVar[list[Installed]] = []

    def __init__(self, launch: Launch, evaluation: parent.Evaluation,
                 apply: Applied) -> None:  # fmt: skip
        self.launch, self.evaluation, self.apply = launch, evaluation, apply
        self.installed = False
        Installed.made.append(self)

    def install(self) -> None:
        self.installed = True


@pytest.fixture
def starting(
    fake_child: dict[str, str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> Any:
    """``start`` with this process's environment made the fake child's, a cache
    of its own, and the waiter recorded; returns a function that runs it and
    gives the lines applied, the waiter or the background check (or None) and
    the child's arguments. What ``start`` registers for the exit runs at the
    test's end."""
    for name, value in fake_child.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("ROCM_HWQ_AUTOSET_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("ROCM_HWQ_AUTOSET_CACHE", raising=False)
    monkeypatch.setattr(parent, "Waiter", Installed)
    monkeypatch.setattr(Installed, "made", [])
    exits: list[Any] = []
    monkeypatch.setattr(parent.atexit, "register", exits.append)

    def run(launch: Launch) -> tuple[list[Outcome], Any, list[str]]:
        applied = Applied()
        exits.clear()
        parent.start(launch, applied)
        assert all(environs == () for _, environs, _ in applied.calls)
        said = [outcome for outcome, _, _ in applied.calls]
        if not Installed.made:
            checks = [getattr(f, "__self__", None) for f in exits]
            if not checks:
                assert not Path(fake_child["FAKE_CHILD_LOG"]).exists()  # no child
                return said, None, []
            [check] = checks
            assert isinstance(check, parent.Check)
            check.child.wait(30)
            child = started(fake_child)[-1]
            return said, check, child["argv"]
        [waiter] = Installed.made
        assert waiter.installed and waiter.launch is launch
        assert waiter.apply is applied
        assert waiter.evaluation.result() == (EVALUATED, False)
        child = started(fake_child)[-1]
        return said, waiter, child["argv"]

    yield run
    for at_exit in exits:
        at_exit()


def test_start_with_no_entry_starts_the_child_and_waits_later(
    starting: Any, tmp_path: Path
) -> None:
    launch = pending()
    said, _, argv = starting(launch)
    assert [(o.level, o.message) for o in said] == [
        ("skip", "cache: no entry; evaluating")
    ]
    cache_key = parent.launch_key(pending(), os.environ)
    assert argv == ["--parent", str(os.getpid()), "--cache", str(tmp_path / "cache"),
                    "--key", cache_key, "--path0", os.getcwd(),
                    "--", *ARGS]  # fmt: skip


def store_entry(deps: dict[str, Any] | None = None) -> Cache:
    from rocm_hwq_autoset._evaluation.cache import open_cache
    from rocm_hwq_autoset._evaluation.result_text import encode_result

    cache, _ = open_cache(os.environ)
    assert cache is not None
    no_deps = {"files": [], "dirs": [], "lists": [], "env": {}}
    cache.store(parent.launch_key(pending(), os.environ), encode_result(*EVALUATED),
                deps or no_deps)  # fmt: skip
    return cache


def test_start_with_an_entry_applies_it_at_once_and_checks_it_in_the_background(
    starting: Any, tmp_path: Path
) -> None:
    cache = store_entry()
    said, check, argv = starting(pending())
    [outcome] = said
    assert (outcome.level, outcome.queues, outcome.marker) == ("set", 8, "8 --module")
    assert outcome.message.endswith(", from the cached --module/--config evaluation")
    assert outcome.inputs == INPUTS and isinstance(check, parent.Check)
    cache_key = parent.launch_key(pending(), os.environ)
    assert argv[:9] == ["--parent", str(os.getpid()), "--cache", cache.path,
                        "--key", cache_key, "--check", encode_inputs(INPUTS),
                        "--say"]  # fmt: skip
    assert argv[10:] == ["--path0", os.getcwd(), "--", *ARGS]
    [child] = started(dict(os.environ))
    assert child["switch"] == "0" and child["pgid"] == child["pid"]  # its own group
    assert child["queues"] is None  # the environment before the value was set
    # What the entry depended on changed: said, and evaluated again.
    store_entry({"files": [], "dirs": [], "lists": [], "env": {"MY_DEGREE": "2"}})
    said, waiter, argv = starting(pending())
    assert [o.message for o in said] == ["cache: stale: MY_DEGREE changed; evaluating"]
    assert isinstance(waiter, Installed) and "--check" not in argv


@pytest.mark.parametrize(
    ("variables", "checked", "said"),
    [
        ({"ROCM_HWQ_AUTOSET_LOG": "quiet"}, True, False),
        ({"ROCM_HWQ_AUTOSET_LOG": "verbose"}, True, True),
        ({"LOCAL_RANK": "0"}, True, True),
        ({"LOCAL_RANK": "1"}, False, False),  # local rank 0 checks for the node
        ({"LOCAL_RANK": "1", "ROCM_HWQ_AUTOSET_LOG": "verbose"}, False, False),
    ],
)  # fmt: skip
def test_one_process_of_the_node_checks_and_says_it_unless_quiet(
    starting: Any, monkeypatch: pytest.MonkeyPatch, variables: dict[str, str],
    checked: bool, said: bool,
) -> None:  # fmt: skip
    for name, value in variables.items():
        monkeypatch.setenv(name, value)
    store_entry()
    outcomes, check, argv = starting(pending())
    assert [o.queues for o in outcomes if o.queues] in ([8], [])
    assert (check is not None) is checked
    assert ("--say" in argv) is said


def test_a_check_that_cannot_start_leaves_the_cached_value(
    starting: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    store_entry()

    def refused(*args: Any, **kwargs: Any) -> None:
        raise OSError(11, "Resource temporarily unavailable")

    monkeypatch.setattr(parent.subprocess, "Popen", refused)
    fds = sorted(os.listdir("/proc/self/fd"))
    said, check, _ = starting(pending())
    assert check is None
    assert [(o.level, o.queues) for o in said] == [("set", 8), ("skip", None)]
    assert said[1].message == (
        "cache: the background check cannot start: [Errno 11] Resource temporarily"
        " unavailable; the cached value stays"
    )
    assert sorted(os.listdir("/proc/self/fd")) == fds  # its copy of stderr closed


def test_the_check_ends_with_its_launcher(
    starting: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """At exit the check's whole group is ended, however far it got; a copy
    of this process made by fork lets go of the pipe it watches."""
    monkeypatch.setenv("FAKE_CHILD_SLEEP", "30")
    monkeypatch.setenv("FAKE_CHILD_GRANDCHILD", "1")
    store_entry()
    exits: list[Any] = []
    monkeypatch.setattr(parent.atexit, "register", exits.append)
    applied = Applied()
    parent.start(pending(), applied)
    [at_exit] = exits
    check = at_exit.__self__
    deadline = time.monotonic() + 10
    while (
        time.monotonic() < deadline and not Path(os.environ["FAKE_CHILD_LOG"]).exists()
    ):
        time.sleep(0.02)
    [record] = started(dict(os.environ))
    check.forked()  # in the owner: nothing
    assert check.child.poll() is None
    start = time.monotonic()
    at_exit()
    assert check.child.returncode == -signal.SIGKILL
    assert time.monotonic() - start < 3
    assert _gone_within([record["pid"], record["grandchild"]], 5)


def test_our_stderr_is_the_checks_to_say_its_line_on(tmp_path: Path) -> None:
    """The real start in a process of its own, with the fake child as the
    check: what it writes on the descriptor it is given reaches the launcher's
    stderr, and nothing else of it does."""
    from rocm_hwq_autoset._evaluation.cache import key as cache_key
    from rocm_hwq_autoset._evaluation.result_text import encode_result

    cache = tmp_path / "cache"
    cache.mkdir(mode=0o700)
    entry = encode_result(*EVALUATED)
    script = (
        "import os, sys, time\n"
        "from rocm_hwq_autoset import _hook\n"
        "from rocm_hwq_autoset._argv import Launch\n"
        "from rocm_hwq_autoset._evaluation import parent\n"
        "parent.CHILD = 'tests.fake_child'\n"
        "from rocm_hwq_autoset._evaluation.cache import Cache, key\n"
        f"args = {ARGS!r}\n"
        "launch = Launch('module', args, True)\n"
        f"Cache({str(cache)!r}).store(parent.launch_key(launch, os.environ),"
        f" {entry!r}, {{'env': {{}}, 'files': [], 'dirs': [], 'lists': []}})\n"
        "parent.start(launch, _hook.apply)\n"
        "time.sleep(3)\n"
    )
    assert cache_key  # the key is the script's own: its cwd, its interpreter
    env = child_env({"PATH": os.environ["PATH"], "PYTHONPATH": str(ROOT),
                     "ROCM_HWQ_AUTOSET_CACHE_DIR": str(cache),
                     "FAKE_CHILD_STDERR": "never seen\n",
                     "FAKE_CHILD_SAY": "rocm-hwq-autoset: the check's line\n",
                     })  # fmt: skip
    done = subprocess.run([sys.executable, "-c", script], env=env, cwd=tmp_path,
                          capture_output=True, text=True, timeout=60)  # fmt: skip
    assert done.returncode == 0, done.stderr
    lines = done.stderr.splitlines()
    assert lines[0].startswith("rocm-hwq-autoset: GPU_MAX_HW_QUEUES=8 (")
    assert lines[1:] == ["rocm-hwq-autoset: the check's line"]


@pytest.mark.parametrize(
    ("variables", "said"),
    [
        ({"ROCM_HWQ_AUTOSET_CACHE": "0"}, []),
        ({"ROCM_HWQ_AUTOSET_CACHE": "bogus"},
         [("warning", "ROCM_HWQ_AUTOSET_CACHE='bogus' is not 1/on/true/yes/auto"
           " (on), 0/off/false/no (off); the cache is not used")]),
        ({"ROCM_HWQ_AUTOSET_CACHE_DIR": "{tmp}/file"},
         [("skip", "cache: {tmp}/file: File exists")]),
    ],
)  # fmt: skip
def test_start_without_a_cache_evaluates_without_one(
    starting: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    variables: dict[str, str], said: list[tuple[str, str]],
) -> None:  # fmt: skip
    (tmp_path / "file").write_text("")
    for name, value in variables.items():
        monkeypatch.setenv(name, value.format(tmp=tmp_path))
    outcomes, waiter, argv = starting(pending())
    assert [(o.level, o.message) for o in outcomes] == [
        (level, text.format(tmp=tmp_path)) for level, text in said
    ]
    assert waiter is not None
    assert argv == ["--parent", str(os.getpid()), "--path0", os.getcwd(), "--", *ARGS]


def test_a_child_that_cannot_start_is_one_warning_and_the_mark(
    starting: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ROCM_HWQ_AUTOSET_CACHE", "0")
    monkeypatch.setattr(parent.sys, "executable", "/nonexistent/python")
    [outcome], waiter, _ = starting(pending())
    assert waiter is None
    assert (outcome.level, outcome.marker) == ("warning", "unset --module")
    assert outcome.message == (
        "--module/--config: cannot start the evaluation: [Errno 2] No such file or"
        " directory: '/nonexistent/python'; GPU_MAX_HW_QUEUES left unset"
    )


# evaluate(): for the command line, evaluated now, and how it was found said.


@pytest.fixture
def evaluating(fake_child: dict[str, str], tmp_path: Path) -> dict[str, str]:
    return dict(fake_child, ROCM_HWQ_AUTOSET_CACHE_DIR=str(tmp_path / "cache"))


def test_evaluate_says_how_it_found_the_answer(evaluating: dict[str, str]) -> None:
    from rocm_hwq_autoset._evaluation.result_text import encode_result

    result, how = parent.evaluate(pending(), evaluating)
    assert (result, how) == (EVALUATED, "evaluated (cache: no entry)")
    [child] = started(evaluating)
    cache_key = parent.launch_key(pending(), evaluating)
    cache_dir = evaluating["ROCM_HWQ_AUTOSET_CACHE_DIR"]
    assert child["argv"][2:8] == ["--cache", cache_dir, "--key", cache_key,
                                  "--path0", os.getcwd()]  # fmt: skip
    cache = Cache(evaluating["ROCM_HWQ_AUTOSET_CACHE_DIR"])
    no_deps = {"files": [], "dirs": [], "lists": [], "env": {}}
    cache.store(cache_key, encode_result(*EVALUATED), no_deps)
    result, how = parent.evaluate(pending(), evaluating)
    assert (result, how) == (EVALUATED, f"from the cache ({cache.entry(cache_key)})")
    assert len(started(evaluating)) == 1  # no second child
    result, how = parent.evaluate(pending(), evaluating, use_cache=False)
    assert (result, how) == (EVALUATED, "evaluated (--no-cache)")
    assert started(evaluating)[-1]["argv"] == ["--parent", str(os.getpid()),
                                               "--path0", os.getcwd(), "--",
                                               *ARGS]  # fmt: skip


@pytest.mark.parametrize(
    ("variables", "how"),
    [
        ({"ROCM_HWQ_AUTOSET_CACHE": "off"}, "evaluated"),
        ({"ROCM_HWQ_AUTOSET_CACHE": "bogus"},
         "evaluated (ROCM_HWQ_AUTOSET_CACHE='bogus' is not 1/on/true/yes/auto"
         " (on), 0/off/false/no (off))"),
        ({"ROCM_HWQ_AUTOSET_CACHE_DIR": "{tmp}/file"},
         "evaluated ({tmp}/file: File exists)"),
    ],
)  # fmt: skip
def test_evaluate_without_a_cache(
    evaluating: dict[str, str], tmp_path: Path, variables: dict[str, str], how: str
) -> None:
    (tmp_path / "file").write_text("")
    environ = dict(
        evaluating, **{k: v.format(tmp=tmp_path) for k, v in variables.items()}
    )
    assert parent.evaluate(pending(), environ) == (EVALUATED, how.format(tmp=tmp_path))
    [child] = started(environ)
    assert "--cache" not in child["argv"]


def test_evaluate_checks_the_entry_against_the_environment_it_is_given(
    evaluating: dict[str, str],
) -> None:
    """``explain`` and ``doctor`` evaluate for an environment of their own: an
    entry that read MY_DEGREE is used when that environment's value matches."""
    from rocm_hwq_autoset._evaluation.result_text import encode_result

    assert "MY_DEGREE" not in os.environ
    cache = Cache(evaluating["ROCM_HWQ_AUTOSET_CACHE_DIR"])
    os.makedirs(cache.path, mode=0o700)
    environ = dict(evaluating, MY_DEGREE="2")
    cache_key = parent.launch_key(pending(), environ)
    deps = {"files": [], "dirs": [], "lists": [], "env": {"MY_DEGREE": "2"}}
    cache.store(cache_key, encode_result(*EVALUATED), deps)
    assert parent.evaluate(pending(), environ) == (
        EVALUATED, f"from the cache ({cache.entry(cache_key)})"
    )  # fmt: skip
    environ["MY_DEGREE"] = "4"
    assert parent.evaluate(pending(), environ) == (
        EVALUATED, "evaluated (cache: stale: MY_DEGREE changed)"
    )  # fmt: skip


def test_evaluate_says_when_another_process_evaluated(
    evaluating: dict[str, str],
) -> None:
    from tests.fake_child import RESULT

    environ = dict(evaluating, FAKE_CHILD_OUT=json.dumps({**RESULT, "how": "peer"}))
    assert parent.evaluate(pending(), environ) == (
        EVALUATED,
        "from the cache (another process evaluated it)",
    )


def test_evaluate_when_the_evaluation_takes_too_long(
    evaluating: dict[str, str],
) -> None:
    environ = dict(evaluating, FAKE_CHILD_SLEEP="30", ROCM_HWQ_AUTOSET_TIMEOUT="0.1")
    result, how = parent.evaluate(pending(), environ)
    assert str(result) == "evaluating took over 0.1 s (ROCM_HWQ_AUTOSET_TIMEOUT)"
    assert how == "evaluated (cache: no entry)"


def test_evaluate_when_no_child_can_start(
    evaluating: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(parent.sys, "executable", "/nonexistent/python")
    result, how = parent.evaluate(pending(), evaluating, use_cache=False)
    assert isinstance(result, ConfigError) and how == "evaluated (--no-cache)"
    assert str(result) == (
        "cannot start the evaluation: [Errno 2] No such file or directory:"
        " '/nonexistent/python'"
    )


# The whole of it: the installed hook, the real child, the stand-in torchtitan.

#: A recipe whose degree comes from a file read only by os.path.exists, which
#: no recording sees (no audit event): only the background check can tell.
EXISTS_RECIPE = """
import os
from torchtitan.experiments.graph_trainer import trainer_config
def flag():
    tp = 2 if os.path.exists("tp2.flag") else 1
    return trainer_config("m", "f", moe=False, tensor_parallel_degree=tp)
"""
#: A torchtitan program that reports its value, then lives until the entry
#: changed (the background check stored its answer) and a little longer, or
#: 30 s: a training run outlives its check; the probes in the tests' launches
#: end before it.
WAITING = """
import glob, json, os, sys, time
try:
    import torch  # torchtitan's first import: a pending value is waited for here
except ImportError:
    pass
print(json.dumps({"queues": os.environ.get("GPU_MAX_HW_QUEUES")}), flush=True)
def stamp():
    return [os.stat(p).st_mtime_ns for p in glob.glob(os.environ["CACHE"] + "/*.json")]
first, deadline = stamp(), time.monotonic() + 30
if first:  # a hit: its check runs
    while stamp() == first and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(1)
"""


def test_a_stale_hit_is_said_in_the_same_launch_and_the_next_one_gets_it(
    tmp_path: Path,
) -> None:
    """First launch Q = 4; a file the recipe tests with os.path.exists appears;
    the relaunch hits and gets 4, and its check says in that launch that a
    fresh evaluation gives 8; the next launch gets 8, and says nothing more."""
    from ..standin import write_standin

    standin = write_standin(tmp_path / "standin")
    (standin / "torchtitan" / "wait.py").write_text(WAITING)
    work = tmp_path / "work"
    (work / "exists_recipes").mkdir(parents=True)
    (work / "exists_recipes" / "__init__.py").write_text("")
    (work / "exists_recipes" / "config_registry.py").write_text(EXISTS_RECIPE)
    cache = tmp_path / "cache"
    env = child_env({"PATH": os.environ["PATH"], "PYTHONPATH": str(standin),
                     "ROCM_HWQ_AUTOSET": "force", "CACHE": str(cache),
                     "ROCM_HWQ_AUTOSET_CACHE_DIR": str(cache)})  # fmt: skip

    def launch() -> tuple[str, list[str]]:
        done = subprocess.run(
            [sys.executable, "-m", "torchtitan.wait", "--module", "exists_recipes",
             "--config", "flag"], cwd=work, env=env, capture_output=True, text=True,
            timeout=120,
        )  # fmt: skip
        assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
        return json.loads(done.stdout)["queues"], done.stderr.splitlines()

    streams = "compute, all_reduce, fsdp_comm, cudagraph_capture"
    assert launch() == ("4", [f"rocm-hwq-autoset: GPU_MAX_HW_QUEUES=4 (4 GPU streams:"
                              f" {streams})"])  # fmt: skip
    cached = (f"rocm-hwq-autoset: GPU_MAX_HW_QUEUES=4 (4 GPU streams: {streams}),"
              " from the cached --module/--config evaluation")  # fmt: skip
    assert launch() == ("4", [cached])  # the check agrees: nothing more
    (work / "tp2.flag").write_text("")
    queues, said = launch()
    assert queues == "4"  # the hit, at once
    assert said[1:] == [
        "rocm-hwq-autoset: warning: the cached --module/--config evaluation was"
        " stale: GPU_MAX_HW_QUEUES=4 was set from it; evaluated again: 8 (5 GPU"
        " streams: compute, all_reduce, fsdp_comm, tp_all_gather,"
        " cudagraph_capture); the cache now holds 8 for the next launch"
    ]
    queues, said = launch()
    assert queues == "8" and len(said) == 1
    assert said[0].endswith(", from the cached --module/--config evaluation")


class Flags:
    """``sys.flags`` as a test sets it."""

    def __init__(self, **on: bool) -> None:
        for name in ("isolated", "ignore_environment", "no_user_site", "safe_path"):
            setattr(self, name, on.get(name, False))


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
    here = Launch("module", ARGS, True, script)
    assert parent.interpreter_of(here, {}) == ((), str(real))
    assert parent.interpreter_of(Launch("module", ARGS, True, module), {}) == (
        (), os.getcwd())  # fmt: skip
    every = Flags(isolated=True, ignore_environment=True, no_user_site=True,
                  safe_path=True)  # fmt: skip
    monkeypatch.setattr(sys, "flags", every)
    assert parent.interpreter_of(here, {}) == (("-I", "-E", "-s", "-P"), None)
    monkeypatch.setattr(sys, "flags", Flags(no_user_site=True))
    assert parent.interpreter_of(here, {}) == (("-s",), str(real))
    worker = Launch("module", ARGS, False, script)
    assert parent.interpreter_of(worker, {}) == ((), str(real))  # not ours: -s
    safe = parent.interpreter_of(worker, {"PYTHONSAFEPATH": "1"})
    assert safe == ((), None if sys.version_info >= (3, 11) else str(real))
    assert parent.child_command(((("-s",), None)), "--parent", "1") == [
        sys.executable,
        "-s",
        "-m",
        parent.CHILD,
        "--parent",
        "1",
        "--no-path0",
        "1",
    ]
    keys = {parent.launch_key(launch, {}) for launch in (
        here, Launch("module", ARGS, True, module), worker)}  # fmt: skip
    assert len(keys) == 3

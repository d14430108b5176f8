"""The hook's start of a ``--module`` launch (``parent.start``): the cache's
entry applied at once and checked in the background, or the child started
and waited for later; without a cache; when no child can start."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, ClassVar

import pytest

from rocm_hwq_autoset._argv import Launch
from rocm_hwq_autoset._decision import CACHED, Outcome, conclude
from rocm_hwq_autoset._evaluation import cache as cache_module
from rocm_hwq_autoset._evaluation import parent as parent
from rocm_hwq_autoset._evaluation import process
from rocm_hwq_autoset._evaluation.cache import MAX_UNCHECKED, Cache
from rocm_hwq_autoset._model import encode_inputs
from tests.fake_child import INPUTS
from tests.helpers import UNSET_TAIL, check_lines, child_env, set_line
from tests.helpers import said as parsed

from .helpers import (
    ARGS,
    EVALUATED,
    ROOT,
    Applied,
    _gone_within,
    await_started,
    launch_key,
    pending,
    started,
)

#: What the fake check says on the descriptor it is given.
CHECK_SAYS = "rocm-hwq-autoset: the check's line"


class Installed:
    """Stands for ``Waiter``: what ``start`` hands it, and whether it installed
    it (the real one adds an audit hook to this process for good)."""

    made: ClassVar[list[Installed]] = []

    def __init__(self, launch: Launch, apply: Applied, *,
                 evaluation: parent.Evaluation | None = None,
                 outcome: Outcome | None = None,
                 check: Any = None) -> None:  # fmt: skip
        self.launch, self.evaluation, self.apply = launch, evaluation, apply
        self.outcome, self.check = outcome, check
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
    # The fake child at its normal priority: on a busy machine one at the
    # lowest would wait long for a CPU (what is asked for is held below).
    lowered: list[int] = []
    monkeypatch.setattr(parent, "lower_priority_of", lowered.append)
    exits: list[Any] = []
    monkeypatch.setattr(parent.atexit, "register", exits.append)

    def run(launch: Launch) -> tuple[list[Outcome], Any, list[str]]:
        applied = Applied()
        for at_exit in exits:  # an earlier run's check, ended as at exit
            at_exit()
        exits.clear()
        Installed.made.clear()
        parent.start(launch, applied)
        assert all(environs == () for _, environs, *_ in applied.calls)
        said = [outcome for outcome, *_ in applied.calls]
        if not Installed.made or Installed.made[-1].evaluation is None:
            checks = [getattr(f, "__self__", None) for f in exits]
            if not checks:
                assert not Path(fake_child["FAKE_CHILD_LOG"]).exists()  # no child
                assert not Installed.made  # no verdict to heed
                return said, None, []
            [check] = checks
            assert isinstance(check, process.Child)
            # A launcher heeds its verdict for what it starts later; a launch
            # that trains in its own process starts nothing that would.
            assert len(Installed.made) == (0 if launch.in_process else 1)
            for waiter in Installed.made:
                assert waiter.installed and waiter.check is check
                assert waiter.outcome is said[0]
                assert (waiter.launch, waiter.apply) == (launch, applied)
            check.process.wait(30)
            child = started(fake_child)[-1]
            return said, check, child["argv"]
        [waiter] = Installed.made
        assert waiter.installed and waiter.launch is launch
        assert waiter.apply is applied
        answer = waiter.evaluation.answer()
        assert (answer.config, answer.how) == (EVALUATED, "evaluated")
        child = started(fake_child)[-1]
        return said, waiter, child["argv"]

    run.lowered = lowered  # type: ignore[attr-defined]
    yield run
    for at_exit in exits:
        at_exit()


def test_start_with_no_entry_starts_the_child_and_waits_later(
    starting: Any, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    launch = pending()
    said, _, argv = starting(launch)
    assert [o.level for o in said] == ["detail"]  # verbose only
    check_lines(request, [("no entry", said[0].message)])
    cache_key = launch_key(pending(), os.environ)
    assert argv[:7] == ["--parent", str(os.getpid()), "--cache",
                        str(tmp_path / "cache"), "--key", cache_key,
                        "--checks"]  # fmt: skip
    assert argv[7] == "--say" and argv[9:] == ["--path0", os.getcwd(), "--", *ARGS]


def store_entry(deps: dict[str, Any] | None = None) -> Cache:
    from rocm_hwq_autoset._evaluation.cache import open_cache

    cache, _ = open_cache(os.environ)
    assert cache is not None
    no_deps = {"files": [], "dirs": [], "lists": [], "env": {}}
    cache.store(launch_key(pending(), os.environ), EVALUATED, deps or no_deps)
    return cache


def test_start_with_an_entry_applies_it_at_once_and_checks_it_in_the_background(
    starting: Any, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    cache = store_entry()
    said, check, argv = starting(pending())
    [outcome] = said
    assert (outcome.level, outcome.queues, outcome.marker) == ("set", 8, "8 --module")
    cached = conclude({}, pending(), EVALUATED, where=CACHED)
    fresh = conclude({}, pending(), EVALUATED)
    assert outcome.message == cached.message != fresh.message
    assert outcome.inputs == INPUTS and isinstance(check, process.Child)
    cache_key = launch_key(pending(), os.environ)
    assert argv[:9] == ["--parent", str(os.getpid()), "--cache", cache.path,
                        "--key", cache_key, "--check", encode_inputs(INPUTS),
                        "--say"]  # fmt: skip
    assert argv[10:] == ["--path0", os.getcwd(), "--", *ARGS]
    assert starting.lowered == [check.pid]  # idle from its first instruction
    said_in_process, checked, _ = starting(pending(in_process=True))
    assert said_in_process[0].queues == 8 and isinstance(checked, process.Child)
    [child, _] = started(dict(os.environ))
    assert child["switch"] == "0" and child["pgid"] == child["pid"]  # its own group
    assert child["queues"] is None  # the environment before the value was set
    # What the entry depended on changed: said, and evaluated again.
    store_entry({"files": [], "dirs": [], "lists": [], "env": {"MY_DEGREE": "2"}})
    said, waiter, argv = starting(pending())
    assert [o.level for o in said] == ["detail"] and "MY_DEGREE" in said[0].text.split()
    check_lines(request, [("MY_DEGREE=2 in the entry, unset here", said[0].message)])
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
    checked: bool, said: bool, tmp_path: Path,
) -> None:  # fmt: skip
    for name, value in variables.items():
        monkeypatch.setenv(name, value)
    store_entry()
    outcomes, check, argv = starting(pending())
    assert [o.queues for o in outcomes if o.queues] in ([8], [])
    assert (check is not None) is checked
    assert ("--say" in argv) is said
    # No entry: the evaluating child checks what it finds instead (a peer's
    # answer), and says so as the check of a hit would.
    monkeypatch.setenv("ROCM_HWQ_AUTOSET_CACHE_DIR", str(tmp_path / "empty"))
    _, _, argv = starting(pending())
    assert ("--checks" in argv) is checked and ("--say" in argv) is said


def test_a_command_s_look_up_never_counts_as_a_launch(
    starting: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``explain``, ``doctor`` and ``verify`` read an entry without taking it:
    however often they look, the launches keep their unchecked uses."""
    monkeypatch.setenv("SLURM_JOB_ID", "7")
    store_entry()
    for step in range(MAX_UNCHECKED + 1):
        monkeypatch.setenv("SLURM_STEP_ID", f"command {step}")
        result, how = parent.evaluate(pending(), os.environ)
        assert result == EVALUATED and how.startswith("from the cache (")
    monkeypatch.setenv("SLURM_STEP_ID", "0")
    said, check, _ = starting(pending())
    assert said[0].level == "set" and check is not None


@pytest.mark.parametrize("rank", ["", "0", "00", "1"])
def test_a_hit_the_node_took_twice_unchecked_is_evaluated_before_training(
    starting: Any, monkeypatch: pytest.MonkeyPatch, rank: str,
    request: pytest.FixtureRequest,
) -> None:  # fmt: skip
    """Every check ended before it finished (the fake child never stores):
    each launch that takes the entry counts, whatever its local rank, and the
    machine's third launch evaluates and says why in verbose mode. Was: only
    local rank "0" counted, and "00" (torch's 0) or the node's only rank
    "1" (one pod per GPU) never did: old again and again (issue #36)."""
    if rank:
        monkeypatch.setenv("LOCAL_RANK", rank)
    monkeypatch.setenv("SLURM_JOB_ID", "7")
    store_entry()
    ours = rank in ("", "0", "00")  # the node's one process: it checks
    for step in range(2):
        monkeypatch.setenv("SLURM_STEP_ID", str(step))  # a launch each
        said, check, _ = starting(pending())
        assert said[0].level == "set" and (check is not None) is ours
    monkeypatch.setenv("SLURM_STEP_ID", "2")
    said, waiter, argv = starting(pending())
    assert [o.level for o in said] == ["detail"]
    assert str(MAX_UNCHECKED) in said[0].text.split()  # the bound, named
    check_lines(request, [("taken twice", said[0].message)], every_case=False)
    assert isinstance(waiter, Installed) and "--check" not in argv


@pytest.mark.parametrize("rank", ["", "1"])
def test_a_hit_whose_use_cannot_be_noted_is_evaluated_before_training(
    starting: Any, monkeypatch: pytest.MonkeyPatch, rank: str
) -> None:
    """Each launch notes each hit it takes (the bound on unchecked hits);
    where that fails it evaluates, and says why in verbose mode, whatever its
    local rank. Was: the failure ignored, the bound not kept (issue #28);
    another rank noted nothing (#36)."""
    if rank:
        monkeypatch.setenv("LOCAL_RANK", rank)
    store_entry()
    opening = os.open

    def full(path: str, flags: int, *args: Any, **kwargs: Any) -> int:
        if str(path).endswith(".served"):
            raise OSError(28, "No space left on device")
        return opening(path, flags, *args, **kwargs)

    monkeypatch.setattr(cache_module.os, "open", full)
    said, waiter, argv = starting(pending())
    assert [o.level for o in said] == ["detail"]
    assert f"({os.strerror(28)})" in said[0].text  # why, in the system's words
    assert isinstance(waiter, Installed) and "--check" not in argv


def test_a_check_that_cannot_start_leaves_the_cached_value(
    starting: Any, monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest
) -> None:
    store_entry()

    def refused(*args: Any, **kwargs: Any) -> None:
        raise OSError(11, "Resource temporarily unavailable")

    monkeypatch.setattr(process.subprocess, "Popen", refused)
    fds = sorted(os.listdir("/proc/self/fd"))
    said, check, _ = starting(pending())
    assert check is None
    assert [(o.level, o.queues) for o in said] == [("set", 8), ("detail", None)]
    assert said[1].text.endswith(str(BlockingIOError(11, os.strerror(11))))
    check_lines(request, [("Popen: EAGAIN", said[1].message)])
    assert sorted(os.listdir("/proc/self/fd")) == fds  # its copy of stderr closed


def test_a_check_that_cannot_be_lowered_still_checks(
    starting: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A check that ends (or cannot be reached) before it is made idle is no
    error of the launch's: the cached value is set, and nothing more said."""
    store_entry()

    def gone(pid: int) -> None:
        raise ProcessLookupError(3, "No such process")

    monkeypatch.setattr(parent, "lower_priority_of", gone)
    said, check, _ = starting(pending())
    assert [(o.level, o.queues) for o in said] == [("set", 8)]
    assert isinstance(check, process.Child)


def test_the_check_ends_with_its_launcher(
    starting: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """At exit the check's whole group is ended, however far it got; a copy
    of this process made by fork lets go of the pipe it watches. The check
    runs at normal priority here: at the lowest (``SCHED_IDLE``) a busy
    machine may not run it within any wall-clock bound (issue #37)."""
    monkeypatch.setattr(parent, "lower_priority_of", lambda pid: None)
    monkeypatch.setenv("FAKE_CHILD_SLEEP", "30")
    monkeypatch.setenv("FAKE_CHILD_GRANDCHILD", "1")
    store_entry()
    exits: list[Any] = []
    monkeypatch.setattr(parent.atexit, "register", exits.append)
    applied = Applied()
    parent.start(pending(), applied)
    [at_exit] = exits
    check = at_exit.__self__
    [record] = await_started(dict(os.environ))
    check.let_go()  # in the owner: nothing
    assert check.process.poll() is None
    start = time.monotonic()
    at_exit()
    assert check.process.returncode == -signal.SIGKILL
    assert time.monotonic() - start < 3
    assert _gone_within([record["pid"], record["grandchild"]], 5)


@pytest.mark.wall_clock  # it gives the idle-priority check 3 s to say its line
def test_our_stderr_is_the_checks_to_say_its_line_on(tmp_path: Path) -> None:
    """The real start in a process of its own, with the fake child as the
    check: what it writes on the descriptor it is given reaches the launcher's
    stderr, and nothing else of it does. The check runs at normal priority
    (at the lowest, a busy machine may not run it within the launcher's 3 s:
    issue #37)."""
    from rocm_hwq_autoset._evaluation.cache import key as cache_key

    cache = tmp_path / "cache"
    cache.mkdir(mode=0o700)
    script = (
        "import os, sys, time\n"
        "from rocm_hwq_autoset import _hook\n"
        "from rocm_hwq_autoset._argv import Launch\n"
        "from rocm_hwq_autoset._evaluation import parent, process\n"
        "process.CHILD = 'tests.fake_child'\n"
        "parent.lower_priority_of = lambda pid: None\n"  # normal priority
        "from rocm_hwq_autoset._evaluation.cache import Cache, key\n"
        "from tests.evaluation.helpers import EVALUATED\n"
        f"args = {ARGS!r}\n"
        "launch = Launch('--module', args, True)\n"
        "runs = process.interpreter_of(launch, os.environ)\n"
        f"Cache({str(cache)!r}).store(key(args, os.environ, runs), EVALUATED,"
        " {'env': {}, 'files': [], 'dirs': [], 'lists': []})\n"
        "parent.start(launch, _hook.apply)\n"
        "time.sleep(3)\n"
    )
    assert cache_key  # the key is the script's own: its cwd, its interpreter
    env = child_env(
        {
            "PATH": os.environ["PATH"],
            "PYTHONPATH": str(ROOT),
            "ROCM_HWQ_AUTOSET_CACHE_DIR": str(cache),
            "FAKE_CHILD_STDERR": "never seen\n",
            "FAKE_CHILD_SAY": CHECK_SAYS + "\n",
        },
        no_site=True,
    )  # the fake child starts as the real: -S
    done = subprocess.run([sys.executable, "-c", script], env=env, cwd=tmp_path,
                          capture_output=True, text=True, timeout=60)  # fmt: skip
    assert done.returncode == 0, done.stderr
    lines = done.stderr.splitlines()
    assert lines[0].startswith("rocm-hwq-autoset: GPU_MAX_HW_QUEUES=8 (")
    assert lines[1:] == [CHECK_SAYS]


@pytest.mark.parametrize(
    ("variables", "said"),
    [
        ({"ROCM_HWQ_AUTOSET_CACHE": "0"}, []),
        ({"ROCM_HWQ_AUTOSET_CACHE": "bogus"},
         [("warning", "ROCM_HWQ_AUTOSET_CACHE='bogus' is not 1/on/true/yes/auto"
           " (on), 0/off/false/no (off); the cache is not used")]),
        ({"ROCM_HWQ_AUTOSET_CACHE_DIR": "{tmp}/file"},
         [("detail", "cache: {tmp}/file: Not a directory; evaluating without it")]),
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
    monkeypatch.setattr(process.sys, "executable", "/nonexistent/python")
    [outcome], waiter, _ = starting(pending())
    assert waiter is None
    assert (outcome.level, outcome.marker) == ("warning", "unset --module")
    assert outcome.text.split()[0] == "--module/--config:"  # no source: the form
    assert (
        outcome.text.endswith(" '/nonexistent/python'") and outcome.tail == UNSET_TAIL
    )


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

    four = ("compute", "all_reduce", "fsdp_comm", "cudagraph_capture")
    assert launch() == ("4", [set_line(4, four).rstrip("\n")])
    cached = set_line(4, four, where=CACHED).rstrip("\n")
    assert launch() == ("4", [cached])  # the check agrees: nothing more
    (work / "tp2.flag").write_text("")
    queues, said = launch()
    assert queues == "4"  # the hit, at once
    [stale] = said[1:]  # the check's: its words are test_check's golden
    assert parsed(stale + "\n")[0] == "warning"
    assert {"GPU_MAX_HW_QUEUES=4", "8"} <= set(stale.split())
    queues, said = launch()
    assert queues == "8" and len(said) == 1
    five = ("compute", "all_reduce", "fsdp_comm", "tp_all_gather", "cudagraph_capture")
    assert said[0] == set_line(8, five, where=CACHED).rstrip("\n")

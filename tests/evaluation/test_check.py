"""The background check of a cached answer (``child --check``), run on the
stand-in torchtitan: it agrees and refreshes, or corrects the entry and says
so once; its log level, its lock, its priority, its bound."""

from __future__ import annotations

import errno
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from rocm_hwq_autoset._evaluation import child as child_module
from rocm_hwq_autoset._evaluation.answer import Verdict
from rocm_hwq_autoset._evaluation.cache import MAX_UNCHECKED, Cache
from rocm_hwq_autoset._model import encode_inputs

from ..helpers import check_lines
from ..helpers import said as parsed
from .children import (
    CHILD,
    Forked,
    answer,
    child,
    evaluations,
    flat,
    held,
    refusal,
)

#: A recipe whose degree comes from a file read only by os.path.exists: no
#: recording sees that (no audit event), so only a check can tell.
EXISTS = """
import os
from torchtitan.experiments.graph_trainer import trainer_config
def flag():
    tp = 2 if os.path.exists("tp2.flag") else 1
    config = trainer_config("m", "f", moe=False, tensor_parallel_degree=tp)
    if os.environ.get("BREAK_TRAVERSE"):  # a failure of ours, not the config's
        config.model_spec.model.traverse = lambda cls: 1 / 0
    return config
"""

FLAG = ["--module", "exists_recipes", "--config", "flag"]

NO_DEPS: dict[str, Any] = {"env": {}, "files": [], "dirs": [], "lists": []}

TP1 = ("async_tp=0,cp=1,cudagraph=1,dist_gemm=0,dp_replicate=1,dp_shard=-1,ep=1,"
       "ep_isolation=0,moe=0,moe_from=traverse,overlap=0,pp=1,tp=1,"
       "trainer_cudagraph=1")  # fmt: skip

TP2 = TP1.replace("tp=1", "tp=2")


@pytest.fixture
def flagged(world: dict[str, str]) -> dict[str, str]:
    recipes = Path(world["WORK"], "exists_recipes")
    recipes.mkdir()
    (recipes / "__init__.py").write_text("")
    (recipes / "config_registry.py").write_text(EXISTS)
    return world


def checking(world: dict[str, str], cached: str, *, say: bool = True,
             key: str = "k" * 32, status: int = 0,
             **env: str) -> tuple[str, list[str]]:  # fmt: skip
    """A check of an entry whose inputs were ``cached``: what it printed on
    stdout, and the lines it said on the descriptor it was given."""
    os.makedirs(world["CACHE"], mode=0o700, exist_ok=True)
    read, write = os.pipe()
    options = ["--cache", world["CACHE"], "--key", key, "--check", cached]
    if say:
        options += ["--say", str(write)]
    process = subprocess.Popen(
        [*CHILD, *options, "--",
         *FLAG],
        cwd=world["WORK"], env={**world, "ROCM_HWQ_AUTOSET": "0", **env},
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, pass_fds=(write,),
        start_new_session=True,  # a check that times out ends its whole group
    )  # fmt: skip
    os.close(write)
    out, err = process.communicate(timeout=60)
    with os.fdopen(read) as lines:
        said = lines.read().splitlines()
    assert (process.returncode, err) == (status, "")
    return out, said


def finding(world: dict[str, str], **env: str) -> tuple[list[str], list[str]]:
    """A child that checks what it finds without evaluating (``--checks``, as
    the hook starts the node's one): its lines on stdout and on its ``--say``."""
    os.makedirs(world["CACHE"], mode=0o700, exist_ok=True)
    read, write = os.pipe()
    options = ["--cache", world["CACHE"], "--key", "k" * 32, "--checks",
               "--say", str(write)]  # fmt: skip
    process = subprocess.Popen(
        [*CHILD, *options, "--",
         *FLAG],
        cwd=world["WORK"], env={**world, "ROCM_HWQ_AUTOSET": "0", **env},
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, pass_fds=(write,),
        start_new_session=True,
    )  # fmt: skip
    os.close(write)
    out, err = process.communicate(timeout=60)
    with os.fdopen(read) as lines:
        said = lines.read().splitlines()
    assert (process.returncode, err) == (0, "")
    return out.splitlines(), said


def verdict(out: str) -> tuple[str, str | None]:
    """A check's one line on stdout: its verdict, and the fresh inputs of a
    stale one."""
    [line] = out.splitlines()
    found = Verdict.from_json(json.loads(line))
    fresh = found.answer
    inputs = None
    if fresh is not None and fresh.config is not None:
        inputs = encode_inputs(fresh.config.inputs)
    return found.kind, inputs


def entry(world: dict[str, str], key: str = "k" * 32) -> Any:
    """The entry's variant of this machine (the first)."""
    path = Path(world["CACHE"], f"{key}.json")
    return json.loads(path.read_text())["variants"][0] if path.exists() else None


def test_a_check_that_agrees_refreshes_the_entry_and_says_nothing(
    flagged: dict[str, str],
) -> None:
    assert answer(child(flagged, FLAG))["inputs"] == TP1
    stamp = Path(flagged["CACHE"], f"{'k' * 32}.json").stat().st_mtime_ns
    time.sleep(0.01)
    out, said = checking(flagged, TP1)
    assert (verdict(out), said) == (("same", None), [])
    assert entry(flagged)["result"]["inputs"] == TP1
    assert Path(flagged["CACHE"], f"{'k' * 32}.json").stat().st_mtime_ns > stamp
    assert evaluations(flagged) == 2  # it evaluated, ignoring the entry


def test_a_check_that_finds_the_entry_stale_corrects_it_and_says_so_once(
    flagged: dict[str, str], request: pytest.FixtureRequest
) -> None:
    assert answer(child(flagged, FLAG))["inputs"] == TP1
    Path(flagged["WORK"], "tp2.flag").write_text("")  # no recording sees this
    assert answer(child(flagged, FLAG))["how"] == "cache"  # the hole
    out, said = checking(flagged, TP1)
    assert verdict(out) == ("stale", TP2)  # for the launcher's next processes
    [line] = said  # the value set from it, and the one the cache holds now
    assert parsed(line + "\n")[0] == "warning"
    assert {"GPU_MAX_HW_QUEUES=4", "8"} <= set(line.split())
    check_lines(request, [("the entry says TP 1, the config TP 2", line)])
    assert entry(flagged)["result"]["inputs"] == TP2
    again = answer(child(flagged, FLAG))  # the next launch gets it
    assert (again["how"], again["inputs"]) == ("cache", TP2)


def test_a_check_whose_answer_gives_the_same_value_says_nothing(
    flagged: dict[str, str],
) -> None:
    """Inputs that differ but give the launch the same Q (a lane that does
    not reach Q's floor): the value was right, nothing is said, and the entry
    holds the fresh inputs. Was: a 'was stale' warning for a right value
    (an adversarial try-out)."""
    assert answer(child(flagged, FLAG))["inputs"] == TP1
    other = TP1.replace("cudagraph=1", "cudagraph=0")  # Q 4 as well
    out, said = checking(flagged, other)
    assert (verdict(out), said) == (("same", None), [])
    assert entry(flagged)["result"]["inputs"] == TP1


@pytest.mark.parametrize("level", ["quiet", "", "verbose"])
def test_the_checks_line_follows_the_log_level(
    flagged: dict[str, str], level: str
) -> None:
    """Quiet: nothing (the parent gives no descriptor then; given one, the
    child still says nothing); default and verbose: the one line."""
    answer(child(flagged, FLAG))
    Path(flagged["WORK"], "tp2.flag").write_text("")
    _, said = checking(flagged, TP1, ROCM_HWQ_AUTOSET_LOG=level)
    assert len(said) == (0 if level == "quiet" else 1)
    assert entry(flagged)["result"]["inputs"] == TP2  # corrected all the same


def test_an_answer_the_child_found_itself_is_checked(flagged: dict[str, str]) -> None:
    """The launcher missed (a variable a ``sitecustomize`` sets after the hook
    ran, say) and its child found the entry: that answer was never checked
    (issue #28). Now the child answers, then checks, says, and gives its
    verdict; an evaluated answer is not checked again."""
    lines, said = finding(flagged)  # the first: evaluated here
    assert len(lines) == 1 and flat(json.loads(lines[0]))["how"] == "evaluated"
    Path(flagged["WORK"], "tp2.flag").write_text("")
    lines, said = finding(flagged)
    taken, checked = lines
    assert (flat(json.loads(taken))["how"], flat(json.loads(taken))["inputs"]) == (
        "cache", TP1)  # fmt: skip
    # noted as taken, as the launcher's hit is: the bound on unchecked hits
    # (and the check that completed started the count again)
    served = Cache(flagged["CACHE"]).served_file("k" * 32)
    assert Path(flagged["CACHE"], served).exists()
    assert verdict(checked) == ("stale", TP2)
    assert len(said) == 1 and "was stale" in said[0]
    assert entry(flagged)["result"]["inputs"] == TP2


def test_a_peers_answer_is_checked(flagged: dict[str, str], tmp_path: Path) -> None:
    """A rank that took another launch's published answer checks it."""
    from rocm_hwq_autoset._evaluation.answer import Answer, config_from_json

    answer(child(flagged, FLAG))  # TP1, as any rank here finds it
    cache = Cache(flagged["CACHE"])
    stored = entry(flagged)["result"]
    os.unlink(cache.entry("k" * 32))
    wrong = config_from_json({**stored, "inputs": TP2})  # what another launch found
    read, write = os.pipe()
    with held(cache, cache.lock_file("k" * 32)):  # a peer evaluates
        options = ["--cache", cache.path, "--key", "k" * 32, "--checks",
                   "--say", str(write)]  # fmt: skip
        process = subprocess.Popen(
            [*CHILD, *options,
             "--", *FLAG],
            cwd=flagged["WORK"], env={**flagged, "ROCM_HWQ_AUTOSET": "0"},
            stdout=subprocess.PIPE, text=True, pass_fds=(write,),
            start_new_session=True,
        )  # fmt: skip
        os.close(write)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and not any(
            f" {process.pid} " in line and "->" in line
            for line in Path("/proc/locks").read_text().splitlines()
        ):
            time.sleep(0.01)
        cache.publish("k" * 32, Answer(config=wrong), NO_DEPS)
    out, _ = process.communicate(timeout=60)
    with os.fdopen(read) as lines:
        said = lines.read().splitlines()
    taken, checked = out.splitlines()
    assert flat(json.loads(taken))["how"] == "peer"
    assert verdict(checked) == ("stale", TP1)
    assert len(said) == 1 and "was stale" in said[0]


def built(world: dict[str, str]) -> list[tuple[float, float]]:
    """When each evaluation began and ended building its config."""
    began: dict[int, float] = {}
    spans = []
    for line in Path(world["STANDIN_LOG"]).read_text().splitlines():
        record = json.loads(line)
        if record[0] == "parse_args":
            began[record[1]] = record[-1]
        elif record[0] == "built":
            spans.append((began.pop(record[1]), record[2]))
    return sorted(spans)


def test_two_checks_of_one_node_never_run_at_once_and_both_tell(
    flagged: dict[str, str],
) -> None:
    """Two launches at once, two real check processes: the second waits for
    the node's check lock (an exclusive one) and then checks for its own
    launch, in its own environment, and says so to it; was: it gave way, and
    its launch was never told (issue #28)."""
    answer(child(flagged, FLAG))
    Path(flagged["WORK"], "tp2.flag").write_text("")
    both: list[tuple[str, list[str]]] = []
    threads = [threading.Thread(target=lambda: both.append(
        checking(flagged, TP1, STANDIN_SLEEP="1")))
        for _ in range(2)]  # fmt: skip
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    (_, first_end), (second_start, _) = built(flagged)[1:]  # after the entry's
    assert second_start >= first_end, "two checks of one node ran at once"
    # Each launch took TP1: each is told, in its own launch.
    assert [verdict(out) for out, _ in both] == [("stale", TP2)] * 2
    assert [len(said) for _, said in both] == [1, 1]


def test_a_check_that_fails_keeps_the_entry_and_says_so_only_when_verbose(
    flagged: dict[str, str],
) -> None:
    answer(child(flagged, FLAG))
    before = entry(flagged)
    for level, lines in (("", []), ("verbose", [
        "rocm-hwq-autoset: cache: checking the cached --module/--config"
        " evaluation: internal error (ZeroDivisionError: division by zero); the"
        " entry is kept"])):  # fmt: skip
        out, said = checking(flagged, TP1, BREAK_TRAVERSE="1",
                             ROCM_HWQ_AUTOSET_LOG=level)  # fmt: skip
        assert (verdict(out), said) == (("unchecked", None), lines)
        assert entry(flagged) == before


def test_a_check_whose_evaluation_is_refused_removes_the_entry_and_says_so(
    flagged: dict[str, str], request: pytest.FixtureRequest
) -> None:
    answer(child(flagged, FLAG))
    registry = Path(flagged["WORK"], "exists_recipes", "config_registry.py")
    registry.write_text("")  # the config function is gone
    _, said = checking(flagged, TP1)
    [line] = said  # the value set from it, and the refusal, named
    assert parsed(line + "\n")[0] == "warning"
    assert {"GPU_MAX_HW_QUEUES=4", "'exists_recipes.config_registry'"} <= set(
        line.split()
    )
    check_lines(request, [("the config function gone", line)])
    assert entry(flagged) is None


def test_a_check_runs_at_the_lowest_priority(flagged: dict[str, str]) -> None:
    """nice 19 and the idle scheduling class, from its start."""
    recipes = Path(flagged["WORK"], "exists_recipes", "config_registry.py")
    recipes.write_text(EXISTS + (
        "import json\n"
        "with open('priority.json', 'w') as f:\n"
        "    json.dump([os.nice(0), os.sched_getscheduler(0)], f)\n"
    ))  # fmt: skip
    checking(flagged, TP1)
    niceness, policy = json.loads(Path(flagged["WORK"], "priority.json").read_text())
    assert niceness == 19 and policy == os.SCHED_IDLE


@pytest.mark.parametrize("level", ["", "verbose"])
def test_a_check_that_takes_too_long_ends_and_keeps_the_entry(
    flagged: dict[str, str], level: str, request: pytest.FixtureRequest
) -> None:
    answer(child(flagged, FLAG))
    before = entry(flagged)
    Path(flagged["WORK"], "tp2.flag").write_text("")
    start = time.monotonic()
    _, said = checking(flagged, TP1, status=-signal.SIGKILL, STANDIN_SLEEP="30",
                       ROCM_HWQ_AUTOSET_TIMEOUT="0.2",
                       ROCM_HWQ_AUTOSET_LOG=level)  # fmt: skip
    assert 2 < time.monotonic() - start < 10  # ten timeouts, then the alarm's second
    assert len(said) == (1 if level else 0)  # a detail: verbose only
    if level:
        assert parsed(said[0] + "\n")[0] == "say" and "2" in said[0].split()
        check_lines(request, [("a check of over 2 s", said[0])])
    assert entry(flagged) == before


@pytest.mark.parametrize("removed", [True, False])
def test_a_stale_entry_the_check_cannot_correct_is_removed(
    flagged: dict[str, str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    removed: bool,
    request: pytest.FixtureRequest,
) -> None:
    """A full or read-only cache: the wrong entry must not stay for the next
    launch. The check's main in a fork of this process, storing refused; and
    removing it too: then the line says it stays, within the bound on
    unchecked hits (was: 'the cache no longer holds it', and it did)."""
    answer(child(flagged, FLAG))
    Path(flagged["WORK"], "tp2.flag").write_text("")

    def full(*args: object) -> None:
        raise OSError(28, "No space left on device")

    def read_only(*args: object) -> None:
        raise OSError(30, "Read-only file system")

    monkeypatch.setattr(Cache, "store", full)
    if not removed:
        monkeypatch.setattr(Cache, "remove", read_only)
    for folder in flagged["PYTHONPATH"].split(os.pathsep)[:1]:
        monkeypatch.syspath_prepend(folder)
    monkeypatch.chdir(flagged["WORK"])
    monkeypatch.syspath_prepend(flagged["WORK"])
    read, write = os.pipe()
    options = ["--cache", flagged["CACHE"], "--key", "k" * 32, "--check", TP1,
               "--say", str(write)]  # fmt: skip
    try:
        forked = Forked(tmp_path, [*options, "--", *FLAG], ROCM_HWQ_AUTOSET="0")
        os.close(write)
        status, out = forked.finish()
        assert (status, verdict(out)) == (0, ("stale", TP2))
        with os.fdopen(read) as lines:
            said = lines.read()
    finally:
        roots = ("torchtitan", "exists_recipes")
        for name in [m for m in sys.modules if m.split(".")[0] in roots]:
            del sys.modules[name]
    last = said.splitlines(keepends=True)[-1]  # after the store's own warning
    assert parsed(last)[0] == "warning"
    check_lines(request, [("storing refused" + ("" if removed else ", and removing"),
                           last)])  # fmt: skip
    if not removed:
        assert f"({os.strerror(30)}):" in last.split("; ")[-1]  # why it stays
        assert str(MAX_UNCHECKED) in last.split("; ")[-1].split()  # how long
        assert entry(flagged) is not None
        return
    assert entry(flagged) is None


def in_fork(
    world: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    argv: list[str], **env: str,
) -> Forked:  # fmt: skip
    """The check's main in a fork of this process, importing the stand-in
    torchtitan and the recipes as the real child does (the test's own
    ``child_module`` patches apply there)."""
    for folder in world["PYTHONPATH"].split(os.pathsep)[:1]:
        monkeypatch.syspath_prepend(folder)
    monkeypatch.chdir(world["WORK"])
    monkeypatch.syspath_prepend(world["WORK"])
    os.makedirs(world["CACHE"], mode=0o700, exist_ok=True)
    return Forked(tmp_path, argv, ROCM_HWQ_AUTOSET="0",
                  STANDIN_LOG=world["STANDIN_LOG"], **env)  # fmt: skip


@pytest.mark.parametrize(
    ("level", "read"), [("", True), ("verbose", True), ("verbose", False)]
)
def test_a_check_that_cannot_run_at_the_lowest_priority_does_not_run(
    flagged: dict[str, str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    request: pytest.FixtureRequest,
    level: str,
    read: bool,
) -> None:
    """Where the lowest priority cannot be had (``lowest_priority`` says why),
    no evaluation and nothing stored: the verdict is unchecked, and the reason
    is said as a detail (verbose only), with the bound on unchecked hits. A
    launcher that no longer reads its stderr (the write fails, EPIPE) does
    not stop the child."""
    Path(flagged["WORK"], "tp2.flag").write_text("")  # a check would find TP2
    why = os.strerror(errno.EPERM)
    monkeypatch.setattr(child_module, "lowest_priority", lambda: why)
    reader, write = os.pipe()
    if not read:
        os.close(reader)
    options = ["--cache", flagged["CACHE"], "--key", "k" * 32, "--check", TP1,
               "--say", str(write)]  # fmt: skip
    try:
        forked = in_fork(flagged, tmp_path, monkeypatch, [*options, "--", *FLAG],
                         ROCM_HWQ_AUTOSET_LOG=level)  # fmt: skip
    finally:
        os.close(write)
    status, out = forked.finish()
    assert (status, verdict(out)) == (0, ("unchecked", None))
    assert (evaluations(flagged), entry(flagged)) == (0, None)
    if not read:
        return
    with os.fdopen(reader) as lines:
        said = lines.read()
    if not level:
        assert said == ""
        return
    kind, message = parsed(said)
    assert kind == "say" and why in message  # a detail: no lead
    assert str(MAX_UNCHECKED) in message.split()
    check_lines(request, [("the lowest priority refused", said)])


def test_a_check_waits_for_its_entrys_check_lock(
    flagged: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One check of an entry at a time on a node: the lock it waits for is
    that entry's, named by its key."""
    monkeypatch.setattr(child_module, "lowest_priority", lambda: None)  # ours
    os.makedirs(flagged["CACHE"], mode=0o700, exist_ok=True)
    cache = Cache(flagged["CACHE"])
    options = ["--cache", cache.path, "--key", "k" * 32, "--check", TP1]
    with held(
        cache, cache.check_lock_file("k" * 32)
    ):  # another check of the entry runs
        forked = in_fork(flagged, tmp_path, monkeypatch, [*options, "--", *FLAG])
        forked.wait_blocked()
        assert evaluations(flagged) == 0
    status, out = forked.finish()
    assert (status, verdict(out), evaluations(flagged)) == (0, ("same", None), 1)


def test_a_peers_refusal_the_check_finds_a_config_for_is_stale(
    flagged: dict[str, str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    request: pytest.FixtureRequest,
) -> None:
    """A rank took another launch's refusal (nothing was set from it); its
    check evaluates and finds the config: stale, said once, the entry stored,
    and the fresh answer in the verdict (not the same: a refusal is compared
    with a refusal only)."""
    monkeypatch.setattr(child_module, "lowest_priority", lambda: None)  # ours
    os.makedirs(flagged["CACHE"], mode=0o700, exist_ok=True)
    cache = Cache(flagged["CACHE"])
    reader, write = os.pipe()
    options = ["--cache", cache.path, "--key", "k" * 32, "--checks",
               "--say", str(write)]  # fmt: skip
    with held(cache, cache.lock_file("k" * 32)):  # a peer evaluates
        try:
            forked = in_fork(flagged, tmp_path, monkeypatch, [*options, "--", *FLAG])
        finally:
            os.close(write)
        forked.wait_blocked()
        cache.publish("k" * 32, refusal("the peer's"), NO_DEPS)
    status, out = forked.finish()
    with os.fdopen(reader) as lines:
        said = lines.read()
    taken, checked = out.splitlines()
    assert flat(json.loads(taken)) == {"error": "the peer's", "source": "",
                                       "how": "peer"}  # fmt: skip
    assert (status, verdict(checked)) == (0, ("stale", TP1))
    assert parsed(said)[0] == "warning"
    check_lines(request, [("a peer's refusal, a config found", said)])
    assert entry(flagged)["result"]["inputs"] == TP1

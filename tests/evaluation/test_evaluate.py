"""The commands' evaluation (``parent.evaluate``): it waits, and says how it
found the answer."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from rocm_hwq_autoset._config import ConfigError
from rocm_hwq_autoset._evaluation import parent as parent
from rocm_hwq_autoset._evaluation import process
from rocm_hwq_autoset._evaluation.cache import Cache

from ..helpers import check_lines
from .helpers import ARGS, EVALUATED, launch_key, pending, started


@pytest.fixture
def evaluating(fake_child: dict[str, str], tmp_path: Path) -> dict[str, str]:
    return dict(fake_child, ROCM_HWQ_AUTOSET_CACHE_DIR=str(tmp_path / "cache"))


def test_evaluate_says_how_it_found_the_answer(
    evaluating: dict[str, str], request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    result, evaluated = parent.evaluate(pending(), evaluating)
    assert result == EVALUATED
    [child] = started(evaluating)
    cache_key = launch_key(pending(), evaluating)
    cache_dir = evaluating["ROCM_HWQ_AUTOSET_CACHE_DIR"]
    assert child["argv"][2:8] == ["--cache", cache_dir, "--key", cache_key,
                                  "--path0", os.getcwd()]  # fmt: skip
    cache = Cache(evaluating["ROCM_HWQ_AUTOSET_CACHE_DIR"])
    no_deps = {"files": [], "dirs": [], "lists": [], "env": {}}
    cache.store(cache_key, EVALUATED, no_deps)
    result, hit = parent.evaluate(pending(), evaluating)
    assert result == EVALUATED and f"({cache.entry(cache_key)})" in hit.split()
    assert len(started(evaluating)) == 1  # no second child
    result, no_cache = parent.evaluate(pending(), evaluating, use_cache=False)
    assert result == EVALUATED and "(--no-cache)" in no_cache.split()
    check_lines(request, [("no entry", evaluated),
                          ("an entry", hit.replace(cache_key, "KEY")),
                          ("--no-cache", no_cache)], tmp_path)  # fmt: skip
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
         "evaluated ({tmp}/file: Not a directory)"),
        ({"ROCM_HWQ_AUTOSET_CACHE_DIR": "{tmp}/file/cache"},
         "evaluated ({tmp}/file/cache: Not a directory)"),
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
    evaluating: dict[str, str], request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    """``explain`` and ``doctor`` evaluate for an environment of their own: an
    entry that read MY_DEGREE is used when that environment's value matches."""
    assert "MY_DEGREE" not in os.environ
    os.makedirs(evaluating["ROCM_HWQ_AUTOSET_CACHE_DIR"], mode=0o700)
    cache = Cache(evaluating["ROCM_HWQ_AUTOSET_CACHE_DIR"])
    environ = dict(evaluating, MY_DEGREE="2")
    cache_key = launch_key(pending(), environ)
    deps = {"files": [], "dirs": [], "lists": [], "env": {"MY_DEGREE": "2"}}
    cache.store(cache_key, EVALUATED, deps)
    result, hit = parent.evaluate(pending(), environ)
    assert result == EVALUATED and f"({cache.entry(cache_key)})" in hit.split()
    environ["MY_DEGREE"] = "4"
    result, stale = parent.evaluate(pending(), environ)
    assert result == EVALUATED and "MY_DEGREE" in stale.split()  # what changed
    assert len(started(environ)) == 1  # evaluated again, that once
    hit = hit.replace(cache_key, "KEY")
    check_lines(request, [("MY_DEGREE=2", hit), ("MY_DEGREE=4", stale)], tmp_path)


def test_evaluate_says_when_another_process_evaluated(
    evaluating: dict[str, str], request: pytest.FixtureRequest
) -> None:
    from tests.fake_child import ANSWER

    result, mine = parent.evaluate(pending(), evaluating)
    environ = dict(evaluating, FAKE_CHILD_OUT=json.dumps({**ANSWER, "how": "peer"}))
    result, peer = parent.evaluate(pending(), environ)
    assert result == EVALUATED and peer != mine
    check_lines(request, [("the child says peer", peer)])


def test_evaluate_when_the_evaluation_takes_too_long(
    evaluating: dict[str, str], request: pytest.FixtureRequest
) -> None:
    environ = dict(evaluating, FAKE_CHILD_SLEEP="30", ROCM_HWQ_AUTOSET_TIMEOUT="0.1")
    result, how = parent.evaluate(pending(), environ)
    assert isinstance(result, ConfigError)
    assert {"0.1", "(ROCM_HWQ_AUTOSET_TIMEOUT)"} <= set(str(result).split())
    assert how.split()[0] == "evaluated"  # a miss: a child was started
    check_lines(request, [("ROCM_HWQ_AUTOSET_TIMEOUT=0.1", str(result)),
                          ("how", how)])  # fmt: skip


def test_evaluate_when_no_child_can_start(
    evaluating: dict[str, str], monkeypatch: pytest.MonkeyPatch,
    request: pytest.FixtureRequest,
) -> None:  # fmt: skip
    monkeypatch.setattr(process.sys, "executable", "/nonexistent/python")
    result, how = parent.evaluate(pending(), evaluating, use_cache=False)
    assert isinstance(result, ConfigError) and "(--no-cache)" in how.split()
    assert str(result).endswith(" '/nonexistent/python'")  # the OS's error
    check_lines(request, [("python: /nonexistent/python", str(result))])


@pytest.mark.parametrize("told", [False, True])
def test_a_wait_past_the_slow_mark_lasts_to_the_deadline(
    evaluating: dict[str, str], monkeypatch: pytest.MonkeyPatch, told: bool
) -> None:
    """Past ``SLOW_SECONDS`` the wait goes on to the launch's deadline,
    whether it is told (the hook's) or not (a command's); what it is told is
    the time left, within the timeout. No bound on the wall clock here."""
    monkeypatch.setattr(parent, "SLOW_SECONDS", 0.05)
    environ = dict(evaluating, FAKE_CHILD_SLEEP="0.5", ROCM_HWQ_AUTOSET_TIMEOUT="60")
    evaluation = parent.Evaluation(pending(), environ, None)
    lefts: list[float] = []
    answer = evaluation.answer(slow=lefts.append if told else None)
    assert answer.config is not None, answer.failure
    assert len(lefts) == told and all(0 < left <= 60 for left in lefts)


@pytest.mark.wall_clock
@pytest.mark.parametrize(("sleep", "slow"), [("0", 5.0), ("1", 0.2)])
def test_a_long_wait_is_told_once_with_the_time_left(
    evaluating: dict[str, str],
    monkeypatch: pytest.MonkeyPatch,
    sleep: str,
    slow: float,
) -> None:
    """Issue #30: a wait past ``SLOW_SECONDS`` calls ``slow`` once, with the
    seconds left to the deadline; a quick answer (well within it, even on a
    busy machine) never does."""
    monkeypatch.setattr(parent, "SLOW_SECONDS", slow)
    environ = dict(evaluating, FAKE_CHILD_SLEEP=sleep, ROCM_HWQ_AUTOSET_TIMEOUT="30")
    evaluation = parent.Evaluation(pending(), environ, None)
    told: list[tuple[float, float]] = []
    began = time.monotonic()
    answer = evaluation.answer(
        slow=lambda left: told.append((time.monotonic() - began, left))
    )
    assert answer.config is not None, answer.failure
    if sleep == "0":
        assert told == []
        return
    [(after, left)] = told
    assert 0.2 <= after < 1 and 29 < left < 30  # before the answer (1 s or more)

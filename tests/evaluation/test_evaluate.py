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

from .helpers import ARGS, EVALUATED, launch_key, pending, started


@pytest.fixture
def evaluating(fake_child: dict[str, str], tmp_path: Path) -> dict[str, str]:
    return dict(fake_child, ROCM_HWQ_AUTOSET_CACHE_DIR=str(tmp_path / "cache"))


def test_evaluate_says_how_it_found_the_answer(evaluating: dict[str, str]) -> None:
    result, how = parent.evaluate(pending(), evaluating)
    assert (result, how) == (EVALUATED, "evaluated (cache: no entry)")
    [child] = started(evaluating)
    cache_key = launch_key(pending(), evaluating)
    cache_dir = evaluating["ROCM_HWQ_AUTOSET_CACHE_DIR"]
    assert child["argv"][2:8] == ["--cache", cache_dir, "--key", cache_key,
                                  "--path0", os.getcwd()]  # fmt: skip
    cache = Cache(evaluating["ROCM_HWQ_AUTOSET_CACHE_DIR"])
    no_deps = {"files": [], "dirs": [], "lists": [], "env": {}}
    cache.store(cache_key, EVALUATED, no_deps)
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
    evaluating: dict[str, str],
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
    from tests.fake_child import ANSWER

    environ = dict(evaluating, FAKE_CHILD_OUT=json.dumps({**ANSWER, "how": "peer"}))
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
    monkeypatch.setattr(process.sys, "executable", "/nonexistent/python")
    result, how = parent.evaluate(pending(), evaluating, use_cache=False)
    assert isinstance(result, ConfigError) and how == "evaluated (--no-cache)"
    assert str(result) == (
        "cannot start the evaluation: [Errno 2] No such file or directory:"
        " '/nonexistent/python'"
    )


@pytest.mark.wall_clock
@pytest.mark.parametrize("sleep", ["0", "0.6"])
def test_a_long_wait_is_told_once_with_the_time_left(
    evaluating: dict[str, str], monkeypatch: pytest.MonkeyPatch, sleep: str
) -> None:
    """Issue #30: a wait past ``SLOW_SECONDS`` calls ``slow`` once, with the
    seconds left to the deadline; a quick answer never does."""
    monkeypatch.setattr(parent, "SLOW_SECONDS", 0.2)
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
    assert 0.2 <= after < 0.5 and 29 < left < 30

"""The test helpers that decide between skipping and failing."""

from __future__ import annotations

import functools
import os
import subprocess
import sys

import pytest

from ..helpers import require_index

#: No configuration files, no local wheels: an index that refuses connections.
NO_INDEX = ("--index-url", "http://127.0.0.1:9/simple")
BARE_ENV = {"PATH": os.environ["PATH"], "HOME": os.environ.get("HOME", "/tmp"),
            "PIP_CONFIG_FILE": os.devnull}  # fmt: skip


@functools.cache  # one pip run (a second each) serves both tests
def unreachable_index_output() -> str:
    """What this machine's pip says when its package index cannot be reached."""
    done = subprocess.run(
        [sys.executable, "-m", "pip", "download", "--no-deps", "--retries", "0",
         "--timeout", "5", *NO_INDEX, "--dest", "/nonexistent-never-written",
         "tomli"],
        capture_output=True, text=True, timeout=120, env=BARE_ENV,
    )  # fmt: skip
    assert done.returncode != 0
    return done.stdout + done.stderr


def test_no_package_index_skips_with_the_reason(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(pytest.skip.Exception, match="no package index reachable"):
        require_index(unreachable_index_output(), index_args=NO_INDEX, env=BARE_ENV)


def test_no_package_index_fails_under_ci(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="CI requires it"):
        require_index(unreachable_index_output(), index_args=NO_INDEX, env=BARE_ENV)


@pytest.mark.parametrize(
    "said",
    [
        "ERROR: Could not find a version that satisfies the requirement"
        " tomlii-typo (from versions: none)\n"
        "ERROR: No matching distribution found for tomlii-typo",
        "ERROR: Could not find a version that satisfies the requirement"
        " tomli==0.0.999 (from versions: 1.2.3, 2.0.1)\n"
        "ERROR: No matching distribution found for tomli==0.0.999",
    ],
)
def test_a_wrong_requirement_is_left_to_the_caller_to_fail(
    said: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A typo'd name or a version that does not exist, on an index that
    answers (the fake one: it lists pip): not skipped, even outside CI."""
    from .. import helpers

    monkeypatch.delenv("CI", raising=False)
    asked: list[tuple[str, ...]] = []
    monkeypatch.setattr(
        helpers, "index_answers", lambda args, env: asked.append(args) or True
    )
    require_index(said)  # returns: the caller's assert fails it
    assert asked == ([()] if "versions: none" in said else [])


def test_other_pip_failures_are_left_to_the_caller(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("CI", raising=False)
    require_index("ERROR: Invalid requirement: 'tomli>>1'")  # returns: not ours

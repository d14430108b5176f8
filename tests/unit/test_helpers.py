"""The test helpers that decide between skipping and failing."""

from __future__ import annotations

import functools
import os
import subprocess
import sys

import pytest

from ..helpers import require_index


@functools.cache  # one pip run (a second each) serves both tests
def unreachable_index_output() -> str:
    """What this machine's pip says when its package index cannot be reached
    (no configuration files, no local wheels: an index that refuses connections)."""
    env = {"PATH": os.environ["PATH"], "HOME": os.environ.get("HOME", "/tmp"),
           "PIP_CONFIG_FILE": os.devnull}  # fmt: skip
    done = subprocess.run(
        [sys.executable, "-m", "pip", "download", "--no-deps", "--retries", "0",
         "--timeout", "5", "--index-url", "http://127.0.0.1:9/simple",
         "--dest", "/nonexistent-never-written", "tomli"],
        capture_output=True, text=True, timeout=120, env=env,
    )  # fmt: skip
    assert done.returncode != 0
    return done.stdout + done.stderr


def test_no_package_index_skips_with_the_reason(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(pytest.skip.Exception, match="no package index reachable"):
        require_index(unreachable_index_output())


def test_no_package_index_fails_under_ci(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="CI requires it"):
        require_index(unreachable_index_output())


def test_other_pip_failures_are_left_to_the_caller(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("CI", raising=False)
    require_index("ERROR: Invalid requirement: 'tomli>>1'")  # returns: not ours

"""Fixtures for the end-to-end tests: the built wheel, and real venvs of every
CPython 3.9-3.13 with it installed by pip."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from importlib import metadata
from pathlib import Path
from typing import Any

import pytest

from .helpers import (
    ROOT,
    RunLock,
    Venv,
    require_index,
    require_python,
)


def _run(*args: str) -> None:
    env = dict(os.environ, PIP_DISABLE_PIP_VERSION_CHECK="1")
    proc = subprocess.run(args, capture_output=True, text=True, env=env)
    if proc.returncode != 0:
        require_index(proc.stdout + proc.stderr)
    assert proc.returncode == 0, f"{' '.join(args)}:\n{proc.stdout}{proc.stderr}"


@pytest.fixture(scope="session")
def wheelhouse(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The project's wheel, built with hatchling, and a pure tomli wheel."""
    out = tmp_path_factory.mktemp("wheelhouse")
    subprocess.run(
        [sys.executable, "-m", "build", "--wheel", "--no-isolation",
         "--outdir", str(out), str(ROOT)],
        check=True, capture_output=True,
    )  # fmt: skip
    _run(sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
         "--platform", "any", "--implementation", "py", "--abi", "none",
         "--python-version", "3.9", "--dest", str(out), "tomli>=1.1")  # fmt: skip
    return out


_VENVS: dict[tuple[str, str], Venv] = {}


def make_venv(python: str, kind: str, wheelhouse: Path, where: Path) -> Venv:
    """A fresh venv with the project installed by that venv's own pip, as a
    wheel or editable (pip builds the editable wheel with hatchling)."""
    venv = Venv(where)
    subprocess.run([python, "-m", "venv", str(where)], check=True)
    pip = [venv.python, "-m", "pip", "install", "--find-links", str(wheelhouse)]
    if kind == "wheel":
        wheel = next(wheelhouse.glob("rocm_hwq_autoset-*.whl"))
        _run(*pip, "--no-index", str(wheel))
    else:
        _run(*pip, "--editable", str(ROOT))
    return venv


@pytest.fixture(scope="session")
def venvs(wheelhouse: Path, tmp_path_factory: pytest.TempPathFactory) -> object:
    def get(version: str, kind: str = "wheel") -> Venv:
        key = (version, kind)
        if key not in _VENVS:
            python = require_python(version)
            where = tmp_path_factory.mktemp(f"venv-{version}-{kind}")
            _VENVS[key] = make_venv(python, kind, wheelhouse, where / "venv")
        return _VENVS[key]

    return get


#: This package's variables: a test that sets them in this process's own
#: environment would change what every later test sees.
OURS = ("GPU_MAX_HW_QUEUES", "ROCM_HWQ_AUTOSET_ORIGIN", "ROCM_HWQ_AUTOSET_INPUTS")


@pytest.fixture(autouse=True)
def _environment_left_as_found(request: pytest.FixtureRequest) -> object:
    """A test may change them only in a process of its own (``forked``)."""
    before = {name: os.environ.get(name) for name in OURS}
    yield
    if request.node.get_closest_marker("forked") is None:
        after = {name: os.environ.get(name) for name in OURS}
        assert after == before, "the test changed this process's environment"


#: Where the kernel groups tasks by session (autogroup), the group's niceness:
#: shared by every process of the session, the test run's and all it starts.
AUTOGROUP = "/proc/self/autogroup"


def priority() -> tuple[object, object, object]:
    """This process's CPU priority: its niceness, its scheduling class, and its
    session's autogroup niceness (None where there is none)."""
    try:
        with open(AUTOGROUP) as group:
            shared: object = group.read().split()[-1]
    except (OSError, IndexError):
        shared = None
    policy = os.sched_getscheduler(0) if hasattr(os, "sched_getscheduler") else None
    return os.nice(0), policy, shared


@pytest.fixture(autouse=True)
def _priority_left_as_found(request: pytest.FixtureRequest) -> object:
    """A test may lower the CPU priority only of a process in a session of its
    own, as the package's children are: the session's autogroup at nice 19
    weighs 15 against another session's 1024, so every later test of the run,
    and every later command of the shell that started it, would get ~1.4 % of
    a CPU wherever anything else runs (the torchtitan tests then took over 300
    s for 22 s of CPU). A forked test's own process may lower itself."""
    forked = request.node.get_closest_marker("forked") is not None
    before = priority()
    yield
    after = priority()
    if forked:
        before, after = before[2:], after[2:]
    assert after == before, (
        f"the test changed the priority of the test run (niceness, scheduling"
        f" class, the session's autogroup): {before} -> {after}; lower a process"
        f" of its own session only (start_new_session=True, os.setsid())"
    )


@pytest.fixture(autouse=True)
def _serial(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[None]:
    """A test marked ``serial`` runs alone under xdist (``RunLock``); the
    others share the run. Without xdist: nothing."""
    serial = request.node.get_closest_marker("serial") is not None
    with RunLock.held(tmp_path_factory, alone=serial):
        yield


#: pytest-forked before 1.7 (the last release for Python 3.9 is 1.6.0) runs a
#: forked test's setup and teardown in the child only: the parent's setup state
#: keeps the module of the tests before it, and the next module's first test
#: errors ("previous item was not torn down properly"). 1.7 tears it down in the
#: parent (``teardown_exact(nextitem)``); this does the same for older ones.
_FORKED_KEEPS_SETUP_STATE = tuple(
    int(part) for part in metadata.version("pytest-forked").split(".")[:2]
) < (1, 7)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Any:
    yield
    if _FORKED_KEEPS_SETUP_STATE and item.get_closest_marker("forked") is not None:
        item.session._setupstate.teardown_exact(nextitem)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Under a mutation run (``tools/mutation.py``: mutmut sets
    ``MUTANT_UNDER_TEST``), a test marked ``wall_clock`` is skipped: it bounds
    how long the package's own code takes, and mutmut's trampoline, on every
    call of a mutated function, makes that code several times slower; its
    first run (which learns which tests run which function) stops at the first
    failure."""
    if "MUTANT_UNDER_TEST" not in os.environ:
        return
    skip = pytest.mark.skip(
        reason="bounds the package's own time: under mutmut's trampoline it is slower"
    )
    for item in items:
        if item.get_closest_marker("wall_clock") is not None:
            item.add_marker(skip)

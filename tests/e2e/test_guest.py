"""The guest contract (docs/design.md): whatever a program's own code can
observe is as without the package, but the value. Each case runs the probe
(tests/e2e/guest.py) with the hook on and off under one hostile condition, in
the cheapest launch form that exercises it, and compares field by field."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from ..helpers import Venv, missing
from .guest import Guest, differences

#: One worker builds the venvs and runs every test that uses them.
pytestmark = [pytest.mark.e2e, pytest.mark.xdist_group("venvs")]


def _umask_000() -> None:
    os.umask(0)


def _umask_077() -> None:
    os.umask(0o077)


def _signals() -> None:
    """A job started with SIGTERM ignored (``nohup``-like) and SIGUSR2
    blocked, as a supervisor may leave them."""
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGUSR2})


def _no_zombies() -> None:
    """SIGCHLD ignored, as some daemons leave it: children are reaped at once."""
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)


#: name: (launch form, run options, whether the on run gets a value).
CASES: dict[str, tuple[str, dict[str, Any], bool]] = {
    "script": ("script", {}, True),
    "module": ("module", {}, True),
    "torchrun": ("torchrun", {}, True),
    "script exit 3": ("script", {"do": "exit=3"}, True),
    "module ends by SIGTERM": ("module", {"do": "signal"}, True),
    "script stderr full": ("script", {"stderr": "full", "do": "silent"}, True),
    "module stderr full": ("module", {"stderr": "full", "do": "silent"}, True),
    "torchrun stderr full": ("torchrun", {"stderr": "full", "do": "silent"}, True),
    "script stderr full, unbuffered": (
        "script", {"stderr": "full", "do": "silent",
                   "env": {"PYTHONUNBUFFERED": "1"}}, True),
    "script stdout full": ("script", {"stdout": "full", "do": "silent"}, True),
    "script stdout closed": ("script", {"stdout": "closed"}, True),
    "module stdout full": ("module", {"stdout": "full", "do": "silent"}, True),
    "module stdin closed": ("module", {"stdin": "closed"}, True),
    "module stdio closed": (
        "module", {"stdin": "closed", "stdout": "closed", "stderr": "closed"}, True),
    "module stdin closed, a cached answer checked": (
        "module", {"stdin": "closed", "warm": True}, True),
    "torchrun stdio closed": ("torchrun", {"stdin": "closed", "stderr": "closed"},
                              True),
    # No HOME: the passwd entry's home; a uid with neither is the next case.
    "module no home": ("module", {"env": {"HOME": None,
                                          "ROCM_HWQ_AUTOSET_CACHE_DIR": None}}, True),
    "module, a uid without a home": (
        "module", {"homeless": True, "env": {"HOME": None, "TMPDIR": "TMP",
                                              "ROCM_HWQ_AUTOSET_CACHE_DIR": None}},
        True),
    "module umask 000": ("module", {"prepare": _umask_000}, True),
    "module umask 077, a cached answer checked": (
        "module", {"prepare": _umask_077, "warm": True}, True),
    "module signals": ("module", {"prepare": _signals}, True),
    "module SIGCHLD ignored": ("module", {"prepare": _no_zombies}, True),
    "torchrun signals": ("torchrun", {"prepare": _signals}, True),
    "module TMPDIR not there": ("module", {"env": {"TMPDIR": "/nonexistent/t m p"}},
                                True),
    "module read-only cwd": ("module", {"readonly": True}, True),
    "module, a cached answer checked": ("module", {"warm": True}, True),
    "torchrun, a cached answer checked": ("torchrun", {"warm": True}, True),
    # A pod that gets a new host name at each start, its cache kept.
    "module, a cached answer taken under a new host name": (
        "module", {"warm": True, "pod": True}, True),
    "torchrun, its world in a folder with a space": (
        "torchrun", {"spaced": True, "warm": True}, True),
    "module warnings are errors, dev mode": (
        "module", {"env": {"PYTHONWARNINGS": "error", "PYTHONDEVMODE": "1"}}, True),
    "torchrun warnings are errors, dev mode": (
        "torchrun", {"env": {"PYTHONWARNINGS": "error", "PYTHONDEVMODE": "1"}}, True),
    "script ASCII stdio, C locale": (
        "script", {"env": {"PYTHONIOENCODING": "ascii", "LC_ALL": "C"}}, True),
    "launcher killed": ("torchrun", {"do": "kill"}, False),
    "child stopped, launcher killed": ("torchrun", {"do": "stopkill"}, False),
    "check stopped, launcher killed": ("torchrun", {"do": "stopkill", "warm": True},
                                       False),
}  # fmt: skip


@pytest.fixture(scope="module")
def venv(venvs: Callable[..., Venv]) -> Venv:
    return venvs("3.12")


def read_only(guest: Guest) -> tuple[str, ...]:
    """What makes the working directory read-only for the run: its mode
    (0555) where that binds, a read-only bind mount of it in a mount namespace
    of the run's own for root, whom modes do not bind."""
    if os.geteuid() != 0:
        guest.work.chmod(0o555)
        return ()
    if shutil.which("unshare") is None:
        missing("root, and no unshare(1) to mount the folder read-only")
    mount = 'mount --bind -o ro "$0" "$0" && exec "$@"'
    return ("unshare", "-m", "--propagation", "private", "sh", "-c", mount,
            str(guest.work))  # fmt: skip


#: A uid no passwd entry names, inside a user namespace of the run's own.
HOMELESS = 54321


def namespaced(command: tuple[str, ...], what: str) -> tuple[str, ...]:
    """``command`` (an ``unshare`` that runs the rest), once it works here;
    else the test skips, saying ``what`` it would have given."""
    if shutil.which("unshare") is None:
        pytest.skip(f"no unshare(1): no {what}")
    probe = subprocess.run([*command, "true"], capture_output=True, timeout=30)
    if probe.returncode != 0:
        pytest.skip(f"no {what} here: {probe.stderr.decode()[:200]}")
    return command


def new_host_name() -> tuple[str, ...]:
    """What runs the program under a host name of its own (a UTS namespace):
    a pod started again."""
    command = ("unshare", "-u", "sh", "-c", 'hostname "$0" && exec "$@"', "pod-b")
    return namespaced(command, "host name of its own (UTS namespace)")


def homeless() -> tuple[str, ...]:
    """What runs the program as a uid with no home at all (no ``HOME``, no
    passwd entry): a user namespace mapping this user to :data:`HOMELESS`, who
    then owns this user's files."""
    command = ("unshare", "-U", f"--map-user={HOMELESS}", f"--map-group={HOMELESS}")
    return namespaced(command, "uid without a home (user namespace)")


@pytest.mark.timeout(120)
@pytest.mark.parametrize(
    "name",
    list(CASES),
)
def test_the_program_observes_what_it_would_without_the_hook(
    name: str, venv: Venv, tmp_path: Path
) -> None:
    form, options, valued = CASES[name]
    options = dict(options)
    if options.pop("spaced", False):  # its folder, cache and config
        tmp_path = tmp_path / "a world ü"
        tmp_path.mkdir()
    guest = Guest(tmp_path, venv)
    if options.pop("pod", False):  # the cache filled under this host's name
        options["prefix"] = new_host_name()
    if options.pop("readonly", False):
        options["prefix"] = read_only(guest)
    if options.pop("homeless", False):
        options["prefix"] = homeless()
    warm = options.pop("warm", False)
    env = {name: str(guest.root) if value == "TMP" else value
           for name, value in options.pop("env", {}).items()}  # fmt: skip
    runs = {}
    try:
        for on in (False, True):
            if warm:
                guest.run(form, on=on)  # a first launch fills the cache
            runs[on] = guest.run(form, on=on, env=env, **options)
    finally:
        guest.work.chmod(0o755)
    diff = differences(runs[False], runs[True])
    assert not diff, f"what the program observed, hook off and on:\n{diff}"
    records = runs[True]["records"]
    if valued:
        ranks = [r for role, r in records.items() if role in ("main", "worker")]
        assert ranks and all(r["queues"] for r in ranks), runs[True]

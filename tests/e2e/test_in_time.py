"""Issue #31: the value comes before HIP starts, proven in each process.

HIP's runtime, started, holds ``/dev/kfd`` open. This machine has no such
device, so each launch here runs in a mount namespace of its own whose
``/dev`` has one (``/dev/full``, which nothing here opens, bound to the name, and
no ``/dev/full`` beside it): a process that opens it is,
to the package, a process whose HIP has started. The rest of ``/dev`` is the
machine's own devices, bound in; nothing outside the namespace changes."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from rocm_hwq_autoset._decision import CACHED, MAX_LINE, PREFIX, fit

from ..helpers import Venv
from .test_module_launch import EP2, LINE, Launch
from .test_startup import World, start

#: One worker builds the venvs (a session fixture each worker would build again)
#: and runs every test that uses them.
pytestmark = [pytest.mark.e2e, pytest.mark.xdist_group("venvs")]

#: sh -c SETUP sh DEV COMMAND...: a /dev of its own, with a kfd, then COMMAND.
SETUP = r"""
set -e
mount --make-rprivate /
dev=$1; shift
mkdir -p "$dev"
for name in null zero random urandom tty; do
  [ -e "/dev/$name" ] || continue
  touch "$dev/$name"; mount --bind "/dev/$name" "$dev/$name"
done
ln -sfn /proc/self/fd "$dev/fd"
touch "$dev/kfd"; mount --bind /dev/full "$dev/kfd"
mount --rbind "$dev" /dev
exec "$@"
"""

#: A .pth that site runs before ours (names run in order) and that starts HIP:
#: it keeps the device open, as HIP's runtime does.
EARLY = (
    "import os; os.path.exists('/dev/kfd')"
    " and os.environ.setdefault('EARLY_KFD', str(os.open('/dev/kfd', 2)))\n"
)


@pytest.fixture
def namespace(tmp_path: Path) -> tuple[str, ...]:
    """The prefix that runs a command with a /dev that has a kfd."""
    if shutil.which("unshare") is None:
        pytest.skip("needs unshare (util-linux) for a mount namespace")
    prefix = ("unshare", "--mount", "--fork", "sh", "-c", SETUP, "sh",
              str(tmp_path / "dev"))  # fmt: skip
    probe = subprocess.run([*prefix, "sh", "-c", "test -c /dev/kfd"],
                           capture_output=True, text=True)  # fmt: skip
    if probe.returncode != 0:
        pytest.skip(f"no mount namespace here (needs root): {probe.stderr.strip()}")
    return prefix


def warning(during: str, early: str = "") -> str:
    """The warning, as one line of at most ``MAX_LINE`` characters: a long
    path (a deeper temporary folder: xdist's worker's own, CI's) is cut from
    the middle of its message, as every line of the package is."""
    before = f"; start-up files site ran before ours: {early}" if early else ""
    text = (
        f"warning: HIP had started in this process {during},"
        f" before GPU_MAX_HW_QUEUES=8 was set{before}: this process runs with"
        " HIP's default (4)"
    )
    tail = (
        "set GPU_MAX_HW_QUEUES=8 in the job's environment"
        " (rocm-hwq-autoset explain --export), or start HIP later"
    )
    return PREFIX + fit(text, tail, MAX_LINE - len(PREFIX)) + "\n"


@pytest.fixture
def world(tmp_path: Path) -> World:
    (tmp_path / "world").mkdir()
    return World(tmp_path / "world")


def test_a_pth_that_starts_hip_before_ours_is_named(
    venvs: Callable[..., Venv], world: World, namespace: tuple[str, ...]
) -> None:
    """A TOML launch: the value is set (the children get it), and one warning
    says the process itself runs with HIP's default, naming the .pth."""
    venv = venvs("3.12")
    early = venv.site_packages / "aaa_gpu_probe.pth"
    args = ["--job.config_file", str(world.job)]
    seen, err = start(venv, world, args, torch=world.rocm, prefix=namespace)
    assert (seen["queues"], err) == ("8", LINE_TOML)  # the device alone: in time
    early.write_text(EARLY)
    try:
        seen, err = start(venv, world, args, torch=world.rocm, prefix=namespace)
        assert seen["queues"] == "8"
        assert err == LINE_TOML + warning("at interpreter start", str(early))
        seen, err = start(venv, world, args, torch=world.rocm)  # no device
        assert (seen["queues"], err) == ("8", LINE_TOML)
        for rank in ("1", "0"):  # one line per node, as every warning
            seen, err = start(venv, world, args, torch=world.rocm, prefix=namespace,
                              env={"LOCAL_RANK": rank})  # fmt: skip
            assert err == ("" if rank == "1" else LINE_TOML + warning(
                "at interpreter start", str(early)))  # fmt: skip
    finally:
        early.unlink()


@pytest.fixture
def launch(tmp_path: Path, venvs: Callable[..., Venv]) -> Launch:
    return Launch(tmp_path, venvs("3.12"))


def test_a_module_launch_whose_hip_started_before_torch_is_said(
    launch: Launch, namespace: tuple[str, ...]
) -> None:
    """Without the cache the wait ends on ``import torch``; HIP started before
    it with no import to see (a C extension): the warning says when the value
    came. A hit puts the value in place at start-up, before anything."""
    args = ["-m", "torchtitan.train", *EP2]
    seen, err, _ = launch.run(args, prefix=namespace)
    assert (seen["queues"], err) == ("8", LINE)
    hip = {"STANDIN_START_HIP": "/dev/kfd"}
    seen, err, _ = launch.run(args, prefix=namespace, env=hip)
    assert seen["queues"] == "8"
    assert err == LINE[:-1] + CACHED + "\n"
    off = {**hip, "ROCM_HWQ_AUTOSET_CACHE": "0"}
    seen, err, _ = launch.run(args, prefix=namespace, env=off)
    assert seen["queues"] == "8"
    assert err == LINE + warning("as torch was imported")


def test_a_worker_its_launcher_gave_the_value_is_in_time(
    launch: Launch, namespace: tuple[str, ...]
) -> None:
    """torchrun's workers start with the value in their environment: HIP
    reads it whenever it starts, so nothing is said."""
    env = {"STANDIN_START_HIP": "/dev/kfd"}
    seen, err, _ = launch.run(["torchrun", "-m", "torchtitan.train", *EP2],
                              prefix=namespace, env=env)  # fmt: skip
    assert [w["queues"] for w in seen["workers"]] == ["8", "8"]
    assert err == LINE


LINE_TOML = (
    "rocm-hwq-autoset: GPU_MAX_HW_QUEUES=8 (5 GPU streams: compute, all_reduce,"
    " dense_all_gather, reduce_scatter, expert_comm)\n"
)

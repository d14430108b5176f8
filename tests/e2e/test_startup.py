"""The hook, end to end: the built wheel installed by pip into real venvs of
every CPython 3.9-3.13, real interpreters started with real argv.

ROCm is faked the honest way: a ``torch`` package on ``PYTHONPATH`` whose
``version.py`` says ``hip = '...'`` and whose ``__init__.py`` raises, so any
import of torch would fail the launch."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any, Callable

import pytest

from rocm_hwq_autoset._rocm import hip_runtime

from ..helpers import (
    CUDA_VERSION_PY,
    EDITABLE_PYTHONS,
    LINE,
    PYTHONS,
    ROCM_VERSION_PY,
    Venv,
    decided_line,
    fake_torch,
    said,
    set_line,
)
from ..helpers import JOB as JOB_BYTES

#: One worker builds the venvs (a session fixture each worker would build again)
#: and runs every test that uses them.
pytestmark = [pytest.mark.e2e, pytest.mark.xdist_group("venvs")]

INSTALLS = [(v, "wheel") for v in PYTHONS] + [(v, "editable") for v in EDITABLE_PYTHONS]

# The first thing the program does: look at what it was started with.
PROBE = """\
import json, os, sys
print(json.dumps({
    "queues": os.environ.get("GPU_MAX_HW_QUEUES"),
    "origin": os.environ.get("ROCM_HWQ_AUTOSET_ORIGIN"),
    "torch": "torch" in sys.modules,
    "package": "rocm_hwq_autoset" in sys.modules,
    "argv": sys.argv[1:],
}))
"""
# A stand-in for torchrun: starts N workers with torchrun's environment.
LAUNCHER = """\
import json, os, subprocess, sys
n = int(os.environ["NPROC"])
me = json.loads(subprocess.run([sys.executable, "-c", open(os.environ["PROBE"]).read()],
                               capture_output=True, text=True).stdout)
workers = []
for rank in range(n):
    env = dict(os.environ, WORLD_SIZE=str(n), RANK=str(rank), LOCAL_RANK=str(rank))
    args = [sys.executable, "-u", os.environ["PROBE"], *sys.argv[1:]]
    workers.append(subprocess.Popen(args, env=env, stdout=subprocess.PIPE, text=True))
print(json.dumps({"launcher": os.environ.get("GPU_MAX_HW_QUEUES"),
                  "workers": [json.loads(w.communicate()[0]) for w in workers]}))
"""
JOB = JOB_BYTES.decode()


class World:
    """A work folder with a job config, probes and fake torches."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.job = root / "job.toml"
        self.job.write_text(JOB)
        self.probe = root / "probe.py"
        self.probe.write_text(PROBE)
        self.launcher = root / "launcher.py"
        self.launcher.write_text(LAUNCHER)
        self.rocm = fake_torch(root / "rocm", ROCM_VERSION_PY)
        self.cuda = fake_torch(root / "cuda", CUDA_VERSION_PY)


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> World:
    return World(tmp_path_factory.mktemp("world"))


def start(
    venv: Venv,
    world: World,
    args: list[str],
    *,
    form: str = "script",
    torch: Path | None = None,
    env: dict[str, str] | None = None,
    python_flags: tuple[str, ...] = (),
    program: Path | None = None,
    module: str = "probe",
    prefix: tuple[str, ...] = (),
) -> tuple[dict[str, Any], str]:
    """Start ``python <form> args`` (through ``prefix``, a command that runs
    the rest) and return what the probe saw and stderr."""
    full_env = {"PATH": os.environ["PATH"], "PROBE": str(world.probe)}
    if torch is not None:
        full_env["PYTHONPATH"] = str(torch)
    full_env.update(env or {})
    head = {
        "script": [str(program or world.probe)],
        "module": ["-m", module],
        "command": ["-c", PROBE],
    }[form]
    proc = subprocess.run(
        [*prefix, venv.python, *python_flags, *head, *args],
        cwd=world.root, env=full_env, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr
    return json.loads(proc.stdout), proc.stderr


VenvGetter = Callable[..., Venv]


@pytest.fixture(params=INSTALLS, ids=[f"{v}-{k}" for v, k in INSTALLS])
def venv(request: pytest.FixtureRequest, venvs: VenvGetter) -> Venv:
    version, kind = request.param
    return venvs(version, kind)


@pytest.mark.parametrize("form", ["script", "module", "command"])
def test_rocm_launch_sets_the_value_before_user_code(
    venv: Venv, world: World, form: str
) -> None:
    args = ["--job.config_file", str(world.job), "--training.steps", "10"]
    seen, err = start(venv, world, args, form=form, torch=world.rocm)
    assert seen["queues"] == "8"
    assert seen["origin"] == "8 job.config_file"
    assert seen["torch"] is False
    assert seen["argv"] == args
    assert err == LINE


def test_cli_overrides_apply(venv: Venv, world: World) -> None:
    args = [f"--job.config-file={world.job}", "--compile.no-enable-fsdp-ag-rs-overlap",
            "--parallelism.expert_parallel_degree=1"]  # fmt: skip
    seen, err = start(venv, world, args, torch=world.rocm)
    assert seen["queues"] == "4"
    assert err == set_line(4, ("compute", "all_reduce", "fsdp_comm"))


def test_cuda_torch_leaves_it_alone(venv: Venv, world: World) -> None:
    seen, err = start(
        venv, world, ["--job.config_file", str(world.job)], torch=world.cuda
    )
    assert seen["queues"] is None and seen["torch"] is False
    assert err == ""


def test_opt_out_does_not_even_import_the_package(venv: Venv, world: World) -> None:
    seen, err = start(
        venv, world, ["--job.config_file", str(world.job)], torch=world.rocm,
        env={"ROCM_HWQ_AUTOSET": "0"},
    )  # fmt: skip
    assert seen["queues"] is None and seen["package"] is False
    assert err == ""


def test_ordinary_process_does_not_import_the_package(venv: Venv, world: World) -> None:
    seen, err = start(venv, world, ["--training.steps", "10"], torch=world.rocm)
    assert seen["queues"] is None and seen["package"] is False
    assert err == ""


#: Arguments the .pth line's substring filter lets through that make no launch
#: (issue #24: ``python -c pass --module-path x`` imported 6 package modules).
NEAR_MISSES = [
    ["--module-path", "x"],
    ["--modules"],
    ["--job.config_files", "x"],
    ["--job.configuration", "x"],
    ["--module", "m"],  # mypy --module m: no torchtitan on the command line
    ["--module=m"],
]


@pytest.mark.parametrize("args", NEAR_MISSES, ids=" ".join)
def test_a_near_miss_does_not_import_the_package(
    venv: Venv, world: World, args: list[str]
) -> None:
    """The gate module turns it away: no package module is imported, on every
    CPython, in every form of the program."""
    for form in ("script", "module", "command"):
        seen, err = start(venv, world, args, form=form, torch=world.rocm)
        assert seen["package"] is False, (form, args)
        assert (seen["queues"], err) == (None, "")


@pytest.mark.parametrize("form", ["script", "module"])
def test_a_module_launch_of_torchtitan_opens_the_gate(
    venv: Venv, world: World, form: str
) -> None:
    """``--module`` for a torchtitan program opens it: the hook starts the
    evaluation (which this venv, without torchtitan, cannot make: nothing is
    set; the program here ends before its answer). ``python -m
    torchtitan.train`` too, on Python 3.9 (no ``sys.orig_argv``: the hook
    reads /proc/self/cmdline)."""
    titan = world.root / "torchtitan" / "train.py"
    titan.parent.mkdir(exist_ok=True)
    titan.write_text(PROBE)
    seen, err = start(venv, world, ["--module", "llama3", "--config", "c"],
                      torch=world.rocm, program=titan, form=form,
                      module="torchtitan.train",
                      env={"ROCM_HWQ_AUTOSET_LOG": "verbose"})  # fmt: skip
    assert seen["package"] is True and seen["queues"] is None
    assert "Traceback" not in err
    assert "no torchtitan --module/--config" not in err, err  # a launch


@pytest.mark.parametrize("variable", ["LOCAL_RANK", "SLURM_LOCALID"])
@pytest.mark.parametrize("rank", ["0", "3"])
def test_a_warning_is_said_once_per_node(
    venv: Venv, world: World, rank: str, variable: str
) -> None:
    """Like a set value: local rank 0 says it, local rank 3 says nothing (a bad
    config; an explicit value HIP cannot use); torchrun's LOCAL_RANK or srun's
    SLURM_LOCALID alike."""
    bad = world.root / "bad-rank.toml"
    bad.write_text("[parallelism]\ntensor_parallel_degree = 'two'\n")
    seen, err = start(venv, world, ["--job.config_file", str(bad)], torch=world.rocm,
                      env={variable: rank})  # fmt: skip
    assert seen["queues"] is None
    decided = decided_line(["--job.config_file", str(bad)], {variable: rank})
    assert err == decided and (rank == "3" or said(err)[0] == "warning")
    seen, err = start(venv, world, ["--job.config_file", str(world.job)],
                      torch=world.rocm,
                      env={variable: rank, "GPU_MAX_HW_QUEUES": "abc"})  # fmt: skip
    assert seen["queues"] == "abc"
    environ = {variable: rank, "GPU_MAX_HW_QUEUES": "abc"}
    decided = decided_line(["--job.config_file", str(world.job)], environ)
    assert err == decided and (rank == "3" or said(err)[0] == "warning")


def test_explicit_value_survives(venv: Venv, world: World) -> None:
    seen, err = start(
        venv, world, ["--job.config_file", str(world.job)], torch=world.rocm,
        env={"GPU_MAX_HW_QUEUES": "2"},
    )  # fmt: skip
    assert seen["queues"] == "2" and seen["origin"] is None
    assert err == ""


def test_launcher_to_worker_chain(venv: Venv, world: World) -> None:
    tp2 = world.root / "tp2.toml"
    tp2.write_text(JOB.replace("[compile]", "tensor_parallel_degree = 2\n[compile]"))
    seen, err = start(
        venv, world, ["--job.config_file", str(tp2)], torch=world.rocm,
        program=world.launcher, env={"NPROC": "2"},
    )  # fmt: skip
    # The launcher has no WORLD_SIZE: dp_shard -1 counts as active (6 lanes).
    assert seen["launcher"] == "8"
    # Workers know WORLD_SIZE=2: dp_shard = 2 // tp 2 = 1, no FSDP lanes.
    assert [w["queues"] for w in seen["workers"]] == ["4", "4"]
    assert [w["origin"] for w in seen["workers"]] == ["4 job.config_file"] * 2
    assert not any(w["torch"] for w in seen["workers"])
    six = ("compute", "all_reduce", "dense_all_gather", "reduce_scatter",
           "expert_comm", "tp_all_gather")  # fmt: skip
    four = ("compute", "all_reduce", "expert_comm", "tp_all_gather")
    assert err == set_line(8, six) + set_line(4, four)


def test_site_packages_seen_twice(
    venvs: VenvGetter, world: World, tmp_path: Path
) -> None:
    """A venv listing its site-packages twice (``lib`` and a ``lib64`` link)
    runs the .pth line twice in one process: one value, one line."""
    venv = venvs("3.12")
    twice = venv.site_packages / "zz_second_listing.pth"
    lib64 = venv.path / "lib64"
    if not lib64.exists():
        lib64.symlink_to("lib")
    other = lib64 / venv.site_packages.relative_to(venv.path / "lib")
    twice.write_text(
        f"import site, sys; p = {str(other)!r}; p in sys.path or site.addsitedir(p)\n"
    )
    try:
        code = "import sys; print(sum(p.endswith('site-packages') for p in sys.path))"
        proc = subprocess.run([venv.python, "-c", code], capture_output=True, text=True)
        assert proc.stdout.strip() == "2"  # the second listing is real
        seen, err = start(
            venv, world, ["--job.config_file", str(world.job)], torch=world.rocm
        )
        assert seen["queues"] == "8"
        assert err == LINE
    finally:
        twice.unlink()


def test_bad_config_is_one_warning(venv: Venv, world: World) -> None:
    bad = world.root / "bad.toml"
    bad.write_text("[parallelism]\ntensor_parallel_degree = 'two'\n")
    seen, err = start(venv, world, ["--job.config_file", str(bad)], torch=world.rocm)
    assert seen["queues"] is None
    assert err == decided_line(["--job.config_file", str(bad)])
    assert said(err)[0] == "warning" and said(err)[1].startswith(f"{bad}: ")


def test_isolated_mode_still_runs_and_no_site_does_not(
    venv: Venv, world: World
) -> None:
    args = ["--job.config_file", str(world.job)]
    seen, _ = start(
        venv, world, args, form="script", torch=world.rocm, python_flags=("-I",)
    )
    # -I ignores PYTHONPATH, so there is no fake torch: ROCm is decided by the
    # HIP runtime (under /opt/rocm, where this machine may have one); "force"
    # shows the hook did run.
    assert seen["queues"] == ("8" if hip_runtime({}) else None)
    seen, err = start(
        venv, world, args, torch=world.rocm, python_flags=("-I",),
        env={"ROCM_HWQ_AUTOSET": "force"},
    )  # fmt: skip
    assert seen["queues"] == "8" and err == LINE
    seen, err = start(venv, world, args, torch=world.rocm, python_flags=("-S",))
    assert seen["queues"] is None and err == ""  # documented limit: -S skips site


#: Python 3.15's ``site`` (PEP 829, ``site.StartupState``) for one site folder,
#: run with ``-S``: every ``.pth`` import line but those of a ``<name>.pth``
#: with a ``<name>.start`` beside it, then every ``.start`` entry point; then
#: the program.
SITE_3_15 = """\
import os, pkgutil, sys
folder = sys.argv.pop(1)
sys.path.append(folder)
names = sorted(os.listdir(folder))
for name in names:
    if name.endswith(".pth") and name[:-4] + ".start" not in names:
        for line in open(os.path.join(folder, name)):
            if line.startswith(("import ", "import\\t")):
                exec(line)
for name in names:
    if name.endswith(".start"):
        for line in open(os.path.join(folder, name)):
            if line.strip() and not line.startswith("#"):
                pkgutil.resolve_name(line.strip())()
"""


def test_pep_829_start_order(venv: Venv, world: World, tmp_path: Path) -> None:
    """What Python 3.15 does with ``rocm_hwq_autoset.start``: our ``.pth``
    line does not run (a ``.start`` beside it), every other ``.pth`` import
    line runs first, whatever its name (``zz_``: after ours on 3.14), then our
    entry point sets the value before the program."""
    before = venv.site_packages / "zz_before_ours.pth"
    before.write_text(
        "import os; os.environ['ZZ_SAW'] = os.environ.get('GPU_MAX_HW_QUEUES', '-')\n"
    )
    try:
        env = {"PATH": os.environ["PATH"], "PYTHONPATH": str(world.rocm)}
        code = SITE_3_15 + PROBE + "print(os.environ['ZZ_SAW'])\n"
        proc = subprocess.run(
            [venv.python, "-S", "-c", code, str(venv.site_packages),
             "--job.config_file", str(world.job)],
            env=env, capture_output=True, text=True, timeout=60,
        )  # fmt: skip
    finally:
        before.unlink()
    seen, saw = proc.stdout.splitlines()
    assert (json.loads(seen)["queues"], saw) == ("8", "-")
    assert proc.stderr == LINE


#: The package modules a TOML launch imports: the gate and hook (the package),
#: the decision, reading the inputs, the model, detection. Each costs ~0.3 M
#: instructions before it does anything (benchmarks/startup_instructions.py).
TOML_LAUNCH_MODULES = [
    "rocm_hwq_autoset", "rocm_hwq_autoset._argv", "rocm_hwq_autoset._config",
    "rocm_hwq_autoset._decision", "rocm_hwq_autoset._environ",
    "rocm_hwq_autoset._hook", "rocm_hwq_autoset._model", "rocm_hwq_autoset._rocm",
]  # fmt: skip


@pytest.mark.e2e
def test_a_toml_launch_imports_only_what_the_decision_needs(
    venvs: Callable[..., Venv], tmp_path: Path
) -> None:
    """torchtitan's own keys and flags beside ours are known without the
    search for typos and unknown names (``_unknown``), which a name neither
    has brings in."""
    venv = venvs("3.11")
    job = tmp_path / "job.toml"
    rocm = fake_torch(tmp_path / "rocm", ROCM_VERSION_PY)
    probe = (
        "import json, os, sys; print(json.dumps([os.environ['GPU_MAX_HW_QUEUES'],"
        " sorted(m for m in sys.modules if m.split('.')[0] == 'rocm_hwq_autoset')]))"
    )
    flags = ["--training.steps", "10", "--checkpoint.no-enable", "--compile.enable"]
    for extra, imported in ((b"[training]\nsteps = 1\n", []),
                            (b"[training]\nstepz = 1\n",
                             ["rocm_hwq_autoset._unknown"])):  # fmt: skip
        job.write_bytes(JOB_BYTES + extra)
        proc = subprocess.run(
            [venv.python, "-c", probe, "--job.config_file", str(job), *flags],
            env={"PATH": os.environ["PATH"], "PYTHONPATH": str(rocm)},
            capture_output=True, text=True, check=True,
        )  # fmt: skip
        modules = sorted(TOML_LAUNCH_MODULES + imported)
        assert json.loads(proc.stdout) == ["8", modules], extra

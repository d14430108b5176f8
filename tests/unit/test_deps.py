"""What a ``--module`` evaluation depended on (``_deps``): what the recorder
notes, and the rule of what counts, each side of it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import sysconfig
import time
from pathlib import Path
from typing import Any

import pytest

from rocm_hwq_autoset._evaluation.deps import NOT_CONFIG, check, counts

from ..helpers import child_env

ROOT = Path(__file__).resolve().parents[2]

#: An evaluation in miniature, recorded: it imports a package of the working
#: directory that imports a helper, and a module of the package; opens a data
#: file; lists a folder; reads variables by name and walks the environment;
#: writes a file; reads /proc, lists /proc, /sys, /dev and a __pycache__ (as
#: pkgutil.iter_modules does); reads a file of the cache.
EVALUATION = """
import json, os, sys
sys.path.insert(0, os.getcwd())
from rocm_hwq_autoset._evaluation.deps import Recorder
recorder = Recorder()
recorder.start()
import importlib
importlib.import_module("my_recipes")
importlib.import_module("my_recipes.registry")
try:
    import not_there_yet
except ImportError:
    pass
open("size.txt").read()
try:
    open("missing.txt")
except OSError:
    pass
os.listdir("checkpoints")
for folder in ("/proc", "/sys", "/dev", "my_recipes/__pycache__"):
    os.listdir(folder)
open("cache/notes.json").read()
os.environ.get("MY_DEGREE")
os.environ.get("RANK")
"SLURM_NNODES" in os.environ
dict(os.environ)  # a library walking the whole environment
for key, value in os.environ.items():
    pass
os.environ["SET_HERE"] = "1"
os.environ.get("SET_HERE")
del os.environ["UNRELATED"]  # removed by the evaluation, then looked for
os.environ.get("UNRELATED")
with open("out.log", "w") as out:
    out.write("x")
open("/proc/self/status").read()
print(json.dumps(recorder.deps(exclude=os.path.abspath("cache"))))
"""


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    work = tmp_path / "work"
    (work / "my_recipes").mkdir(parents=True)
    (work / "my_recipes" / "__init__.py").write_text("import my_helper\n")
    (work / "my_recipes" / "registry.py").write_text("")
    (work / "my_helper.py").write_text("DEGREE = 2\n")
    (work / "size.txt").write_text("8\n")
    (work / "checkpoints").mkdir()
    (work / "checkpoints" / "step-1").write_text("")
    (work / "cache").mkdir()
    (work / "cache" / "notes.json").write_text("{}")
    return work


def user_site(workdir: Path) -> Path:
    """The user site folder of the recorded interpreter (none unless made)."""
    base = str(workdir.parent / "userbase")
    return Path(sysconfig.get_path("purelib", f"{os.name}_user", {"userbase": base}))


def record(workdir: Path, **env: str) -> dict[str, Any]:
    environ = child_env({"PATH": os.environ["PATH"], "PYTHONPATH": str(ROOT),
                         "MY_DEGREE": "2", "SLURM_NNODES": "4", "RANK": "3",
                         "SLURM_JOB_ID": "77", "UNRELATED": "x",
                         "PYTHONUSERBASE": str(workdir.parent / "userbase"),
                         **env})  # fmt: skip
    out = subprocess.run([sys.executable, "-c", EVALUATION], cwd=workdir, env=environ,
                         capture_output=True, text=True, check=True)  # fmt: skip
    deps: dict[str, Any] = json.loads(out.stdout)
    return deps


@pytest.mark.parametrize("modules", ["from source", "from cached bytecode"])
def test_what_is_recorded(workdir: Path, modules: str) -> None:
    site_folder = user_site(workdir)
    site_folder.mkdir(parents=True)
    (site_folder / "extra.pth").write_text("")  # shapes sys.path: counts
    (site_folder / "notes.txt").write_text("")
    if modules == "from cached bytecode":
        record(workdir)  # writes the __pycache__ the next one reads
    deps = record(workdir)
    files = {path: stamp for path, *stamp in deps["files"]}
    assert str(workdir / "my_recipes" / "__init__.py") in files  # imported
    assert str(workdir / "my_helper.py") in files  # imported by it
    assert str(workdir / "size.txt") in files  # opened
    assert files[str(workdir / "missing.txt")] == [None, None]  # must stay absent
    assert str(workdir / "out.log") not in files  # written: an output
    assert str(site_folder / "extra.pth") in files
    assert str(site_folder / "notes.txt") not in files
    assert not any(p.startswith("/proc/") for p in files)
    assert not any(p.endswith(".pyc") for p in files)
    assert not any(p.startswith(str(workdir / "cache")) for p in files)
    searched = {path: (names, entries) for path, _, names, entries in deps["dirs"]}
    names, entries = searched[str(workdir)]
    assert {"my_recipes", "my_helper", "not_there_yet"} <= set(names)
    assert entries == ["my_helper.py", "my_recipes"]
    # A module of a package is looked for in the package's folder only.
    assert searched[str(workdir / "my_recipes")] == (["registry"], ["registry.py"])
    assert "not_there_yet" in searched[str(ROOT)][0]  # PYTHONPATH's folder too
    assert [path for path, _, _ in deps["lists"]] == [str(workdir / "checkpoints")]
    # By name only, and only what a config could use.
    assert deps["env"] == {"MY_DEGREE": "2", "SLURM_NNODES": "4"}


def fresh(deps: dict[str, Any], environ: dict[str, str]) -> str | None:
    return check(deps, environ)


ENV = {"MY_DEGREE": "2", "SLURM_NNODES": "4", "RANK": "3", "SLURM_JOB_ID": "77"}


def test_nothing_changed(workdir: Path) -> None:
    assert check(record(workdir), ENV) is None


@pytest.mark.parametrize(
    "change",
    [
        "new job and rank",
        "new log file",
        "output rewritten",
        "pycache",
        "unrelated variable",
        "a file came and went in a listed folder",
        "files named like the origin of built-in and frozen modules",
    ],
)
def test_what_does_not_invalidate(workdir: Path, change: str) -> None:
    deps = record(workdir)
    environ = dict(ENV)
    if change == "new job and rank":
        environ.update(RANK="0", SLURM_JOB_ID="78", LOCAL_RANK="0", PWD="/x")
    elif change == "new log file":
        (workdir / "slurm-78.out").write_text("log")
    elif change == "output rewritten":
        (workdir / "out.log").write_text("yy")
    elif change == "a file came and went in a listed folder":
        (workdir / "checkpoints" / "tmp").write_text("")
        (workdir / "checkpoints" / "tmp").unlink()
        _later(workdir / "checkpoints")  # its time changed, its entries did not
    elif change == "pycache":
        (workdir / "__pycache__").mkdir(exist_ok=True)
        (workdir / "__pycache__" / "my_helper.cpython-311.pyc").write_text("")
        (workdir / "my_recipes" / "__pycache__" / "x.cpython-311.pyc").write_text("")
        _later(workdir / "my_recipes" / "__pycache__")
    elif change == "files named like the origin of built-in and frozen modules":
        (workdir / "built-in").write_text("")
        (workdir / "frozen").write_text("")
    elif change == "unrelated variable":
        environ["UNRELATED"] = "y"
    assert check(deps, environ) is None


def _later(path: Path) -> None:
    """Touch ``path`` with a clearly newer modification time."""
    future = time.time() + 10
    os.utime(path, (future, future))


@pytest.mark.parametrize(
    ("change", "said"),
    [
        ("a variable it read", "MY_DEGREE changed"),
        ("a variable it found unset", "SLURM_NNODES changed"),
        ("the user's module", "my_recipes/__init__.py changed"),
        ("a helper it imports", "my_helper.py changed"),
        ("a file it read", "size.txt changed"),
        ("a file it missed now exists", "missing.txt changed"),
        ("a module that was missing", "a module appeared or went in"),
        ("a module now shadowed", "a module appeared or went in"),
        ("a .pth file in a folder it searched", "a module appeared or went in"),
        ("a listed folder gained an entry", "checkpoints gained or lost an entry"),
    ],
)
def test_what_invalidates(workdir: Path, change: str, said: str) -> None:
    deps = record(workdir)
    environ = dict(ENV)
    if change == "a variable it read":
        environ["MY_DEGREE"] = "4"
    elif change == "a variable it found unset":
        environ.pop("SLURM_NNODES")
    elif change == "the user's module":
        (workdir / "my_recipes" / "__init__.py").write_text("import my_helper  \n")
    elif change == "a helper it imports":
        (workdir / "my_helper.py").write_text("DEGREE = 4\n")
        _later(workdir / "my_helper.py")
    elif change == "a file it read":
        _later(workdir / "size.txt")
    elif change == "a file it missed now exists":
        (workdir / "missing.txt").write_text("")
    elif change == "a module that was missing":
        (workdir / "not_there_yet.py").write_text("")
    elif change == "a module now shadowed":
        (workdir / "my_helper").mkdir()
    elif change == "a .pth file in a folder it searched":
        (workdir / "extra.pth").write_text("")
    else:
        (workdir / "checkpoints" / "step-2").write_text("")
    found = check(deps, environ)
    assert found is not None and said in found


def test_a_corrupt_record_raises_for_the_cache_to_ignore() -> None:
    for bad in ({}, {"env": [], "files": [], "dirs": [], "lists": []},
                {"env": {}, "files": [["a"]], "dirs": [], "lists": []}):  # fmt: skip
        with pytest.raises((KeyError, TypeError, ValueError, AttributeError)):
            check(bad, {})


@pytest.mark.parametrize(
    "name", ["RANK", "LOCAL_RANK", "SLURM_JOB_ID", "SLURM_PROCID", "PWD", "OLDPWD",
             "SHLVL", "_", "TERM", "TORCHELASTIC_RUN_ID", "SSH_CLIENT",
             "ROCM_HWQ_AUTOSET_TIMEOUT", "MASTER_PORT"],
)  # fmt: skip
def test_per_rank_per_job_and_shell_variables_never_count(name: str) -> None:
    assert not counts(name)


@pytest.mark.parametrize(
    "name", ["MY_DEGREE", "SLURM_NNODES", "SLURM_JOB_NUM_NODES", "WORLD_SIZE",
             "LOCAL_WORLD_SIZE", "NGPU", "HOME", "TORCHINDUCTOR_CACHE_DIR"],
)  # fmt: skip
def test_variables_a_config_could_use_count(name: str) -> None:
    assert counts(name) and name not in NOT_CONFIG

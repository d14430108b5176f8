"""``doctor`` in real venvs: healthy, and broken in the ways installs break."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from typing import Callable

import pytest

from rocm_hwq_autoset._cli._common import AS_IF_ON_ROCM
from rocm_hwq_autoset._cli.doctor import COLUMN, start_up_check
from rocm_hwq_autoset._decision import SKIP, Outcome
from rocm_hwq_autoset._environ import NAME, PTH, QUEUES, QueuesSetting

from ..helpers import (
    CUDA_VERSION_PY,
    ROCM_VERSION_PY,
    Venv,
    fake_torch,
    require_index,
    require_python,
)

#: One worker builds the venvs (a session fixture each worker would build again)
#: and runs every test that uses them.
pytestmark = [pytest.mark.e2e, pytest.mark.xdist_group("venvs")]
#: The topic of a launch's row.
LAUNCH = "for that launch"
JOB = "[model]\nname = 'deepseek_v3'\n[parallelism]\nexpert_parallel_degree = 2\n"


@pytest.fixture(scope="module")
def venv(venvs: Callable[..., Venv]) -> Venv:
    return venvs("3.11")


def doctor(
    python: str,
    *args: str,
    env: dict[str, str] | None = None,
    flags: tuple[str, ...] = (),
) -> tuple[int, str]:
    """Run doctor away from the checkout, so ``-m`` cannot pick up its sources,
    with ``python``'s folder first on ``PATH``, as in its activated venv (the
    ``python`` that trains, which doctor checks too)."""
    full_env = {"PATH": os.environ["PATH"], "NO_COLOR": "1", **(env or {})}
    full_env["PATH"] = os.pathsep.join([os.path.dirname(python), full_env["PATH"]])
    proc = subprocess.run(
        [python, *flags, "-m", "rocm_hwq_autoset", "doctor", *args],
        capture_output=True, text=True, env=full_env, timeout=60, cwd="/",
    )  # fmt: skip
    assert "Traceback" not in proc.stderr
    return proc.returncode, proc.stdout


def fits_80_columns(out: str) -> bool:
    """Every line fits 80 columns, or holds one word too long to break (a path)
    in its detail column."""
    return all(len(line) <= 80 or " " not in line[29:].strip()
               for line in out.splitlines())  # fmt: skip


def rows(out: str) -> dict[str, tuple[str, str]]:
    """Doctor's rows by topic: each status, and its detail whole again (the
    wording of each: tests/golden/cli/doctor.txt)."""
    found: dict[str, tuple[str, str]] = {}
    topic = ""
    for line in out.split("\n\n")[0].splitlines():
        if line.startswith(" "):
            status, detail = found[topic]
            found[topic] = (status, f"{detail} {line.strip()}")
        else:
            topic = line[6:COLUMN].strip()
            found[topic] = (line.split()[0], line[COLUMN:].strip())
    return found


def summary(out: str) -> str:
    """The summary after the rows, on one line."""
    return " ".join(out.split("\n\n")[-1].split())


def test_healthy(venv: Venv) -> None:
    code, out = doctor(venv.python)
    assert code == 0, out
    pth = f"{venv.site_packages}/rocm_hwq_autoset.pth"
    assert f"ok    rocm_hwq_autoset.pth   {pth}\n" in out
    assert "rocm_hwq_autoset.start" in out
    assert out.endswith("\nhealthy\n")
    assert fits_80_columns(out)


def test_console_script(venv: Venv, tmp_path: Path) -> None:
    """From its venv, activated (its folder first on ``PATH``): healthy. With
    another venv activated, the ``python`` that would train is that one,
    without the hook: unhealthy (issue #37: was "healthy", for this venv)."""
    other = tmp_path / "other"
    subprocess.run([venv.python, "-m", "venv", "--without-pip", str(other)],
                   check=True, timeout=60)  # fmt: skip
    for bin_dir, status in [(venv.path / "bin", 0), (other / "bin", 1)]:
        path = os.pathsep.join([str(bin_dir), os.environ["PATH"]])
        proc = subprocess.run(
            [str(venv.path / "bin" / "rocm-hwq-autoset"), "doctor"],
            capture_output=True, text=True, env={"PATH": path},
        )  # fmt: skip
        assert proc.returncode == status and "rocm_hwq_autoset.pth" in proc.stdout


def test_for_a_rocm_launch(venv: Venv, tmp_path: Path) -> None:
    job = tmp_path / "job.toml"
    job.write_text(JOB)
    rocm = fake_torch(tmp_path / "rocm", ROCM_VERSION_PY)
    code, out = doctor(venv.python, "--", "--job.config_file", str(job),
                       "--compile.enable_fsdp_ag_rs_overlap",
                       env={"PYTHONPATH": str(rocm)})  # fmt: skip
    assert code == 0, out
    found = rows(out)
    assert found["ROCm"][0] == "ok" and "'6.2.41133-dd7f95766'" in found["ROCm"][1]
    # The doctor's own argv named the config: the hook ran in it at start-up,
    # and stayed out of the package's own command (Python >= 3.10 sees it).
    own = start_up_check(Outcome(SKIP, f"{NAME}'s own command"))
    assert found["this process"] == (own.status, own.detail)
    assert found[QUEUES] == ("ok", QueuesSetting({}).describe())
    assert found[LAUNCH] == ("ok", f"would set {QUEUES}=8")
    code, out = doctor(venv.python, "--", "--job.config_file", str(job),
                       env={"PYTHONPATH": str(rocm),
                            "GPU_MAX_HW_QUEUES": "2"})  # fmt: skip
    assert code == 0
    assert rows(out)[QUEUES] == ("ok", QueuesSetting({QUEUES: "2"}).describe())


def test_bad_config_is_unhealthy(venv: Venv, tmp_path: Path) -> None:
    rocm = fake_torch(tmp_path / "rocm", ROCM_VERSION_PY)
    code, out = doctor(venv.python, "--", "--job.config_file", "/nonexistent.toml",
                       env={"PYTHONPATH": str(rocm)})  # fmt: skip
    status, detail = rows(out)[LAUNCH]
    assert (code, status) == (1, "FAIL")
    assert detail.startswith("warning: /nonexistent.toml: ")
    assert summary(out) == f"unhealthy: {LAUNCH}: {detail}"


def test_off_rocm_a_config_the_hook_would_refuse_is_unhealthy(
    venv: Venv, tmp_path: Path
) -> None:
    """``doctor -- --job.config_file bom.toml`` on a login node: checked as the
    hook would on the ROCm node, where it refuses the file."""
    bom = tmp_path / "bom.toml"
    bom.write_bytes(b"\xef\xbb\xbf" + JOB.encode())
    cuda = fake_torch(tmp_path / "cuda", CUDA_VERSION_PY)
    code, out = doctor(venv.python, "--", "--job.config_file", str(bom),
                       env={"PYTHONPATH": str(cuda)})  # fmt: skip
    status, detail = rows(out)[LAUNCH]
    assert (code, status) == (1, "FAIL"), out
    assert detail.startswith(f"warning: {bom}: invalid TOML")
    assert detail.endswith(f"({AS_IF_ON_ROCM})")
    assert summary(out) == f"unhealthy: {LAUNCH}: {detail}"


def test_pth_removed(venv: Venv, wheelhouse: Path) -> None:
    pth = venv.site_packages / "rocm_hwq_autoset.pth"
    saved = pth.read_bytes()
    pth.unlink()
    try:
        code, out = doctor(venv.python)
    finally:
        pth.write_bytes(saved)
    status, detail = rows(out)[PTH]
    assert (code, status) == (1, "FAIL")
    wheel = next(wheelhouse.glob("rocm_hwq_autoset-*.whl"))
    # Was: "in no site directory ...: not installed", while pip lists it.
    assert detail.startswith(f"{pth} is missing, ") and "(pip list" in detail
    reinstall = [venv.python, "-m", "pip", "install", "--force-reinstall",
                 "--no-deps", str(wheel)]  # fmt: skip
    assert detail.split(": ")[-1].split() == reinstall
    assert summary(out) == f"unhealthy: {PTH}: {detail}"


def test_pip_install_target_is_no_site_directory(
    venv: Venv, wheelhouse: Path, tmp_path: Path
) -> None:
    target = tmp_path / "target"
    wheel = next(wheelhouse.glob("rocm_hwq_autoset-*.whl"))
    subprocess.run(
        [venv.python, "-m", "pip", "install", "--no-index", "--no-deps",
         "--target", str(target), str(wheel)],
        check=True, capture_output=True,
    )  # fmt: skip
    bare = tmp_path / "bare"
    subprocess.run([venv.python, "-m", "venv", "--without-pip", str(bare)], check=True)
    code, out = doctor(str(bare / "bin" / "python"), env={"PYTHONPATH": str(target)})
    status, detail = rows(out)[PTH]
    assert (code, status) == (1, "FAIL")
    assert detail.startswith(f"{target}/{PTH}: ") and "sys.path" in detail.split()
    assert "--target?);" in detail.split()


def test_no_site(venv: Venv) -> None:
    code, out = doctor(
        venv.python, flags=("-S",), env={"PYTHONPATH": str(venv.site_packages)}
    )
    assert code == 1
    status, detail = rows(out)["site"]
    assert status == "FAIL" and detail.startswith("python -S: ")
    assert out.count("FAIL") == 1, out  # not also "pip install --target"
    assert "--target" not in out


def test_explicit_value_that_hip_cannot_use_fails(venv: Venv) -> None:
    code, out = doctor(venv.python, env={"GPU_MAX_HW_QUEUES": "abc"})
    assert code == 1
    assert "FAIL  GPU_MAX_HW_QUEUES" in out
    assert rows(out)[QUEUES] == ("FAIL", QueuesSetting({QUEUES: "abc"}).describe())


def test_user_site_turned_off(wheelhouse: Path, tmp_path: Path) -> None:
    """Installed with ``pip install --user``, run with ``-s``: the ``.pth`` is
    in a site directory Python skips, and the ``.start`` file is not "ok"."""
    python = require_python("3.11")
    wheel = next(wheelhouse.glob("rocm_hwq_autoset-*.whl"))
    env = {"PATH": os.environ["PATH"], "PYTHONUSERBASE": str(tmp_path / "user"),
           "PIP_CONFIG_FILE": os.devnull}  # fmt: skip
    subprocess.run(
        [python, "-m", "pip", "install", "--user", "--no-index", "--no-deps",
         "--no-warn-script-location", str(wheel)],
        check=True, capture_output=True, env=env,
    )  # fmt: skip
    user_site = subprocess.run(
        [python, "-c", "import site; print(site.getusersitepackages())"],
        capture_output=True, text=True, env=env, check=True,
    ).stdout.strip()  # fmt: skip
    code, out = doctor(python, flags=("-s",), env={**env, "PYTHONPATH": user_site})
    assert code == 1
    pth = f"{user_site}/rocm_hwq_autoset.pth"
    status, detail = rows(out)[PTH]
    assert status == "FAIL" and detail.startswith(f"{pth} ")
    assert "(-s," in detail.split() and "PYTHONNOUSERSITE)" in detail.split()
    assert "ok    rocm_hwq_autoset.start" not in out
    assert fits_80_columns(out) and pth in out  # the path whole, on one line


# An editable install of a checkout (hatchling's): the gate module and the
# .pth copied into site-packages, the package left in the checkout.

#: What a build of the package needs from the checkout.
CHECKOUT_FILES = ("pyproject.toml", "README.md", "LICENSE", "rocm_hwq_autoset.pth",
                  "rocm_hwq_autoset.start", "_rocm_hwq_autoset_gate.py",
                  "_rocm_hwq_autoset_cmdline.py", "_rocm_hwq_autoset_cli.py",
                  "_rocm_hwq_autoset_reinstall.py")  # fmt: skip


@pytest.fixture(scope="module")
def editable(wheelhouse: Path, tmp_path_factory: pytest.TempPathFactory) -> Venv:
    """``pip install -e CHECKOUT`` of a copy of this checkout (the tests
    remove its files), into a venv of Python 3.11."""
    from ..helpers import ROOT

    where = tmp_path_factory.mktemp("editable")
    checkout = where / "checkout"
    shutil.copytree(ROOT / "rocm_hwq_autoset", checkout / "rocm_hwq_autoset",
                    ignore=shutil.ignore_patterns("__pycache__"))  # fmt: skip
    for name in CHECKOUT_FILES:
        shutil.copy(ROOT / name, checkout / name)
    venv = Venv(where / "venv")
    subprocess.run([require_python("3.11"), "-m", "venv", str(venv.path)], check=True)
    proc = subprocess.run(
        [venv.python, "-m", "pip", "install", "--find-links", str(wheelhouse),
         "--editable", str(checkout)],
        capture_output=True, text=True,
        env={**os.environ, "PIP_DISABLE_PIP_VERSION_CHECK": "1"},
    )  # fmt: skip
    if proc.returncode != 0:
        require_index(proc.stdout + proc.stderr)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return venv


def _checkout(venv: Venv) -> Path:
    return venv.path.parent / "checkout"


def reinstall_editable(venv: Venv) -> list[str]:
    """The command doctor gives to install the editable checkout again."""
    return [venv.python, "-m", "pip", "install", "-e", str(_checkout(venv))]


def test_an_editable_install_is_healthy(editable: Venv) -> None:
    """Was: "_rocm_hwq_autoset_gate ... comes first on sys.path, not the one
    beside ...", unhealthy, on an install that works."""
    gate = editable.site_packages / "_rocm_hwq_autoset_gate.py"
    assert gate.is_file() and not (editable.site_packages / "rocm_hwq_autoset").exists()
    code, out = doctor(editable.python)
    assert code == 0, out
    assert f"ok    _rocm_hwq_autoset_gate {gate}" in out
    assert out.endswith("\nhealthy\n")


def test_an_editable_install_still_fails_for_a_shadowing_gate(
    editable: Venv, tmp_path: Path
) -> None:
    (tmp_path / "_rocm_hwq_autoset_gate.py").write_text("def start(): pass\n")
    code, out = doctor(editable.python, env={"PYTHONPATH": str(tmp_path)})
    status, detail = rows(out)["_rocm_hwq_autoset_gate"]
    assert (code, status) == (1, "FAIL")
    assert detail.startswith(f"{tmp_path}/_rocm_hwq_autoset_gate.py ")
    assert "sys.path," in detail.split()


def test_an_editable_install_whose_checkout_changed_its_gate(editable: Venv) -> None:
    """The copy in site-packages is what start-up runs: reinstall."""
    gate = _checkout(editable) / "_rocm_hwq_autoset_gate.py"
    saved = gate.read_bytes()
    gate.write_bytes(saved + b"# edited\n")
    try:
        code, out = doctor(editable.python)
    finally:
        gate.write_bytes(saved)
    status, detail = rows(out)["_rocm_hwq_autoset_gate"]
    assert (code, status) == (1, "FAIL")
    installed = editable.site_packages / "_rocm_hwq_autoset_gate.py"
    assert detail.startswith(f"{installed} is not {gate} ")
    assert detail.split(": ")[-1].split() == reinstall_editable(editable)


def test_an_editable_install_without_its_package(
    editable: Venv, tmp_path: Path
) -> None:
    """``rm -rf checkout/rocm_hwq_autoset``. Was: a launch said nothing even
    in verbose mode, and the console script was a ModuleNotFoundError
    traceback. The line names the checkout and the command that reinstalls
    it (its wording: tests/unit/test_gate.py)."""
    package = _checkout(editable) / "rocm_hwq_autoset"
    aside = tmp_path / "aside"
    package.rename(aside)
    try:
        script = str(editable.path / "bin" / "rocm-hwq-autoset")
        env = {"PATH": os.environ["PATH"]}
        said = subprocess.run([script, "doctor"], capture_output=True, text=True,
                              env=env, cwd="/")  # fmt: skip
        job = tmp_path / "job.toml"
        job.write_text(JOB)
        launch = [editable.python, "-c", "print('trained')", "--job.config_file",
                  str(job)]  # fmt: skip
        levels = ("verbose", "")
        launches = [subprocess.run(launch, capture_output=True, text=True, cwd="/",
                                   env={**env, "ROCM_HWQ_AUTOSET_LOG": level})
                    for level in levels]  # fmt: skip
    finally:
        aside.rename(package)
    assert (said.returncode, said.stdout) == (2, "")
    assert said.stderr.startswith("rocm-hwq-autoset: error: ")
    missing = said.stderr[len("rocm-hwq-autoset: error: ") : -1]
    checkout = str(_checkout(editable))
    assert missing.count(checkout) == 2  # the install's and the command's
    assert missing.split(": ")[-1].split() == reinstall_editable(editable)
    assert "(ModuleNotFoundError:" in missing.split()
    verbose, default = launches
    assert (verbose.returncode, verbose.stdout) == (0, "trained\n")
    assert (
        verbose.stderr == f"rocm-hwq-autoset: warning: {missing}; {QUEUES} left unset\n"
    )
    assert (default.returncode, default.stdout, default.stderr) == (0, "trained\n", "")


def test_an_editable_install_without_its_pth(editable: Venv) -> None:
    pth = editable.site_packages / "rocm_hwq_autoset.pth"
    saved = pth.read_bytes()
    pth.unlink()
    try:
        code, out = doctor(editable.python)
    finally:
        pth.write_bytes(saved)
    status, detail = rows(out)[PTH]
    assert (code, status) == (1, "FAIL")
    assert detail.startswith(f"{pth} is missing, ")
    assert detail.split(": ")[-1].split() == reinstall_editable(editable)
    assert summary(out) == f"unhealthy: {PTH}: {detail}"


def test_a_read_only_cache_on_a_real_mount(venv: Venv, tmp_path: Path) -> None:
    """A read-only bind mount in a mount namespace of its own (root only):
    the kernel refuses the write as a read-only home would."""
    if shutil.which("unshare") is None:
        pytest.skip("needs unshare (util-linux) for a mount namespace")
    cache = tmp_path / "cache"
    cache.mkdir(mode=0o700)
    script = ('mount --bind "$1" "$1" && mount -o remount,bind,ro "$1"'
              ' && shift && exec "$@"')  # fmt: skip
    probe = subprocess.run(["unshare", "--mount", "sh", "-c", script, "sh", str(cache),
                            "true"], capture_output=True, text=True)  # fmt: skip
    if probe.returncode != 0:
        pytest.skip(f"no mount namespace here (needs root): {probe.stderr.strip()}")
    proc = subprocess.run(
        ["unshare", "--mount", "sh", "-c", script, "sh", str(cache), venv.python,
         "-m", "rocm_hwq_autoset", "doctor"],
        capture_output=True, text=True, timeout=60, cwd="/",
        env={"PATH": os.environ["PATH"], "NO_COLOR": "1",
             "ROCM_HWQ_AUTOSET_CACHE_DIR": str(cache)},
    )  # fmt: skip
    status, detail = rows(proc.stdout)["cache"]
    assert (status, proc.returncode) == ("FAIL", 1), proc.stdout
    assert detail.startswith(f"{cache}: read-only, ") and " 0 entries, " in detail
    _, out = doctor(venv.python, env={"ROCM_HWQ_AUTOSET_CACHE_DIR": str(cache)})
    status, detail = rows(out)["cache"]  # outside: writable
    assert status == "ok" and detail.startswith(f"{cache}: usable, ")
    assert detail.endswith(" 0 entries")

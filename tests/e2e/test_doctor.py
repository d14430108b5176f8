"""``doctor`` in real venvs: healthy, and broken in the ways installs break."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from typing import Callable

import pytest

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
    flat = " ".join(out.split())
    assert "ok ROCm " in flat and "hip = '6.2.41133-dd7f95766'" in flat
    # The doctor's own argv named the config: the hook ran in it at start-up,
    # and stayed out of the package's own command (Python >= 3.10 sees it).
    assert ("at start-up the hook did nothing: rocm-hwq-autoset's own command"
            in flat)  # fmt: skip
    assert "GPU_MAX_HW_QUEUES unset (HIP's default: 4)" in flat
    assert "for that launch would set GPU_MAX_HW_QUEUES=8" in flat
    code, out = doctor(venv.python, "--", "--job.config_file", str(job),
                       env={"PYTHONPATH": str(rocm),
                            "GPU_MAX_HW_QUEUES": "2"})  # fmt: skip
    assert code == 0
    assert "GPU_MAX_HW_QUEUES 2, set explicitly: it always wins" in " ".join(
        out.split()
    )


def test_bad_config_is_unhealthy(venv: Venv, tmp_path: Path) -> None:
    rocm = fake_torch(tmp_path / "rocm", ROCM_VERSION_PY)
    code, out = doctor(venv.python, "--", "--job.config_file", "/nonexistent.toml",
                       env={"PYTHONPATH": str(rocm)})  # fmt: skip
    assert code == 1
    assert (
        "unhealthy: for that launch: warning: /nonexistent.toml: No such file"
        in " ".join(out.split())
    )


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
    flat = " ".join(out.split())
    assert code == 1, out
    assert f"unhealthy: for that launch: warning: {bom}: invalid TOML" in flat
    assert flat.endswith("(checked as if on ROCm: this machine is not)")


def test_pth_removed(venv: Venv, wheelhouse: Path) -> None:
    pth = venv.site_packages / "rocm_hwq_autoset.pth"
    saved = pth.read_bytes()
    pth.unlink()
    try:
        code, out = doctor(venv.python)
    finally:
        pth.write_bytes(saved)
    assert code == 1
    assert "FAIL  rocm_hwq_autoset.pth" in out
    wheel = next(wheelhouse.glob("rocm_hwq_autoset-*.whl"))
    # Was: "in no site directory ...: not installed", while pip lists it.
    assert (f"unhealthy: rocm_hwq_autoset.pth: {pth} is missing, though"
            " rocm-hwq-autoset is installed (pip list shows it): the hook never"
            f" runs; restore it: {venv.python} -m pip install --force-reinstall"
            f" --no-deps {wheel}") in " ".join(out.split())  # fmt: skip


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
    assert code == 1
    assert (
        f"{target}/rocm_hwq_autoset.pth: its folder is on sys.path but is no site"
        in " ".join(out.split())
    )
    assert "pip install --target" in " ".join(out.split())


def test_no_site(venv: Venv) -> None:
    code, out = doctor(
        venv.python, flags=("-S",), env={"PYTHONPATH": str(venv.site_packages)}
    )
    assert code == 1
    assert "python -S: site is skipped" in out
    assert out.count("FAIL") == 1, out  # not also "pip install --target"
    assert "--target" not in out


def test_explicit_value_that_hip_cannot_use_fails(venv: Venv) -> None:
    code, out = doctor(venv.python, env={"GPU_MAX_HW_QUEUES": "abc"})
    assert code == 1
    assert "FAIL  GPU_MAX_HW_QUEUES" in out
    assert (
        "'abc' (HIP reads 0), set explicitly: not a queue count HIP can use"
        in " ".join(out.split())
    )


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
    said = " ".join(out.split())
    pth = f"{user_site}/rocm_hwq_autoset.pth"
    assert f"FAIL rocm_hwq_autoset.pth {pth} is in the user site, which is" in said
    assert "user site, which is disabled (-s, -I or PYTHONNOUSERSITE)" in said
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
    assert code == 1
    assert (f"FAIL _rocm_hwq_autoset_gate {tmp_path}/_rocm_hwq_autoset_gate.py"
            " comes first on sys.path") in " ".join(out.split())  # fmt: skip


def test_an_editable_install_whose_checkout_changed_its_gate(editable: Venv) -> None:
    """The copy in site-packages is what start-up runs: reinstall."""
    gate = _checkout(editable) / "_rocm_hwq_autoset_gate.py"
    saved = gate.read_bytes()
    gate.write_bytes(saved + b"# edited\n")
    try:
        code, out = doctor(editable.python)
    finally:
        gate.write_bytes(saved)
    flat = " ".join(out.split())
    assert code == 1
    assert (f"is not {gate} (changed since the install): start-up runs the old"
            f" one; reinstall: {editable.python} -m pip install -e"
            f" {_checkout(editable)}") in flat  # fmt: skip


def test_an_editable_install_without_its_package(
    editable: Venv, tmp_path: Path
) -> None:
    """``rm -rf checkout/rocm_hwq_autoset``. Was: a launch said nothing even
    in verbose mode, and the console script was a ModuleNotFoundError
    traceback."""
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
    missing = (
        "the package cannot be imported (ModuleNotFoundError: No module named"
        f" 'rocm_hwq_autoset'): its files are missing (an editable install of"
        f" {_checkout(editable)}); reinstall: {editable.python} -m pip install -e"
        f" {_checkout(editable)}"
    )
    assert (said.returncode, said.stdout) == (2, "")
    assert said.stderr == f"rocm-hwq-autoset: error: {missing}\n"
    verbose, default = launches
    assert (verbose.returncode, verbose.stdout) == (0, "trained\n")
    assert verbose.stderr == (
        f"rocm-hwq-autoset: warning: {missing}; GPU_MAX_HW_QUEUES left unset\n"
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
    assert code == 1
    assert (f"unhealthy: rocm_hwq_autoset.pth: {pth} is missing, though"
            " rocm-hwq-autoset is installed (pip list shows it): the hook never"
            f" runs; restore it: {editable.python} -m pip install -e"
            f" {_checkout(editable)}") in " ".join(out.split())  # fmt: skip


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
    flat = " ".join(proc.stdout.split())
    assert f"FAIL cache {cache}: read-only, 0 entries, none taken" in flat, flat
    assert proc.returncode == 1
    _, out = doctor(venv.python, env={"ROCM_HWQ_AUTOSET_CACHE_DIR": str(cache)})
    assert f"{cache}: usable, 0 entries" in " ".join(out.split())  # outside: writable

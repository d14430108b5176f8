"""Helpers shared by the tests: fake torches, a job config, the hook run on a
plain dict, interpreters and venvs."""

from __future__ import annotations

import glob
import os
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from rocm_hwq_autoset import apply
from rocm_hwq_autoset._cli.traces import count_streams
from rocm_hwq_autoset._decision import Outcome, decide
from rocm_hwq_autoset._launch import load_toml
from rocm_hwq_autoset._rocm import detect

ROOT = Path(__file__).resolve().parents[1]
PYTHONS = ("3.9", "3.10", "3.11", "3.12", "3.13")
#: Editable installs are checked on the oldest and the newest Python.
EDITABLE_PYTHONS = ("3.9", "3.13")

ROCM_VERSION_PY = (
    "from typing import Optional\n\n"
    "__all__ = ['__version__', 'debug', 'cuda', 'git_version', 'hip', 'xpu']\n"
    "__version__ = '2.5.1+rocm6.2'\n"
    "debug = False\n"
    "cuda: Optional[str] = None\n"
    "git_version = 'a8d6afb511a69687bbb2b7e88a3cf67917e1697e'\n"
    "hip: Optional[str] = '6.2.41133-dd7f95766'\n"
    "xpu: Optional[str] = None\n"
)
CUDA_VERSION_PY = ROCM_VERSION_PY.replace("'6.2.41133-dd7f95766'", "None").replace(
    "cuda: Optional[str] = None", "cuda: Optional[str] = '12.4'"
)

#: DeepSeek-V3 with expert parallelism and the overlap: 5 lanes, Q = 8.
JOB = b"""
[model]
name = "deepseek_v3"
[parallelism]
expert_parallel_degree = 2
[compile]
enable_fsdp_ag_rs_overlap = true
"""
LINE = (
    "rocm-hwq-autoset: GPU_MAX_HW_QUEUES=8 (5 GPU streams: compute, all_reduce,"
    " dense_all_gather, reduce_scatter, expert_comm)\n"
)


CORPUS = Path(__file__).resolve().parents[2] / "shared" / "corpus"
TOML_DIR = CORPUS / "torchtitan-toml"
TRACE_DIR = CORPUS / "traces"


def corpus_file(folder: Path, name: str) -> Path:
    path = folder / name
    if not path.is_file():
        pytest.skip(
            f"{path} is absent (the shared corpus exists only in the workplace)"
        )
    return path


# The 23 TOML configs torchtitan shipped before its config refactor, launched
# with the overrides people use; expected lanes written out by hand from reading
# each file.
BASE = ("compute", "all_reduce", "fsdp_comm")
TP = (*BASE, "tp_all_gather")
EP = (*BASE, "expert_comm")
OV = ("compute", "all_reduce", "dense_all_gather", "reduce_scatter")
OV_EP = (*OV, "expert_comm")

# name: (as shipped, with --parallelism.expert_parallel_degree 2
#        --compile.enable_fsdp_ag_rs_overlap, with WORLD_SIZE=8
#        --parallelism.tensor_parallel_degree=8 --compile.enable_passes)
TG = ("compute", "all_reduce", "tp_all_gather", "cudagraph_capture")
EXPECTED = {
    "experiments__transformers_modeling_backend__debug_model.toml": (BASE, OV_EP, TG),
    "experiments__transformers_modeling_backend__full.toml": (BASE, OV_EP, TG),
    "experiments__vlm__debug_model.toml": (BASE, OV, TG),
    "models__deepseek_v3__debug_model.toml": (BASE, OV_EP, TG),
    "models__deepseek_v3__deepseek_v3_16b.toml": (
        EP, OV_EP,
        ("compute", "all_reduce", "expert_comm", "tp_all_gather", "cudagraph_capture"),
    ),
    "models__deepseek_v3__deepseek_v3_671b.toml": (BASE, OV_EP, TG),
    "models__flux__debug_model.toml": (BASE, OV, TG),
    "models__flux__flux_dev_model.toml": (BASE, OV, TG),
    "models__flux__flux_schnell_model.toml": (BASE, OV, TG),
    "models__gpt_oss__debug_model.toml": (BASE, OV_EP, TG),
    "models__llama3__debug_model.toml": (BASE, OV, TG),
    "models__llama3__llama3_405b.toml": (TP, (*OV, "tp_all_gather"), TG),
    "models__llama3__llama3_70b.toml": (TP, (*OV, "tp_all_gather"), TG),
    "models__llama3__llama3_8b.toml": (BASE, OV, TG),
    "models__llama3_ft__debug_model.toml": (BASE, OV, TG),
    "models__llama4__debug_model.toml": (BASE, OV_EP, TG),
    "models__llama4__llama4_17bx128e.toml": (TP, (*OV_EP, "tp_all_gather"), TG),
    "models__llama4__llama4_17bx16e.toml": (TP, (*OV_EP, "tp_all_gather"), TG),
    "models__qwen3__qwen3_0.6b.toml": (BASE, OV, TG),
    "models__qwen3__qwen3_1.7b.toml": (BASE, OV, TG),
    "models__qwen3__qwen3_32b.toml": (BASE, OV, TG),
    "models__qwen3__qwen3_moe_debug.toml": (BASE, OV_EP, TG),
    "tests__integration_tests__base_config.toml": (BASE, OV, TG),
}  # fmt: skip

EP2_OVERLAP = [
    "--parallelism.expert_parallel_degree",
    "2",
    "--compile.enable_fsdp_ag_rs_overlap",
]
TP8_GRAPH = ["--parallelism.tensor_parallel_degree=8", "--compile.enable_passes"]


def by_device(path: str) -> dict[Any, set[Any]]:
    """``count_streams`` of a trace without priorities, by device."""
    pools = count_streams(path)
    assert all(priority is None for _, priority in pools)
    return {device: streams for (device, _), streams in pools.items()}


def fake_torch(root: Path, version_py: str | None) -> Path:
    """A ``torch`` package whose import fails and whose ``version.py`` says
    ``version_py``; returns the folder to put on the path."""
    pkg = root / "torch"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("raise ImportError('never import me')\n")
    if version_py is not None:
        (pkg / "version.py").write_text(version_py)
    return root


def hook(
    environ: dict[str, str],
    argv: Sequence[str],
    path: Sequence[str],
    orig_argv: Sequence[str] = (),
) -> Outcome:
    """What the start-up hook does, on a plain dict: decide, then apply."""
    outcome = decide(
        environ, argv, orig_argv,
        rocm=lambda: detect(path, environ), read_config=load_toml,
    )  # fmt: skip
    apply(outcome, environ)
    return outcome


def find_python(version: str) -> str | None:
    """A CPython ``version`` interpreter: pyenv's first, then ``PATH``'s."""
    root = os.environ.get("PYENV_ROOT") or os.path.expanduser("~/.pyenv")
    found = sorted(
        glob.glob(os.path.join(root, "versions", f"{version}.*", "bin", "python3"))
    )
    found = [p for p in found if Path(p).parent.parent.name.count(".") == 2]
    return found[-1] if found else shutil.which(f"python{version}")


def require_python(version: str) -> str:
    python = find_python(version)
    if python is None:
        missing(f"CPython {version} is not installed (pyenv or PATH)")
    assert python is not None
    return python


def missing(message: str) -> None:
    """Skip for something this machine lacks; fail under ``CI``, which needs it."""
    if os.environ.get("CI"):
        pytest.fail(message + "; CI requires it")
    pytest.skip(message)


def require_index(pip_output: str) -> None:
    """Skip (fail under ``CI``) with the reason when pip could not reach the
    package index; return when the failure was something else."""
    signs = ("No matching distribution", "Could not find a version",
             "NewConnectionError", "Max retries exceeded", "Network is unreachable",
             "Temporary failure in name resolution", "ConnectTimeout")  # fmt: skip
    if any(sign in pip_output for sign in signs):
        last = pip_output.strip().splitlines()[-1] if pip_output.strip() else ""
        missing(f"no package index reachable for pip ({last[:160]})")


class Venv:
    def __init__(self, path: Path) -> None:
        self.path = path
        self.python = str(path / "bin" / "python")

    @property
    def site_packages(self) -> Path:
        return next(self.path.glob("lib/python3.*/site-packages"))

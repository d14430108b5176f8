"""16 ranks starting at once with torchrun's environment: one value for all,
and nothing shared written (the venv, the config and the working folder are
byte-for-byte and mtime-for-mtime as before)."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from ..helpers import ROCM_VERSION_PY, Venv, fake_torch, said

#: One worker builds the venvs (a session fixture each worker would build again)
#: and runs every test that uses them.
pytestmark = [pytest.mark.e2e, pytest.mark.xdist_group("venvs")]

PROBE = (
    "import json, os, sys; print(json.dumps([os.environ.get('GPU_MAX_HW_QUEUES'),"
    " os.environ.get('ROCM_HWQ_AUTOSET_ORIGIN'), 'torch' in sys.modules]))"
)
JOB = """\
[model]
name = "deepseek_v3"
[parallelism]
expert_parallel_degree = 8
tensor_parallel_degree = 2
[compile]
enable_fsdp_ag_rs_overlap = true
"""


def snapshot(*roots: Path) -> dict[str, tuple[int, int]]:
    seen = {}
    for root in roots:
        for dirpath, dirnames, filenames in os.walk(root):
            for name in dirnames + filenames:
                path = os.path.join(dirpath, name)
                info = os.lstat(path)
                seen[path] = (info.st_size, info.st_mtime_ns)
    return seen


@pytest.mark.parametrize("inherited", [None, "8"], ids=["no-launcher", "from-launcher"])
def test_sixteen_ranks_at_once(
    venvs: Callable[..., Venv], tmp_path: Path, inherited: str | None
) -> None:
    venv = venvs("3.12")
    job = tmp_path / "job.toml"
    job.write_text(JOB)
    rocm = fake_torch(tmp_path / "rocm", ROCM_VERSION_PY)
    work = tmp_path / "work"
    work.mkdir()
    base = {"PATH": os.environ["PATH"], "PYTHONPATH": str(rocm),
            "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29500"}  # fmt: skip
    if inherited:  # what the launcher's own start-up set, before it forked workers
        base |= {
            "GPU_MAX_HW_QUEUES": inherited,
            "ROCM_HWQ_AUTOSET_ORIGIN": "8 job.config_file",
        }
    before = snapshot(venv.path, job.parent / "rocm", work)
    before[str(job)] = (job.stat().st_size, job.stat().st_mtime_ns)
    procs = [
        subprocess.Popen(
            [
                venv.python,
                "-u",
                "-c",
                PROBE,
                "--job.config_file",
                str(job),
                "--training.steps",
                "10",
            ],
            env={
                **base,
                "WORLD_SIZE": "16",
                "RANK": str(rank),
                "LOCAL_RANK": str(rank % 8),
                "LOCAL_WORLD_SIZE": "8",
                "GROUP_RANK": str(rank // 8),
            },
            cwd=work,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for rank in range(16)
    ]
    results = [p.communicate(timeout=60) for p in procs]
    assert all(p.returncode == 0 for p in procs)
    seen = [json.loads(out) for out, _ in results]
    # WORLD_SIZE 16, tp 2: dp_shard = 8, active; 6 lanes -> 8 on every rank.
    assert seen == [["8", "8 job.config_file", False]] * 16
    logs = [err for _, err in results if err]
    if inherited:
        assert logs == []  # the launcher already said it; the value is unchanged
    else:
        # One line per node: LOCAL_RANK 0 of each of the two nodes.
        assert [rank for rank, (_, err) in enumerate(results) if err] == [0, 8]
        # Q 8 for 6 lanes, said once per node.
        assert {said(err)[1].split()[:2] == ["GPU_MAX_HW_QUEUES=8", "(6"]
                for err in logs} == {True}  # fmt: skip
    after = snapshot(venv.path, job.parent / "rocm", work)
    after[str(job)] = (job.stat().st_size, job.stat().st_mtime_ns)
    assert after == before

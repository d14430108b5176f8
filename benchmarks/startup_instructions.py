"""Start-up cost in instructions (valgrind's callgrind), which repeat exactly on a
noisy machine where wall times vary by 2x:

* idle: ``python -c pass`` in a venv with the package vs. a bare venv — what the
  ``.pth`` line costs every Python process of the environment;
* decision: a TOML training launch (fake ROCm torch, the example config, the
  variable set) vs. the same command line in a bare venv that only imports the
  TOML parser — what the hook costs beyond the parser it needs.

It also lists the package modules the TOML launch imports, and their lines.

    python benchmarks/startup_instructions.py
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

from _venvs import ROOT, build_wheel, machine, make_venv, workdir

PARSER = "tomllib" if sys.version_info >= (3, 11) else "tomli"
LAUNCH = [
    "--job.config_file",
    str(ROOT / "examples" / "deepseek_v3_16b.toml"),
    "--parallelism.expert_parallel_degree",
    "2",
]
SHOW_MODULES = (
    f"import os, sys, {PARSER}; assert os.environ['GPU_MAX_HW_QUEUES'] == '4';"
    " print(' '.join(sorted(m.__file__ for n, m in sys.modules.items()"
    " if n.split('.')[0] == 'rocm_hwq_autoset')))"
)


def instructions(python: str, args: list[str], env: dict[str, str]) -> int:
    out = subprocess.run(
        ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null",
         python, *args],
        capture_output=True, text=True, env=env, check=True,
    ).stderr  # fmt: skip
    match = re.search(r"Collected : (\d+)", out)
    assert match, out
    return int(match.group(1))


def main() -> None:
    if not shutil.which("valgrind"):
        sys.exit("valgrind is not installed (apt-get install valgrind)")
    tmp = workdir()
    try:
        wheel = build_wheel(tmp / "dist")
        tomli = [] if PARSER == "tomllib" else ["tomli"]
        bare = make_venv(tmp / "bare", *tomli)
        installed = make_venv(tmp / "installed", str(wheel))
        torch = tmp / "fake" / "torch"
        torch.mkdir(parents=True)
        (torch / "__init__.py").write_text("raise ImportError('never imported')\n")
        (torch / "version.py").write_text("hip = '6.2.41133-dd7f95766'\n")
        env = {"PATH": os.environ["PATH"], "ROCM_HWQ_AUTOSET_LOG": "quiet"}
        launch_env = {**env, "PYTHONPATH": str(torch.parent)}
        for python in (bare, installed):  # compile the .pyc files once
            subprocess.run([python, "-c", f"import {PARSER}"], check=True)
        idle = {p: instructions(p, ["-c", "pass"], env) for p in (bare, installed)}
        parse = ["-c", f"import {PARSER}", *LAUNCH]
        decision = {p: instructions(p, parse, launch_env) for p in (bare, installed)}
        files = subprocess.run(
            [installed, "-c", SHOW_MODULES, *LAUNCH],
            capture_output=True, text=True, env=launch_env, check=True,
        ).stdout.split()  # fmt: skip
        lines = sum(len(Path(f).read_text().splitlines()) for f in files)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"machine: {machine()}")
    print("instructions (valgrind --tool=callgrind)")
    extra = idle[installed] - idle[bare]
    print(f"  python -c pass, bare venv          {idle[bare]:>13,}")
    print(f"  python -c pass, with the package   {idle[installed]:>13,}")
    share = extra / idle[bare]
    print(f"  idle .pth cost                     {extra:>13,} ({share:+.2%})")
    net = decision[installed] - decision[bare]
    print(f"  import {PARSER}, bare venv         {decision[bare]:>13,}")
    print(f"  TOML launch, with the package      {decision[installed]:>13,}")
    print(f"  the decision beyond the parser     {net:>13,}")
    names = sorted(Path(f).stem for f in files)
    print(f"package modules a TOML launch imports: {len(files)} ({lines} lines)")
    print("  " + " ".join(names))


if __name__ == "__main__":
    main()

"""Start-up cost in instructions (valgrind's callgrind), which repeat exactly
(``PYTHONHASHSEED=0``) on a noisy machine where wall times vary by 2x. This
checkout ("after") and a git revision ("before", ``--before``) are measured in
one run, each installed from its wheel into its own venv, beside a bare venv:

* idle: ``python -c pass`` over the bare venv: what the ``.pth`` line costs
  every Python process of the environment;
* a TOML training launch (a fake ROCm torch, the example config) over the same
  command in the bare venv, which imports the TOML parser; split into the idle
  line, parsing the config (``tomllib.load`` of the same file in the bare venv:
  the parser's work, which grows with the config) and the package's own decision
  (the rest: importing its modules, reading argv and the file, the model,
  detection, setting the variables).

It also lists the package modules the launch imports, and their lines.

    python benchmarks/startup_instructions.py [--before REV]
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
from pathlib import Path

from _venvs import (
    ROOT,
    build_wheel,
    instructions,
    machine,
    make_venv,
    wheel_at,
    workdir,
)

PARSER = "tomllib" if sys.version_info >= (3, 11) else "tomli"
JOB = ROOT / "examples" / "deepseek_v3_16b.toml"
LAUNCH = ["--job.config_file", str(JOB), "--parallelism.expert_parallel_degree", "2"]
#: The revision before the restructure of issue #10.
BEFORE = "f6a6d2b"
SHOW_MODULES = (
    f"import os, sys, {PARSER}; assert os.environ['GPU_MAX_HW_QUEUES'] == '4';"
    " print(' '.join(sorted(m.__file__ for n, m in sys.modules.items()"
    " if n.split('.')[0] == 'rocm_hwq_autoset')))"
)


def modules(python: str, env: dict[str, str]) -> list[Path]:
    files = subprocess.run(
        [python, "-c", SHOW_MODULES, *LAUNCH],
        capture_output=True, text=True, env=env, check=True,
    ).stdout.split()  # fmt: skip
    return [Path(f) for f in files]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--before", default=BEFORE, help="git revision (%(default)s)")
    args = parser.parse_args()
    if not shutil.which("valgrind"):
        sys.exit("valgrind is not installed (apt-get install valgrind)")
    with workdir() as tmp:
        tomli = [] if PARSER == "tomllib" else ["tomli"]
        pythons = {
            "bare": make_venv(tmp / "bare", *tomli),
            "before": make_venv(tmp / "before", str(wheel_at(args.before, tmp))),
            "after": make_venv(tmp / "after", str(build_wheel(tmp / "dist"))),
        }
        torch = tmp / "fake" / "torch"
        torch.mkdir(parents=True)
        (torch / "__init__.py").write_text("raise ImportError('never imported')\n")
        (torch / "version.py").write_text("hip = '6.2.41133-dd7f95766'\n")
        env = {"PATH": os.environ["PATH"], "ROCM_HWQ_AUTOSET_LOG": "quiet",
               "PYTHONHASHSEED": "0"}  # fmt: skip
        launch_env = {**env, "PYTHONPATH": str(torch.parent)}
        for python in pythons.values():  # compile the .pyc files once
            subprocess.run([python, "-c", f"import {PARSER}"], check=True, env=env)
            subprocess.run([python, "-c", "pass", *LAUNCH], check=True, env=launch_env)
        idle = {k: instructions(p, ["-c", "pass"], env) for k, p in pythons.items()}
        parse = ["-c", f"import {PARSER}", *LAUNCH]
        launch = {k: instructions(p, parse, launch_env) for k, p in pythons.items()}
        loaded = instructions(
            pythons["bare"],
            ["-c", f"import {PARSER}; {PARSER}.load(open({str(JOB)!r}, 'rb'))"],
            launch_env,
        )
        files = {k: modules(pythons[k], launch_env) for k in ("before", "after")}
        lines = {k: sum(len(f.read_text().splitlines()) for f in fs)
                 for k, fs in files.items()}  # fmt: skip
    print(f"machine: {machine()}")
    print(f"instructions (valgrind --tool=callgrind); before = {args.before}")
    parsing = loaded - launch["bare"]
    for name, value in (
        ("python -c pass, bare venv", idle["bare"]),
        (f"import {PARSER} + the launch's argv, bare venv", launch["bare"]),
        (f"parsing {JOB.name} ({JOB.stat().st_size} bytes)", parsing),
    ):
        print(f"  {name:<46}{value:>13,}")
    print(f"  {'':<46}{'before':>13}{'after':>13}")
    for name, key in (
        ("idle .pth line", "idle"),
        ("TOML launch, total", "total"),
        ("the decision (total - idle - parsing)", "decision"),
    ):
        values = []
        for k in ("before", "after"):
            extra_idle = idle[k] - idle["bare"]
            total = launch[k] - launch["bare"]
            values.append({"idle": extra_idle, "total": total,
                           "decision": total - extra_idle - parsing}[key])  # fmt: skip
        print(f"  {name:<46}{values[0]:>13,}{values[1]:>13,}")
    for k in ("before", "after"):
        names = " ".join(sorted(f.stem for f in files[k]))
        print(f"{k}: a TOML launch imports {len(files[k])} package modules"
              f" ({lines[k]} lines): {names}")  # fmt: skip


if __name__ == "__main__":
    main()

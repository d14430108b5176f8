"""Start-up cost in instructions (valgrind's callgrind), which repeat exactly
(``PYTHONHASHSEED=0``) on a noisy machine where wall times vary by 2x. This
checkout ("after") and a git revision ("before", ``--before``, default the last
commit before the restructure) are measured in one run, each installed from its
wheel into its own venv, beside a bare venv:

* idle: ``python -c pass`` over the bare venv: what the ``.pth`` line costs
  every Python process of the environment;
* a TOML training launch (a fake ROCm torch, the example config) over the same
  command in the bare venv, which imports the TOML parser; split into the idle
  line, parsing the config (``tomllib.load`` of the same file in the bare venv:
  the parser's work, which grows with the config) and the package's own decision
  (the rest: importing its modules, reading argv and the file, the model,
  detection, setting the variables).

It also lists the package modules the launch imports, with their lines, and for
"after" what importing each adds (in the order the imports end), and so what
running the decision costs beyond its imports.
``--quick`` measures "after" alone (no second wheel), and only the idle line.

    python benchmarks/startup_instructions.py [--before REV] [--quick]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

from _venvs import (
    BEFORE,
    ROOT,
    base_env,
    build_wheel,
    instructions,
    machine,
    make_venv,
    pip,
    require_valgrind,
    wheel_at,
    workdir,
)

PARSER = "tomllib" if sys.version_info >= (3, 11) else "tomli"
JOB = ROOT / "examples" / "deepseek_v3_16b.toml"
LAUNCH = ["--job.config_file", str(JOB), "--parallelism.expert_parallel_degree", "2"]
SHOW_MODULES = (
    f"import os, sys, {PARSER}; assert os.environ['GPU_MAX_HW_QUEUES'] == '4';"
    " print(' '.join(sorted(m.__file__ for n, m in sys.modules.items()"
    " if n.split('.')[0] == 'rocm_hwq_autoset')))"
)
#: The issue's targets, in instructions.
TARGETS = {"idle": 800_000, "decision": 5_000_000}


def modules(python: str, env: dict[str, str]) -> list[Path]:
    files = subprocess.run(
        [python, "-c", SHOW_MODULES, *LAUNCH],
        capture_output=True, text=True, env=env, check=True,
    ).stdout.split()  # fmt: skip
    return [Path(f) for f in files]


def import_costs(python: str, env: dict[str, str]) -> list[tuple[str, int]]:
    """Each package module a TOML launch imports, in the order its import ends
    (``-X importtime``), with what importing it adds once the ones before it
    are in (the switch off: imports only)."""
    trace = subprocess.run(
        [python, "-X", "importtime", "-c", f"import {PARSER}", *LAUNCH],
        capture_output=True, text=True, env=env, check=True,
    ).stderr  # fmt: skip
    order = [line.rsplit("|", 1)[-1].strip() for line in trace.splitlines()]
    order = [name for name in order if name.split(".")[0] == "rocm_hwq_autoset"]
    off = {**env, "ROCM_HWQ_AUTOSET": "0"}
    counts = [
        instructions(python, ["-c", f"import {', '.join([PARSER, *order[:k]])}",
                              *LAUNCH], off)
        for k in range(len(order) + 1)
    ]  # fmt: skip
    return [(name, counts[k + 1] - counts[k]) for k, name in enumerate(order)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--before", default=BEFORE, help="git revision (%(default)s)")
    parser.add_argument("--quick", action="store_true", help="'after', idle")
    args = parser.parse_args()
    require_valgrind()
    versions = ("after",) if args.quick else ("before", "after")
    with workdir() as tmp:
        pythons = {"bare": make_venv(tmp / "bare")}
        if PARSER == "tomli":
            pip(pythons["bare"], "tomli")
        if "before" in versions:
            pythons["before"] = make_venv(tmp / "before", wheel_at(args.before, tmp))
        pythons["after"] = make_venv(tmp / "after", build_wheel(tmp / "dist"))
        torch = tmp / "fake" / "torch"
        torch.mkdir(parents=True)
        (torch / "__init__.py").write_text("raise ImportError('never imported')\n")
        (torch / "version.py").write_text("hip = '6.2.41133-dd7f95766'\n")
        env = base_env(ROCM_HWQ_AUTOSET_LOG="quiet", PYTHONHASHSEED="0")
        launch_env = {**env, "PYTHONPATH": str(torch.parent)}
        for python in pythons.values():  # compile the .pyc files once
            subprocess.run([python, "-c", f"import {PARSER}"], check=True, env=env)
            subprocess.run([python, "-c", "pass", *LAUNCH], check=True, env=launch_env)
        idle = {k: instructions(p, ["-c", "pass"], env) for k, p in pythons.items()}
        launch, parsing = {}, 0
        costs: dict[str, list[tuple[str, int]]] = {}
        if not args.quick:
            parse = ["-c", f"import {PARSER}", *LAUNCH]
            launch = {k: instructions(p, parse, launch_env)
                      for k, p in pythons.items()}  # fmt: skip
            load = f"import {PARSER}; {PARSER}.load(open({str(JOB)!r}, 'rb'))"
            loaded = instructions(pythons["bare"], ["-c", load, *LAUNCH], launch_env)
            parsing = loaded - launch["bare"]
            costs = {"after": import_costs(pythons["after"], launch_env)}
        files = {k: modules(pythons[k], launch_env) for k in versions}
        lines = {k: sum(len(f.read_text().splitlines()) for f in fs)
                 for k, fs in files.items()}  # fmt: skip
    print(f"machine: {machine()}")
    before = f"before = {args.before}, " if "before" in versions else ""
    print(f"instructions (valgrind --tool=callgrind); {before}after = this checkout")
    rows = [("python -c pass, bare venv", idle["bare"])]
    if launch:
        rows += [
            (f"import {PARSER} + the launch's argv, bare venv", launch["bare"]),
            (f"parsing {JOB.name} ({JOB.stat().st_size} bytes)", parsing),
        ]
    for name, value in rows:
        print(f"  {name:<46}{value:>13,}")
    print(f"  {'':<46}" + "".join(f"{k:>13}" for k in versions) + "       target")
    figures: dict[str, dict[str, int]] = {}
    for k in versions:
        extra_idle = idle[k] - idle["bare"]
        figures[k] = {"idle": extra_idle}
        if launch:
            total = launch[k] - launch["bare"]
            figures[k].update(total=total, decision=total - extra_idle - parsing)
    for name, key in (
        ("idle .pth line", "idle"),
        ("TOML launch, total", "total"),
        ("the decision (total - idle - parsing)", "decision"),
    ):
        if key not in figures["after"]:
            continue
        values = "".join(f"{figures[k][key]:>13,}" for k in versions)
        target = TARGETS.get(key)
        met = ""
        if target is not None:
            verdict = "met" if figures["after"][key] <= target else "NOT met"
            met = f"  <= {target:,}: {verdict}"
        print(f"  {name:<46}{values}{met}")
    for k in versions:
        names = " ".join(sorted(f.stem for f in files[k]))
        print(f"{k}: a TOML launch imports {len(files[k])} package modules"
              f" ({lines[k]} lines): {names}")  # fmt: skip
    for k, found in costs.items():
        imported = sum(cost for _, cost in found)
        print(f"{k}: the decision's {figures[k]['decision']:,} instructions ="
              f" importing the modules {imported:,}"
              f" + running the decision {figures[k]['decision'] - imported:,};"
              " each import, once those before it are in:")  # fmt: skip
        for name, cost in found:
            print(f"    {name:<32}{cost:>11,}")


if __name__ == "__main__":
    main()

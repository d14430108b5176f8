"""The cost of the decision in a training launch, beside importing the TOML
parser alone. Each sample is a fresh interpreter (``-S``, so only what is
measured is imported) that times, with ``perf_counter``:

* ``parser``: ``import tomllib`` (``tomli`` before 3.11);
* ``decision``: importing the package and running its gate
  (``_rocm_hwq_autoset_gate.start``, what the ``.pth`` line calls) to the end, ROCm
  detected from a fake ROCm torch, the example config read, the variable set.

Instructions, which repeat where these times do not, are
``startup_instructions.py``'s.

    python benchmarks/decision.py [--runs 30] [--quick]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import textwrap

from _venvs import ROOT, base_env, machine, workdir

PARSER = """
import time, sys
t = time.perf_counter()
if sys.version_info >= (3, 11):
    import tomllib
else:
    import tomli
print(time.perf_counter() - t)
"""
DECISION = """
import os, sys, time
sys.argv = ["train.py", "--job.config_file", {job!r},
            "--parallelism.expert_parallel_degree", "2"]
t = time.perf_counter()
import _rocm_hwq_autoset_gate
_rocm_hwq_autoset_gate.start()  # what the .pth line calls
elapsed = time.perf_counter() - t
assert os.environ["GPU_MAX_HW_QUEUES"] == "4", os.environ.get("GPU_MAX_HW_QUEUES")
print(elapsed)
"""


def sample(code: str, env: dict[str, str]) -> float:
    out = subprocess.run(
        [sys.executable, "-S", "-c", code], capture_output=True, text=True, env=env,
        check=True,
    )  # fmt: skip
    return float(out.stdout)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--quick", action="store_true", help="3 runs")
    args = parser.parse_args()
    if args.quick:
        args.runs = 3
    with workdir() as tmp:
        torch = tmp / "torch"
        torch.mkdir()
        (torch / "__init__.py").write_text("raise ImportError('never imported')\n")
        (torch / "version.py").write_text("hip = '6.2.41133-dd7f95766'\n")
        job = str(ROOT / "examples" / "deepseek_v3_16b.toml")
        stdlib = os.path.dirname(os.__file__)
        site = [p for p in sys.path if p.endswith("site-packages")]
        env = base_env(
            # -S: no site; the fake torch first, the package and tomli after it.
            PYTHONPATH=os.pathsep.join([str(tmp), str(ROOT), *site]),
            ROCM_HWQ_AUTOSET_LOG="quiet",
        )
        decision_code = DECISION.format(job=job)
        sample(PARSER, env)  # .pyc files, the page cache
        sample(decision_code, env)
        parser_times, decision_times = [], []
        for _ in range(args.runs):
            parser_times.append(sample(PARSER, env))
            decision_times.append(sample(decision_code, env))
        ms = 1e3
        print(f"machine: {machine()} (stdlib {stdlib})")
        print(f"{args.runs} fresh interpreters each")
        for name, times in (("TOML parser import", parser_times),
                            ("whole decision", decision_times)):  # fmt: skip
            print(f"  {name:<19} min {min(times) * ms:6.2f} ms"
                  f"   median {statistics.median(times) * ms:6.2f} ms")  # fmt: skip
        net_min = min(decision_times) - min(parser_times)
        net_median = statistics.median(decision_times) - statistics.median(parser_times)
        print(
            textwrap.dedent(f"""\
              decision net of the parser import: min {net_min * ms:.2f} ms,
              median {net_median * ms:.2f} ms""").replace("\n", " ")
        )


if __name__ == "__main__":
    main()

"""A corpus for the tests' extra checks, made from the public sources: every
TOML job config torchtitan shipped in its TOML era (``train_configs/*.toml``
of its last TOML-era release, v0.2.2, and ``tests/integration_tests``), named
after its path (``models__deepseek_v3__debug_model.toml``), the source of that
release's ``JobConfig`` (``torchtitan/config/job_config.py``, which the
package's table of its fields is held to), and three real PyTorch profiler
traces of HolisticTraceAnalysis's test data. The tests read
it where ``ROCM_HWQ_CORPUS`` names it (in the workplace, ``../shared/corpus``
beside the checkout is one already).

    eval "$(python tools/corpus.py ~/.cache/rocm-hwq-corpus)"

It clones both repositories (``git clone --depth 1``) into a temporary folder,
or takes checkouts already made (``--torchtitan DIR``, ``--hta DIR``). Stdout
is one line, ``export ROCM_HWQ_CORPUS=DIR``; on a failure, ``false`` (so that
the ``eval`` fails) and exit status 1, with the reason on stderr.
"""

from __future__ import annotations

import argparse
import shlex
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

VARIABLE = "ROCM_HWQ_CORPUS"
TORCHTITAN = "https://github.com/pytorch/torchtitan"
#: The last release before pytorch/torchtitan#2386 replaced the TOML configs
#: by Python ones ("v0.2.2 contains a latest release right before this PR").
TORCHTITAN_TAG = "v0.2.2"
#: The source of its ``JobConfig``, in the package: kept as ``config/job_config.py``.
JOB_CONFIG = Path("config", "job_config.py")
HTA = "https://github.com/facebookresearch/HolisticTraceAnalysis"
#: The corpus's traces, by the path of each in HolisticTraceAnalysis.
TRACES = {
    "a100_event_sync_multi_stream.json.gz":
        "tests/data/critical_path/cuda_event_sync_multi_stream/event_sync_trace.json.gz",
    "mi250_rocm6_2_minitoy_train.json.gz":
        "tests/data/amd_trace/mi250_minitoy_train_ROCm6_2_kineto.json.gz",
    "sampled_rank-0.json.gz": "tests/data/trace_filter/sampled_rank-0.json.gz",
}  # fmt: skip


def toml_name(relative: Path) -> str | None:
    """The corpus's name for a file of a torchtitan checkout, or None for one
    that is no job config: ``torchtitan/models/x/train_configs/y.toml`` is
    ``models__x__y.toml``; ``tests/integration_tests/y.toml``, its own path."""
    parts = list(relative.parts)
    if relative.suffix != ".toml":
        return None
    if parts[0] == "torchtitan" and "train_configs" in parts:
        parts = [p for p in parts[1:] if p != "train_configs"]
    elif parts[:2] != ["tests", "integration_tests"]:
        return None
    return "__".join(parts)


def lay_out(torchtitan: Path, hta: Path, corpus: Path) -> int:
    """The corpus at ``corpus`` from the two checkouts; the configs' count."""
    tomls = corpus / "torchtitan-toml"
    traces = corpus / "traces"
    for folder in (tomls, traces):
        shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir(parents=True)
    count = 0
    for path in sorted(torchtitan.rglob("*.toml")):
        name = toml_name(path.relative_to(torchtitan))
        if name is not None:
            shutil.copyfile(path, tomls / name)
            count += 1
    for name, source in TRACES.items():
        shutil.copyfile(hta / source, traces / name)
    config = corpus / JOB_CONFIG.parent.name
    config.mkdir(exist_ok=True)
    shutil.copyfile(torchtitan / "torchtitan" / JOB_CONFIG, config / JOB_CONFIG.name)
    return count


def clone(url: str, where: Path, tag: str | None = None) -> Path:
    branch = ["--branch", tag] if tag else []
    subprocess.run(["git", "clone", "--quiet", "--depth", "1", *branch, url,
                    str(where)], check=True)  # fmt: skip
    return where


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("corpus", type=Path, help="the folder to make")
    parser.add_argument(
        "--torchtitan", type=Path, help=f"a checkout of torchtitan {TORCHTITAN_TAG}"
    )
    parser.add_argument("--hta", type=Path, help="a HolisticTraceAnalysis checkout")
    args = parser.parse_args(argv)  # fmt: skip
    try:
        with tempfile.TemporaryDirectory() as tmp:
            torchtitan = args.torchtitan or clone(
                TORCHTITAN, Path(tmp) / "torchtitan", TORCHTITAN_TAG
            )
            hta = args.hta or clone(HTA, Path(tmp) / "hta")
            count = lay_out(torchtitan, hta, args.corpus)
    except (OSError, subprocess.CalledProcessError) as exc:
        print(f"{Path(__file__).name}: {exc}; {VARIABLE} not set", file=sys.stderr)
        print("false")
        return 1
    print(f"{Path(__file__).name}: {args.corpus}: {count} job configs,"
          f" {len(TRACES)} traces", file=sys.stderr)  # fmt: skip
    print(f"export {VARIABLE}={shlex.quote(str(args.corpus.resolve()))}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

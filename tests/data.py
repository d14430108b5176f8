"""The tests' own data, so that a fresh clone tests itself: job configs modelled
on the 23 TOML configs torchtitan shipped before its config refactor, the lanes
expected of each, and a small PyTorch profiler trace with its stream counts.

Nothing here reads the corpus (the folder ``ROCM_HWQ_CORPUS`` names:
``tools/corpus.py`` makes one). Where it
exists, tests compare these configs with it (the same model-relevant values,
parsed and merged as the hook does) and count its real traces; elsewhere those
tests skip, saying what it is and how to make one.
"""

from __future__ import annotations

import gzip
import json
import os
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]
#: The corpus: torchtitan's TOML-era job configs and three real profiler
#: traces: the folder ``ROCM_HWQ_CORPUS`` names (``tools/corpus.py`` makes one),
#: else ``shared/corpus`` beside the checkout's folder.
CORPUS = Path(os.environ.get("ROCM_HWQ_CORPUS") or ROOT.parent / "shared" / "corpus")
TOML_DIR = CORPUS / "torchtitan-toml"
TRACE_DIR = CORPUS / "traces"
#: torchtitan v0.2.2's ``torchtitan/config/job_config.py`` (``JobConfig``).
JOB_CONFIG_SOURCE = CORPUS / "config" / "job_config.py"
#: How to get a corpus, in one command.
MAKE_CORPUS = 'eval "$(python tools/corpus.py ~/.cache/rocm-hwq-corpus)"'


def corpus_dir(folder: Path) -> Path:
    """``folder`` of the corpus, or a skip that says what it is and how to
    get it."""
    if not folder.is_dir():
        given = os.environ.get("ROCM_HWQ_CORPUS")
        absent = f"{folder} is absent" if given else "ROCM_HWQ_CORPUS is unset"
        pytest.skip(
            f"{absent}: the corpus (every TOML job config torchtitan"
            " shipped before its config refactor, the source of its JobConfig,"
            " three real profiler traces)"
            " is the folder ROCM_HWQ_CORPUS names; make one from torchtitan"
            f" v0.2.2 and HolisticTraceAnalysis (git clone) with: {MAKE_CORPUS}."
            " The tests' own data (tests/data.py) covers the rest"
        )
    return folder


# Job configs. One row per config torchtitan shipped (named after its path in
# torchtitan, "/" as "__"): model.name, model.flavor, the parallel degrees the
# file sets (r: data_parallel_replicate, s: data_parallel_shard, t: tensor,
# p: pipeline, c: context, e: expert) and its enable_async_tensor_parallel (a0:
# false, a1: true; read for the streams the model leaves out), compile.enable
# (None: no [compile] table), and job.custom_config_module ("" when unset: then
# torchtitan refuses unknown fields, and so do we for a near miss). No file sets
# a compile field the model reads; each gets a few fields the model does not
# read.

CONFIGS: dict[str, tuple[str, str, str, bool | None, str]] = {
    "experiments__transformers_modeling_backend__debug_model.toml": (
        "transformers_modeling_backend", "debugmodel", "r1 s-1 t1 a0 p1 c1 e1",
        False, ""),
    "experiments__transformers_modeling_backend__full.toml": (
        "transformers_modeling_backend", "full", "r1 s-1 t1 a0 p1 c1 e1", False, ""),
    "experiments__vlm__debug_model.toml": (
        "vlm", "debugmodel", "r1 s-1 t1 a0 p1 c1", False,
        "torchtitan.experiments.vlm.job_config"),
    "models__deepseek_v3__debug_model.toml": (
        "deepseek_v3", "debugmodel", "r1 s-1 t1 a0 p1 c1 e1", False, ""),
    "models__deepseek_v3__deepseek_v3_16b.toml": (
        "deepseek_v3", "16B", "r1 s-1 t1 a0 p1 e8", True, ""),
    "models__deepseek_v3__deepseek_v3_671b.toml": (
        "deepseek_v3", "671B", "r1 s-1 t1 a0 p1 e1", True, ""),
    "models__flux__debug_model.toml": (
        "flux", "flux-debug", "r1 s-1 c1", None, "torchtitan.models.flux.job_config"),
    "models__flux__flux_dev_model.toml": (
        "flux", "flux-dev", "r1 s-1", None, "torchtitan.models.flux.job_config"),
    "models__flux__flux_schnell_model.toml": (
        "flux", "flux-schnell", "r1 s-1", None, "torchtitan.models.flux.job_config"),
    "models__gpt_oss__debug_model.toml": (
        "gpt_oss", "debugmodel", "r1 s-1 t1 a0 e1", False, ""),
    "models__llama3__debug_model.toml": (
        "llama3", "debugmodel", "r1 s-1 t1 a0 p1 c1", False, ""),
    "models__llama3__llama3_405b.toml": (
        "llama3", "405B", "r1 s-1 t8 a1 p1 c1", True, ""),
    "models__llama3__llama3_70b.toml": ("llama3", "70B", "r1 s-1 t8 p1 c1", False, ""),
    "models__llama3__llama3_8b.toml": ("llama3", "8B", "r1 s-1 t1 p1 c1", False, ""),
    "models__llama3_ft__debug_model.toml": (
        "llama3", "debugmodel", "r1 s-1 t1 a0 p1 c1", False,
        "torchtitan.components.ft.config"),
    "models__llama4__debug_model.toml": (
        "llama4", "debugmodel", "r1 s-1 t1 a0 p1 c1 e1", False, ""),
    "models__llama4__llama4_17bx128e.toml": (
        "llama4", "17bx128e", "r1 s-1 t8 a0 p4 c1 e1", False, ""),
    "models__llama4__llama4_17bx16e.toml": (
        "llama4", "17bx16e", "r1 s-1 t8 a0 p1 c1 e1", False, ""),
    "models__qwen3__qwen3_0.6b.toml": ("qwen3", "0.6B", "r1 s-1 t1 c1", False, ""),
    "models__qwen3__qwen3_1.7b.toml": ("qwen3", "1.7B", "r1 s-1 t1 c1", False, ""),
    "models__qwen3__qwen3_32b.toml": ("qwen3", "32B", "r1 s-1 t1 c1", False, ""),
    "models__qwen3__qwen3_moe_debug.toml": (
        "qwen3", "debugmodel_moe", "r1 s-1 t1 a0 e1", False, ""),
    "tests__integration_tests__base_config.toml": (
        "llama3", "debugmodel", "r1 s-1 t1 a0 p1 c1 e1", False, ""),
}  # fmt: skip

DEGREES = {
    "r": "data_parallel_replicate_degree",
    "s": "data_parallel_shard_degree",
    "t": "tensor_parallel_degree",
    "p": "pipeline_parallel_degree",
    "c": "context_parallel_degree",
    "e": "expert_parallel_degree",
}


def job_toml(name: str) -> str:
    """The TOML text of the tests' config ``name`` (a key of :data:`CONFIGS`)."""
    model, flavor, degrees, compile_enable, custom = CONFIGS[name]
    origin = name[: -len(".toml")].replace("__", "/")
    lines = [
        f"# rocm-hwq-autoset's test config, modelled on torchtitan's {origin}.toml:",
        "# the values the stream model reads, and a few it does not.",
        "",
        "[job]",
        f'description = "{model} {flavor} (test)"',
        'dump_folder = "./outputs"',
    ]
    if custom:
        lines.append(f'custom_config_module = "{custom}"')
    lines += ["", "[model]", f'name = "{model}"', f'flavor = "{flavor}"',
              "", "[training]", "local_batch_size = 2", "steps = 10",
              "", "[parallelism]"]  # fmt: skip
    for item in degrees.split():
        if item[0] == "a":
            lines.append(f"enable_async_tensor_parallel = {item == 'a1'}".lower())
            continue
        lines.append(f"{DEGREES[item[0]]} = {int(item[1:])}")
    lines.append('fsdp_reshard_after_forward = "default"')
    if compile_enable is not None:
        lines += ["", "[compile]", f"enable = {str(compile_enable).lower()}",
                  'components = ["model", "loss"]']  # fmt: skip
    return "\n".join(lines) + "\n"


def write_job(folder: Path, name: str) -> Path:
    """The config ``name`` written as ``folder/name``."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text(job_toml(name))
    return path


# The expected lanes of each config, written out by hand from what each sets:
# as shipped; with --parallelism.expert_parallel_degree 2
# --compile.enable_fsdp_ag_rs_overlap; with WORLD_SIZE=8
# --parallelism.tensor_parallel_degree=8 --compile.enable_passes.

BASE = ("compute", "all_reduce", "fsdp_comm")
TP = (*BASE, "tp_all_gather")
EP = (*BASE, "expert_comm")
OV = ("compute", "all_reduce", "dense_all_gather", "reduce_scatter")
OV_EP = (*OV, "expert_comm")
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

#: The streams PR #4032's model leaves out that a config turns on as shipped
#: (none elsewhere): llama3 405B's async TP with tensor parallelism 8.
LEFT_OUT_EXPECTED = {"models__llama3__llama3_405b.toml": ("symm_mem",)}

EP2_OVERLAP = [
    "--parallelism.expert_parallel_degree",
    "2",
    "--compile.enable_fsdp_ag_rs_overlap",
]
TP8_GRAPH = ["--parallelism.tensor_parallel_degree=8", "--compile.enable_passes"]


# A PyTorch profiler (Kineto, Chrome trace format) trace of one rank, small but
# shaped like real ones (CUDA's and ROCm's alike): GPU work on several devices
# and streams, two streams of a higher priority, a lane known only by its
# "stream N " metadata, and everything that must not count: CPU ops, runtime
# calls that name a stream, syncs, annotations, flows, instants, spans.


def kernel(
    device: int,
    stream: int,
    cat: str = "kernel",
    *,
    priority: int | None = None,
    ts: int = 1,
) -> dict[str, Any]:
    """GPU work: ``kernel``, ``gpu_memcpy`` or ``gpu_memset``."""
    name = {"kernel": "void at::native::vectorized_elementwise_kernel<4>",
            "gpu_memcpy": "Memcpy HtoD (Host -> Device)",
            "gpu_memset": "Memset (Device)"}.get(cat, cat)  # fmt: skip
    args: dict[str, Any] = {"External id": ts, "device": device, "context": 1,
                            "stream": stream, "correlation": ts}  # fmt: skip
    if priority is not None:
        args["priority"] = priority
    return {"ph": "X", "cat": cat, "name": name, "pid": device, "tid": stream,
            "ts": ts, "dur": 3, "args": args}  # fmt: skip


def thread_name(pid: int | str, tid: int | str, name: str) -> dict[str, Any]:
    return {"ph": "M", "name": "thread_name", "pid": pid, "tid": tid, "ts": 0,
            "args": {"name": name}}  # fmt: skip


CPU_PID = 4242


def profiler_trace() -> dict[str, Any]:
    """The trace, object form, with :data:`TRACE_POOLS` streams."""
    events: list[dict[str, Any]] = [
        {"ph": "M", "name": "process_name", "pid": CPU_PID, "tid": 0, "ts": 0,
         "args": {"name": "python3"}},
        {"ph": "M", "name": "process_labels", "pid": CPU_PID, "tid": 0, "ts": 0,
         "args": {"labels": "CPU"}},
        thread_name(CPU_PID, CPU_PID, "thread 4242 (python3)"),
        # Device 0: three streams of the default priority, two of a higher one.
        kernel(0, 7, ts=10), kernel(0, 7, ts=11),
        kernel(0, 13, "gpu_memcpy", ts=12), kernel(0, 20, "gpu_memset", ts=13),
        kernel(0, 30, priority=-1, ts=14), kernel(0, 31, "gpu_memcpy", priority=-1,
                                                  ts=15),
        thread_name(0, 7, "stream 7 "), thread_name(0, 30, "stream 30 "),
        # Device 1: two streams with work, a third named by metadata alone.
        kernel(1, 7, ts=20), kernel(1, 9, ts=21),
        thread_name(1, 7, "stream 7 "), thread_name(1, 11, "stream 11 "),
        # Device 2: one stream (a ROCm trace's stream 0).
        kernel(2, 0, "gpu_memcpy", ts=30), kernel(2, 0, ts=31),
        thread_name(2, 0, "stream 0 "),
        # None of these is GPU work on a stream.
        {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": CPU_PID,
         "tid": CPU_PID, "ts": 9, "dur": 40, "args": {"stream": 3, "device": 0}},
        {"ph": "X", "cat": "cuda_runtime", "name": "hipMemcpyWithStream",
         "pid": CPU_PID, "tid": CPU_PID, "ts": 11, "dur": 5,
         "args": {"stream": "0x0", "correlation": 12}},
        {"ph": "X", "cat": "cuda_sync", "name": "Event Sync", "pid": 0, "tid": -1,
         "ts": 16, "dur": 1, "args": {"device": 0, "stream": -1}},
        {"ph": "X", "cat": "gpu_user_annotation", "name": "ProfilerStep#1",
         "pid": 0, "tid": 7, "ts": 10, "dur": 30, "args": {"External id": 1}},
        {"ph": "X", "cat": "user_annotation", "name": "nccl:all_reduce",
         "pid": CPU_PID, "tid": CPU_PID, "ts": 17, "dur": 2, "args": {}},
        thread_name(0, -1, "Device 0"),
        {"ph": "s", "id": 12, "pid": CPU_PID, "tid": CPU_PID, "ts": 11,
         "cat": "ac2g", "name": "ac2g"},
        {"ph": "f", "id": 12, "pid": 0, "tid": 13, "ts": 12, "cat": "ac2g",
         "name": "ac2g", "bp": "e"},
        {"ph": "i", "s": "g", "name": "Iteration Start: PyTorch Profiler",
         "pid": "Traces", "tid": "Trace PyTorch Profiler", "ts": 1},
        {"ph": "X", "cat": "Trace", "name": "PyTorch Profiler (0)", "pid": "Spans",
         "tid": "PyTorch Profiler", "ts": 1, "dur": 50, "args": {"Op count": 0}},
    ]  # fmt: skip
    return {
        "schemaVersion": 1,
        "deviceProperties": [
            {"id": d, "name": "AMD Instinct MI250X"} for d in range(3)
        ],
        "distributedInfo": {"backend": "nccl", "rank": 0, "world_size": 1},
        "traceEvents": events,
        "traceName": "rank0.pt.trace.json",
        "displayTimeUnit": "ms",
        "baseTimeNanoseconds": 1700000000000000000,
    }


#: The streams of :func:`profiler_trace`, per pool: (device, priority or None).
TRACE_POOLS = {
    (0, None): {7, 13, 20},
    (0, -1): {30, 31},
    (1, None): {7, 9, 11},
    (2, None): {0},
}
#: The same, as ``verify --json`` labels them.
TRACE_DEVICES = {"device 0": 3, "device 0 priority -1": 2, "device 1": 3,
                 "device 2": 1}  # fmt: skip
#: The most streams of one pool: the Q the trace needs.
TRACE_STREAMS = 3
#: The streams of :func:`profiler_trace` per device, its priorities in one pool
#: (HIP with ROCm/rocm-systems#8485), as ``_pools.pool_sizes`` gives them ...
TRACE_SHARED = {(0, None): 5, (1, None): 3, (2, None): 1}
#: ... as ``verify --json`` labels them ...
TRACE_SHARED_DEVICES = {"device 0": 5, "device 1": 3, "device 2": 1}
#: ... and the Q it needs.
TRACE_SHARED_STREAMS = 5


def sorted_by_time(doc: dict[str, Any]) -> dict[str, Any]:
    """``doc`` with its events in time order, as a tool that sorts a trace
    writes it: the ``stream N`` names (``ts`` 0) before the kernels they name,
    where Kineto writes them after."""
    return {**doc, "traceEvents": sorted(doc["traceEvents"], key=lambda e: e["ts"])}


def write_trace(
    path: Path, doc: Any, *, gz: bool = False, indent: int | None = None
) -> str:
    """``doc`` as a trace file, gzip-compressed or plain; its path."""
    data = json.dumps(doc, indent=indent).encode()
    path.write_bytes(gzip.compress(data) if gz else data)
    return str(path)

"""Writes a small stand-in ``torchtitan`` package: the API surface the
``--module``/``--config`` support uses, and nothing else (no torch)."""

from __future__ import annotations

from pathlib import Path

FILES = {
    "torchtitan/__init__.py": """
import json, os, sys
if os.environ.get("STANDIN_LOG"):
    with open(os.environ["STANDIN_LOG"], "a") as log:
        log.write(json.dumps(["import", os.getpid(), sys.argv]) + "\\n")
if os.environ.get("STANDIN_FAIL"):
    raise RuntimeError("the stand-in torchtitan is broken on purpose")
""",
    "torchtitan/config/__init__.py": "from .manager import ConfigManager\n",
    "torchtitan/config/manager.py": """
import importlib, json, os, sys

def _reject(message):  # tyro's way: a box on stderr, then exit 2
    print("╭─ Parsing error ──────────╮", file=sys.stderr)
    print("│ " + message + " │", file=sys.stderr)
    print("│ ──────────────────────── │", file=sys.stderr)
    print("│ For full helptext, see -h │", file=sys.stderr)
    print("╰──────────────────────────╯", file=sys.stderr)
    raise SystemExit(2)

def _value(text, old):
    if isinstance(old, bool):
        _reject(f"Unrecognized options: {text}")
    if isinstance(old, int):
        return int(text)
    if isinstance(old, list):
        return text.split(",")
    return text

def _unrecorded(name):  # a variable read where no recording sees it
    with open("/proc/self/environ", "rb") as f:
        for item in f.read().split(b"\\0"):
            key, _, value = item.partition(b"=")
            if key == name.encode():
                return value.decode()
    return ""

class ConfigManager:
    def parse_args(self, args=None):
        args = list(sys.argv[1:] if args is None else args)
        # torchtitan and torch talk as they build a config: the child's answer
        # must stay its one JSON line all the same.
        print("[titan] building the config", flush=True)
        print("[titan] warning: a deprecated option", file=sys.stderr, flush=True)
        if os.environ.get("STANDIN_LOG"):
            with open(os.environ["STANDIN_LOG"], "a") as log:
                log.write(json.dumps(["parse_args", os.getpid(), args,
                                      os.environ.get("HIP_VISIBLE_DEVICES"),
                                      os.environ.get("ROCM_HWQ_AUTOSET"),
                                      __import__("time").time()]) + "\\n")
        if os.environ.get("STANDIN_SLEEP"):  # a config that takes long to build
            import time
            time.sleep(float(os.environ["STANDIN_SLEEP"]))
        burn = _unrecorded("STANDIN_BURN")
        if burn:  # a config that computes that long (and no record sees why)
            import time
            end = time.process_time() + float(burn)
            while time.process_time() < end:
                pass
        if os.environ.get("STANDIN_LOG"):  # when it was built
            import time
            with open(os.environ["STANDIN_LOG"], "a") as log:
                log.write(json.dumps(["built", os.getpid(), time.time()]) + "\\n")
        module = config_name = None
        rest = []
        i = 0
        while i < len(args):
            a = args[i]
            if a.startswith("--module="): module = a.split("=", 1)[1]
            elif a == "--module": module = args[i + 1]; i += 1
            elif a.startswith("--config="): config_name = a.split("=", 1)[1]
            elif a == "--config": config_name = args[i + 1]; i += 1
            else: rest.append(a)
            i += 1
        if module is None or config_name is None:
            raise ValueError("--module and --config are required")
        for prefix in ("torchtitan.models.", "torchtitan.experiments.", ""):
            try:
                registry = importlib.import_module(prefix + module + ".config_registry")
                break
            except ImportError:
                continue
        else:
            raise ImportError(f"Cannot import module {module!r}")
        config = getattr(registry, config_name)()
        i = 0
        while i < len(rest):  # tyro's forms, for the fields the tests use
            if not rest[i].startswith("--"):
                _reject(f"Unrecognized arguments: {rest[i]}")
            flag, eq, inline = rest[i][2:].partition("=")
            path, _, name = flag.replace("-", "_").rpartition(".")
            negate = name.startswith("no_")  # tyro: before the last part
            name = name[3:] if negate else name
            holder = config
            for part in path.split("."):
                holder = getattr(holder, part, None)
            if not hasattr(holder, name):
                _reject(f"Unrecognized options: {rest[i]}")
            old = getattr(holder, name)
            if isinstance(old, bool) and not eq:
                setattr(holder, name, not negate)
            else:
                if not eq:
                    i += 1
                    inline = rest[i]
                setattr(holder, name, _value(inline, old))
            i += 1
        return config
""",
    "torchtitan/models/__init__.py": "",
    "torchtitan/models/common/__init__.py": "",
    "torchtitan/models/common/moe.py": """
class MoE:
    class Config:
        pass
""",
    # torchtitan 0.3.0's dist-GEMM projections (models/common/dist_gemm.py)
    "torchtitan/models/common/dist_gemm.py": """
class AllGatherFusedQKVLinear:
    class Config:
        pass

class RowParallelLinear:
    class Config:
        pass

class AllGatherFusedFeedForward:
    class Config:
        pass
""",
    "torchtitan/experiments/__init__.py": "",
    "torchtitan/experiments/graph_trainer/__init__.py": """
from types import SimpleNamespace as NS
from torchtitan.models.common.moe import MoE

class Model:
    def __init__(self, moe, dist_gemm=False):
        self.layers = [MoE.Config()] if moe else []
        if dist_gemm:  # tp_gemm_backend="dist_gemm": the attention's wo
            from torchtitan.models.common.dist_gemm import RowParallelLinear
            self.layers.append(RowParallelLinear.Config())
    def traverse(self, cls):
        for i, layer in enumerate(self.layers):
            if isinstance(layer, cls):
                yield f"layers.{i}", layer, self, "layers"

def trainer_config(name, flavor, moe, dist_gemm=False, **parallelism):
    degrees = dict(data_parallel_shard_degree=-1, data_parallel_replicate_degree=1,
                   tensor_parallel_degree=1, context_parallel_degree=1,
                   pipeline_parallel_degree=1, expert_parallel_degree=1)
    degrees.update(parallelism)
    return NS(
        parallelism=NS(**degrees),
        # the graph trainer's defaults (GraphTrainerCompileConfig)
        compile=NS(enable=True, enable_passes=True, disable_passes=[],
                   enable_fsdp_ag_rs_overlap=False,
                   enable_async_tensor_parallel=False,
                   ep_overlap=NS(enabled=False)),
        training=NS(disable_cuda_graphs=False),
        model_spec=NS(name=name, flavor=flavor, model=Model(moe, dist_gemm)),
    )
""",
    "torchtitan/experiments/graph_trainer/llama3/__init__.py": "",
    "torchtitan/experiments/graph_trainer/llama3/config_registry.py": """
from torchtitan.experiments.graph_trainer import trainer_config

def graph_trainer_llama3_debugmodel():
    return trainer_config("llama3", "debugmodel", moe=False)
""",
    "torchtitan/experiments/graph_trainer/deepseek_v3/__init__.py": "",
    "torchtitan/experiments/graph_trainer/deepseek_v3/config_registry.py": """
from torchtitan.experiments.graph_trainer import trainer_config

def graph_trainer_deepseek_v3_debugmodel():
    return trainer_config("deepseek_v3", "debugmodel", moe=True)
""",
    "torchtitan/models/llama3/__init__.py": "",
    # The core trainer's recipe with dist-GEMM projections, as 0.3.0's
    # llama3_debugmodel_dist_gemm (no compile passes of graph_trainer's).
    "torchtitan/models/llama3/config_registry.py": """
from torchtitan.experiments.graph_trainer import trainer_config

def llama3_debugmodel_dist_gemm():
    config = trainer_config("llama3", "debugmodel", moe=False, dist_gemm=True)
    config.compile.enable_passes = False
    return config
""",
    # A training that computes: pinned to one CPU (as the test starts it),
    # it counts its loop turns for STANDIN_TRAIN seconds, with its own CPU
    # time and that of every process it started (a check) meanwhile.
    "torchtitan/burn.py": """
import json, os, time

def cpu(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

def descendants(pid):
    found = []
    for task in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{task}/children") as f:
                kids = [int(k) for k in f.read().split()]
        except OSError:
            continue
        for kid in kids:
            found += [kid, *descendants(kid)]
    return found

time.sleep(float(os.environ.get("STANDIN_SETTLE", "0.5")))
others = descendants(os.getpid())
mine, theirs = cpu(os.getpid()), sum(cpu(p) for p in others)
end = time.monotonic() + float(os.environ.get("STANDIN_TRAIN", "3"))
turns = 0
while time.monotonic() < end:
    turns += 1
print(json.dumps({"turns": turns, "cpu": cpu(os.getpid()) - mine,
                  "others": sum(cpu(p) for p in others) - theirs,
                  "started": len(others),
                  "queues": os.environ.get("GPU_MAX_HW_QUEUES")}))
""",
    # A torchtitan program that imports nothing and starts nothing.
    "torchtitan/noop.py": """
import json
print(json.dumps(None))
""",
    "torchtitan/train.py": """
import json, os, sys
if os.environ.get("STANDIN_START_HIP"):  # a C extension that starts HIP first
    os.open(os.environ["STANDIN_START_HIP"], os.O_RDWR)
try:
    import torch  # torchtitan's first import; HIP reads its flags after it
except ImportError:
    pass
print(json.dumps({"queues": os.environ.get("GPU_MAX_HW_QUEUES"),
                  "origin": os.environ.get("ROCM_HWQ_AUTOSET_ORIGIN"),
                  "torch": "torch" in sys.modules, "pid": os.getpid()}))
if os.environ.get("STANDIN_HOLD"):  # a training that runs: until stdin closes
    open(os.path.join(os.environ["STANDIN_HOLD"], str(os.getpid())), "w").close()
    sys.stdin.read()
""",
}
# A recipe outside torchtitan, imported from the launch's working directory.
RECIPE_FILES = {
    "my_recipes/__init__.py": "",
    "my_recipes/config_registry.py": """
from torchtitan.experiments.graph_trainer import trainer_config

def dense_tp2():
    return trainer_config("my_model", "big", moe=False, tensor_parallel_degree=2)
""",
}


def _write(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text.lstrip("\n"))
    return root


def write_standin(root: Path) -> Path:
    """The stand-in torchtitan under ``root`` (put ``root`` on the path)."""
    return _write(root, FILES)


def write_recipes(workdir: Path) -> Path:
    """A recipe module outside torchtitan, in a launch's working directory."""
    return _write(workdir, RECIPE_FILES)

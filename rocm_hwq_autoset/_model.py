"""The stream model of pytorch/torchtitan PR #4032, whole: inputs in, a lane
table and Q out. Pure functions, no I/O.

HIP gives each new stream of a priority its own hardware queue until
``GPU_MAX_HW_QUEUES`` exist, then shares the least-used one (ROCm's clr,
``rocdevice.cpp``). Each *lane* below is a stream that must not share a queue
with another for its work to overlap.

Two steps. :func:`read_inputs` reads a config's fields as the PR reads them
(cudagraph on, MoE by the model table) into :class:`Inputs`, which a launcher
hands to its workers. :class:`Recommendation` applies the model to the inputs
and the world size (``data_parallel_shard_degree = -1`` resolved as torchtitan's
``ParallelDims`` does): every lane, counted or not, with the facts that decided
it, and Q. Every way to a value goes through it; ``explain`` only formats it.

Beside the lane table, the streams the model leaves out
(:attr:`Recommendation.left_out`): GPU streams torchtitan 0.3.0 starts for some
configs that PR #4032 has no lane for. They never change Q, which stays the
PR's; why Q leaves each out, and the ``verify`` command that settles it, are
``_left_out``'s (said by ``explain``, ``doctor`` and the verbose line only).
"""

from __future__ import annotations

from ._config import ConfigError
from ._environ import WORLD_SIZE

TYPE_CHECKING = False  # not typing's: start-up imports as little as it can
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any

    from ._config import Setting

#: Models whose every flavor is a mixture of experts (TOML era, by ``model.name``).
MOE_MODELS = frozenset({"deepseek_v3", "llama4", "gpt_oss"})
#: Models with both dense and MoE flavors: the MoE flavors.
MOE_FLAVORS = {"qwen3": frozenset({"debugmodel_moe", "30B-A3B", "235B-A22B"})}
#: Models known to be dense (qwen3 is dense outside ``MOE_FLAVORS``).
DENSE_MODELS = frozenset({"llama3", "llama3_ft", "flux", "vlm", "qwen3"})

#: The PR's graph-trainer pass whose presence in ``disable_passes`` turns
#: cudagraph off; ``"cudagraph"`` in ``compile.passes`` turned it on in the TOML
#: era's ``compiler_toolkit``.
CUDAGRAPH_PASS = "cudagraph_pass"
CUDAGRAPH_TOOLKIT_PASS = "cudagraph"
#: graph_trainer's pass that gives the expert all-to-alls a process group of
#: their own (``ep_process_group_pass.py``); ``disable_passes`` may name it.
ISOLATE_EP_PASS = "isolate_ep_process_group_pass"

#: How MoE was decided: the model table, the expert degree (a model the table
#: does not know), ``MoE.Config`` in the model spec, or given by the caller.
MOE_FROM = ("table", "expert degree", "traverse", "given")

SHARD = "parallelism.data_parallel_shard_degree"
REPLICATE = "parallelism.data_parallel_replicate_degree"
TENSOR = "parallelism.tensor_parallel_degree"
CONTEXT = "parallelism.context_parallel_degree"
PIPELINE = "parallelism.pipeline_parallel_degree"
EXPERT = "parallelism.expert_parallel_degree"
OVERLAP = "compile.enable_fsdp_ag_rs_overlap"
ASYNC_TP_TOML = "parallelism.enable_async_tensor_parallel"
ASYNC_TP = "compile.enable_async_tensor_parallel"
EP_OVERLAP = "compile.ep_overlap.enabled"
NO_CUDA_GRAPHS = "training.disable_cuda_graphs"


#: The kinds of the model's inputs: a parallel degree (>= 1), the shard degree
#: (>= 1, or -1: all the ranks left), a flag, or one of a few words.
DEGREE, SHARD_DEGREE, FLAG = "degree", "shard degree", "flag"
#: Each input of the model, with its kind: one table for the inputs' text form.
INPUT_KINDS: dict[str, str | tuple[str, ...]] = {
    "dp_shard": SHARD_DEGREE, "dp_replicate": DEGREE, "tp": DEGREE, "cp": DEGREE,
    "pp": DEGREE, "ep": DEGREE, "moe": FLAG, "moe_from": MOE_FROM,
    "cudagraph": FLAG, "overlap": FLAG,
    # what the streams the model leaves out depend on
    "async_tp": FLAG, "dist_gemm": FLAG, "ep_isolation": FLAG,
    "trainer_cudagraph": FLAG,
}  # fmt: skip


class Inputs:
    """What the model needs of a job: the parallel degrees as configured
    (``dp_shard`` may be ``-1``), whether the model is MoE (and how that was
    decided), whether cudagraph and the FSDP overlap are on; and, for the
    streams it leaves out, whether async TP is asked for, the model has
    dist-GEMM projections, graph_trainer isolates the expert all-to-alls, and
    the core trainer asks for CUDA graphs."""

    __slots__ = tuple(sorted(INPUT_KINDS))

    def __init__(
        self,
        *,
        dp_shard: int = -1,
        dp_replicate: int = 1,
        tp: int = 1,
        cp: int = 1,
        pp: int = 1,
        ep: int = 1,
        moe: bool = False,
        moe_from: str = "given",
        cudagraph: bool = False,
        overlap: bool = False,
        async_tp: bool = False,
        dist_gemm: bool = False,
        ep_isolation: bool = False,
        trainer_cudagraph: bool = False,
    ) -> None:
        self.dp_shard = dp_shard
        self.dp_replicate = dp_replicate
        self.tp = tp
        self.cp = cp
        self.pp = pp
        self.ep = ep
        self.moe = moe
        self.moe_from = moe_from
        self.cudagraph = cudagraph
        self.overlap = overlap
        self.async_tp = async_tp
        """``enable_async_tensor_parallel``: the TOML era's in ``parallelism``,
        torchtitan 0.3.0's in ``compile``."""
        self.dist_gemm = dist_gemm
        """The model spec holds dist-GEMM projections (``tp_gemm_backend=
        "dist_gemm"``): only a ``--module`` evaluation looks."""
        self.ep_isolation = ep_isolation
        """graph_trainer's EP overlap runs ``isolate_ep_process_group_pass``."""
        self.trainer_cudagraph = trainer_cudagraph
        """The core trainer asks for CUDA graphs (``training.disable_cuda_graphs``
        false)."""

    def as_dict(self) -> dict[str, object]:
        return {name: getattr(self, name) for name in sorted(self.__slots__)}

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Inputs):
            return NotImplemented
        return self.as_dict() == other.as_dict()

    def __repr__(self) -> str:
        fields = ", ".join(f"{k}={v!r}" for k, v in self.as_dict().items())
        return f"Inputs({fields})"


def moe_by_table(
    name: str, flavor: str, expert_parallel_degree: int
) -> tuple[bool, str]:
    """Whether a TOML-era model (by ``model.name``) has experts, and how that was
    decided. Experiments prefix a name (``simple_fsdp.deepseek_v3``): only its last
    dotted component names the model. A model the table does not know counts as
    MoE when launched with expert parallelism, which means nothing on a dense model.
    """
    base = name.rpartition(".")[2]
    if base in MOE_MODELS or flavor in MOE_FLAVORS.get(base, ()):
        return True, "table"
    if base in DENSE_MODELS:
        return False, "table"
    return expert_parallel_degree > 1, "expert degree"


def read_inputs(
    settings: Mapping[str, Setting],
    moe: tuple[bool, str] | None = None,
    *,
    toolkit_passes: bool = True,
    dist_gemm: bool = False,
) -> Inputs:
    """The model's inputs from a config's fields, read as PR #4032 reads a
    config. ``moe`` is ``(is_moe, how)`` where the caller knows (the registry
    form looks into the model spec); else the model table decides.
    ``dist_gemm``: the model spec holds dist-GEMM projections (the registry
    form looks; a TOML job config names none).

    Cudagraph is on as the PR reads it, ``compile.enable_passes`` and no
    ``cudagraph_pass`` in ``compile.disable_passes``; with ``toolkit_passes``
    (a TOML launch: its form's ``_argv.Form.toolkit_passes``), also with
    ``"cudagraph"`` in ``compile.passes`` (the TOML era's
    ``compiler_toolkit``). A ``--module`` launch (torchtitan 0.3.0, whose
    ``compile.passes`` means something else) reads the PR's rule alone.

    For the streams the model leaves out, async TP is either era's field (the
    other is absent there, so its default); the expert all-to-alls are
    isolated where graph_trainer runs the pass: ``compile.ep_overlap.enabled``,
    the passes on and ``isolate_ep_process_group_pass`` not disabled."""

    def get(name: str) -> Any:
        return settings[name].value

    ep = get(EXPERT)
    if moe is None:
        moe = moe_by_table(get("model.name"), get("model.flavor"), ep)
    cudagraph = get("compile.enable_passes") and (
        CUDAGRAPH_PASS not in get("compile.disable_passes")
    )
    if toolkit_passes:
        cudagraph = cudagraph or CUDAGRAPH_TOOLKIT_PASS in get("compile.passes")
    isolation = (
        get(EP_OVERLAP)
        and get("compile.enable_passes")
        and (ISOLATE_EP_PASS not in get("compile.disable_passes"))
    )
    return Inputs(
        dp_shard=get(SHARD),
        dp_replicate=get(REPLICATE),
        tp=get(TENSOR),
        cp=get(CONTEXT),
        pp=get(PIPELINE),
        ep=ep,
        moe=moe[0],
        moe_from=moe[1],
        cudagraph=bool(cudagraph),
        overlap=get(OVERLAP),
        async_tp=get(ASYNC_TP_TOML) or get(ASYNC_TP),
        dist_gemm=dist_gemm,
        ep_isolation=bool(isolation),
        trainer_cudagraph=not get(NO_CUDA_GRAPHS),
    )


# The lane table.

#: The facts a lane depends on, and the settings each fact reads.
FACT_KEYS = {
    "fsdp": (SHARD,),
    "overlap": (OVERLAP,),
    "moe": ("model.name", "model.flavor"),
    "expert": (EXPERT,),
    "tensor": (TENSOR,),
    "context": (CONTEXT,),
    "cudagraph": ("compile.enable_passes", "compile.disable_passes", "compile.passes"),
    "async_tp": (ASYNC_TP_TOML, ASYNC_TP),
    "dist_gemm": (),  # the model spec's projections, no field
    "ep_isolation": (EP_OVERLAP, "compile.enable_passes", "compile.disable_passes"),
    "trainer_cudagraph": (NO_CUDA_GRAPHS,),
}


#: The fewest lanes the model counts (compute, all_reduce: every config's),
#: and its largest Q (every lane a config can turn on at once: 7).
#: tests/unit/test_model.py holds both to the lane table.
MIN_LANES = 2
MAX_QUEUES = 8


def queues_for(n_lanes: int) -> int:
    """The next power of two at or above ``n_lanes`` (the PR's rounding; HIP
    itself needs only ``Q >= n_lanes``)."""
    return 1 << (max(n_lanes, 1) - 1).bit_length()


def resolve_shard(inputs: Inputs, world_size: int | None) -> int | None:
    """``data_parallel_shard_degree``, ``-1`` resolved as torchtitan's
    ``ParallelDims`` does, ``WORLD_SIZE // (dp_replicate * cp * tp * pp)``;
    None for ``-1`` where the world size is unknown (the launcher).
    ``ConfigError`` (named after ``WORLD_SIZE``) where ``ParallelDims._validate``
    refuses the job: the degrees' product is not the world size (was: a Q, and
    no word, for a job torchtitan will refuse)."""
    others = inputs.dp_replicate * inputs.cp * inputs.tp * inputs.pp
    shard = inputs.dp_shard
    if shard == -1:
        if world_size is None:
            return None
        shard = world_size // others
    if world_size is not None and (shard < 1 or shard * others != world_size):
        raise ConfigError(
            f"dp_replicate({inputs.dp_replicate}) * dp_shard({shard}) *"
            f" cp({inputs.cp}) * tp({inputs.tp}) * pp({inputs.pp}) is not"
            f" {world_size} ranks: torchtitan's ParallelDims refuses the job",
            WORLD_SIZE,
        )
    return shard


class Recommendation:
    """Q for a job, with everything that led to it."""

    __slots__ = ("dp_shard", "facts", "inputs", "lanes", "left_out",
                 "left_out_lanes", "queues", "settings", "table", "unknown",
                 "world_size")  # fmt: skip

    def __init__(
        self,
        inputs: Inputs,
        world_size: int | None = None,
        settings: Mapping[str, Setting] | None = None,
        unknown: tuple[ConfigError, ...] = (),
    ) -> None:
        self.inputs = inputs
        """What the stream model was given."""
        self.world_size = world_size
        self.settings: dict[str, Setting] = dict(settings or {})
        """Every field read, with its value and where it came from (empty where
        only the inputs are known: a worker of a ``--module`` launch)."""
        self.unknown = unknown
        """What torchtitan refuses among the inputs the model does not read
        (``_argv.unknown_inputs``: unknown flags, unknown TOML keys), each
        group one ``ConfigError`` naming them, said and not raised: Q is
        read from the fields the model reads."""
        self.dp_shard = resolve_shard(inputs, world_size)
        """The shard degree, ``-1`` resolved; None where it cannot be."""
        # Without the world size a -1 counts as active, as in the PR.
        self.facts = {
            "fsdp": self.dp_shard is None or self.dp_shard > 1,
            "overlap": inputs.overlap,
            "moe": inputs.moe,
            "expert": inputs.ep > 1,
            "tensor": inputs.tp > 1,
            "context": inputs.cp > 1,
            "cudagraph": inputs.cudagraph,
            "async_tp": inputs.async_tp,
            "dist_gemm": inputs.dist_gemm,
            "ep_isolation": inputs.ep_isolation,
            "trainer_cudagraph": inputs.trainer_cudagraph,
        }
        """Each fact the lanes (and the streams left out) depend on, true or
        false."""
        f = self.facts
        self.table: tuple[tuple[str, bool, tuple[str, ...]], ...] = (
            ("compute", True, ()),
            ("all_reduce", True, ()),
            ("dense_all_gather", f["fsdp"] and f["overlap"], ("fsdp", "overlap")),
            ("reduce_scatter", f["fsdp"] and f["overlap"], ("fsdp", "overlap")),
            ("fsdp_comm", f["fsdp"] and not f["overlap"], ("fsdp", "overlap")),
            # Expert all-gather and all-to-all never overlap: one lane.
            ("expert_comm", f["moe"] and f["expert"], ("moe", "expert")),
            ("tp_all_gather", f["tensor"], ("tensor",)),
            ("cp_all_gather", f["context"], ("context",)),
            ("cudagraph_capture", f["cudagraph"] and not f["overlap"],
             ("cudagraph", "overlap")),
        )  # fmt: skip
        """Every lane of the model, in the PR's order, counted or not: its name,
        whether it is counted, and the facts (names in :data:`FACT_KEYS`) that
        decided it."""
        self.lanes = tuple(name for name, counted, _ in self.table if counted)
        """The GPU streams of a step that should each have a queue, in order."""
        self.queues = queues_for(len(self.lanes))
        """The value for ``GPU_MAX_HW_QUEUES``: a power of two."""
        self.left_out: tuple[tuple[str, bool, tuple[str, ...]], ...] = (
            ("symm_mem", f["tensor"] and (f["async_tp"] or f["dist_gemm"]),
             ("tensor", "async_tp", "dist_gemm")),
            ("ep_extra", f["moe"] and f["expert"] and f["ep_isolation"],
             ("moe", "expert", "ep_isolation")),
            # Never on ROCm, whatever the config (_left_out.LEFT_OUT says why).
            ("trainer_cudagraph", False, ("trainer_cudagraph",)),
        )  # fmt: skip
        """Every stream the model leaves out (``_left_out.LEFT_OUT``), as the lane
        table: its name, whether this config turns it on, the facts that
        decided it. Not counted in Q."""
        self.left_out_lanes = tuple(name for name, on, _ in self.left_out if on)
        """The streams left out that this config turns on, in order."""

    def __repr__(self) -> str:
        return f"Recommendation(queues={self.queues}, lanes={self.lanes!r})"


class Config:
    """A job's config as the model reads it: the model's inputs and every field
    read, with its value and where it came from. A TOML launch's is read in the
    process (``_decision.recommend_launch``); a ``--module`` launch's comes from
    its evaluation (the child, or the cache)."""

    __slots__ = ("inputs", "settings")

    def __init__(self, inputs: Inputs, settings: Mapping[str, Setting]) -> None:
        self.inputs = inputs
        self.settings: dict[str, Setting] = dict(settings)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Config):
            return NotImplemented
        return (self.inputs, self.settings) == (other.inputs, other.settings)

    def __repr__(self) -> str:
        return f"Config({self.inputs!r}, {len(self.settings)} settings)"


# The inputs as one line of text: what a --module launcher hands its workers
# (``ROCM_HWQ_AUTOSET_INPUTS``), what the cache keeps. Read back value by value:
# it comes from another process, a file or the environment.


def encode_inputs(inputs: Inputs) -> str:
    """One line of ``name=value`` pairs."""
    return ",".join(
        f"{k}={int(v) if isinstance(v, bool) else v}"
        for k, v in inputs.as_dict().items()
    )


def decode_inputs(text: str) -> Inputs:
    """The inputs :func:`encode_inputs` wrote; ``ConfigError`` for anything else."""
    fields: dict[str, str] = {}
    for pair in text.split(","):
        name, eq, value = pair.partition("=")
        if not eq or name not in INPUT_KINDS or name in fields:
            raise ConfigError(f"{pair[:40]!r} is not one of the model's inputs")
        fields[name] = value
    if len(fields) != len(INPUT_KINDS):
        raise ConfigError("some of the model's inputs are missing")
    values = {name: _decoded(name, raw) for name, raw in fields.items()}
    return Inputs(**values)


def _decoded(name: str, raw: str) -> Any:
    kind = INPUT_KINDS[name]
    if kind == FLAG:
        if raw not in ("0", "1"):
            raise ConfigError(f"{name}={raw[:40]!r} is not 0 or 1")
        return raw == "1"
    if kind in (DEGREE, SHARD_DEGREE):
        digits = raw[1:] if kind == SHARD_DEGREE and raw == "-1" else raw
        if not (digits.isdigit() and digits.isascii()) or int(raw) == 0:
            raise ConfigError(f"{name}={raw[:40]!r} is not a degree")
        return int(raw)  # >= 1, or the shard degree's -1
    if raw not in kind:
        raise ConfigError(f"{name}={raw[:40]!r} is unknown")
    return raw

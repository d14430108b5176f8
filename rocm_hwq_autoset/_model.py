"""The stream model of pytorch/torchtitan PR #4032, whole: config in, Q out.

Every input the model derives from a config lives here (FSDP active, the ``-1``
shard degree resolved, cudagraph on, MoE), beside the lanes and Q. Pure
functions, no I/O; ``explain`` shows what they derived instead of re-deriving it.

HIP gives each new stream of a priority its own hardware queue until
``GPU_MAX_HW_QUEUES`` exist, then shares the least-used one (ROCm's clr,
``rocdevice.cpp``). Each *lane* below is a stream that must not share a queue
with another for its work to overlap.
"""

from __future__ import annotations

from collections.abc import Mapping  # loaded by the TOML parser anyway

from ._launch import Setting, cli_overrides, from_object, merge

TYPE_CHECKING = False  # not typing's: start-up imports as little as it can
if TYPE_CHECKING:
    from collections.abc import Sequence
    from typing import Any

#: Models whose every flavor is a mixture of experts (TOML era, by ``model.name``).
MOE_MODELS = frozenset({"deepseek_v3", "llama4", "gpt_oss"})
#: Models with both dense and MoE flavors: the MoE flavors.
MOE_FLAVORS = {"qwen3": frozenset({"debugmodel_moe", "30B-A3B", "235B-A22B"})}
#: Models known to be dense (qwen3 is dense outside ``MOE_FLAVORS``).
DENSE_MODELS = frozenset({"llama3", "llama3_ft", "flux", "vlm", "qwen3"})

#: Every lane of the model, in the PR's order.
ALL_LANES = (
    "compute", "all_reduce", "dense_all_gather", "reduce_scatter", "fsdp_comm",
    "expert_comm", "tp_all_gather", "cp_all_gather", "cudagraph_capture",
)  # fmt: skip
#: The PR's graph-trainer pass whose presence in ``disable_passes`` turns
#: cudagraph off; ``"cudagraph"`` in ``compile.passes`` turned it on in the TOML
#: era's ``compiler_toolkit``.
CUDAGRAPH_PASS = "cudagraph_pass"
CUDAGRAPH_TOOLKIT_PASS = "cudagraph"


class Inputs:
    """What the model knows about a training job: the PR's inputs, and how two
    of them were derived."""

    __slots__ = (
        "context_parallel_degree", "cudagraph", "dp_shard_active", "dp_shard_degree",
        "expert_parallel_degree", "fsdp_ag_rs_overlap", "moe", "moe_from",
        "tensor_parallel_degree",
    )  # fmt: skip

    def __init__(
        self,
        *,
        dp_shard_active: bool,
        moe: bool,
        expert_parallel_degree: int = 1,
        tensor_parallel_degree: int = 1,
        context_parallel_degree: int = 1,
        cudagraph: bool = False,
        fsdp_ag_rs_overlap: bool = False,
        dp_shard_degree: int | None = None,
        moe_from: str = "given",
    ) -> None:
        self.dp_shard_active = dp_shard_active
        self.moe = moe
        self.expert_parallel_degree = expert_parallel_degree
        self.tensor_parallel_degree = tensor_parallel_degree
        self.context_parallel_degree = context_parallel_degree
        self.cudagraph = cudagraph
        self.fsdp_ag_rs_overlap = fsdp_ag_rs_overlap
        self.dp_shard_degree = dp_shard_degree
        """The shard degree, ``-1`` resolved; None where the world size is unknown."""
        self.moe_from = moe_from
        """How MoE was decided: ``table``, ``expert degree`` (a model the table
        does not know), ``traverse`` (``MoE.Config`` in the model spec), ``given``."""

    def as_dict(self) -> dict[str, object]:
        return {name: getattr(self, name) for name in sorted(self.__slots__)}

    def __repr__(self) -> str:
        fields = ", ".join(f"{k}={v!r}" for k, v in self.as_dict().items())
        return f"Inputs({fields})"


def lanes(job: Inputs) -> tuple[str, ...]:
    """The independent GPU streams of one training step, in the PR's order."""
    out = ["compute", "all_reduce"]
    if job.dp_shard_active:
        if job.fsdp_ag_rs_overlap:
            out += ["dense_all_gather", "reduce_scatter"]
        else:
            out.append("fsdp_comm")
    if job.moe and job.expert_parallel_degree > 1:
        # Expert all-gather and all-to-all never overlap: one lane.
        out.append("expert_comm")
    if job.tensor_parallel_degree > 1:
        out.append("tp_all_gather")
    if job.context_parallel_degree > 1:
        out.append("cp_all_gather")
    if job.cudagraph and not job.fsdp_ag_rs_overlap:
        out.append("cudagraph_capture")
    return tuple(out)


def queues_for(n_lanes: int) -> int:
    """The next power of two at or above ``n_lanes`` (the PR's rounding; HIP
    itself needs only ``Q >= n_lanes``)."""
    return 1 << (max(n_lanes, 1) - 1).bit_length()


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


def inputs(
    settings: Mapping[str, Setting],
    world_size: int | None = None,
    moe: tuple[bool, str] | None = None,
) -> Inputs:
    """The model's inputs, read as PR #4032 reads a config.

    ``data_parallel_shard_degree = -1`` resolves as torchtitan's ``ParallelDims``
    does, ``WORLD_SIZE // (dp_replicate * cp * tp * pp)``, when the world size is
    known; without it (the launcher) it counts as active, as in the PR. ``moe``
    is ``(is_moe, how)`` when the caller knows; else the model table decides.
    """

    def get(name: str) -> Any:
        return settings[name].value

    ep = get("parallelism.expert_parallel_degree")
    tp = get("parallelism.tensor_parallel_degree")
    cp = get("parallelism.context_parallel_degree")
    dp_shard = get("parallelism.data_parallel_shard_degree")
    resolved = None if dp_shard == -1 else dp_shard
    if dp_shard == -1 and world_size is not None:
        others = get("parallelism.data_parallel_replicate_degree") * cp * tp
        resolved = world_size // (others * get("parallelism.pipeline_parallel_degree"))
    if moe is None:
        moe = moe_by_table(get("model.name"), get("model.flavor"), ep)
    cudagraph = (
        get("compile.enable_passes")
        and CUDAGRAPH_PASS not in get("compile.disable_passes")
    ) or CUDAGRAPH_TOOLKIT_PASS in get("compile.passes")
    return Inputs(
        dp_shard_active=resolved is None or resolved > 1,
        dp_shard_degree=resolved,
        moe=moe[0],
        moe_from=moe[1],
        expert_parallel_degree=ep,
        tensor_parallel_degree=tp,
        context_parallel_degree=cp,
        cudagraph=bool(cudagraph),
        fsdp_ag_rs_overlap=get("compile.enable_fsdp_ag_rs_overlap"),
    )


class Recommendation:
    """Q for a job, with everything that led to it."""

    __slots__ = ("inputs", "lanes", "queues", "settings")

    def __init__(self, settings: dict[str, Setting], job: Inputs) -> None:
        self.settings = settings
        """Every field read, with its value and where it came from."""
        self.inputs = job
        """What the stream model was given."""
        self.lanes = lanes(job)
        """The GPU streams of a step that should each have a queue, in order."""
        self.queues = queues_for(len(self.lanes))
        """The value for ``GPU_MAX_HW_QUEUES``: a power of two."""

    def __repr__(self) -> str:
        return f"Recommendation(queues={self.queues}, lanes={self.lanes!r})"


def recommend(
    config: Mapping[str, Any] | object | None = None,
    *,
    argv: Sequence[str] = (),
    world_size: int | None = None,
    is_moe: bool | None = None,
) -> Recommendation:
    """``GPU_MAX_HW_QUEUES`` for a torchtitan job, by PR #4032's stream model.

    ``config`` is a parsed TOML job config (a nested mapping), a torchtitan
    config object read by attribute as the PR's ``recommend_gpu_max_hw_queues``
    reads it (``config.parallelism.*``, ``config.compile.*``), or ``None`` for
    torchtitan's defaults. ``argv`` holds training arguments whose overrides of
    the fields the model reads apply as torchtitan applies them; the others are
    ignored. ``world_size`` resolves ``data_parallel_shard_degree = -1``.
    ``is_moe`` overrides the model table (needed for objects without
    ``config.model.name``).

    >>> rec = recommend({"model": {"name": "deepseek_v3"}},
    ...                 argv=["--parallelism.expert_parallel_degree", "2"])
    >>> rec.queues, rec.lanes
    (4, ('compute', 'all_reduce', 'fsdp_comm', 'expert_comm'))

    Raises ``ConfigError`` (a ``ValueError``) when torchtitan would reject the
    input: a wrong type, a degree out of range, a malformed flag; or when
    ``config`` is none of the three.
    """
    overrides = cli_overrides(argv)
    if config is None or isinstance(config, Mapping):
        settings = merge(config, overrides)
    else:
        settings = from_object(config, overrides)
    moe = None if is_moe is None else (is_moe, "given")
    return Recommendation(settings, inputs(settings, world_size, moe))

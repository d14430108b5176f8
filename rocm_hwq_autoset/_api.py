"""The decision as a pure function: a job config in, lanes and Q out."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

from ._argv import cli_overrides
from ._config import Settings, from_object, inputs, merge
from ._stream_model import Inputs, lanes, queues_for


class Recommendation(NamedTuple):
    queues: int
    """The value for ``GPU_MAX_HW_QUEUES``: a power of two."""
    lanes: tuple[str, ...]
    """The GPU streams of a step that should each have a queue, in the PR's order."""
    inputs: Inputs
    """What the stream model was given."""
    settings: Settings
    """Every field read, with its value and where it came from."""


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
    input: a wrong type, a degree out of range, a malformed flag.
    """
    overrides = cli_overrides(argv)
    if config is None or isinstance(config, Mapping):
        settings = merge(config, overrides)
    else:
        settings = from_object(config, overrides)
    job = inputs(settings, world_size, is_moe)
    chosen = lanes(job)
    return Recommendation(queues_for(len(chosen)), chosen, job, settings)

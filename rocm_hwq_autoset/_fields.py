"""The torchtitan job-config fields the stream model reads, with their defaults.

Names, types and defaults are those of torchtitan's ``JobConfig`` in the TOML era
(before pytorch/torchtitan #2386). The ``compile`` fields after the parallelism
degrees belong to the graph trainer (pytorch/torchtitan PR #4032) and to its
predecessor ``compiler_toolkit``; the base config does not have them, so their
defaults are those the PR uses when a config lacks them.
"""

from __future__ import annotations

from typing import NamedTuple, Union

#: A field's value: ints for degrees, bools for flags, strings, lists of strings.
Value = Union[bool, int, str, tuple[str, ...]]


class Field(NamedTuple):
    key: str
    """``section.name``, as in TOML and on the command line."""
    kind: str
    """``int``, ``bool``, ``str`` or ``list`` (of strings)."""
    default: Value


FIELDS: dict[str, Field] = {
    f.key: f
    for f in (
        Field("model.name", "str", "llama3"),
        Field("model.flavor", "str", "debugmodel"),
        Field("parallelism.data_parallel_shard_degree", "int", -1),
        Field("parallelism.data_parallel_replicate_degree", "int", 1),
        Field("parallelism.tensor_parallel_degree", "int", 1),
        Field("parallelism.context_parallel_degree", "int", 1),
        Field("parallelism.pipeline_parallel_degree", "int", 1),
        Field("parallelism.expert_parallel_degree", "int", 1),
        Field("compile.enable_passes", "bool", False),
        Field("compile.disable_passes", "list", ()),
        Field("compile.enable_fsdp_ag_rs_overlap", "bool", False),
        Field("compile.passes", "list", ()),
    )
}

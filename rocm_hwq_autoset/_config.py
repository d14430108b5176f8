"""Settings: the fields the model reads, merged as torchtitan merges them.

Precedence is torchtitan's: command line > config > defaults. Each value keeps
where it came from, so a user can be told why a lane is there.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NamedTuple

from ._errors import ConfigError
from ._fields import FIELDS, Field, Value
from ._models import is_moe
from ._stream_model import Inputs

DEFAULT, CLI = "default", "CLI"


class Setting(NamedTuple):
    value: Value
    source: str
    """``default``, ``CLI``, or the name of the config it came from (``TOML``)."""


Settings = dict[str, Setting]
_MISSING = object()


def merge(
    config: Mapping[str, Any] | None,
    overrides: Mapping[str, Value],
    *,
    source: str = "TOML",
) -> Settings:
    """Our fields from a nested config mapping (TOML-shaped) and CLI overrides.

    Tables, dotted keys and inline tables all parse to the same nesting.
    Raises ``ConfigError`` for a value of the wrong type or out of range.
    """
    settings: Settings = {}
    for key, field in FIELDS.items():
        if key in overrides:
            settings[key] = Setting(overrides[key], CLI)
            continue
        found = _lookup(config, key)
        if found is _MISSING:
            settings[key] = Setting(field.default, DEFAULT)
        else:
            settings[key] = Setting(_checked(field, found), source)
    _check_degrees(settings)
    return settings


def from_object(config: object, overrides: Mapping[str, Value]) -> Settings:
    """Our fields from a config object read by attribute, as PR #4032 reads
    ``Trainer.Config`` (``config.parallelism.*``, ``config.compile.*``)."""
    settings: Settings = {}
    for key, field in FIELDS.items():
        section, _, name = key.partition(".")
        holder = getattr(config, section, None)
        if holder is None and section == "model":  # Trainer.Config: model_spec
            holder = getattr(config, "model_spec", None)
        found = getattr(holder, name, _MISSING)
        if key in overrides:
            settings[key] = Setting(overrides[key], CLI)
        elif found is _MISSING or found is None:
            # A config object with no ``model.name`` (registry era) names no
            # model: MoE is then decided by ``is_moe`` or by the degree.
            default = "" if section == "model" else field.default
            settings[key] = Setting(default, DEFAULT)
        else:
            if field.kind == "list" and isinstance(found, list):
                found = tuple(found)
            settings[key] = Setting(_checked(field, found), "config")
    _check_degrees(settings)
    return settings


def inputs(
    settings: Settings,
    world_size: int | None = None,
    moe: bool | None = None,
) -> Inputs:
    """The stream model's inputs, read as PR #4032 reads a config.

    ``data_parallel_shard_degree = -1`` resolves as torchtitan's ``ParallelDims``
    does when the world size is known; without it, it counts as active (the PR).
    """

    def get(key: str) -> Any:
        return settings[key].value

    degree = "parallelism.{}_degree".format
    ep, tp, cp = (
        get(degree("expert_parallel")),
        get(degree("tensor_parallel")),
        get(degree("context_parallel")),
    )
    dp_shard = get(degree("data_parallel_shard"))
    if dp_shard == -1 and world_size is not None:
        dp_shard = world_size // (
            get(degree("data_parallel_replicate"))
            * cp
            * tp
            * get(degree("pipeline_parallel"))
        )
        active = dp_shard > 1
    else:
        active = dp_shard == -1 or dp_shard > 1
    if moe is None:
        moe = is_moe(get("model.name"), get("model.flavor"), ep)
    cudagraph = (
        get("compile.enable_passes")
        and "cudagraph_pass" not in get("compile.disable_passes")
    ) or "cudagraph" in get("compile.passes")  # TOML-era compiler_toolkit switch
    return Inputs(
        dp_shard_active=active,
        moe=moe,
        expert_parallel_degree=ep,
        tensor_parallel_degree=tp,
        context_parallel_degree=cp,
        cudagraph=bool(cudagraph),
        fsdp_ag_rs_overlap=get("compile.enable_fsdp_ag_rs_overlap"),
    )


def _lookup(config: Mapping[str, Any] | None, key: str) -> Any:
    if config is None:
        return _MISSING
    section_name, _, name = key.partition(".")
    section = config.get(section_name, _MISSING)
    if section is _MISSING:
        return _MISSING
    if not isinstance(section, Mapping):
        raise ConfigError(
            f"[{section_name}] is a {type(section).__name__}, not a table"
        )
    return section.get(name, _MISSING)


_KIND_NAMES = {
    "int": "an integer",
    "bool": "true or false",
    "str": "a string",
    "list": "a list of strings",
}


def _checked(field: Field, value: Any) -> Value:
    """``value`` if it has the field's type (bools are not integers here)."""
    if field.kind == "list":
        ok = isinstance(value, (list, tuple)) and all(isinstance(x, str) for x in value)
    elif field.kind == "int":
        ok = isinstance(value, int) and not isinstance(value, bool)
    else:
        ok = isinstance(value, bool if field.kind == "bool" else str)
    if not ok:
        want = _KIND_NAMES[field.kind]
        raise ConfigError(f"{field.key} = {_short(value)} is not {want}")
    return tuple(value) if field.kind == "list" else value


def _check_degrees(settings: Settings) -> None:
    """torchtitan's ``ParallelDims`` rejects these; so do we, naming the field."""
    for key, (value, source) in settings.items():
        if not key.endswith("_degree") or not isinstance(value, int):
            continue
        shard = key.endswith("data_parallel_shard_degree")
        if value >= 1 or (shard and value == -1):
            continue
        allowed = "-1 or >= 1" if shard else ">= 1"
        raise ConfigError(f"{key} = {value} ({source}) must be {allowed}")


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."

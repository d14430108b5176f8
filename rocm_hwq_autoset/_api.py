"""The public API: :func:`recommend`, the stream model for a config in hand;
and :func:`from_object`, a config object read as PR #4032 reads it, which the
``--module`` evaluation's registry reads too (a TOML launch never does)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ._argv import MODULE, TOML, cli_overrides, unknown_inputs
from ._config import (
    CLI,
    CONFIG,
    DEFAULT,
    FIELDS,
    SECTIONS,
    ConfigError,
    Setting,
    check_degrees,
    check_value,
    merge,
)
from ._model import Recommendation, read_inputs

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence

    from ._config import Value


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
    ignored: an unknown one, or an unknown key of a mapping, is named in the
    recommendation's ``unknown``. ``world_size`` resolves
    ``data_parallel_shard_degree = -1``.
    ``is_moe`` overrides the model table (needed for objects without
    ``config.model.name``).

    >>> rec = recommend({"model": {"name": "deepseek_v3"}},
    ...                 argv=["--parallelism.expert_parallel_degree", "2"])
    >>> rec.queues, rec.lanes
    (4, ('compute', 'all_reduce', 'fsdp_comm', 'expert_comm'))

    A mapping is read as a TOML job config, with the TOML era's ``compile.passes``
    rule for cudagraph; an object as torchtitan 0.3.0's config, by the PR's
    rule alone (``_model.read_inputs``).

    Raises ``ConfigError`` (a ``ValueError``) when torchtitan would reject the
    input: a wrong type, a degree out of range, a malformed flag; when
    ``config`` is none of the three, or a mapping with a key that is no
    string; or when ``world_size`` is not None nor a
    positive ``int`` (``True`` is no world size).
    """
    if world_size is not None and (
        type(world_size) is bool or not isinstance(world_size, int) or world_size < 1
    ):
        raise ConfigError(
            f"{world_size!r} is not a positive integer", "recommend(world_size=...)"
        )
    if isinstance(argv, (str, bytes)) or not all(isinstance(a, str) for a in argv):
        raise ConfigError(  # a string would be read one character at a time
            "is not a list of arguments (split a command line first)",
            "recommend(argv=...)",
        )
    overrides = cli_overrides(argv)
    unknown: tuple[ConfigError, ...] = ()
    if config is None or isinstance(config, Mapping):
        _names_only(config)
        unknown = unknown_inputs(argv, config, "")
        settings = merge(config, overrides)
        form = TOML
    else:
        settings = from_object(config, overrides)
        form = MODULE
    moe = None if is_moe is None else (is_moe, "given")
    inputs = read_inputs(settings, moe, toolkit_passes=form.toolkit_passes)
    return Recommendation(inputs, world_size, settings, unknown)


def _names_only(table: Mapping[Any, Any] | None, path: str = "") -> None:
    """Refuse a mapping with a key that is no string, at any depth: no TOML
    job config has one (a key is always a name)."""
    for key, value in (table or {}).items():
        if not isinstance(key, str):
            where = f"[{path}]" if path else "the top table"
            raise ConfigError(
                f"key {key!r} of {where} is not a string", "recommend(config=...)"
            )
        if isinstance(value, Mapping):
            _names_only(value, f"{path}.{key}" if path else key)


def from_object(config: object, overrides: Mapping[str, Value]) -> dict[str, Setting]:
    """The fields from a config object read by attribute, as PR #4032 reads
    ``Trainer.Config`` (``config.parallelism.*``, ``config.compile.*``)."""
    if not any(hasattr(config, s) for s in ("model", "model_spec", *SECTIONS[1:])):
        raise ConfigError(
            f"a {type(config).__name__} is not a job config: expected a mapping"
            " (parsed TOML), a torchtitan config object or None"
        )
    settings: dict[str, Setting] = {}
    for key, (_, default) in FIELDS.items():
        section, _, name = key.partition(".")
        holder = getattr(config, section, None)
        if holder is None and section == "model":  # Trainer.Config: model_spec
            holder = getattr(config, "model_spec", None)
        found = holder
        for part in name.split("."):  # a nested table's field: one at a time
            found = getattr(found, part, None)
        if key in overrides:
            settings[key] = Setting(overrides[key], CLI)
        elif found is None:
            # A config object with no ``model.name`` (registry era) names no
            # model: MoE is then decided by the caller or by the degree.
            settings[key] = Setting("" if section == "model" else default, DEFAULT)
        else:  # check_value makes a list a tuple
            settings[key] = Setting(check_value(key, found, "config"), CONFIG)
    check_degrees(settings, "config")
    return settings

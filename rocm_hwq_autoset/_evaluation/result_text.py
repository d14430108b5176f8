"""A ``--module`` evaluation's result as text: what the child answers, what
the cache keeps, and the model's inputs a launcher hands its workers
(``ROCM_HWQ_AUTOSET_INPUTS``). Whatever is read back is checked value by
value: it comes from another process, a file or the environment."""

from __future__ import annotations

from typing import Any

from .._config import (
    CLI,
    CONFIG,
    DEFAULT,
    FIELDS,
    TOML,
    ConfigError,
    Setting,
    check_value,
)
from .._model import MOE_FROM, Inputs

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping

    #: The model's inputs and every field with its source.
    Evaluated = tuple[Inputs, dict[str, Setting]]

SOURCES = (DEFAULT, CLI, TOML, CONFIG)
_FLAGS = ("moe", "cudagraph", "overlap")
_DEGREES = ("dp_shard", "dp_replicate", "tp", "cp", "pp", "ep")


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
        if not eq or name not in Inputs.__slots__ or name in fields:
            raise ConfigError(f"{pair[:40]!r} is not one of the model's inputs")
        fields[name] = value
    if len(fields) != len(Inputs.__slots__):
        raise ConfigError("some of the model's inputs are missing")
    if fields["moe_from"] not in MOE_FROM:
        raise ConfigError(f"moe_from={fields['moe_from'][:40]!r} is unknown")
    flags: dict[str, bool] = {}
    for name in _FLAGS:
        if fields[name] not in ("0", "1"):
            raise ConfigError(f"{name}={fields[name][:40]!r} is not 0 or 1")
        flags[name] = fields[name] == "1"
    degrees: dict[str, int] = {}
    for name in _DEGREES:
        raw = fields[name]
        digits = raw[1:] if name == "dp_shard" and raw == "-1" else raw
        if not (digits.isdigit() and digits.isascii()):
            raise ConfigError(f"{name}={raw[:40]!r} is not a degree")
        degrees[name] = int(raw)  # >= 0, or dp_shard's -1
        if degrees[name] == 0:
            raise ConfigError(f"{name}={raw[:40]!r} is not a degree")
    return Inputs(
        moe_from=fields["moe_from"],
        moe=flags["moe"],
        cudagraph=flags["cudagraph"],
        overlap=flags["overlap"],
        **degrees,
    )


def settings_to_json(settings: Mapping[str, Setting]) -> dict[str, list[object]]:
    return {
        key: [s.value, s.source]  # a tuple (a list field's) is a JSON array
        for key, s in settings.items()
    }


def settings_from_json(doc: object) -> dict[str, Setting]:
    """What :func:`settings_to_json` wrote, checked field by field;
    ``ConfigError`` for anything else."""
    if not isinstance(doc, dict) or set(doc) != set(FIELDS):
        raise ConfigError("not the fields the model reads")
    settings = {}
    for key, pair in doc.items():
        if not (isinstance(pair, list) and len(pair) == 2 and pair[1] in SOURCES):
            raise ConfigError("not a value and its source", key)
        settings[key] = Setting(check_value(key, pair[0], ""), pair[1])
    return settings


def encode_result(inputs: Inputs, settings: Mapping[str, Setting]) -> dict[str, Any]:
    """An evaluation's result as the child reports it and the cache keeps it."""
    return {"inputs": encode_inputs(inputs), "settings": settings_to_json(settings)}


def decode_result(doc: Any) -> Evaluated:
    """What :func:`encode_result` wrote; ``ConfigError`` for anything else."""
    if not isinstance(doc, dict) or not isinstance(doc.get("inputs"), str):
        raise ConfigError("not an evaluation's result")
    return decode_inputs(doc["inputs"]), settings_from_json(doc.get("settings"))

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
from .._model import Inputs, decode_inputs, encode_inputs

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping

    from .._model import Evaluated

SOURCES = (DEFAULT, CLI, TOML, CONFIG)


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

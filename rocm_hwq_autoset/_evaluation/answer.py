"""A ``--module`` evaluation's answer as a value, and its one text form, a
JSON document: what the child answers its parent on one line, what a rank
publishes for its peers, and (for a success) what the cache keeps. Encoded and
decoded here only. Whatever is read back is checked value by value, since it
comes from another process or a file; nothing is read back out of a message."""

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
from .._model import Config, decode_inputs, encode_inputs

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping

SOURCES = (DEFAULT, CLI, TOML, CONFIG)
#: How an answer was found: evaluated by this child, taken from the cache's
#: entry, or from the answer another rank of the node published.
EVALUATED, CACHE, PEER = "evaluated", "cache", "peer"
HOWS = (EVALUATED, CACHE, PEER)


class Answer:
    """What an evaluation answers: the config torchtitan built, or
    torchtitan's refusal of it (the config's or the arguments' fault, a
    ``ConfigError`` naming its source), or the package's own failure to get
    either (``failure``, in the words ``_decision.internal_error`` gives it);
    exactly one of them. ``how``: where it came from (:data:`HOWS`)."""

    __slots__ = ("config", "failure", "how", "refusal")

    def __init__(
        self,
        *,
        config: Config | None = None,
        refusal: ConfigError | None = None,
        failure: str | None = None,
        how: str = EVALUATED,
    ) -> None:
        assert [config, refusal, failure].count(None) == 2, "exactly one"
        self.config = config
        self.refusal = refusal
        self.failure = failure
        self.how = how

    def result(self) -> Config | ConfigError:
        """What the launch concludes from: the config, or why there is none
        (the refusal, or the failure), as the hook says it."""
        if self.config is not None:
            return self.config
        if self.refusal is not None:
            return self.refusal
        return ConfigError(str(self.failure))

    def to_json(self) -> dict[str, Any]:
        if self.config is not None:
            return {"config": config_to_json(self.config), "how": self.how}
        if self.refusal is not None:
            refusal = {"reason": self.refusal.reason, "source": self.refusal.source}
            return {"refused": refusal, "how": self.how}
        return {"failed": self.failure, "how": self.how}

    @classmethod
    def from_json(cls, doc: Any) -> Answer:
        """What :meth:`to_json` wrote; ``ConfigError`` for anything else."""
        if not isinstance(doc, dict) or doc.get("how") not in HOWS:
            raise ConfigError("not an evaluation's answer")
        how = doc["how"]
        if "config" in doc:
            return cls(config=config_from_json(doc["config"]), how=how)
        refused = doc.get("refused")
        if isinstance(refused, dict):
            reason, source = refused.get("reason"), refused.get("source")
            if isinstance(reason, str) and isinstance(source, str):
                return cls(refusal=ConfigError(reason, source), how=how)
        if isinstance(doc.get("failed"), str):
            return cls(failure=doc["failed"], how=how)
        raise ConfigError("not an evaluation's answer")

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Answer):
            return NotImplemented
        return self.to_json() == other.to_json()

    def __repr__(self) -> str:
        return f"Answer({self.to_json()!r})"


def config_to_json(config: Config) -> dict[str, Any]:
    """A config as the child answers it and the cache keeps it."""
    return {
        "inputs": encode_inputs(config.inputs),
        "settings": settings_to_json(config.settings),
    }


def config_from_json(doc: Any) -> Config:
    """What :func:`config_to_json` wrote; ``ConfigError`` for anything else."""
    if not isinstance(doc, dict) or not isinstance(doc.get("inputs"), str):
        raise ConfigError("not an evaluation's config")
    return Config(decode_inputs(doc["inputs"]), settings_from_json(doc.get("settings")))


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


#: A check's verdicts on an answer a launch took without evaluating it.
SAME, STALE, UNCHECKED = "same", "stale", "unchecked"


class Verdict:
    """What a check found of an answer a launch took without evaluating it:
    the same (:data:`SAME`), another (:data:`STALE`, with the fresh
    :attr:`answer`), or nothing it could tell (:data:`UNCHECKED`: it failed,
    or it could not run at the lowest priority)."""

    __slots__ = ("answer", "kind")

    def __init__(self, kind: str, answer: Answer | None = None) -> None:
        assert (kind == STALE) is (answer is not None)
        self.kind = kind
        self.answer = answer

    def to_json(self) -> dict[str, Any]:
        doc: dict[str, Any] = {"verdict": self.kind}
        if self.answer is not None:
            doc["answer"] = self.answer.to_json()
        return doc

    @classmethod
    def from_json(cls, doc: Any) -> Verdict:
        """What :meth:`to_json` wrote; ``ConfigError`` for anything else."""
        kind = doc.get("verdict") if isinstance(doc, dict) else None
        if kind == STALE:
            return cls(STALE, Answer.from_json(doc.get("answer")))
        if kind in (SAME, UNCHECKED):
            return cls(kind)
        raise ConfigError("not a check's verdict")

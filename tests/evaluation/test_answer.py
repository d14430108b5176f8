"""An evaluation's answer and a check's verdict as values, and their one text
form: every answer reads back as itself (where it came from too), and
anything else read back (another process's line, a peer's document) is a
``ConfigError``, never another answer or another exception."""

from __future__ import annotations

import json
from typing import Any

import pytest

from rocm_hwq_autoset._config import ConfigError
from rocm_hwq_autoset._evaluation.answer import (
    CACHE,
    EVALUATED,
    HOWS,
    PEER,
    SAME,
    STALE,
    UNCHECKED,
    Answer,
    Verdict,
)
from rocm_hwq_autoset._model import Config
from tests.fake_child import INPUTS, SETTINGS

CONFIG = Config(INPUTS, SETTINGS)
ANSWERS = [
    Answer(config=CONFIG, how=how) for how in HOWS
] + [
    Answer(refusal=ConfigError("no such flavor", "--config"), how=how) for how in HOWS
] + [Answer(failure="internal error", how=how) for how in HOWS]  # fmt: skip


@pytest.mark.parametrize("answer", ANSWERS, ids=repr)
def test_an_answer_reads_back_as_itself(answer: Answer) -> None:
    """Through JSON's text, as the child writes it and the parent reads it."""
    back = Answer.from_json(json.loads(json.dumps(answer.to_json())))
    assert back == answer  # its value, and how it was found


@pytest.mark.parametrize(
    "doc",
    [
        None, [], "config", 3,  # not a document
        {"config": {}},  # no how
        {"failed": "x", "how": "elsewhere"},  # a how no answer has
        {"refused": {"reason": "x"}, "how": EVALUATED},  # no source
        {"refused": {"source": "--config"}, "how": EVALUATED},  # no reason
        {"refused": {"reason": "x", "source": 3}, "how": EVALUATED},
        {"refused": ["x", "--config"], "how": EVALUATED},
        {"failed": 3, "how": CACHE},
        {"how": PEER},  # none of the three
    ],
)  # fmt: skip
def test_anything_else_is_no_answer(doc: Any) -> None:
    with pytest.raises(ConfigError):
        Answer.from_json(doc)


@pytest.mark.parametrize(
    "verdict",
    [Verdict(SAME), Verdict(UNCHECKED), *(Verdict(STALE, a) for a in ANSWERS)],
    ids=lambda v: v.kind,
)
def test_a_verdict_reads_back_as_itself(verdict: Verdict) -> None:
    back = Verdict.from_json(json.loads(json.dumps(verdict.to_json())))
    assert back.to_json() == verdict.to_json()


@pytest.mark.parametrize(
    "doc",
    [
        None, [], "same", {"verdict": "later"}, {},
        {"verdict": STALE},  # stale, with no fresh answer
        {"verdict": STALE, "answer": {"how": EVALUATED}},
    ],
)  # fmt: skip
def test_anything_else_is_no_verdict(doc: Any) -> None:
    with pytest.raises(ConfigError):
        Verdict.from_json(doc)

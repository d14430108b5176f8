"""The 23 TOML configs torchtitan shipped before its config refactor, launched
with the overrides people use. Expected lanes are written out by hand from
reading each file."""

from __future__ import annotations

import pytest

from rocm_hwq_autoset import recommend
from rocm_hwq_autoset._launch import load_toml

from .helpers import EP2_OVERLAP, EXPECTED, TOML_DIR, TP8_GRAPH, corpus_file


def test_the_table_covers_the_corpus() -> None:
    if not TOML_DIR.is_dir():
        pytest.skip(f"{TOML_DIR} is absent")
    assert sorted(p.name for p in TOML_DIR.glob("*.toml")) == sorted(EXPECTED)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_corpus_config(name: str) -> None:
    shipped, ep2_overlap, tp8_graph = EXPECTED[name]
    config = load_toml(str(corpus_file(TOML_DIR, name)))
    assert recommend(config).lanes == shipped
    assert recommend(config, argv=EP2_OVERLAP).lanes == ep2_overlap
    assert recommend(config, argv=TP8_GRAPH, world_size=8).lanes == tp8_graph
    for argv in ([], EP2_OVERLAP, TP8_GRAPH):
        rec = recommend(config, argv=argv, world_size=8)
        assert rec.queues in (2, 4, 8)

"""The tests' own configs, modelled on the 23 TOML configs torchtitan shipped
before its config refactor, launched with the overrides people use. Expected
lanes are written out by hand from what each sets (tests/data.py). Where the
shared corpus exists, each own config is held against the file it models."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from rocm_hwq_autoset import recommend
from rocm_hwq_autoset._argv import unknown_inputs
from rocm_hwq_autoset._config import FIELDS, SECTIONS, load_toml, merge

from ..data import (
    CONFIGS,
    EP2_OVERLAP,
    EXPECTED,
    LEFT_OUT_EXPECTED,
    TOML_DIR,
    TP8_GRAPH,
    corpus_dir,
    job_toml,
    write_job,
)

#: Every test here is known fast (the ini's 600 s is for the slow ones).
pytestmark = pytest.mark.timeout(60)


def test_every_config_has_its_lanes() -> None:
    assert sorted(CONFIGS) == sorted(EXPECTED)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_config(name: str, tmp_path: Path) -> None:
    shipped, ep2_overlap, tp8_graph = EXPECTED[name]
    config = load_toml(str(write_job(tmp_path, name)))
    assert recommend(config).lanes == shipped
    assert recommend(config, argv=EP2_OVERLAP).lanes == ep2_overlap
    tp8 = recommend(config, argv=TP8_GRAPH, world_size=world(config, TP8_GRAPH))
    assert tp8.lanes == tp8_graph
    # The streams the model leaves out: async TP where the file asks for it.
    assert recommend(config).left_out_lanes == LEFT_OUT_EXPECTED.get(name, ())
    for argv in ([], EP2_OVERLAP, TP8_GRAPH):
        rec = recommend(config, argv=argv, world_size=world(config, argv))
        assert rec.queues in (2, 4, 8)


def world(config: dict[str, Any], argv: list[str]) -> int:
    """The world size the degrees make (``data_parallel_shard_degree = -1``
    as 1): one torchtitan's ``ParallelDims`` takes (was 8 for every config,
    which it refuses for ``PP=4, TP=8``)."""
    i = recommend(config, argv=argv).inputs
    return max(i.dp_shard, 1) * i.dp_replicate * i.cp * i.tp * i.pp


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_fields_the_model_does_not_read_change_nothing(
    name: str, tmp_path: Path
) -> None:
    """Each config carries fields of torchtitan's that the model does not read
    (none a near miss of one it reads); without them every setting, value and
    source, is the same."""
    config = load_toml(str(write_job(tmp_path, name)))
    assert {"job", "training"} <= set(config)
    read = {
        section: {key: value for key, value in table.items()
                  if f"{section}.{key}" in FIELDS}
        for section, table in config.items() if section in SECTIONS
    }  # fmt: skip
    assert read != config
    assert merge(config, {}, name) == merge(read, {}, name)


def test_own_configs_match_the_corpus(tmp_path: Path) -> None:
    """Each own config carries the model-relevant values of the torchtitan file
    it models: the same settings, parsed and merged as the hook does, and the
    same ``job.custom_config_module`` (which lets unknown keys pass). Only
    where the shared corpus exists."""
    folder = corpus_dir(TOML_DIR)
    assert sorted(p.name for p in folder.glob("*.toml")) == sorted(CONFIGS)
    differ = []
    for name in sorted(CONFIGS):
        own = load_toml(str(write_job(tmp_path, name)))
        real = load_toml(str(folder / name))
        if merge(own, {}, name) != merge(real, {}, name) or custom(own) != custom(real):
            differ.append(name)
    assert differ == []


def custom(config: dict[str, Any]) -> object:
    return config.get("job", {}).get("custom_config_module")


def test_the_text_is_the_tables() -> None:
    """No config is a copy of torchtitan's: each is generated from its row."""
    for name in CONFIGS:
        text = job_toml(name)
        assert text.startswith("# rocm-hwq-autoset's test config, modelled on")
        assert len(text) < 800


#: A config torchtitan ships without naming the module that adds its fields,
#: launched with it on the command line, as torchtitan's own tests launch it
#: (``experiments/transformers_modeling_backend/tests/integration_tests.py``).
MODULE_ON_THE_COMMAND_LINE = {
    "experiments__transformers_modeling_backend__": [
        "--job.custom_config_module="
        "torchtitan.experiments.transformers_modeling_backend.job_config"
    ],
}


def test_no_config_torchtitan_shipped_has_a_field_unknown_to_it() -> None:
    """Every TOML torchtitan shipped in its last TOML-era release, launched as
    it launches it, holds no key :data:`_config.JOB_CONFIG` and the module it
    names do not know: nothing said. Without the command line's module, the
    transformers backend's own table is named. Only where the corpus exists."""
    folder = corpus_dir(TOML_DIR)
    named = []
    for path in sorted(folder.glob("*.toml")):
        config = load_toml(str(path))
        argv = next((args for prefix, args in MODULE_ON_THE_COMMAND_LINE.items()
                     if path.name.startswith(prefix)), [])  # fmt: skip
        assert unknown_inputs(argv, config, path.name) == (), path.name
        named += [exc.source for exc in unknown_inputs([], config, path.name)]
    assert named == [
        f"experiments__transformers_modeling_backend__{name}.toml: hf_transformers"
        for name in ("debug_model", "full")
    ]


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_no_own_config_has_an_unknown_field(name: str, tmp_path: Path) -> None:
    config = load_toml(str(write_job(tmp_path, name)))
    assert recommend(config, argv=EP2_OVERLAP).unknown == ()

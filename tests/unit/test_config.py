"""Reading a TOML config and merging it with the command line, as torchtitan does."""

from __future__ import annotations

import ast
import shlex
import subprocess
import sys
import types
from pathlib import Path
from types import MappingProxyType
from typing import Any

import pytest

from rocm_hwq_autoset import ConfigError, recommend
from rocm_hwq_autoset._argv import unknown_inputs
from rocm_hwq_autoset._config import (
    FIELDS,
    JOB_CONFIG,
    SECTIONS,
    Setting,
    is_table,
    is_torchtitans,
    load_toml,
    merge,
    parse_toml,
    unknown_keys,
)
from rocm_hwq_autoset._evaluation.answer import (
    settings_from_json,
    settings_to_json,
)
from rocm_hwq_autoset._unknown import MAX_EDITS, edits_within, near_miss

from ..helpers import check_lines

#: Every test here is known fast (the ini's 600 s is for the slow ones).
pytestmark = pytest.mark.timeout(60)

TABLES = b"""
[model]
name = "deepseek_v3"
[parallelism]
expert_parallel_degree = 2
tensor_parallel_degree = 2
[compile]
enable_fsdp_ag_rs_overlap = true
"""
DOTTED = b"""
model.name = "deepseek_v3"
parallelism.expert_parallel_degree = 2
parallelism.tensor_parallel_degree = 2
compile.enable_fsdp_ag_rs_overlap = true
"""
INLINE = b"""
model = { name = "deepseek_v3" }
parallelism = { expert_parallel_degree = 2, tensor_parallel_degree = 2 }
compile = { enable_fsdp_ag_rs_overlap = true }
"""
LANES = (
    "compute", "all_reduce", "dense_all_gather", "reduce_scatter", "expert_comm",
    "tp_all_gather",
)  # fmt: skip


@pytest.mark.parametrize(
    "text", [TABLES, DOTTED, INLINE], ids=["tables", "dotted", "inline"]
)
def test_toml_forms_mean_the_same(text: bytes) -> None:
    rec = recommend(parse_toml(text))
    assert rec.lanes == LANES
    assert rec.queues == 8


def test_precedence_cli_over_toml_over_default() -> None:
    rec = recommend(
        parse_toml(TABLES),
        argv=[
            "--parallelism.tensor_parallel_degree=1",
            "--compile.no-enable-fsdp-ag-rs-overlap",
        ],
    )
    s = rec.settings
    assert s["parallelism.tensor_parallel_degree"] == Setting(1, "CLI")
    assert s["parallelism.expert_parallel_degree"] == Setting(2, "TOML")
    assert s["parallelism.context_parallel_degree"] == Setting(1, "default")
    assert s["compile.enable_fsdp_ag_rs_overlap"] == Setting(False, "CLI")
    assert rec.lanes == ("compute", "all_reduce", "fsdp_comm", "expert_comm")
    assert rec.queues == 4


def test_defaults_are_torchtitans() -> None:
    rec = recommend(None)
    assert rec.settings["model.name"].value == "llama3"
    assert rec.settings["parallelism.data_parallel_shard_degree"].value == -1
    assert rec.lanes == ("compute", "all_reduce", "fsdp_comm")


@pytest.mark.parametrize(
    ("world", "tp", "pp", "replicate", "active"),
    [
        (None, 8, 1, 1, True),  # the launcher: -1 is active, as in the PR
        (8, 8, 1, 1, False),  # 8 // 8 == 1
        (16, 8, 1, 1, True),
        (16, 4, 2, 2, False),
        (32, 8, 4, 1, False),  # 32 // 32
    ],
)
def test_dp_shard_minus_one_resolves_like_parallel_dims(
    world: int | None, tp: int, pp: int, replicate: int, active: bool
) -> None:
    config = {
        "parallelism": {
            "tensor_parallel_degree": tp,
            "pipeline_parallel_degree": pp,
            "data_parallel_replicate_degree": replicate,
        }
    }
    rec = recommend(config, world_size=world)
    assert rec.facts["fsdp"] is active
    assert ("fsdp_comm" in rec.lanes) is active
    if world is not None:
        assert rec.dp_shard == world // (tp * pp * replicate)


def test_explicit_dp_shard_ignores_world_size() -> None:
    config = {"parallelism": {"data_parallel_shard_degree": 1}}
    assert not recommend(config, world_size=1).facts["fsdp"]
    config = {"parallelism": {"data_parallel_shard_degree": 4}}
    assert recommend(config, world_size=4).facts["fsdp"]


@pytest.mark.parametrize(
    ("parallelism", "world", "shard"),
    [
        ({"data_parallel_shard_degree": 8}, 4, 8),  # issue #37's --world-size 4
        ({"tensor_parallel_degree": 16}, 8, 0),  # WORLD_SIZE=8 with TP 16
        ({"data_parallel_shard_degree": 1}, 64, 1),
        ({"tensor_parallel_degree": 4}, 6, 1),  # 6 // 4 = 1; 1 * 4 != 6
    ],
)
def test_degrees_torchtitan_refuses_for_the_world_size(
    parallelism: dict[str, int], world: int, shard: int, request: pytest.FixtureRequest
) -> None:
    """Was: a Q, and no word, for a job torchtitan's ``ParallelDims`` refuses."""
    tp = parallelism.get("tensor_parallel_degree", 1)
    with pytest.raises(ConfigError) as refused:
        recommend({"parallelism": parallelism}, world_size=world)
    assert refused.value.source == "WORLD_SIZE"  # each degree, and the ranks
    said = refused.value.reason.split()
    degrees = ["dp_replicate(1)", f"dp_shard({shard})", "cp(1)", f"tp({tp})", "pp(1)"]
    assert said[:9:2] == degrees and str(world) in said
    if (world, shard) == (4, 8):  # the words, once
        check_lines(request, [("WORLD_SIZE=4, dp_shard 8", str(refused.value))],
                    every_case=False)  # fmt: skip


@pytest.mark.parametrize(
    ("compile_", "argv", "cudagraph"),
    [
        ({"enable_passes": True}, [], True),
        ({"enable_passes": True, "disable_passes": ["cudagraph_pass"]}, [], False),
        ({"enable_passes": True}, ["--compile.disable_passes=x,cudagraph_pass"], False),
        ({}, ["--compile.enable_passes"], True),
        ({"passes": ["cudagraph"]}, [], True),  # TOML-era compiler_toolkit
        ({"passes": ["autobucketing_reordering"]}, [], False),
        ({"enable": True}, [], False),
    ],
)
def test_cudagraph(
    compile_: dict[str, object], argv: list[str], cudagraph: bool
) -> None:
    rec = recommend({"compile": compile_}, argv=argv)
    assert rec.inputs.cudagraph is cudagraph
    assert ("cudagraph_capture" in rec.lanes) is cudagraph


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (b"parallelism = 3", "^parallelism: a int, not a table$"),
        (
            b"[parallelism]\ntensor_parallel_degree = '2'",
            "^parallelism.tensor_parallel_degree: '2' is not an integer$",
        ),
        (b"[parallelism]\ntensor_parallel_degree = 2.0", "is not an integer"),
        (b"[parallelism]\ntensor_parallel_degree = true", "is not an integer"),
        (
            b"[parallelism]\ntensor_parallel_degree = 0",
            "^parallelism.tensor_parallel_degree: 0 must be >= 1$",
        ),
        (b"[parallelism]\nexpert_parallel_degree = -1", "must be >= 1"),
        (b"[parallelism]\ndata_parallel_shard_degree = -2", "must be -1 or >= 1"),
        (b"[compile]\nenable_passes = 'yes'", "is not true or false"),
        (b"[compile]\ndisable_passes = 'cudagraph_pass'", "not a list of strings"),
        (b"[compile]\ndisable_passes = [1, 2]", "not a list of strings"),
        (b"[model]\nname = 3", "is not a string"),
        (b"[model", "invalid TOML"),
        (b"\xff\xfe[model]", "not UTF-8"),
    ],
)
def test_bad_configs(text: bytes, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        recommend(parse_toml(text))


def test_errors_name_the_file_for_its_values_and_the_flag_for_the_cli() -> None:
    config = parse_toml(b"[parallelism]\ntensor_parallel_degree = 0")
    with pytest.raises(ConfigError, match=r"^job\.toml: parallelism\.tensor_parallel"):
        merge(config, {}, "job.toml")
    too_low = {"parallelism.tensor_parallel_degree": 0}
    with pytest.raises(ConfigError, match=r"^--parallelism\.tensor_parallel_degree: 0"):
        merge(None, too_low, "job.toml")


def test_a_cli_override_shadows_a_bad_toml_value() -> None:
    config = parse_toml(b"[parallelism]\ntensor_parallel_degree = '2'")
    rec = recommend(config, argv=["--parallelism.tensor_parallel_degree", "2"])
    assert "tp_all_gather" in rec.lanes


def test_unrelated_fields_of_any_type_are_ignored() -> None:
    config = parse_toml(
        b"[training]\nsteps = 'lots'\n[parallelism]\nfoo = [1, {a = 2}]"
    )
    assert recommend(config).queues == 4


def test_huge_degrees_are_degrees() -> None:
    config = {"parallelism": {"tensor_parallel_degree": 2**70}}
    assert "tp_all_gather" in recommend(config).lanes


def test_object_read_like_the_pr() -> None:
    ns = types.SimpleNamespace
    config = ns(
        parallelism=ns(
            data_parallel_shard_degree=-1,
            expert_parallel_degree=2,
            tensor_parallel_degree=1,
            context_parallel_degree=1,
        ),
        compile=ns(
            enable_passes=True, disable_passes=[], enable_fsdp_ag_rs_overlap=False
        ),
    )
    rec = recommend(config, is_moe=True)
    assert rec.lanes == ("compute", "all_reduce", "fsdp_comm", "expert_comm",
                         "cudagraph_capture")  # fmt: skip
    assert rec.queues == 8
    assert rec.settings["compile.enable_passes"] == Setting(True, "config")
    assert rec.settings["compile.passes"] == Setting((), "default")
    # Without the override the model is unknown: ep > 1 makes it MoE.
    assert recommend(config).inputs.moe
    assert not recommend(config, is_moe=False).inputs.moe
    with pytest.raises(ConfigError, match="is not a job config"):
        recommend(42)
    with pytest.raises(ConfigError, match="is not a job config"):
        recommend("x")


def test_the_dots_guard_refuses_deep_dotted_keys_before_parsing() -> None:
    """tomllib's time grows with the cube of a dotted key's depth: a line with
    more than 256 dots is refused; 256 are parsed."""
    at_limit = b".".join([b"k"] * 257) + b" = 1\n"  # 256 dots
    assert parse_toml(at_limit)["k"]["k"]["k"]
    # A line's dots, not the file's: two lines at the limit are parsed.
    assert parse_toml(at_limit + at_limit.replace(b"k", b"j"))["j"]["j"]["j"]
    with pytest.raises(ConfigError, match="more than 256 dots; not a job config"):
        parse_toml(b".".join([b"k"] * 30_000) + b" = 1\n")  # 15 s in tomllib alone


def _torchtitans_reader() -> Any:
    """The parser torchtitan reads a TOML job config with, as it calls it
    (``tomllib.load(open(path, "rb"))``; tomli before 3.11)."""
    if sys.version_info >= (3, 11):
        import tomllib
    else:
        import tomli as tomllib
    return tomllib


def test_a_byte_order_mark_is_refused_as_torchtitan_refuses_it_and_named(
    tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """Was: "invalid TOML: Invalid statement (at line 1, column 1)", which
    names neither the mark (Notepad, PowerShell's ``>``) nor the fix."""
    job = tmp_path / "my job.toml"
    job.write_bytes(b"\xef\xbb\xbf" + TABLES)
    reader = _torchtitans_reader()
    with pytest.raises(reader.TOMLDecodeError), open(job, "rb") as f:
        reader.load(f)  # torchtitan fails the launch: the same meaning here
    with pytest.raises(ConfigError) as caught:
        load_toml(str(job))
    said = str(caught.value)  # the file, the reader, and the remedy for it
    assert said.startswith(f"{job}: ") and reader.__name__ in said.split()
    remedy = shlex.split(said.rpartition(": ")[2])  # a command for this file
    assert remedy == ["sed", "-i", "1s/^\\xEF\\xBB\\xBF//", str(job)]
    said = said.replace(reader.__name__, "READER")  # tomllib, or tomli before 3.11
    check_lines(request, [("my job.toml with a BOM", said)], tmp_path)
    subprocess.run(["sed", "-i", "1s/^\\xEF\\xBB\\xBF//", str(job)], check=True)
    assert load_toml(str(job)) == parse_toml(TABLES)  # the remedy works
    with pytest.raises(ConfigError, match=r"save it without the mark: .* FILE$"):
        parse_toml(b"\xef\xbb\xbf" + TABLES)
    # Anywhere else the mark is a character like any other: as tomllib reads it.
    assert parse_toml('n = "\ufeffx"'.encode())["n"] == "\ufeffx"


# Near misses: a key or section a typo away from one the model reads.


@pytest.mark.parametrize(
    ("name", "meant"),
    [
        ("parallelism.expert_paralel_degree", "parallelism.expert_parallel_degree"),
        ("paralelism.tensor_parallel_degree", "parallelism.tensor_parallel_degree"),
        ("model.nmae", "model.name"),
        ("model.name", None),
        # Two edits from "model.name", but its table is no typo of one of ours:
        ("modelnam.e", None),
        ("model.nam.e", "model.name"),  # a flag's name: its table is the first part
        ("training.steps", None),
    ],
)
def test_a_near_miss_is_within_a_table_close_to_ours(
    name: str, meant: str | None
) -> None:
    assert near_miss(name) == meant


def test_no_field_of_torchtitans_is_a_typo_of_ours() -> None:
    """No field of torchtitan 0.2.2's is an edit or two from one of ours (not
    even outside the table, which keeps each from being compared): a config
    that sets every one of them is read without a refusal or an unknown key."""
    everything: dict[str, Any] = {}
    # Each table's names between blanks, so that one is found whole.
    assert all(names.startswith(" ") and names.endswith(" ") and "  " not in names
               for names in JOB_CONFIG.values())  # fmt: skip
    for table, names in JOB_CONFIG.items():
        for name in names.split():
            path = f"{table}.{name}" if table else name
            assert path in FIELDS or not any(
                edits_within(path, ours, 2) for ours in FIELDS
            ), path
            if path not in JOB_CONFIG:  # a field, not a table
                holder = everything
                for part in table.split(".") if table else ():
                    holder = holder.setdefault(part, {})
                holder[name] = 1
    assert unknown_keys(everything) == []
    # torchtitan's sections without a field of ours: never searched, and no
    # name of one is a typo of a section of ours (issue #39).
    for section in set(JOB_CONFIG[""].split()) - set(SECTIONS):
        assert near_miss(f"{section}.x") is None, section
        assert not any(edits_within(section, ours, MAX_EDITS) for ours in SECTIONS)


def test_a_table_is_a_dict_or_any_mapping() -> None:
    assert is_table({}) and is_table(MappingProxyType({"a": 1}))
    assert not any(is_table(v) for v in ("ab", 1, 1.5, True, ["a"], ("a",), None))
    # Any mapping is read as a table: a caller's config, not only parsed TOML.
    assert merge({"parallelism": MappingProxyType({"tensor_parallel_degree": 2})},
                 {})["parallelism.tensor_parallel_degree"].value == 2  # fmt: skip


@pytest.mark.parametrize(
    ("text", "source", "meant"),
    [
        (b"[parallelism]\nexpert_paralel_degree = 2",
         "parallelism.expert_paralel_degree", "parallelism.expert_parallel_degree"),
        (b"[compile]\nenable_fsdp_ag_rs_overlapp = true",
         "compile.enable_fsdp_ag_rs_overlapp", "compile.enable_fsdp_ag_rs_overlap"),
        (b"[compile]\ndisabled_passes = []", "compile.disabled_passes",
         "compile.disable_passes"),
        (b"parallelism.tensor-parallel-degree = 2",
         "parallelism.tensor-parallel-degree", "parallelism.tensor_parallel_degree"),
        # A shorthand (issue #37: was a Q that counted no TP, without a word)
        (b"[parallelism]\ntp = 2", "parallelism.tp",
         "parallelism.tensor_parallel_degree"),
        (b"[parallelism]\ndp_shard = 2", "parallelism.dp_shard",
         "parallelism.data_parallel_shard_degree"),
        (b"[paralelism]\nx = 1", "[paralelism]", "[parallelism]"),
        (b"[compiles]\nx = 1", "[compiles]", "[compile]"),
    ],
)  # fmt: skip
def test_a_near_miss_is_refused_with_what_it_means(
    text: bytes, source: str, meant: str
) -> None:
    with pytest.raises(ConfigError) as caught:
        unknown_inputs([], parse_toml(text), "job.toml")
    assert caught.value.source == f"job.toml: {source}"
    assert caught.value.reason.endswith(f"did you mean {meant}?")


def test_a_custom_config_module_may_add_fields() -> None:
    text = (
        b"[job]\ncustom_config_module = 'x'\n[parallelism]\nexpert_paralel_degree = 2"
    )
    rec = recommend(parse_toml(text))
    assert (rec.queues, rec.unknown) == (4, ())
    # Named on the command line (as torchtitan's own tests launch the
    # transformers backend), it adds fields too: nothing refused, nothing said.
    for flag in (["--job.custom_config_module=x"], ["--job.custom-config-module", "x"]):
        rec = recommend(parse_toml(text.partition(b"\n")[2]), argv=flag)
        assert (rec.queues, rec.unknown) == (4, ())


# Unknown keys: torchtitan 0.2.2 refuses them; its releases differ in their
# fields, so each is said and Q is still read from the fields the model reads.


@pytest.mark.parametrize(
    ("text", "unknown"),
    [
        (b"[parallelism]\nfoo = 2", ["parallelism.foo"]),
        (b"[wandb]\nproject = 'x'\n[job]\nbar = 1", ["wandb", "job.bar"]),
        (b"top = 1", ["top"]),
        (b"[training.dataloader]\nworkers = 2\nnum_workers = 2",
         ["training.dataloader.workers"]),
        (b"[quantize.linear.float8]\nemulate = true\nemulated = true",
         ["quantize.linear.float8.emulated"]),
        # The graph trainer's fields and tables: the model reads them.
        (b"[compile.ep_overlap]\nenabled = true\n[compile]\nenable_passes = true",
         []),
        (b"[compile.ep_overlap]\nenabled = true\nother = 1",
         ["compile.ep_overlap.other"]),
        # An unknown table is named alone, not its keys; a field's table value
        # is the field's value (torchtitan's reader passes it on).
        (b"[parallelism.foo]\na = 1\nb = 2", ["parallelism.foo"]),
        (b"[parallelism]\npipeline_parallel_schedule = { a = 1 }", []),
        # Two of torchtitan's names in one quoted key: no name of torchtitan's.
        (b'[job]\n"dump_folder description" = 1', ["job.dump_folder description"]),
    ],
)  # fmt: skip
def test_an_unknown_key_is_named(text: bytes, unknown: list[str]) -> None:
    config = parse_toml(text)
    assert unknown_keys(config) == unknown
    rec = recommend(config)
    assert [exc.source for exc in rec.unknown] == [", ".join(unknown)] * bool(unknown)


def test_q_is_read_beside_an_unknown_key() -> None:
    rec = recommend(parse_toml(b"[parallelism]\ntensor_parallel_degree = 2\ntp2 = 1"))
    assert rec.queues == 4
    assert "tp_all_gather" in rec.lanes
    assert [exc.source for exc in rec.unknown] == ["parallelism.tp2"]


def _job_config_of(source: str) -> dict[str, frozenset[str]]:
    """torchtitan's ``JobConfig`` as :data:`JOB_CONFIG` holds it, read from its
    source by ``ast`` (nothing of torchtitan's imported): each dataclass field
    of a dataclass of the module is a table."""
    classes = {node.name: node for node in ast.parse(source).body
               if isinstance(node, ast.ClassDef)}  # fmt: skip
    found: dict[str, frozenset[str]] = {}

    def walk(name: str, path: str) -> None:
        fields = []
        for node in classes[name].body:
            if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
                fields.append(node.target.id)
                kind = ast.unparse(node.annotation)
                if kind in classes:
                    walk(kind, f"{path}.{node.target.id}" if path else node.target.id)
        found[path] = frozenset(fields)

    walk("JobConfig", "")
    return found


def test_the_job_config_table_is_torchtitans() -> None:
    """:data:`JOB_CONFIG` is torchtitan 0.2.2's ``JobConfig``, where its source
    is in the corpus (``tools/corpus.py`` copies it)."""
    from ..data import JOB_CONFIG_SOURCE, corpus_dir

    source = corpus_dir(JOB_CONFIG_SOURCE.parent) / JOB_CONFIG_SOURCE.name
    held = {table: frozenset(names.split()) for table, names in JOB_CONFIG.items()}
    assert _job_config_of(source.read_text()) == held
    assert all(is_torchtitans(f"{t}.{n}" if t else n)
               for t, names in JOB_CONFIG.items() for n in names.split())  # fmt: skip


@pytest.mark.parametrize(
    ("a", "b", "limit", "within"),
    [
        ("abc", "abc", 0, True),
        ("abc", "abd", 1, True),
        ("abc", "abd", 0, False),
        ("abc", "ab", 1, True),
        ("abc", "a", 1, False),
        ("abc", "a", 2, True),
        ("kitten", "sitting", 2, False),
        ("kitten", "sitting", 3, True),
        ("xab", "ab", 1, True),  # one deletion (or, reversed, one insertion)
        ("", "ab", 2, True),
        ("ab", "", 1, False),
        ("abcdef", "badcfe", 2, False),
        ("ab", "ba", 1, False),  # a swap is two edits
        ("xbc", "a", 2, False),
    ],
)
def test_edits_within(a: str, b: str, limit: int, within: bool) -> None:
    assert edits_within(a, b, limit) is within
    assert edits_within(b, a, limit) is within


def test_an_error_in_a_file_names_the_file() -> None:
    for text, said in (
        (b"parallelism = 3", "job.toml: parallelism: a int, not a table"),
        (b"[parallelism]\ntensor_parallel_degree = '2'",
         "job.toml: parallelism.tensor_parallel_degree: '2' is not an integer"),
    ):  # fmt: skip
        with pytest.raises(ConfigError) as caught:
            merge(parse_toml(text), {}, "job.toml")
        assert str(caught.value) == said
        assert caught.value.args == (caught.value.reason,)  # a ValueError's args


def test_settings_round_trip_through_json() -> None:
    settings = recommend(parse_toml(TABLES), argv=["--compile.passes=a,b"]).settings
    assert settings_from_json(settings_to_json(settings)) == settings
    good = settings_to_json(settings)
    for bad, said in (
        (None, "not the fields the model reads"),
        ([], "not the fields the model reads"),
        ({"model.name": ["x", "TOML"]}, "not the fields the model reads"),
        ({**good, "model.name": ["x", "nowhere"]},
         "model.name: not a value and its source"),
        ({**good, "model.name": "x"}, "model.name: not a value and its source"),
        ({**good, "model.name": [3, "TOML"]}, "model.name: 3 is not a string"),
    ):  # fmt: skip
        with pytest.raises(ConfigError) as caught:
            settings_from_json(bad)
        assert str(caught.value) == said
    assert set(good) == set(FIELDS)


@pytest.mark.parametrize(
    ("text", "said"),
    [
        (b"\xff\xfe[model]", "not UTF-8 text"),
        (b"a = " + b"[" * 2000 + b"]" * 2000, "unparsable TOML (RecursionError)"),
        (b"a = 1" + b"0" * 5000, "unparsable TOML (ValueError)"),  # int() limit
        # A value's repr is cut at 40 characters: 37 and "...".
        (b"[model]\nname = " + b"1" * 40,
         "model.name: " + "1" * 40 + " is not a string"),
        (b"[model]\nname = " + b"1" * 41,
         "model.name: " + "1" * 37 + "... is not a string"),
    ],
)  # fmt: skip
def test_what_is_wrong_is_said_in_full(text: bytes, said: str) -> None:
    with pytest.raises(ConfigError) as caught:
        recommend(parse_toml(text))
    assert str(caught.value) == said


def test_objects_of_each_era() -> None:
    """torchtitan's config objects, as the PR reads them: ``JobConfig``
    (``model``, ``parallelism``, ``compile``) or ``Trainer.Config``
    (``model_spec``), any one of them, with the CLI's overrides on top."""
    ns = types.SimpleNamespace
    job = ns(model=ns(name="llama4", flavor="17bx16e"))
    rec = recommend(job, argv=["--parallelism.expert_parallel_degree", "2"])
    assert rec.settings["model.name"] == Setting("llama4", "config")
    assert rec.settings["parallelism.expert_parallel_degree"] == Setting(2, "CLI")
    assert "expert_comm" in rec.lanes
    trainer = ns(model_spec=ns(name="qwen3", flavor="30B-A3B"))
    assert recommend(trainer).settings["model.name"] == Setting("qwen3", "config")
    registry = ns(model_spec=ns(), parallelism=ns(tensor_parallel_degree=2))
    rec = recommend(registry)
    assert rec.settings["model.name"] == Setting("", "default")  # names no model
    assert rec.settings["model.flavor"] == Setting("", "default")
    assert rec.settings["parallelism.tensor_parallel_degree"] == Setting(2, "config")
    assert recommend(ns(compile=ns(enable_passes=True))).inputs.cudagraph
    assert recommend(ns(parallelism=ns(tensor_parallel_degree=4))).inputs.tp == 4


@pytest.mark.parametrize(
    ("config", "said"),
    [
        (42, "a int is not a job config: expected a mapping (parsed TOML), a"
         " torchtitan config object or None"),
        (types.SimpleNamespace(model=types.SimpleNamespace(name=["a"])),
         "config: model.name: ['a'] is not a string"),
        (types.SimpleNamespace(parallelism=types.SimpleNamespace(
            tensor_parallel_degree="2")),
         "config: parallelism.tensor_parallel_degree: '2' is not an integer"),
        (types.SimpleNamespace(parallelism=types.SimpleNamespace(
            tensor_parallel_degree=0)),
         "config: parallelism.tensor_parallel_degree: 0 must be >= 1"),
    ],
)  # fmt: skip
def test_what_is_wrong_with_an_object_is_named(config: object, said: str) -> None:
    with pytest.raises(ConfigError) as caught:
        recommend(config)
    assert str(caught.value) == said


def test_a_config_kept_with_its_comments_is_read(tmp_path: Path) -> None:
    """Issue #37: a valid 76 KB TOML, mostly comments, was refused (the bound
    was 64 KiB) and the hook left Q unset for a job torchtitan runs."""
    comments = b"".join(b"# %05d: what this field does, and why it is set\n" % i
                        for i in range(1600))  # fmt: skip
    job = tmp_path / "job.toml"
    job.write_bytes(comments + TABLES)
    assert 76_000 < job.stat().st_size < 80_000
    assert load_toml(str(job))["parallelism"]["expert_parallel_degree"] == 2

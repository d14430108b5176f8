"""torchtitan's config registry read in process (``registry.read_config``),
on the stand-in torchtitan: the model's inputs, torchtitan's refusals named
by their real source, its messages shortened and read out of tyro's box."""

from __future__ import annotations

import io
import os
import sys
from pathlib import Path
from types import ModuleType, SimpleNamespace

import pytest

from rocm_hwq_autoset._api import from_object
from rocm_hwq_autoset._config import ConfigError
from rocm_hwq_autoset._evaluation import registry
from rocm_hwq_autoset._evaluation.registry import read_config, shorten_lists

from ..helpers import check_lines
from .children import said

DS = ["--module", "graph_trainer.deepseek_v3", "--config",
      "graph_trainer_deepseek_v3_debugmodel"]  # fmt: skip


def test_read_config_in_process(
    world: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    for folder in [*world["PYTHONPATH"].split(os.pathsep)[:1], world["WORK"]]:
        monkeypatch.syspath_prepend(folder)
    try:
        config = read_config([*DS, "--parallelism.expert_parallel_degree", "2"])
        inputs, settings = config.inputs, config.settings
        assert (inputs.moe, inputs.moe_from, inputs.ep) == (True, "traverse", 2)
        assert settings["parallelism.expert_parallel_degree"].source == "CLI"
        assert settings["compile.enable_passes"].source == "config"
        with pytest.raises(ConfigError, match="could not build the config"):
            read_config(["--module", "nope", "--config", "x"])
        # A config with no model spec to traverse: the model table decides.
        old = Path(world["WORK"], "old_recipes")
        old.mkdir()
        (old / "__init__.py").write_text("")
        (old / "config_registry.py").write_text(
            "from types import SimpleNamespace as NS\n"
            "def deepseek():\n"
            "    return NS(model=NS(name='deepseek_v3', flavor='16B'))\n"
        )
        inputs = read_config(["--module", "old_recipes", "--config", "deepseek"]).inputs
        assert (inputs.moe, inputs.moe_from) == (True, "table")
    finally:
        for name in [m for m in sys.modules
                     if m.split(".")[0] in ("torchtitan", "my_recipes",
                                            "old_recipes")]:  # fmt: skip
            del sys.modules[name]


def test_read_config_reads_the_fields_of_the_streams_left_out(
    world: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The child reads them from the config object torchtitan built (the
    nested ``compile.ep_overlap.enabled`` too), the overrides named as the
    CLI's, and the dist-GEMM projections from the model spec."""
    from rocm_hwq_autoset._model import Recommendation

    for folder in [*world["PYTHONPATH"].split(os.pathsep)[:1], world["WORK"]]:
        monkeypatch.syspath_prepend(folder)
    try:
        ep = [*DS, "--parallelism.expert_parallel_degree", "2"]
        config = read_config([*ep, "--compile.ep_overlap.enabled"])
        assert config.inputs.ep_isolation and not config.inputs.dist_gemm
        assert config.settings["compile.ep_overlap.enabled"].source == "CLI"
        assert config.settings["training.disable_cuda_graphs"].source == "config"
        assert Recommendation(config.inputs).left_out_lanes == ("ep_extra",)
        off = read_config([*ep, "--compile.ep_overlap.enabled",
                           "--compile.ep-overlap.no-enabled"])  # fmt: skip
        assert not off.inputs.ep_isolation
        assert off.settings["compile.ep_overlap.enabled"].value is False
        assert "torchtitan.models.common.dist_gemm" not in sys.modules
        gemm = ["--module", "llama3", "--config", "llama3_debugmodel_dist_gemm"]
        alone = read_config(gemm)  # no TP: the stock projections run
        assert alone.inputs.dist_gemm and not alone.inputs.cudagraph
        assert Recommendation(alone.inputs).left_out_lanes == ()
        tp2 = read_config([*gemm, "--parallelism.tensor_parallel_degree", "2",
                           "--training.disable_cuda_graphs"])  # fmt: skip
        assert Recommendation(tp2.inputs).left_out_lanes == ("symm_mem",)
        assert not tp2.inputs.trainer_cudagraph
        assert tp2.settings["training.disable_cuda_graphs"].source == "CLI"
        # Now that the module is loaded, a model without them is looked into.
        assert not read_config(DS).inputs.dist_gemm
        asynchronous = read_config(
            [
                *DS,
                "--compile.enable_async_tensor_parallel",
                "--parallelism.tensor_parallel_degree=2",
            ]
        )
        assert asynchronous.inputs.async_tp and not asynchronous.inputs.dist_gemm
        assert Recommendation(asynchronous.inputs).left_out_lanes == ("symm_mem",)
    finally:
        for name in [m for m in sys.modules
                     if m.split(".")[0] in ("torchtitan", "my_recipes")]:  # fmt: skip
            del sys.modules[name]


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("Available: ['a', 'b']", "Available: ['a', 'b']"),
        ("Available config functions: ['a', 'b', 'c', 'd', 'e', 'f', 'g']. x",
         "Available config functions: ['a', 'b', 'c', 'd', 'e', ... (7 in all)]. x"),
        ("modules: ['x.y', 'z'] and ['1', '2', '3', '4', '5', '6']",
         "modules: ['x.y', 'z'] and ['1', '2', '3', '4', '5', ... (6 in all)]"),
        ("no list here [1, 2, 3, 4, 5, 6, 7]", "no list here [1, 2, 3, 4, 5, 6, 7]"),
        ("five: ['a', 'b', 'c', 'd', 'e']", "five: ['a', 'b', 'c', 'd', 'e']"),
    ],
)  # fmt: skip
def test_long_lists_are_shortened(text: str, shown: str) -> None:
    assert shorten_lists(text) == shown


@pytest.mark.parametrize(
    ("stderr", "reason"),
    [
        (said("╭─ Parsing error ─────────────────╮",
              "│ Unrecognized options:           │",
              "│   --compile.enable_passess      │",
              "│                                 │",
              "│ ─────────────────────────────── │",
              "│ For full helptext, see -h       │",
              "╰─────────────────────────────────╯"),
         "Unrecognized options: --compile.enable_passess"),
        # A value of X's is the reason's, not the box's; a line cut short
        # (no closing bar) is not in the box.
        (said("╭─ Parsing error ─╮", "│ Unrecognized arguments: │",
              "│ XX │", "│ --model.flavor=16X │", "│ cut short", "╰─────────────────╯"),
         "Unrecognized arguments: XX --model.flavor=16X"),
        (said("usage: train [-h]", "error: the first", "error: the last"),
         "error: the last"),
        (said(), "no reason given"),
    ],
)  # fmt: skip
def test_tyros_refusal_is_read_out_of_its_box(stderr: io.StringIO, reason: str) -> None:
    assert registry._why(stderr) == reason


def test_a_near_miss_of_a_flag_given_with_its_value_is_named_without_it(
    request: pytest.FixtureRequest,
) -> None:
    hint = registry._hint(["--compile.enable_passess=True"])
    assert hint.startswith(" (") and hint.endswith("?)")  # said after the reason
    # The flag meant, and the one given, without its value.
    named = {"--compile.enable_passes", "--compile.enable_passess?)"}
    assert named <= set(hint.split())
    check_lines(request, [("--compile.enable_passess=True", hint)])
    assert registry._hint(["--model.name=x"]) == ""


@pytest.mark.parametrize(
    "config",
    [SimpleNamespace(), SimpleNamespace(model_spec=SimpleNamespace())],
    ids=["no model_spec", "no model"],
)
def test_a_config_without_a_model_spec_leaves_moe_unknown(config: object) -> None:
    """Not PR #4032's form: MoE is read from the settings instead."""
    assert registry._has_moe(config) is None


def from_object_refusal(config: object) -> str:
    """Why ``from_object`` refuses ``config``."""
    with pytest.raises(ConfigError) as caught:
        from_object(config, {})
    return caught.value.reason


#: Recipes whose failures have a cause of their own: a config function's own
#: invalid value, tyro's refusal of the config itself, a registry that cannot
#: import a package it needs (torchtitan's message names none).
FAULTY_RECIPES = {
    "faulty/__init__.py": "",
    "faulty/recipes/__init__.py": "",
    "faulty/recipes/config_registry.py": """
from torchtitan.config.manager import _reject
from torchtitan.experiments.graph_trainer import trainer_config

def zero_tp():
    return trainer_config("llama3", "debugmodel", moe=False, tensor_parallel_degree=0)

def refused():
    _reject("Invalid value for --training.steps: 'many'")

_built = set()

def _register(name):  # what a config function builds, registered: once
    if name in _built:
        raise RuntimeError(f"{name} registered already")
    _built.add(name)

def not_a_config():
    return 42

def once():
    _register("once")
    return trainer_config("llama3", "debugmodel", moe=False)

def refused_once():
    _register("refused_once")
    _reject("Invalid value for --training.steps: 'many'")
""",
    "faulty/masked/__init__.py": "",
    "faulty/masked/config_registry.py": "import transformers_is_not_here\n",
}


def on_path(
    world: dict[str, str], monkeypatch: pytest.MonkeyPatch, files: dict[str, str]
) -> None:
    """``files`` written, those of ``torchtitan/`` into the stand-in's, the
    others into the working directory; both on the path."""
    standin = world["PYTHONPATH"].split(os.pathsep)[0]
    for name, text in files.items():
        path = Path(standin if name.startswith("torchtitan/") else world["WORK"], name)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    for folder in [standin, world["WORK"]]:
        monkeypatch.syspath_prepend(folder)


def forget(*packages: str) -> None:
    """The modules of ``packages`` imported no more."""
    for name in [m for m in sys.modules if m.split(".")[0] in packages]:
        del sys.modules[name]


@pytest.mark.parametrize(
    ("args", "source", "reason"),
    [
        # A value from the command line names its flag, as spelled there.
        ([*DS, "--parallelism.tensor_parallel_degree=0"],
         "--parallelism.tensor_parallel_degree", "0 must be >= 1"),
        ([*DS, "--parallelism.tensor-parallel-degree", "0"],
         "--parallelism.tensor-parallel-degree", "0 must be >= 1"),
        # The config function's own value: the function, not "the arguments".
        (["--module", "faulty.recipes", "--config", "zero_tp"],
         "--config zero_tp: parallelism.tensor_parallel_degree", "0 must be >= 1"),
        (["--module", "faulty.recipes", "--config", "zero_tp",
          "--compile.enable_fsdp_ag_rs_overlap"],
         "--config zero_tp: parallelism.tensor_parallel_degree", "0 must be >= 1"),
        (["--module", "faulty.recipes", "--config", "refused"], "--config refused",
         "torchtitan refused the config: Invalid value for --training.steps:"
         " 'many'"),
        (["--module", "faulty.recipes", "--config", "refused",
          "--compile.enable_fsdp_ag_rs_overlap"], "--config refused",
         "torchtitan refused the config: Invalid value for --training.steps:"
         " 'many'"),
        # Not a config at all: the function is named, and no field.
        (["--module", "faulty.recipes", "--config", "not_a_config"],
         "--config not_a_config", from_object_refusal(42)),
        # The arguments' fault: said so.
        ([*DS, "--parallelism.bogus", "1"], "",
         "torchtitan rejected the arguments: Unrecognized options:"
         " --parallelism.bogus"),
        # The import torchtitan's message hides.
        (["--module", "faulty.masked", "--config", "c"], "",
         "torchtitan could not build the config (ImportError: Cannot import module"
         " 'faulty.masked'; the import that failed: ModuleNotFoundError: No module"
         " named 'transformers_is_not_here')"),
    ],
)  # fmt: skip
def test_a_refusal_names_its_real_source(
    world: dict[str, str], monkeypatch: pytest.MonkeyPatch, args: list[str],
    source: str, reason: str,
) -> None:  # fmt: skip
    on_path(world, monkeypatch, FAULTY_RECIPES)
    try:
        with pytest.raises(ConfigError) as caught:
            read_config(args)
        assert (caught.value.source, caught.value.reason) == (source, reason)
    finally:
        for name in [m for m in sys.modules
                     if m.split(".")[0] in ("torchtitan", "faulty")]:  # fmt: skip
            del sys.modules[name]


def test_a_refused_value_names_the_last_flag_that_gave_it_as_spelled(
    world: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """With its dashes and its ``=VALUE``, and not a flag after it."""
    on_path(world, monkeypatch, {})
    try:
        with pytest.raises(ConfigError) as plain:
            read_config([*DS, "--parallelism.tensor_parallel_degree=0"])
        with pytest.raises(ConfigError) as caught:
            read_config([*DS, "--parallelism.tensor-parallel-degree=0",
                         "--compile.enable_fsdp_ag_rs_overlap"])  # fmt: skip
        said = (caught.value.source, caught.value.reason)
        assert said == ("--parallelism.tensor-parallel-degree", plain.value.reason)
    finally:
        forget("torchtitan")


@pytest.mark.parametrize(
    "args",
    [
        # Either spelling of --module and --config, the override between.
        ["--module=graph_trainer.deepseek_v3", "--parallelism.bogus=1",
         "--config=graph_trainer_deepseek_v3_debugmodel"],
        ["--module", "graph_trainer.deepseek_v3", "--parallelism.bogus=1",
         "--config=graph_trainer_deepseek_v3_debugmodel"],
        # A config function that fails when built again (it registers what it
        # builds): that failure is not the config's refusal.
        ["--module", "faulty.recipes", "--config", "once", "--parallelism.bogus=1"],
    ],
    ids=["equals", "mixed", "built once"],
)  # fmt: skip
def test_an_override_refused_is_the_arguments_fault(
    world: dict[str, str], monkeypatch: pytest.MonkeyPatch, args: list[str]
) -> None:
    on_path(world, monkeypatch, FAULTY_RECIPES)
    try:
        with pytest.raises(ConfigError) as plain:
            read_config([*DS, "--parallelism.bogus=1"])
        assert plain.value.source == ""  # the arguments', not the config's
        with pytest.raises(ConfigError) as caught:
            read_config(args)
        assert (caught.value.source, caught.value.reason) == ("", plain.value.reason)
    finally:
        forget("torchtitan", "faulty")


@pytest.mark.parametrize(
    "args",
    [["--module", "faulty.recipes", "--config", "refused_once"],
     ["--module=faulty.recipes", "--config=refused_once"]],
    ids=["spaced", "equals"],
)  # fmt: skip
def test_a_refusal_with_no_override_is_the_configs_at_once(
    world: dict[str, str], monkeypatch: pytest.MonkeyPatch, args: list[str]
) -> None:
    """The config is not built again to see whether it is refused alone: a
    config function that fails when built twice is said to be refused."""
    on_path(world, monkeypatch, FAULTY_RECIPES)
    try:
        with pytest.raises(ConfigError) as plain:
            read_config(["--module", "faulty.recipes", "--config", "refused"])
        with pytest.raises(ConfigError) as caught:
            read_config(args)
        said = (caught.value.source, caught.value.reason)
        assert said == ("--config refused_once", plain.value.reason)
    finally:
        forget("torchtitan", "faulty")


@pytest.mark.parametrize(
    ("args", "more"),
    [
        (["--module", "m", "--config", "f"], False),
        (["--config=f", "--module=m"], False),
        (["--module=m", "--parallelism.bogus=1", "--config=f"], True),
        (["--module", "m", "--parallelism.bogus=1", "--config=f"], True),
        (["--module", "m", "--config", "f", "--compile.enable_passes"], True),
    ],
)
def test_only_what_is_beyond_module_and_config_is_an_override(
    args: list[str], more: bool
) -> None:
    """Without an override, torchtitan's refusal is the config's own: it is
    not built a second time to see whether the config alone is refused."""
    assert registry._overrides(args) is more


#: Registries of the stand-in torchtitan's that cannot be imported: one talks
#: on stderr first, as torch's imports do.
MISSING = "import transformers_is_not_here"
TOO_OLD = "raise ImportError('transformers 5 needed')"
BROKEN_REGISTRIES = {
    "torchtitan/experiments/broken/__init__.py": "",
    "torchtitan/experiments/broken/config_registry.py":
        f"import sys\nsys.stderr.write('[broken] loading\\n')\n{MISSING}\n",
    "torchtitan/experiments/too_old/__init__.py": "",
    "torchtitan/experiments/too_old/config_registry.py": f"{TOO_OLD}\n",
}  # fmt: skip


def failure_of(statement: str) -> str:
    """How ``statement`` fails, said as ``Type: message``."""
    try:
        exec(statement, {})
    except Exception as exc:
        return f"{type(exc).__name__}: {exc}"
    raise AssertionError(f"{statement!r} did not fail")


@pytest.mark.parametrize(
    ("module", "statement"), [("broken", MISSING), ("too_old", TOO_OLD)]
)
def test_the_import_a_registry_of_torchtitans_fails_on_is_named(
    world: dict[str, str], monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str], module: str, statement: str,
) -> None:  # fmt: skip
    """``--module NAME`` is looked for under each of torchtitan's prefixes: one
    where NAME is not is passed, the one that fails named, its import again
    silent."""
    on_path(world, monkeypatch, BROKEN_REGISTRIES)
    try:
        with pytest.raises(ConfigError) as caught:
            read_config(["--module", module, "--config", "c"])
        assert caught.value.source == ""
        assert caught.value.reason.endswith(f"{failure_of(statement)})")
        assert capsys.readouterr().err == ""
    finally:
        forget("torchtitan")


def test_an_import_error_of_the_configs_own_is_no_registrys(
    world: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """An ``ImportError`` other than torchtitan's "Cannot import" says what
    failed itself: no registry is imported again."""
    on_path(world, monkeypatch, FAULTY_RECIPES)
    try:
        own = ModuleNotFoundError("no yaml", name="yaml")
        assert registry._masked_import(own, "faulty.masked") is None
        torchtitans = ImportError("Cannot import module 'faulty.masked'")
        masked = registry._masked_import(torchtitans, "faulty.masked")
        assert masked == failure_of(MISSING)
    finally:
        forget("faulty")


def caused(exc: BaseException, cause: BaseException) -> BaseException:
    exc.__cause__ = cause
    return exc


def during(exc: BaseException, context: BaseException) -> BaseException:
    exc.__context__ = context
    return exc


@pytest.mark.parametrize(
    ("exc", "masked"),
    [
        (caused(RuntimeError("x"), ModuleNotFoundError("no yaml")),
         "ModuleNotFoundError: no yaml"),
        (during(RuntimeError("x"), caused(KeyError("k"), ImportError("old yaml"))),
         "ImportError: old yaml"),
        (during(RuntimeError("x"), KeyError("k")), None),
    ],
    ids=["cause", "further down", "none"],
)  # fmt: skip
def test_the_first_import_error_in_the_chain_is_named(
    exc: BaseException, masked: str | None
) -> None:
    assert registry._masked_import(exc, "nowhere.at_all") == masked


class Looped(Exception):
    """An exception whose cause is another, whose cause is this one (``raise
    A from B`` after ``raise B from A``). Its cause read more often than a
    walk once around the loop needs, it says so."""

    def __init__(self) -> None:
        super().__init__()
        self.other: BaseException | None = None
        self.reads = 0

    @property  # type: ignore[override]
    def __cause__(self) -> BaseException | None:
        self.reads += 1
        if self.reads > 10:
            raise AssertionError("the chain is walked around again")
        return self.other


def test_a_chain_that_loops_is_walked_once() -> None:
    first, second = Looped(), Looped()
    first.other, second.other = second, first
    assert registry._masked_import(first, "nowhere.at_all") is None


def gemm_module(*names: str) -> ModuleType:
    """A dist-GEMM module that holds these projection classes alone."""
    module = ModuleType(registry.DIST_GEMM_MODULE)
    for name in names:
        setattr(module, name, type(name, (), {"Config": type("Config", (), {})}))
    return module


class Model:
    """A model spec's model, ``traverse`` as torchtitan's."""

    def __init__(self, *layers: object) -> None:
        self.layers = layers

    def traverse(self, cls: type) -> list[tuple[str, object]]:
        return [(f"layers.{i}", layer) for i, layer in enumerate(self.layers)
                if isinstance(layer, cls)]  # fmt: skip


@pytest.mark.parametrize(
    "config",
    [SimpleNamespace(), SimpleNamespace(model_spec=SimpleNamespace())],
    ids=["no model_spec", "no model"],
)
def test_a_config_without_a_model_spec_holds_no_dist_gemm(
    config: object, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Even where the dist-GEMM module was imported."""
    module = gemm_module(*registry.DIST_GEMM_CLASSES)
    monkeypatch.setitem(sys.modules, registry.DIST_GEMM_MODULE, module)
    assert registry._has_dist_gemm(config) is False


def test_a_dist_gemm_module_without_some_projections_is_looked_into(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A torchtitan whose module has other classes: those it has are found."""
    module = gemm_module("RowParallelLinear")
    monkeypatch.setitem(sys.modules, registry.DIST_GEMM_MODULE, module)

    def spec(*layers: object) -> SimpleNamespace:
        return SimpleNamespace(model_spec=SimpleNamespace(model=Model(*layers)))

    assert registry._has_dist_gemm(spec(module.RowParallelLinear.Config())) is True
    assert registry._has_dist_gemm(spec(object())) is False


#: A config of torchtitan 0.3.0's: ``compile.passes`` is no TOML era's
#: ``compiler_toolkit`` list, and a field of its own is a typo away from ours.
ERA_RECIPES = {
    "era_recipes/__init__.py": "",
    "era_recipes/config_registry.py": """
from torchtitan.experiments.graph_trainer import trainer_config

def passes():
    config = trainer_config("llama3", "debugmodel", moe=False)
    config.compile.enable_passes = False
    config.compile.passes = ["cudagraph"]
    config.compile.enable_pass = False
    return config
""",
}


def test_a_registry_config_is_read_as_torchtitan_0_3_reads_it(
    world: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """No cudagraph from ``compile.passes``; a flag torchtitan takes that our
    reading refuses (a near miss of ours) leaves every field the config's."""
    on_path(world, monkeypatch, ERA_RECIPES)
    try:
        config = read_config(["--module", "era_recipes", "--config", "passes",
                              "--compile.enable_pass"])  # fmt: skip
        assert config.settings["compile.passes"].value == ("cudagraph",)
        assert config.inputs.cudagraph is False
        sources = {setting.source for setting in config.settings.values()}
        assert "CLI" not in sources
    finally:
        forget("torchtitan", "era_recipes")

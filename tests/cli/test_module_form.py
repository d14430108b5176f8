"""torchtitan's ``--module``/``--config`` form through the commands, with a
stand-in torchtitan: ``explain`` and ``verify`` evaluate the config as the hook
does, in a child interpreter (torchtitan on its ``PYTHONPATH``, the recipes in
its working directory), never in the command's own process; one line for every
refusal. The launch itself, end to end, is in tests/e2e/test_module_launch.py."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
from functools import partial
from pathlib import Path
from typing import Any

import pytest

from rocm_hwq_autoset._cli import CUT_SHORT, main
from rocm_hwq_autoset._cli._common import Reading
from rocm_hwq_autoset._environ import DEFAULT_TIMEOUT, QUEUES, timeout

from ..data import kernel, write_trace
from ..helpers import GOLDEN, ROCM_VERSION_PY, check_golden, fake_torch
from ..standin import write_recipes, write_standin
from .commands import (
    case,
    explain,
    explain_json,
    exported,
    refused,
    setting_said,
    transcript,
)

ROOT = Path(__file__).resolve().parents[2]
DS = ["--module", "graph_trainer.deepseek_v3", "--config",
      "graph_trainer_deepseek_v3_debugmodel"]  # fmt: skip
LLAMA = ["--module=graph_trainer.llama3", "--config=graph_trainer_llama3_debugmodel"]

#: A recipe module whose registry answers a missing config as torchtitan 0.3.0's
#: ConfigManager does: the name, the module, and every config function it has.
LONG_RECIPES = """
NAMES = [f"{model}_{size}" for model in ("llama3", "llama4", "qwen3", "deepseek_v3")
         for size in ("debugmodel", "1b", "8b", "16b", "32b", "70b", "405b",
                      "671b", "debugmodel_flex_attn", "debugmodel_float8")]

def __getattr__(name):
    raise ValueError(
        f"Config function {name!r} not found in long_recipes.config_registry. "
        f"Available config functions: {NAMES}"
    )
"""


@pytest.fixture
def standin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The stand-in torchtitan where the evaluating child finds it (its
    ``PYTHONPATH``, this package beside it), and a working directory of recipes.
    This process's own ``sys.path`` stays as it is: it must not need them."""
    root = write_standin(tmp_path / "standin")
    work = write_recipes(tmp_path / "work")
    (work / "long_recipes").mkdir()
    (work / "long_recipes" / "__init__.py").write_text("")
    (work / "long_recipes" / "config_registry.py").write_text(LONG_RECIPES)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(root), str(ROOT)]))
    monkeypatch.setenv("STANDIN_LOG", str(tmp_path / "standin.log"))
    monkeypatch.chdir(work)
    return tmp_path / "standin.log"


def evaluations(log: Path) -> list[list[Any]]:
    """The stand-in's ``parse_args`` calls: ``[name, pid, args, ...]``."""
    if not log.exists():
        return []
    calls = [json.loads(line) for line in log.read_text().splitlines()]
    return [call for call in calls if call[0] == "parse_args"]


@pytest.mark.parametrize(
    ("args", "lanes"),
    [
        (LLAMA, ["compute", "all_reduce", "fsdp_comm", "cudagraph_capture"]),
        ([*LLAMA, "--compile.disable_passes", "cudagraph_pass"],
         ["compute", "all_reduce", "fsdp_comm"]),
        ([*LLAMA, "--compile.enable_fsdp_ag_rs_overlap"],
         ["compute", "all_reduce", "dense_all_gather", "reduce_scatter"]),
        (DS, ["compute", "all_reduce", "fsdp_comm", "cudagraph_capture"]),
        ([*DS, "--parallelism.expert_parallel_degree", "2"],
         ["compute", "all_reduce", "fsdp_comm", "expert_comm", "cudagraph_capture"]),
        ([*DS, "--parallelism.expert_parallel_degree=2",
          "--compile.enable_fsdp_ag_rs_overlap"],
         ["compute", "all_reduce", "dense_all_gather", "reduce_scatter",
          "expert_comm"]),
        (["--module", "my_recipes", "--config", "dense_tp2",
          "--parallelism.expert_parallel_degree", "2"],
         ["compute", "all_reduce", "fsdp_comm", "tp_all_gather", "cudagraph_capture"]),
    ],
)  # fmt: skip
def test_explain_evaluates_like_torchtitan(
    standin: Path, capsys: pytest.CaptureFixture[str], args: list[str], lanes: list[str]
) -> None:
    doc = explain_json(capsys, *args)
    assert doc["lanes"] == lanes
    assert doc["queues"] == (8 if len(lanes) > 4 else 4)
    assert "torch" not in sys.modules and "torchtitan" not in sys.modules
    [evaluation] = evaluations(standin)
    assert evaluation[1] != os.getpid() and evaluation[2] == args


def test_explain_sources_and_model(
    standin: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    doc = explain_json(capsys, *DS, "--parallelism.expert_parallel_degree", "2")
    settings = doc["settings"]
    assert settings["parallelism.expert_parallel_degree"] == {
        "value": 2,
        "source": "CLI",
    }
    assert settings["compile.enable_passes"] == {"value": True, "source": "config"}
    assert settings["model.name"] == {"value": "deepseek_v3", "source": "config"}
    assert doc["inputs"]["moe"] is True and doc["inputs"]["moe_from"] == "traverse"
    assert doc["config"] == Reading(DS, {}).source
    assert doc["config"].startswith(f"{' '.join(DS)} (")
    why = doc["reasons"]["expert_comm"].split("; ")
    assert why == [why[0], setting_said(doc, "parallelism.expert_parallel_degree")]
    assert TRAVERSE in why[0].split() and "no" not in why[0].split()


#: How a ``--module`` launch's reasons name the child's look into the model.
TRAVERSE = "(model_spec.model.traverse(MoE.Config))"


def test_explain_says_a_dense_model_has_no_moe_layers(
    standin: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    doc = explain_json(capsys, *LLAMA, "--parallelism.expert_parallel_degree", "2")
    assert doc["inputs"]["moe"] is False and doc["inputs"]["moe_from"] == "traverse"
    why = doc["reasons"]["expert_comm"].split("; ")
    assert why == [why[0], setting_said(doc, "parallelism.expert_parallel_degree")]
    assert TRAVERSE in why[0].split() and "no" in why[0].split()


def found_by(doc: dict[str, Any]) -> str:
    """How the evaluation was found: ``evaluated``, or ``from the cache``."""
    return str(doc["evaluation"]).split(" (")[0]


def test_the_evaluation_is_cached_and_said(
    standin: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The first ``explain`` evaluates, the next one reads the cache, ``--no-cache``
    evaluates anew; the report's ``evaluation`` row says which."""
    first = explain_json(capsys, *LLAMA)["evaluation"]
    assert first.split() == ["evaluated", "(cache:", "no", "entry)"]
    assert found_by(explain_json(capsys, *LLAMA)) == "from the cache"
    assert len(evaluations(standin)) == 1
    code, out, _ = explain(capsys, "--no-cache", *LLAMA)
    assert code == 0 and len(evaluations(standin)) == 2
    rows = dict(line.split(None, 1) for line in out.splitlines()[:6]
                if line and not line.startswith(" "))  # fmt: skip
    assert rows["evaluation"] == "evaluated (--no-cache)"
    assert max(len(line) for line in out.splitlines()) <= 80
    for cache in ("1", "0"):  # an export always evaluates, the cache on or off
        monkeypatch.setenv("ROCM_HWQ_AUTOSET_CACHE", cache)
        code, _, err = explain(capsys, "--export", "--verbose", *LLAMA)  # its report
        rows = dict(line.split(None, 1) for line in err.splitlines()[:6]
                    if line and not line.startswith(" "))  # fmt: skip
        held = rows["evaluation"].startswith("evaluated (never from")
        assert code == 0 and held is (cache == "1")  # only a cache holds it


def test_verify_evaluates_a_module_launch_as_explain_does(
    standin: Path, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    trace = write_trace(tmp_path / "trace.json",
                        {"traceEvents": [kernel(0, s) for s in range(5)]})  # fmt: skip
    args = [*DS, "--parallelism.expert_parallel_degree", "2"]
    assert main(["verify", "--json", trace, *args]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["queues"] == 8  # the config's 5 lanes, not torchtitan's defaults
    again = explain_json(capsys, *args)  # verify left its evaluation in the cache
    assert again["queues"] == 8 and found_by(again) == "from the cache"
    assert len(evaluations(standin)) == 1


def test_explain_world_size(
    standin: Path, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    args = ["--module", "my_recipes", "--config", "dense_tp2"]
    doc = explain_json(capsys, "--world-size", "2", *args)
    assert "fsdp_comm" not in doc["lanes"]  # 2 // tp 2 = 1
    assert doc["dp_shard_resolved"] == 1
    monkeypatch.setenv("WORLD_SIZE", "8")
    doc = explain_json(capsys, *args)
    assert doc["world_size"] == 8 and doc["dp_shard_resolved"] == 4
    assert "fsdp_comm" in doc["lanes"]
    assert len(evaluations(standin)) == 1  # the world size is not in the key


@pytest.mark.parametrize(
    ("args", "said"),
    [
        ([*LLAMA[:1], "--config", "nope"],
         "--module/--config: torchtitan could not build the config (AttributeError"),
        (["--module", "nope", "--config", "x"],
         "--module/--config: torchtitan could not build the config (ImportError"),
        ([*LLAMA, "--compile.enable_passes", "False"],
         "--module/--config: torchtitan rejected the arguments: Unrecognized"
         " arguments: False"),
    ],
)  # fmt: skip
def test_explain_errors(
    standin: Path, capsys: pytest.CaptureFixture[str], args: list[str], said: str
) -> None:
    assert refused(capsys, *args).startswith(said)
    code, out, _ = explain(capsys, "--json", *args)
    assert code == 2 and json.loads(out)["error"].startswith(said)


def test_a_missing_config_is_one_short_line(
    standin: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """torchtitan names every config function of the module (40 here, some 870
    characters): the list is cut to its first few, and the line holds the
    rest whole (was: cut to 240 characters, in the middle of the cause). The
    line in full: the golden of ``test_the_wording_of_the_module_form``."""
    said = refused(capsys, "--module", "long_recipes", "--config", "nope")
    assert said.startswith("--module/--config: ") and said.endswith(" in all)])")
    assert "(ValueError:" in said.split() and "'nope'" in said.split()
    first_few = ", ".join(repr(f"llama3_{size}") for size in
                          ("debugmodel", "1b", "8b", "16b", "32b"))  # fmt: skip
    assert f"[{first_few}, ... (40 " in said and len(said) < 300


#: A recipe whose config function refuses with a long explanation, as
#: torchtitan's own validation does (several sentences, then the remedy).
PROSE_RECIPES = """
def c():
    raise ValueError(
        "Pipeline parallelism needs the number of layers to divide evenly among"
        " the stages. " * 6 + "Set --parallelism.pipeline_parallel_degree so that"
        " it divides the model's layers, or set"
        " --parallelism.pipeline_parallel_layers_per_stage."
    )
"""
WHOLE = (
    "--module/--config: torchtitan could not build the config (ValueError: "
    + "Pipeline parallelism needs the number of layers to divide evenly among the"
    " stages. " * 6 + "Set --parallelism.pipeline_parallel_degree so that it"
    " divides the model's layers, or set"
    " --parallelism.pipeline_parallel_layers_per_stage.)"
)


@pytest.fixture
def prose(standin: Path) -> list[str]:
    Path("prose_recipes").mkdir()
    Path("prose_recipes", "__init__.py").write_text("")
    Path("prose_recipes", "config_registry.py").write_text(PROSE_RECIPES)
    return ["--module", "prose_recipes", "--config", "c"]


def test_torchtitans_refusal_whole_in_json_and_text(
    prose: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    """Was: cut to 240 characters everywhere. JSON and the text a person reads
    hold it whole (the text wrapped under its one bounded line); an export's
    line stays one line, and keeps the start (the cause) and the remedy."""
    assert len(WHOLE) > 600
    code, out, err = explain(capsys, "--json", *prose)
    assert code == 2 and json.loads(out) == {"error": WHOLE}
    line = err.splitlines()[0]
    assert err == line + "\n" and len(line) <= len("rocm-hwq-autoset: error: ") + 400
    code, out, err = explain(capsys, *prose)
    first, *wrapped = err.splitlines()
    assert (code, out, first) == (2, "", line)
    assert " ".join(w.strip() for w in wrapped) == WHOLE
    assert all(len(w) <= 79 for w in wrapped)
    code, out, err = explain(capsys, "--export", *prose)
    assert (code, out, err) == (2, "false\n", line + "\n")
    cause, remedy = WHOLE[: WHOLE.index("Pipeline") + 8], WHOLE[-60:]
    assert line.startswith(f"rocm-hwq-autoset: error: {cause}")
    assert line.endswith(remedy) and remedy.endswith("_layers_per_stage.)")


def test_doctor_holds_torchtitans_refusal_whole(
    prose: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["doctor", "--", *prose]) == 1
    flat = " ".join(capsys.readouterr().out.split())
    said = f"warning: {WHOLE}; {QUEUES} left unset"
    assert f"FAIL {LAUNCH} {said}" in flat
    assert f"unhealthy: {LAUNCH}: {said}" in flat


#: The topic of a launch's row in doctor's report.
LAUNCH = "for that launch"


def test_explain_without_torchtitan(
    standin: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:  # fmt: skip
    blocker = tmp_path / "blocker"
    (blocker / "torchtitan").mkdir(parents=True)
    why = "no torchtitan here"
    (blocker / "torchtitan" / "__init__.py").write_text(f"raise ImportError({why!r})\n")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(blocker), str(ROOT)]))
    said = refused(capsys, *LLAMA)
    assert said.startswith("--module/--config: torchtitan ")
    assert said.endswith(f" (ImportError: {why})")


def test_explain_on_rocm_reuses_its_evaluation(
    standin: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    """The hook line of ``explain --module`` does not evaluate the config again."""
    monkeypatch.syspath_prepend(str(fake_torch(tmp_path / "rocm", ROCM_VERSION_PY)))
    doc = explain_json(capsys, *DS, "--parallelism.expert_parallel_degree", "2")
    assert doc["environment"]["rocm"] is True
    assert doc["environment"]["hook"] == f"would set {QUEUES}=8"
    [evaluation] = evaluations(standin)
    assert evaluation[1] != os.getpid()  # in a child, once
    assert evaluation[4] == "0"  # with the hook off in the child


@pytest.mark.parametrize("seconds", ["1e10", "1e9", "inf", "2m", "300s"])
def test_a_timeout_it_cannot_use_is_one_line_and_the_default(
    standin: Path, capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch, seconds: str,
) -> None:  # fmt: skip
    """Was: ``ROCM_HWQ_AUTOSET_TIMEOUT=1e10`` overflowed ``select`` (a
    traceback in every command, "internal error" in the hook), and ``1e9``
    silently disabled the background check (ten timeouts overflow); then
    ``2m`` refused the whole command. Now: one line, and the default."""
    monkeypatch.setenv("ROCM_HWQ_AUTOSET_TIMEOUT", seconds)
    monkeypatch.setenv("ROCM_HWQ_AUTOSET_LOG", "quiet")
    code, out, err = explain(capsys, "--export", *LLAMA)
    assert (code, out) == (0, exported(4))
    used, problem = timeout(os.environ)
    assert (used, problem is not None) == (DEFAULT_TIMEOUT, True)
    assert err == f"rocm-hwq-autoset: warning: {problem}\n"
    assert str(problem).startswith(f"ROCM_HWQ_AUTOSET_TIMEOUT={seconds!r} ")


#: A recipe whose answer hangs on a file it only tests for: no recording of
#: what the evaluation read sees that.
EXISTS_RECIPES = """
import os
from torchtitan.experiments.graph_trainer import trainer_config

def c():
    cp = 2 if os.path.exists("flag") else 1
    return trainer_config("my_model", "big", moe=False, context_parallel_degree=cp)
"""


def test_an_export_and_verify_never_take_the_cache_s_word(
    standin: Path, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """Was: ``explain --export`` on a stale entry exported the old Q, which the
    job script then made explicit (so the hook left it, and no background check
    ran): stale for good, silently. An exported value and verify's judgement
    are evaluated now, and the cache holds their answer for the next reading."""
    (Path("exists_recipes")).mkdir()
    Path("exists_recipes", "__init__.py").write_text("")
    Path("exists_recipes", "config_registry.py").write_text(EXISTS_RECIPES)
    args = ["--module", "exists_recipes", "--config", "c"]
    assert explain_json(capsys, *args)["queues"] == 4  # evaluated, stored
    assert found_by(explain_json(capsys, *args)) == "from the cache"
    Path("flag").write_text("")  # what no record sees
    code, out, err = explain(capsys, "--export", *args)
    assert (code, out) == (0, exported(8)), err
    again = explain_json(capsys, *args)  # the cache now holds the fresh answer
    assert again["queues"] == 8 and found_by(again) == "from the cache"
    Path("flag").unlink()
    trace = write_trace(tmp_path / "t.json",
                        {"traceEvents": [kernel(0, s) for s in range(5)]})  # fmt: skip
    assert main(["verify", "--json", trace, *args]) == 1  # 5 streams > Q 4
    assert json.loads(capsys.readouterr().out)["queues"] == 4


WAITING = (
    "rocm-hwq-autoset: waiting for the --module/--config evaluation (torchtitan"
    " builds graph_trainer.deepseek_v3's config graph_trainer_deepseek_v3_debugmodel"
    " in a child); at most "
)


def test_a_slow_evaluation_is_said_as_the_launch_says_it(
    standin: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Was: nothing on stderr however long the config took to build."""
    monkeypatch.setenv("STANDIN_SLEEP", "3")
    code, out, err = explain(capsys, "--json", *DS)
    assert code == 0 and json.loads(out)["queues"] == 4
    assert err.startswith(WAITING) and err.count("\n") == 1, err
    assert err.endswith(" s more (ROCM_HWQ_AUTOSET_TIMEOUT)\n"), err


@pytest.mark.parametrize("form", ["", "--export"])
def test_ctrl_c_during_an_evaluation_is_one_line(
    form: str, standin: Path, tmp_path: Path
) -> None:
    """Was: a ``KeyboardInterrupt`` traceback through the package's frames.
    One line, the shell's status for SIGINT, the child ended; ``false`` for an
    export, whose ``eval`` then fails."""
    env = {**os.environ, "STANDIN_SLEEP": "60", "ROCM_HWQ_AUTOSET_CACHE_DIR":
           str(tmp_path / "cache")}  # fmt: skip
    command = [sys.executable, "-m", "rocm_hwq_autoset", "explain",
               *([form] if form else []), *DS]  # fmt: skip
    proc = subprocess.Popen(command, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True,
                            preexec_fn=_default_sigint)  # fmt: skip
    assert proc.stderr is not None
    assert proc.stderr.readline().startswith(WAITING)  # after 2 s
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert (proc.returncode, out) == (130, "false\n" if form else "")
    assert err == f"rocm-hwq-autoset: {CUT_SHORT}\n"  # the wording: verify's golden
    with contextlib.suppress(FileNotFoundError):  # the child's last word
        log = (tmp_path / "standin.log").read_text().splitlines()
        pids = [json.loads(line)[1] for line in log]
        assert not [p for p in pids if os.path.exists(f"/proc/{p}")]


def _default_sigint() -> None:
    """SIGINT at its default, as in a shell's job (a pytest worker may start
    the command with it ignored)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def test_the_wording_of_the_module_form(
    prose: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    """What ``explain`` says of a ``--module`` launch, for the cases the tests
    above judge by their values: the reports (without the machine's
    environment section), refusals and warnings, pinned here once
    (``UPDATE_GOLDEN=1``)."""
    blocker = tmp_path / "blocker"
    (blocker / "torchtitan").mkdir(parents=True)
    (blocker / "torchtitan" / "__init__.py").write_text("raise ImportError('none')\n")
    ep2 = ["--parallelism.expert_parallel_degree", "2"]
    cases: list[tuple[str, dict[str, str], list[str]]] = [
        ("a MoE model", {}, [*DS, *ep2]),
        ("a dense model, not from the cache", {}, ["--no-cache", *LLAMA, *ep2]),
        ("a missing config", {}, ["--module", "long_recipes", "--config", "nope"]),
        ("torchtitan's refusal", {}, prose),
        ("torchtitan's refusal, in JSON", {}, ["--json", *prose]),
        ("torchtitan's refusal, exported", {}, ["--export", *prose]),
        ("no torchtitan",
         {"PYTHONPATH": os.pathsep.join([str(blocker), str(ROOT)])}, LLAMA),
        ("a timeout it cannot use",
         {"ROCM_HWQ_AUTOSET_TIMEOUT": "2m", "ROCM_HWQ_AUTOSET_LOG": "quiet"},
         ["--export", "--no-cache", *LLAMA]),
    ]  # fmt: skip
    text = []
    for title, env, argv in cases:
        command, code, out, err = case(monkeypatch, env, partial(explain, capsys),
                                       "explain", *argv)  # fmt: skip
        command = command.replace(env.get("PYTHONPATH", "\0"), "BLOCKER:ROOT")
        out = out.split("\nin this environment:\n")[0]
        text.append(transcript(f"{title}: {command}", code, out, err))
    check_golden(GOLDEN / "cli" / "module_form.txt", "".join(text))

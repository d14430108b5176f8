"""``_cli/_common``: the commands read training arguments as a launch, built
once from them (``launch_of``), and hand that ``Launch`` to the decision, never
a made-up command line; the dispatcher knows the commands by name only."""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

import pytest

from rocm_hwq_autoset import _argv, _hook
from rocm_hwq_autoset._argv import MODULE_FORM, TOML_FORM
from rocm_hwq_autoset._cli import main
from rocm_hwq_autoset._cli._common import (
    Option,
    Reading,
    add_options,
    fail,
    launch_of,
    option_table,
)

from ..data import kernel, write_trace
from ..helpers import child_env
from ..standin import write_recipes, write_standin

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = str(ROOT / "examples" / "deepseek_v3_16b.toml")


@pytest.mark.parametrize(
    ("args", "form"),
    [
        (["--job.config_file", "j.toml", "--a.b", "1"], TOML_FORM),
        (["--job.config-file=j.toml"], TOML_FORM),
        (["--module", "m", "--config", "c"], MODULE_FORM),
        (["--config=c"], MODULE_FORM),  # torchtitan then asks for --module
        (["--training.steps", "10"], TOML_FORM),  # torchtitan's defaults
        ([], TOML_FORM),
    ],
)
def test_the_launch_of_training_arguments(args: list[str], form: str) -> None:
    """As the hook finds it in ``python -m torchtitan.train ARGS``."""
    launch = launch_of(args)
    assert (launch.form, launch.args, launch.in_process) == (form, tuple(args), True)
    # The same launch as the hook finds in such a process (where it finds one:
    # torchtitan's defaults make none there, nothing for the hook to do).
    found = _argv.find_launch(["-m", *args], ["py", "-m", "torchtitan.train", *args])
    if found is not None:
        assert (found.form, found.args) == (launch.form, launch.args)


@pytest.fixture
def no_process_reading(monkeypatch: pytest.MonkeyPatch) -> None:
    """Reading a process's command line is the hook's: a command that builds an
    argv to be read as one fails here."""

    def refused(*args: object, **kwargs: object) -> None:
        raise AssertionError("a command read a made-up process command line")

    monkeypatch.setattr(_hook, "outcome_for", refused)
    monkeypatch.setattr(_argv, "find_launch", refused)
    monkeypatch.setattr(_argv, "program", refused)


def test_the_commands_hand_decide_the_launch(
    no_process_reading: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    monkeypatch.setenv("ROCM_HWQ_AUTOSET", "force")
    assert main(["explain", "--job.config_file", EXAMPLE]) == 0
    assert main(["explain", "--training.steps", "3"]) == 0
    assert main(["doctor", "--", "--job.config_file", EXAMPLE]) == 0
    trace = write_trace(tmp_path / "t.json", [kernel(0, 1)])
    assert main(["verify", trace, "--job.config_file", EXAMPLE]) == 0
    out = capsys.readouterr().out
    assert out.count("would set GPU_MAX_HW_QUEUES=4") == 3  # explain twice, doctor


def test_a_module_launch_is_evaluated_once_and_decided_from_it(
    no_process_reading: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The recommendation and the hook's outcome come from one evaluation,
    which may come from the cache unless the command asks for a fresh one."""
    root = write_standin(tmp_path / "standin")
    work = write_recipes(tmp_path / "work")
    monkeypatch.setenv("PYTHONPATH", f"{root}:{ROOT}")
    monkeypatch.setenv("ROCM_HWQ_AUTOSET", "force")
    monkeypatch.chdir(work)
    from rocm_hwq_autoset import _evaluation

    calls = []
    evaluate = _evaluation.evaluate

    def counted(*args: object, **kwargs: object) -> object:
        calls.append(kwargs)
        return evaluate(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(_evaluation, "evaluate", counted)
    reading = Reading(
        ["--module", "graph_trainer.llama3", "--config",
         "graph_trainer_llama3_debugmodel"],
        {"ROCM_HWQ_AUTOSET": "force", "PYTHONPATH": f"{root}:{ROOT}",
         "ROCM_HWQ_AUTOSET_CACHE": "0"},
        use_cache=False,
    )  # fmt: skip
    rec = reading.rec
    outcome = reading.hook_outcome()
    assert len(calls) == 1 and calls[0]["fresh"] is False
    assert outcome.queues == rec.queues


def test_the_dispatcher_imports_only_the_command_that_runs(tmp_path: Path) -> None:
    """Each command module owns its options; the dispatcher needs no other."""
    trace = write_trace(tmp_path / "t.json", [kernel(0, 1)])
    code = (
        "import sys; from rocm_hwq_autoset._cli import main;"
        f" status = main(['verify', '--queues', '4', {trace!r}]);"
        " print(sorted(m for m in sys.modules if m.startswith(PKG)))"
    ).replace("PKG", repr("rocm_hwq_autoset._cli."))
    env = child_env({"PYTHONPATH": str(ROOT)})
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env,
        timeout=60,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines()[-1] == str(
        ["rocm_hwq_autoset._cli._common", "rocm_hwq_autoset._cli.term",
         "rocm_hwq_autoset._cli.verify"]
    )  # fmt: skip


def test_the_dispatcher_reads_no_private_argparse_state() -> None:
    source = (ROOT / "rocm_hwq_autoset" / "_cli" / "__init__.py").read_text()
    assert "._actions" not in source and "_option_string_actions" not in source


def test_an_error_is_one_line_and_whole_only_when_asked(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A message too long for its line is cut there; with ``whole``, it
    follows wrapped at 79 columns, never inside a word (a path, a flag,
    hyphens and all)."""
    long_word = "/" + "a-b" * 40
    message = f"{long_word} " + "word " * 60
    assert fail(message) == 2
    assert capsys.readouterr().err.count("\n") == 1
    assert fail(message, whole=True) == 2
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) > 2 and max(len(line) for line in lines[2:]) <= 79
    assert long_word in lines[1].split()


def test_only_options_of_one_exclusive_group_are_refused_together(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """``explain``'s table: ``--json`` and ``--export`` are one group; its
    other options, in none, go with each other."""
    assert main(["explain", "--json", "--export"]) == 2
    assert main(["explain", "--json", "--verbose", "--world-size", "8"]) == 0
    capsys.readouterr()


def test_an_option_table_says_what_takes_a_value_and_what_excludes_what(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Made here, not at import (a command's table is): each option's names
    with whether it takes a value; only options of one group exclude each
    other."""
    options = [
        Option("--name", "-n", takes_value=True),
        Option("--plain", takes_value=False, action="store_true"),
        Option("--one", takes_value=False, exclusive="form", action="store_true"),
        Option("--other", takes_value=False, exclusive="form", action="store_true"),
    ]
    table = {"--name": True, "-n": True, "--plain": False, "--one": False,
             "--other": False}  # fmt: skip
    assert option_table(options) == table
    parser = argparse.ArgumentParser()
    add_options(parser, options)
    opts = parser.parse_args(["-n", "x", "--plain", "--one"])
    assert vars(opts) == {"name": "x", "plain": True, "one": True, "other": False}
    with pytest.raises(SystemExit) as refused:
        parser.parse_args(["--one", "--other"])
    assert refused.value.code == 2 and "not allowed with" in capsys.readouterr().err

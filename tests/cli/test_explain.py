"""``explain``: golden reports on the tests' own configs, JSON, export, and one
line naming the input for every input it refuses."""

from __future__ import annotations

import errno
import json
import os
import subprocess
import sys
from itertools import chain
from pathlib import Path

import pytest

from rocm_hwq_autoset import __version__
from rocm_hwq_autoset._cli import HELP_OPTIONS, main, split_args
from rocm_hwq_autoset._cli import explain as _explain
from rocm_hwq_autoset._cli._common import (
    PROG,
    TRAINING_ARGS_HELP,
    Reading,
    option_table,
    training_environ,
)
from rocm_hwq_autoset._cli.term import paint
from rocm_hwq_autoset._environ import QUEUES, QueuesSetting
from rocm_hwq_autoset._left_out import LEFT_OUT, verify_command
from rocm_hwq_autoset._rocm import detect

from ..data import EP2_OVERLAP, EXPECTED, write_job
from ..helpers import (
    CUDA_VERSION_PY,
    GOLDEN,
    ROCM_VERSION_PY,
    check_golden,
    check_lines,
    child_env,
    fake_torch,
)
from .commands import (
    PREFIX,
    explain,
    explain_json,
    exported,
    refused,
    setting_said,
    transcript,
)

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = str(ROOT / "examples" / "deepseek_v3_16b.toml")


@pytest.fixture
def cuda_machine(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """This process sees a CUDA torch first on its path."""
    torch_root = fake_torch(tmp_path / "cuda", CUDA_VERSION_PY)
    monkeypatch.syspath_prepend(str(torch_root))
    return torch_root


@pytest.fixture
def rocm_machine(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """This process sees a ROCm torch first on its path."""
    torch_root = fake_torch(tmp_path / "rocm", ROCM_VERSION_PY)
    monkeypatch.syspath_prepend(str(torch_root))
    return torch_root


@pytest.mark.parametrize("name", sorted(EXPECTED))
@pytest.mark.parametrize("launch", ["shipped", "ep2-overlap"])
def test_golden_reports(
    name: str,
    launch: str,
    cuda_machine: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The report for each of the tests' own configs (``tests/data.py``);
    ``UPDATE_GOLDEN=1`` writes them anew."""
    write_job(tmp_path / "jobs", name)
    monkeypatch.chdir(tmp_path / "jobs")
    extra = EP2_OVERLAP if launch == "ep2-overlap" else []
    code, out, err = explain(capsys, "--job.config_file", name, *extra)
    assert code == 0 and err == ""
    # The environment section depends on the machine; it is tested on its own.
    report, environment = out.split("\nin this environment:\n")
    assert str(cuda_machine) in environment
    check_golden(GOLDEN / f"{name[: -len('.toml')]}.{launch}.txt", report)
    assert max(len(line) for line in report.splitlines()[1:]) <= 80
    lanes = [line.split()[0] for line in report.split("GPU streams counted:\n")[1]
             .split("\n\n")[0].splitlines() if not line.startswith("   ")]  # fmt: skip
    assert tuple(lanes) == EXPECTED[name][1 if extra else 0]


def test_the_golden_update_mode_never_passes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    golden = tmp_path / "x.txt"
    monkeypatch.setenv("UPDATE_GOLDEN", "1")
    for report in ("new\n", "new\n"):  # written, then unchanged: fails both times
        with pytest.raises(pytest.fail.Exception, match="written anew"):
            check_golden(golden, report)
        assert golden.read_text() == report
    monkeypatch.delenv("UPDATE_GOLDEN")
    check_golden(golden, "new\n")
    with pytest.raises(AssertionError):
        check_golden(golden, "other\n")


def test_json(cuda_machine: Path, capsys: pytest.CaptureFixture[str]) -> None:
    doc = explain_json(
        capsys, "--job.config_file", EXAMPLE,
        "--parallelism.expert_parallel_degree", "2",
        "--compile.enable_fsdp_ag_rs_overlap",
    )  # fmt: skip
    assert doc["queues"] == 8 and isinstance(doc["queues"], int)
    assert doc["lanes"] == ["compute", "all_reduce", "dense_all_gather",
                            "reduce_scatter", "expert_comm"]  # fmt: skip
    assert doc["streams"] == 5
    assert doc["settings"]["parallelism.expert_parallel_degree"] == {
        "value": 2,
        "source": "CLI",
    }
    assert doc["settings"]["model.name"] == {"value": "deepseek_v3", "source": "TOML"}
    assert doc["settings"]["compile.disable_passes"] == {
        "value": [],
        "source": "default",
    }
    assert doc["config"] == EXAMPLE and doc["world_size"] is None
    assert doc["dp_shard_resolved"] is None and doc["evaluation"] is None
    assert doc["facts"] == {"fsdp": True, "overlap": True, "moe": True,
                            "expert": True, "tensor": False, "context": False,
                            "cudagraph": False, "async_tp": False,
                            "dist_gemm": False, "ep_isolation": False,
                            "trainer_cudagraph": True}  # fmt: skip
    # Every lane of the model, counted or not, with the facts that decided it.
    table = {row["lane"]: row for row in doc["table"]}
    assert [row["lane"] for row in doc["table"] if row["counted"]] == doc["lanes"]
    assert len(table) == 9
    assert table["fsdp_comm"]["counted"] is False
    assert table["fsdp_comm"]["facts"] == ["fsdp", "overlap"]
    overlap = setting_said(doc, "compile.enable_fsdp_ag_rs_overlap")
    assert overlap.endswith(" = true (CLI)") and overlap in table["fsdp_comm"]["why"]
    expert = table["expert_comm"]["why"]
    assert expert.endswith(
        f"; {setting_said(doc, 'parallelism.expert_parallel_degree')}"
    )
    assert "deepseek_v3" in expert and "MoE;" in expert.split()
    assert doc["reasons"] == {lane: row["why"] for lane, row in table.items()}
    assert doc["environment"]["rocm"] is False
    hook = doc["environment"]["hook"]
    assert hook.startswith("nothing to do: ")
    assert hook.endswith(doc["environment"]["rocm_evidence"])


def summary_for(*training: str) -> str:
    """``--export``'s summary line on stderr for these training arguments in
    this environment, by the package's own ``export_summary`` (its wording:
    the golden of ``test_the_wording_of_explain``)."""
    reading = Reading(training, training_environ(None))
    off = _explain.hook_off(os.environ)
    said = _explain.export_summary(
        reading.rec, QueuesSetting(os.environ), reading.source, off
    )
    return f"rocm-hwq-autoset: {said}\n"


def test_world_size(cuda_machine: Path, capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["--job.config_file", EXAMPLE, "--parallelism.tensor_parallel_degree=8"]
    doc = explain_json(capsys, "--world-size", "8", *argv)
    assert doc["lanes"] == ["compute", "all_reduce", "tp_all_gather"]
    assert doc["world_size"] == 8 and doc["dp_shard_resolved"] == 1
    doc = explain_json(capsys, "--world-size=16", *argv)
    assert doc["dp_shard_resolved"] == 2
    resolved = doc["reasons"]["fsdp_comm"]
    assert "WORLD_SIZE" in resolved.split() and "(1*1*8*1);" in resolved.split()
    _, out, _ = explain(capsys, "--world-size=16", *argv)
    assert resolved in " ".join(out.split())


def test_world_size_from_the_environment(
    cuda_machine: Path, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    """``WORLD_SIZE``, as a worker (and the hook in it) reads it; ``--world-size``
    wins over it; a bad one is named."""
    argv = ["--job.config_file", EXAMPLE, "--parallelism.tensor_parallel_degree=8"]
    monkeypatch.setenv("WORLD_SIZE", "8")
    doc = explain_json(capsys, *argv)
    assert doc["world_size"] == 8 and doc["dp_shard_resolved"] == 1
    assert doc["lanes"] == ["compute", "all_reduce", "tp_all_gather"]
    doc = explain_json(capsys, "--world-size", "16", *argv)
    assert doc["world_size"] == 16 and doc["dp_shard_resolved"] == 2
    assert "fsdp_comm" in doc["lanes"]
    monkeypatch.setenv("WORLD_SIZE", "eight")
    assert refused(capsys, *argv).startswith("WORLD_SIZE: 'eight' ")


def test_export(cuda_machine: Path, capsys: pytest.CaptureFixture[str]) -> None:
    args = ["--job.config_file", EXAMPLE, "--parallelism.expert_parallel_degree", "2"]
    code, out, err = explain(capsys, "--export", *args)
    assert code == 0
    assert out == exported(4)
    # One summary line on stderr; the report only with --verbose.
    lanes = explain_json(capsys, *args)["lanes"]
    assert err == summary_for(*args) and err.count("\n") == 1
    assert f" {QUEUES}=4 ({len(lanes)} " in err and ", ".join(lanes) in err
    assert f" for {EXAMPLE}; " in err and err.split("; ")[-1].startswith("--verbose ")
    code, out, err = explain(capsys, "--export", "--verbose", *args)
    assert (code, out) == (0, exported(4))
    assert err.startswith(f"config              {EXAMPLE}\n")
    assert f"{QUEUES}=4  (4 streams" in err and "expert_comm" in err
    assert err.endswith(summary_for(*args))


@pytest.mark.parametrize(("level", "lines"), [("quiet", 0), ("verbose", 40)])
def test_export_as_the_log_level_asks(
    level: str, lines: int, cuda_machine: Path, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    """Quiet: nothing on stderr on success; verbose: the whole report."""
    monkeypatch.setenv("ROCM_HWQ_AUTOSET_LOG", level)
    code, out, err = explain(capsys, "--export", "--job.config_file", EXAMPLE)
    assert (code, out) == (0, exported(4))
    assert err.count("\n") >= lines and (err == "") == (lines == 0)
    # A failure is said whatever the level.
    said = refused(capsys, "--export", "--job.config_file", "/nonexistent.toml")
    assert said == f"/nonexistent.toml: {os.strerror(errno.ENOENT)}"


def test_an_empty_value_is_nobodys_and_the_arguments_q_is_exported(
    cuda_machine: Path, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    """HIP would read ``GPU_MAX_HW_QUEUES=""`` as 0: it is no one's choice, so
    the export is the training arguments' Q, as the hook would set it."""
    monkeypatch.setenv("GPU_MAX_HW_QUEUES", "")
    code, out, err = explain(capsys, "--export", "--job.config_file", EXAMPLE)
    assert (code, out) == (0, exported(4))
    assert QueuesSetting(os.environ).explicit is None
    assert err == summary_for("--job.config_file", EXAMPLE)
    assert f" {QUEUES}=4 (3 " in err and f" for {EXAMPLE}; " in err


@pytest.mark.parametrize(
    ("switch", "shown"), [("0", "0"), ("Off", "Off"), ("maybe", "'maybe'")]
)
def test_an_export_where_the_hook_is_off_says_so(
    switch: str, shown: str, cuda_machine: Path, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    """Was: the summary did not say that here only the export sets the value.
    It still exports: the export is how a job sets it where the hook is off.
    The summary names the switch as it was given."""
    monkeypatch.setenv("ROCM_HWQ_AUTOSET", switch)
    code, out, err = explain(capsys, "--export", "--job.config_file", EXAMPLE)
    assert (code, out) == (0, exported(4))
    off = _explain.hook_off(os.environ)
    assert off is not None and f"ROCM_HWQ_AUTOSET={shown}" in off
    assert err == summary_for("--job.config_file", EXAMPLE)
    assert f" for {EXAMPLE}; {off}; " in err
    monkeypatch.setenv("GPU_MAX_HW_QUEUES", "16")
    _, _, err = explain(capsys, "--export", "--job.config_file", EXAMPLE)
    assert err == summary_for("--job.config_file", EXAMPLE)
    assert f" give 4); {off}; " in err


def test_an_explicit_value_is_exported_as_it_is(
    cuda_machine: Path, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    """An explicit ``GPU_MAX_HW_QUEUES`` always wins, in the hook and in the
    export; stderr says so."""
    monkeypatch.setenv("GPU_MAX_HW_QUEUES", "16")
    code, out, err = explain(capsys, "--export", "--job.config_file", EXAMPLE)
    assert code == 0
    assert out == "export GPU_MAX_HW_QUEUES=16\n"  # the user's: no origin of ours
    assert err == summary_for("--job.config_file", EXAMPLE)
    described = QueuesSetting(os.environ).describe()
    assert f" {QUEUES}=16: {described} (" in err and " give 4); " in err


@pytest.mark.parametrize("value", [" 8 ", "08", "8.0", "8abc", "+8", "\t8"])
def test_an_explicit_value_is_exported_as_hip_reads_it(
    value: str, cuda_machine: Path, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    """HIP reads these as 8 (C's ``atoi``): the export is the number, never the
    text, and the summary says what HIP reads."""
    monkeypatch.setenv("GPU_MAX_HW_QUEUES", value)
    setting = QueuesSetting(os.environ)
    assert (setting.hip, setting.explicit) == (8, value)
    code, out, err = explain(capsys, "--export", "--job.config_file", EXAMPLE)
    assert (code, out) == (0, "export GPU_MAX_HW_QUEUES=8\n")
    assert f"={setting.queues}: {setting.describe()} (" in err
    assert f"{value!r} (HIP reads 8)" in setting.describe()
    code, out, _ = explain(capsys, "--job.config_file", EXAMPLE)
    assert (QUEUES, setting.describe()) in environment_rows(out)


def test_a_value_set_by_the_hook_is_not_explicit(
    cuda_machine: Path, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    """In a worker whose launcher set 8 for another launch, the export is this
    launch's Q."""
    monkeypatch.setenv("GPU_MAX_HW_QUEUES", "8")
    monkeypatch.setenv("ROCM_HWQ_AUTOSET_ORIGIN", "8 job.config_file")
    code, out, err = explain(capsys, "--export", "--job.config_file", EXAMPLE)
    assert code == 0 and out == exported(4)
    assert "for " in err and "(3 GPU streams" in err
    code, out, _ = explain(capsys, "--job.config_file", EXAMPLE)
    setting = QueuesSetting(os.environ)
    assert setting.explicit is None and "job.config_file" in setting.describe()
    assert (QUEUES, setting.describe()) in environment_rows(out)


@pytest.mark.parametrize(
    ("value", "reads"), [("abc", "0"), ("0", "0"), ("-2", "-2"), (".5", "0")]
)
def test_an_explicit_value_hip_cannot_use_exports_nothing(
    value: str, reads: str, cuda_machine: Path, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    monkeypatch.setenv("GPU_MAX_HW_QUEUES", value)
    setting = QueuesSetting(os.environ)
    said = refused(capsys, "--export", "--job.config_file", EXAMPLE)
    assert setting.problem is not None and said.startswith(f"{setting.problem}; ")
    assert setting.problem.startswith(f"{QUEUES}={value!r}: ")
    assert setting.hip == int(reads)
    # Without --export, the report says it, as the hook's warning.
    code, out, _ = explain(capsys, "--job.config_file", EXAMPLE)
    assert code == 0
    rows = dict(environment_rows(out))
    assert rows[QUEUES] == setting.describe()
    shown = value if value == reads else f"{value!r} (HIP reads {reads})"
    assert setting.describe().startswith(f"{shown}, ")
    assert rows["the hook"].startswith(f"warning: {setting.problem}; ")


@pytest.mark.parametrize("value", [" 8 ", "8.0", "08"])
def test_an_export_of_an_odd_value_evals_in_a_strict_shell(
    value: str, tmp_path: Path
) -> None:
    """``GPU_MAX_HW_QUEUES=" 8 " explain --export`` then ``eval`` under ``set
    -euo pipefail``: 8, never ``export GPU_MAX_HW_QUEUES= 8 `` (which bash
    refuses: "'8': not a valid identifier")."""
    script = (
        "set -euo pipefail\n"
        f'exports="$("{sys.executable}" -m rocm_hwq_autoset explain --export'
        f' --job.config_file "{EXAMPLE}")"\n'
        'eval "$exports"\n'
        'echo "Q=[$GPU_MAX_HW_QUEUES]"\n'
    )
    env = child_env({
        "PATH": os.environ["PATH"], "PYTHONPATH": str(ROOT),
        "GPU_MAX_HW_QUEUES": value, "ROCM_HWQ_AUTOSET_CACHE_DIR": str(tmp_path / "c"),
    })  # fmt: skip
    proc = subprocess.run(
        ["bash", "-c", script], capture_output=True, text=True, env=env
    )
    assert (proc.returncode, proc.stdout) == (0, "Q=[8]\n"), proc.stderr


def test_export_in_a_shell(tmp_path: Path) -> None:
    """``eval "$(rocm-hwq-autoset explain --export ...)"`` in a job script."""
    script = (
        f'eval "$("{sys.executable}" -m rocm_hwq_autoset explain --export'
        f' --job.config_file "{EXAMPLE}" --parallelism.expert_parallel_degree 2'
        ' --compile.enable_fsdp_ag_rs_overlap)" && echo "Q=$GPU_MAX_HW_QUEUES"'
    )
    env = child_env(
        {
            "PATH": os.environ["PATH"],
            "PYTHONPATH": str(ROOT),
            "ROCM_HWQ_AUTOSET_CACHE_DIR": str(tmp_path / "cache"),
        }
    )
    proc = subprocess.run(
        ["bash", "-c", script], capture_output=True, text=True, env=env
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "Q=8\n"


def readme_export_lines() -> str:
    """The job-script lines the README shows for ``--export``."""
    text = (ROOT / "README.md").read_text()
    start = text.index('eval "$(rocm-hwq-autoset explain --export')
    return text[start : text.index("```", start)]


@pytest.mark.parametrize("config_exists", [True, False])
def test_readme_export_lines_in_a_strict_job_script(
    tmp_path: Path, config_exists: bool
) -> None:
    """The README's lines in a ``set -euo pipefail`` script: the value on
    success; on failure the script stops there, with nothing exported."""
    job = tmp_path / "job.toml"
    if config_exists:
        job.write_text(Path(EXAMPLE).read_text())
    lines = readme_export_lines().replace(
        "rocm-hwq-autoset", f'"{sys.executable}" -m rocm_hwq_autoset'
    )
    script = (
        "set -euo pipefail\n"
        f"cd {str(tmp_path)!r}\n"
        + lines
        + 'echo "reached Q=${GPU_MAX_HW_QUEUES:-unset}"\n'
    )
    env = child_env({"PATH": os.environ["PATH"], "PYTHONPATH": str(ROOT)})
    proc = subprocess.run(
        ["bash", "-c", script], capture_output=True, text=True, env=env
    )
    if config_exists:
        assert proc.returncode == 0, proc.stderr
        assert proc.stdout == "reached Q=4\n"
    else:
        assert proc.returncode == 1  # eval false
        assert proc.stdout == ""
        assert proc.stderr.count("\n") == 1
        assert "job.toml" in proc.stderr


def test_passthrough_and_defaults(
    cuda_machine: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    doc = explain_json(capsys, "--training.steps", "10", "--foo.bar", "x", "y")
    assert doc["config"] == "none: torchtitan's defaults"
    assert doc["lanes"] == ["compute", "all_reduce", "fsdp_comm"]


@pytest.mark.parametrize(
    ("command", "args", "message"),
    [
        ("explain", ["--world_size", "1"],
         "explain: --world_size: unrecognized option; did you mean --world-size?"),
        ("explain", ["--jsno"], "explain: --jsno: unrecognized option; did you mean"
         " --json?"),
        ("explain", ["--foo", "bar"], "explain: --foo: unrecognized option"),
        ("explain", ["--foo=x.y=z"], "explain: --foo: unrecognized option"),
        ("explain", ["--.x.y"], "explain: --.x.y: unrecognized option"),
        ("explain", ["job.yaml"],
         f"explain: unexpected argument 'job.yaml'; {TRAINING_ARGS_HELP}"),
        ("verify", ["t.json", "--queue", "8"], "verify: --queue: unrecognized"
         " option; did you mean --queues?"),
        ("doctor", ["--verbose"], "doctor: --verbose: unrecognized option"),
    ],
)  # fmt: skip
def test_an_option_that_is_neither_ours_nor_torchtitans_is_a_usage_error(
    command: str, args: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main([command, *args]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err == f"{PREFIX}{message}\n"


@pytest.mark.parametrize(
    ("command", "args", "said"),
    [
        ("explain", ["job.toml"],
         "explain: unexpected argument 'job.toml'; did you mean --job.config_file"
         " job.toml?"),
        ("explain", ["--config_file", "job.toml"],
         "explain: --config_file: unrecognized option; did you mean"
         " --job.config_file job.toml?"),
        ("explain", ["--config-file=job.toml"],
         "explain: --config-file: unrecognized option; did you mean"
         " --job.config_file job.toml?"),
        ("explain", ["--job.config", "job.toml", "--training.steps", "3"],
         "explain: --job.config: unrecognized option; did you mean"
         " --job.config_file job.toml?"),
        ("explain", ["--job.config"],
         "explain: --job.config: unrecognized option; did you mean"
         " --job.config_file?"),
        ("explain", ["--config-file", "--training.steps", "3"],
         "explain: --config-file: unrecognized option; did you mean"
         " --job.config_file?"),  # the next argument is no file but a flag
        ("doctor", ["--", "--training.steps", "3", "--job.config", "job.toml"],
         "doctor: --job.config: unrecognized option; did you mean"
         " --job.config_file job.toml?"),
        ("verify", ["t.json", "--job_config_file", "job.toml"],
         "verify: --job_config_file: unrecognized option; did you mean"
         " --job.config_file job.toml?"),
    ],
)  # fmt: skip
def test_the_common_slips_for_the_config_file_flag_name_it(
    command: str, args: list[str], said: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Was: ``explain job.toml`` listed what training arguments are, and
    ``--config_file`` found no option close to it; ``--job.config`` (a dotted
    flag, so a training argument) left the launch without its config file, and
    explain showed torchtitan's defaults."""
    assert main([command, *args]) == 2
    out, err = capsys.readouterr()
    assert (out, err) == ("", f"{PREFIX}{said}\n")


@pytest.mark.parametrize(
    ("command", "args", "option"),
    [
        ("explain", ["--job.config_file", "job.toml", "--world-size"], "--world-size"),
        ("verify", ["t.json", "--queues"], "--queues"),
    ],
)
def test_an_option_of_ours_without_its_value_is_a_usage_error(
    command: str, args: list[str], option: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """argparse says so, with the command's usage; nothing is read."""
    with pytest.raises(SystemExit) as stop:
        main([command, *args])
    assert stop.value.code == 2
    out, err = capsys.readouterr()
    assert out == "" and err.startswith(f"usage: rocm-hwq-autoset {command} ")
    said = err.splitlines()[-1].split(": ")  # argparse's words
    assert said == [f"{PROG} {command}", "error", f"argument {option}",
                    "expected one argument"]  # fmt: skip


@pytest.mark.parametrize(
    ("own", "training", "args"),
    [
        (["--json"], ["--job.config_file", "x"], ["--job.config_file", "x", "--json"]),
        (["--world-size", "8"], ["--a.b", "1"], ["--a.b", "1", "--world-size", "8"]),
        (["--world-size=8"], ["--a.b"], ["--world-size=8", "--a.b"]),
        (["--no-cache"], ["--module", "m"], ["--module", "m", "--no-cache"]),
        (
            [],
            ["--module", "m", "--parallelism.data_parallel_shard_degree", "-1"],
            ["--module", "m", "--parallelism.data_parallel_shard_degree", "-1"],
        ),
        (["--json"], ["--a.b", "1", "--c.d"], ["--a.b", "1", "--json", "--", "--c.d"]),
        ([], ["--a.b", "--help"], ["--", "--a.b", "--help"]),  # torchtitan's own
        ([], ["--module=pkg=x", "--config", "c"], ["--module=pkg=x", "--config", "c"]),
    ],
)
def test_split_args(own: list[str], training: list[str], args: list[str]) -> None:
    options = {**HELP_OPTIONS, **option_table(_explain.OPTIONS)}
    assert split_args("explain", options, args) == (own, training)


def test_the_option_table_is_what_argparse_was_given() -> None:
    """The table the dispatcher splits by is the one explain's parser has."""
    import argparse

    parser = argparse.ArgumentParser()
    _explain.add_arguments(parser)
    opts = parser.parse_args(["--export", "--world-size", "8", "--no-cache"])
    assert (opts.export, opts.world_size, opts.no_cache) == (True, 8, True)
    assert option_table(_explain.OPTIONS) == {
        "--json": False, "--export": False, "--verbose": False,
        "--world-size": True, "--no-cache": False,
    }  # fmt: skip


@pytest.mark.parametrize(
    "args",
    [
        ["--", "--job.config_file", "job.toml", "--world-size", "1"],
        ["--job.config_file", "job.toml", "--", "--world-size=1"],
        ["--", "--job.config_file", "job.toml", "--json"],
    ],
)
def test_an_option_of_explains_after_the_double_dash_is_refused(
    args: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    """After '--' all is torchtitan's: an option of explain's there would be
    silently lost; it is refused with the place it belongs."""
    said = refused(capsys, *args)
    name = args[-1].partition("=")[0] if "=" in args[-1] else args[-2]
    if args[-1] == "--json":
        name = "--json"
    assert said.startswith(f"{name}: ") and "explain's" in said and "'--'" in said


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--job.config_file", "/nonexistent.toml"],
         "/nonexistent.toml: No such file or directory"),
        (["--job.config_file", "/"], "/: not a regular file (a directory)"),
        (["--job.config_file", EXAMPLE, "--parallelism.tensor_parallel_degree", "2.0"],
         "--parallelism.tensor_parallel_degree: '2.0' is not an integer"),
        (["--job.config_file", EXAMPLE, "--parallelism.tensor_parallel_degree", "0"],
         "--parallelism.tensor_parallel_degree: 0 must be >= 1"),
        (["--world-size", "0"], "--world-size: 0"),
    ],
)  # fmt: skip
def test_errors_exit_2_in_one_line(
    args: list[str],
    message: str,
    cuda_machine: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    said = refused(capsys, *args)
    assert said.startswith(message), said


def test_errors_in_a_toml_name_the_file_and_the_field(
    tmp_path: Path, cuda_machine: Path, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    monkeypatch.chdir(tmp_path)
    Path("job.toml").write_text("[parallelism]\ntensor_parallel_degree = 0\n")
    said = refused(capsys, "--job.config_file", "job.toml")
    assert said.startswith("job.toml: parallelism.tensor_parallel_degree: 0 ")
    assert said.endswith(">= 1")
    Path("bad.toml").write_text("[parallelism\n")
    assert refused(capsys, "--job.config_file=bad.toml").startswith(
        "bad.toml: invalid TOML"
    )


@pytest.mark.parametrize(
    ("args", "flag"),
    [
        (["--module", "graph_trainer.llama3"], "--config"),
        (["--config", "graph_trainer_llama3_debugmodel"], "--module"),
        (["--config", "graph_trainer_llama3_debugmodel", "--module"], "--module"),
        (["--module", "graph_trainer.llama3", "--config"], "--config"),
        (["--module=", "--config=x"], "--module"),
    ],
)
def test_a_module_launch_needs_both_flags_with_values(
    args: list[str], flag: str, cuda_machine: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    """As torchtitan's ``ConfigManager`` does; no child is started for it."""
    said = refused(capsys, *args)
    assert said.startswith(f"{flag}: "), said
    assert "requires a value" in said or "is required" in said


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["--job.config_file"],
         "--job.config_file: expects a value: the TOML job config"),
        (["--job.config_file", ""], "--job.config_file: empty path"),
        (["--job.config_file="], "--job.config_file: empty path"),
        (["--parallelism.tensor_parallel_degree", "2", "--job.config-file"],
         "--job.config-file: expects a value: the TOML job config"),
    ],
)  # fmt: skip
def test_a_config_file_flag_needs_a_path(
    args: list[str], said: str, cuda_machine: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    assert refused(capsys, *args) == said


def test_a_flag_without_its_value_is_named_not_the_toml(
    cuda_machine: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    said = refused(capsys, "--job.config_file", EXAMPLE,
                   "--parallelism.expert_parallel_degree")  # fmt: skip
    assert said.split(": ") == ["--parallelism.expert_parallel_degree",
                                "expects a value"]  # fmt: skip


def test_a_flag_a_typo_away_from_ours_is_refused(
    cuda_machine: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """tyro refuses an unknown flag; one an edit or two away from a field the
    model reads would change Q without a word."""
    said = refused(capsys, "--export", "--job.config_file", EXAMPLE,
                   "--compile.enable_fsdp_ag_rs_overlapp")  # fmt: skip
    assert said.startswith("--compile.enable_fsdp_ag_rs_overlapp: ")
    assert said.endswith(" --compile.enable_fsdp_ag_rs_overlap?")


def test_a_toml_key_a_typo_away_from_ours_is_refused(
    tmp_path: Path, cuda_machine: Path, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    """torchtitan 0.2.x refuses unknown TOML fields, unless the job names a
    custom config module (whose fields we do not know)."""
    monkeypatch.chdir(tmp_path)
    typo = "[parallelism]\nexpert_paralel_degree = 2\n"
    Path("job.toml").write_text(typo)
    said = refused(capsys, "--export", "--job.config_file", "job.toml")
    assert said.startswith("job.toml: parallelism.expert_paralel_degree: ")
    assert said.endswith(" parallelism.expert_parallel_degree?")
    Path("custom.toml").write_text(
        '[job]\ncustom_config_module = "my.job_config"\n' + typo
    )
    code, out, _ = explain(capsys, "--export", "--job.config_file", "custom.toml")
    assert code == 0 and out == exported(4)


def test_what_torchtitan_refuses_beside_the_fields_is_said(
    tmp_path: Path, cuda_machine: Path, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    """Issue #37: ``--parallelism.foo 2`` and ``[parallelism] foo = 2`` gave a
    Q and no word. Each input's unknown names are one warning, in ``--json``
    too; the value is the fields' (an export still exports it)."""
    monkeypatch.chdir(tmp_path)
    Path("job.toml").write_text("[parallelism]\ntensor_parallel_degree = 2\nfoo = 2\n")
    args = ["--job.config_file", "job.toml", "--parallelism.bar", "2"]
    doc = explain_json(capsys, *args)
    assert doc["queues"] == 4
    assert [said.partition(": no such")[0] for said in doc["unknown"]] == [
        "--parallelism.bar", "job.toml: parallelism.foo"
    ]  # fmt: skip
    code, out, err = explain(capsys, "--export", *args)
    assert (code, out) == (0, exported(4))
    assert [line.split(": ")[1:3] for line in err.splitlines()[:2]] == [
        ["warning", "--parallelism.bar"], ["warning", "job.toml"],
    ]  # fmt: skip
    assert err.splitlines()[2].startswith("rocm-hwq-autoset: exported ")


@pytest.mark.parametrize(
    ("args", "error"),
    [
        (["--job.config_file", "/nonexistent.toml"],
         "/nonexistent.toml: No such file or directory"),
        (["--module", "graph_trainer.llama3"], "--config: is required"),
        (["--job.config_file", EXAMPLE, "--compile.enable_passes=1"],
         "--compile.enable_passes: is a flag and takes no value"),
    ],
)  # fmt: skip
def test_json_errors_are_json(
    args: list[str], error: str, cuda_machine: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    code, out, err = explain(capsys, "--json", *args)
    assert code == 2
    doc = json.loads(out)
    assert list(doc) == ["error"] and doc["error"].startswith(error)
    assert err == f"{PREFIX}{doc['error']}\n"


def test_rocm_machine_says_what_the_hook_would_do(
    rocm_machine: Path, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    _, out, _ = explain(capsys, "--job.config_file", EXAMPLE)
    assert "ROCm yes: " in " ".join(out.split())
    assert f"would set {QUEUES}=4" in out
    monkeypatch.setenv("GPU_MAX_HW_QUEUES", "16")
    _, out, _ = explain(capsys, "--job.config_file", EXAMPLE)
    rows = dict(environment_rows(out))
    assert rows[QUEUES] == QueuesSetting(os.environ).describe()
    assert rows["the hook"].startswith(f"nothing to do: {QUEUES}=16 ")
    monkeypatch.setenv("ROCM_HWQ_AUTOSET", "off")
    doc = explain_json(capsys, "--job.config_file", EXAMPLE)
    assert doc["environment"]["opted_out"] is True
    assert doc["environment"]["explicit"] is True


def test_the_hook_line_follows_the_world_size(
    rocm_machine: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The hook's line is decided for the same world size as the report."""
    args = ["--job.config_file", EXAMPLE, "--parallelism.tensor_parallel_degree=8"]
    doc = explain_json(capsys, "--world-size", "8", *args)
    assert doc["queues"] == 4 and doc["environment"]["hook"].endswith("=4")
    doc = explain_json(capsys, *args, "--compile.enable_fsdp_ag_rs_overlap")
    assert doc["queues"] == 8 and doc["environment"]["hook"].endswith("=8")


def test_usage_version_help(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["--version"])
    assert exit_.value.code == 0
    assert capsys.readouterr().out == f"rocm-hwq-autoset {__version__}\n"
    for command in ([], ["explain"], ["doctor"], ["verify"]):
        with pytest.raises(SystemExit) as exit_:
            main([*command, "--help"])
        assert exit_.value.code == 0
        text = capsys.readouterr().out
        assert text.startswith(" ".join(["usage: rocm-hwq-autoset", *command]))
        assert "example" in text
        assert max(len(line) for line in text.splitlines()) <= 80
    with pytest.raises(SystemExit) as exit_:
        main(["frobnicate"])
    assert exit_.value.code == 2
    with pytest.raises(SystemExit) as exit_:
        main([])
    assert exit_.value.code == 2


class _Tty:
    def isatty(self) -> bool:
        return True


class _Pipe:
    def isatty(self) -> bool:
        return False


def test_colour_only_on_a_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NO_COLOR", raising=False)
    monkeypatch.setenv("TERM", "xterm-256color")
    assert paint("ok", "green", _Tty()) == "\033[32mok\033[0m"  # type: ignore[arg-type]
    assert paint("ok", "green", _Pipe()) == "ok"  # type: ignore[arg-type]
    monkeypatch.setenv("TERM", "dumb")  # was: colours
    assert paint("ok", "green", _Tty()) == "ok"  # type: ignore[arg-type]
    monkeypatch.delenv("TERM")
    monkeypatch.setenv("NO_COLOR", "1")
    assert paint("ok", "green", _Tty()) == "ok"  # type: ignore[arg-type]


def test_a_name_no_terminal_shows_is_escaped_and_its_json_valid(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A config path with a carriage return and a byte that is not UTF-8. Was:
    the return a blank, the byte raw (``?`` in a warning); in JSON a lone
    surrogate (``\\udcff``), which strict JSON readers refuse."""
    raw = os.path.join(os.fsencode(tmp_path), b"a\rb\xffc.toml")
    with open(raw, "wb") as job:
        job.write((ROOT / "examples" / "deepseek_v3_16b.toml").read_bytes())
    path = os.fsdecode(raw)
    shown = f"{tmp_path}/a\\rb\\xffc.toml"
    code, out, _ = explain(capsys, "--job.config_file", path)
    assert code == 0 and out.splitlines()[0] == f"config              {shown}"
    code, out, _ = explain(capsys, "--json", "--job.config_file", path)
    assert (
        code == 0
        and "\\ud" not in out
        and json.loads(out)["config"] == (f"{tmp_path}/a\rb\\xffc.toml")
    )


def test_readme_shows_what_explain_prints(
    cuda_machine: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The README's sample report is the command's output, up to the part that
    describes the machine it ran on."""
    command = (
        "$ rocm-hwq-autoset explain --job.config_file examples/deepseek_v3_16b.toml"
        " --parallelism.expert_parallel_degree 2\n"
    )
    text = (ROOT / "README.md").read_text()
    start = text.index(command) + len(command)
    shown = text[start : text.index("\nin this environment:", start)]
    monkeypatch.chdir(ROOT)
    code, out, _ = explain(capsys, "--job.config_file", "examples/deepseek_v3_16b.toml",
                           "--parallelism.expert_parallel_degree", "2")  # fmt: skip
    assert code == 0
    assert out.startswith(shown + "\nin this environment:")


@pytest.fixture
def here(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A working directory with the example job as ``job.toml`` and a CUDA torch
    at ``t`` on the path, both named relatively: the whole report is fixed."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "job.toml").write_text(Path(EXAMPLE).read_text())
    fake_torch(tmp_path / "t", CUDA_VERSION_PY)
    monkeypatch.syspath_prepend("t")
    return tmp_path


REPORT = """\
config              job.toml
world size          1

GPU streams counted:
  compute           always: the step's own kernels
  all_reduce        always: PR #4032 counts one all-reduce stream
  cudagraph_capture cudagraph on: compile.enable_passes = true (CLI),
                    compile.disable_passes = ["a", "b"] (CLI),
                    compile.passes = ["cudagraph"] (CLI);
                    compile.enable_fsdp_ag_rs_overlap = false (default)

not counted:
  dense_all_gather  FSDP off: parallelism.data_parallel_shard_degree = 1 (CLI);
                    compile.enable_fsdp_ag_rs_overlap = false (default)
  reduce_scatter    FSDP off: parallelism.data_parallel_shard_degree = 1 (CLI);
                    compile.enable_fsdp_ag_rs_overlap = false (default)
  fsdp_comm         FSDP off: parallelism.data_parallel_shard_degree = 1 (CLI);
                    compile.enable_fsdp_ag_rs_overlap = false (default)
  expert_comm       model deepseek_v3 (16B) is MoE;
                    parallelism.expert_parallel_degree = 1 (TOML): no expert
                    parallelism
  tp_all_gather     parallelism.tensor_parallel_degree = 1 (TOML): no tensor
                    parallelism
  cp_all_gather     parallelism.context_parallel_degree = 1 (default): no
                    context parallelism

GPU_MAX_HW_QUEUES=4  (3 streams, rounded up to a power of two as PR #4032 does;
  HIP's default: 4)

left out of PR #4032's model, and off here:
  symm_mem          parallelism.tensor_parallel_degree = 1 (TOML): no tensor
                    parallelism; async TP off:
                    parallelism.enable_async_tensor_parallel = false (default),
                    compile.enable_async_tensor_parallel = false (default); no
                    dist-GEMM projections in the model
  ep_extra          model deepseek_v3 (16B) is MoE;
                    parallelism.expert_parallel_degree = 1 (TOML): no expert
                    parallelism; expert all-to-alls not isolated:
                    compile.ep_overlap.enabled = false (default),
                    compile.enable_passes = true (CLI),
                    compile.disable_passes = ["a", "b"] (CLI)
  trainer_cudagraph training.disable_cuda_graphs = false (default): CUDA graphs
                    asked for; torchtitan 0.3.0 makes the core trainer's
                    CUDA-graph capture stream on NVIDIA only: on ROCm it runs
                    the step eagerly
                    check: rocm-hwq-autoset verify --queues 4 TRACE

in this environment:
  ROCm              no: t/torch/version.py: hip = None (a CUDA or CPU build)
  GPU_MAX_HW_QUEUES unset (HIP's default: 4)
  ROCM_HWQ_AUTOSET  unset
  the hook          nothing to do: not ROCm: t/torch/version.py: hip = None (a
                    CUDA or CPU build)
"""


def test_the_report_in_full(here: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A known world size; FSDP off by an explicit degree; cudagraph on, with the
    TOML era's compile.passes shown because it was set; lists as TOML writes
    them; the environment's rows."""
    code, out, err = explain(
        capsys, "--job.config_file", "job.toml", "--world-size", "1",
        "--parallelism.data_parallel_shard_degree", "1", "--compile.enable_passes",
        "--compile.disable_passes", "a,b", "--compile.passes", "cudagraph",
    )  # fmt: skip
    assert (code, err) == (0, "")
    assert out == REPORT


def test_compile_passes_left_at_its_default_is_not_shown(
    here: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    doc = explain_json(capsys, "--job.config_file", "job.toml",
                       "--compile.enable_passes")  # fmt: skip
    said = [setting_said(doc, key) for key in ("compile.enable_passes",
            "compile.disable_passes", "compile.enable_fsdp_ag_rs_overlap")]  # fmt: skip
    cudagraph = doc["reasons"]["cudagraph_capture"]
    assert doc["facts"]["cudagraph"] is True and "compile.passes" not in cudagraph
    assert cudagraph.split(": ", 1)[1] == f"{said[0]}, {said[1]}; {said[2]}"
    assert doc["reasons"]["fsdp_comm"].endswith(f"; {said[2]}")
    dp_shard = setting_said(doc, "parallelism.data_parallel_shard_degree")
    assert dp_shard in doc["reasons"]["fsdp_comm"] and dp_shard.endswith("-1 (TOML)")
    assert doc["world_size"] is doc["dp_shard_resolved"] is None
    _, out, _ = explain(capsys, "--job.config_file", "job.toml")
    assert out.splitlines()[1].split() == ["world", "size", "unknown", "(--world-size",
                                           "N)"]  # fmt: skip


@pytest.mark.parametrize(
    ("env", "rows", "hook"),
    [
        ({"GPU_MAX_HW_QUEUES": "2", "ROCM_HWQ_AUTOSET": "on"},
         ["GPU_MAX_HW_QUEUES 2, set explicitly: it always wins",
          "ROCM_HWQ_AUTOSET  on"],
         "nothing to do: GPU_MAX_HW_QUEUES=2 was set explicitly; left as is"),
        ({"GPU_MAX_HW_QUEUES": "8", "ROCM_HWQ_AUTOSET_ORIGIN": "8 job.config_file"},
         ["GPU_MAX_HW_QUEUES 8, set by rocm-hwq-autoset (job.config_file)"],
         "would set GPU_MAX_HW_QUEUES=4"),
        # A launcher that failed marked it: this launch is decided anew.
        ({"ROCM_HWQ_AUTOSET_ORIGIN": "unset job.config_file"},
         ["GPU_MAX_HW_QUEUES unset (HIP's default: 4)"],
         "would set GPU_MAX_HW_QUEUES=4"),
        ({"GPU_MAX_HW_QUEUES": "x"},
         ["GPU_MAX_HW_QUEUES 'x' (HIP reads 0), set explicitly: not a queue count"
          " HIP can use"],
         "warning: GPU_MAX_HW_QUEUES='x': HIP reads 0, not a queue count; left as"
         " is (an explicit value always wins)"),
        ({"GPU_MAX_HW_QUEUES": "8.0"},
         ["GPU_MAX_HW_QUEUES '8.0' (HIP reads 8), set explicitly: it always wins"],
         "nothing to do: GPU_MAX_HW_QUEUES='8.0' (HIP reads 8) was set explicitly;"
         " left as is"),
    ],
)  # fmt: skip
def test_the_environment_rows_on_rocm(
    env: dict[str, str], rows: list[str], hook: str, rocm_machine: Path,
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    _, out, _ = explain(capsys, "--job.config_file", EXAMPLE)
    found = environment_rows(out)
    evidence = f"{rocm_machine}/torch/version.py: hip = '6.2.41133-dd7f95766'"
    assert found[0] == ("ROCm", f"yes: {evidence}")
    for text in rows:
        name, _, value = text.partition(" ")
        assert (name, value.strip()) in found
    assert found[-1] == ("the hook", hook)
    doc = explain_json(capsys, "--job.config_file", EXAMPLE)
    assert doc["environment"]["hook"] == hook


def environment_rows(out: str) -> list[tuple[str, str]]:
    """The rows under "in this environment:" (:func:`report_rows`)."""
    return report_rows(out, "in this environment:")


def report_rows(out: str, heading: str) -> list[tuple[str, str]]:
    """The rows under a heading of the report, each whole again: indented by
    two, the value from column 20, wrapped lines under it; up to a blank line."""
    found: list[tuple[str, str]] = []
    for line in out.split(f"\n{heading}\n")[1].split("\n\n")[0].splitlines():
        if line.startswith(" " * 20):
            name, value = found[-1]
            found[-1] = (name, f"{value} {line.strip()}")
        else:
            assert line[:2] == "  " and line[2] != " " and line[19] == " ", line
            found.append((line[2:19].strip(), line[20:]))
    return found


def test_the_json_report_as_it_is_printed(
    here: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("GPU_MAX_HW_QUEUES", "2")
    code, out, _ = explain(capsys, "--json", "--job.config_file", "job.toml")
    doc = json.loads(out)
    assert code == 0 and out == json.dumps(doc, indent=2) + "\n"
    _, text, _ = explain(capsys, "--job.config_file", "job.toml")
    hook = dict(environment_rows(text))["the hook"]
    assert doc["environment"] == {
        "rocm": False,
        "rocm_evidence": detect(sys.path, os.environ)[1],
        "gpu_max_hw_queues": "2",
        "hip_reads": 2,
        "set_by": "user",
        "explicit": True,
        "opted_out": False,
        "hook": hook,
    }
    assert doc["environment"]["rocm_evidence"].startswith("t/torch/version.py: ")
    assert hook.startswith(f"nothing to do: {QUEUES}=2 ")
    monkeypatch.delenv("GPU_MAX_HW_QUEUES")
    doc = explain_json(capsys, "--job.config_file", "job.toml")
    environment = doc["environment"]
    assert (environment["gpu_max_hw_queues"], environment["hip_reads"]) == (None, None)
    monkeypatch.setenv("GPU_MAX_HW_QUEUES", "")  # set, empty: HIP reads 0
    doc = explain_json(capsys, "--job.config_file", "job.toml")
    environment = doc["environment"]
    assert (environment["gpu_max_hw_queues"], environment["hip_reads"]) == ("", 0)
    assert (environment["set_by"], environment["explicit"]) == ("nobody", False)


def test_an_explicit_export_says_why(
    here: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("GPU_MAX_HW_QUEUES", "16")
    code, out, err = explain(capsys, "--export", "--job.config_file", "job.toml")
    assert (code, out) == (0, "export GPU_MAX_HW_QUEUES=16\n")
    assert err == summary_for("--job.config_file", "job.toml")
    assert f"={16}: {QueuesSetting(os.environ).describe()} (" in err


def test_a_world_of_one(here: Path, capsys: pytest.CaptureFixture[str]) -> None:
    doc = explain_json(capsys, "--world-size", "1", "--job.config_file", "job.toml")
    assert doc["world_size"] == 1 and doc["dp_shard_resolved"] == 1
    said = refused(capsys, "--world-size", "0", "--job.config_file", "job.toml")
    assert said.startswith("--world-size: 0 ") and said.endswith(">= 1")


def test_a_reader_that_goes_away_is_no_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``rocm-hwq-autoset explain ... | head -1``: the reader closed the pipe;
    the command ends with status 0, and what is left to write goes nowhere
    (no "Exception ignored ... BrokenPipeError" at exit)."""
    from rocm_hwq_autoset._cli import explain as _explain

    def reader_gone(opts: object, out: object) -> int:
        raise BrokenPipeError(32, "Broken pipe")

    monkeypatch.setattr(_explain, "run", reader_gone)
    with open(tmp_path / "stdout", "w") as stdout:
        monkeypatch.setattr(sys, "stdout", stdout)
        assert main(["explain", "--job.config_file", EXAMPLE]) == 0
        os.write(stdout.fileno(), b"left over")
    assert (tmp_path / "stdout").read_bytes() == b""


def test_both_launch_forms_at_once_are_refused(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Issue #24: the TOML was used, nothing said; torchtitan refuses one of
    the two whatever its version. One line naming both flags, exit 2
    (``_argv.find_launch`` raises it, for the hook and every command)."""
    said = refused(capsys, "--", "--module", "llama3", "--config", "c",
                   "--job.config_file", EXAMPLE)  # fmt: skip
    assert said.startswith("--module and --job.config_file: ")
    assert "--module/--config" in said.split()


# The streams PR #4032's model leaves out (issue #31, item 2).

LEFT_OUT_ARGS = (
    "--job.config_file", EXAMPLE, "--parallelism.expert_parallel_degree", "2",
    "--parallelism.tensor_parallel_degree", "2",
    "--compile.enable_async_tensor_parallel", "--compile.enable_passes",
    "--compile.ep-overlap.enabled", "--training.disable_cuda_graphs",
)  # fmt: skip
LEFT_OUT_REPORT = """\
on here, but not in Q (PR #4032's model leaves them out):
  symm_mem          parallelism.tensor_parallel_degree = 2 (CLI); async TP on:
                    compile.enable_async_tensor_parallel = true (CLI); no
                    dist-GEMM projections in the model
                    not counted: async TP's and dist-GEMM's fused
                    all-gather/reduce-scatter matmuls run on torch's
                    symmetric-memory stream, which PR #4032 has no lane for
                    check: rocm-hwq-autoset verify --queues 8 TRACE
  ep_extra          model deepseek_v3 (16B) is MoE;
                    parallelism.expert_parallel_degree = 2 (CLI); expert
                    all-to-alls isolated: compile.ep_overlap.enabled = true
                    (CLI), compile.enable_passes = true (CLI),
                    compile.disable_passes = [] (default)
                    not counted: graph_trainer's extra EP group runs the expert
                    all-to-alls on a high-priority NCCL stream PR #4032 has no
                    lane for: a pool of its own before ROCm/rocm-systems#8485,
                    the normal one with it
                    check:
                    rocm-hwq-autoset verify --queues 8 --pools shared TRACE

left out of PR #4032's model, and off here:
  trainer_cudagraph training.disable_cuda_graphs = true (CLI): CUDA graphs off

in this environment:
"""


def test_the_report_names_the_streams_q_leaves_out(
    cuda_machine: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Each with why it is on, why Q leaves it out and the verify command that
    settles it (never broken across lines); below Q, which stays the PR's."""
    code, out, err = explain(capsys, *LEFT_OUT_ARGS)
    assert (code, err) == (0, "")
    q_line = "GPU_MAX_HW_QUEUES=8  (6 streams, rounded up to a power of two"
    assert q_line in out
    section = out[out.index(q_line) :].split("\n\n", 1)[1]
    assert section[: section.index("in this environment:\n") + 21] == LEFT_OUT_REPORT
    assert max(len(line) for line in LEFT_OUT_REPORT.splitlines()) <= 80


def test_the_json_holds_the_streams_q_leaves_out(
    cuda_machine: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    doc = explain_json(capsys, *LEFT_OUT_ARGS)
    assert doc["queues"] == 8 and "symm_mem" not in doc["lanes"]
    assert doc["left_out"] == ["symm_mem", "ep_extra"]
    table = {row["lane"]: row for row in doc["left_out_table"]}
    assert list(table) == ["symm_mem", "ep_extra", "trainer_cudagraph"]
    symm = table["symm_mem"]
    assert {k: symm[k] for k in ("lane", "on", "facts", "asked_for")} == {
        "lane": "symm_mem", "on": True, "facts": ["tensor", "async_tp", "dist_gemm"],
        "asked_for": True,
    }  # fmt: skip
    assert symm["not_counted"] == LEFT_OUT["symm_mem"][0]
    assert symm["verify"] == verify_command("symm_mem", 8)
    assert all(setting_said(doc, key) in symm["why"] for key in
               ("parallelism.tensor_parallel_degree",
                "compile.enable_async_tensor_parallel"))  # fmt: skip
    assert table["ep_extra"]["on"] is True
    assert table["ep_extra"]["verify"] == verify_command("ep_extra", 8)
    assert table["ep_extra"]["verify"].split()[-3:-1] == ["--pools", "shared"]
    cudagraph = table["trainer_cudagraph"]
    keys = ("lane", "on", "facts", "asked_for", "verify")
    assert {k: cudagraph[k] for k in keys} == {
        "lane": "trainer_cudagraph", "on": False, "facts": ["trainer_cudagraph"],
        "asked_for": False, "verify": None,
    }  # fmt: skip
    assert cudagraph["not_counted"] == LEFT_OUT["trainer_cudagraph"][0]
    assert cudagraph["why"].startswith(
        f"{setting_said(doc, 'training.disable_cuda_graphs')}: "
    )
    # Each as the report says it (its wording: LEFT_OUT_REPORT).
    _, out, _ = explain(capsys, *LEFT_OUT_ARGS)
    flat = " ".join(out.split())
    assert all(f"{lane} {row['why']}" in flat for lane, row in table.items())
    assert doc["facts"]["async_tp"] and doc["facts"]["ep_isolation"]
    assert doc["inputs"]["async_tp"] is True and doc["inputs"]["dist_gemm"] is False
    assert doc["settings"]["compile.ep_overlap.enabled"] == {
        "value": True, "source": "CLI",
    }  # fmt: skip


def test_a_model_s_dist_gemm_projections_are_a_fact_of_their_own(
    cuda_machine: Path, request: pytest.FixtureRequest
) -> None:
    """Only a ``--module`` evaluation finds them (the model spec, no field):
    the fact says so either way, in words of its own (pinned in the golden)."""
    rec = Reading(LEFT_OUT_ARGS, training_environ(None)).rec
    off = _explain.fact(rec, "dist_gemm")
    rec.facts = {**rec.facts, "dist_gemm": True}
    on = _explain.fact(rec, "dist_gemm")
    assert on != off and "dist_gemm" in on
    check_lines(request, [("on", on), ("off", off)])


def test_unset_fields_are_said_with_their_defaults(
    cuda_machine: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Nothing set: every stream is off, with the fields' defaults, and the
    core trainer's stream is said never to be made on ROCm."""
    doc = explain_json(capsys, "--job.config_file", EXAMPLE)
    assert doc["left_out"] == []
    why = {row["lane"]: row["why"] for row in doc["left_out_table"]}
    read = {
        "symm_mem": ["parallelism.tensor_parallel_degree",
                     "parallelism.enable_async_tensor_parallel",
                     "compile.enable_async_tensor_parallel"],
        "ep_extra": ["parallelism.expert_parallel_degree", "compile.ep_overlap.enabled",
                     "compile.enable_passes", "compile.disable_passes"],
        "trainer_cudagraph": ["training.disable_cuda_graphs"],
    }  # fmt: skip
    assert list(why) == list(read) == list(LEFT_OUT)
    for lane, keys in read.items():
        assert all(setting_said(doc, key) in why[lane] for key in keys), lane
        assert why[lane].endswith(LEFT_OUT[lane][0]) == (lane == "trainer_cudagraph")
    assert all(doc["settings"][k]["source"] != "CLI" for k in chain(*read.values()))
    verify = {row["lane"]: (row["on"], row["asked_for"], row["verify"])
              for row in doc["left_out_table"]}  # fmt: skip
    assert verify == {
        "symm_mem": (False, False, None), "ep_extra": (False, False, None),
        # Asked for, not made on ROCm: the trace settles it.
        "trainer_cudagraph": (
            False, True, verify_command("trainer_cudagraph", doc["queues"])),
    }  # fmt: skip
    # One section holds them, the one of streams off here, not LEFT_OUT_REPORT's
    # (on here); the trace's check last, then the environment.
    _, out, _ = explain(capsys, "--job.config_file", EXAMPLE)
    lines = out.splitlines()
    [start] = [i for i, line in enumerate(lines) if line.startswith("  symm_mem ")]
    assert lines[start - 1] != LEFT_OUT_REPORT.splitlines()[0]
    rows = report_rows(out, lines[start - 1])
    assert [name for name, _ in rows] == list(LEFT_OUT)
    assert all(said.startswith(why[name]) for name, said in rows)
    check = f"check: {verify_command('trainer_cudagraph', doc['queues'])}"
    assert rows[-1][1].endswith(f"eagerly {check}")
    assert out.split(f"{check}\n\n")[1].startswith("in this environment:\n")


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["--compile.ep_overlap.enabled="],
         "--compile.ep_overlap.enabled: is a flag and takes no value (got '');"
         " use --compile.ep_overlap.enabled or --compile.ep_overlap.no-enabled"),
        (["--compile.enable_async_tensor_parallel", "yes"],
         "--compile.enable_async_tensor_parallel: is a flag and takes no value (got"
         " 'yes'); use --compile.enable_async_tensor_parallel or"
         " --compile.no-enable_async_tensor_parallel"),
        (["--training.disable_cuda_graph"],
         "--training.disable_cuda_graph: not a torchtitan option; did you mean"
         " --training.disable_cuda_graphs?"),
    ],
)  # fmt: skip
def test_a_bad_flag_of_theirs_is_one_line_in_every_form(
    args: list[str], said: str, cuda_machine: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    job = ["--job.config_file", EXAMPLE, *args]
    assert refused(capsys, *job) == said
    assert refused(capsys, "--export", *job) == said
    code, out, _ = explain(capsys, "--json", *job)
    assert (code, json.loads(out)) == (2, {"error": said})


@pytest.mark.parametrize(
    ("text", "said"),
    [
        (b"[compile.ep_overlap]\nenabled = ''\n",
         "compile.ep_overlap.enabled: '' is not true or false"),
        (b"[parallelism]\nenable_async_tensor_parallel = 'true'\n",
         "parallelism.enable_async_tensor_parallel: 'true' is not true or false"),
        (b"[training]\ndisable_cuda_graphs = 1\n",
         "training.disable_cuda_graphs: 1 is not true or false"),
        (b"[compile]\nep_overlap = []\n", "compile.ep_overlap: a list, not a table"),
    ],
)  # fmt: skip
def test_a_bad_value_of_theirs_in_the_file_is_named(
    text: bytes, said: str, tmp_path: Path, cuda_machine: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    job = tmp_path / "job.toml"
    job.write_bytes(text)
    assert refused(capsys, "--job.config_file", str(job)) == f"{job}: {said}"
    code, out, _ = explain(capsys, "--json", "--job.config_file", str(job))
    assert (code, json.loads(out)) == (2, {"error": f"{job}: {said}"})


def test_a_config_path_with_blanks_is_one_row(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Was: the report broke a path at its blanks (a clone in ``.../with
    spaces/...``), so that it could not be copied whole."""
    folder = tmp_path / ("with spaces & more " * 4)
    folder.mkdir()
    job = folder / "job.toml"
    job.write_bytes((ROOT / "examples" / "deepseek_v3_16b.toml").read_bytes())
    code, out, _ = explain(capsys, "--job.config_file", str(job))
    assert code == 0 and out.splitlines()[0] == f"config              {job}"


def test_the_wording_of_explain(
    tmp_path: Path, cuda_machine: Path, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    """Every line ``explain`` writes for the cases the tests above judge by
    their values: its reports, export summaries and refusals, the wording pinned
    here, once (``UPDATE_GOLDEN=1``). ``[environment]``: only the report's
    environment section."""
    from rocm_hwq_autoset._cli import _common

    rocm_root = fake_torch(tmp_path / "rocm", ROCM_VERSION_PY)
    bad = tmp_path / "jobs"
    bad.mkdir()
    (bad / "tp0.toml").write_text("[parallelism]\ntensor_parallel_degree = 0\n")
    (bad / "typo.toml").write_text("[parallelism]\nexpert_paralel_degree = 2\n")
    job = ["--job.config_file", EXAMPLE]
    ep2 = [*job, "--parallelism.expert_parallel_degree", "2"]
    cases: list[tuple[str, dict[str, str], list[str]]] = [
        ("an EP2 overlap launch", {}, [*ep2, "--compile.enable_fsdp_ag_rs_overlap"]),
        ("cudagraph on", {}, [*job, "--compile.enable_passes"]),
        ("a world size", {},
         ["--world-size=16", *job, "--parallelism.tensor_parallel_degree=8"]),
        ("a bad WORLD_SIZE", {"WORLD_SIZE": "eight"}, job),
        ("--world-size 0", {}, ["--world-size", "0", *job]),
        ("export", {}, ["--export", *ep2]),
        ("export, an empty value", {"GPU_MAX_HW_QUEUES": ""}, ["--export", *job]),
        *(("export, the hook off", {"ROCM_HWQ_AUTOSET": switch}, ["--export", *job])
          for switch in ("0", "Off", "maybe")),
        ("export, the hook off, an explicit value",
         {"ROCM_HWQ_AUTOSET": "maybe", "GPU_MAX_HW_QUEUES": "16"}, ["--export", *job]),
        ("export, an explicit value", {"GPU_MAX_HW_QUEUES": "16"}, ["--export", *job]),
        ("export, an explicit value the arguments give too", {"GPU_MAX_HW_QUEUES": "4"},
         ["--export", *job]),
        ("export, a value HIP reads otherwise", {"GPU_MAX_HW_QUEUES": " 8 "},
         ["--export", *job]),
        ("[environment] a value HIP reads otherwise", {"GPU_MAX_HW_QUEUES": "8.0"},
         job),
        ("export, the package's value",
         {"GPU_MAX_HW_QUEUES": "8", "ROCM_HWQ_AUTOSET_ORIGIN": "8 job.config_file"},
         ["--export", *job]),
        ("[environment] the package's value",
         {"GPU_MAX_HW_QUEUES": "8", "ROCM_HWQ_AUTOSET_ORIGIN": "8 job.config_file"},
         job),
        *(("export, a value HIP cannot use", {"GPU_MAX_HW_QUEUES": value},
           ["--export", *job]) for value in ("abc", "-2")),
        *(("[environment] a value HIP cannot use", {"GPU_MAX_HW_QUEUES": value}, job)
          for value in ("abc", "-2")),
        ("[environment] an explicit value", {"GPU_MAX_HW_QUEUES": "2"}, job),
        ("export, no such config", {}, ["--export", "--job.config_file", "/no.toml"]),
        ("explain's option after '--'", {},
         ["--", "--job.config_file", "job.toml", "--world-size", "1"]),
        ("explain's option after '--'", {},
         ["--job.config_file", "job.toml", "--", "--world-size=1"]),
        ("a bad field in a TOML", {}, ["--job.config_file", str(bad / "tp0.toml")]),
        ("a flag without its value", {},
         [*job, "--parallelism.expert_parallel_degree"]),
        ("a flag a typo away", {},
         ["--export", *job, "--compile.enable_fsdp_ag_rs_overlapp"]),
        ("a TOML key a typo away", {},
         ["--export", "--job.config_file", str(bad / "typo.toml")]),
        ("both launch forms", {},
         ["--", "--module", "llama3", "--config", "c", *job]),
    ]  # fmt: skip
    rocm_cases: list[tuple[str, dict[str, str], list[str]]] = [
        ("[environment] on ROCm", {}, job),
        ("[environment] on ROCm, an explicit value", {"GPU_MAX_HW_QUEUES": "16"}, job),
        ("[environment] on ROCm, a value HIP cannot use", {"GPU_MAX_HW_QUEUES": "x"},
         job),
    ]  # fmt: skip
    text = []
    for on_rocm, (title, env, argv) in [
        *((False, case) for case in cases),
        *((True, case) for case in rocm_cases),
    ]:
        with monkeypatch.context() as patch:
            for name, value in env.items():
                patch.setenv(name, value)
            if on_rocm:
                patch.syspath_prepend(str(rocm_root))
                patch.setattr(_common, "_verdict", [])
            code, out, err = explain(capsys, *argv)
        if "in this environment:" in out:  # its rows whole: paths wrap by length
            report, _, _ = out.partition("in this environment:\n")
            rows = "".join(f"  {n}: {v}\n" for n, v in environment_rows(out))
            out = ("" if title.startswith("[") else report) + f"(environment)\n{rows}"
        command = " ".join([*(f"{k}={v!r}" for k, v in env.items()), "explain", *argv])
        names = {"T": str(tmp_path), "EXAMPLE": EXAMPLE}
        text.append(transcript(f"{title}: {command}", code, out, err, names))
    check_golden(GOLDEN / "cli" / "explain.txt", "".join(text))

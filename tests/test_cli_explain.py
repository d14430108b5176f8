"""``explain``: golden reports on the corpus configs, JSON, export, exit codes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from rocm_hwq_autoset import __version__
from rocm_hwq_autoset._cli import main, split_args
from rocm_hwq_autoset._cli.term import paint

from .helpers import (
    CUDA_VERSION_PY,
    EP2_OVERLAP,
    EXPECTED,
    ROCM_VERSION_PY,
    TOML_DIR,
    corpus_file,
    fake_torch,
)

ROOT = Path(__file__).resolve().parents[1]
GOLDEN = Path(__file__).parent / "golden"
EXAMPLE = str(ROOT / "examples" / "deepseek_v3_16b.toml")


@pytest.fixture
def cuda_machine(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """This process sees a CUDA torch first on its path, and a clean environment."""
    torch_root = fake_torch(tmp_path / "cuda", CUDA_VERSION_PY)
    monkeypatch.syspath_prepend(str(torch_root))
    for name in ("GPU_MAX_HW_QUEUES", "ROCM_HWQ_AUTOSET", "ROCM_HWQ_AUTOSET_ORIGIN",
                 "ROCM_HWQ_AUTOSET_LOG", "WORLD_SIZE", "LOCAL_RANK"):  # fmt: skip
        monkeypatch.delenv(name, raising=False)
    return torch_root


def explain(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(["explain", *args])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize("name", sorted(EXPECTED))
@pytest.mark.parametrize("launch", ["shipped", "ep2-overlap"])
def test_golden_reports(
    name: str, launch: str, cuda_machine: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = corpus_file(TOML_DIR, name)
    extra = EP2_OVERLAP if launch == "ep2-overlap" else []
    code, out, err = explain(capsys, "--job.config_file", str(path), *extra)
    assert code == 0 and err == ""
    # The environment section depends on the machine; it is tested on its own.
    report, environment = out.split("\nin this environment:\n")
    assert str(cuda_machine) in environment
    report = report.replace(str(path), f"<corpus>/{name}")
    golden = GOLDEN / f"{name[: -len('.toml')]}.{launch}.txt"
    if os.environ.get("UPDATE_GOLDEN"):
        golden.write_text(report)
    assert report == golden.read_text()
    assert max(len(line) for line in report.splitlines()[1:]) <= 80


def test_lanes_match_the_api(
    cuda_machine: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = explain(
        capsys, "--json", "--job.config_file", EXAMPLE,
        "--parallelism.expert_parallel_degree", "2",
        "--compile.enable_fsdp_ag_rs_overlap",
    )  # fmt: skip
    doc = json.loads(out)
    assert code == 0
    assert doc["queues"] == 8 and isinstance(doc["queues"], int)
    assert doc["lanes"] == ["compute", "all_reduce", "dense_all_gather",
                            "reduce_scatter", "expert_comm"]  # fmt: skip
    assert doc["settings"]["parallelism.expert_parallel_degree"] == {
        "value": 2,
        "source": "CLI",
    }
    assert doc["settings"]["model.name"] == {"value": "deepseek_v3", "source": "TOML"}
    assert doc["settings"]["compile.disable_passes"] == {
        "value": [],
        "source": "default",
    }
    assert doc["config_file"] == EXAMPLE and doc["world_size"] is None
    assert doc["environment"]["rocm"] is False
    assert doc["environment"]["hook"].startswith("nothing to do: not ROCm")
    assert set(doc["reasons"]) >= set(doc["lanes"])


def test_world_size(cuda_machine: Path, capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["--job.config_file", EXAMPLE, "--parallelism.tensor_parallel_degree=8"]
    _, out, _ = explain(capsys, "--json", "--world-size", "8", *argv)
    assert json.loads(out)["lanes"] == ["compute", "all_reduce", "tp_all_gather"]
    _, out, _ = explain(capsys, "--world-size=16", *argv)
    assert "resolves to 2 = WORLD_SIZE // (1*1*8*1)" in " ".join(out.split())


def test_export(cuda_machine: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = explain(capsys, "--export", "--job.config_file", EXAMPLE,
                             "--parallelism.expert_parallel_degree", "2")  # fmt: skip
    assert code == 0
    assert out == "export GPU_MAX_HW_QUEUES=4\n"
    assert "expert_comm" in err and "GPU_MAX_HW_QUEUES=4" in err


def test_export_in_a_shell(tmp_path: Path) -> None:
    """``eval "$(rocm-hwq-autoset explain --export ...)"`` in a job script."""
    script = (
        f'eval "$("{sys.executable}" -m rocm_hwq_autoset explain --export'
        f' --job.config_file "{EXAMPLE}" --parallelism.expert_parallel_degree 2'
        ' --compile.enable_fsdp_ag_rs_overlap)" && echo "Q=$GPU_MAX_HW_QUEUES"'
    )
    env = {"PATH": os.environ["PATH"], "PYTHONPATH": str(ROOT)}
    proc = subprocess.run(
        ["bash", "-c", script], capture_output=True, text=True, env=env
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "Q=8\n"


def readme_export_lines() -> str:
    """The job-script lines the README shows for ``--export``."""
    text = (ROOT / "README.md").read_text()
    start = text.index('exports="$(rocm-hwq-autoset explain --export')
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
    env = {"PATH": os.environ["PATH"], "PYTHONPATH": str(ROOT)}
    proc = subprocess.run(
        ["bash", "-c", script], capture_output=True, text=True, env=env
    )
    if config_exists:
        assert proc.returncode == 0, proc.stderr
        assert proc.stdout == "reached Q=4\n"
    else:
        assert proc.returncode == 2
        assert proc.stdout == ""
        assert proc.stderr.count("\n") == 1
        assert "job.toml" in proc.stderr


def test_passthrough_and_defaults(
    cuda_machine: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = explain(capsys, "--json", "--training.steps", "10",
                           "--foo.bar", "x", "y")  # fmt: skip
    doc = json.loads(out)
    assert code == 0 and doc["config_file"] is None
    assert doc["lanes"] == ["compute", "all_reduce", "fsdp_comm"]


@pytest.mark.parametrize(
    ("command", "args", "message"),
    [
        ("explain", ["--world_size", "1"], "unrecognized option '--world_size'; did"
         " you mean --world-size?"),
        ("explain", ["--jsno"], "unrecognized option '--jsno'; did you mean --json?"),
        ("explain", ["--foo", "bar"], "unrecognized option '--foo'"),
        ("explain", ["job.toml"], "unexpected argument 'job.toml'"),
        ("verify", ["t.json", "--queue", "8"], "unrecognized option '--queue'; did"
         " you mean --queues?"),
        ("doctor", ["--verbose"], "doctor: unrecognized option '--verbose'"),
    ],
)  # fmt: skip
def test_an_option_that_is_neither_ours_nor_torchtitans_is_a_usage_error(
    command: str, args: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main([command, *args]) == 2
    out, err = capsys.readouterr()
    assert out == "" and message in err and err.count("\n") == 1


@pytest.mark.parametrize(
    ("own", "training", "args"),
    [
        (["--json"], ["--job.config_file", "x"], ["--job.config_file", "x", "--json"]),
        (["--world-size", "8"], ["--a.b", "1"], ["--a.b", "1", "--world-size", "8"]),
        (["--world-size=8"], ["--a.b"], ["--world-size=8", "--a.b"]),
        (
            [],
            ["--module", "m", "--parallelism.data_parallel_shard_degree", "-1"],
            ["--module", "m", "--parallelism.data_parallel_shard_degree", "-1"],
        ),
        ([], ["--json"], ["--", "--json"]),
    ],
)
def test_split_args(own: list[str], training: list[str], args: list[str]) -> None:
    assert split_args("explain", args) == (own, training)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--job.config_file", "/nonexistent.toml"], "/nonexistent.toml: No such file"),
        (["--job.config_file", "/"], "/: not a regular file (a directory)"),
        (["--job.config_file", EXAMPLE, "--parallelism.tensor_parallel_degree", "2.0"],
         "not an integer"),
        (["--world-size", "0"], "--world-size 0: must be >= 1"),
    ],
)  # fmt: skip
def test_errors_exit_2_in_one_line(
    args: list[str],
    message: str,
    cuda_machine: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, out, err = explain(capsys, *args)
    assert code == 2 and out == ""
    assert err.startswith("rocm-hwq-autoset: error: ") and message in err
    assert err.count("\n") == 1


def test_invalid_toml_exits_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text("[parallelism\n")
    code, _, err = explain(capsys, "--job.config_file", str(bad))
    assert code == 2 and f"{bad}: invalid TOML" in err and "Traceback" not in err


def test_rocm_machine_says_what_the_hook_would_do(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.syspath_prepend(str(fake_torch(tmp_path / "rocm", ROCM_VERSION_PY)))
    monkeypatch.delenv("GPU_MAX_HW_QUEUES", raising=False)
    monkeypatch.delenv("ROCM_HWQ_AUTOSET", raising=False)
    _, out, _ = explain(capsys, "--job.config_file", EXAMPLE)
    assert "ROCm yes: " in " ".join(out.split())
    assert "would set GPU_MAX_HW_QUEUES=4" in out
    monkeypatch.setenv("GPU_MAX_HW_QUEUES", "16")
    _, out, _ = explain(capsys, "--job.config_file", EXAMPLE)
    assert "16 (explicit: the hook leaves it)" in out
    assert "GPU_MAX_HW_QUEUES=16 was set explicitly" in out
    monkeypatch.setenv("ROCM_HWQ_AUTOSET", "off")
    _, out, _ = explain(capsys, "--json", "--job.config_file", EXAMPLE)
    assert json.loads(out)["environment"]["opted_out"] is True


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
        assert "example" in text
        assert max(len(line) for line in text.splitlines()) <= 80
    with pytest.raises(SystemExit) as exit_:
        main(["frobnicate"])
    assert exit_.value.code == 2
    with pytest.raises(SystemExit) as exit_:
        main([])
    assert exit_.value.code == 2


def test_python_m_and_console_script_agree() -> None:
    env = {"PATH": os.environ["PATH"], "PYTHONPATH": str(ROOT), "NO_COLOR": "1"}
    via_m = subprocess.run(
        [sys.executable, "-m", "rocm_hwq_autoset", "explain", "--json"],
        capture_output=True, text=True, env=env, check=True,
    )  # fmt: skip
    assert json.loads(via_m.stdout)["queues"] == 4


class _Tty:
    def isatty(self) -> bool:
        return True


def test_colour_only_on_a_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NO_COLOR", raising=False)
    assert paint("ok", "green", _Tty()) == "\033[32mok\033[0m"  # type: ignore[arg-type]
    assert paint("ok", "green", sys.stdout) == "ok" or sys.stdout.isatty()
    monkeypatch.setenv("NO_COLOR", "1")
    assert paint("ok", "green", _Tty()) == "ok"  # type: ignore[arg-type]


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

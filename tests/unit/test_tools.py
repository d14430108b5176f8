"""The tools that make what a skipped test needs, each in one command:
``tools/torchtitan_venv.py`` (the venv of the real torchtitan, as ``.ci/run``
makes it) and ``tools/corpus.py`` (the corpus of torchtitan's TOML configs and
real traces). Neither is run for real here: no pip, no clone."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

from ..helpers import check_lines

ROOT = Path(__file__).resolve().parents[2]

#: Every test here is known fast (the ini's 600 s is for the slow ones).
pytestmark = pytest.mark.timeout(60)


def tool(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, ROOT / "tools" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def venv_tool() -> ModuleType:
    return tool("torchtitan_venv")


def test_the_venv_is_kept_where_ci_kept_it(venv_tool: ModuleType) -> None:
    """The folder's name is the requirements' hash as ``.ci/run`` named it
    (``echo "$requirements" | sha256sum``): a venv it made is reused."""
    digest = subprocess.run(
        ["bash", "-c", f'echo "{venv_tool.REQUIREMENTS}" | sha256sum | cut -c1-12'],
        capture_output=True, text=True, check=True,
    ).stdout.strip()  # fmt: skip
    assert venv_tool.REQUIREMENTS == "torch==2.13.0 torchtitan==0.3.0 triton"
    keep = venv_tool.keep_dir({"XDG_CACHE_HOME": "/c"})
    assert keep == Path(f"/c/rocm-hwq-autoset-ci/torchtitan-{digest}")
    assert venv_tool.keep_dir({"XDG_CACHE_HOME": ""}).parent == (
        Path.home() / ".cache" / "rocm-hwq-autoset-ci"
    )


def test_a_kept_venv_is_named_not_made_again(
    venv_tool: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    keep = venv_tool.keep_dir({"XDG_CACHE_HOME": str(tmp_path)})
    keep.mkdir(parents=True)
    (keep / "ready").touch()

    def never(*args: object) -> None:
        raise AssertionError("made again")

    monkeypatch.setattr(venv_tool, "build", never)
    assert venv_tool.main([]) == 0
    out = capsys.readouterr().out
    assert out == f"export ROCM_HWQ_TORCHTITAN={keep}/bin/python\n"


def test_without_python_3_11_the_eval_fails(
    venv_tool: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str], request: pytest.FixtureRequest,
) -> None:  # fmt: skip
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setattr(venv_tool, "pyenv_root", lambda: tmp_path / "pyenv")
    assert venv_tool.main([]) == 1
    out, err = capsys.readouterr()
    assert out == "false\n"
    said = err.split()  # the folder looked in, and the variable left unset
    assert said[0] == "torchtitan_venv.py:" and err.count("\n") == 1
    assert {f"{tmp_path}/pyenv/versions", "ROCM_HWQ_TORCHTITAN"} <= set(said)
    check_lines(request, [("no pyenv 3.11", err)], tmp_path)


def test_the_newest_python_3_11_is_taken(venv_tool: ModuleType, tmp_path: Path) -> None:
    for name in ("3.11.2", "3.11.10", "3.11.7-debug", "3.12.1", "3.11.9"):
        (tmp_path / "versions" / name / "bin").mkdir(parents=True)
        (tmp_path / "versions" / name / "bin" / "python3").touch()
    assert venv_tool.find_python(tmp_path) == (
        tmp_path / "versions" / "3.11.10" / "bin" / "python3"
    )
    assert venv_tool.find_python(tmp_path / "none") is None


def test_ci_uses_the_tool() -> None:
    """One way to the venv: .ci/run names it through the tool."""
    ci = (ROOT / ".ci" / "run").read_text()
    assert 'torchtitan="$(python tools/torchtitan_venv.py)"' in ci
    assert "sha256sum" not in ci and "pip install" not in ci.replace(
        "pip install -e", ""
    )


# The corpus.


@pytest.fixture
def corpus_tool() -> ModuleType:
    return tool("corpus")


@pytest.mark.parametrize(
    ("path", "name"),
    [
        ("torchtitan/models/deepseek_v3/train_configs/debug_model.toml",
         "models__deepseek_v3__debug_model.toml"),
        ("torchtitan/experiments/vlm/train_configs/debug_model.toml",
         "experiments__vlm__debug_model.toml"),
        ("tests/integration_tests/base_config.toml",
         "tests__integration_tests__base_config.toml"),
        ("pyproject.toml", None),
        ("torchtitan/models/llama3/model.toml", None),
        ("torchtitan/models/llama3/train_configs/README.md", None),
    ],
)  # fmt: skip
def test_the_corpus_names_a_config_by_its_path(
    corpus_tool: ModuleType, path: str, name: str | None
) -> None:
    """As ../shared/corpus names them (its torchtitan-toml folder)."""
    assert corpus_tool.toml_name(Path(path)) == name


def test_the_corpus_is_laid_out_from_two_checkouts(
    corpus_tool: ModuleType, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    titan, hta = tmp_path / "torchtitan", tmp_path / "hta"
    for path in (
        "torchtitan/models/llama3/train_configs/llama3_8b.toml",
        "tests/integration_tests/base_config.toml",
        "pyproject.toml",
        "torchtitan/config/job_config.py",
    ):
        (titan / path).parent.mkdir(parents=True, exist_ok=True)
        (titan / path).write_text(f"# {path}\n")
    for path in corpus_tool.TRACES.values():
        (hta / path).parent.mkdir(parents=True, exist_ok=True)
        (hta / path).write_bytes(path.encode())  # fmt: skip
    corpus = tmp_path / "corpus"
    args = [str(corpus), "--torchtitan", str(titan), "--hta", str(hta)]
    assert corpus_tool.main(args) == 0
    out, err = capsys.readouterr()
    assert out == f"export ROCM_HWQ_CORPUS={corpus}\n"
    assert err.startswith(f"corpus.py: {corpus}: ") and err.count("\n") == 1
    assert [word for word in err.split() if word.isdigit()] == ["2", "3"]  # counts
    assert sorted(p.name for p in (corpus / "torchtitan-toml").iterdir()) == [
        "models__llama3__llama3_8b.toml", "tests__integration_tests__base_config.toml",
    ]  # fmt: skip
    assert sorted(p.name for p in (corpus / "traces").iterdir()) == sorted(
        corpus_tool.TRACES
    )
    job_config = corpus / "config" / "job_config.py"
    assert job_config.read_text() == "# torchtitan/config/job_config.py\n"
    (hta / corpus_tool.TRACES["sampled_rank-0.json.gz"]).unlink()
    assert corpus_tool.main(args) == 1  # a checkout without a trace
    assert capsys.readouterr().out == "false\n"


def test_the_shared_corpus_has_the_names_the_tool_gives() -> None:
    """Where the workplace's corpus exists: the same traces, and configs named
    as the tool names them."""
    from ..data import TOML_DIR, TRACE_DIR, corpus_dir

    corpus = tool("corpus")
    assert sorted(p.name for p in corpus_dir(TRACE_DIR).iterdir()) == sorted(
        corpus.TRACES
    )
    for path in corpus_dir(TOML_DIR).iterdir():
        first, *rest = path.name.split("__")
        if first == "tests":
            relative = Path(first, *rest)
        else:
            relative = Path("torchtitan", first, *rest[:-1], "train_configs", rest[-1])
        assert corpus.toml_name(relative) == path.name


def test_the_suites_cpu_is_counted_per_test_and_file(tmp_path: Path) -> None:
    """``tools/suite_cpu.py`` as a plugin: a test that computes in a child
    counts that child's CPU; the summary sums per file, largest first."""
    (tmp_path / "test_a.py").write_text(
        "import subprocess, sys\n"
        "def test_busy():\n"
        "    subprocess.run([sys.executable, '-c',"
        " 'import time\\nend = time.process_time() + 0.5\\n"
        "while time.process_time() < end: pass'], check=True)\n"
        "def test_idle():\n"
        "    pass\n"
    )
    (tmp_path / "test_b.py").write_text("def test_nothing():\n    pass\n")
    prefix = tmp_path / "cpu"
    env = {"PATH": os.environ["PATH"], "PYTHONPATH": str(ROOT / "tools"),
           "SUITE_CPU": str(prefix)}  # fmt: skip
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "suite_cpu", "-p", "no:cacheprovider",
         "-n", "0", "-q", "-c", "/dev/null", str(tmp_path)],
        cwd=tmp_path, env=env, capture_output=True, text=True,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    [written] = tmp_path.glob("cpu.*")
    lines = {line.split(" ", 2)[2]: float(line.split()[0])
             for line in written.read_text().splitlines()}  # fmt: skip
    assert lines["test_a.py::test_busy"] >= 0.5 > lines["test_a.py::test_idle"]
    out = tool("suite_cpu").summary([str(written)])
    assert out.startswith("3 tests: ")
    files = [line.split()[-1] for line in out.splitlines()[2:4]]
    assert files == ["test_a.py", "test_b.py"]

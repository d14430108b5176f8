"""The allow-list of equivalent mutants in tools/mutation.py stays true to the
code: each entry names a module and function that exist, and the line it says
a mutant changes is in that function (so an entry goes stale loudly, not
silently, when the code moves on)."""

from __future__ import annotations

import ast
import hashlib
import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _tool() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "mutation", ROOT / "tools" / "mutation.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("mutation", module)
    spec.loader.exec_module(module)
    return module


TOOL = _tool()


def _functions(module: str) -> dict[str, str]:
    """Each function of a package module (``Class.method`` for methods) and its
    source lines, stripped, as ``report --diffs`` shows them."""
    path = ROOT / TOOL.source_of(module)
    text = path.read_text()
    tree = ast.parse(text)
    lines = text.splitlines()
    found: dict[str, str] = {}

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                body = lines[child.lineno - 1 : child.end_lineno]
                found[prefix + child.name] = "\n".join(ln.strip() for ln in body)
            elif isinstance(child, ast.ClassDef):
                visit(child, f"{prefix}{child.name}.")

    visit(tree, "")
    return found


@pytest.mark.parametrize(
    "entry", TOOL.EQUIVALENT, ids=lambda e: f"{e.module}:{e.function}:{e.after}"
)
def test_each_equivalent_mutant_names_a_line_of_the_code(entry: Any) -> None:
    assert entry.module in TOOL.modules()
    functions = _functions(entry.module)
    assert entry.function in functions
    body = functions[entry.function].splitlines()
    assert entry.before in body
    assert entry.after != entry.before and entry.why.strip()


def test_the_names_of_mutants_and_modules() -> None:
    assert TOOL.function_of("rocm_hwq_autoset._x.xǁWaiterǁneed__mutmut_3") == (
        "Waiter.need"
    )
    assert TOOL.function_of("rocm_hwq_autoset._hook.x_fit__mutmut_21") == "fit"
    assert TOOL.pattern_of("__init__") == "rocm_hwq_autoset.x*"
    assert TOOL.pattern_of("_cli.verify") == "rocm_hwq_autoset._cli.verify.x*"
    assert TOOL.source_of("_cli.verify") == "rocm_hwq_autoset/_cli/verify.py"
    assert "_hook" in TOOL.modules() and "_cli.verify" in TOOL.modules()


def test_the_docs_show_the_list_as_it_is(capsys: pytest.CaptureFixture[str]) -> None:
    TOOL.equivalents()
    table = capsys.readouterr().out
    assert table.strip() in (ROOT / "docs" / "mutation.md").read_text()


def test_the_mutation_run_tests_in_one_process() -> None:
    """mutmut learns which tests run a function from the calls made in its own
    process: the suite's xdist workers (``-n`` in addopts) would run every test
    elsewhere, and no mutant would have a test. Its pytest arguments, which
    come after addopts, turn them off."""
    from rocm_hwq_autoset._config import parse_toml

    settings = parse_toml((ROOT / "pyproject.toml").read_bytes())["tool"]
    args = settings["mutmut"]["pytest_add_cli_args"]
    assert "-n" in settings["pytest"]["ini_options"]["addopts"].split()
    assert args[args.index("-n") :][:2] == ["-n", "0"]


def test_a_mutants_own_module_tests_run_first() -> None:
    tests = ["tests/cli/test_x.py::a", "tests/unit/test_argv.py::b",
             "tests/unit/test_y.py::c", "tests/unit/test_argv.py::d"]  # fmt: skip
    assert TOOL.home_first("rocm_hwq_autoset._argv.x_f__mutmut_1", tests) == [
        "tests/unit/test_argv.py::b",
        "tests/unit/test_argv.py::d",
        "tests/cli/test_x.py::a",
        "tests/unit/test_y.py::c",
    ]
    status = "rocm_hwq_autoset._cli.status.xǁRowǁdoc__mutmut_2"
    assert TOOL.home_first(status, tests) == tests


def test_the_tests_of_a_changed_file_are_learnt_again(tmp_path: Path) -> None:
    """mutmut's map of which tests run which function forgets the tests of a
    test file changed since it was learnt (mutmut learns them again as new
    ones), and keeps the others'."""
    node, argv = "tests/unit/test_node.py", "tests/unit/test_argv.py"
    stats = tmp_path / "stats.json"
    stats.write_text(json.dumps({
        "duration_by_test": {f"{node}::a": 1.0, f"{argv}::b": 2.0},
        "tests_by_mangled_function_name": {"f": [f"{node}::a", f"{argv}::b"]},
        "stats_time": 3.0,
    }))  # fmt: skip
    learnt = tmp_path / "learnt.json"
    digest = hashlib.sha256((ROOT / argv).read_bytes()).hexdigest()
    learnt.write_text(json.dumps({node: "before", argv: digest}))
    assert TOOL.forget_changed_tests(stats, learnt) == [node]
    assert json.loads(stats.read_text()) == {
        "duration_by_test": {f"{argv}::b": 2.0},
        "tests_by_mangled_function_name": {"f": [f"{argv}::b"]},
        "stats_time": 3.0,
    }
    assert TOOL.forget_changed_tests(stats, learnt) == []  # learnt as they are now

"""The package's layers, held against its imports (every import, module-level
or inside a function): each module imports only modules of lower layers, so no
import runs back up and no two modules import each other, directly or not.
docs/design.md shows the same table.

``python -m tests.unit.test_layout [PACKAGE_DIR]`` prints the figures: modules,
imports, and imports that close a circle (for any checkout of the package).
"""

from __future__ import annotations

import ast
import functools
import sys
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "rocm_hwq_autoset"

#: Layer of each module, from the bottom: what a module may import is below it.
LAYERS = {
    # reading inputs: nothing of the package below
    "_config": 0, "_environ": 0,
    # the command line, the model (and the inputs' text form), profiler
    # traces, HIP's queue pools, ROCm detection
    "_argv": 1, "_model": 1, "_traces": 1, "_pools": 1, "_rocm": 1,
    # the decision as a value (and its one line), the public API
    "_decision": 2, "_api": 2,
    # the --module wing, one band: what an evaluation read, its answer, one
    # child's process, the process starts a launcher makes, torchtitan's
    # registry; the cache; the child's side and the parent's; the door
    "_evaluation.deps": 3, "_evaluation.answer": 3, "_evaluation.process": 3,
    "_evaluation.spawns": 3, "_evaluation.registry": 3,
    "_evaluation.cache": 4,
    "_evaluation.child": 5, "_evaluation.parent": 5,
    "_evaluation.__init__": 6,
    # the start-up hook (through the wing's door), the package's face
    "_hook": 7, "__init__": 8,
    # the command line: terminal output and its streams, shared, commands,
    # dispatcher
    "_cli.term": 9, "_cli._common": 10,
    "_cli.explain": 11, "_cli.doctor": 11, "_cli.verify": 11,
    "_cli.__init__": 12, "__main__": 13,
}  # fmt: skip


def module_name(path: Path, package: Path) -> str:
    return ".".join(path.relative_to(package).with_suffix("").parts)


@functools.cache  # the four tests read the package once
def imports(package: Path) -> dict[str, set[str]]:
    """Each module of the package and the modules of the package it imports."""
    found: dict[str, set[str]] = {}
    for path in sorted(package.rglob("*.py")):
        name = module_name(path, package)
        here = name.split(".")
        here = here[:-1]  # the package the module is in
        targets: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.level:
                base = here[: len(here) - node.level + 1] if node.level > 1 else here
                stem = [*base, *(node.module.split(".") if node.module else [])]
                for alias in node.names:
                    targets.add(_resolve(package, [*stem, alias.name]) or
                                _resolve(package, stem) or "")  # fmt: skip
            elif isinstance(node, ast.ImportFrom) and node.module:
                parts = node.module.split(".")
                if parts[0] == package.name:
                    targets.add(_resolve(package, parts[1:]) or "")
        targets.discard("")
        targets.discard(name)
        found[name] = targets
    return found


def _resolve(package: Path, parts: list[str]) -> str | None:
    """The module ``parts`` names inside the package, if it is one."""
    if not parts:
        return "__init__"
    if package.joinpath(*parts).with_suffix(".py").is_file():
        return ".".join(parts)
    if package.joinpath(*parts, "__init__.py").is_file():
        return ".".join([*parts, "__init__"])
    return None


def in_circles(graph: dict[str, set[str]]) -> list[tuple[str, str]]:
    """The imports that close a circle: both ends reach each other."""

    def reach(start: str) -> set[str]:
        seen: set[str] = set()
        todo = [start]
        while todo:
            for nxt in graph.get(todo.pop(), ()):
                if nxt not in seen:
                    seen.add(nxt)
                    todo.append(nxt)
        return seen

    reached = {name: reach(name) for name in graph}
    return sorted((a, b) for a, bs in graph.items() for b in bs if a in reached[b])


def test_every_module_has_a_layer() -> None:
    assert set(imports(PACKAGE)) == set(LAYERS)


def test_every_import_goes_down() -> None:
    up = [(a, b) for a, bs in imports(PACKAGE).items() for b in bs
          if LAYERS[b] >= LAYERS[a]]  # fmt: skip
    assert up == []


def test_no_circle() -> None:
    assert in_circles(imports(PACKAGE)) == []


#: The wing's modules: the rest of the package comes in through its door.
WING = "_evaluation."
DOOR = "_evaluation.__init__"


def test_the_wing_is_one_band_entered_through_its_door() -> None:
    """Every module of the wing is above the decision and below the hook; no
    module outside it imports one of its modules but the door."""
    graph = imports(PACKAGE)
    wing = [name for name in graph if name.startswith(WING)]
    assert all(LAYERS["_decision"] < LAYERS[name] < LAYERS["_hook"] for name in wing)
    inward = sorted((a, b) for a, bs in graph.items() for b in bs
                    if b.startswith(WING) and b != DOOR
                    and not a.startswith(WING))  # fmt: skip
    assert inward == []


def test_only_python_m_imports_the_dispatcher() -> None:
    """The dispatcher imports each command when it runs; no command, nor any
    other module, imports it back."""
    graph = imports(PACKAGE)
    assert [a for a, bs in graph.items() if "_cli.__init__" in bs] == ["__main__"]


if __name__ == "__main__":
    package = Path(sys.argv[1]) if len(sys.argv) > 1 else PACKAGE
    graph = imports(package)
    edges = sum(len(targets) for targets in graph.values())
    circles = in_circles(graph)
    print(f"{package}: {len(graph)} modules, {edges} imports between them,"
          f" {len(circles)} closing a circle")  # fmt: skip
    for a, b in circles:
        print(f"  {a} -> {b}")

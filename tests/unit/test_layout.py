"""The tree's layers, held against its imports (every import, module-level or
inside a function): the package's modules, the modules beside it (the start-up
gate and its neighbours, which survive the package) and the tools. Each module
imports only modules of lower layers, so no import runs back up and no two
modules import each other, directly or not. docs/design.md shows the same
table.

``python -m tests.unit.test_layout [CHECKOUT]`` prints the figures: modules,
imports, imports that close a circle, and imports that run back up (for any
checkout: an older one's modules without a layer here are not counted up).
"""

from __future__ import annotations

import ast
import functools
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "rocm_hwq_autoset"
#: The modules beside the package, at the root of site-packages.
NEIGHBOURS = "_rocm_hwq_autoset_*.py"

#: Layer of each module, from the bottom: what a module may import is below it.
LAYERS = {
    # reading inputs: nothing of the package below
    "_config": 0, "_environ": 0,
    # beside the package, importing nothing of the tree: Python 3.9's command
    # line reader; how to install the package again, said where it is gone
    "_rocm_hwq_autoset_cmdline": 0, "_rocm_hwq_autoset_reinstall": 0,
    # the maintainers' tools: nothing of the tree
    "tools.corpus": 0, "tools.mutation": 0, "tools.mutation_hooks": 0,
    "tools.phrases": 0, "tools.pth_line": 0, "tools.suite_cpu": 0,
    "tools.torchtitan_venv": 0,
    # the model (and the inputs' text form), why it leaves out the streams it
    # has no lane for, profiler traces, HIP's queue pools, ROCm detection;
    # names neither the model nor torchtitan has (the did-you-mean search)
    "_model": 1, "_left_out": 1, "_traces": 1, "_pools": 1, "_rocm": 1,
    "_unknown": 1,
    # the command line (and torchrun's), the launch forms
    "_argv": 2,
    # the decision as a value (and its one line), the public API
    "_decision": 3, "_api": 3,
    # a node's view: its processes, their values and queues, read from outside;
    # what ran before the hook (a value put after HIP started, said)
    "_node": 4, "_early": 4,
    # the --module wing, one band: what an evaluation read, its answer, one
    # child's process, the process starts a launcher makes, torchtitan's
    # registry, the waiting lines; the cache; the child's side and the
    # parent's; the door
    "_evaluation.deps": 4, "_evaluation.answer": 4, "_evaluation.process": 4,
    "_evaluation.spawns": 4, "_evaluation.registry": 4, "_evaluation.lines": 4,
    "_evaluation.cache": 5,
    "_evaluation.child": 6, "_evaluation.parent": 6,
    "_evaluation.__init__": 7,
    # the start-up hook (through the wing's door), the package's face; beside
    # the package, the start-up gate (the hook, for a launch)
    "_hook": 8, "__init__": 9, "_rocm_hwq_autoset_gate": 9,
    # the command line: terminal output and its streams, shared, commands,
    # dispatcher
    "_cli.term": 10, "_cli._common": 11,
    "_cli.explain": 12, "_cli.doctor": 12, "_cli.verify": 12, "_cli.status": 12,
    "_cli.__init__": 13, "__main__": 14,
    # beside the package: the console script (the dispatcher, or one line)
    "_rocm_hwq_autoset_cli": 14,
}  # fmt: skip


def module_name(path: Path, package: Path) -> str:
    return ".".join(path.relative_to(package).with_suffix("").parts)


@functools.cache
def tree(root: Path) -> dict[str, Path]:
    """The tree's modules by name: the package's (``_cli.doctor``), those
    beside it (``_rocm_hwq_autoset_gate``), the tools' (``tools.pth_line``)."""
    package = root / PACKAGE.name
    found = {module_name(p, package): p for p in sorted(package.rglob("*.py"))}
    found.update({p.stem: p for p in sorted(root.glob(NEIGHBOURS))})
    found.update({f"tools.{p.stem}": p for p in sorted((root / "tools").glob("*.py"))})
    return found


@functools.cache  # the tests read the tree once
def imports(root: Path) -> dict[str, set[str]]:
    """Each module of the tree and the modules of the tree it imports."""
    package = root / PACKAGE.name
    modules = tree(root)
    found: dict[str, set[str]] = {}
    for name, path in modules.items():
        inside = path.is_relative_to(package)
        here = name.split(".")[:-1]  # the package the module is in
        targets: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.level and inside:
                base = here[: len(here) - node.level + 1] if node.level > 1 else here
                stem = [*base, *(node.module.split(".") if node.module else [])]
                for alias in node.names:
                    targets.add(_resolve(package, [*stem, alias.name]) or
                                _resolve(package, stem) or "")  # fmt: skip
            elif isinstance(node, (ast.Import, ast.ImportFrom)):
                named = ([a.name for a in node.names] if isinstance(node, ast.Import)
                         else [node.module] if node.module and not node.level
                         else [])  # fmt: skip
                for module in named:
                    parts = module.split(".")
                    if parts[0] == package.name:
                        targets.add(_resolve(package, parts[1:]) or "")
                    elif module in modules and "." not in module:
                        targets.add(module)  # beside the package
                    elif parts[0] == "tools" and module in modules:
                        targets.add(module)
        targets.discard("")
        targets.discard(name)
        found[name] = targets
    return found


def going_up(graph: dict[str, set[str]]) -> list[tuple[str, str]]:
    """The imports of a module of a layer no higher than its own (of the
    modules that have one)."""
    return sorted((a, b) for a, bs in graph.items() for b in bs
                  if a in LAYERS and b in LAYERS
                  and LAYERS[b] >= LAYERS[a])  # fmt: skip


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
    assert set(imports(ROOT)) == set(LAYERS)


def test_every_import_goes_down() -> None:
    assert going_up(imports(ROOT)) == []


def test_no_circle() -> None:
    assert in_circles(imports(ROOT)) == []


def test_the_package_never_imports_the_gate() -> None:
    """Nothing imports the gate: it decides at start-up, and nothing else;
    what the package shares with it is beside them both."""
    graph = imports(ROOT)
    assert [a for a, bs in graph.items() if GATE in bs] == []


def test_the_layout_sees_what_it_checks() -> None:
    """The tree's reader finds the imports that cross its parts, in every
    form (was: the gate, and ``import X`` statements, were never read)."""
    graph = imports(ROOT)
    assert graph[GATE] == {"_hook", "_rocm_hwq_autoset_cmdline",
                           "_rocm_hwq_autoset_reinstall"}  # fmt: skip
    assert "_rocm_hwq_autoset_cmdline" in graph["_argv"]
    assert "_rocm_hwq_autoset_reinstall" in graph["_cli.doctor"]
    cli = {"_cli.__init__", "_rocm_hwq_autoset_reinstall"}
    assert graph["_rocm_hwq_autoset_cli"] == cli
    # A circle and an arrow back up are seen where they are.
    looped = {**graph, "_argv": {*graph["_argv"], GATE}}
    assert ("_argv", GATE) in in_circles(looped)
    assert going_up(looped) == [("_argv", GATE)]


#: The wing's modules: the rest of the package comes in through its door.
WING = "_evaluation."
DOOR = "_evaluation.__init__"


def test_the_wing_is_one_band_entered_through_its_door() -> None:
    """Every module of the wing is above the decision and below the hook; no
    module outside it imports one of its modules but the door."""
    graph = imports(ROOT)
    wing = [name for name in graph if name.startswith(WING)]
    assert all(LAYERS["_decision"] < LAYERS[name] < LAYERS["_hook"] for name in wing)
    inward = sorted((a, b) for a, bs in graph.items() for b in bs
                    if b.startswith(WING) and b != DOOR
                    and not a.startswith(WING))  # fmt: skip
    assert inward == []


def test_only_the_two_entries_import_the_dispatcher() -> None:
    """The dispatcher imports each command when it runs; no command, nor any
    other module but ``python -m`` and the console script, imports it back."""
    graph = imports(ROOT)
    assert sorted(a for a, bs in graph.items() if "_cli.__init__" in bs) == [
        "__main__", "_rocm_hwq_autoset_cli"
    ]  # fmt: skip


# docs/design.md, held to the package: its layer table, its figures, and every
# name of the package it gives.

DESIGN = ROOT / "docs" / "design.md"
#: The start-up gate, a module beside the package (design.md names it too).
GATE = "_rocm_hwq_autoset_gate"


def design_section(title: str) -> str:
    text = DESIGN.read_text()
    start = text.index(f"\n## {title}\n")
    end = text.find("\n## ", start + 1)
    return text[start : end if end != -1 else len(text)]


def test_design_md_shows_these_layers() -> None:
    shown: dict[str, int] = {}
    for line in design_section("Where things are").splitlines():
        cells = [c.strip() for c in line.strip("|").split("|")]
        if len(cells) == 3 and cells[0].isdigit():
            assert cells[2], f"layer {cells[0]} says no concern"
            for name in re.findall(r"`([\w/]+)`", cells[1]):
                assert name.replace("/", ".") not in shown, f"{name} shown twice"
                shown[name.replace("/", ".")] = int(cells[0])
    assert shown == LAYERS


def test_design_md_figures_are_the_trees() -> None:
    graph = imports(ROOT)
    section = design_section("Where things are")
    modules = re.search(r"\| modules \(.*\) \| .+ \| (\d+) \|", section)
    edges = re.search(r"\| imports between them \(.*\) \| .+ \| (\d+) \|",
                      section)  # fmt: skip
    circles = re.search(r"\| imports closing a circle \| .+ \| \*\*(\d+)\*\* \|",
                        section)  # fmt: skip
    up = re.search(r"\| imports running back up \| .+ \| \*\*(\d+)\*\* \|",
                   section)  # fmt: skip
    assert modules and edges and circles and up, "design.md lost its figures' table"
    assert int(modules.group(1)) == len(graph)
    assert int(edges.group(1)) == sum(len(targets) for targets in graph.values())
    assert int(circles.group(1)) == len(in_circles(graph))
    assert int(up.group(1)) == len(going_up(graph))


#: How design.md counts (``A TOML launch imports eight modules``).
NUMBERS = {"one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6,
           "seven": 7, "eight": 8, "nine": 9, "ten": 10, "eleven": 11,
           "twelve": 12}  # fmt: skip


def test_design_md_names_the_modules_a_toml_launch_imports() -> None:
    """The count and the list design.md gives are the set
    tests/e2e/test_startup.py pins in a real launch."""
    from tests.e2e.test_startup import TOML_LAUNCH_MODULES

    section = design_section("Where things are")
    said = re.search(r"A TOML launch imports (\w+) modules of the package \(([^)]*)\)",
                     section)  # fmt: skip
    assert said, "design.md no longer says what a TOML launch imports"
    listed = said.group(2).split(";")[0]
    named = {f"rocm_hwq_autoset.{n}".removesuffix(".__init__")
             for n in re.findall(r"`([\w/]+)`", listed)}  # fmt: skip
    assert named == set(TOML_LAUNCH_MODULES)
    assert NUMBERS[said.group(1)] == len(TOML_LAUNCH_MODULES)


def _members(node: ast.AST) -> dict[str, ast.AST | None]:
    """The names a module or class defines: functions, classes, assignments
    (and, in a class, the attributes its methods set on ``self``), each with
    its node when it is a class (whose own names a reference may go on to)."""
    found: dict[str, ast.AST | None] = {}
    for child in ast.iter_child_nodes(node):
        if isinstance(child, ast.ClassDef):
            found[child.name] = child
        elif isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
            found[child.name] = None
            if isinstance(node, ast.ClassDef):
                for sub in ast.walk(child):
                    targets = (sub.targets if isinstance(sub, ast.Assign) else
                               [sub.target] if isinstance(sub, ast.AnnAssign)
                               else [])  # fmt: skip
                    for t in targets:
                        if (isinstance(t, ast.Attribute)
                                and isinstance(t.value, ast.Name)
                                and t.value.id == "self"):  # fmt: skip
                            found.setdefault(t.attr, None)
        elif isinstance(child, (ast.Assign, ast.AnnAssign)):
            targets = child.targets if isinstance(child, ast.Assign) else [child.target]
            for t in targets:
                for name in ast.walk(t):  # ``A, B = ...`` too
                    if isinstance(name, ast.Name):
                        found[name.id] = None
        elif isinstance(child, (ast.If, ast.Try)):  # ``if TYPE_CHECKING:`` ...
            found.update(_members(child))
    return found


@functools.cache
def _module_file(module: str) -> Path | None:
    """The file of a module of the tree (``_evaluation.parent``, the package
    ``_cli``, the gate beside it, ``tools.pth_line``)."""
    if module in tree(ROOT):
        return tree(ROOT)[module]
    if f"{module}.__init__" in tree(ROOT):
        return tree(ROOT)[f"{module}.__init__"]
    return None


@functools.cache
def _tree(path: Path) -> ast.Module:
    return ast.parse(path.read_text())


@functools.cache
def _short_names() -> dict[str, str]:
    """Modules by their last part where it is one module's alone: the wing's
    ``parent.Waiter``, ``_common.Option``."""
    lasts: dict[str, list[str]] = {}
    for name in LAYERS:
        parts = name.split(".")
        if len(parts) > 1 and parts[-1] != "__init__":
            lasts.setdefault(parts[-1], []).append(name)
    return {last: names[0] for last, names in lasts.items() if len(names) == 1}


def _ours(reference: str) -> list[str] | None:
    """A reference as a module of ours and the names in it (``_cli/doctor.Row``
    → ``_cli.doctor``, ``Row``; ``parent.Waiter`` → ``_evaluation.parent``,
    ``Waiter``), or None when its first part names no module of ours
    (``os.walk``, ``_posixsubprocess.fork_exec``, a bare ``cache``)."""
    parts = reference.replace("/", ".").split(".")
    if parts[0] == PACKAGE.name and len(parts) > 1:
        parts = parts[1:]
    if parts[0] in _short_names() and len(parts) > 1:
        parts = [*_short_names()[parts[0]].split("."), *parts[1:]]
    if _module_file(parts[0]) is None:
        return None
    return parts


#: What a reference resolved to: nothing, a module or class (whose names a
#: bare name in parentheses after it is one of), or another name.
MISSING, SCOPE, NAME = "missing", "scope", "name"


def _what_is(parts: list[str]) -> str:
    """What ``parts`` (a module of ours, then names: ``_ours``) is in the
    package: a module, a class, a function or constant, a class's method or
    attribute; the file of a module (``_cli/explain.py``); or :data:`MISSING`.
    A package's ``__init__`` holds what its ``__all__`` exports too."""
    for cut in range(len(parts), 0, -1):  # the longest module prefix
        path = _module_file(".".join(parts[:cut]))
        if path is None:
            continue
        rest = parts[cut:]
        if rest == ["py"]:
            return MISSING if path.name == "__init__.py" else NAME  # the file
        tree = _tree(path)
        exported = {e.value for n in ast.walk(tree) if isinstance(n, ast.Assign)
                    and any(isinstance(t, ast.Name) and t.id == "__all__"
                            for t in n.targets)
                    for e in ast.walk(n.value)
                    if isinstance(e, ast.Constant)}  # fmt: skip
        scope: ast.AST | None = tree
        for at, part in enumerate(rest):
            members = _members(scope) if scope is not None else {}
            if at == 0 and part in exported:
                members.setdefault(part, None)
            if part not in members:
                return MISSING
            scope = members[part]
        return SCOPE if scope is not None else NAME
    return MISSING


def _exists(reference: str) -> bool:
    """Whether ``_module.name`` (``_cli/doctor.name``, ``name`` a function, a
    class, a constant, or a class's method or attribute ``Class.name``; a
    module alone; a module's file, ``_cli/explain.py``) is in the package;
    True for a reference that is not to the package."""
    parts = _ours(reference)
    return parts is None or _what_is(parts) != MISSING


#: A backticked name: dotted (or, for a module, slashed), alone or called
#: (``_hook.apply(outcome)``).
REFERENCE = re.compile(r"`([A-Za-z_]\w*(?:[./]\w+)*)[(`]")
#: What may stand between a reference and a bare name that goes on beside it
#: (``_environ.world_size`, `timeout``) ...
BESIDE = (", ", " / ", ", and ", " and ")
#: ... or in it (``_pools` (`choose``, ``Child` (`read_line``).
INSIDE = " ("


def references(text: str) -> list[str]:
    """Every name of the package ``text`` gives: ``_module.name`` and a
    module alone, and the bare names that go on beside the name just given
    (``_environ.world_size`, `timeout``) or in it (``_evaluation/spawns`
    (`SPAWN_EVENTS`, `Wrappers``)."""
    found: list[str] = []
    for line in text.splitlines():
        last: list[str] | None = None  # the name just given, resolved
        beside: list[str] = []  # the module or class it is in
        end = 0
        for match in re.finditer(r"`([^`]+)`", line):
            between, end = line[end : match.start()], match.end()
            token = match.group(1)
            ref = REFERENCE.match(match.group(0))
            parts = _ours(ref.group(1)) if ref else None
            bare = re.fullmatch(r"\w+|[A-Z]\w*\.\w+", token)
            if parts is not None:
                assert ref is not None
                found.append(ref.group(1))
                last = parts
                module = _module_file(".".join(parts)) is not None
                beside = parts if module else parts[:-1]
            elif last is not None and bare and between in (*BESIDE, INSIDE):
                if between == INSIDE and _what_is(last) == SCOPE:
                    beside = last
                last = [*beside, *token.split(".")]
                found.append(".".join(last))
            else:
                last = None
    return found


def test_design_md_names_only_what_exists() -> None:
    """Each name of the package design.md gives, in every section, is in the
    package (was: ``_evaluation/result_text``, ``parent.Check``, ``deps.check``
    and ``child.lowest_priority``, moved or gone, still given as homes)."""
    missing = sorted({r for r in references(DESIGN.read_text()) if not _exists(r)})
    assert missing == []


def test_the_names_check_finds_what_is_gone() -> None:
    """The check above, on names that are not there and names that are."""
    text = (
        "| x | `_evaluation/result_text`, `_decision.fit` (`gone_too`) |\n"
        "`parent.Check`, `Evaluation`, `no_such` and `_cli/explain.py`\n"
        "`_hook.apply(outcome)` sets `GPU_MAX_HW_QUEUES`; `os.walk`"
    )
    assert sorted(r for r in references(text) if not _exists(r)) == [
        "_decision.gone_too", "_evaluation.parent.no_such",
        "_evaluation/result_text", "parent.Check",
    ]  # fmt: skip
    assert _exists("_evaluation.parent.Waiter.check")  # an attribute of self
    assert _exists("_cli/_common.Reading.config") and _exists(GATE + ".may_be_launch")


if __name__ == "__main__":
    root = Path(sys.argv[1]).resolve() if len(sys.argv) > 1 else ROOT
    graph = imports(root)
    edges = sum(len(targets) for targets in graph.values())
    circles, up = in_circles(graph), going_up(graph)
    print(f"{root}: {len(graph)} modules, {edges} imports between them,"
          f" {len(circles)} closing a circle, {len(up)} running back up"
          f" (of the modules with a layer here)")  # fmt: skip
    for a, b in circles:
        print(f"  circle: {a} -> {b}")
    for a, b in up:
        print(f"  up: {a} -> {b}")

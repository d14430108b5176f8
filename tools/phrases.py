"""How many of the tests' asserts pin a phrase: an ``assert`` that holds a string
literal (or an f-string's literal part) of four words or more.

A message's wording is pinned once, in a golden file (``tests/helpers.check_golden``);
other tests assert values, levels, verdicts and exit codes. ``--top N`` lists the
files with the most such asserts.
"""

from __future__ import annotations

import argparse
import ast
import collections
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
WORDS = 4


def literals(node: ast.AST) -> list[str]:
    """The string literals under ``node``, f-strings' literal parts included."""
    found = []
    for sub in ast.walk(node):
        if isinstance(sub, ast.Constant) and isinstance(sub.value, str):
            found.append(sub.value)
    return found


def count(tests: Path) -> tuple[collections.Counter[str], collections.Counter[str]]:
    """Per test file: its asserts, and those that pin a phrase."""
    total: collections.Counter[str] = collections.Counter()
    pinned: collections.Counter[str] = collections.Counter()
    for path in sorted(tests.rglob("*.py")):
        name = str(path.relative_to(tests.parent))
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Assert):
                total[name] += 1
                if any(len(text.split()) >= WORDS for text in literals(node)):
                    pinned[name] += 1
    return total, pinned


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--top", type=int, default=15, metavar="N")
    args = parser.parse_args()
    total, pinned = count(ROOT / "tests")
    all_asserts, all_pinned = sum(total.values()), sum(pinned.values())
    share = 100 * all_pinned / all_asserts
    print(f"{all_pinned} of {all_asserts} asserts pin a phrase ({share:.1f} %)")
    for name, n in pinned.most_common(args.top):
        print(f"  {name}: {n}/{total[name]}")


if __name__ == "__main__":
    main()

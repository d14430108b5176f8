"""What the README tells a newcomer, held to what is true: how to install it
(not from the package index: it is not there yet), the venv its quick start
asks for and what it prints, the opt-out near the top, its length and its
links; and the names docs/cache.md says the cache prunes. (What the commands
print is held by tests/cli: the sample report, the export lines.)"""

from __future__ import annotations

import os
import re
import shlex
from pathlib import Path

import pytest

from rocm_hwq_autoset._evaluation.cache import OWN_NAME
from tests.helpers import hook

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text()
#: What comes before the first section: what a reader sees first.
INTRO = README[: README.index("\n## ")]
#: The reference the README links to, one page a topic.
DOCS = sorted((ROOT / "docs").glob("*.md"))
#: A README a person reads in five minutes; the reference lives in docs/.
MAX_README_LINES = 250
#: The quick start's two commands: one installs the package and shows its
#: answer on a shipped example, one installs the test extras and runs the tests.
INSTALL_AND_SHOW = "pip install . && "
TEST_COMMAND = "pip install -e '.[test]' && python -m pytest"

#: Every test here is known fast (the ini's 600 s is for the slow ones).
pytestmark = pytest.mark.timeout(60)


def section(title: str, text: str = README) -> str:
    start = text.index(f"\n## {title}\n")
    end = text.find("\n## ", start + 1)
    return text[start : end if end != -1 else None]


def code_blocks(text: str) -> list[str]:
    """The fenced blocks of ``text``, in order, without their fences."""
    return re.findall(r"^```[a-z]*\n(.*?)^```\n", text, re.M | re.S)


def prose(text: str) -> str:
    """``text`` without its fenced blocks (a ``# comment`` there is no heading)."""
    return re.sub(r"^```.*?^```\n", "", text, flags=re.M | re.S)


def test_the_intro_promises_no_install_from_the_index() -> None:
    """Was: "with nothing to do beyond `pip install rocm-hwq-autoset`", which
    fails: the package is not on the index. Every mention of that command says
    it is for when it is."""
    assert "pip install rocm-hwq-autoset" not in INTRO
    assert "from a checkout or a wheel" in INTRO
    for match in re.finditer(r"pip install rocm-hwq-autoset", README):
        before = README[max(match.start() - 60, 0) : match.start()]
        assert "Once it is on the package index" in before, before


def test_the_opt_out_is_near_the_top() -> None:
    assert "`ROCM_HWQ_AUTOSET=0`" in INTRO


def test_the_readme_is_short() -> None:
    """Was: 697 lines, a hundred of them the cache's rules."""
    assert README.count("\n") <= MAX_README_LINES


def test_the_quick_start_makes_the_venv_it_asks_for() -> None:
    """Was: "run them ... in a venv", with no command that makes one."""
    quick = section("Quick start")
    first_block = quick[quick.index("```\n") + 4 :]
    assert first_block.startswith("python3 -m venv .venv && . .venv/bin/activate\n")


def quick_start_commands() -> list[str]:
    """The quick start's shell lines: the venv, the install, the tests."""
    blocks = code_blocks(section("Quick start"))
    return [*blocks[0].splitlines(), *blocks[2].splitlines()]


def test_the_quick_start_has_its_two_commands_and_they_work_at_any_path() -> None:
    """The brief's two commands are there, and mean the same wherever the clone
    is (a path with a space in it too): every path they name is the clone's
    own, named relatively from it, and nothing in them is expanded by the
    shell (no ``$``, ``~`` or glob outside quotes), so no path of the clone's
    is ever split or expanded."""
    venv, install, tests = quick_start_commands()
    assert install.startswith(INSTALL_AND_SHOW)
    assert tests == TEST_COMMAND
    for command in (venv, install, tests):
        assert "$" not in command and "`" not in command, command
        words = shlex.split(command)
        for word in words:
            assert not word.startswith(("/", "~")), (command, word)
        unquoted = re.sub(r"'[^']*'", "''", command)
        assert not re.search(r"[*?\[~]", unquoted), command
    shown = [w for w in shlex.split(install) if "/" in w and not w.startswith("-")]
    assert shown and all((ROOT / path).is_file() for path in shown), shown


def test_the_quick_start_shows_what_the_hook_prints(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The quick start's output is what its command prints: the hook's line on
    stderr, then the program's, which already sees the value."""
    _, install, _ = quick_start_commands()
    words = shlex.split(install[len(INSTALL_AND_SHOW) :])
    assignment, python, dash_c, program, *args = words
    assert (python, dash_c) == ("python", "-c")
    name, _, value = assignment.partition("=")
    environ = {name: value}
    monkeypatch.chdir(ROOT)
    outcome = hook(environ, args, [], program="-c")
    said = outcome.line(environ)
    monkeypatch.setenv("GPU_MAX_HW_QUEUES", environ["GPU_MAX_HW_QUEUES"])
    exec(program, {})
    printed = capsys.readouterr().out
    assert f"{said}{printed}" == code_blocks(section("Quick start"))[1]


def test_the_cache_names_it_prunes_are_its_own() -> None:
    """Was: ``.<host>.lock``, a name the cache never makes nor prunes. Every
    name docs/cache.md gives is one the cache's own rule takes."""
    where = (ROOT / "docs" / "cache.md").read_text()
    bullet = where[where.index("**Where**") : where.index("**Guarantees**")]
    names = re.findall(r"`(<[^`]+)`", bullet)
    assert names, bullet
    key, host = "0123456789abcdef" * 2, "node-1"
    for name in names:
        if name == "<key>":
            continue
        filled = name.replace("<key>", key).replace("<host>", host)
        filled = filled.replace("<machine>", "0123456789abcdef" * 2)
        filled = filled.replace("<pid>", "4242")
        if filled.startswith("<name>"):
            filled = filled.replace("<name>", f"{key}.json")
        assert OWN_NAME.fullmatch(filled), name


def anchors(page: Path) -> set[str]:
    """The anchors GitHub makes for ``page``'s headings: lower case, the
    punctuation dropped, blanks made hyphens, a repeated one numbered."""
    found: set[str] = set()
    for title in re.findall(r"^#+ (.+)$", prose(page.read_text()), re.M):
        slug = re.sub(r"[^\w\- ]", "", title.lower()).replace(" ", "-")
        number, anchor = 0, slug
        while anchor in found:
            number += 1
            anchor = f"{slug}-{number}"
        found.add(anchor)
    return found


@pytest.mark.parametrize(
    "page", [ROOT / "README.md", *DOCS], ids=lambda p: os.path.relpath(p, ROOT)
)
def test_every_relative_link_resolves(page: Path) -> None:
    """Every relative link of the README and docs/ names a file of the
    project, and a heading of it where it names one: the reference moved to
    docs/, and a link left behind would send a reader nowhere."""
    links = re.findall(r"\]\(([^)\s]+)\)", prose(page.read_text()))
    local = [link for link in links if not re.match(r"[a-z]+:", link)]
    for link in local:
        path, _, anchor = link.partition("#")
        target = (page.parent / path).resolve() if path else page
        assert target.is_file(), f"{page.name}: {link}"
        assert ROOT in target.parents, f"{page.name}: {link}"
        if anchor:
            assert anchor in anchors(target), f"{page.name}: {link}"
    if page.name == "README.md":
        linked = {(page.parent / link.partition("#")[0]).resolve() for link in local}
        assert set(DOCS) <= linked, "a page of docs/ the README does not name"

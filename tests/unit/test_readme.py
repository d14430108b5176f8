"""What the README tells a newcomer, held to what is true: how to install it
(not from the package index: it is not there yet), the venv its quick start
asks for, the opt-out near the top, the names the cache prunes. (What the
commands print is held by tests/cli: the sample report, the export lines.)"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from rocm_hwq_autoset._evaluation.cache import OWN_NAME

README = (Path(__file__).resolve().parents[2] / "README.md").read_text()
#: What comes before the first section: what a reader sees first.
INTRO = README[: README.index("\n## ")]

#: Every test here is known fast (the ini's 600 s is for the slow ones).
pytestmark = pytest.mark.timeout(60)


def section(title: str) -> str:
    start = README.index(f"\n## {title}\n")
    end = README.find("\n## ", start + 1)
    return README[start : end if end != -1 else None]


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


def test_the_quick_start_makes_the_venv_it_asks_for() -> None:
    """Was: "run them ... in a venv", with no command that makes one."""
    quick = section("Quick start")
    first_block = quick[quick.index("```\n") + 4 :]
    assert first_block.startswith("python3 -m venv .venv && . .venv/bin/activate\n")


def test_the_cache_names_it_prunes_are_its_own() -> None:
    """Was: ``.<host>.lock``, a name the cache never makes nor prunes. Every
    name the README gives is one the cache's own rule takes."""
    where = section("The cache of `--module` evaluations")
    bullet = where[where.index("**Where**") : where.index("**Guarantees**")]
    names = re.findall(r"`(<[^`]+)`", bullet)
    assert names, bullet
    key, host = "0123456789abcdef" * 2, "node-1"
    for name in names:
        if name == "<key>":
            continue
        filled = name.replace("<key>", key).replace("<host>", host)
        filled = filled.replace("<pid>", "4242")
        if filled.startswith("<name>"):
            filled = filled.replace("<name>", f"{key}.json")
        assert OWN_NAME.fullmatch(filled), name

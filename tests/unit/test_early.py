"""The start-up files ``site`` runs code from before the hook, in the running
Python's order."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from rocm_hwq_autoset._early import run_before_ours

#: Every test here is known fast (the ini's 600 s is for the slow ones).
pytestmark = pytest.mark.timeout(60)


def lay_out(root: Path, files: dict[str, dict[str, str]]) -> list[str]:
    """Site folders (in discovery order) holding start-up files with texts."""
    folders = []
    for folder, texts in files.items():
        (root / folder).mkdir()
        for name, text in texts.items():
            (root / folder / name).write_text(text)
        folders.append(str(root / folder))
    return folders


PTH, START = "rocm_hwq_autoset.pth", "rocm_hwq_autoset.start"


@pytest.mark.parametrize(
    ("files", "before_3_15", "from_3_15"),
    [
        # our .pth, no .start: an import line, among the other import lines
        ({"a": {"c.pth": "import c\n", PTH: "import y\n", "z.pth": "import z\n"},
          "b": {"u.pth": "import u\n", "a.start": "a:go\n"}},
         ["a/c.pth"], ["a/c.pth"]),
        # our .start beside our .pth: after every import line and earlier entries
        ({"a": {"c.pth": "import c\n", PTH: "import y\n", START: "# ours\ng:start\n",
                "z.pth": "import z\n", "a.start": "a:go\n"},
          "b": {"u.pth": "import u\n", "b.start": "b:go\n"}},
         ["a/c.pth"], ["a/c.pth", "a/z.pth", "b/u.pth", "a/a.start"]),
        # an empty .start (a comment only) turns our .pth line off: never runs
        ({"a": {PTH: "import y\n", START: "# nothing\n\n"}}, [], None),
        # our .pth without a .start in a later folder: its import line comes first
        ({"a": {START: "g:start\n", "a.start": "a:go\n"},
          "b": {"d.pth": "import d\n", PTH: "import y\n"}},
         ["b/d.pth"], ["b/d.pth"]),
        # nothing of ours: site never runs the hook
        ({"a": {"x.pth": "import x\n"}}, None, None),
    ],
)  # fmt: skip
def test_what_site_runs_before_the_hook(
    tmp_path: Path, files: dict[str, dict[str, str]],
    before_3_15: list[str] | None, from_3_15: list[str] | None,
) -> None:  # fmt: skip
    """The documented order of each Python (PEP 829 from 3.15), on folders
    laid out by the test; paths shown relative to them."""
    folders = lay_out(tmp_path, files)

    def shown(found: list[str] | None) -> list[str] | None:
        return None if found is None else [os.path.relpath(p, tmp_path) for p in found]

    assert shown(run_before_ours(folders, (3, 14))) == before_3_15
    assert shown(run_before_ours(folders, (3, 15))) == from_3_15
    assert shown(run_before_ours(folders, (3, 16, 0))) == from_3_15

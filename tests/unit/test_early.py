"""The start-up files ``site`` runs code from before the hook, in the running
Python's order."""

from __future__ import annotations

import os
import sys
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


def test_start_up_files_read_as_site_reads_them(tmp_path: Path) -> None:
    """A folder gone (the next ones are read), a ``.pth`` of paths only, an
    import line with a tab, a name with dots (an editable install's), bytes
    that are not UTF-8: as ``site`` reads them, on either side of 3.15."""
    folders = lay_out(tmp_path, {"a": {
        "__editable__.x-1.0.pth": "import x\n", "b.pth": "/opt/extra\n",
        "c.pth": "import\tc\n", PTH: "import y\n",
    }})  # fmt: skip
    (tmp_path / "a" / "bytes.pth").write_bytes(b"# \xff\nimport z\n")
    folders.insert(0, str(tmp_path / "gone"))
    for version in ((3, 14), (3, 15)):
        found = run_before_ours(folders, version) or []
        assert [os.path.relpath(p, tmp_path) for p in found] == [
            "a/__editable__.x-1.0.pth", "a/bytes.pth", "a/c.pth"
        ], version  # fmt: skip


@pytest.mark.skipif(sys.prefix == sys.base_prefix, reason="not in a venv")
def test_the_venvs_site_folder_is_known_before_site_says_it_is_one(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Python 3.12 and older run a venv's ``.pth`` files before ``site``'s own
    list of prefixes names the venv: at that moment, the venv's site folder on
    ``sys.path`` is one all the same."""
    import site

    from rocm_hwq_autoset._early import site_dirs

    ours = [p for p in site.getsitepackages() if p.startswith(sys.prefix)]
    monkeypatch.setattr(site, "PREFIXES", [sys.base_prefix, sys.base_exec_prefix])
    assert ours and set(ours) & set(site_dirs())

"""ROCm detection without importing torch."""

from __future__ import annotations

from pathlib import Path

import pytest

from rocm_hwq_autoset import _rocm
from rocm_hwq_autoset._rocm import detect, torch_hip_version

from ..helpers import (
    CUDA_VERSION_PY,
    GOLDEN,
    ROCM_VERSION_PY,
    check_golden,
    fake_torch,
    lines_report,
)

#: Every test here is known fast (the ini's 600 s is for the slow ones).
pytestmark = pytest.mark.timeout(60)


@pytest.mark.parametrize(
    ("text", "hip"),
    [
        (ROCM_VERSION_PY, "6.2.41133-dd7f95766"),
        (CUDA_VERSION_PY, None),
        ("hip = '6.0'\n", "6.0"),
        ('hip="7.2.0"  # comment\n', "7.2.0"),
        ("hip = None\n", None),
        ("hipify = '1'\n", ""),
        ("    hip = '6.0'\n", ""),  # not a module-level assignment
        ("hip = compute()\n", ""),
        ("", ""),
        (" hip = '6.0'\n", ""),  # indented by one space
        ("\thip = '6.0'\n", ""),
        ("hip = '6'\n", "6"),  # the shortest string
        ("hip = ''\n", ""),
        ("hip = '6.0\n", ""),  # unterminated
        ("hip = '6.0\"\n", ""),  # quotes that do not match
        ("hip = X_HIP_X\n", ""),  # a name, not a string
        ("hip='6.0'#generated\n", "6.0"),
        ("hip = None  # = unset on this build\n", None),
        ("hip: 'str' = '6.1'\n", "6.1"),
    ],
)
def test_version_py(tmp_path: Path, text: str, hip: str | None) -> None:
    (tmp_path / "version.py").write_text(text)
    assert torch_hip_version(str(tmp_path / "version.py")) == hip


def test_first_torch_on_the_path_decides(tmp_path: Path) -> None:
    rocm = fake_torch(tmp_path / "rocm", ROCM_VERSION_PY)
    cuda = fake_torch(tmp_path / "cuda", CUDA_VERSION_PY)
    empty = tmp_path / "empty"
    empty.mkdir()
    found, evidence = detect([str(empty), str(rocm), str(cuda)], {})
    assert found and "6.2.41133" in evidence
    found, evidence = detect([str(cuda), str(rocm)], {})
    assert not found and "CUDA or CPU" in evidence


@pytest.fixture(autouse=True)
def no_opt_rocm(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """This machine's own /opt/rocm, if any, out of the way."""
    monkeypatch.setattr(_rocm, "DEFAULT_ROCM_PATH", str(tmp_path / "no-opt-rocm"))


def test_no_torch_asks_the_hip_runtime(tmp_path: Path) -> None:
    lib = tmp_path / "rocm" / "lib"
    lib.mkdir(parents=True)
    (lib / "libamdhip64.so.6").write_bytes(b"")
    found, evidence = detect([str(tmp_path)], {"ROCM_PATH": str(tmp_path / "rocm")})
    assert found and "libamdhip64.so.6" in evidence
    found, evidence = detect([str(tmp_path)], {"HIP_PATH": str(tmp_path / "rocm")})
    assert found
    assert not detect([str(tmp_path)], {})[0]
    assert detect([str(tmp_path)], {})[1].endswith(f"{_rocm.DEFAULT_ROCM_PATH})")
    (tmp_path / "no-opt-rocm" / "lib").mkdir(parents=True)
    (tmp_path / "no-opt-rocm" / "lib" / "libamdhip64.so").write_bytes(b"")
    assert detect([str(tmp_path)], {})[0]  # the default place


def test_unreadable_version_py_falls_back_to_the_runtime(tmp_path: Path) -> None:
    root = fake_torch(tmp_path / "t", None)
    assert not detect([str(root)], {})[0]
    lib = tmp_path / "rocm" / "lib"
    lib.mkdir(parents=True)
    (lib / "libamdhip64.so").write_bytes(b"")
    assert detect([str(root)], {"ROCM_PATH": str(tmp_path / "rocm")})[0]


def test_a_version_py_with_bytes_that_are_not_utf_8(tmp_path: Path) -> None:
    """A stray Latin-1 byte in a comment does not hide the line that counts."""
    (tmp_path / "version.py").write_bytes(b"# built by J\xfcrgen\nhip = '6.2.1'\n")
    assert torch_hip_version(str(tmp_path / "version.py")) == "6.2.1"


def test_the_evidence_names_the_file_that_decided(tmp_path: Path) -> None:
    rocm = fake_torch(tmp_path / "rocm", ROCM_VERSION_PY)
    version_py = rocm / "torch" / "version.py"
    found, evidence = detect([str(rocm)], {})
    said = [("a ROCm torch", evidence)]
    assert found is True and evidence.split(": ")[0] == str(version_py)
    assert "'6.2.41133-dd7f95766'" in evidence.split()  # torch's hip, as it is
    cuda = fake_torch(tmp_path / "cuda", CUDA_VERSION_PY)
    found, evidence = detect([str(cuda)], {})
    said.append(("a CUDA torch", evidence))
    assert found is False and evidence.split(": ")[0] == str(cuda / "torch/version.py")
    assert "None" in evidence.split()
    found, evidence = detect([str(tmp_path)], {})
    said.append(("no torch, no HIP runtime", evidence))
    assert found is False  # explain --json says false, never null
    assert evidence.endswith(f"{_rocm.DEFAULT_ROCM_PATH})")  # where it looked
    lib = tmp_path / "hip" / "lib"
    lib.mkdir(parents=True)
    (lib / "libamdhip64.so.6.2").write_bytes(b"")
    (lib / "README").write_bytes(b"")
    # ROCM_PATH names nothing usable: HIP_PATH is asked next.
    environ = {
        "ROCM_PATH": str(tmp_path / "nothing"),
        "HIP_PATH": str(tmp_path / "hip"),
    }
    found, evidence = detect([str(tmp_path)], environ)
    said.append(("no torch, HIP_PATH's runtime", evidence))
    assert found is True and evidence.endswith(f" {lib / 'libamdhip64.so.6.2'}")
    report = lines_report(said, tmp_path).replace(_rocm.DEFAULT_ROCM_PATH, "/opt/rocm")
    check_golden(GOLDEN / "lines" / "rocm.txt", report)


def test_a_torch_that_says_nothing_leaves_it_to_the_runtime(tmp_path: Path) -> None:
    """The first torch on the path decides, even when a later one would say
    ROCm: one whose version.py cannot be read sends detection to the runtime."""
    unreadable = fake_torch(tmp_path / "first", None)
    rocm = fake_torch(tmp_path / "second", ROCM_VERSION_PY)
    assert not detect([str(unreadable), str(rocm)], {})[0]

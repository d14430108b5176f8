"""Where the shared corpus is: ``../shared/corpus`` beside the checkout, if at all."""

from __future__ import annotations

from pathlib import Path

import pytest

CORPUS = Path(__file__).resolve().parents[2] / "shared" / "corpus"
TOML_DIR = CORPUS / "torchtitan-toml"
TRACE_DIR = CORPUS / "traces"


def corpus_file(folder: Path, name: str) -> Path:
    path = folder / name
    if not path.is_file():
        pytest.skip(
            f"{path} is absent (the shared corpus exists only in the workplace)"
        )
    return path

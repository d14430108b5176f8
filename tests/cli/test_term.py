"""``_cli/term``: prose fitted to the terminal without breaking a word, and a
standard output whose reader went away takes nothing more."""

from __future__ import annotations

import io

import pytest

from rocm_hwq_autoset._cli.term import Stdout, wrap

pytestmark = pytest.mark.timeout(10)


@pytest.fixture
def narrow(monkeypatch: pytest.MonkeyPatch) -> None:
    """A 30-column terminal: prose takes 39 columns (never under 40, less the
    last one)."""
    monkeypatch.setenv("COLUMNS", "30")


@pytest.mark.usefixtures("narrow")
@pytest.mark.parametrize(
    ("text", "lines"),
    [
        ("x" * 20 + " " + "y" * 18, ["x" * 20 + " " + "y" * 18]),  # 39: one line
        ("x" * 20 + " " + "y" * 19, ["x" * 20, "  " + "y" * 19]),  # 40: two
        ("z" * 60, ["z" * 60]),  # a path longer than the line: whole
        ("x" * 25 + " aaaa-bbbb-cccc-dddd", ["x" * 25, "  aaaa-bbbb-cccc-dddd"]),
    ],
)
def test_prose_fits_39_columns_and_never_breaks_a_word(
    text: str, lines: list[str]
) -> None:
    assert wrap(text).split("\n") == lines


class _Reader(io.StringIO):
    """A pipe whose reader leaves at the first write."""

    def __init__(self) -> None:
        super().__init__()
        self.writes = 0

    def write(self, text: str) -> int:
        self.writes += 1
        if self.writes == 1:
            raise BrokenPipeError
        return super().write(text)


def test_after_the_reader_left_nothing_more_is_written() -> None:
    reader = _Reader()
    out = Stdout(reader)
    assert out.write("first\n") == len("first\n")
    assert out.write("second\n") == len("second\n")
    assert (out.gone, reader.writes, reader.getvalue()) == (True, 1, "")

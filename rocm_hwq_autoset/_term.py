"""Terminal output: colour only on a terminal, and never with ``NO_COLOR``."""

from __future__ import annotations

import os
import textwrap
from typing import TextIO

_CODES = {"green": "32", "yellow": "33", "red": "31", "bold": "1"}


def use_colour(stream: TextIO) -> bool:
    if os.environ.get("NO_COLOR"):  # https://no-color.org: any non-empty value
        return False
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty())


def paint(text: str, colour: str, stream: TextIO) -> str:
    if not use_colour(stream):
        return text
    return f"\033[{_CODES[colour]}m{text}\033[0m"


def row(
    name: str, text: str, *, indent: int = 0, column: int = 20, width: int = 80
) -> str:
    """``name`` in a column, ``text`` wrapped beside it to fit ``width``."""
    lead = " " * indent + name.ljust(column - indent - 1) + " "
    return textwrap.fill(
        text,
        width=width,
        initial_indent=lead,
        subsequent_indent=" " * column,
        break_on_hyphens=False,
        break_long_words=False,
    )

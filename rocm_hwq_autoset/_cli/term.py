"""Terminal output: colour only on a terminal, and never with ``NO_COLOR``."""

from __future__ import annotations

import os
import re
import textwrap
from typing import TextIO

_CODES = {"green": "32", "yellow": "33", "red": "31"}
#: Spaces inside these are never broken: ``key = value``, ``a // (b)``, ``x * y``.
_GLUED = re.compile(r" (=|//|\*) ")
_NBSP = "\u00a0"  # textwrap breaks only at ASCII white space


def use_colour(stream: TextIO) -> bool:
    if os.environ.get("NO_COLOR"):  # https://no-color.org: any non-empty value
        return False
    return stream.isatty()


def paint(text: str, colour: str, stream: TextIO) -> str:
    if not use_colour(stream):
        return text
    return f"\033[{_CODES[colour]}m{text}\033[0m"


def row(
    name: str, text: str, *, indent: int = 0, column: int = 20, width: int = 80
) -> str:
    """``name`` in a column, ``text`` wrapped beside it to fit ``width``: lines
    break only between words, never inside a path or a ``key = value``."""
    lead = " " * indent + name.ljust(column - indent - 1) + " "
    glued = _GLUED.sub(lambda m: f"{_NBSP}{m.group(1)}{_NBSP}", text)
    wrapped = textwrap.fill(
        glued,
        width=width - 1,
        initial_indent=lead,
        subsequent_indent=" " * column,
        break_on_hyphens=False,
        break_long_words=False,
    )
    return wrapped.replace(_NBSP, " ")

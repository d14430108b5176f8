"""Terminal output: colour only on a terminal, and never with ``NO_COLOR``;
streams that may be full or closed."""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import sys
import textwrap
from typing import TextIO

from .._decision import printable

_CODES = {"green": "32", "yellow": "33", "red": "31"}
#: Spaces inside these are never broken: ``key = value``, ``a // (b)``, ``x * y``.
_GLUED = re.compile(r" (=|//|\*) ")
_NBSP = "\u00a0"  # textwrap breaks only at ASCII white space


def use_colour(stream: TextIO) -> bool:
    if os.environ.get("NO_COLOR"):  # https://no-color.org: any non-empty value
        return False
    if os.environ.get("TERM") == "dumb":  # a terminal without escape sequences
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
    shown = _NBSP.join(printable(part) for part in text.split(_NBSP))  # unbroken's
    glued = _GLUED.sub(lambda m: f"{_NBSP}{m.group(1)}{_NBSP}", shown)
    wrapped = textwrap.fill(
        glued,
        width=width - 1,
        initial_indent=lead,
        subsequent_indent=" " * column,
        break_on_hyphens=False,
        break_long_words=False,
    )
    return wrapped.replace(_NBSP, " ")


def wrap(text: str) -> str:
    """A line of prose fitted to the terminal (``COLUMNS``, else the
    terminal's width, else 80), its next lines indented; a word (a path, a
    URL) is never broken."""
    width = shutil.get_terminal_size().columns
    return textwrap.fill(
        printable(text), width=max(width, 40) - 1, subsequent_indent="  ",
        break_long_words=False, break_on_hyphens=False,
    )  # fmt: skip


def json_text(doc: object, indent: int | None = None) -> str:
    """``doc`` as JSON that every reader takes: a byte of a name that is not
    UTF-8 (a lone surrogate, which strict JSON readers refuse) written as
    :func:`printable` writes it (``\\xff``)."""
    return json.dumps(_without_surrogates(doc), indent=indent)


def _without_surrogates(value: object) -> object:
    if isinstance(value, str):
        return value if value.isprintable() else _SURROGATE.sub(
            lambda m: printable(m.group()), value)  # fmt: skip
    if isinstance(value, dict):
        return {
            _without_surrogates(k): _without_surrogates(v) for k, v in value.items()
        }
    if isinstance(value, (list, tuple)):
        return [_without_surrogates(v) for v in value]
    return value


_SURROGATE = re.compile("[\udc80-\udcff]")


def unbroken(text: str) -> str:
    """``text`` that :func:`row` never breaks inside (a command to copy)."""
    return text.replace(" ", _NBSP)


class Unwritable(Exception):
    """stdout refused a write: a full disk (``> /dev/full``), a descriptor
    closed under the process. Not an ``OSError``: a command's own handling of
    the files it reads never takes it for one of those."""


class Stdout:
    """The stream a command writes its answer to: each write flushed at once,
    so that a refusal surfaces at the write that met it (before the command
    says on stderr that it is done); a refusal raises :class:`Unwritable`.
    A reader that went away (``| head``: ``BrokenPipeError``) is no error:
    what is left goes nowhere, and the command runs to its end, so that its
    exit status is its verdict's whatever the reader took (was: 0 at the
    first write after the reader left, a short ``verify`` exiting 0 or 1 by
    chance)."""

    __slots__ = ("gone", "stream")

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream
        self.gone = False
        """The reader went away: nothing more is written."""

    def write(self, text: str) -> int:
        if self.gone:
            return len(text)
        try:
            written = self.stream.write(text)
            self.stream.flush()
        except BrokenPipeError:
            self.gone = True
            discard(self.stream)
            return len(text)
        except (OSError, ValueError) as exc:  # ValueError: a closed file
            raise Unwritable(exc) from None
        return written

    def isatty(self) -> bool:
        return self.stream.isatty()


def write_stderr(text: str) -> None:
    """``text`` on stderr, which may be closed (``2>&-``: None) or refuse it
    (``2> /dev/full``): then there is no one to tell, and nothing is raised;
    what it kept goes nowhere (:func:`discard`)."""
    try:
        if sys.stderr is not None:
            sys.stderr.write(text)
            sys.stderr.flush()
    except (OSError, ValueError):
        discard(sys.stderr)


def discard(stream: TextIO | None) -> None:
    """What is left in a standard stream's buffer goes to ``/dev/null``, so
    that the interpreter's own flush at exit neither fails (exit status 120)
    nor says "Exception ignored"."""
    if stream is None:
        return
    with contextlib.suppress(OSError, ValueError, AttributeError):
        null = os.open(os.devnull, os.O_WRONLY)
        try:
            os.dup2(null, stream.fileno())
        finally:
            os.close(null)

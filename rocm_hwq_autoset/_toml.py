"""Reading a torchtitan TOML job config: bounded, parsed, never executed."""

from __future__ import annotations

import sys
from typing import Any

from ._errors import ConfigError
from ._files import MAX_CONFIG_BYTES, read_small_file

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on 3.9 and 3.10
    import tomli as tomllib


def load_toml(path: str) -> dict[str, Any]:
    """The parsed job config at ``path`` (``ConfigError`` if it is not one)."""
    return parse_toml(read_small_file(path, MAX_CONFIG_BYTES))


#: Most dots on one line. tomllib's time grows with the cube of a dotted key's
#: depth (40,000 levels: 30 s); 256 costs under a millisecond, and no job
#: config comes near it.
MAX_DOTS_PER_LINE = 256


def parse_toml(data: bytes) -> dict[str, Any]:
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise ConfigError("not UTF-8 text") from None
    for line in text.splitlines():
        if line.count(".") > MAX_DOTS_PER_LINE:
            raise ConfigError(
                f"a line with more than {MAX_DOTS_PER_LINE} dots; not a job config"
            )
    try:
        parsed: dict[str, Any] = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"invalid TOML: {exc}") from None
    except (RecursionError, ValueError, MemoryError) as exc:
        # A TOML parser may give up on pathological nesting or huge integers.
        raise ConfigError(f"unparsable TOML ({type(exc).__name__})") from None
    return parsed

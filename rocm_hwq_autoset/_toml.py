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


def parse_toml(data: bytes) -> dict[str, Any]:
    try:
        parsed: dict[str, Any] = tomllib.loads(data.decode("utf-8"))
        return parsed
    except UnicodeDecodeError:
        raise ConfigError("not UTF-8 text") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"invalid TOML: {exc}") from None
    except (RecursionError, ValueError, MemoryError) as exc:
        # A TOML parser may give up on pathological nesting or huge integers.
        raise ConfigError(f"unparsable TOML ({type(exc).__name__})") from None

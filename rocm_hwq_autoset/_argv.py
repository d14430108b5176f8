"""torchtitan's command line: which config file, and the overrides of our fields.

Reproduces ``ConfigManager.parse_args`` of the TOML era: the config file is taken
the way ``ConfigManager._maybe_load_toml`` scans for it, overrides the way tyro
parses them (``--section.field VALUE`` / ``=VALUE``, ``_`` and ``-`` alike in
names, ``--no-`` / ``--no_`` for false, comma lists, the last flag wins).
"""

from __future__ import annotations

from collections.abc import Sequence

from ._errors import ConfigError
from ._fields import FIELDS, Field, Value

CONFIG_FILE_FLAGS = ("--job.config_file", "--job.config-file")


def config_file_arg(args: Sequence[str]) -> str | None:
    """The first ``--job.config_file`` value, exactly as torchtitan picks it."""
    return flag_value(args, CONFIG_FILE_FLAGS)


def flag_value(args: Sequence[str], flags: Sequence[str]) -> str | None:
    """The value of the first of ``flags`` in ``args``, as ``FLAG=V`` or
    ``FLAG V``, the way torchtitan's ``ConfigManager`` scans for its config
    flags. A flag with no value after it is skipped."""
    for i, arg in enumerate(args):
        if "=" in arg:
            key, value = arg.split("=", 1)
            if key in flags:
                return value
        elif arg in flags and i < len(args) - 1:
            return args[i + 1]
    return None


def cli_overrides(args: Sequence[str]) -> dict[str, Value]:
    """The values the command line gives to the fields in ``FIELDS``.

    Other arguments pass untouched. Raises ``ConfigError`` where tyro would make
    the launch fail for one of our fields (a flag with a value, a missing value,
    an integer Python's ``int()`` does not accept).
    """
    found: dict[str, Value] = {}
    i = 0
    while i < len(args):
        arg = args[i]
        i += 1
        # Like ConfigManager's config-file scan, read past a "--": in a
        # launcher's argv (torchrun, ``doctor --``) the training flags follow it.
        if not arg.startswith("--"):
            continue
        name, has_inline, inline = arg[2:].partition("=")
        field, negated = _field_for(name.replace("-", "_"))
        if field is None:
            continue
        if field.kind == "bool":
            if has_inline or (i < len(args) and not _is_option(args[i])):
                value = inline if has_inline else args[i]
                raise ConfigError(
                    f"--{name} is a flag and takes no value (got {value!r});"
                    f" use --{field.key} or --{_negation(field.key)}"
                )
            found[field.key] = not negated
            continue
        if has_inline:
            raw = inline
        elif i < len(args) and not _is_option(args[i]):
            raw = args[i]
            i += 1
        else:
            raise ConfigError(f"--{name} expects a value")
        found[field.key] = _parse(field, raw)
    return found


def _field_for(name: str) -> tuple[Field | None, bool]:
    """The field a normalized flag name sets, and whether it is a ``no_`` flag."""
    if name in FIELDS:
        return FIELDS[name], False
    section, _, rest = name.partition(".")
    if rest.startswith("no_"):
        field = FIELDS.get(f"{section}.{rest[3:]}")
        if field is not None and field.kind == "bool":
            return field, True
    return None, False


def _negation(key: str) -> str:
    section, _, name = key.partition(".")
    return f"{section}.no-{name}"


def _is_option(token: str) -> bool:
    """argparse's rule: a token starting with ``-`` is an option, unless it is a
    negative number."""
    return token.startswith("-") and not token[1:].replace(".", "", 1).isdigit()


def _parse(field: Field, raw: str) -> Value:
    if field.kind == "int":
        try:
            return int(raw)  # tyro uses int(): "+2" is 2; "2.0" and "0x2" fail
        except ValueError:
            raise ConfigError(f"--{field.key} {raw!r} is not an integer") from None
    if field.kind == "list":
        return tuple(raw.split(","))  # torchtitan's list[str] rule: one token, commas
    return raw

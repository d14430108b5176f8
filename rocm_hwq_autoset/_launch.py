"""torchtitan's inputs, read as torchtitan reads them: the launch on the command
line, the TOML job config, and the fields the model reads, merged.

Two launch forms. The TOML era names a job config (``--job.config_file PATH``),
found the way ``ConfigManager._maybe_load_toml`` scans for it, read through a
bounded reader and parsed with ``tomllib``. torchtitan >= 0.3.0 runs ``-m
torchtitan.train --module M --config FN``, where the config is Python (read in a
child: ``_registry_child``). Overrides of the fields the model reads are parsed as
tyro parses them (``--section.field VALUE`` / ``=VALUE``, ``_`` and ``-`` alike in
names, ``--no-`` / ``--no_`` for false, comma lists, the last flag wins).
Precedence is torchtitan's: command line > config > defaults; each value keeps
where it came from.

One module for all of it, on purpose: every module the start-up path imports
costs ~0.3 M instructions before it does anything (benchmarks/startup_instructions.py).
"""

from __future__ import annotations

import os
import stat
import sys
from collections.abc import Mapping  # loaded by the TOML parser anyway

TYPE_CHECKING = False  # not typing's: start-up imports as little as it can
if TYPE_CHECKING:
    from collections.abc import Sequence
    from typing import Any, Union

    #: A field's value: ints for degrees, bools for flags, strings, string lists.
    Value = Union[bool, int, str, tuple[str, ...]]


class ConfigError(ValueError):
    """The job config or its command line cannot be read as torchtitan would.

    The message is one line, meant for a user: it names the flag, field or file and
    what is wrong with it.
    """


# The command line.

CONFIG_FILE_FLAGS = ("--job.config_file", "--job.config-file")
#: A module launch runs a module of this package (``torchtitan.train``).
TORCHTITAN = "torchtitan."


class Launch:
    """A torchtitan training launch: a TOML job config, or ``--module``/``--config``."""

    __slots__ = ("args", "config_file", "in_process")

    def __init__(
        self, args: Sequence[str], config_file: str | None, in_process: bool = True
    ) -> None:
        self.args = tuple(args)
        """The training arguments (after ``-m torchtitan.train`` where it is named)."""
        self.config_file = config_file
        """The TOML job config; None for a ``--module``/``--config`` launch."""
        self.in_process = in_process
        """Whether the training runs in this process (``python -m
        torchtitan.train``), not in workers it starts (torchrun)."""


def find_launch(argv: Sequence[str], orig_argv: Sequence[str] = ()) -> Launch | None:
    """The launch ``argv`` (``sys.argv[1:]``) makes, else None.

    A ``--job.config_file`` makes a TOML launch whatever the program. A module
    launch needs a ``torchtitan.*`` module: ``torchrun ... -m torchtitan.train
    ARGS`` names it in ``argv``, ``python -m torchtitan.train ARGS`` only in
    ``sys.orig_argv`` (3.10+); a program that merely takes ``--module`` and
    ``--config`` is left alone.
    """
    config_file = config_file_arg(argv)
    if config_file is not None:
        return Launch(argv, config_file)
    for i, arg in enumerate(argv):
        if arg.startswith(TORCHTITAN):  # a launcher: the module is its argument
            args, in_process = argv[i + 1 :], False
            break
    else:
        if not any(a.startswith(TORCHTITAN) for a in orig_argv):
            return None
        args, in_process = argv, True
    return Launch(args, None, in_process) if is_module_launch(args) else None


def is_module_launch(args: Sequence[str]) -> bool:
    """Whether training arguments name a config by ``--module`` and ``--config``."""
    return (
        flag_value(args, ("--module",)) is not None
        and flag_value(args, ("--config",)) is not None
    )


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


def is_training_arg(arg: str) -> bool:
    """Whether an option is shaped like a torchtitan flag: ``--section.field``
    (with ``=VALUE`` or not), ``--module`` or ``--config``."""
    name = arg.split("=", 1)[0]
    if name in ("--module", "--config"):
        return True
    section, dot, field = name[2:].partition(".")
    return name.startswith("--") and bool(section) and bool(dot) and bool(field)


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
        key, negated = _field_for(name.replace("-", "_"))
        if key is None:
            continue
        if FIELDS[key][0] == "bool":
            if has_inline or (i < len(args) and not is_option(args[i])):
                value = inline if has_inline else args[i]
                raise ConfigError(
                    f"--{name} is a flag and takes no value (got {value!r});"
                    f" use --{key} or --{_negation(key)}"
                )
            found[key] = not negated
            continue
        if has_inline:
            raw = inline
        elif i < len(args) and not is_option(args[i]):
            raw = args[i]
            i += 1
        else:
            raise ConfigError(f"--{name} expects a value")
        found[key] = _parse(key, raw)
    return found


def _field_for(name: str) -> tuple[str | None, bool]:
    """The field a normalized flag name sets, and whether it is a ``no_`` flag."""
    if name in FIELDS:
        return name, False
    section, _, rest = name.partition(".")
    key = f"{section}.{rest[3:]}"
    if rest.startswith("no_") and key in FIELDS and FIELDS[key][0] == "bool":
        return key, True
    return None, False


def _negation(key: str) -> str:
    section, _, name = key.partition(".")
    return f"{section}.no-{name}"


def is_option(token: str) -> bool:
    """argparse's rule: a token starting with ``-`` is an option, unless it is a
    negative number."""
    return token.startswith("-") and not token[1:].replace(".", "", 1).isdigit()


def _parse(key: str, raw: str) -> Value:
    kind = FIELDS[key][0]
    if kind == "int":
        try:
            return int(raw)  # tyro uses int(): "+2" is 2; "2.0" and "0x2" fail
        except ValueError:
            raise ConfigError(f"--{key} {raw!r} is not an integer") from None
    if kind == "list":
        return tuple(raw.split(","))  # torchtitan's list[str] rule: one token, commas
    return raw


# The fields the model reads, merged.

DEFAULT, CLI, TOML, CONFIG = "default", "CLI", "TOML", "config"


#: The fields the model reads: ``section.name`` (as in TOML and on the command
#: line) -> (kind, torchtitan's default). Kinds: ``int``, ``bool``, ``str``,
#: ``list`` (of strings).
FIELDS: dict[str, tuple[str, Value]] = {
    "model.name": ("str", "llama3"),
    "model.flavor": ("str", "debugmodel"),
    "parallelism.data_parallel_shard_degree": ("int", -1),
    "parallelism.data_parallel_replicate_degree": ("int", 1),
    "parallelism.tensor_parallel_degree": ("int", 1),
    "parallelism.context_parallel_degree": ("int", 1),
    "parallelism.pipeline_parallel_degree": ("int", 1),
    "parallelism.expert_parallel_degree": ("int", 1),
    "compile.enable_passes": ("bool", False),
    "compile.disable_passes": ("list", ()),
    "compile.enable_fsdp_ag_rs_overlap": ("bool", False),
    "compile.passes": ("list", ()),
}


class Setting:
    """A field's value and where it came from."""

    __slots__ = ("source", "value")

    def __init__(self, value: Value, source: str) -> None:
        self.value = value
        self.source = source
        """``default``, ``CLI``, ``TOML``, or ``config`` (a config object)."""

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Setting):
            return NotImplemented
        return (self.value, self.source) == (other.value, other.source)

    def __hash__(self) -> int:
        return hash((self.value, self.source))

    def __repr__(self) -> str:
        return f"Setting(value={self.value!r}, source={self.source!r})"


_MISSING = object()


def merge(
    config: Mapping[str, Any] | None, overrides: Mapping[str, Value]
) -> dict[str, Setting]:
    """Our fields from a nested config mapping (TOML-shaped) and CLI overrides.

    Tables, dotted keys and inline tables all parse to the same nesting.
    Raises ``ConfigError`` for a value of the wrong type or out of range.
    """
    settings: dict[str, Setting] = {}
    for key, (_, default) in FIELDS.items():
        if key in overrides:
            settings[key] = Setting(overrides[key], CLI)
            continue
        found = _lookup(config, key)
        if found is _MISSING:
            settings[key] = Setting(default, DEFAULT)
        else:
            settings[key] = Setting(_checked(key, found), TOML)
    _check_degrees(settings)
    return settings


#: The sections a torchtitan config object has; an object with none is no config.
SECTIONS = ("model", "model_spec", "parallelism", "compile")


def from_object(config: object, overrides: Mapping[str, Value]) -> dict[str, Setting]:
    """Our fields from a config object read by attribute, as PR #4032 reads
    ``Trainer.Config`` (``config.parallelism.*``, ``config.compile.*``)."""
    if not any(hasattr(config, section) for section in SECTIONS):
        raise ConfigError(
            f"a {type(config).__name__} is not a job config: expected a mapping"
            " (parsed TOML), a torchtitan config object or None"
        )
    settings: dict[str, Setting] = {}
    for key, (kind, default) in FIELDS.items():
        section, _, name = key.partition(".")
        holder = getattr(config, section, None)
        if holder is None and section == "model":  # Trainer.Config: model_spec
            holder = getattr(config, "model_spec", None)
        found = getattr(holder, name, _MISSING)
        if key in overrides:
            settings[key] = Setting(overrides[key], CLI)
        elif found is _MISSING or found is None:
            # A config object with no ``model.name`` (registry era) names no
            # model: MoE is then decided by the caller or by the degree.
            settings[key] = Setting("" if section == "model" else default, DEFAULT)
        else:
            if kind == "list" and isinstance(found, list):
                found = tuple(found)
            settings[key] = Setting(_checked(key, found), CONFIG)
    _check_degrees(settings)
    return settings


def _lookup(config: Mapping[str, Any] | None, key: str) -> Any:
    if config is None:
        return _MISSING
    section_name, _, name = key.partition(".")
    section = config.get(section_name, _MISSING)
    if section is _MISSING:
        return _MISSING
    if not isinstance(section, Mapping):
        raise ConfigError(
            f"[{section_name}] is a {type(section).__name__}, not a table"
        )
    return section.get(name, _MISSING)


_KIND_NAMES = {
    "int": "an integer",
    "bool": "true or false",
    "str": "a string",
    "list": "a list of strings",
}


def _checked(key: str, value: Any) -> Value:
    """``value`` if it has the field's type (bools are not integers here)."""
    kind = FIELDS[key][0]
    if kind == "list":
        ok = isinstance(value, (list, tuple)) and all(isinstance(x, str) for x in value)
    elif kind == "int":
        ok = isinstance(value, int) and not isinstance(value, bool)
    else:
        ok = isinstance(value, bool if kind == "bool" else str)
    if not ok:
        raise ConfigError(f"{key} = {_short(value)} is not {_KIND_NAMES[kind]}")
    return tuple(value) if kind == "list" else value


def _check_degrees(settings: dict[str, Setting]) -> None:
    """torchtitan's ``ParallelDims`` rejects these; so do we, naming the field."""
    for key, setting in settings.items():
        value = setting.value
        if not key.endswith("_degree") or not isinstance(value, int):
            continue
        shard = key.endswith("data_parallel_shard_degree")
        if value >= 1 or (shard and value == -1):
            continue
        allowed = "-1 or >= 1" if shard else ">= 1"
        raise ConfigError(f"{key} = {value} ({setting.source}) must be {allowed}")


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


# Reading a small file without ever blocking, following a loop or filling memory:
# start-up code runs in every process, and a config path may name a FIFO, a
# device, a directory or a huge file.

#: Largest job config read. torchtitan's biggest shipped TOML is under 4 KiB;
#: 64 KiB leaves room for generated configs, and bounds the parse: tomllib
#: spends ~3 s per MiB on adversarial but valid TOML (benchmarks/toml_limits.py).
MAX_CONFIG_BYTES = 64 << 10
#: Largest ``torch/version.py`` read; PyTorch's is a few hundred bytes.
MAX_VERSION_PY_BYTES = 64 << 10

# O_NONBLOCK: opening a FIFO must not wait for a writer. O_NOCTTY: a terminal
# device must not become the controlling terminal.
_OPEN_FLAGS = (
    os.O_RDONLY
    | getattr(os, "O_NONBLOCK", 0)
    | getattr(os, "O_NOCTTY", 0)
    | getattr(os, "O_CLOEXEC", 0)
)


def read_small_file(path: str, limit: int) -> bytes:
    """The bytes of a regular file of at most ``limit`` bytes, else ``ConfigError``."""
    if not path:
        raise ConfigError("empty path")
    try:
        fd = os.open(path, _OPEN_FLAGS)
    except OSError as exc:
        raise ConfigError(exc.strerror or type(exc).__name__) from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise ConfigError(f"not a regular file ({_kind(info.st_mode)})")
        if info.st_size > limit:
            raise ConfigError(f"{info.st_size} bytes, more than the {limit} read")
        chunks = []
        left = limit + 1  # a file that grows past its stat() size is caught too
        while left > 0:
            chunk = os.read(fd, left)
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
    except OSError as exc:
        raise ConfigError(exc.strerror or type(exc).__name__) from None
    finally:
        os.close(fd)
    data = b"".join(chunks)
    if len(data) > limit:
        raise ConfigError(f"more than the {limit} bytes read")
    return data


def _kind(mode: int) -> str:
    for test, name in (
        (stat.S_ISDIR, "a directory"),
        (stat.S_ISFIFO, "a FIFO"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISSOCK, "a socket"),
    ):
        if test(mode):
            return name
    return "not a plain file"


# The TOML job config: bounded, parsed, never executed.


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
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover - exercised on 3.9 and 3.10
        import tomli as tomllib
    try:
        parsed: dict[str, Any] = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"invalid TOML: {exc}") from None
    except (RecursionError, ValueError, MemoryError) as exc:
        # A TOML parser may give up on pathological nesting or huge integers.
        raise ConfigError(f"unparsable TOML ({type(exc).__name__})") from None
    return parsed

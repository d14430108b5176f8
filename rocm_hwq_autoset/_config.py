"""torchtitan's job config as the model reads it: the fields, their values and
where each came from; the TOML job config, read through a bounded reader.

Precedence is torchtitan's: command line > config (a TOML file, or a config
object built by torchtitan) > defaults. Reading the command line is ``_argv``'s
job; this module merges what it found.
"""

from __future__ import annotations

import os
import stat
import sys
from collections.abc import Mapping  # loaded by the TOML parser anyway

TYPE_CHECKING = False  # not typing's: start-up imports as little as it can
if TYPE_CHECKING:
    from typing import Any, Union

    #: A field's value: ints for degrees, bools for flags, strings, string lists.
    Value = Union[bool, int, str, tuple[str, ...]]


class ConfigError(ValueError):
    """An input cannot be read as torchtitan would read it.

    ``reason`` says what is wrong, in one line; ``source`` names the input: a
    flag, a file, a field or a variable. ``str()`` is ``"source: reason"``, so no
    caller prefixes a name by hand.
    """

    def __init__(self, reason: str, source: str = "") -> None:
        super().__init__(reason)
        self.reason = reason
        self.source = source

    def __str__(self) -> str:
        return f"{self.source}: {self.reason}" if self.source else self.reason

    def within(self, source: str) -> ConfigError:
        """This error, named after ``source`` unless it names an input already."""
        return self if self.source else ConfigError(self.reason, source)


# The fields.

DEFAULT, CLI, TOML, CONFIG = "default", "CLI", "TOML", "config"

#: The fields the model reads: ``section.name`` (as in TOML and on the command
#: line; ``section.table.name`` for a field of a nested table) -> (kind,
#: torchtitan's default). Kinds: ``int``, ``bool``, ``str``, ``list`` (of
#: strings). The last four are read for the GPU streams PR #4032's model
#: leaves out (``_model.LEFT_OUT``), not for Q.
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
    # Async TP: the TOML era's field (``job_config.py``, ``Parallelism``), and
    # torchtitan 0.3.0's (``config/configs.py``, ``CompileConfig``).
    "parallelism.enable_async_tensor_parallel": ("bool", False),
    "compile.enable_async_tensor_parallel": ("bool", False),
    # graph_trainer's EP overlap (``GraphTrainerCompileConfig.ep_overlap``,
    # ``EpOverlapConfig.enabled``), which isolates the expert all-to-alls.
    "compile.ep_overlap.enabled": ("bool", False),
    # torchtitan 0.3.0's core trainer (``config/configs.py``, ``TrainingConfig``).
    "training.disable_cuda_graphs": ("bool", False),
}
#: The sections those fields live in.
SECTIONS = ("model", "parallelism", "compile", "training")


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

    def __repr__(self) -> str:
        return f"Setting(value={self.value!r}, source={self.source!r})"


_MISSING = object()


def merge(
    config: Mapping[str, Any] | None,
    overrides: Mapping[str, Value],
    where: str = "",
) -> dict[str, Setting]:
    """The fields from a nested config mapping (parsed TOML, read from
    ``where``) and CLI overrides.

    Tables, dotted keys and inline tables all parse to the same nesting.
    ``ConfigError`` names a field with a wrong type or out of range (as
    ``where: field``, or ``--field`` for a value from the command line). Keys
    no field has are :func:`unknown_keys`'s.
    """
    settings: dict[str, Setting] = {}
    for key, (_, default) in FIELDS.items():
        if key in overrides:
            settings[key] = Setting(overrides[key], CLI)
            continue
        found = _lookup(config, key, where)
        if found is _MISSING:
            settings[key] = Setting(default, DEFAULT)
        else:
            settings[key] = Setting(check_value(key, found, where), TOML)
    check_degrees(settings, where)
    return settings


def source_in(where: str, name: str) -> str:
    """How an error names a field of a config read from ``where``."""
    return f"{where}: {name}" if where else name


#: What a TOML value that is no table is: tested before ``Mapping``, whose
#: test is an ABC's, which costs a TOML launch about 0.35 M instructions the
#: first time it meets each type (issue #39).
_NOT_TABLES = (str, int, float, list, tuple)


def is_table(value: object) -> bool:
    """Whether ``value`` is a table of a config: a dict (what TOML parses to)
    or another mapping (a caller's), told apart at C speed from the values a
    TOML file holds."""
    return isinstance(value, dict) or (
        not isinstance(value, _NOT_TABLES) and isinstance(value, Mapping)
    )


def _lookup(config: Mapping[str, Any] | None, key: str, where: str) -> Any:
    """The value at ``key`` (its dotted path) in a parsed TOML config, or
    ``_MISSING``; ``ConfigError`` names a table on the path that is no table."""
    if config is None:
        return _MISSING
    *tables, name = key.split(".")
    found: Any = config
    for depth, table in enumerate(tables):
        found = found.get(table, _MISSING)
        if found is _MISSING:
            return _MISSING
        if not is_table(found):
            path = ".".join(tables[: depth + 1])
            raise ConfigError(
                f"a {type(found).__name__}, not a table", source_in(where, path)
            )
    return found.get(name, _MISSING)


_KIND_NAMES = {
    "int": "an integer",
    "bool": "true or false",
    "str": "a string",
    "list": "a list of strings",
}


def check_value(key: str, value: Any, where: str) -> Value:
    """``value`` if it has the field's type (bools are not integers here)."""
    kind = FIELDS[key][0]
    if kind == "list":
        ok = isinstance(value, (list, tuple)) and all(isinstance(x, str) for x in value)
    elif kind == "int":
        ok = isinstance(value, int) and not isinstance(value, bool)
    else:
        ok = isinstance(value, bool if kind == "bool" else str)
    if not ok:
        raise ConfigError(
            f"{_short(value)} is not {_KIND_NAMES[kind]}", source_in(where, key)
        )
    return tuple(value) if kind == "list" else value


def check_degrees(settings: dict[str, Setting], where: str) -> None:
    """torchtitan's ``ParallelDims`` rejects these; so do we, naming the field
    where its value came from (the command line's flag, or the config)."""
    for key, setting in settings.items():
        value = setting.value
        if not key.endswith("_degree") or not isinstance(value, int):
            continue
        shard = key.endswith("data_parallel_shard_degree")
        if value >= 1 or (shard and value == -1):
            continue
        allowed = "-1 or >= 1" if shard else ">= 1"
        source = f"--{key}" if setting.source == CLI else source_in(where, key)
        raise ConfigError(f"{value} must be {allowed}", source)


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


# torchtitan's own fields. Its TOML reader (``ConfigManager._dict_to_dataclass``)
# refuses a key no field has, since 0.2, and tyro an unknown flag; but its
# releases differ in their fields, so a key or flag unknown to the table below
# is said, never a reason to leave Q unset (a near miss of a field the model
# reads is: it would change Q without a word).

#: The release whose job config :data:`JOB_CONFIG` is: the TOML era's last.
TORCHTITAN_RELEASE = "0.2.2"
#: torchtitan 0.2.2's ``JobConfig`` (``torchtitan/config/job_config.py``):
#: each table by its dotted path (``""``: the top level, whose fields are the
#: sections; ``training.dataloader``: a nested one), with the names of its
#: fields, tables among them, in one string, each name between blanks: a
#: constant, which costs a start-up nothing to build (frozensets of the same
#: names cost a TOML launch 0.5 M instructions to import), asked by
#: :func:`is_torchtitans`. tests/unit/test_config.py holds it to that file
#: where it can be read. The fields the model reads beyond it (``FIELDS``: the
#: graph trainer's, a ``job.custom_config_module``'s in the TOML era) are known
#: too.
# fmt: off
JOB_CONFIG: dict[str, str] = {
    "": " job profiling metrics model optimizer lr_scheduler training "
        "parallelism checkpoint activation_checkpoint compile quantize comm "
        "memory_estimation fault_tolerance experimental validation debug ",
    "job": " config_file dump_folder description print_config save_config_file "
        "custom_config_module ",
    "profiling": " enable_profiling save_traces_folder profile_freq profiler_active "
        "profiler_warmup enable_memory_snapshot save_memory_snapshot_folder ",
    "metrics": " log_freq enable_tensorboard disable_color_printing save_tb_folder "
        "save_for_all_ranks enable_wandb ",
    "model": " name flavor hf_assets_path tokenizer_path converters "
        "print_after_conversion ",
    "optimizer": " name lr beta1 beta2 eps weight_decay implementation "
        "early_step_in_backward ",
    "lr_scheduler": " warmup_steps total_steps decay_ratio decay_type min_lr_factor ",
    "training": " dataset dataset_path local_batch_size global_batch_size seq_len "
        "max_norm steps enable_cpu_offload dtype mixed_precision_param "
        "mixed_precision_reduce gc_freq gc_debug dataloader ",
    "training.dataloader": " num_workers persistent_workers pin_memory "
        "prefetch_factor ",
    "parallelism": " data_parallel_replicate_degree data_parallel_shard_degree "
        "fsdp_reshard_after_forward tensor_parallel_degree "
        "disable_loss_parallel enable_async_tensor_parallel "
        "pipeline_parallel_degree module_fqns_per_model_part "
        "pipeline_parallel_first_stage_less_layers "
        "pipeline_parallel_last_stage_less_layers "
        "pipeline_parallel_layers_per_stage pipeline_parallel_schedule "
        "pipeline_parallel_schedule_csv pipeline_parallel_microbatch_size "
        "pipeline_parallel_expert_parallel_overlap context_parallel_degree "
        "context_parallel_load_balancer context_parallel_rotate_method "
        "expert_parallel_degree expert_tensor_parallel_degree "
        "expert_parallel_comm_backend ",
    "checkpoint": " enable enable_ft_dataloader_checkpoints folder interval "
        "initial_load_path initial_load_model_only initial_load_in_hf "
        "initial_load_in_hf_quantized last_save_model_only last_save_in_hf "
        "export_dtype async_mode keep_latest_k load_step exclude_from_loading "
        "enable_first_step_checkpoint create_seed_checkpoint load_only ",
    "activation_checkpoint": " mode selective_ac_option "
        "per_op_sac_force_recompute_mm_shapes_by_fqns early_stop memory_budget "
        "visualize_memory_budget_pareto preserve_rng_state determinism_check "
        "debug ",
    "compile": " enable components backend ",
    "quantize": " linear grouped_mm ",
    "quantize.linear": " float8 mx ",
    "quantize.linear.float8": " enable_fsdp_float8_all_gather "
        "precompute_float8_dynamic_scale_for_fsdp recipe_name filter_fqns "
        "emulate ",
    "quantize.linear.mx": " mxfp8_dim1_cast_kernel_choice recipe_name filter_fqns ",
    "quantize.grouped_mm": " float8 mx ",
    "quantize.grouped_mm.float8": " fqns ",
    "quantize.grouped_mm.mx": " recipe_name fqns ",
    "comm": " init_timeout_seconds train_timeout_seconds trace_buf_size "
        "save_traces_folder save_traces_file_prefix mode ",
    "memory_estimation": " enable disable_fake_mode ",
    "fault_tolerance": " enable process_group process_group_timeout_ms replica_id "
        "group_size min_replica_size semi_sync_method ",
    "experimental": " custom_import custom_args_module ",
    "validation": " enable dataset dataset_path local_batch_size seq_len freq steps "
        "dataloader ",
    "validation.dataloader": " num_workers persistent_workers pin_memory "
        "prefetch_factor ",
    "debug": " seed deterministic deterministic_warn_only moe_force_load_balance ",
}
# fmt: on


def is_torchtitans(name: str) -> bool:
    """Whether ``name`` (a dotted path; a section alone) is a field or table
    of :data:`JOB_CONFIG`."""
    table, _, key = name.rpartition(".")
    return holds_name(JOB_CONFIG.get(table, ""), key)


def holds_name(names: str, name: str) -> bool:
    """Whether ``names``, each between blanks (:data:`JOB_CONFIG`'s tables,
    torchrun's), hold ``name``: one substring search (a name with a blank is
    none)."""
    return " " not in name and f" {name} " in names


def never_a_typo(name: str) -> bool:
    """Whether ``name`` (``section.field``) is surely no typo of a field the
    model reads: it is one, or torchtitan's, or in a section of torchtitan's
    that has no field of ours. Only the others are searched
    (``_unknown.near_miss``), and only they import that search."""
    if name in FIELDS or is_torchtitans(name):
        return True
    section = name.partition(".")[0]
    return section not in SECTIONS and is_torchtitans(section)


#: The key of the TOML's ``[job]`` (and the flag's name) that names a module
#: of the user's whose ``JobConfig`` adds fields.
CUSTOM_CONFIG_MODULE = "custom_config_module"


def custom_module(config: Mapping[str, Any] | None) -> bool:
    """Whether a parsed TOML job config names a module that adds fields, as
    torchtitan 0.2.2's ``_maybe_add_custom_config`` reads it (after the
    command line's flag)."""
    if config is None:
        return False
    job: Any = config.get("job")
    return is_table(job) and bool(job.get(CUSTOM_CONFIG_MODULE))


def unknown_keys(config: Mapping[str, Any] | None) -> list[str]:
    """The keys of a parsed TOML job config that no field of
    :data:`JOB_CONFIG` nor of ours has, as dotted paths, in the file's order
    (an unknown table by its own path: its keys are not looked at). Each is
    said, or refused as a typo of a field the model reads, by
    ``_unknown.refusals``; by neither where a module adds fields
    (:func:`custom_module`)."""
    unknown: list[str] = []
    if config is not None:
        _walk(config, "", unknown)
    return unknown


def _walk(table: Mapping[str, Any], path: str, unknown: list[str]) -> None:
    """One table's keys (a nested table's in turn: ``[training.dataloader]``,
    ``[compile.ep_overlap]``): a substring search for each known key, nothing
    more."""
    known = JOB_CONFIG.get(path, "")
    for key, value in table.items():
        name = f"{path}.{key}" if path else key
        if holds_name(known, key):
            if name in JOB_CONFIG and is_table(value):
                _walk(value, name, unknown)
        elif name in FIELDS:
            continue
        elif is_table(value) and any(ours.startswith(name + ".") for ours in FIELDS):
            _walk(value, name, unknown)  # a table of ours alone ([compile.ep_overlap])
        else:
            unknown.append(name)


# Reading a small file without ever blocking, following a loop or filling memory:
# start-up code runs in every process, and a config path may name a FIFO, a
# device, a directory or a huge file.

#: Largest job config read: a bound no real config reaches, not a size a
#: config is expected to have. torchtitan's biggest shipped TOML is under
#: 4 KiB, but a config kept with its comments (a team's annotated template) was
#: 76 KB, and 64 KiB refused it: the hook then left Q unset for a job torchtitan
#: runs. 256 KiB still bounds the parse: tomllib spends ~5 s per MiB on the
#: worst adversarial but valid TOML (benchmarks/toml_limits.py), ~1.3 s here.
MAX_CONFIG_BYTES = 256 << 10

# O_NONBLOCK: opening a FIFO must not wait for a writer. O_NOCTTY: a terminal
# device must not become the controlling terminal.
_OPEN_FLAGS = (
    os.O_RDONLY
    | getattr(os, "O_NONBLOCK", 0)
    | getattr(os, "O_NOCTTY", 0)
    | getattr(os, "O_CLOEXEC", 0)
)


def read_small_file(path: str, limit: int, flags: int = 0) -> bytes:
    """The bytes of a regular file of at most ``limit`` bytes, else
    ``ConfigError`` (its source: the path). ``flags`` are added to the open."""
    if not path:
        raise ConfigError("empty path")
    try:
        fd = os.open(path, _OPEN_FLAGS | flags)
    except OSError as exc:
        raise ConfigError(exc.strerror or type(exc).__name__, path) from None
    try:
        return read_open(fd, limit)
    except ConfigError as exc:
        raise exc.within(path) from None
    finally:
        os.close(fd)


def read_open(fd: int, limit: int) -> bytes:
    """The bytes of the regular file open at ``fd``, at most ``limit``."""
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise ConfigError(f"not a regular file ({_kind(info.st_mode)})")
        if info.st_size > limit:
            raise ConfigError(f"{info.st_size} bytes, more than the {limit} read")
        # a file that grows past its stat() size is caught too
        return read_up_to(fd, limit)
    except OSError as exc:
        raise ConfigError(exc.strerror or type(exc).__name__) from None


def read_up_to(fd: int, limit: int) -> bytes:
    """What is left to read at ``fd``, at most ``limit`` bytes (a ``/proc`` or
    sysfs file, whose ``stat`` gives no size, too); ``ConfigError`` beyond, and
    ``OSError`` as the reads raise it."""
    chunks = []
    left = limit + 1
    while left > 0:
        chunk = os.read(fd, left)
        if not chunk:
            break
        chunks.append(chunk)
        left -= len(chunk)
    data = b"".join(chunks)
    if len(data) > limit:
        raise ConfigError(f"more than the {limit} bytes read")
    return data


def _kind(mode: int) -> str:
    for test, name in (
        (stat.S_ISDIR, "a directory"),
        (stat.S_ISFIFO, "a FIFO"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),  # a socket: open() refuses it (ENXIO)
    ):
        if test(mode):
            return name
    return "not a plain file"


# The TOML job config: bounded, parsed, never executed.


#: What a missing config path that starts with ``~`` is (torchtitan opens it
#: as written, as Python does): ``--job.config_file=~/job.toml``.
UNEXPANDED = (
    "the shell expands ~ only at the start of a word, not after '=': write"
    " --job.config_file ~/job.toml (a space, not '=') or $HOME/job.toml"
)


def load_toml(path: str) -> dict[str, Any]:
    """The parsed job config at ``path``; ``ConfigError`` (source: the path) if
    it is not one."""
    try:
        data = read_small_file(path, MAX_CONFIG_BYTES)
    except ConfigError as exc:
        if path.startswith("~") and not os.path.lexists(path):
            raise ConfigError(f"{exc.reason}; {UNEXPANDED}", path) from None
        raise
    try:
        return parse_toml(data, path)
    except ConfigError as exc:
        raise exc.within(path) from None


#: Most dots on one line. tomllib's time grows with the cube of a dotted key's
#: depth (40,000 levels: 30 s); 256 costs under a millisecond, and no job
#: config comes near it.
MAX_DOTS_PER_LINE = 256


#: What Windows editors put first in a UTF-8 file. torchtitan's reader
#: (``tomllib.load(open(path, "rb"))``, tomli before 3.11) refuses a file that
#: starts with it, at "line 1, column 1": so does the hook, naming it.
BOM = "\ufeff"


def parse_toml(data: bytes, path: str = "") -> dict[str, Any]:
    """``data`` parsed as torchtitan parses a job config; ``ConfigError``
    otherwise (``path``: the file, for a remedy that names it)."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise ConfigError("not UTF-8 text") from None
    # A line by line count only where the whole text holds that many (at C
    # speed: a job config's 30 lines cost a start-up 40 k instructions, #39).
    if text.count(".") > MAX_DOTS_PER_LINE:
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
        if text.startswith(BOM):
            import shlex

            raise ConfigError(
                f"invalid TOML: it starts with a UTF-8 byte-order mark, which"
                f" {tomllib.__name__} (torchtitan's TOML reader) refuses ({exc});"
                " save it without the mark: sed -i '1s/^\\xEF\\xBB\\xBF//'"
                f" {shlex.quote(path) if path else 'FILE'}"
            ) from None
        raise ConfigError(f"invalid TOML: {exc}") from None
    except (RecursionError, ValueError, MemoryError) as exc:
        # A TOML parser may give up on pathological nesting or huge integers.
        raise ConfigError(f"unparsable TOML ({type(exc).__name__})") from None
    return parsed

"""torchtitan's command line, read as the programs that read it do.

* Which program this process runs (``python -m M``, a script, torchrun), and,
  in a torchrun launcher, which program torchrun will run: torchrun's own
  options are parsed as ``torch.distributed.run``'s parser parses them, so a
  value of one of its options is never taken for the program.
* The launch and its form (:class:`Form`): a TOML job config
  (``--job.config_file``, the TOML era, in any program), or ``--module M
  --config FN`` (torchtitan >= 0.3.0) given to a torchtitan program.
* Overrides of the fields the model reads, parsed as tyro parses them:
  ``--section.field VALUE`` / ``=VALUE``, ``_`` and ``-`` alike in names,
  ``--no-``/``--no_`` for false, comma lists, the last flag wins.
* What torchtitan would refuse that the model does not read: a flag or TOML
  key no field of its job config has (:func:`unknown_inputs`).
"""

from __future__ import annotations

import os
import sys

from ._config import (
    CUSTOM_CONFIG_MODULE,
    FIELDS,
    ConfigError,
    custom_module,
    holds_name,
    is_torchtitans,
    never_a_typo,
    unknown_keys,
)
from ._environ import MODULE_FORM, NAME, TOML_FORM

TYPE_CHECKING = False  # not typing's: start-up imports as little as it can
if TYPE_CHECKING:
    from collections.abc import Callable, Mapping, Sequence
    from typing import Any, TypeVar

    from ._config import Value

    T = TypeVar("T")


# Which program.

TORCHTITAN = "torchtitan"
#: torchrun, as a console script or a module (``launch`` is its deprecated twin).
TORCHRUN_SCRIPT = "torchrun"
TORCHRUN_MODULES = ("torch.distributed.run", "torch.distributed.launch")
#: This package's own commands: the hook stays out of them.
OWN_SCRIPT = NAME
OWN_MODULE = "rocm_hwq_autoset"


def program(argv: Sequence[str], orig_argv: Sequence[str] = ()) -> tuple[str, str]:
    """What this process runs, from ``sys.argv`` as it is at interpreter start:
    ``("module", M)`` for ``python -m M``, ``("script", PATH)``, ``("command",
    "")`` for ``-c``, ``("", "")`` when unknown.

    At start-up ``sys.argv[0]`` is ``"-m"`` for a module; its name is in
    ``sys.orig_argv`` (3.10+) just before the arguments ``sys.argv`` holds.
    Python 3.9 has none: for this process's own ``sys.argv`` it is read from
    ``/proc/self/cmdline`` then (``_rocm_hwq_autoset_cmdline.command_line``).
    """
    first = argv[0] if argv else ""
    if first == "-m":
        if not orig_argv and list(argv) == list(getattr(sys, "argv", ())):
            orig_argv = _command_line(argv)
        at = len(orig_argv) - len(argv)
        token = orig_argv[at] if 0 <= at < len(orig_argv) else ""
        if token.startswith("-"):  # "-mM" or a cluster such as "-ImM"
            token = token[token.find("m") + 1 :]
        return "module", token
    if first == "-c":
        return "command", ""
    if not first or first == "-":
        return "", ""
    return "script", first


def _command_line(argv: Sequence[str]) -> Sequence[str]:
    """This process's command line where Python has no ``sys.orig_argv``
    (3.9), as the gate reads it too (one home, beside the package); none
    without that module."""
    try:
        from _rocm_hwq_autoset_cmdline import command_line
    except ImportError:
        return ()
    return command_line(argv) or ()


def is_torchtitan(kind: str, name: str) -> bool:
    """A torchtitan module, or a script inside a ``torchtitan`` package folder
    (``.../torchtitan/train.py``)."""
    if kind == "module":
        return name == TORCHTITAN or name.startswith(TORCHTITAN + ".")
    if kind == "script" and name.endswith(".py"):
        return TORCHTITAN in os.path.normpath(name).split(os.sep)[:-1]
    return False


def is_torchrun(kind: str, name: str) -> bool:
    if kind == "module":
        return name in TORCHRUN_MODULES
    return kind == "script" and os.path.basename(name) == TORCHRUN_SCRIPT


def is_own_command(kind: str, name: str) -> bool:
    if kind == "module":
        return name == OWN_MODULE or name.startswith(OWN_MODULE + ".")
    return kind == "script" and os.path.basename(name) == OWN_SCRIPT


#: torchrun's options that take no value (``torch.distributed.run``'s parser in
#: torch 2.13; ``--use-env`` is ``torch.distributed.launch``'s). Every other
#: option takes one, as every other one of torchrun's does. Like
#: :data:`TORCHRUN_OPTIONS`, names between blanks in one string, as
#: ``_config.JOB_CONFIG``'s tables (a constant: nothing to build at start-up),
#: asked by ``_config.holds_name``.
TORCHRUN_FLAGS = (
    " -h --help --standalone -m --module --no-python --no_python --use-env"
    " --use_env --run-path --run_path --virtual-local-rank --virtual_local_rank "
)
#: torchrun's options that take a value, for argparse's abbreviations.
TORCHRUN_OPTIONS = (
    " --nnodes --nproc-per-node --nproc_per_node --rdzv-backend --rdzv_backend"
    " --rdzv-endpoint --rdzv_endpoint --rdzv-id --rdzv_id --rdzv-conf --rdzv_conf"
    " --max-restarts --max_restarts --monitor-interval --monitor_interval"
    " --start-method --start_method --event-log-handler --event_log_handler"
    " --role --log-dir --log_dir -r --redirects -t --tee --local-ranks-filter"
    " --local_ranks_filter --duplicate-stdout-filters --duplicate_stdout_filters"
    " --duplicate-stderr-filters --duplicate_stderr_filters --node-rank"
    " --node_rank --master-addr --master_addr --master-port --master_port"
    " --local-addr --local_addr --logs-specs --logs_specs --numa-binding"
    " --numa_binding --signals-to-handle --signals_to_handle --shutdown-timeout"
    " --shutdown_timeout "
)
_MODULE_FLAGS = ("-m", "--module")
_NO_PYTHON_FLAGS = ("--no-python", "--no_python")


def torchrun_program(args: Sequence[str]) -> tuple[str, str, list[str]] | None:
    """The program torchrun runs and its arguments, from torchrun's own
    arguments (``sys.argv[1:]``), as its argparse parser reads them:
    ``(kind, name, args)`` with kind ``module``, ``script`` or ``executable``
    (``--no-python``); None where torchrun runs nothing (``--help``) or refuses
    its command line (an unknown or ambiguous option, a missing value)."""
    module = no_python = False
    i = 0
    while i < len(args):
        arg = args[i]
        i += 1
        if arg == "--":  # argparse: everything after it is positional
            return (
                _ran(args[i], args[i + 1 :], module, no_python)
                if i < len(args)
                else None
            )
        if not is_option(arg):
            return _ran(arg, args[i:], module, no_python)
        name, eq, _ = arg.partition("=")
        option = _torchrun_option(name if arg.startswith("--") else arg[:2])
        if option is None or option in ("-h", "--help"):
            return None
        attached = eq or (not arg.startswith("--") and len(arg) > 2)
        if holds_name(TORCHRUN_FLAGS, option):
            if attached:  # "-mX", "--standalone=1": not what torchrun takes
                return None
            module = module or option in _MODULE_FLAGS
            no_python = no_python or option in _NO_PYTHON_FLAGS
        elif not attached:  # "--opt VALUE"; "-rVALUE" and "--opt=VALUE" hold theirs
            if i >= len(args) or is_option(args[i]):
                return None  # argparse: "expected one argument"
            i += 1
    return None


def _torchrun_option(name: str) -> str | None:
    """The option ``name`` stands for: itself, or the one option string it
    abbreviates (argparse's ``allow_abbrev``; Python 3.11's argparse calls
    ``--nproc`` ambiguous, as it matches two spellings); None if none."""
    known = TORCHRUN_FLAGS + TORCHRUN_OPTIONS
    if holds_name(known, name):
        return name
    if not name.startswith("--"):
        return None
    matches = [o for o in known.split() if o.startswith(name)]
    return matches[0] if len(matches) == 1 else None


def _ran(
    target: str, rest: Sequence[str], module: bool, no_python: bool
) -> tuple[str, str, list[str]]:
    kind = "module" if module else "executable" if no_python else "script"
    return kind, target, list(rest)


# The launch.

CONFIG_FILE_FLAGS = ("--job.config_file", "--job.config-file")
MODULE_FLAG, CONFIG_FLAG = "--module", "--config"


class Form(str):
    """A launch form, equal to its name as the marker and ``--json`` give it
    (``job.config_file``, ``--module``): which flags make it, and for which
    programs; which of them open the start-up gate; how its config is named
    (a file, or a registry's module and function); whether it is evaluated in
    a child; how its failures are said. The hook, the decision, the wing and
    the commands ask it. A new form is a new instance in :data:`FORMS` (its
    name in ``_environ.FORMS``, its opening flags in the gate module)."""

    flags: tuple[str, ...]
    """The arguments that make it (alone or ``=VALUE``)."""
    opens: tuple[str, ...]
    """Those that open the start-up gate: a literal copy there
    (``tests/unit/test_gate.py`` holds it to these)."""
    torchtitan_only: bool
    """Made only for a torchtitan program (the gate: a command line naming
    torchtitan)."""
    config_file: Callable[[Sequence[str]], str | None] | None
    """The reader of its TOML job config's path, or None."""
    registry: Callable[[Sequence[str]], tuple[str, str]] | None
    """The reader of its registry's ``(module, config function)``, or None."""
    in_child: bool
    """Its config is Python that imports torch: evaluated in a child
    interpreter, whose launcher hands its workers the value and the inputs."""
    toolkit_passes: bool
    """``compile.passes`` names the TOML era's ``compiler_toolkit`` passes
    (``_model.read_inputs``)."""
    where: str
    """Said before a failure whose cause names no source."""

    def __new__(
        cls,
        name: str,
        flags: tuple[str, ...],
        *,
        opens: tuple[str, ...],
        torchtitan_only: bool = False,
        config_file: Callable[[Sequence[str]], str | None] | None = None,
        registry: Callable[[Sequence[str]], tuple[str, str]] | None = None,
        in_child: bool = False,
        toolkit_passes: bool = False,
        where: str = "",
    ) -> Form:
        self = super().__new__(cls, name)
        self.flags, self.opens = flags, opens
        self.torchtitan_only = torchtitan_only
        self.config_file, self.registry = config_file, registry
        self.in_child, self.toolkit_passes, self.where = in_child, toolkit_passes, where
        return self

    def made_in(self, args: Sequence[str], prog: tuple[str, str]) -> str | None:
        """The first argument of ``args`` that makes this form for program
        ``prog``, or None."""
        if self.torchtitan_only and not is_torchtitan(*prog):
            return None
        return next((a for a in args if _is_flag(a, self.flags)), None)


class Launch:
    """A torchtitan training launch: a TOML job config, or ``--module``/``--config``.

    Its arguments are read once, here, as torchtitan reads them: the job config
    file, the registry's module and config function, the overrides of the
    fields the model reads. A part torchtitan would refuse is kept as its
    ``ConfigError``, raised where that part is asked for: the decision asks in
    its own order (the switch, an explicit value and ROCm first)."""

    __slots__ = ("_config_file", "_overrides", "_registry", "args", "form",
                 "in_process", "program")  # fmt: skip

    def __init__(
        self,
        form: str,
        args: Sequence[str],
        in_process: bool,
        program: tuple[str, str] = ("module", "torchtitan.train"),
    ) -> None:
        self.form = form_named(form)
        """Its :class:`Form` (given as one, or by its name)."""
        self.args = tuple(args)
        """The training arguments (after the program where a launcher names it)."""
        self.in_process = in_process
        """Whether the training runs in this process (``python -m
        torchtitan.train``), not in workers it starts (torchrun)."""
        self.program = program
        """The program that runs the training, as :func:`program` names it
        (``("module", M)``, ``("script", PATH)`` ...): it decides where that
        interpreter imports from first."""
        file, registry = self.form.config_file, self.form.registry
        self._config_file = _read(file, args) if file else (None, None)
        self._registry = _read(registry, args) if registry else (None, None)
        self._overrides = _read(cli_overrides, args)

    @property
    def config_file(self) -> str | None:
        """The TOML job config a TOML launch reads (None: none, torchtitan's
        defaults); ``ConfigError`` names the flag without a value."""
        return _value(self._config_file)

    @property
    def registry(self) -> tuple[str, str]:
        """A ``--module`` launch's ``(module, config function)``; ``ConfigError``
        names a flag that is missing or has no value."""
        found = _value(self._registry)
        if found is None:
            raise ConfigError("a TOML launch names no --module/--config")
        return found

    @property
    def overrides(self) -> dict[str, Value]:
        """The values the command line gives the fields the model reads;
        ``ConfigError`` names a flag tyro would refuse."""
        found = _value(self._overrides)
        assert found is not None
        return found

    def __repr__(self) -> str:
        form = str(self.form)
        return f"Launch({form!r}, {self.args!r}, in_process={self.in_process})"


def find_launch(argv: Sequence[str], orig_argv: Sequence[str] = ()) -> Launch | None:
    """The launch this process makes, from its full ``sys.argv`` (and
    ``sys.orig_argv``), else None; the one function that turns a command line
    into a launch.

    A ``--job.config_file`` makes a TOML launch whatever the program (scripts of
    one's own called torchtitan's ``ConfigManager``). ``--module``/``--config``
    make a launch only where the program is torchtitan's: this process
    (``python -m torchtitan.train``, ``python .../torchtitan/train.py``) or the
    one torchrun will run.

    Both forms at once (``--module``/``--config`` to a torchtitan program and a
    ``--job.config_file``) are a ``ConfigError`` naming both flags: no torchtitan
    takes both (0.3.0 refuses ``--job.config_file``, the TOML era ``--module``).
    The hook, ``explain`` and ``doctor`` all come here, and all refuse it.
    """
    kind, name = program(argv, orig_argv)
    args = list(argv[1:])
    in_process = True
    if is_torchrun(kind, name):
        ran = torchrun_program(args)
        if ran is None:
            return None
        kind, name, args = ran
        in_process = False
    return launch_in(args, (kind, name), in_process)


def launch_in(
    args: Sequence[str],
    prog: tuple[str, str] = ("module", "torchtitan.train"),
    in_process: bool = True,
) -> Launch | None:
    """The launch that training arguments ``args`` make for a program that is
    torchtitan's or not, else None; the commands read their training arguments
    here too, as ``python -m torchtitan.train``'s. ``ConfigError`` for both
    forms at once (see :func:`find_launch`)."""
    made = [(form, arg) for form in FORMS
            for arg in [form.made_in(args, prog)] if arg is not None]  # fmt: skip
    if len(made) > 1:
        raise ConfigError(
            "two launch forms at once: torchtitan 0.3.0 takes --module/--config"
            " and refuses --job.config_file, the TOML era the reverse; give one",
            " and ".join(arg.partition("=")[0] for _, arg in reversed(made)),
        )
    return Launch(made[0][0], args, in_process, prog) if made else None


def _read(
    reader: Callable[[Sequence[str]], T], args: Sequence[str]
) -> tuple[T | None, ConfigError | None]:
    """A part of a launch's arguments as read: its value, or why torchtitan
    refuses it."""
    try:
        return reader(args), None
    except ConfigError as exc:
        return None, exc


def _value(read: tuple[T | None, ConfigError | None]) -> T | None:
    value, error = read
    if error is not None:
        raise error
    return value


def _is_flag(arg: str, flags: Sequence[str]) -> bool:
    """``arg`` is one of ``flags``, alone or as ``FLAG=VALUE``."""
    return arg.partition("=")[0] in flags


def config_file_arg(args: Sequence[str]) -> str | None:
    """The job config a TOML launch reads: the first ``--job.config_file``, as
    torchtitan's ``ConfigManager._maybe_load_toml`` picks it (``=PATH``, or the
    token after the flag, whatever it is); None without one (torchtitan's
    defaults). ``ConfigError`` names the flag when it has no value."""
    found = _first_flag(args, CONFIG_FILE_FLAGS)
    if found is None:
        return None
    flag, value = found
    if value is None:
        raise ConfigError("expects a value: the TOML job config", flag)
    return _path(flag, value)


def _first_flag(
    args: Sequence[str], flags: Sequence[str]
) -> tuple[str, str | None] | None:
    """The first of ``flags`` in ``args`` and its value, as torchtitan's
    ``ConfigManager`` reads one (``=VALUE``, or the token after the flag,
    whatever it is; None when the flag is last); None without one."""
    for i, arg in enumerate(args):
        key, eq, value = arg.partition("=")
        if eq and key in flags:
            return key, value
        if arg in flags:
            return arg, args[i + 1] if i + 1 < len(args) else None
    return None


def _path(flag: str, value: str) -> str:
    if not value:
        raise ConfigError("empty path", flag)
    return value


def module_args(args: Sequence[str]) -> tuple[str, str]:
    """``--module`` and ``--config`` as torchtitan's ``ConfigManager`` reads
    them (both required, the last of each wins); ``ConfigError`` names a missing
    one or one without a value, as torchtitan does."""
    found = {MODULE_FLAG: "", CONFIG_FLAG: ""}
    i = 0
    while i < len(args):
        key, eq, value = args[i].partition("=")
        if eq and key in found:
            found[key] = value
        elif args[i] in found:
            if i + 1 >= len(args):
                raise ConfigError("requires a value", args[i])
            found[args[i]] = args[i + 1]
            i += 1
        i += 1
    for flag, value in found.items():
        if not value:
            raise ConfigError(
                "is required (with a value); example: --module llama3"
                " --config llama3_debugmodel",
                flag,
            )
    return found[MODULE_FLAG], found[CONFIG_FLAG]


#: A TOML job config: the TOML era's torchtitan, any program.
TOML = Form(TOML_FORM, CONFIG_FILE_FLAGS, opens=CONFIG_FILE_FLAGS,
            config_file=config_file_arg, toolkit_passes=True)  # fmt: skip
#: torchtitan >= 0.3.0's config registry, for a torchtitan program.
MODULE = Form(MODULE_FORM, (MODULE_FLAG, CONFIG_FLAG), opens=(MODULE_FLAG,),
              torchtitan_only=True, registry=module_args, in_child=True,
              where="--module/--config: ")  # fmt: skip
#: The launch forms, in the order a command line is searched for them.
FORMS = (TOML, MODULE)
_BY_NAME = {str(form): form for form in FORMS}


def form_named(name: str) -> Form:
    """The form ``name`` names (a :class:`Form` is its own name); KeyError for
    none."""
    return _BY_NAME[name]


# Overrides of the fields the model reads.


def cli_overrides(args: Sequence[str]) -> dict[str, Value]:
    """The values the command line gives to the fields in ``FIELDS``.

    Other arguments pass untouched. ``ConfigError``, naming the flag, where tyro
    would make the launch fail for one of our fields (a flag with a value, a
    missing value, an integer Python's ``int()`` does not accept) or for a flag
    an edit or two away from one of them.
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
        field = _field_for(name.replace("-", "_"))
        if field is None:
            _refuse_near_miss(name)
            continue
        key, negated = field
        flag = f"--{name}"
        if FIELDS[key][0] == "bool":
            if has_inline or (i < len(args) and not is_option(args[i])):
                value = inline if has_inline else args[i]
                raise ConfigError(
                    f"is a flag and takes no value (got {value!r});"
                    f" use --{key} or --{_negation(key)}",
                    flag,
                )
            found[key] = not negated
            continue
        if has_inline:
            raw = inline
        elif i < len(args) and not is_option(args[i]):
            raw = args[i]
            i += 1
        else:
            raise ConfigError("expects a value", flag)
        stray = i < len(args) and not is_option(args[i])
        if stray and FIELDS[key][0] != "list":  # tyro takes one token for these
            raise ConfigError(
                f"takes one value; {args[i]!r} after {raw!r} is one too many"
                " (torchtitan refuses it)",
                flag,
            )
        found[key] = _parse(key, raw, flag)
    return found


def _field_for(name: str) -> tuple[str, bool] | None:
    """The field a normalized flag name sets, and whether it is a ``no_`` flag
    (tyro's ``no-`` stands before the last part: ``--compile.no-enable_passes``,
    ``--compile.ep-overlap.no-enabled``); None for a flag of no field of ours."""
    if name in FIELDS:
        return name, False
    section, _, rest = name.rpartition(".")
    key = f"{section}.{rest[3:]}"
    if rest.startswith("no_") and key in FIELDS and FIELDS[key][0] == "bool":
        return key, True
    return None


def _refuse_near_miss(name: str) -> None:
    """tyro refuses an option no field has; one a typo away from ours is said
    with the one it means."""
    meant = suggest_flag(f"--{name}")
    if meant is not None:
        raise ConfigError(
            f"not a torchtitan option; did you mean {meant}?", f"--{name}"
        )


def suggest_flag(flag: str) -> str | None:
    """The flag of ours that ``flag`` (``--section.field``, ``=VALUE`` or not)
    is an edit or two away from, or None."""
    name = flag.partition("=")[0][2:].replace("-", "_")
    if not flag.startswith("--") or "." not in name:
        return None
    section, _, rest = name.rpartition(".")
    positive = f"{section}.{rest[3:]}" if rest.startswith("no_") else name
    if never_a_typo(name) or never_a_typo(positive):
        return None  # no search: ours, or torchtitan's, or "no-" one of them
    from ._unknown import near_miss

    if positive != name:
        meant = near_miss(positive)
        if meant is not None and FIELDS[meant][0] == "bool":
            return f"--{_negation(meant)}"
    meant = near_miss(name)
    return None if meant is None else f"--{meant}"


def _negation(key: str) -> str:
    section, _, name = key.rpartition(".")
    return f"{section}.no-{name}"


def is_option(token: str) -> bool:
    """argparse's rule: a token starting with ``-`` is an option, unless it is
    ``-`` alone or looks like a negative number (``-2``, ``-2.5``, ``-.5``:
    argparse's ``^-\\d+$|^-\\d*\\.\\d+$``)."""
    if not token.startswith("-") or token == "-":
        return False
    whole, dot, fraction = token[1:].partition(".")
    if not dot:
        return not whole.isdecimal()
    return not (fraction.isdecimal() and (whole == "" or whole.isdecimal()))


def _parse(key: str, raw: str, flag: str) -> Value:
    kind = FIELDS[key][0]
    if kind == "int":
        try:
            return int(raw)  # tyro uses int(): "+2" is 2; "2.0" and "0x2" fail
        except ValueError:
            raise ConfigError(f"{raw!r} is not an integer", flag) from None
    if kind == "list":
        return tuple(raw.split(","))  # torchtitan's list[str] rule: one token, commas
    return raw


# What torchtitan refuses that the model does not read.

#: The flag that names a module of the user's whose ``JobConfig`` adds fields.
CUSTOM_CONFIG_FLAGS = (f"--job.{CUSTOM_CONFIG_MODULE}", "--job.custom-config-module")


def custom_config_module(args: Sequence[str]) -> str:
    """The module the command line names to add fields, as torchtitan 0.2.2's
    ``_maybe_add_custom_config`` reads it (the first flag; ``=VALUE`` or the
    token after it); ``""`` for none (the TOML's ``[job]`` may name one then)."""
    found = _first_flag(args, CUSTOM_CONFIG_FLAGS)
    return (found[1] or "") if found is not None else ""


def unknown_flags(args: Sequence[str]) -> list[str]:
    """The flags of ``args`` in a section of torchtitan's job config that no
    field of it (:data:`_config.JOB_CONFIG`) nor of ours has, as spelled, each
    once (``--parallelism.foo``); not one a typo away from ours, which
    :func:`cli_overrides` refuses."""
    found: list[str] = []
    for arg in args:
        if not arg.startswith("--"):
            continue
        flag = arg.partition("=")[0]
        name = flag[2:].replace("-", "_")
        section, dot, _ = name.partition(".")
        if not dot or not is_torchtitans(section) or _field_for(name) is not None:
            continue
        table, _, last = name.rpartition(".")
        if is_torchtitans(name) or (
            last.startswith("no_") and is_torchtitans(f"{table}.{last[3:]}")
        ):  # torchtitan's, or tyro's "--section.no-flag" for it
            continue
        if flag not in found and suggest_flag(flag) is None:
            found.append(flag)
    return found


def unknown_inputs(
    args: Sequence[str], config: Mapping[str, Any] | None, where: str
) -> tuple[ConfigError, ...]:
    """What torchtitan 0.2.2 refuses in a TOML launch that the model does not
    read: one ``ConfigError``, not raised, for the command line's unknown flags
    (:func:`unknown_flags`) and one for the config's unknown keys
    (``_config.unknown_keys``, read from ``where``), each naming them all
    (``_unknown.refusals``, imported only then); none where a module adds
    fields (``job.custom_config_module``, the command line's first, as
    torchtitan reads it). ``ConfigError`` raised for a key a typo away from a
    field the model reads."""
    flags = unknown_flags(args)
    keys = unknown_keys(config)
    if not (flags or keys) or custom_config_module(args) or custom_module(config):
        return ()
    from ._unknown import refusals  # only where a name is unknown

    return refusals(flags, keys, where)

"""torchtitan's config registry, read as torchtitan reads it: ``--module M
--config FN`` evaluated by torchtitan itself in the child, and its refusals
named by their real source. Imports torchtitan (and torch): only the child
runs this."""

from __future__ import annotations

import contextlib
import io
import re
import sys
from collections.abc import Sequence
from typing import Any

from .._api import from_object
from .._argv import (
    CONFIG_FLAG,
    MODULE,
    MODULE_FLAG,
    cli_overrides,
    module_args,
    suggest_flag,
)
from .._config import CLI, ConfigError, Setting
from .._model import Config, read_inputs

#: A list torchtitan puts in a message (the available config functions, the
#: supported modules) is shortened to its first few, with the count.
LIST_SHOWN = 5


def read_config(args: Sequence[str]) -> Config:
    """The model's inputs and every field for ``--module M --config FN
    [overrides]``, with the config built by torchtitan itself and read as PR
    #4032 reads it. Imports torchtitan (and torch): never call this in a
    training process. ``ConfigError`` says why torchtitan refused, naming the
    real source: the flag that gave a value, or the config function itself."""
    module, function = module_args(args)  # both flags, with values
    try:
        from torchtitan.config import (  # type: ignore[import-not-found,unused-ignore]
            ConfigManager,
        )
    except Exception as exc:
        raise ConfigError(
            f"torchtitan cannot be imported here ({type(exc).__name__}: {exc})"
        ) from None
    try:
        config = _parse(ConfigManager, args)
    except SystemExit as refused:  # tyro prints why in a box, then exits
        why = f"{refused}{_hint(args)}"
        if _overrides(args) and not _refuses(ConfigManager, module, function):
            raise ConfigError(f"torchtitan rejected the arguments: {why}") from None
        # The config function's own values: no argument of the user's is at fault.
        raise ConfigError(
            f"torchtitan refused the config: {why}", f"{CONFIG_FLAG} {function}"
        ) from None
    except Exception as exc:
        masked = _masked_import(exc, module)
        also = f"; the import that failed: {masked}" if masked else ""
        raise ConfigError(
            "torchtitan could not build the config"
            f" ({type(exc).__name__}: {shorten_lists(str(exc))}{also})"
        ) from None
    try:
        given = cli_overrides(args)
    except ConfigError:
        given = {}
    try:
        settings = from_object(config, {})
    except ConfigError as exc:  # "config: FIELD": say where the value came from
        key = exc.source.partition(": ")[2]
        source = _flag_for(args, key) if key in given else ""
        field = key or exc.source  # none: the object itself is no config
        where = f"{CONFIG_FLAG} {function}"
        raise ConfigError(
            exc.reason, source or (f"{where}: {field}" if field else where)
        ) from None
    for key in given:  # torchtitan applied the overrides: say they are the CLI's
        settings[key] = Setting(settings[key].value, CLI)
    moe = _has_moe(config)
    known = None if moe is None else (moe, "traverse")
    inputs = read_inputs(settings, known, toolkit_passes=MODULE.toolkit_passes,
                         dist_gemm=_has_dist_gemm(config))  # fmt: skip
    return Config(inputs, settings)


def _parse(manager: Any, args: Sequence[str]) -> Any:
    """``ConfigManager().parse_args(args)``; ``SystemExit(why)`` for tyro's
    refusal, with tyro's box read into one line."""
    said = io.StringIO()
    try:
        with contextlib.redirect_stderr(said):
            return manager().parse_args(list(args))
    except SystemExit:
        raise SystemExit(_why(said)) from None


def _overrides(args: Sequence[str]) -> bool:
    """Whether ``args`` hold anything beyond ``--module M --config FN``."""
    rest = list(args)
    for flag in (MODULE_FLAG, CONFIG_FLAG):
        for i, arg in enumerate(rest):
            if arg.partition("=")[0] == flag:
                del rest[i : i + (1 if "=" in arg else 2)]
                break
    return bool(rest)


def _refuses(manager: Any, module: str, function: str) -> bool:
    """Whether torchtitan refuses the config function alone, with no overrides."""
    try:
        _parse(manager, [MODULE_FLAG, module, CONFIG_FLAG, function])
    except SystemExit:
        return True
    except Exception:  # another failure: not the refusal at hand
        return False
    return False


def _flag_for(args: Sequence[str], key: str) -> str:
    """The command line's own spelling of the last flag that sets ``key``."""
    found = ""
    for arg in args:
        name = arg.partition("=")[0]
        if name.startswith("--") and name[2:].replace("-", "_") == key:
            found = name
    return found or f"--{key}"


#: Where torchtitan 0.3.0 looks for ``--module NAME``'s registry
#: (``ConfigManager._load_config_registry``).
REGISTRY_PREFIXES = (
    "torchtitan.models",
    "torchtitan.experiments",
    "torchtitan.experiments.rl.examples",
)


def _masked_import(exc: BaseException, module: str) -> str | None:
    """The import that really failed behind ``exc``, said as ``Type: message``:
    the first ``ImportError`` in its chain (``__cause__``, ``__context__``); or,
    for torchtitan's own "Cannot import ..." (raised after its loop, so its
    cause is gone), the first candidate registry that exists but cannot be
    imported, imported again here. None if none."""
    seen: set[int] = set()
    link = exc.__cause__ or exc.__context__
    while link is not None and id(link) not in seen:
        seen.add(id(link))
        if isinstance(link, ImportError):
            return f"{type(link).__name__}: {link}"
        link = link.__cause__ or link.__context__
    if not isinstance(exc, ImportError) or not str(exc).startswith("Cannot import"):
        return None
    import importlib

    candidates = [f"{module}.config_registry", module]
    if "." not in module:
        candidates = [
            f"{prefix}.{module}.config_registry" for prefix in REGISTRY_PREFIXES
        ]
    for candidate in candidates:
        try:
            with contextlib.redirect_stderr(io.StringIO()):
                importlib.import_module(candidate)
        except ModuleNotFoundError as inner:
            name = inner.name or ""
            if name and (candidate == name or candidate.startswith(name + ".")):
                continue  # the candidate itself is not there: torchtitan's own case
            return f"{type(inner).__name__}: {inner}"
        except Exception as inner:
            return f"{type(inner).__name__}: {inner}"
    return None


def _why(said: io.StringIO) -> str:
    """tyro's error, out of its box, on one line."""
    lines = said.getvalue().splitlines()
    boxed = []
    for line in lines:
        body = line.strip()
        if body.startswith("│") and body.endswith("│"):
            body = body.strip("│ ")
            if body and not body.strip("─"):
                break  # the rule before "For full helptext"
            boxed.append(body)
    return " ".join(" ".join(boxed or lines[-1:]).split()) or "no reason given"


def _hint(args: Sequence[str]) -> str:
    for arg in args:
        meant = suggest_flag(arg)
        if meant is not None:
            return f" (did you mean {meant} for {arg.partition('=')[0]}?)"
    return ""


_LIST = re.compile(r"\[('[^'\]]*'(?:, '[^'\]]*')*)\]")


def shorten_lists(text: str, shown: int = LIST_SHOWN) -> str:
    """``text`` with each Python list of strings longer than ``shown`` cut to
    its first ones and the count: ``['a', 'b', ... (19 in all)]``."""

    def cut(match: re.Match[str]) -> str:
        items = match.group(1).split(", ")
        if len(items) <= shown:
            return match.group(0)
        return "[" + ", ".join(items[:shown]) + f", ... ({len(items)} in all)]"

    return _LIST.sub(cut, text)


def _has_moe(config: object) -> bool | None:
    """True when ``config.model_spec.model.traverse(MoE.Config)`` yields anything."""
    model = getattr(getattr(config, "model_spec", None), "model", None)
    if model is None:
        return None
    try:
        from torchtitan.models.common.moe import (  # type: ignore[import-not-found,unused-ignore]
            MoE,
        )
    except Exception:
        return None
    return any(True for _ in model.traverse(MoE.Config))


#: torchtitan 0.3.0's dist-GEMM projections (``models/common/dist_gemm.py``),
#: which a model spec holds for ``tp_gemm_backend="dist_gemm"``: each calls
#: ``torch.ops.symm_mem``'s fused matmuls (``distributed/linear.py``).
DIST_GEMM_MODULE = "torchtitan.models.common.dist_gemm"
DIST_GEMM_CLASSES = (
    "AllGatherFusedQKVLinear", "RowParallelLinear", "AllGatherFusedFeedForward",
)  # fmt: skip


def _has_dist_gemm(config: object) -> bool:
    """True when ``config.model_spec.model`` holds a dist-GEMM projection
    (``traverse`` of each class's ``Config``). Where the module was not
    imported (a torchtitan without it, a model that never uses it), no config
    can hold one of its classes: nothing is imported to look."""
    model = getattr(getattr(config, "model_spec", None), "model", None)
    module = sys.modules.get(DIST_GEMM_MODULE)
    if model is None or module is None:
        return False
    classes = [getattr(getattr(module, name, None), "Config", None)
               for name in DIST_GEMM_CLASSES]  # fmt: skip
    return any(True for cls in classes if isinstance(cls, type)
               for _ in model.traverse(cls))  # fmt: skip

"""The environment variables the hook reads and writes, and what they mean."""

from __future__ import annotations

from collections.abc import Mapping

from ._errors import ConfigError

#: The HIP runtime flag we set (CLR default 4).
QUEUES = "GPU_MAX_HW_QUEUES"
#: ``0``/``false``/``off``/``no`` opt out; ``force`` skips ROCm detection;
#: unset, ``1``, ``auto`` (or anything else) is the normal behaviour.
SWITCH = "ROCM_HWQ_AUTOSET"
OFF_VALUES = ("0", "false", "off", "no")
FORCE_VALUE = "force"
#: ``quiet``: print nothing. ``verbose``: every rank prints, and says why it
#: did nothing. Default: one line per node (the launcher or ``LOCAL_RANK`` 0).
LOG = "ROCM_HWQ_AUTOSET_LOG"
#: Set beside ``GPU_MAX_HW_QUEUES`` as ``"<Q> <how>"``: a value this package
#: set (here or in a parent such as the torchrun launcher) is not explicit.
ORIGIN = "ROCM_HWQ_AUTOSET_ORIGIN"
#: The two ``<how>`` of ORIGIN: read from a TOML job config, or evaluated from
#: ``--module``/``--config`` in a child interpreter (never again in workers).
FROM_TOML = "job.config_file"
FROM_MODULE = "--module"


def switch(environ: Mapping[str, str]) -> str:
    """``off``, ``force`` or ``auto``."""
    value = environ.get(SWITCH, "").strip().lower()
    if value in OFF_VALUES:
        return "off"
    return "force" if value == FORCE_VALUE else "auto"


def explicit_queues(environ: Mapping[str, str]) -> str | None:
    """A ``GPU_MAX_HW_QUEUES`` someone else set, which always wins; else None.

    An empty value counts as unset: HIP reads it as its default.
    """
    value = environ.get(QUEUES, "")
    if not value or environ.get(ORIGIN, "").split(" ")[0] == value:
        return None
    return value


def origin(environ: Mapping[str, str]) -> str:
    """How this package set the current value (``job.config_file``, ...), or ``""``."""
    if explicit_queues(environ) is not None or not environ.get(QUEUES):
        return ""
    return environ.get(ORIGIN, "").partition(" ")[2]


def world_size(environ: Mapping[str, str]) -> int | None:
    """torchrun's ``WORLD_SIZE``, set in workers and absent in the launcher."""
    raw = environ.get("WORLD_SIZE")
    if raw is None:
        return None
    try:
        size = int(raw)
    except ValueError:
        size = 0
    if size < 1:
        raise ConfigError(f"WORLD_SIZE={raw!r} is not a positive integer")
    return size


def speaks(environ: Mapping[str, str]) -> bool:
    """Whether this process prints by default: once per node."""
    return environ.get("LOCAL_RANK", "0").strip() == "0"

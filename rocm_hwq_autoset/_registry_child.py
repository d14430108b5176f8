"""The ``--module`` child, child side: runs in a child interpreter (and in
``explain``), never in a training process.

torchtitan's current launch form, ``-m torchtitan.train --module M --config FN``
(pytorch/torchtitan #2386), names a Python function that returns the config:
reading it means importing torchtitan and torch, which starts HIP. So the
start-up hook runs ``python -m rocm_hwq_autoset._registry_child -- ARGS`` and
only that child imports torchtitan. Its protocol: exactly one JSON line on
stdout, ``{"queues": Q, "lanes": [...]}`` or ``{"error": "one line"}``; nothing
else reaches stdout or stderr, so a pipe the parent has not read yet never fills.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import signal
import sys
from collections.abc import Sequence

from . import _decision as env
from ._launch import CLI, ConfigError, Setting, cli_overrides, from_object
from ._model import Recommendation, inputs

#: How MoE is known in this form: PR #4032's own test.
MOE_TEST = "model_spec.model.traverse(MoE.Config)"


def evaluate(args: Sequence[str], world_size: int | None) -> Recommendation:
    """The recommendation for ``--module M --config FN [overrides]``, with the
    config built by torchtitan itself and read as PR #4032 reads it. Imports
    torchtitan (and torch): never call this in a training process."""
    try:
        from torchtitan.config import (  # type: ignore[import-not-found,unused-ignore]
            ConfigManager,
        )
    except Exception as exc:
        raise ConfigError(
            f"torchtitan cannot be imported here ({type(exc).__name__}: {exc})"
        ) from None
    said = io.StringIO()
    try:
        with contextlib.redirect_stderr(said):
            config = ConfigManager().parse_args(list(args))
    except SystemExit:  # tyro prints why in a box, then exits
        raise ConfigError(f"torchtitan rejected the arguments: {_why(said)}") from None
    except Exception as exc:
        raise ConfigError(
            f"torchtitan could not build the config ({type(exc).__name__}: {exc})"
        ) from None
    try:  # torchtitan applied the overrides; say which values came from the CLI
        overrides = cli_overrides(args)
    except ConfigError:
        overrides = {}
    settings = from_object(config, {})
    for key in overrides:
        settings[key] = Setting(settings[key].value, CLI)
    moe = _has_moe(config)
    job = inputs(settings, world_size, None if moe is None else (moe, "traverse"))
    return Recommendation(settings, job)


def _why(said: io.StringIO, limit: int = 240) -> str:
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
    words = " ".join(" ".join(boxed or lines[-1:]).split()) or "no reason given"
    return words if len(words) <= limit else words[: limit - 3] + "..."


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


def main(argv: Sequence[str]) -> int:
    """``[--world-size N] -- ARGS`` in; one JSON line out; exit status 0."""
    result = os.dup(1)
    quiet = os.open(os.devnull, os.O_WRONLY)
    os.dup2(quiet, 1)  # torchtitan's and torch's own output goes nowhere
    os.dup2(quiet, 2)
    args = list(argv)
    world_size = None
    if args[:1] == ["--world-size"]:
        world_size, args = int(args[1]), args[2:]
    if args[:1] == ["--"]:
        args = args[1:]
    try:
        # A safety net beside the parent's own timeout: a parent that never
        # waits (it exited, or never started a process) must not leave us hung.
        signal.alarm(int(env.timeout(os.environ)) + 1)
        rec = evaluate(args, world_size)
        doc: dict[str, object] = {"queues": rec.queues, "lanes": list(rec.lanes)}
    except ConfigError as exc:
        doc = {"error": str(exc)}
    except BaseException as exc:  # the parent turns this into one warning line
        doc = {"error": f"internal error ({type(exc).__name__}: {exc})"}
    os.write(result, (json.dumps(doc) + "\n").encode())
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

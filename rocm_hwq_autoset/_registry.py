"""torchtitan's current launch form: ``-m torchtitan.train --module M --config FN``.

The config is a Python function (pytorch/torchtitan #2386): reading it means
importing torchtitan and torch, which must never happen in the training process
before HIP starts. So the start-up hook runs ``rocm-hwq-autoset explain
--export`` in a child interpreter, once per launch, and only that child imports
torchtitan (:func:`evaluate`).
"""

from __future__ import annotations

import contextlib
import io
import os
import sys
from collections.abc import Mapping, Sequence
from typing import Any

from ._argv import flag_value
from ._errors import ConfigError

#: Seconds the child may take to import torchtitan and build the config.
DEFAULT_TIMEOUT = 120.0
TIMEOUT = "ROCM_HWQ_AUTOSET_TIMEOUT"
#: Set in the child: no hook there, and no GPU to start.
CHILD_ENVIRONMENT = {
    "ROCM_HWQ_AUTOSET": "0",
    "HIP_VISIBLE_DEVICES": "",
    "CUDA_VISIBLE_DEVICES": "",
}


def module_launch(args: Sequence[str]) -> bool:
    """Whether training arguments name a config by ``--module`` and ``--config``."""
    return flag_value(args, ("--module",)) is not None and (
        flag_value(args, ("--config",)) is not None
    )


def training_args(argv: Sequence[str], orig_argv: Sequence[str]) -> list[str] | None:
    """The training arguments of a ``torchtitan.*`` module launch with
    ``--module`` and ``--config``, else None (not such a launch).

    ``torchrun ... -m torchtitan.train ARGS`` names the module in ``argv``;
    ``python -m torchtitan.train ARGS`` only in ``sys.orig_argv`` (3.10+).
    """
    for i, arg in enumerate(argv):
        if arg.startswith("torchtitan."):
            args = list(argv[i + 1 :])
            break
    else:
        if not any(a.startswith("torchtitan.") for a in orig_argv):
            return None
        args = list(argv)
    return args if module_launch(args) else None


def evaluate_in_child(
    args: Sequence[str], environ: Mapping[str, str], world_size: int | None
) -> tuple[int, tuple[str, ...]]:
    """Q and the lanes from ``rocm-hwq-autoset explain --json ARGS`` run by this
    interpreter in a child, in this working directory (recipe modules outside
    torchtitan import). ``ConfigError`` on failure or timeout."""
    import json
    import signal
    import subprocess

    timeout = _timeout(environ)
    command = [sys.executable, "-m", "rocm_hwq_autoset", "explain", "--json"]
    if world_size is not None:
        command += ["--world-size", str(world_size)]
    env = {**environ, **CHILD_ENVIRONMENT}
    env.pop("GPU_MAX_HW_QUEUES", None)
    # Its own session, so a timeout ends the child and anything it started.
    child = subprocess.Popen(
        [*command, "--", *args],
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    try:
        out, err = child.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(child.pid, signal.SIGKILL)
        child.communicate()
        raise ConfigError(
            f"evaluating --module/--config took over {timeout:g} s ({TIMEOUT})"
        ) from None
    try:
        doc = json.loads(out) if child.returncode == 0 else {}
        return int(doc["queues"]), tuple(str(lane) for lane in doc["lanes"])
    except (ValueError, TypeError, KeyError):
        lines = err.decode(errors="replace").strip().splitlines()
        reason = lines[-1] if lines else f"exit status {child.returncode}"
        raise ConfigError(reason.removeprefix("rocm-hwq-autoset: error: ")) from None


def _timeout(environ: Mapping[str, str]) -> float:
    raw = environ.get(TIMEOUT, "")
    try:
        value = float(raw) if raw.strip() else DEFAULT_TIMEOUT
    except ValueError:
        raise ConfigError(f"{TIMEOUT}={raw!r} is not a number of seconds") from None
    if not value > 0:
        raise ConfigError(f"{TIMEOUT}={raw!r} must be > 0")
    return value


def evaluate(args: Sequence[str], world_size: int | None) -> Any:
    """The recommendation for ``--module M --config FN [overrides]``, with the
    config built by torchtitan itself and read as PR #4032 reads it. Imports
    torchtitan (and torch): never call this in a training process."""
    from ._api import recommend
    from ._argv import cli_overrides
    from ._config import CLI, Setting

    try:
        from torchtitan.config import (  # type: ignore[import-not-found,unused-ignore]
            ConfigManager,
        )
    except Exception as exc:
        raise ConfigError(
            f"--module/--config need torchtitan, which cannot be imported here"
            f" ({type(exc).__name__}: {exc})"
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
    rec = recommend(config, world_size=world_size, is_moe=_has_moe(config))
    try:  # sources: torchtitan applied the overrides; say which ones were CLI
        for key in cli_overrides(args):
            rec.settings[key] = Setting(rec.settings[key].value, CLI)
    except ConfigError:
        pass
    return rec


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

"""``explain``: the lanes, why each is (or is not) counted, Q, and what the hook
would do here. It formats the model's lane table; it derives nothing itself."""

from __future__ import annotations

import os
import textwrap
from typing import TYPE_CHECKING, TextIO

from .._config import ConfigError
from .._decision import unknown_warnings
from .._environ import (
    EXPORTED,
    HIP_DEFAULT_QUEUES,
    OFF,
    ORIGIN,
    QUEUES,
    QUIET,
    SWITCH,
    VERBOSE,
    QueuesSetting,
    log_level,
    switch,
)
from .._left_out import LEFT_OUT, verify_command
from .._model import FACT_KEYS
from ._common import (
    PROG,
    Option,
    Reading,
    add_options,
    hook_words,
    misspelt_variables,
    rocm,
    training_environ,
)
from .term import json_text, row, unbroken, write_stderr

if TYPE_CHECKING:
    import argparse
    from collections.abc import Mapping

    from .._config import Value
    from .._model import Recommendation

HELP = (
    "Show the lanes, their causes and Q for a training command line, and what"
    " the start-up hook would do here."
)
EXAMPLE = """\
examples:
  rocm-hwq-autoset explain --job.config_file job.toml \\
      --parallelism.expert_parallel_degree 2
  rocm-hwq-autoset explain --module graph_trainer.deepseek_v3 \\
      --config graph_trainer_deepseek_v3_16b
  # in a job script: on a failure the eval fails, and 'set -e' stops there
  eval "$(rocm-hwq-autoset explain --export --job.config_file job.toml)\""""
#: explain's own options (the dispatcher tells them from training arguments).
OPTIONS = (
    Option("--json", takes_value=False, exclusive="form", action="store_true",
           help="one JSON object on stdout"),
    Option("--export", takes_value=False, exclusive="form", action="store_true",
           help="print 'export GPU_MAX_HW_QUEUES=N' as the only line of stdout"
           " (N: the number HIP reads; with ROCM_HWQ_AUTOSET_ORIGIN, which tells"
           " a later export or launch that the value is the package's own), one"
           " summary line on stderr (the report with --verbose); an explicit"
           " GPU_MAX_HW_QUEUES is exported as HIP reads it; on any failure"
           " 'false' on stdout (its eval fails) and exit 2"),
    Option("--verbose", takes_value=False, action="store_true",
           help="with --export: the whole report on stderr"),
    Option("--world-size", takes_value=True, type=int, metavar="N",
           help="resolve data_parallel_shard_degree = -1 as torchtitan does for"
           " N ranks, as a worker does (default: WORLD_SIZE, if set)"),
    Option("--no-cache", takes_value=False, action="store_true",
           help="evaluate a --module/--config launch now, without the cache"),
)  # fmt: skip


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_options(parser, OPTIONS)


ALWAYS = {
    "compute": "always: the step's own kernels",
    "all_reduce": "always: PR #4032 counts one all-reduce stream",
}


def run(opts: argparse.Namespace, out: TextIO) -> int:
    """The report, the JSON or the export; ``ConfigError`` for what cannot be
    read (the dispatcher says it)."""
    for slip in misspelt_variables(os.environ):
        write_stderr(f"{PROG}: warning: {slip}\n")
    setting = QueuesSetting(os.environ)
    explicit = setting.explicit
    if opts.export and explicit is not None and setting.problem is not None:
        raise ConfigError(f"{setting.problem}; nothing to export")
    environ = training_environ(opts.world_size)
    # An exported value becomes explicit: the hook then leaves it, and no
    # background check runs. So it is never taken from the cache.
    reading = Reading(opts.training, environ, use_cache=not opts.no_cache,
                      fresh=opts.export)  # fmt: skip
    # The launch's own errors first (evaluating it, for --module), then what
    # the hook decides with that same evaluation.
    rec = reading.rec
    for warning in unknown_warnings(rec):  # what torchtitan refuses, said as the hook
        write_stderr(f"{PROG}: warning: {warning.message}\n")
    source = reading.source
    outcome = reading.hook_outcome()
    on_rocm, evidence = rocm()
    if opts.json:
        doc = as_json(rec, source=source)
        doc["evaluation"] = reading.found
        doc["environment"] = {
            "rocm": on_rocm,
            "rocm_evidence": evidence,
            "gpu_max_hw_queues": setting.text,
            "hip_reads": setting.hip,
            "set_by": setting.who,
            "explicit": explicit is not None,
            "opted_out": switch(os.environ)[0] == OFF,
            "hook": hook_words(outcome),
        }
        out.write(json_text(doc, indent=2) + "\n")
        return 0
    if reading.launch.config_file:  # a path: a row never breaks it at a blank
        source = unbroken(source)
    environment = {
        "ROCm": ("yes: " if on_rocm else "no: ") + evidence,
        QUEUES: setting.describe(),
        SWITCH: os.environ.get(SWITCH, "unset"),
        "the hook": hook_words(outcome),
    }
    if not opts.export:
        out.write(as_text(rec, source=source, found=reading.found,
                          environment=environment))  # fmt: skip
        return 0
    out.write(export_line(setting, rec) + "\n")
    level, _ = log_level(os.environ)
    if opts.verbose or level == VERBOSE:
        write_stderr(as_text(rec, source=source, found=reading.found,
                             environment=environment))  # fmt: skip
    elif level == QUIET:
        return 0
    summary = export_summary(rec, setting, reading.source, hook_off(os.environ))
    write_stderr(f"{PROG}: {summary}\n")
    return 0


def export_line(setting: QueuesSetting, rec: Recommendation) -> str:
    """The line ``eval`` runs: the number HIP reads, never the text (always
    safe to eval); the package's own value with its origin, so that a second
    export, or a launch, knows it is not the user's (was: taken for explicit,
    and kept, by the next ``eval "$(explain --export ...)"``)."""
    if setting.explicit is not None:
        return f"export {QUEUES}={setting.queues}"
    return f"export {QUEUES}={rec.queues} {ORIGIN}='{rec.queues} {EXPORTED}'"


def hook_off(environ: Mapping[str, str]) -> str | None:
    """Why the hook does nothing in this environment whatever the launch (the
    switch), or None: an export is then the only thing that sets the value."""
    mode, problem = switch(environ)
    if mode == OFF:
        return f"the hook is off here ({SWITCH}={environ[SWITCH]})"
    if problem is not None:
        return f"the hook does nothing here ({problem})"
    return None


def export_summary(
    rec: Recommendation, setting: QueuesSetting, source: str, off: str | None = None
) -> str:
    """The one line ``--export`` says on stderr when all went well; ``off``:
    why the hook does nothing here (:func:`hook_off`), said too."""
    also = f"; {off}" if off else ""
    if setting.explicit is not None:
        same = "the same" if setting.queues == rec.queues else str(rec.queues)
        return (
            f"exported {QUEUES}={setting.queues}: {setting.describe()} (the"
            f" training arguments give {same}){also}; --verbose for the report"
        )
    return (
        f"exported {QUEUES}={rec.queues} ({len(rec.lanes)} GPU streams:"
        f" {', '.join(rec.lanes)}) for {source}{also}; --verbose for the report"
    )


def toml_value(value: Value) -> str:
    """A value as it is written in a TOML job config."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, tuple):
        return "[" + ", ".join(f'"{v}"' for v in value) + "]"
    if isinstance(value, str):
        return f'"{value}"'
    return str(value)


def reasons(rec: Recommendation) -> dict[str, str]:
    """For every lane of the model, why it is counted, or why not: the facts
    the model says decided it, in words."""
    return {
        lane: "; ".join(fact(rec, name) for name in facts) or ALWAYS[lane]
        for lane, _, facts in rec.table
    }


def left_out_reasons(rec: Recommendation) -> dict[str, str]:
    """For every stream the model leaves out, why this config turns it on or
    not: its facts in words; where it is off with every fact on (a stream
    never made here), the stream's own reason too."""
    said = {}
    for lane, on, facts in rec.left_out:
        words = "; ".join(fact(rec, name) for name in facts)
        if not on and asked_for(rec, lane):  # every fact on, yet not made
            words += f"; {LEFT_OUT[lane][0]}"
        said[lane] = words
    return said


def asked_for(rec: Recommendation, lane: str) -> bool:
    """The config asks for a left-out stream: it is on here, or every fact of
    it is on and it is still not made here (the core trainer's capture
    stream, asked for by default, is made on NVIDIA only). A ``verify`` of
    the run's trace settles each: whether the torchtitan in use makes it, and
    whether the streams it shows fit Q."""
    on, facts = next((on, names) for name, on, names in rec.left_out if name == lane)
    return on or all(rec.facts[name] for name in facts)


def fact(rec: Recommendation, name: str) -> str:
    """One fact of the lane table, with the settings it read."""
    on = rec.facts[name]
    shown = [_show(rec, key) for key in FACT_KEYS[name]]
    if name == "fsdp":
        return f"FSDP {'on' if on else 'off'}: {shown[0]}{_resolution(rec)}"
    if name == "moe":
        return _moe(rec)
    if name == "cudagraph":
        keys = FACT_KEYS[name]
        # compile.passes (the TOML era's compiler_toolkit) only where it was set
        shown = [
            s for k, s in zip(keys, shown) if k != "compile.passes" or _given(rec, k)
        ]
        return f"cudagraph {'on' if on else 'off'}: " + ", ".join(shown)
    if name in ("expert", "tensor", "context") and not on:
        return f"{shown[0]}: no {name} parallelism"
    if name == "async_tp":
        # The era's field where one was set (the other era has none), else both.
        given = [k for k in FACT_KEYS[name] if _given(rec, k)]
        shown = [_show(rec, k) for k in given or FACT_KEYS[name]]
        return f"async TP {'on' if on else 'off'}: " + ", ".join(shown)
    if name == "dist_gemm":
        if on:
            return "the model has dist-GEMM projections (tp_gemm_backend='dist_gemm')"
        return "no dist-GEMM projections in the model"
    if name == "ep_isolation":
        isolated = "isolated" if on else "not isolated"
        return f"expert all-to-alls {isolated}: " + ", ".join(shown)
    if name == "trainer_cudagraph":
        return f"{shown[0]}: CUDA graphs {'asked for' if on else 'off'}"
    return shown[0]


def _show(rec: Recommendation, key: str) -> str:
    setting = rec.settings.get(key)
    if setting is None:
        return key
    return f"{key} = {toml_value(setting.value)} ({setting.source})"


def _given(rec: Recommendation, key: str) -> bool:
    """Whether a field was given (by the config or the arguments), not left
    at its default."""
    setting = rec.settings.get(key)
    return setting is not None and setting.source != "default"


def _resolution(rec: Recommendation) -> str:
    inputs = rec.inputs
    if inputs.dp_shard != -1:
        return ""
    if rec.dp_shard is None:
        return ", world size unknown (as in PR #4032)"
    parts = "*".join(
        str(d) for d in (inputs.dp_replicate, inputs.cp, inputs.tp, inputs.pp)
    )
    return f" resolves to {rec.dp_shard} = WORLD_SIZE // ({parts})"


def _moe(rec: Recommendation) -> str:
    """How MoE was decided: the child looked into the model (``--module``), or
    the model table and the expert degree did (a TOML launch). (``is_moe``, the
    API's way to give it, never reaches a command.)"""
    inputs = rec.inputs
    kind = "MoE" if inputs.moe else "dense"
    if inputs.moe_from == "traverse":
        has = "has" if inputs.moe else "has no"
        return f"the model {has} MoE layers (model_spec.model.traverse(MoE.Config))"
    name = rec.settings["model.name"].value
    flavor = rec.settings["model.flavor"].value
    label = f"model {name} ({flavor})"
    if inputs.moe_from == "table":
        return f"{label} is {kind}"
    if inputs.moe:
        return f"{label} is not in the model table: counted MoE by its expert degree"
    return f"{label} is not in the model table and has no expert parallelism: dense"


def as_text(
    rec: Recommendation,
    *,
    source: str,
    found: str | None,
    environment: dict[str, str],
) -> str:
    """The human report: lanes with their causes, Q, and what the hook would do."""
    why = reasons(rec)
    world = str(rec.world_size) if rec.world_size else "unknown (--world-size N)"
    out = [row("config", source)]
    if found:
        out.append(row("evaluation", found))
    out += [row("world size", world), "", "GPU streams counted:"]
    out += [row(lane, why[lane], indent=2) for lane in rec.lanes]
    absent = [lane for lane, counted, _ in rec.table if not counted]
    if absent:
        out += ["", "not counted:"]
        out += [row(lane, why[lane], indent=2) for lane in absent]
    out += [
        "",
        textwrap.fill(
            f"{QUEUES}={rec.queues}  ({len(rec.lanes)} streams, rounded up to"
            f" a power of two as PR #4032 does; HIP's default:"
            f" {HIP_DEFAULT_QUEUES})",
            79, subsequent_indent="  ",
        ),
        "",
        *left_out_text(rec),
        "in this environment:",
    ]  # fmt: skip
    out += [row(k, v, indent=2) for k, v in environment.items()]
    return "\n".join(out) + "\n"


def left_out_text(rec: Recommendation) -> list[str]:
    """The streams PR #4032's model leaves out, as rows: those this config
    turns on, each with why, why Q leaves it out and the ``verify`` command
    that settles it; then those it does not, with why not (and the ``verify``
    command for one it asks for that is not made here)."""
    why = left_out_reasons(rec)
    out = []
    if rec.left_out_lanes:
        out.append("on here, but not in Q (PR #4032's model leaves them out):")
        for lane in rec.left_out_lanes:
            out += [
                row(lane, why[lane], indent=2),
                row("", f"not counted: {LEFT_OUT[lane][0]}"),  # (no name: no indent)
                row("", "check: " + unbroken(verify_command(lane, rec.queues))),
            ]
        out.append("")
    off = [lane for lane, on, _ in rec.left_out if not on]
    if off:
        out.append("left out of PR #4032's model, and off here:")
        for lane in off:
            out.append(row(lane, why[lane], indent=2))
            if asked_for(rec, lane):
                check = "check: " + unbroken(verify_command(lane, rec.queues))
                out.append(row("", check))
        out.append("")
    return out


def as_json(rec: Recommendation, *, source: str) -> dict[str, object]:
    why = reasons(rec)
    why_left_out = left_out_reasons(rec)
    return {
        "queues": rec.queues,
        "lanes": list(rec.lanes),
        "streams": len(rec.lanes),
        "config": source,
        "world_size": rec.world_size,
        "dp_shard_resolved": rec.dp_shard,
        "inputs": rec.inputs.as_dict(),
        "facts": rec.facts,
        "table": [
            {
                "lane": lane,
                "counted": counted,
                "facts": list(facts),
                "why": why[lane],
            }
            for lane, counted, facts in rec.table
        ],
        "settings": {
            key: {"value": s.value, "source": s.source}
            for key, s in rec.settings.items()
        },
        "reasons": why,
        "unknown": [str(exc) for exc in rec.unknown],
        "left_out": list(rec.left_out_lanes),
        "left_out_table": [
            {
                "lane": lane,
                "on": on,
                "facts": list(facts),
                "why": why_left_out[lane],
                "not_counted": LEFT_OUT[lane][0],
                "asked_for": asked_for(rec, lane),
                "verify": (
                    verify_command(lane, rec.queues) if asked_for(rec, lane) else None
                ),
            }
            for lane, on, facts in rec.left_out
        ],
    }

"""Running a command in this process, as the CLI tests do."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from rocm_hwq_autoset._cli import main
from rocm_hwq_autoset._cli.explain import toml_value

PREFIX = "rocm-hwq-autoset: error: "


def exported(queues: int) -> str:
    """``explain --export``'s stdout for the package's own value: with its
    origin, so that a second export or a launch decides again (issue #37)."""
    return (
        f"export GPU_MAX_HW_QUEUES={queues}"
        f" ROCM_HWQ_AUTOSET_ORIGIN='{queues} explain --export'\n"
    )


def explain(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(["explain", *args])
    out, err = capsys.readouterr()
    return code, out, err


def explain_json(capsys: pytest.CaptureFixture[str], *args: str) -> dict[str, Any]:
    code, out, err = explain(capsys, "--json", *args)
    assert code == 0, err
    doc: dict[str, Any] = json.loads(out)
    return doc


def refused(capsys: pytest.CaptureFixture[str], *args: str) -> str:
    """The one error line of an ``explain`` that exits 2, without its prefix;
    nothing on stdout (``false`` for ``--export``: its ``eval`` fails)."""
    code, out, err = explain(capsys, *args)
    own = args[: args.index("--")] if "--" in args else args
    assert (code, out) == (2, "false\n" if "--export" in own else ""), err
    assert err.startswith(PREFIX) and err.count("\n") == 1, err
    return err[len(PREFIX) : -1]


def transcript(
    title: str, code: int, out: str, err: str, names: dict[str, str] | None = None
) -> str:
    """One case of a command's golden file (its wording pinned once, there): the
    case's title, exit status, stdout and stderr, each of ``names``' values (a
    temporary folder, the checkout) written as its key, so that the golden is
    the same on every machine."""
    text = f"== {title}\nexit {code}\n"
    for label, stream in (("stdout", out), ("stderr", err)):
        if stream:
            text += (
                f"--- {label}\n{stream}{'' if stream.endswith(chr(10)) else chr(10)}"
            )
    for name, value in sorted((names or {}).items(), key=lambda kv: -len(kv[1])):
        text = text.replace(value, name)
    return text + "\n"


def setting_said(doc: dict[str, Any], key: str) -> str:
    """A setting of the JSON as the reasons name it: its value and where from."""
    setting = doc["settings"][key]
    return f"{key} = {toml_value(setting['value'])} ({setting['source']})"


def case(
    monkeypatch: pytest.MonkeyPatch,
    env: dict[str, str],
    run: Callable[..., tuple[int, str, str]],
    command: str,
    *argv: str,
) -> tuple[str, int, str, str]:
    """A golden case: ``run(*argv)`` with ``env`` set for it alone; the command
    line as a shell would show it, and the exit status, stdout and stderr."""
    with monkeypatch.context() as patch:
        for name, value in env.items():
            patch.setenv(name, value)
        code, out, err = run(*argv)
    said = " ".join([*(f"{k}={v!r}" for k, v in env.items()), command, *argv])
    return said, code, out, err

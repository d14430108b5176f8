"""Every failure of every command, as the dispatcher answers it: one line on
stderr and exit 2, and on stdout what the caller reads (``{"error": ...}`` for
``--json``, ``false`` for ``--export``, else nothing); a stdout or stderr that
is full or closed gives no traceback."""

from __future__ import annotations

import errno
import io
import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from rocm_hwq_autoset._cli import _escape_what_cannot_be_printed, failure_output, main

from ..data import kernel, write_trace
from ..helpers import child_env
from .commands import PREFIX, exported

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = str(ROOT / "examples" / "deepseek_v3_16b.toml")

#: Command lines that fail, each with the start of its one error line. Usage
#: errors argparse finds, and those the dispatcher finds, alike.
FAILING = [
    (["explain", "--world-size", "x", "--job.config_file", EXAMPLE],
     "explain: argument --world-size: invalid int value: 'x'"),
    (["explain", "--jsno"],
     "explain: --jsno: unrecognized option; did you mean --json?"),
    (["explain", "--export", "--job.config_file", EXAMPLE],
     "explain: argument --export: not allowed with argument --json"),
    (["explain", "--job.config_file", EXAMPLE, "--world-size"],
     "explain: argument --world-size: expected one argument"),
    (["explain", "--job.config_file", "/nonexistent.toml"],
     "/nonexistent.toml: No such file or directory"),
    (["explain", "--world-size", "0"], "--world-size: 0 must be >= 1"),
    (["verify", "--queues", "x", "{trace}"],
     "verify: argument --queues: invalid int value: 'x'"),
    # Issue #37's hints: what was typed, and what torchtitan would make of it.
    (["explain", "--ep", "2"], "explain: --ep: unrecognized option; did you mean"
     " --parallelism.expert_parallel_degree?"),
    (["explain", "--dp-shard", "2"], "explain: --dp-shard: unrecognized option; did"
     " you mean --parallelism.data_parallel_shard_degree?"),
    (["explain", "--world-size", "--job.config_file", EXAMPLE],
     "explain: --world-size: expects a value, but --job.config_file follows it"),
    (["explain", "--job.config_file=~/no-such-job.toml"],
     "~/no-such-job.toml: No such file or directory; the shell expands ~ only at"
     " the start of a word, not after '=': write --job.config_file ~/job.toml"
     " (a space, not '=') or $HOME/job.toml"),
    (["explain", "--job.config_file", EXAMPLE, "--parallelism.tp", "2"],
     "--parallelism.tp: not a torchtitan option; did you mean"
     " --parallelism.tensor_parallel_degree?"),
    (["explain", "--job.config_file", EXAMPLE,
      "--parallelism.expert_parallel_degree", "2", "3"],
     "--parallelism.expert_parallel_degree: takes one value; '3' after '2' is one"
     " too many (torchtitan refuses it)"),
    (["explain", "--", "job.toml"], "explain: unexpected argument 'job.toml' after"
     " '--', where torchtitan takes no file alone (it refuses it); did you mean"
     " --job.config_file job.toml?"),
    (["verify", "--queues", "999999999999999999", "{trace}"],
     "--queues: 999999999999999999 is beyond C's int: no Q HIP reads"),
    (["verify", "--quees", "4", "{trace}"],
     "verify: --quees: unrecognized option; did you mean --queues?"),
    (["verify"], "verify needs at least one TRACE"),
]  # fmt: skip


def _filled(args: list[str], trace: str) -> list[str]:
    return [a.replace("{trace}", trace) for a in args]


@pytest.mark.parametrize(("args", "said"), FAILING, ids=lambda a: " ".join(a))
def test_every_json_failure_is_json(
    args: list[str], said: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Was: argparse's errors (a bad value, a missing one, two exclusive
    options) and the dispatcher's (an unknown option) printed usage and
    nothing on stdout, where a program reads JSON."""
    trace = write_trace(tmp_path / "t.json", [kernel(0, 1)])
    command, *rest = _filled(args, trace)
    code = main([command, "--json", *rest])
    out, err = capsys.readouterr()
    assert code == 2
    doc = json.loads(out)
    assert list(doc) == ["error"] and doc["error"].startswith(said.replace(
        "{trace}", trace)), doc  # fmt: skip
    assert err == f"{PREFIX}{doc['error']}\n"


@pytest.mark.parametrize(
    ("args", "said"),
    [case for case in FAILING if case[0][0] == "explain" and "--export" not in
     case[0]],
    ids=lambda a: " ".join(a),
)  # fmt: skip
def test_every_export_failure_makes_its_eval_fail(
    args: list[str], said: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """``false`` is the only line of stdout: ``eval "$(...)"`` fails with it."""
    code = main([args[0], "--export", *args[1:]])
    out, err = capsys.readouterr()
    assert (code, out) == (2, "false\n")
    assert err.startswith(PREFIX + said) and err.count("\n") == 1, err


def test_an_unknown_command_asked_for_json_answers_in_json(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["explian", "--json"]) == 2
    out, err = capsys.readouterr()
    said = json.loads(out)["error"].split(": ")  # argparse's words
    assert said[:2] == ["argument COMMAND", "invalid choice"] and "'explian'" in said[2]
    assert err.count("\n") == 1


def test_without_an_answer_a_usage_error_is_argparses(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """With nothing on stdout to answer it, argparse's usage and error line."""
    with pytest.raises(SystemExit) as stop:
        main(["explain", "--world-size", "x"])
    assert stop.value.code == 2
    out, err = capsys.readouterr()
    assert out == "" and err.startswith("usage: rocm-hwq-autoset explain ")


@pytest.mark.parametrize(
    ("args", "options", "answer"),
    [
        (["--json"], ["--json"], '{"error": "m"}'),
        (["--json=1"], ["--json"], '{"error": "m"}'),
        (["--export", "--json"], ["--json", "--export"], '{"error": "m"}'),
        (["--export"], ["--json", "--export"], "false"),
        (["--", "--json"], ["--json"], None),  # a training argument
        (["--json"], ["--queues"], None),  # not the command's: no answer
        (["x", "--json"], None, '{"error": "m"}'),  # no such command
        ([], ["--json"], None),
    ],
)
def test_the_answer_a_failure_gets_on_stdout(
    args: list[str], options: list[str] | None, answer: str | None
) -> None:
    form = failure_output(args, options)
    assert (form and form("m")) == answer


@pytest.mark.parametrize(
    "args", [["verify", "--export", "t.json"], ["doctor", "--export"],
             ["status", "--export", "--json"]]
)  # fmt: skip
def test_another_command_s_answer_form_is_not_this_one_s(
    args: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    """``--export`` is explain's: to another command it is an unknown option,
    refused with nothing on stdout for an ``eval`` to run (its ``--json`` is
    only ever its own: JSON where it has one)."""
    try:
        code = main(args)
    except SystemExit as stop:
        code = int(stop.code or 0)
    out, err = capsys.readouterr()
    assert code == 2 and err.count("\n") == 1 and "--export" in err
    if "--json" in args:  # status's own
        assert list(json.loads(out)) == ["error"]
    else:
        assert out == ""


# Real processes: their streams full, closed, or gone.


def _env(tmp_path: Path) -> dict[str, str]:
    return child_env(
        {
            "PATH": os.environ["PATH"],
            "PYTHONPATH": str(ROOT),
            "ROCM_HWQ_AUTOSET_CACHE_DIR": str(tmp_path / "cache"),
        }
    )


def _run(args: list[str], shell_tail: str, tmp_path: Path) -> tuple[int, str, str]:
    """``python -m rocm_hwq_autoset ARGS`` with bash's redirections."""
    env = _env(tmp_path)
    proc = subprocess.run(
        ["bash", "-c", f'"$@" {shell_tail}', "_", sys.executable, "-m",
         "rocm_hwq_autoset", *args],
        capture_output=True, text=True, env=env, timeout=120, cwd=tmp_path,
    )  # fmt: skip
    return proc.returncode, proc.stdout, proc.stderr


#: What each command says where stdout cannot take its answer: each wording, once.
STDOUT_SAID = {
    ">&-": "stdout is closed: the answer cannot be written",
    "> /dev/full": f"stdout: [Errno {errno.ENOSPC}] {os.strerror(errno.ENOSPC)}:"
    " the answer could not be written",
}
STDOUT_REFUSED = [
    (["explain", "--export", "--job.config_file", EXAMPLE], "> /dev/full"),
    (["explain", "--json", "--job.config_file", EXAMPLE], "> /dev/full"),
    (["explain", "--job.config_file", EXAMPLE], "> /dev/full"),
    (["doctor"], "> /dev/full"),
    (["explain", "--export", "--job.config_file", EXAMPLE], ">&-"),
    (["doctor"], ">&-"),
]


@pytest.mark.parametrize(("args", "redirect"), STDOUT_REFUSED,
                         ids=lambda a: " ".join(a))  # fmt: skip
def test_a_stdout_that_cannot_be_written_is_one_line(
    args: list[str], redirect: str, tmp_path: Path
) -> None:
    """Was: ``OSError: [Errno 28]`` (a full disk) and ``AttributeError:
    'NoneType' object has no attribute 'write'`` (stdout closed) tracebacks."""
    code, _, err = _run(args, redirect, tmp_path)
    assert code == 2
    assert err.count("\n") == 1 and err.startswith(PREFIX), err
    assert err == f"{PREFIX}{STDOUT_SAID[redirect]}\n"  # the wording: once, below


@pytest.mark.parametrize("redirect", ["2> /dev/full", "2>&-"])
def test_a_stderr_that_cannot_be_written_is_no_traceback(
    redirect: str, tmp_path: Path
) -> None:
    """The failure's line cannot be said; the status and stdout still tell."""
    args = ["explain", "--export", "--job.config_file", "/nonexistent.toml"]
    code, out, err = _run(args, redirect, tmp_path)
    assert (code, out, err) == (2, "false\n", "")
    ok = ["explain", "--export", "--job.config_file", EXAMPLE]
    assert _run(ok, redirect, tmp_path)[:2] == (0, exported(4))


def test_a_reader_that_went_away_is_still_no_error(tmp_path: Path) -> None:
    code, out, err = _run(["doctor"], "| head -c 0; exit ${PIPESTATUS[0]}", tmp_path)
    assert (code, out, err) == (0, "", "")


@pytest.mark.parametrize(("streams", "verdict"), [(3, 0), (5, 1)])
def test_verifys_status_is_its_verdict_whatever_the_reader_took(
    streams: int, verdict: int, tmp_path: Path
) -> None:
    """``verify --queues 4 t.json | head -c 0``: the reader is gone before the
    first line. Was: status 0 for a short trace whenever the pipe broke before
    the verdict was written (``| head -1``: 1 or 0 by chance)."""
    trace = write_trace(tmp_path / "t.json", [kernel(0, s) for s in range(streams)])
    tail = "| head -c 0; exit ${PIPESTATUS[0]}"
    assert _run(["verify", "--queues", "4", trace], tail, tmp_path) == (verdict, "", "")


# The line everyone writes in a job script.


def _shell(script: str, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    # the command, not a path that holds its name (a clone at .../rocm-hwq-autoset)
    command = f"{shlex.quote(sys.executable)} -m rocm_hwq_autoset explain"
    env = _env(tmp_path)
    return subprocess.run(
        ["bash", "-c", script.replace("rocm-hwq-autoset explain", command)],
        capture_output=True, text=True, env=env, timeout=120, cwd=tmp_path,
    )  # fmt: skip


@pytest.mark.parametrize("config", ["missing.toml", EXAMPLE])
def test_eval_of_an_export_stops_a_strict_script_on_failure(
    config: str, tmp_path: Path
) -> None:
    """Was: ``eval "$(... --export ...)"`` went on with the value unset and
    status 0: an empty stdout evals to nothing."""
    proc = _shell(
        'set -euo pipefail; eval "$(rocm-hwq-autoset explain --export'
        f' --job.config_file {shlex.quote(config)})";'
        " echo reached Q=$GPU_MAX_HW_QUEUES",
        tmp_path,
    )
    if config == EXAMPLE:
        assert (proc.returncode, proc.stdout) == (0, "reached Q=4\n"), proc.stderr
        return
    assert proc.returncode == 1 and proc.stdout == "", proc.stdout
    assert proc.stderr == f"{PREFIX}missing.toml: {os.strerror(errno.ENOENT)}\n"


def test_eval_of_a_failed_export_leaves_an_interactive_shell_alive(
    tmp_path: Path,
) -> None:
    """Without ``set -e`` the shell goes on: the ``eval`` fails (status 1), the
    variable stays as it was; nothing exits the shell."""
    proc = _shell(
        'export GPU_MAX_HW_QUEUES=2; eval "$(rocm-hwq-autoset explain --export'
        ' --job.config_file missing.toml)"; echo status $? Q=$GPU_MAX_HW_QUEUES',
        tmp_path,
    )
    assert (proc.returncode, proc.stdout) == (0, "status 1 Q=2\n"), proc.stderr


def test_a_second_export_in_one_shell_is_decided_again(tmp_path: Path) -> None:
    """Issue #37: ``eval "$(explain --export ...)"`` twice in one shell, the
    second for a config that needs 8: was 4 kept, the first export taken for
    an explicit value. Its origin says it is the package's own."""
    ep2 = ["--parallelism.expert_parallel_degree", "2",
           "--compile.enable_fsdp_ag_rs_overlap"]  # fmt: skip
    export = (
        f"rocm-hwq-autoset explain --export --job.config_file {shlex.quote(EXAMPLE)}"
    )
    proc = _shell(
        f'set -eu; eval "$({export})"; eval "$({export} {" ".join(ep2)})";'
        " echo Q=$GPU_MAX_HW_QUEUES",
        tmp_path,
    )
    assert (proc.returncode, proc.stdout) == (0, "Q=8\n"), proc.stderr


class _NoFileno:
    """A stream that has no descriptor at all."""


@pytest.mark.parametrize(
    "stream", ["no fileno", "StringIO", "closed", "bad descriptor", "None"]
)
def test_discarding_a_stream_never_raises(stream: str, tmp_path: Path) -> None:
    """Whatever the stream (capsys's, a closed file, a descriptor gone), what
    is left in it goes nowhere, or nothing happens: never an exception."""
    import io

    from rocm_hwq_autoset._cli.term import discard

    if stream == "closed":
        closed = open(tmp_path / "f", "w")  # noqa: SIM115
        closed.close()
        discard(closed)  # ValueError: I/O operation on closed file
    elif stream == "bad descriptor":

        class Gone(io.StringIO):
            def fileno(self) -> int:
                return 1_000_000  # dup2 onto it: EBADF

        discard(Gone())
    elif stream == "StringIO":
        discard(io.StringIO())  # io.UnsupportedOperation
    elif stream == "None":
        discard(None)
    else:
        discard(_NoFileno())  # type: ignore[arg-type]


def test_only_a_strict_stream_is_made_to_escape() -> None:
    """A standard stream whose encoding may refuse a path (``errors="strict"``)
    is set to escape; one that already says otherwise is left as it is, and so
    is one that cannot be set (a test's, an embedder's)."""

    class Stream:
        def __init__(self, errors: str | None) -> None:
            if errors is not None:
                self.errors = errors
            self.calls: list[dict[str, str]] = []

        def reconfigure(self, **changes: str) -> None:
            self.calls.append(changes)

    strict, lenient, unsaid = Stream("strict"), Stream("surrogateescape"), Stream(None)
    for stream in (strict, lenient, unsaid, io.StringIO(), object()):
        _escape_what_cannot_be_printed(stream)
    assert strict.calls == [{"errors": "backslashreplace"}]
    assert lenient.calls == unsaid.calls == []

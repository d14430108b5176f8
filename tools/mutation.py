"""Mutation testing of the package with the fast tests (docs/mutation.md).

    python tools/mutation.py run [--workers N] [--relearn] [MODULE ...]
    python tools/mutation.py run --changed [REV]
    python tools/mutation.py run --resume
    python tools/mutation.py run --again [MODULE ...]
    python tools/mutation.py report [--check] [--diffs] [--stubs]
    python tools/mutation.py equivalents

``run`` mutates the package with mutmut (``pip install -e '.[test,mutation]'``;
its settings are ``[tool.mutmut]`` in pyproject.toml) and runs ``tests/unit``,
``tests/cli`` and ``tests/evaluation`` against every mutant of the package, or of
the modules named (``_decision``, ``_cli.verify``, ``__init__`` ...), or of the
modules changed since REV (default ``HEAD``: the working tree's changes). Then it
reports.
``--again`` (after adding tests or changing code) tests, with the current tests,
only the mutants of functions that changed since the last run and those the
last run left alive: mutmut keeps the results of functions whose code did not
change.

``report`` reads the results in ``mutants/`` (of the last run of each module):
per module, the mutants, how many the tests killed, how many are alive (survived,
or no test ran the code), how many of those this file lists as equivalent
(:data:`EQUIVALENT`: a change no user could tell, with the reason), and the kill
rate, killed / (mutants - equivalent). A mutant that made the tests time out or
crash counts as killed. ``--diffs`` prints each mutant left alive and not listed;
``--stubs`` prints them as entries for :data:`EQUIVALENT`, to fill in only after
deciding that no test can tell them apart; ``--check`` exits 1 when the package,
or a module of the start-up path, is below :data:`TARGET`. ``equivalents`` prints
the list as a Markdown table (docs/mutation.md shows it).

mutmut runs each mutant in a process forked from its own; ``mutation_hooks.py``,
copied into ``mutants/`` with a ``sitecustomize.py`` that loads it, makes tests
that fork or start interpreters count too (see its docstring).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
from datetime import datetime
from pathlib import Path
from typing import Any, NamedTuple

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = "rocm_hwq_autoset"
MUTANTS = ROOT / "mutants"
#: The modules a TOML launch imports at interpreter start (docs/design.md).
STARTUP = (
    "__init__", "_hook", "_decision", "_environ", "_argv", "_config", "_model", "_rocm",
)  # fmt: skip
#: The least kill rate, per start-up module and overall.
TARGET = 0.90

#: mutmut's exit codes (``mutmut.stats.status_by_exit_code``) that mean the
#: tests noticed: they failed, timed out, or the process crashed.
KILLED = {1: "killed", 3: "killed", 36: "timeout", -24: "timeout", 24: "timeout",
          152: "timeout", 255: "timeout", -11: "crashed", -9: "crashed"}  # fmt: skip
#: No test ran the mutated code.
NO_TESTS = {5, 33}


class Equivalent(NamedTuple):
    """A mutant no test can kill because no user could tell it from the code: in
    ``module``, function ``function`` (``Class.method`` for a method), the line
    ``before`` becomes ``after`` (both stripped, as ``report --diffs`` shows
    them)."""

    module: str
    function: str
    before: str
    after: str
    why: str


#: Mutants left alive on purpose, each with the reason no user could tell it
#: from the code. Matched by module, function and the changed line, so they stay
#: listed when other code moves.
EQUIVALENT: list[Equivalent] = [
    # The start-up path.
    Equivalent(
        "_argv",
        "torchrun_program",
        "module = no_python = False",
        "module = no_python = None",
        "Both are only tested for truth.",
    ),
    Equivalent(
        "_argv",
        "program",
        'token = orig_argv[at] if 0 <= at < len(orig_argv) else ""',
        'token = orig_argv[at] if 1 <= at < len(orig_argv) else ""',
        "at = len(orig_argv) - len(argv) is negative without sys.orig_argv"
        " (Python 3.9) and otherwise at least 2: the interpreter and -m come"
        " before the arguments.",
    ),
    Equivalent(
        "_argv",
        "program",
        'token = orig_argv[at] if 0 <= at < len(orig_argv) else ""',
        'token = orig_argv[at] if 0 < at < len(orig_argv) else ""',
        "As above: at is never 0.",
    ),
    Equivalent(
        "_argv",
        "program",
        'token = orig_argv[at] if 0 <= at < len(orig_argv) else ""',
        'token = orig_argv[at] if 0 <= at <= len(orig_argv) else ""',
        "argv holds at least '-m' here, so at < len(orig_argv) always.",
    ),
    Equivalent(
        "_argv",
        "program",
        'if not orig_argv and list(argv) == list(getattr(sys, "argv", ())):',
        'if not orig_argv and list(argv) == list(getattr(sys, "argv", None)):',
        "sys.argv always exists since Python 3.8 (PEP 587 sets it, [''] at"
        " least): the default is never used.",
    ),
    Equivalent(
        "_argv",
        "program",
        'if not orig_argv and list(argv) == list(getattr(sys, "argv", ())):',
        'if not orig_argv and list(argv) == list(getattr(sys, "argv", )):',
        "As above.",
    ),
    Equivalent(
        "_config",
        "_kind",
        'return "not a plain file"',
        'return "XXnot a plain fileXX"',
        "Unreachable on Linux: open() succeeds only on regular files,"
        " directories, FIFOs and devices, each named above (a socket is"
        " refused with ENXIO).",
    ),
    Equivalent(
        "_config",
        "_kind",
        'return "not a plain file"',
        'return "NOT A PLAIN FILE"',
        "As above: unreachable.",
    ),
    Equivalent(
        "_config",
        "parse_toml",
        "if sys.version_info >= (3, 11):",
        "if sys.version_info > (3, 11):",
        "sys.version_info has five fields: on any 3.11.x it is greater than"
        " (3, 11) too.",
    ),
    Equivalent(
        "_config",
        "parse_toml",
        'text = data.decode("utf-8")',
        'text = data.decode("UTF-8")',
        "Codec names are case-insensitive.",
    ),
    Equivalent(
        "_rocm",
        "torch_hip_version",
        '"utf-8", "replace"',
        '"UTF-8", "replace"',
        "Codec names are case-insensitive.",
    ),
    Equivalent(
        "_config",
        "read_up_to",
        "while left > 0:",
        "while left >= 0:",
        "With nothing left to read, os.read(fd, 0) returns b'' and the loop"
        " ends as before: no more bytes are read.",
    ),
    Equivalent(
        "_config",
        "read_up_to",
        "while left > 0:",
        "while left > 1:",
        "A regular file gives every byte asked for, and so do /proc's cmdline"
        " and environ (the kernel copies page after page into one read): left"
        " goes from limit + 1 straight to 0, or the file ends first.",
    ),
    Equivalent(
        "_config",
        "read_up_to",
        'data = b"".join(chunks)',
        'data = b"XXXX".join(chunks)',
        "A regular file, and /proc's cmdline and environ, give every byte"
        " asked for in one read until their end: there is one chunk.",
    ),
    Equivalent(
        "_config",
        "read_open",
        "raise ConfigError(exc.strerror or type(exc).__name__) from None",
        "raise ConfigError(exc.strerror or type(None).__name__) from None",
        "os.fstat and os.read raise OSError with its strerror set: the"
        " fallback is never used.",
    ),
    Equivalent(
        "_config",
        "read_small_file",
        "raise ConfigError(exc.strerror or type(exc).__name__, path) from None",
        "raise ConfigError(exc.strerror or type(None).__name__, path) from None",
        "os.open and os.fstat raise OSError with its strerror set: the"
        " fallback is never used.",
    ),
    Equivalent(
        "_environ",
        "marker",
        'value, _, marked = environ.get(ORIGIN, "").partition(" ")',
        'value, _, marked = environ.get(ORIGIN, "XXXX").partition(" ")',
        "Unset reads as '' or 'XXXX': neither names a form, so no marker.",
    ),
    Equivalent(
        "_config",
        "_walk",
        'known = JOB_CONFIG.get(path, "")',
        'known = JOB_CONFIG.get(path, "XXXX")',
        "Neither holds a blank, so neither holds a name between blanks: a"
        " table JOB_CONFIG does not have knows no key either way.",
    ),
    Equivalent(
        "_config",
        "is_torchtitans",
        'return holds_name(JOB_CONFIG.get(table, ""), key)',
        'return holds_name(JOB_CONFIG.get(table, "XXXX"), key)',
        "As above: a table JOB_CONFIG does not have holds no name either way.",
    ),
    Equivalent(
        "_unknown",
        "_derive_shorthands",
        'section, _, name = ours.rpartition(".")',
        'section, _, name = ours.partition(".")',
        "They differ only for a field with two dots (compile.ep_overlap.enabled),"
        " which is no parallel degree: skipped either way.",
    ),
    Equivalent(
        "_unknown",
        "_derive_shorthands",
        'short += "".join(f"_{w}" for w in words[at + 1 : -1])',
        'short += "XXXX".join(f"_{w}" for w in words[at + 1 : -1])',
        "No degree of ours has two words between 'parallel' and 'degree'"
        " (data_parallel_shard_degree: one): nothing is joined.",
    ),
    Equivalent(
        "_unknown",
        "_derive_shorthands",
        "shared.add(each)",
        "shared.add(None)",
        "No two of today's degrees share a shorthand (dp_shard, dp_replicate:"
        " each its own), so none is ever shared; the rule is kept for a field"
        " to come.",
    ),
    Equivalent(
        "_decision",
        "recommend_launch",
        'unknown = unknown_inputs(launch.args, toml, path or "")',
        'unknown = unknown_inputs(launch.args, toml, path or "XXXX")',
        "The place names a config's keys; without a config file (path None)"
        " there are none to name.",
    ),
    Equivalent(
        "_decision",
        "recommend_launch",
        'settings = merge(toml, overrides, path or "")',
        'settings = merge(toml, overrides, path or "XXXX")',
        "Without a config file every value is a default (each in range) or a"
        " flag's, which an error names by its flag: the place is never named.",
    ),
    Equivalent(
        "_decision",
        "recommend_launch",
        "inputs = read_inputs(settings, toolkit_passes=launch.form.toolkit_passes)",
        "inputs = read_inputs(settings, )",
        "Only a TOML launch reaches this line (a --module one returned above),"
        " and its form's toolkit_passes is True, read_inputs' default.",
    ),
    Equivalent(
        "_decision",
        "fit",
        "text = cut_middle(text, max(room, 0))",
        "text = cut_middle(text, max(room, 1))",
        "cut_middle keeps max(room - 3, 0) characters of the text: none for a"
        " room of 0 or of 1 alike, so '...' either way.",
    ),
    Equivalent(
        "_hook",
        "write_line",
        "fd = -1",
        "fd = -2",
        "Any negative number stands for no descriptor: only fd < 0 reads it.",
    ),
    Equivalent(
        "_hook",
        "write_line",
        'data = text.encode(stream.encoding or "utf-8", "backslashreplace")',
        'data = text.encode(stream.encoding or "UTF-8", "backslashreplace")',
        "Codec names are case-insensitive.",
    ),
    Equivalent(
        "_decision",
        "left_out_lines",
        "MAX_LINE - len(PREFIX),",
        "MAX_LINE + len(PREFIX),",
        "The lines are made of constants (LEFT_OUT's texts, a one-digit Q):"
        " the longest is 334 characters, under either limit, so none is cut.",
    ),
    Equivalent(
        "_decision",
        "left_out_lines",
        "MAX_LINE - len(PREFIX),",
        ")",
        "As above: fit's default limit (MAX_LINE) cuts none of them either.",
    ),
    Equivalent(
        "_early",
        "_lines",
        'text = read_small_file(path, MAX_START_FILE_BYTES).decode("utf-8", "replace")',
        'text = read_small_file(path, MAX_START_FILE_BYTES).decode("UTF-8", "replace")',
        "Codec names are case-insensitive.",
    ),
    Equivalent(
        "_early",
        "early_start_files",
        "return run_before_ours(site_dirs(), version or tuple(sys.version_info[:2]))",
        "return run_before_ours(site_dirs(), version or tuple(sys.version_info[:3]))",
        "run_before_ours reads only the version's first two numbers.",
    ),
    Equivalent(
        "_early",
        "run_before_ours",
        "if tuple(version[:2]) < PEP_829_PYTHON:",
        "if tuple(version[:3]) < PEP_829_PYTHON:",
        "A third number makes a version greater only where its first two equal"
        " (3, 15), which is not less either way: the same answer for every"
        " version.",
    ),
    Equivalent(
        "_evaluation.answer",
        "settings_from_json",
        'settings[key] = Setting(check_value(key, pair[0], ""), pair[1])',
        "settings[key] = Setting(check_value(key, pair[0], None), pair[1])",
        "An error names the field alone when the place is '' or None alike"
        " (_config.source_in tests it for truth).",
    ),
    Equivalent(
        "_evaluation.answer",
        "Answer.__init__",
        'assert [config, refusal, failure].count(None) == 2, "exactly one"',
        'assert [config, refusal, failure].count(None) == 2, "XXexactly oneXX"',
        "An assertion of the package's own calls: no input reaches it, and its"
        " wording is never shown.",
    ),
    Equivalent(
        "_evaluation.answer",
        "Answer.__init__",
        'assert [config, refusal, failure].count(None) == 2, "exactly one"',
        'assert [config, refusal, failure].count(None) == 2, "EXACTLY ONE"',
        "As above.",
    ),
    Equivalent(
        "_evaluation.answer",
        "Answer.from_json",
        'raise ConfigError("not an evaluation\'s answer")',
        "raise ConfigError(None)",
        "Its wording is never shown: every reader (the parent, a check's"
        " waiter, a peer's answer) catches the error and says its own line.",
    ),
    Equivalent(
        "_evaluation.answer",
        "Answer.from_json",
        'raise ConfigError("not an evaluation\'s answer")',
        'raise ConfigError("XXnot an evaluation\'s answerXX")',
        "As above: the wording is never shown.",
    ),
    Equivalent(
        "_evaluation.answer",
        "Answer.from_json",
        'raise ConfigError("not an evaluation\'s answer")',
        'raise ConfigError("NOT AN EVALUATION\'S ANSWER")',
        "As above: the wording is never shown.",
    ),
    Equivalent(
        "_evaluation.answer",
        "Verdict.from_json",
        'raise ConfigError("not a check\'s verdict")',
        "raise ConfigError(None)",
        "Its wording is never shown: every reader (the parent, a check's"
        " waiter, a peer's answer) catches the error and says its own line.",
    ),
    Equivalent(
        "_evaluation.answer",
        "Verdict.from_json",
        'raise ConfigError("not a check\'s verdict")',
        'raise ConfigError("XXnot a check\'s verdictXX")',
        "As above: the wording is never shown.",
    ),
    Equivalent(
        "_evaluation.answer",
        "Verdict.from_json",
        'raise ConfigError("not a check\'s verdict")',
        'raise ConfigError("NOT A CHECK\'S VERDICT")',
        "As above: the wording is never shown.",
    ),
    Equivalent(
        "_api",
        "recommend",
        'unknown = unknown_inputs(argv, config, "")',
        "unknown = unknown_inputs(argv, config, None)",
        "The place is only tested for truth (_config.source_in, unknown_inputs),"
        " and None is as false as ''.",
    ),
    # The node's reader (status).
    Equivalent(
        "_node",
        "_inherited",
        "outcome = decide(environ, found.launch, rocm=_unasked, recommend=_unasked)",
        "outcome = decide(environ, found.launch, rocm=None, recommend=_unasked)",
        "A --module worker's decision from its launcher's inputs asks neither"
        " ROCm nor a recommendation: neither is called.",
    ),
    Equivalent(
        "_node",
        "_inherited",
        "outcome = decide(environ, found.launch, rocm=_unasked, recommend=_unasked)",
        "outcome = decide(environ, found.launch, rocm=_unasked, recommend=None)",
        "As above: never called.",
    ),
    Equivalent(
        "_node",
        "_unasked",
        'raise AssertionError("a --module worker\'s decision asks for nothing")',
        "raise AssertionError(None)",
        "A guard never called (see _inherited): its message is never seen.",
    ),
    Equivalent(
        "_node",
        "_unasked",
        'raise AssertionError("a --module worker\'s decision asks for nothing")',
        'raise AssertionError("XXa --module worker\'s decision asks for nothingXX")',
        "As above.",
    ),
    Equivalent(
        "_node",
        "_unasked",
        'raise AssertionError("a --module worker\'s decision asks for nothing")',
        'raise AssertionError("A --MODULE WORKER\'S DECISION ASKS FOR NOTHING")',
        "As above.",
    ),
    Equivalent(
        "_node",
        "_number",
        "raw = os.read(fd, MAX_SYSFS_BYTES + 1)",
        "raw = os.read(fd, MAX_SYSFS_BYTES + 2)",
        "Any read of more than the most bytes tells a value that is too long;"
        " one byte more or two, the same values are refused.",
    ),
    Equivalent(
        "_node",
        "_number",
        'text = raw.decode("ascii", "replace").strip()',
        'text = raw.decode("ASCII", "replace").strip()',
        "Codec names are case-insensitive.",
    ),
    Equivalent(
        "_node",
        "_number",
        "fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW, dir_fd=folder)",
        "fd = os.open(path, os.O_RDONLY & os.O_CLOEXEC | os.O_NOFOLLOW, dir_fd=folder)",
        "Drops only O_CLOEXEC: status starts no process while the file is open.",
    ),
    Equivalent(
        "_node",
        "_own_pid_namespaces",
        "return 1",
        "return 2",
        "Reached only without an NSpid line (Linux before 4.1); it is asked"
        " only after KFD's sysfs was listed, which needs Linux 5.7.",
    ),
    Equivalent(
        "_node",
        "python_argv",
        'i += 2 if word == "--check-hash-based-pycs" else 1',
        'i += 2 if (word == "--check-hash-based-pycs") or True else 1',
        "CPython's other long options (--help, --help-env, --help-xoptions,"
        " --help-all, --version) print and exit: no program runs after them.",
    ),
    Equivalent(
        "_node",
        "python_argv",
        'i += 2 if word == "--check-hash-based-pycs" else 1',
        'i += 2 if word == "--check-hash-based-pycs" else 2',
        "As above.",
    ),
    Equivalent(
        "_node",
        "python_argv",
        "for at in range(1, len(word)):  # a cluster: -Im, -Wd, -Xdev, -uc",
        "for at in range(len(word)):  # a cluster: -Im, -Wd, -Xdev, -uc",
        "The word's first character is '-', neither a letter that ends the"
        " options nor one that takes a value: the loop goes on as from 1.",
    ),
    Equivalent(
        "_node",
        "python_argv",
        'if letter in "WX":',
        'if letter in "XXWXXX":',
        "A letter is one character: in 'XXWXXX' exactly where in 'WX'.",
    ),
    Equivalent(
        "_node",
        "_read",
        "fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW)",
        "fd = os.open(path, os.O_RDONLY & os.O_CLOEXEC | os.O_NOFOLLOW)",
        "Drops only O_CLOEXEC: status starts no process while the file is open.",
    ),
    Equivalent(
        "_node",
        "_holds",
        "continue",
        "break",
        "Differs only where a descriptor closes between the listing and its"
        " stat, and the device is a later one: a race no reliable test makes.",
    ),
    Equivalent(
        "_node",
        "Proc.__init__",
        "self.ppid: int | None = None",
        'self.ppid: int | None = ""',
        "A Proc is made only by _read_process, which sets ppid, environ and hip"
        " before it returns one: the first values are never read.",
    ),
    Equivalent(
        "_node",
        "Proc.__init__",
        "self.environ: dict[str, str] | None = None",
        'self.environ: dict[str, str] | None = ""',
        "As above.",
    ),
    Equivalent(
        "_node",
        "Proc.__init__",
        "self.hip: bool | None = None",
        'self.hip: bool | None = ""',
        "As above.",
    ),
    Equivalent(
        "_node",
        "_inherited",
        "outcome = decide(environ, found.launch, rocm=_unasked, recommend=_unasked)",
        "outcome = decide(environ, None, rocm=_unasked, recommend=_unasked)",
        "With its launcher's --module marker, a worker's decision is made from"
        " the marker and the launcher's inputs: the launch itself is not read.",
    ),
    Equivalent(
        "_node",
        "_inherited",
        'queues = getattr(outcome, "queues", None)',
        'queues = getattr(outcome, "queues", )',
        "With its launcher's --module marker, decide answers with an Outcome"
        " (never a launch to evaluate), which has queues: the default is never"
        " used.",
    ),
    Equivalent(
        "_node",
        "_owner",
        'return ""',
        'return "XXXX"',
        "Only where the process's folder went between reading it and its"
        " owner: a race no reliable test makes.",
    ),
    Equivalent(
        "_node",
        "_read_process",
        'words = [os.fsdecode(w) for w in raw.split(b"\\0")[:-1]] if raw else []',
        'words = [os.fsdecode(w) for w in raw.split(b"\\0")[:-1]] if (raw) or True'
        " else []",
        "An empty command line splits to no words either way.",
    ),
    Equivalent(
        "_node",
        "_read_process",
        "if any(word in raw for word in LAUNCH_WORDS):",
        "if any(word not in raw for word in LAUNCH_WORDS):",
        "A filter only, for speed: launch_of finds no launch in a command line"
        " without these words, so reading more command lines finds the same"
        " launches.",
    ),
    Equivalent(
        "_node",
        "read_node",
        "elif setting.text is None and found.launch is not None:",
        "elif setting.text is None or found.launch is not None:",
        "The hook found is read only for a launch without a value (setting_of):"
        " looking for it for other processes changes nothing shown.",
    ),
    # The command line (_cli).
    Equivalent(
        "_cli.__init__",
        "build_parser",
        "allow_abbrev=False,",
        "allow_abbrev=None,",
        "argparse only tests allow_abbrev for truth, and None is as false as False.",
    ),
    *(
        Equivalent(
            "_cli.__init__",
            "build_parser",
            "epilog=module.EXAMPLE, formatter_class=_Formatter, allow_abbrev=False,",
            f"epilog=module.EXAMPLE, formatter_class=_Formatter, {abbrev}",
            "A command's parser is given only the exact names of its own options"
            " (split_args refuses any other option first: test_options_are_never_"
            "abbreviated), so it never meets an abbreviation to take or refuse.",
        )
        for abbrev in ("allow_abbrev=None,", "allow_abbrev=True,", ")  # fmt: skip")
    ),
    Equivalent(
        "_cli.__init__",
        "build_parser",
        "description = textwrap.fill(module.HELP, 79)",
        "description = textwrap.fill(module.HELP, 80)",
        "The four help texts are constants that wrap at the same places at"
        " 80 columns as at 79 (no line could take another word).",
    ),
    Equivalent(
        "_cli.__init__",
        "build_parser",
        'description += "\\n\\n" + textwrap.fill(TRAINING_ARGS_HELP, 79)',
        'description += "\\n\\n" + textwrap.fill(TRAINING_ARGS_HELP, 80)',
        "TRAINING_ARGS_HELP is a constant that wraps at the same places at"
        " 80 columns as at 79 (no line could take another word).",
    ),
    Equivalent(
        "_cli.__init__",
        "_dispatch",
        "return 2  # pragma: no cover - parse_args exits or raises",
        "return 3  # pragma: no cover - parse_args exits or raises",
        "parse_args exits (help, version or a usage error) or raises (a usage"
        " error answered on stdout) for every argument list that reaches it,"
        " so no status is returned here.",
    ),
    Equivalent(
        "_cli.__init__",
        "split_args",
        "in_training = False  # after a training flag: its values",
        "in_training = None  # after a training flag: its values",
        "in_training is only tested for truth, and None is as false as False.",
    ),
    Equivalent(
        "_cli.__init__",
        "split_args",
        "in_training = False",
        "in_training = None",
        "in_training is only tested for truth, and None is as false as False.",
    ),
    Equivalent(
        "_cli.doctor",
        "cache_checks",
        "cache, problem = open_cache(os.environ, create=False)",
        "cache, problem = open_cache(os.environ, create=None)",
        "open_cache only tests create for truth, and None is as false as False.",
    ),
    Equivalent(
        "_cli.doctor",
        "run",
        'out.write("\\n" + textwrap.fill(summary, 79, break_long_words=False,',
        'out.write("\\n" + textwrap.fill(summary, 79, break_long_words=None,',
        "textwrap only tests break_long_words for truth, and None is as"
        " false as False.",
    ),
    Equivalent(
        "_cli.doctor",
        "run",
        'break_on_hyphens=False) + "\\n")  # fmt: skip',
        'break_on_hyphens=None) + "\\n")  # fmt: skip',
        "textwrap only tests break_on_hyphens for truth, and None is as"
        " false as False.",
    ),
    Equivalent(
        "_cli._common",
        "misspelt_variables",
        "if name.upper() == meant or edits_within(name.upper(), meant, MAX_EDITS):",
        "if name.lower() == meant or edits_within(name.upper(), meant, MAX_EDITS):",
        "edits_within(name.upper(), meant, ...) holds wherever name.upper() =="
        " meant (no edit at all): the first test only spares the search.",
    ),
    Equivalent(
        "_cli._common",
        "fail",
        "line = fit(message, limit=MAX_ERROR)",
        "line = fit(message, )",
        "MAX_ERROR is MAX_LINE, fit's default limit.",
    ),
    Equivalent(
        "_cli._common",
        "fail",
        'subsequent_indent="  ", break_long_words=False,',
        'subsequent_indent="  ", break_long_words=None,',
        "textwrap only tests break_long_words for truth, and None is as"
        " false as False.",
    ),
    Equivalent(
        "_cli._common",
        "fail",
        'break_on_hyphens=False) + "\\n"  # fmt: skip',
        'break_on_hyphens=None) + "\\n"  # fmt: skip',
        "textwrap only tests break_on_hyphens for truth, and None is as"
        " false as False.",
    ),
    Equivalent(
        "_cli.doctor",
        "add_arguments",
        "add_options(parser, OPTIONS)",
        "add_options(None, OPTIONS)",
        "doctor has no option of its own (OPTIONS is empty): nothing is added"
        " to any parser.",
    ),
    Equivalent(
        "_cli.doctor",
        "training_python_check",
        "timeout=TRAINING_PYTHON_TIMEOUT, stdin=subprocess.DEVNULL,",
        "timeout=TRAINING_PYTHON_TIMEOUT, stdin=None,",
        "The probe is a -c program that reads no input: the python on PATH"
        " never reads the stdin it inherits.",
    ),
    Equivalent(
        "_cli.doctor",
        "training_python_check",
        "timeout=TRAINING_PYTHON_TIMEOUT, stdin=subprocess.DEVNULL,",
        "timeout=TRAINING_PYTHON_TIMEOUT, )  # fmt: skip",
        "As above.",
    ),
    Equivalent(
        "_cli.explain",
        "as_text",
        '79, subsequent_indent="  ",',
        '80, subsequent_indent="  ",',
        "Q is 2, 4 or 8 and the lanes one digit, so the Q line's first line"
        " is always 79 characters and its next word does not fit 80 either.",
    ),
    Equivalent(
        "_cli.status",
        "text",
        'f"{gpu.split()[-1]}:{c[0]}+{c[1]}"',
        'f"{gpu.split()[+1]}:{c[0]}+{c[1]}"',
        "A GPU's label has two words (GPU n, gpu_id n): the second is the last.",
    ),
    Equivalent(
        "_cli.term",
        "row",
        "break_on_hyphens=False,",
        "break_on_hyphens=None,",
        "textwrap only tests break_on_hyphens for truth, and None is as"
        " false as False.",
    ),
    Equivalent(
        "_cli.term",
        "row",
        "break_long_words=False,",
        "break_long_words=None,",
        "textwrap only tests break_long_words for truth, and None is as"
        " false as False.",
    ),
    Equivalent(
        "_cli.term",
        "wrap",
        "break_long_words=False, break_on_hyphens=False,",
        "break_long_words=None, break_on_hyphens=False,",
        "textwrap only tests break_long_words for truth, and None is as"
        " false as False.",
    ),
    Equivalent(
        "_cli.term",
        "wrap",
        "break_long_words=False, break_on_hyphens=False,",
        "break_long_words=False, break_on_hyphens=None,",
        "textwrap splits on hyphens only where break_on_hyphens is True.",
    ),
    Equivalent(
        "_cli.term",
        "_without_surrogates",
        "return value if value.isprintable() else _SURROGATE.sub(",
        "return value if (value.isprintable()) and False else _SURROGATE.sub(",
        "A shortcut: a printable text holds no surrogate, so the substitution"
        " leaves it as it is.",
    ),
    Equivalent(
        "_cli.term",
        "Stdout.__init__",
        "self.gone = False",
        "self.gone = None",
        "Only tested for truth.",
    ),
    Equivalent(
        "_cli.verify",
        "misplaced_trace",
        'flag, values = "", 0',
        'flag, values = "", 1',
        "values is read only after a flag, which sets it; before any flag (only"
        " after '--') a trace is named whatever it holds.",
    ),
    Equivalent(
        "_cli.verify",
        "run",
        "said: dict[str, Any] = {}",
        "said: dict[str, Any] = None",
        "A report's pool_rule always has its rule, source and why: it equals"
        " neither {} nor None, so the first rule is said either way.",
    ),
    Equivalent(
        "_cli.verify",
        "verdict_lines",
        'return [_line(f"{path} {ALIKE}", verdicts[0], out)]',
        'return [_line(f"{path} {ALIKE}", verdicts[1], out)]',
        "Here the two verdicts have the same pools, so the same streams, Q and"
        " verdict; they differ only in the rule's name, which this line does"
        " not show.",
    ),
    Equivalent(
        "_traces",
        "open_trace",
        "while len(head) < HEAD and (more := raw.read(HEAD - len(head))):",
        "while len(head) <= HEAD and (more := raw.read(HEAD - len(head))):",
        "With the head read, the one more read asks for 0 bytes, which returns"
        " b'' at once and ends the loop: the same bytes, no wait.",
    ),
    Equivalent(
        "_traces",
        "open_trace",
        "while len(head) < HEAD and (more := raw.read(HEAD - len(head))):",
        "while len(head) < HEAD and (more := raw.read(HEAD + len(head))):",
        "A read returns what is there, up to the size: at most a few bytes more"
        " in the head, which is replayed whole before the rest.",
    ),
    Equivalent(
        "_traces",
        "open_trace",
        'raw = open(path, "rb", buffering=0)  # noqa: SIM115 - handed to the caller',
        'raw = open(path, "rb", )  # noqa: SIM115 - handed to the caller',
        "A buffered file under the replay gives the same bytes in the same"
        " order; its read of the head waits for the head alone, as the loop"
        " does.",
    ),
    Equivalent(
        "_traces",
        "_Replayed.readinto",
        "self.head = self.head[size:]",
        "self.head = None",
        "Its one reader, a BufferedReader, asks for its 8 KiB buffer: the whole"
        " head (6 bytes at most) is given at the first read.",
    ),
    Equivalent(
        "_traces",
        "_Window.__init__",
        'self.decoder = codecs.getincrementaldecoder("utf-8-sig")()',
        'self.decoder = codecs.getincrementaldecoder("UTF-8-SIG")()',
        "Codec names are looked up case-insensitively: the same decoder.",
    ),
    Equivalent(
        "_traces",
        "_Window.__init__",
        "self.pos = 0",
        "self.pos = 1",
        "The window starts empty, and the first fill() keeps buf[pos:] of"
        " an empty buf and sets pos to 0 before anything reads it.",
    ),
    Equivalent(
        "_traces",
        "_Window.__init__",
        "self.eof = False",
        "self.eof = None",
        "Only `if self.eof` reads it before fill() sets a bool, and None is"
        " as false as False.",
    ),
    Equivalent(
        "_traces",
        "events",
        "found = False",
        "found = None",
        "found is only tested for truth, and None is as false as False.",
    ),
    Equivalent(
        "_traces",
        "open_trace",
        "raise TraceError(exc.strerror or type(exc).__name__) from None",
        "raise TraceError(exc.strerror or type(None).__name__) from None",
        "open() fails with an errno, so its OSError always has a strerror"
        " and the name after `or` is never used.",
    ),
    Equivalent(
        "_traces",
        "read_trace",
        "traced = worked = False",
        "traced = worked = None",
        "Both are only tested for truth (`worked or work`, `if not"
        " traced`), and None is as false as False.",
    ),
    # The --module evaluation and the cache.
    Equivalent(
        "_evaluation.registry",
        "_flag_for",
        'found = ""',
        "found = None",
        "Only tested for truth (`found or f'--{key}'`).",
    ),
    Equivalent(
        "_evaluation.registry",
        "_flag_for",
        'found = ""',
        'found = "XXXX"',
        "The fallback serves a key no argument spells, which for a key of the"
        " overrides is a bool's no- flag; tyro always makes that a bool, which"
        " the config never refuses, so no refusal asks for its flag.",
    ),
    Equivalent(
        "_evaluation.registry",
        "_masked_import",
        'name = inner.name or ""',
        'name = inner.name or "XXXX"',
        "An import error with no name matches no module the launch names either"
        " way (but a --module package named XXXX).",
    ),
    Equivalent(
        "_evaluation.registry",
        "read_config",
        'key = exc.source.partition(": ")[2]',
        'key = exc.source.rpartition(": ")[2]',
        "The model's refusals name '' or 'config: FIELD', and no field name"
        " holds ': ': one separator at most, found from either end.",
    ),
    Equivalent(
        "_evaluation.registry",
        "read_config",
        "inputs = read_inputs(settings, known, toolkit_passes=MODULE.toolkit_passes,",
        "inputs = read_inputs(settings, known, toolkit_passes=None,",
        "The --module form's toolkit_passes is False, and read_inputs tests it"
        " for truth only.",
    ),
    Equivalent(
        "_evaluation.cache",
        "location",
        'xdg = environ.get("XDG_CACHE_HOME", "")',
        'xdg = environ.get("XDG_CACHE_HOME", "XXXX")',
        "Unset reads as '' or 'XXXX': neither is an absolute path, and only an"
        " absolute XDG_CACHE_HOME is used.",
    ),
    Equivalent(
        "_evaluation.cache",
        "Cache.prune",
        "if entry.stat(follow_symlinks=False).st_mtime < old:",
        "if entry.stat(follow_symlinks=None).st_mtime < old:",
        "follow_symlinks is read for its truth: None is False.",
    ),
    Equivalent(
        "_evaluation.parent",
        "Evaluation.__init__",
        'cache_key: str = "",',
        'cache_key: str = "XXXX",',
        "The key goes to the child only with a cache, and every caller that"
        " gives a cache gives its key.",
    ),
    Equivalent(
        "_evaluation.child",
        "_check",
        "stored = False",
        "stored = None",
        "Only tested for truth.",
    ),
    Equivalent(
        "_evaluation.child",
        "_check",
        "launch = Launch(MODULE, args, False)",
        "launch = Launch(MODULE, args, None)",
        "The launch is only concluded from, and conclude() never reads"
        " in_process (the parent's and process's own).",
    ),
    Equivalent(
        "_evaluation.child",
        "_check",
        "launch = Launch(MODULE, args, False)",
        "launch = Launch(MODULE, args, True)",
        "As above.",
    ),
    Equivalent(
        "_evaluation.child",
        "_say",
        'os.write(options.say, line.encode("utf-8", "backslashreplace"))',
        'os.write(options.say, line.encode("utf-8", ))',
        "Outcome.line escapes every character a line could not encode"
        " (printable()): the handler never runs.",
    ),
    Equivalent(
        "_evaluation.cache",
        "_over",
        "counted = False",
        "counted = None",
        "Where the record is not ours (None) the launch is refused whatever "
        "counted says: take() returns the refusal either way, lookup() "
        "reads only the refusal.",
    ),
    Equivalent(
        "_evaluation.cache",
        "_over",
        "counted = False",
        "counted = True",
        "As above.",
    ),
    Equivalent(
        "_evaluation.cache",
        "_stat",
        'fields = stat_file.read(4096).rpartition(b")")[2].split()',
        'fields = stat_file.read(None).rpartition(b")")[2].split()',
        "/proc/PID/stat is one line of a few hundred bytes: any read takes it whole.",
    ),
    Equivalent(
        "_evaluation.cache",
        "_stat",
        'fields = stat_file.read(4096).rpartition(b")")[2].split()',
        'fields = stat_file.read(4097).rpartition(b")")[2].split()',
        "As above.",
    ),
    Equivalent(
        "_evaluation.cache",
        "_stat",
        "return fields if len(fields) > 19 else None",
        "return fields if len(fields) >= 19 else None",
        "Linux's /proc/PID/stat has 50 fields after the name since 3.5: "
        "every bound below that reads the same.",
    ),
    Equivalent(
        "_evaluation.cache",
        "_stat",
        "return fields if len(fields) > 19 else None",
        "return fields if len(fields) > 20 else None",
        "As above.",
    ),
    Equivalent(
        "_evaluation.child",
        "_serve",
        "if options.cache is not None and recorder is not None:",
        "if options.cache is not None or recorder is not None:",
        "main() makes a recorder exactly when --cache is given: either test"
        " says the same.",
    ),
    Equivalent(
        "_evaluation.child",
        "_serve",
        "taken = Answer(config=Config(decode_inputs(options.check), {}), how=CACHE)",
        "taken = Answer(config=Config(decode_inputs(options.check), {}), how=None)",
        "A check compares the taken answer's inputs or refusal only: its how is"
        " never written or read.",
    ),
    Equivalent(
        "_evaluation.child",
        "_serve",
        "taken = Answer(config=Config(decode_inputs(options.check), {}), how=CACHE)",
        "taken = Answer(config=Config(decode_inputs(options.check), {}), )",
        "As above.",
    ),
    Equivalent(
        "_evaluation.child",
        "main",
        'split = argv.index("--") if "--" in argv else len(argv)',
        'split = argv.index("--") if ("--" in argv) or True else len(argv)',
        "The launcher always passes -- before the training's arguments.",
    ),
    Equivalent(
        "_evaluation.child",
        "main",
        "recorder = Recorder() if options.cache is not None else None",
        "recorder = Recorder() if (options.cache is not None) or True else None",
        "Without a cache the recording is never read (_serve evaluates here"
        " and stores nothing): its cost only.",
    ),
    Equivalent(
        "_evaluation.child",
        "options_parser",
        'parser = argparse.ArgumentParser(prog="child", allow_abbrev=False)',
        'parser = argparse.ArgumentParser(prog="child", allow_abbrev=None)',
        "argparse only tests allow_abbrev for truth.",
    ),
    Equivalent(
        "_evaluation.child",
        "_say",
        'os.write(options.say, line.encode("utf-8", "backslashreplace"))',
        'os.write(options.say, line.encode("UTF-8", "backslashreplace"))',
        "Codec names are case-insensitive.",
    ),
    Equivalent(
        "_evaluation.child",
        "_say",
        'os.write(options.say, line.encode("utf-8", "backslashreplace"))',
        'os.write(options.say, line.encode("utf-8", "XXbackslashreplaceXX"))',
        "An error handler is looked up only when a character fails to encode,"
        " which never happens here (above).",
    ),
    Equivalent(
        "_evaluation.child",
        "_say",
        'os.write(options.say, line.encode("utf-8", "backslashreplace"))',
        'os.write(options.say, line.encode("utf-8", "BACKSLASHREPLACE"))',
        "As above.",
    ),
    Equivalent(
        "_evaluation.child",
        "imports_from",
        'if not (sys.flags.isolated or getattr(sys.flags, "safe_path", False)):',
        'if not (sys.flags.isolated or getattr(sys.flags, "safe_path", None)):',
        "Only tested for truth.",
    ),
    Equivalent(
        "_evaluation.process",
        "interpreter_of",
        'safe = sys.version_info >= (3, 11) and bool(environ.get("PYTHONSAFEPATH"))',
        'safe = sys.version_info > (3, 11) and bool(environ.get("PYTHONSAFEPATH"))',
        "sys.version_info has five fields: on any 3.11.x it is greater than"
        " (3, 11) too.",
    ),
    Equivalent(
        "_evaluation.process",
        "lowest_priority",
        'problem = "unknown"',
        "problem = None",
        "AUTOGROUP_TRIES is at least 1: each try returns or sets problem"
        " before it is read.",
    ),
    Equivalent(
        "_evaluation.process",
        "lowest_priority",
        'problem = "unknown"',
        'problem = "XXunknownXX"',
        "As above.",
    ),
    Equivalent(
        "_evaluation.process",
        "lowest_priority",
        'problem = "unknown"',
        'problem = "UNKNOWN"',
        "As above.",
    ),
    Equivalent(
        "_evaluation.process",
        "lowest_priority",
        "os.nice(19)  # from any niceness: 19 is the ceiling",
        "os.nice(20)  # from any niceness: 19 is the ceiling",
        "Linux clamps a niceness above 19 to 19.",
    ),
    Equivalent(
        "_evaluation.process",
        "lowest_priority",
        'idle = getattr(os, "SCHED_IDLE", None)',
        'idle = getattr(os, "SCHED_IDLE", )',
        "The default serves a platform without the idle class; Linux has it.",
    ),
    Equivalent(
        "_evaluation.process",
        "lowest_priority",
        'if idle is not None and hasattr(os, "sched_setscheduler"):',
        'if idle is not None or hasattr(os, "sched_setscheduler"):',
        "As above: on Linux both hold.",
    ),
    Equivalent(
        "_evaluation.process",
        "lowest_priority",
        'with contextlib.suppress(OSError), open(AUTOGROUP, "rb") as group:',
        'with contextlib.suppress(OSError), open("rb") as group:',
        "The shortcut for a group the parent already lowered, missed: the"
        " child writes the same 19 itself (the end state is the same; without"
        " CAP_SYS_ADMIN the kernel's rate limit can make that take up to 1.2"
        " s, at the idle priority).",
    ),
    Equivalent(
        "_evaluation.process",
        "lowest_priority",
        'with contextlib.suppress(OSError), open(AUTOGROUP, "rb") as group:',
        "with contextlib.suppress(OSError), open(AUTOGROUP, ) as group:",
        "As above (a text read never equals the bytes b'19').",
    ),
    Equivalent(
        "_evaluation.process",
        "lowest_priority",
        'if group.read().split()[-1:] == [b"19"]:  # set by the parent already',
        'if group.read().split()[+1:] == [b"19"]:  # set by the parent already',
        "As above.",
    ),
    Equivalent(
        "_evaluation.process",
        "lowest_priority",
        'if group.read().split()[-1:] == [b"19"]:  # set by the parent already',
        'if group.read().split()[-2:] == [b"19"]:  # set by the parent already',
        "As above.",
    ),
    Equivalent(
        "_evaluation.process",
        "lowest_priority",
        'if group.read().split()[-1:] == [b"19"]:  # set by the parent already',
        'if group.read().split()[-1:] == [b"XX19XX"]:  # set by the parent already',
        "As above.",
    ),
    Equivalent(
        "_evaluation.process",
        "_hold_stdio",
        "fd = os.open(os.devnull, os.O_RDWR | os.O_CLOEXEC)",
        "fd = os.open(os.devnull, os.O_RDWR & os.O_CLOEXEC)",
        "The held descriptors are 0, 1 or 2, which the child's start replaces"
        " with its own stdio anyway: whether they would be inherited, or"
        " writable, changes nothing.",
    ),
    Equivalent(
        "_evaluation.process",
        "_hold_stdio",
        "if fd > 2:",
        "if fd >= 2:",
        "A free 2 then goes to the child's end of the first pipe, which the"
        " parent closes as the child starts: no pipe of ours stays on a stdio"
        " number.",
    ),
    Equivalent(
        "_evaluation.process",
        "_hold_stdio",
        "if fd > 2:",
        "if fd > 3:",
        "Descriptor 3 held too, and closed with the others: only the numbers"
        " of our own pipes change.",
    ),
    Equivalent(
        "_evaluation.process",
        "dies_with_this_process",
        "os._exit(1)",
        "os._exit(None)",
        "Reached only when the parent has ended: no one reads this status.",
    ),
    Equivalent(
        "_evaluation.process",
        "dies_with_this_process",
        "os._exit(1)",
        "os._exit(2)",
        "As above.",
    ),
    Equivalent(
        "_evaluation.process",
        "Child.__init__",
        "fd = _copy_of_stderr() if say and 2 not in held else -1",
        "fd = _copy_of_stderr() if say and 2 not in held else -2",
        "Any negative number means no copy: the tests are fd >= 0.",
    ),
    Equivalent(
        "_evaluation.process",
        "Child.__init__",
        "if fd >= 0:",
        "if fd > 0:",
        "A copy of stderr is never 0, 1 or 2: those are open (or held on"
        " /dev/null) when it is made, and dup takes the lowest free number.",
    ),
    Equivalent(
        "_evaluation.process",
        "Child.__init__",
        "if fd >= 0:",
        "if fd >= 1:",
        "As above.",
    ),
    Equivalent(
        "_evaluation.process",
        "Child.__init__",
        "pass_fds=(fd,) if fd >= 0 else (),",
        "pass_fds=(fd,) if fd > 0 else (),",
        "As above.",
    ),
    Equivalent(
        "_evaluation.process",
        "Child.__init__",
        "pass_fds=(fd,) if fd >= 0 else (),",
        "pass_fds=(fd,) if fd >= 1 else (),",
        "As above.",
    ),
    Equivalent(
        "_evaluation.process",
        "Child.__init__",
        "for own in (*held, fd) if fd >= 0 else held:",
        "for own in (*held, fd) if fd > 0 else held:",
        "As above.",
    ),
    Equivalent(
        "_evaluation.process",
        "Child.__init__",
        "for own in (*held, fd) if fd >= 0 else held:",
        "for own in (*held, fd) if fd >= 1 else held:",
        "As above.",
    ),
    Equivalent(
        "_evaluation.process",
        "_close_all_but_stdio",
        'names = os.listdir("/proc/self/fd")',
        'names = os.listdir("XX/proc/self/fdXX")',
        "The reaper lives exactly as long as the child (it ends the group when"
        " the child dies): a descriptor it keeps (the --say copy) closes when"
        " the child's own does.",
    ),
    Equivalent(
        "_evaluation.process",
        "_close_all_but_stdio",
        'names = os.listdir("/proc/self/fd")',
        'names = os.listdir("/PROC/SELF/FD")',
        "As above.",
    ),
    Equivalent(
        "_evaluation.process",
        "_close_all_but_stdio",
        "if int(name) > 2:",
        "if int(name) >= 2:",
        "Descriptor 2 is the reaper's /dev/null (dup2 before): closing it"
        " changes nothing.",
    ),
    Equivalent(
        "_evaluation.process",
        "_close_all_but_stdio",
        "if int(name) > 2:",
        "if int(name) > 3:",
        "Descriptor 3 kept: the reaper lives exactly as long as the child (it"
        " ends the group when the child dies): a descriptor it keeps (the --say"
        " copy) closes when the child's own does.",
    ),
    Equivalent(
        "_evaluation.process",
        "end_group",
        "os._exit(1)  # pragma: no cover - killpg killed us",
        "os._exit(None)  # pragma: no cover - killpg killed us",
        "Never reached: killpg killed this process first.",
    ),
    Equivalent(
        "_evaluation.process",
        "end_group",
        "os._exit(1)  # pragma: no cover - killpg killed us",
        "os._exit(2)  # pragma: no cover - killpg killed us",
        "As above.",
    ),
    Equivalent(
        "_evaluation.process",
        "Child.__init__",
        "say: bool = False,",
        "say: bool = True,",
        "Both callers give it.",
    ),
    Equivalent(
        "_evaluation.process",
        "Child.__init__",
        "fd = _copy_of_stderr() if say and 2 not in held else -1",
        "fd = _copy_of_stderr() if say and 3 not in held else -1",
        "With stderr closed, the copy is of the /dev/null held on 2: the"
        " child's line goes nowhere either way.",
    ),
    Equivalent(
        "_evaluation.process",
        "Child.__init__",
        "self._eof = False",
        "self._eof = None",
        "Only tested for truth.",
    ),
    Equivalent(
        "_evaluation.process",
        "_reap",
        "os.dup2(quiet, 1)  # the parent's EOF on the answer must not wait for us",
        "os.dup2(quiet, 2)  # the parent's EOF on the answer must not wait for us",
        "The reaper's copy of the answer pipe would close only when the child"
        " dies, and the child's death ends the reaper at once (its parent-death"
        " signal): the parent's EOF comes at the same moment.",
    ),
    Equivalent(
        "_evaluation.process",
        "_reap",
        "os.dup2(quiet, 2)",
        "os.dup2(quiet, 3)",
        "The child's stderr, which the reaper inherits, is /dev/null already;"
        " descriptor 3 is closed next anyway.",
    ),
    Equivalent(
        "_evaluation.process",
        "_reap",
        "while os.read(0, 4096):",
        "while os.read(0, 4097):",
        "The size of each read of a pipe nothing writes to: it waits for EOF"
        " either way.",
    ),
    Equivalent(
        "_evaluation.process",
        "Child.read_line",
        "ready = poller.poll(math.ceil(remaining * 1000))  # milliseconds",
        "ready = poller.poll(math.ceil(remaining * 1001))  # milliseconds",
        "A wait 0.1 % longer than the time left ends on the child's line as"
        " before, or at most 30 ms after the default deadline: within the"
        " scheduler's own jitter on a busy node.",
    ),
    Equivalent(
        "_evaluation.process",
        "Child.read_line",
        "poller.register(fd, select.POLLIN)",
        "poller.register(fd, )",
        "The default mask adds POLLPRI and POLLOUT, which the read end of a pipe"
        " never reports: the same events.",
    ),
    Equivalent(
        "_evaluation.process",
        "interpreter_of",
        '("-P", getattr(sys.flags, "safe_path", False)),  # 3.11+',
        '("-P", getattr(sys.flags, "safe_path", None)),  # 3.11+',
        "Only tested for truth.",
    ),
    Equivalent(
        "_evaluation.process",
        "interpreter_of",
        'safe = bool(sys.flags.isolated or getattr(sys.flags, "safe_path", False))',
        'safe = bool(sys.flags.isolated or getattr(sys.flags, "safe_path", None))',
        "Only tested for truth.",
    ),
    Equivalent(
        "_evaluation.process",
        "_copy_of_stderr",
        "return -1",
        "return -2",
        "Any negative number means no copy: the caller tests fd >= 0.",
    ),
    Equivalent(
        "_evaluation.process",
        "lower_priority_of",
        "os.setpriority(os.PRIO_PROCESS, pid, 19)",
        "os.setpriority(os.PRIO_PROCESS, pid, 20)",
        "Linux clamps a niceness above 19 to 19.",
    ),
    Equivalent(
        "_evaluation.process",
        "lower_priority_of",
        'idle = getattr(os, "SCHED_IDLE", None)',
        'idle = getattr(os, "SCHED_IDLE", )',
        "The default serves a platform without the idle class; Linux, where"
        " ROCm runs, has it.",
    ),
    Equivalent(
        "_evaluation.process",
        "lower_priority_of",
        'if idle is not None and hasattr(os, "sched_setscheduler"):',
        'if idle is not None or hasattr(os, "sched_setscheduler"):',
        "As above: on Linux both hold.",
    ),
    Equivalent(
        "_evaluation.process",
        "lower_priority_of",
        'raise OSError(errno.EPERM, "not the leader of a session of its own")',
        'raise OSError(errno.EPERM, "XXnot the leader of a session of its ownXX")',
        "Its one caller passes over the error (the child lowers itself and says"
        " why not): the wording is never shown.",
    ),
    Equivalent(
        "_evaluation.process",
        "Child.read_line",
        "if len(self._buffer) > MAX_LINE_BYTES:",
        "if len(self._buffer) >= MAX_LINE_BYTES:",
        "Differs only for an answer of 1 MiB and up (real ones are a few KB),"
        " and there on how the pipe happens to split it: no reliable test can"
        " tell.",
    ),
    Equivalent(
        "_evaluation.process",
        "Child.read_line",
        "chunk = os.read(fd, 65536)",
        "chunk = os.read(fd, 65537)",
        "The size of each read: the same bytes arrive either way.",
    ),
    *(
        Equivalent(
            "_evaluation.cache",
            "_over",
            "and (0 <= now - at < LAUNCH_SECONDS"
            " or (start and _started(pid) == start))",
            after,
            "A float clock (time.time()) against a whole second: the one instant"
            " where the bound differs is not one a test or a user can make.",
        )
        for after in (
            "and (0 < now - at < LAUNCH_SECONDS or (start and _started(pid) == start))",
            "and (0 <= now - at <= LAUNCH_SECONDS"
            " or (start and _started(pid) == start))",
        )
    ),
    Equivalent(
        "_evaluation.cache",
        "_stat",
        "return fields if len(fields) > 19 else None",
        "return fields if (len(fields) > 19) or True else None",
        "Linux's /proc/PID/stat has held 44 fields or more after the name since"
        " 2.6; none shorter can be made.",
    ),
    *(
        Equivalent(
            "_evaluation.cache",
            "launch_of",
            'found = ["parent", parent, parent and _started(parent)]',
            f"found = [{tag}, parent, parent and _started(parent)]",
            "A constant tag inside a hash: any other tells the same launches apart.",
        )
        for tag in ('"XXparentXX"', '"PARENT"')
    ),
    Equivalent(
        "_evaluation.cache",
        "Cache.take",
        'problem = _untrusted(info) or ("" if ours else "?")',
        'problem = _untrusted(info) or ("" if ours else "XX?XX")',
        "Only tested for truth.",
    ),
    Equivalent(
        "_evaluation.cache",
        "Cache.take",
        'line = f"{mine} {taker} {_started(taker) or 0} {int(time.time())}\\n"',
        'line = f"{mine} {taker} {_started(taker) or 1} {int(time.time())}\\n"',
        "The taker is alive as it takes (this process or its launcher), so its"
        " start time is there; and no process started at tick 1 of a boot runs"
        " a launch.",
    ),
    Equivalent(
        "_evaluation.cache",
        "Cache.close",
        "fd, self.fd = self.fd, -1",
        "fd, self.fd = self.fd, -2",
        "Only tested for >= 0.",
    ),
    *(
        Equivalent(
            "_evaluation.cache",
            function,
            "flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW"
            " | os.O_CLOEXEC",
            "flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW"
            " & os.O_CLOEXEC",
            "O_CREAT | O_EXCL never follows a link (open(2)), and Python opens"
            " every descriptor non-inheritable (PEP 446).",
        )
        for function in ("Cache.tag", "Cache._write")
    ),
    *(
        Equivalent(
            "_evaluation.cache",
            "_content",
            'return json.dumps(found, sort_keys=True, separators=(",", ":"))',
            after,
            "Both sides of the one comparison it serves are made by it, from"
            " variants built and read back in one order: any fixed form of the"
            " JSON compares them alike.",
        )
        for after in (
            'return json.dumps(found, sort_keys=None, separators=(",", ":"))',
            "return json.dumps(found, sort_keys=True, separators=None)",
            'return json.dumps(found, separators=(",", ":"))',
            "return json.dumps(found, sort_keys=True, )",
            'return json.dumps(found, sort_keys=False, separators=(",", ":"))',
            'return json.dumps(found, sort_keys=True, separators=("XX,XX", ":"))',
            'return json.dumps(found, sort_keys=True, separators=(",", "XX:XX"))',
        )
    ),
    Equivalent(
        "_evaluation.cache",
        "_devices",
        'return sum(1 for item in value.split(",") if item.strip())',
        'return sum(2 for item in value.split(",") if item.strip())',
        "A count inside the key: twice it tells the same launches apart.",
    ),
    Equivalent(
        "_evaluation.cache",
        "_home",
        'home = environ.get("HOME", "")',
        'home = environ.get("HOME", "XXXX")',
        "Either default is no absolute path: the passwd entry is asked.",
    ),
    *(
        Equivalent(
            "_evaluation.cache",
            "_interpreter",
            'venv = ["venv", info.st_ino, info.st_size, info.st_mtime_ns,'
            " info.st_ctime_ns]",
            f"venv = [{tag}, info.st_ino, info.st_size, info.st_mtime_ns,"
            " info.st_ctime_ns]",
            "A constant tag inside the key: any other tells the same venvs apart.",
        )
        for tag in ('"XXvenvXX"', '"VENV"')
    ),
    Equivalent(
        "_evaluation.cache",
        "_key_value",
        "return [os.path.normpath(p) if p else p for p in value.split(os.pathsep)]",
        "return [os.path.normpath(p) if (p) or True else p for p in"
        " value.split(os.pathsep)]",
        "An empty entry of a path variable becomes '.': both are the working"
        " directory to the interpreter, and the key stays one per meaning.",
    ),
    Equivalent(
        "_evaluation.cache",
        "machine",
        "fd = os.open(BOOT_ID, os.O_RDONLY | os.O_CLOEXEC)",
        "fd = os.open(BOOT_ID, os.O_RDONLY & os.O_CLOEXEC)",
        "O_RDONLY is 0, and Python opens every descriptor non-inheritable (PEP 446).",
    ),
    Equivalent(
        "_evaluation.cache",
        "machine",
        'found = os.read(fd, 64).decode("ascii").strip().replace("-", "")',
        'found = os.read(fd, 65).decode("ascii").strip().replace("-", "")',
        "A boot id is 37 bytes: any read of more takes it whole.",
    ),
    Equivalent(
        "_evaluation.cache",
        "machine",
        'found = os.read(fd, 64).decode("ascii").strip().replace("-", "")',
        'found = os.read(fd, 64).decode("ASCII").strip().replace("-", "")',
        "Codec names are case-insensitive.",
    ),
    Equivalent(
        "_evaluation.cache",
        "Cache._entries",
        "foreign = False",
        "foreign = None",
        "Only tested for truth.",
    ),
    *(
        Equivalent(
            "_evaluation.cache",
            "Cache._entries",
            before,
            before.replace("follow_symlinks=False", f"follow_symlinks={value}"),
            "DirEntry takes follow_symlinks for its truth, and a regular file"
            " (tested without following) is the same file followed.",
        )
        for before, value in (
            ("if not entry.is_file(follow_symlinks=False):  # a link ...", "None"),
            ("info = entry.stat(follow_symlinks=False)", "None"),
            ("info = entry.stat(follow_symlinks=False)", "True"),
        )
    ),
    Equivalent(
        "_evaluation.cache",
        "Cache.prune",
        "if entry.stat(follow_symlinks=False).st_mtime < old:",
        "if entry.stat(follow_symlinks=True).st_mtime < old:",
        "Only regular files reach it (a link makes the folder foreign, and"
        " nothing is pruned): followed or not, the same file.",
    ),
    *(
        Equivalent(
            "_evaluation.cache",
            "Cache.waited_on",
            "inode = str(os.stat(name, dir_fd=self.dir(),"
            " follow_symlinks=False).st_ino)",
            after,
            "The lock files are the cache's own, opened without following;"
            " a link in their place is a match of another file's, which its"
            " docstring allows: it only costs the caller some CPU.",
        )
        for after in (
            "inode = str(os.stat(name, dir_fd=self.dir(),"
            " follow_symlinks=None).st_ino)",
            "inode = str(os.stat(name, dir_fd=self.dir(), ).st_ino)",
        )
    ),
    Equivalent(
        "_evaluation.cache",
        "Cache.lock",
        "flags = os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK",
        "flags = os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC & os.O_NONBLOCK",
        "Opening for reading and writing never waits, a FIFO's included (fifo(7)),"
        " and Python opens every descriptor non-inheritable (PEP 446).",
    ),
    *(
        Equivalent(
            "_evaluation.cache",
            "Cache.waited_on",
            'listed = locks.read().decode("ascii", "replace").splitlines()',
            after,
            "/proc/locks is ASCII: no byte of it needs an error handler, and codec"
            " names are case-insensitive.",
        )
        for after in (
            'listed = locks.read().decode("ascii", ).splitlines()',
            'listed = locks.read().decode("ASCII", "replace").splitlines()',
            'listed = locks.read().decode("ascii", "XXreplaceXX").splitlines()',
            'listed = locks.read().decode("ascii", "REPLACE").splitlines()',
        )
    ),
    Equivalent(
        "_evaluation.cache",
        "Cache.waited_on",
        'fields[1:2] == ["->"] and fields[6:7] != []',
        'fields[1:2] == ["->"] and fields[6:8] != []',
        "Either slice is empty exactly when there is no seventh field.",
    ),
    Equivalent(
        "_evaluation.cache",
        "Cache.waited_on",
        "inode = str(os.stat(name, dir_fd=self.dir(), follow_symlinks=False).st_ino)",
        "inode = str(os.stat(name, dir_fd=self.dir(), follow_symlinks=True).st_ino)",
        "The lock files are the cache's own, in a folder only its user can"
        " write; a link there is a match of another file's, which only costs"
        " the caller some CPU.",
    ),
    Equivalent(
        "_evaluation.cache",
        "_file_name",
        'return "".join(c if c.isalnum() or c in "-_." else "_" for c in name)[:64]',
        'return "".join(c if c.isalnum() or c in "XX-_.XX" else "_" for c in name)'
        "[:64]",
        "X is a letter, kept either way.",
    ),
    Equivalent(
        "_evaluation.cache",
        "Cache.__init__",
        "self.fd = -1",
        "self.fd = -2",
        "Only tested for >= 0.",
    ),
    *(
        Equivalent(
            "_evaluation.cache",
            "Cache.lookup",
            'raise ValueError("no id")',
            f"raise ValueError({message})",
            "Caught at once and said as a corrupt entry: its words are never read.",
        )
        for message in ("None", '"XXno idXX"', '"NO ID"')
    ),
    *(
        Equivalent(
            "_evaluation.cache",
            "Cache.lookup",
            "launch = launch_of(environ, launcher)",
            after,
            "Only a take names a launcher (the child's, for its --parent): a"
            " look-up that does not take always has None.",
        )
        for after in (
            "launch = launch_of(environ, None)",
            "launch = launch_of(environ, )",
        )
    ),
    Equivalent(
        "_evaluation.parent",
        "Evaluation.answer",
        "if line is None and slow is not None and time.monotonic() < self.deadline:",
        "if line is None and slow is not None and time.monotonic() <= self.deadline:",
        "Two readings of the monotonic clock, in nanoseconds, equal to the"
        " deadline's: no test or user can make the one instant where they differ.",
    ),
    Equivalent(
        "_evaluation.parent",
        "_cut_at",
        'if event == "exception" and at is frame:',
        'if event == "exception" or at is frame:',
        "cut is frame's own trace (frame.f_trace), never handed to another frame:"
        " every event it sees is frame's, so at is frame always.",
    ),
    Equivalent(
        "_evaluation.parent",
        "Lookup.__init__",
        "self.error: ConfigError | None = None",
        'self.error: ConfigError | None = ""',
        "Read only where no evaluation started, which sets it.",
    ),
    Equivalent(
        "_evaluation.parent",
        "Lookup.__init__",
        "self.switch_error: ConfigError | None = None",
        'self.switch_error: ConfigError | None = ""',
        "lookup_or_spawn, the one maker of a Lookup, sets it as it makes it.",
    ),
    *(
        Equivalent(
            "_evaluation.parent",
            "Lookup.__init__",
            f'self.{name} = ""',
            f"self.{name} = {value}",
            why,
        )
        for name, why in (
            (
                "no_cache",
                "lookup_or_spawn, the one maker of a Lookup, sets it as it makes it.",
            ),
            (
                "missed",
                "Read only where the cache was looked up (a cache, not"
                " --fresh), which sets it.",
            ),
        )
        for value in ("None", '"XXXX"')
    ),
    Equivalent(
        "_evaluation.parent",
        "lookup_or_spawn",
        'no_cache = ""',
        "no_cache = None",
        "Only tested for truth: where it is said it is a reason, set by open_cache.",
    ),
    Equivalent(
        "_evaluation.parent",
        "Waiter._heed",
        'line = b""',
        'line = b"XXXX"',
        "Either is no JSON: the check ended without a verdict, as it is read.",
    ),
    Equivalent(
        "_evaluation.parent",
        "hide_our_frames",
        "frame: FrameType | None = sys._getframe(1)",
        "frame: FrameType | None = sys._getframe(2)",
        "Its callers are the package's own (the wait's): the walk up passes over"
        " them either way, to the same first frame of the program's.",
    ),
    Equivalent(
        "_evaluation.parent",
        "_cut_at",
        "if tb is not None and tb.tb_frame is frame:",
        "if tb is not None or tb.tb_frame is frame:",
        "At a frame's exception event CPython has already put that frame's entry"
        " at the traceback's head: a traceback there is always the frame's (the"
        " test for None stays, against a tracer error in the program's frame).",
    ),
    Equivalent(
        "_evaluation.parent",
        "Waiter.__init__",
        "self.abandoned = False",
        "self.abandoned = None",
        "Only tested for truth.",
    ),
    Equivalent(
        "_evaluation.parent",
        "Waiter.__init__",
        "self.asked = False",
        "self.asked = None",
        "Only tested for truth.",
    ),
    Equivalent(
        "_evaluation.deps",
        "_digest",
        "return hashlib.blake2b(data, digest_size=16).hexdigest()",
        "return hashlib.blake2b(data, ).hexdigest()",
        "A digest is only ever compared with one this function made: another size"
        " is another hash of the same bytes, as unequal to any other file's.",
    ),
    Equivalent(
        "_evaluation.deps",
        "_digest",
        "return hashlib.blake2b(data, digest_size=16).hexdigest()",
        "return hashlib.blake2b(data, digest_size=17).hexdigest()",
        "As above.",
    ),
    Equivalent(
        "_evaluation.deps",
        "Recorder.start",
        "sys.meta_path.insert(0, _Lookups(self))",
        "sys.meta_path.insert(1, _Lookups(self))",
        "The first finder is BuiltinImporter: it finds only built-in modules, "
        "which no file can shadow; every other look-up passes it and reaches the "
        "recorder's finder.",
    ),
    Equivalent(
        "_evaluation.deps",
        "Recorder.start",
        'bytes_environ = getattr(os, "environb", None)',
        'bytes_environ = getattr(os, "environb", )',
        "The package runs on Linux, where os.environb always is.",
    ),
    Equivalent(
        "_evaluation.deps",
        "Recorder.start",
        'self._site = ("<frozen site>", os.path.join(stdlib, "site.py"))',
        'self._site = ("<frozen site>", os.path.join("site.py"))',
        "mutmut runs on Python 3.11+, where site is frozen and this file never "
        "lists a folder; on 3.9 and 3.10 "
        "test_a_folder_site_lists_counts_by_its_pth_files holds it (CI runs the "
        "suite there).",
    ),
    Equivalent(
        "_evaluation.deps",
        "Recorder.start",
        'self._site = ("<frozen site>", os.path.join(stdlib, "site.py"))',
        'self._site = ("<frozen site>", os.path.join(stdlib, ))',
        "As above.",
    ),
    Equivalent(
        "_evaluation.deps",
        "Recorder.start",
        'self._site = ("<frozen site>", os.path.join(stdlib, "site.py"))',
        'self._site = ("<frozen site>", os.path.join(stdlib, "XXsite.pyXX"))',
        "As above.",
    ),
    Equivalent(
        "_evaluation.deps",
        "Recorder.start",
        'self._site = ("<frozen site>", os.path.join(stdlib, "site.py"))',
        'self._site = ("<frozen site>", os.path.join(stdlib, "SITE.PY"))',
        "As above.",
    ),
    Equivalent(
        "_evaluation.deps",
        "Recorder._audit",
        "self.on = False  # nor be recorded in part: no entry",
        "self.on = None  # nor be recorded in part: no entry",
        "Only tested for truth.",
    ),
    Equivalent(
        "_evaluation.deps",
        "Recorder._audit",
        "self.on = False  # nor be recorded in part: no entry",
        "self.on = True  # nor be recorded in part: no entry",
        "broken is set with it: deps() stores nothing, whatever is noted after.",
    ),
    Equivalent(
        "_evaluation.deps",
        "Recorder._note",
        "with contextlib.suppress(ValueError, NotImplementedError):",
        "with contextlib.suppress(ValueError, None):",
        "source_from_cache raises NotImplementedError only where "
        "sys.implementation.cache_tag is None: not on CPython, the package's.",
    ),
    Equivalent(
        "_evaluation.deps",
        "Recorder._note",
        "with contextlib.suppress(ValueError, NotImplementedError):",
        "with contextlib.suppress(ValueError, ):",
        "As above.",
    ),
    Equivalent(
        "_evaluation.deps",
        "Recorder.__init__",
        "self._machinery: tuple[str, ...] = ()",
        "self._machinery: tuple[str, ...] = None",
        "Read only by _note, which runs once start() has set it.",
    ),
    Equivalent(
        "_evaluation.deps",
        "Recorder.__init__",
        "self.on = False",
        "self.on = None",
        "Only tested for truth.",
    ),
    Equivalent(
        "_evaluation.deps",
        "Recorder.__init__",
        "self.on = False",
        "self.on = True",
        "Nothing reads it before start() sets it: the hook, the finder and the "
        "environment that do are made there.",
    ),
    Equivalent(
        "_evaluation.deps",
        "Recorder.__init__",
        "self.broken = False",
        "self.broken = None",
        "Only tested for truth.",
    ),
    Equivalent(
        "_evaluation.deps",
        "Recorder.__init__",
        'self.why = ""',
        "self.why = None",
        "Read only when broken, which sets it.",
    ),
    Equivalent(
        "_evaluation.deps",
        "_RecordingEnviron.__init__",
        "self.replay: list[Any] = []",
        "self.replay: list[Any] = None",
        "Only tested for truth before it is read.",
    ),
    Equivalent(
        "_evaluation.deps",
        "Recorder.deps",
        "self.on = False",
        "self.on = None",
        "Only tested for truth.",
    ),
    Equivalent(
        "_evaluation.deps",
        "Recorder._file",
        "if digest is None and now[0] is not None:",
        "if digest is None and now[1] is not None:",
        "_stamp gives four integers or four Nones: the size is None exactly when"
        " the time is.",
    ),
    Equivalent(
        "_evaluation.deps",
        "changed",
        "if file.digest is None or now[0] is None or _digest(path) != file.digest:",
        "if file.digest is None or now[1] is None or _digest(path) != file.digest:",
        "_stamp gives four integers or four Nones: the size is None exactly when "
        "the time is.",
    ),
    Equivalent(
        "_evaluation.deps",
        "changed",
        "None in (now[0], stamp[0]) or _matching(path, names) != entries",
        "None in (now[1], stamp[0]) or _matching(path, names) != entries",
        "_dir_stamp gives three integers or three Nones: the inode is None "
        "exactly when the time is.",
    ),
    Equivalent(
        "_evaluation.deps",
        "changed",
        "None in (now[0], stamp[0]) or _matching(path, names) != entries",
        "None in (now[0], stamp[1]) or _matching(path, names) != entries",
        "As above: the record's stamp was made by _dir_stamp too.",
    ),
    Equivalent(
        "_evaluation.deps",
        "_RecordingEnviron.__contains__",
        'name = ""',
        "name = None",
        "The name is set from the key before its one use; when that fails it is "
        "never used.",
    ),
    Equivalent(
        "_evaluation.deps",
        "_RecordingEnviron.__contains__",
        'name = ""',
        'name = "XXXX"',
        "As above.",
    ),
    Equivalent(
        "_evaluation.deps",
        "_RecordingEnviron.__contains__",
        "by_presence = False",
        "by_presence = None",
        "Only tested for truth.",
    ),
    Equivalent(
        "_evaluation.deps",
        "_RecordingEnviron.__contains__",
        "by_presence = False",
        "by_presence = True",
        "Reached for a key that is no str (os.environb: no bytes), which "
        "encodekey refuses too: the same error from the same look-up. (A str "
        "whose own __str__ or __hash__ raises would be counted by presence, not "
        "by value: counted either way.)",
    ),
    Equivalent(
        "_evaluation.deps",
        "_RecordingEnviron.__delitem__",
        "self.replay = []",
        "self.replay = None",
        "The replay is only tested for truth before it is read, and each listing "
        "makes a new one.",
    ),
    Equivalent(
        "_evaluation.deps",
        "_RecordingEnviron.__setitem__",
        "self.replay = []",
        "self.replay = None",
        "As above.",
    ),
    Equivalent(
        "_evaluation.deps",
        "_RecordingEnviron._in_walk",
        "self.replay = []  # not the listing's reads: it is over",
        "self.replay = None  # not the listing's reads: it is over",
        "As above.",
    ),
    Equivalent(
        "_evaluation.deps",
        "_RecordingEnviron._walk",
        "self.replay = []",
        "self.replay = None",
        "As above.",
    ),
    Equivalent(
        "_evaluation.deps",
        "_RecordingEnviron.__getitem__",
        "self.read.setdefault(self.text(key), None)",
        "self.read.setdefault(self.text(key), )",
        "setdefault's default is None.",
    ),
    Equivalent(
        "_evaluation.deps",
        "_RecordingEnviron._walk",
        "def _walk(self, listing: bool = False) -> Iterator[Any]:",
        "def _walk(self, listing: bool = True) -> Iterator[Any]:",
        "A walk by __iter__ would end with a listing too, but only a read from "
        "the instruction that last called keys() takes one, and that instruction "
        "(dict(), copy(), {**os.environ}) reads through keys()' own listing, made"
        " anew.",
    ),
    Equivalent(
        "_evaluation.spawns",
        "Wrappers.waiting_first",
        "self.need(environ if isinstance(environ, MutableMapping) else None)",
        "self.need(environ if (isinstance(environ, MutableMapping)) or True else None)",
        "What is not a mapping (fork_exec's close_fds flag, a frozen mapping)"
        " takes no value either way: giving it one raises TypeError, which"
        " need() swallows as its own, after the wait and the value are done.",
    ),
]


def module_of(path: Path) -> str:
    """``.../rocm_hwq_autoset/_cli/verify.py`` -> ``_cli.verify``."""
    rel = path.relative_to(ROOT / PACKAGE).with_suffix("")
    return ".".join(rel.parts)


def source_of(module: str) -> str:
    """``_cli.verify`` -> ``rocm_hwq_autoset/_cli/verify.py``."""
    return str(Path(PACKAGE, *module.split(".")).with_suffix(".py"))


def pattern_of(module: str) -> str:
    """The mutmut names of a module's mutants, as a pattern ``mutmut run`` takes
    (mutmut drops ``__init__`` from them)."""
    dotted = ".".join([PACKAGE, *module.split(".")]).removesuffix(".__init__")
    return f"{dotted}.x*"


def modules() -> list[str]:
    return sorted(module_of(p) for p in (ROOT / PACKAGE).rglob("*.py"))


def changed_modules(since: str) -> list[str]:
    def git(*args: str) -> list[str]:
        done = subprocess.run(["git", *args, "--", PACKAGE], cwd=ROOT,
                              capture_output=True, text=True, check=True)  # fmt: skip
        return done.stdout.split()

    names = git("diff", "--name-only", since) + git(
        "ls-files", "--others", "--exclude-standard"
    )
    return sorted(
        {
            module_of(ROOT / n)
            for n in names
            if n.endswith(".py") and (ROOT / n).exists()
        }
    )


def prepare(relearn: bool) -> None:
    """``mutants/`` with the hooks every tested process loads; ``relearn``:
    forget which tests run which function.

    mutmut learns that in its first run of the whole fast suite (some ten
    minutes on two cores), and later runs keep it: mutmut learns what new
    tests run, and the tests of a test file changed since are forgotten, so
    learnt as new. A change elsewhere (a helper, the package's own calls) is
    not seen: it can only leave alive a mutant a test would kill, never the
    reverse. After such a change, and for the figures of a release,
    ``--relearn``."""
    MUTANTS.mkdir(exist_ok=True)
    shutil.copy(ROOT / "tools" / "mutation_hooks.py", MUTANTS / "mutation_hooks.py")
    (MUTANTS / "sitecustomize.py").write_text(
        "# Written by tools/mutation.py: child interpreters load the hooks too.\n"
        "import mutation_hooks  # noqa: F401\n"
    )
    # The --module child starts under ``python -S`` (process.BOOT) and imports
    # the package from its folder, mutants/, before its site runs: a mutated
    # module's first import, mutmut's trampoline, is found there too.
    import mutmut

    installed = Path(mutmut.__file__).parent
    for source in (installed, *installed.parent.glob("mutmut-*.dist-info")):
        link = MUTANTS / source.name
        if not link.is_symlink():
            link.symlink_to(source, target_is_directory=True)
    stats = MUTANTS / "mutmut-stats.json"
    if relearn:
        stats.unlink(missing_ok=True)
    forget_changed_tests(stats, MUTANTS / "mutation-tests.json")


def forget_changed_tests(stats: Path, learnt: Path) -> list[str]:
    """Drop from mutmut's map the tests of each test file changed or gone
    since the map was learnt (``learnt``: each file's digest then): mutmut
    learns them again as new tests. Returns those files."""
    now = {
        str(path.relative_to(ROOT)): hashlib.sha256(path.read_bytes()).hexdigest()
        for path in sorted((ROOT / "tests").rglob("test_*.py"))
    }
    then = json.loads(learnt.read_text()) if learnt.exists() else now
    changed = sorted(f for f in then if then[f] != now.get(f))
    if stats.exists() and changed:
        data = json.loads(stats.read_text())

        def kept(test: str) -> bool:
            return test.partition("::")[0] not in changed

        data["duration_by_test"] = {
            t: d for t, d in data["duration_by_test"].items() if kept(t)
        }
        data["tests_by_mangled_function_name"] = {
            name: [t for t in tests if kept(t)]
            for name, tests in data["tests_by_mangled_function_name"].items()
        }
        stats.write_text(json.dumps(data))
        print("learnt again, changed:", ", ".join(changed), flush=True)
    learnt.write_text(json.dumps(now))
    return changed


def run(
    selected: list[str],
    workers: int,
    resume: bool = False,
    again: bool = False,
    relearn: bool = False,
) -> int:
    """mutmut over the modules selected (all if none); ``resume``: only the
    mutants an interrupted run left untested; ``again``: those, then the
    mutants left alive, with the current tests; ``relearn``: which tests run
    which function learnt again first."""
    prepare(relearn)
    print("modules:", ", ".join(selected) if selected else "all", flush=True)
    if resume:
        # Without names, mutmut tests only the mutants that have no result yet.
        return _mutmut([], workers)
    if again:
        # mutmut writes the mutants again and forgets the results of each
        # function whose code changed; with one name it tests one mutant.
        known = [n for m, meta in _results().items() if not selected or m in selected
                 for n in meta["exit_code_by_key"]]  # fmt: skip
        if not known:  # never run: everything
            return _mutmut(
                [pattern_of(m) for m in selected] or [f"{PACKAGE}.*"], workers
            )
        status = _mutmut(known[:1], workers)
        if status != 0:
            return status
        names = [
            name
            for module, meta in _results().items()
            if not selected or module in selected
            for name, code in meta["exit_code_by_key"].items()
            if code is None or (code not in KILLED and listed(module, name) is None)
        ]
        print(f"again: {len(names)} mutants new or left alive", flush=True)
        return _mutmut(names, workers) if names else 0
    return _mutmut([pattern_of(m) for m in selected] or [f"{PACKAGE}.*"], workers)


def _mutmut(names: list[str], workers: int) -> int:
    """``mutmut run`` for these mutant names or patterns (none: every mutant
    without a result), its output in ``mutants/mutmut.log``."""
    command = [sys.executable, "-c", "import sys; sys.path.insert(0, 'tools');"
               " import mutation; mutation.patch_mutmut();"
               " from mutmut.__main__ import cli; sys.exit(cli())",
               "run", "--max-children", str(workers), *names]  # fmt: skip
    log = MUTANTS / "mutmut.log"
    print(f"mutmut's output: {log.relative_to(ROOT)}", flush=True)
    start = time.monotonic()
    with open(log, "w") as out:
        status = subprocess.run(command, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL).returncode  # fmt: skip
    print(f"mutmut run: {time.monotonic() - start:.0f} s, status {status}")
    if status != 0:
        print("".join(log.read_text().splitlines(keepends=True)[-40:]))
    return status


def patch_mutmut() -> None:
    """In mutmut's own process. Its workers are its children, and it waits for
    any child (``os.wait``): a process a test started and left to end on its
    own (the ``--module`` child outlives its launch by design) is a child of
    that process too, and its end, taken for a worker's, stopped the run
    (``KeyError``). Here such an end is passed over."""
    from mutmut.runners.harness import PytestRunner
    from mutmut.workers.isolation import ForkRunner, MutantResult

    def wait_for_result(self: Any, timeout: float | None = None) -> Any:
        if self._no_tests_results:
            return self._no_tests_results.pop(0)
        while True:
            pid, wait_status = os.wait()
            worker = self._running.pop(pid, None)
            if worker is not None:
                break
        exit_code = os.waitstatus_to_exitcode(wait_status)
        duration = (datetime.now() - worker.start_time).total_seconds()
        return MutantResult(worker.mutant_name, exit_code, duration)

    ForkRunner.wait_for_result = wait_for_result

    # Each mutant's tests run up to the first that fails, fastest first: the
    # tests of the mutant's own module (tests/*/test_argv.py for _argv) go
    # before the others, most likely to fail first.
    run_tests = PytestRunner.run_tests

    def home_first_run(self: Any, *, mutant_name: str | None, tests: Any) -> int:
        if mutant_name:
            tests = home_first(mutant_name, list(tests))
        return int(run_tests(self, mutant_name=mutant_name, tests=tests))

    PytestRunner.run_tests = home_first_run  # type: ignore[method-assign]

    # mutmut learns what new tests run by naming each on pytest's command
    # line, and pytest takes no name whose parameters hold brackets
    # (test_mutation_list's): their files are named instead.
    run_stats = PytestRunner.run_stats

    def run_stats_by_file(self: Any, *, tests: Any) -> int:
        files = sorted({test.partition("::")[0] for test in tests})
        return int(run_stats(self, tests=files))

    PytestRunner.run_stats = run_stats_by_file  # type: ignore[method-assign]


def home_first(mutant: str, tests: list[str]) -> list[str]:
    """``tests`` in their order, those of the mutant's module's own test
    file(s) first."""
    module = mutant.rpartition(".")[0].rpartition(".")[2].lstrip("_")
    home = f"/test_{module}.py"
    return sorted(tests, key=lambda test: not test.partition("::")[0].endswith(home))


# The results.


class Tally(NamedTuple):
    module: str
    total: int
    killed: int
    alive: list[str]
    """Survived, or no test ran the code, and not listed as equivalent."""
    no_tests: list[str]
    equivalent: list[tuple[str, Equivalent]]
    seconds: float
    """The tests' time over all mutants (one worker's worth)."""

    @property
    def rate(self) -> float:
        counted = self.total - len(self.equivalent)
        return self.killed / counted if counted else 1.0


def _results() -> dict[str, dict[str, Any]]:
    found = {}
    for meta in sorted((MUTANTS / PACKAGE).rglob("*.py.meta")):
        source = ROOT / meta.relative_to(MUTANTS).with_suffix("")
        found[module_of(source)] = json.loads(meta.read_text())
    return found


def diff_of(module: str, name: str) -> tuple[str, list[str], list[str]]:
    """A mutant's diff, and its removed and added lines (stripped)."""
    from mutmut.mutation.diff_apply import get_diff_for_mutant

    cwd = os.getcwd()
    os.chdir(ROOT)
    try:
        text = get_diff_for_mutant(name, path=source_of(module))
    finally:
        os.chdir(cwd)
    lines = text.splitlines()[2:]
    removed = [ln[1:].strip() for ln in lines if ln.startswith("-")]
    added = [ln[1:].strip() for ln in lines if ln.startswith("+")]
    return text, removed, added


def function_of(name: str) -> str:
    """``rocm_hwq_autoset._x.xǁWaiterǁneed__mutmut_3`` -> ``Waiter.need``."""
    mangled = name.rpartition(".")[2].partition("__mutmut_")[0]
    if mangled.startswith("xǁ"):
        return ".".join(mangled[2:].split("ǁ"))
    return mangled[2:]


def listed(module: str, name: str) -> Equivalent | None:
    function = function_of(name)
    candidates = [e for e in EQUIVALENT
                  if (e.module, e.function) == (module, function)]  # fmt: skip
    if not candidates:
        return None
    _, removed, added = diff_of(module, name)
    for entry in candidates:
        if entry.before in removed and entry.after in added:
            return entry
    return None


def tally() -> list[Tally]:
    out = []
    for module, meta in _results().items():
        codes = {n: c for n, c in meta["exit_code_by_key"].items() if c is not None}
        if not codes:  # not run yet
            continue
        killed, alive, no_tests, equal = 0, [], [], []
        for name, code in sorted(codes.items()):
            if code in KILLED:
                killed += 1
                continue
            entry = listed(module, name)
            if entry is not None:
                equal.append((name, entry))
                continue
            alive.append(name)
            if code in NO_TESTS:
                no_tests.append(name)
        seconds = sum(meta.get("durations_by_key", {}).values())
        out.append(Tally(module, len(codes), killed, alive, no_tests, equal, seconds))
    return out


def report(check: bool, diffs: bool, stubs: bool) -> int:
    rows = tally()
    if not rows:
        print("no results: run `python tools/mutation.py run` first")
        return 1
    print(f"{'module':<20} {'mutants':>7} {'killed':>6} {'alive':>5} {'(no test)':>9}"
          f" {'equivalent':>10} {'rate':>6} {'test s':>7}")  # fmt: skip
    failing = []
    for t in rows:
        mark = " *" if t.module in STARTUP else ""
        print(f"{t.module + mark:<20} {t.total:>7} {t.killed:>6} {len(t.alive):>5}"
              f" {len(t.no_tests):>9} {len(t.equivalent):>10} {t.rate:>6.1%}"
              f" {t.seconds:>7.0f}")  # fmt: skip
        if t.module in STARTUP and t.rate < TARGET:
            failing.append(t.module)
    total = sum(t.total for t in rows)
    killed = sum(t.killed for t in rows)
    equal = sum(len(t.equivalent) for t in rows)
    rate = killed / (total - equal) if total > equal else 1.0
    alive = sum(len(t.alive) for t in rows)
    no_tests = sum(len(t.no_tests) for t in rows)
    print(f"{'all':<20} {total:>7} {killed:>6} {alive:>5} {no_tests:>9} {equal:>10}"
          f" {rate:>6.1%}")  # fmt: skip
    print("(* the start-up path; rate = killed / (mutants - equivalent))")
    if rate < TARGET:
        failing.append("all")
    for t in rows:
        for name in t.alive:
            text, removed, added = diff_of(t.module, name)
            if diffs:
                how = " (no test ran it)" if name in t.no_tests else ""
                print(f"\n# {name}{how}\n{text}")
            if stubs:
                before = removed[0] if removed else ""
                after = added[0] if added else ""
                print(f"    Equivalent({t.module!r}, {function_of(name)!r},"
                      f" {before!r}, {after!r}, 'WHY'),")  # fmt: skip
    if check and failing:
        print(f"below {TARGET:.0%}: {', '.join(failing)}")
        return 1
    return 0


def equivalents() -> int:
    """The allow-list as a Markdown table."""
    print("| module | function | line | becomes | why no user can tell |")
    print("| --- | --- | --- | --- | --- |")
    for e in EQUIVALENT:
        cells = [e.module, e.function, f"`{e.before}`", f"`{e.after}`", e.why]
        print("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
    return 0


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p_run = sub.add_parser("run", help="mutate, test, report")
    p_run.add_argument("modules", nargs="*", help="e.g. _decision _cli.verify")
    p_run.add_argument("--changed", nargs="?", const="HEAD", metavar="REV",
                       help="the modules changed since REV (default HEAD)")  # fmt: skip
    p_run.add_argument("--workers", type=int, default=2)
    p_run.add_argument(
        "--resume", action="store_true", help="only what an interrupted run left"
    )
    p_run.add_argument(
        "--again", action="store_true",
        help="changed functions' mutants and those left alive, with today's tests",
    )  # fmt: skip
    p_run.add_argument(
        "--relearn", action="store_true",
        help="learn which tests run which function again (after changing tests)",
    )  # fmt: skip
    p_run.add_argument("--check", action="store_true")
    p_rep = sub.add_parser("report", help="the last results")
    p_rep.add_argument("--check", action="store_true")
    p_rep.add_argument("--diffs", action="store_true")
    p_rep.add_argument("--stubs", action="store_true")
    sub.add_parser("equivalents", help="the allow-list, as Markdown")
    opts = parser.parse_args(argv)
    if opts.command == "equivalents":
        return equivalents()
    if opts.command == "report":
        return report(opts.check, opts.diffs, opts.stubs)
    selected = list(opts.modules)
    if opts.changed:
        selected += changed_modules(opts.changed)
        if not selected:
            print(f"no module of {PACKAGE} changed since {opts.changed}")
            return 0
    unknown = [m for m in selected if m not in modules()]
    if unknown:
        parser.error(f"not a module of {PACKAGE}: {', '.join(unknown)}")
    status = run(
        sorted(set(selected)), opts.workers, opts.resume, opts.again, opts.relearn
    )
    if status != 0:
        return status
    return report(opts.check, diffs=False, stubs=False)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

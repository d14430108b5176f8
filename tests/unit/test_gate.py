"""The gate: the ``.pth`` line (generated from tools/pth_line.py) and the PEP
829 entry point open for a launch and for nothing else, and agree with each
other and with the launch the hook finds (``_argv.find_launch``)."""

from __future__ import annotations

import importlib.abc
import json
import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType, SimpleNamespace
from typing import Any

import pytest

from rocm_hwq_autoset._argv import find_launch
from rocm_hwq_autoset._decision import PREFIX

from ..helpers import MUTATION, UNSET_TAIL, check_lines, child_env
from ..helpers import said as parsed

ROOT = Path(__file__).resolve().parents[2]
PTH_LINE = (ROOT / "rocm_hwq_autoset.pth").read_text()
START = (ROOT / "rocm_hwq_autoset.start").read_text()
TITAN = "/src/torchtitan/torchtitan/train.py"
#: ``python -m torchtitan.train ARGS``: ``sys.argv`` and ``sys.orig_argv``.
M_TITAN = ["python", "-m", "torchtitan.train"]

#: (environment, sys.argv, sys.orig_argv (None: ``python`` + sys.argv), opens).
# fmt: off
CASES = [
    ({}, ["x.py"], None, False),
    ({}, ["x.py", "--job.config_file", "a"], None, True),
    ({}, ["-m", "--job.config-file=a"], None, True),
    ({}, ["-c", "--job.config_file="], None, True),  # the hook names the flag
    ({}, ["x.py", "--module", "llama3"], None, False),  # no torchtitan
    ({}, [TITAN, "--module", "llama3"], None, True),
    ({}, [TITAN, "--module=llama3"], None, True),
    ({}, ["-m", "--module", "llama3"], [*M_TITAN, "--module", "llama3"], True),
    ({}, ["/venv/bin/torchrun", "--nproc-per-node", "8", "-m", "torchtitan.train",
          "--module", "llama3"], None, True),
    # Near misses: the filter's substrings, no launch flag.
    ({}, ["-c", "--job.configuration"], None, False),
    ({}, ["-c", "--job.config_files", "a"], None, False),
    ({}, ["x.py", "job.config_file"], None, False),
    ({}, ["x.py", "foo--job.config_file"], None, False),
    ({}, ["-c", "--module-path", "x"], ["python", "-c", "pass", "--module-path", "x"],
     False),
    ({}, [TITAN, "--modules"], None, False),
    ({}, ["/venv/bin/mypy", "--module", "m"], None, False),
    # The interpreter's own path is no program: a venv inside a torchtitan clone.
    ({}, ["/venv/bin/mypy", "--module", "m"],
     ["/src/torchtitan/.venv/bin/python", "/venv/bin/mypy", "--module", "m"], False),
    ({"ROCM_HWQ_AUTOSET": "0"}, ["x", "--job.config_file", "a"], None, False),
    ({"ROCM_HWQ_AUTOSET": " OFF "}, ["x", "--job.config_file", "a"], None, False),
    ({"ROCM_HWQ_AUTOSET": "force"}, ["x", "--job.config_file", "a"], None, True),
]
# fmt: on
IDS = [
    f"{' '.join(argv)}{' (' + str(env) + ')' if env else ''}"
    for env, argv, _, _ in CASES
]  # fmt: skip


def _orig(argv: list[str], orig_argv: list[str] | None) -> list[str]:
    return ["python", *argv] if orig_argv is None else orig_argv


PROBE = """
import json, os, sys
sys.argv = json.loads(os.environ["PROBE_ARGV"])
sys.orig_argv = json.loads(os.environ["PROBE_ORIG_ARGV"])
called = []
if os.environ["PROBE_STUB"]:
    import rocm_hwq_autoset._hook as hook
    hook.run = lambda: called.append("run")
if os.environ["PROBE_MODE"] == "pth":
    exec(os.environ["PROBE_PTH"])
else:
    import pkgutil
    pkgutil.resolve_name(os.environ["PROBE_START"].strip())()
print(json.dumps([called == ["run"], sorted(m for m in sys.modules
                  if m.split(".")[0] == "rocm_hwq_autoset")]))
"""


def probe(
    mode: str, env: dict[str, str], argv: list[str], orig_argv: list[str],
    *, stub: bool = True,
) -> tuple[bool, list[str]]:  # fmt: skip
    """In a fresh ``python -S``: whether the gate ran the hook, and the package
    modules imported."""
    full_env = child_env(
        {
            "PROBE_ARGV": json.dumps(argv),
            "PROBE_ORIG_ARGV": json.dumps(orig_argv),
            "PROBE_MODE": mode,
            "PROBE_STUB": "1" if stub else "",
            "PROBE_PTH": PTH_LINE,
            "PROBE_START": START,
            "PYTHONPATH": str(ROOT),
            **env,
        },
        no_site=True,
    )
    out = subprocess.run(
        [sys.executable, "-S", "-c", PROBE], env=full_env,
        capture_output=True, text=True, check=True, timeout=60,
    )  # fmt: skip
    assert out.stderr == ""
    ran, modules = json.loads(out.stdout)
    return ran, modules


@pytest.mark.timeout(60)
@pytest.mark.parametrize("mode", ["pth", "start"])
@pytest.mark.parametrize(("env", "argv", "orig_argv", "wanted"), CASES, ids=IDS)
def test_cheap_check(
    mode: str, env: dict[str, str], argv: list[str], orig_argv: list[str] | None,
    wanted: bool,
) -> None:  # fmt: skip
    ran, _ = probe(mode, env, argv, _orig(argv, orig_argv))
    assert ran is wanted


@pytest.mark.timeout(60)
@pytest.mark.parametrize(
    ("env", "argv", "orig_argv", "wanted"),
    [case for case in CASES if not case[3]],
    ids=[i for i, case in zip(IDS, CASES) if not case[3]],
)
def test_the_pth_line_imports_nothing_of_the_package_unless_it_opens(
    env: dict[str, str], argv: list[str], orig_argv: list[str] | None,
    wanted: bool,
) -> None:  # fmt: skip
    """A near miss (``--module-path``, ``--modules``, ``--job.config_files``,
    ``mypy --module m``) costs the filter and the exact test, never an import."""
    ran, modules = probe("pth", env, argv, _orig(argv, orig_argv), stub=False)
    assert (ran, modules) == (False, [])


@pytest.mark.parametrize(("env", "argv", "orig_argv", "wanted"), CASES, ids=IDS)
def test_the_gate_opens_for_every_launch_the_hook_finds(
    env: dict[str, str], argv: list[str], orig_argv: list[str] | None,
    wanted: bool,
) -> None:  # fmt: skip
    """The gate is the hook's test made cheap: it may open where no launch is
    (a flag without its value, which the hook then names), never stay shut for
    one."""
    if find_launch(argv, _orig(argv, orig_argv)) is not None:
        assert wanted or env.get("ROCM_HWQ_AUTOSET", "").strip().lower() in (
            "0", "off"
        )  # fmt: skip


def test_the_pth_line_is_generated_from_its_readable_source() -> None:
    """``rocm_hwq_autoset.pth`` is ``tools/pth_line.py``'s :func:`line` (run
    ``python tools/pth_line.py --write`` after changing it)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(
        "pth_line", ROOT / "tools" / "pth_line.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert module.line() == PTH_LINE
    assert module.main(["--check"]) == 0
    compile(module.GATE, "gate", "exec")  # the part exec() runs is Python


def test_the_gates_flags_are_the_launch_forms() -> None:
    """The gate imports nothing of the package, so it keeps a literal copy of
    the flags that open it: each form's ``opens``, for any program or, for a
    form made only for torchtitan's, where the command line names it."""
    import _rocm_hwq_autoset_gate as gate
    from rocm_hwq_autoset._argv import FORMS

    anywhere = [form.opens for form in FORMS if not form.torchtitan_only]
    titan = [form.opens for form in FORMS if form.torchtitan_only]
    assert (anywhere, titan) == ([gate.CONFIG_FILE_FLAGS], [(gate.MODULE_FLAG,)])
    assert all(set(form.opens) <= set(form.flags) for form in FORMS)


@pytest.mark.parametrize("switch", ["", "0", " OFF ", "force"])
@pytest.mark.parametrize(
    "training",
    [[], ["--job.config_file", "j"], ["--job.config-file=j"], ["--module", "m"],
     ["--module=m", "--config", "c"], ["--config", "c"], ["--modules"],
     ["--job.config_files", "j"], ["--a.b", "--module"]],
)  # fmt: skip
def test_doctor_asks_the_forms_what_the_gate_decides(
    training: list[str], switch: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``doctor``'s question, whether the gate opens for ``python -m
    torchtitan.train TRAINING``, is answered from the forms without the gate
    (the package never imports it): as the gate answers it."""
    import _rocm_hwq_autoset_gate as gate
    from rocm_hwq_autoset._cli import doctor

    monkeypatch.setenv("ROCM_HWQ_AUTOSET", switch)
    opens = gate.may_be_launch(["-m", *training], None, ["", "torchtitan", *training])
    assert doctor._may_be_launch(training) is opens


def test_the_modules_beside_the_package_name_it_as_it_names_itself() -> None:
    """They import nothing of the package, so each keeps a literal copy of its
    name (``_environ.NAME``: the distribution, the prefix of its lines)."""
    import _rocm_hwq_autoset_cli as cli
    import _rocm_hwq_autoset_gate as gate
    import _rocm_hwq_autoset_reinstall as reinstall
    from rocm_hwq_autoset._environ import NAME

    assert (gate.PROG, cli.PROG, reinstall.DISTRIBUTION) == (NAME, NAME, NAME)


def test_pth_is_one_import_line() -> None:
    lines = PTH_LINE.splitlines()
    assert len(lines) == 1 and lines[0].startswith("import ")
    assert START.strip() == "_rocm_hwq_autoset_gate:start"


@pytest.mark.timeout(60)
@pytest.mark.parametrize("module", ["rocm_hwq_autoset", "_rocm_hwq_autoset_gate",
                                    "_rocm_hwq_autoset_cmdline",
                                    "_rocm_hwq_autoset_reinstall",
                                    "_rocm_hwq_autoset_cli"])  # fmt: skip
def test_entry_module_imports_only_os_and_sys(module: str) -> None:
    """The gate beside the package, which every process whose arguments pass
    the filter imports (every process on 3.15+), and the package's own
    ``__init__`` import nothing else. (In a mutation run every mutated module
    imports mutmut's trampoline: that is imported first, as not ours.)"""
    mutmut = "import mutmut.mutation.trampoline; " if MUTATION[0] in os.environ else ""
    code = (
        f"import os, sys; {mutmut}before = set(sys.modules); import {module}; "
        "print(sorted(set(sys.modules) - before))"
    )
    out = subprocess.run(
        [sys.executable, "-S", "-c", code, "--module-path", "x"],
        env=child_env({"PYTHONPATH": str(ROOT)}, no_site=True),
        capture_output=True, text=True, check=True, timeout=60,
    )  # fmt: skip
    assert out.stdout.strip() == f"[{module!r}]"


@pytest.mark.parametrize(("env", "argv", "orig_argv", "wanted"), CASES, ids=IDS)
def test_the_gate_in_this_process(
    env: dict[str, str], argv: list[str], orig_argv: list[str] | None,
    wanted: bool, monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    """The same table, through ``start()`` as the .pth line calls it here."""
    import _rocm_hwq_autoset_gate as gate
    from rocm_hwq_autoset import _hook

    called: list[str] = []
    monkeypatch.setattr(_hook, "run", lambda: called.append("run"))
    monkeypatch.setattr(sys, "argv", argv)
    monkeypatch.setattr(sys, "orig_argv", _orig(argv, orig_argv), raising=False)
    monkeypatch.delenv("ROCM_HWQ_AUTOSET", raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    gate.start()
    assert called == (["run"] if wanted else [])
    assert gate.may_be_launch() is wanted
    given = gate.may_be_launch(argv, env, _orig(argv, orig_argv))
    assert given is wanted


def test_the_gate_never_raises(monkeypatch: pytest.MonkeyPatch) -> None:
    """No sys.argv (an embedded interpreter), a hook that fails: nothing."""
    import _rocm_hwq_autoset_gate as gate
    from rocm_hwq_autoset import _hook

    monkeypatch.delattr(sys, "argv")
    assert gate.may_be_launch() is False
    monkeypatch.setattr(sys, "argv", [TITAN, "--module", "m"], raising=False)

    def broken() -> None:
        raise RuntimeError("broken install")

    monkeypatch.setattr(_hook, "run", broken)
    gate.start()  # returns


def test_the_public_names_and_a_typo() -> None:
    import rocm_hwq_autoset
    from rocm_hwq_autoset._api import recommend
    from rocm_hwq_autoset._config import ConfigError
    from rocm_hwq_autoset._model import Recommendation

    assert rocm_hwq_autoset.recommend is recommend
    assert rocm_hwq_autoset.Recommendation is Recommendation
    assert rocm_hwq_autoset.ConfigError is ConfigError
    with pytest.raises(AttributeError) as caught:
        rocm_hwq_autoset.recomend  # noqa: B018
    with pytest.raises(AttributeError) as plain:  # as Python says it of any module
        ModuleType("rocm_hwq_autoset").recomend  # noqa: B018
    assert str(caught.value) == str(plain.value)


# Python 3.9: no sys.orig_argv, and sys.argv of ``python -m M`` is ["-m", ...].


def write_cmdline(path: Path, data: bytes) -> str:
    path.write_bytes(data)
    return str(path)


LINE_OF_M = b"python\0-m\0torchtitan.train\0--module\0llama3\0"


@pytest.mark.parametrize(
    ("data", "argv", "learned"),
    [
        (LINE_OF_M, ["-m", "--module", "llama3"],
         ["python", "-m", "torchtitan.train", "--module", "llama3"]),
        (b"/v/bin/python3.9\0-Im\0torchtitan.train\0\0", ["-m", ""],
         ["/v/bin/python3.9", "-Im", "torchtitan.train", ""]),
        (b"python\0-m\0t\xffx\0a\0", ["-m", "a"], ["python", "-m", "t\udcffx", "a"]),
        # Not this process's arguments (changed, or another process's line).
        (LINE_OF_M, ["-m", "--module", "llama4"], None),
        (b"--module\0llama3\0", ["-m", "--module", "llama3"], None),
        (LINE_OF_M[:-1], ["-m", "--module", "llama3"], None),  # cut short
        (b"", ["-m"], None),
    ],
)  # fmt: skip
def test_the_command_line_where_python_has_no_orig_argv(
    data: bytes, argv: list[str], learned: list[str] | None,
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    import _rocm_hwq_autoset_cmdline as cmdline

    monkeypatch.setattr(cmdline, "PROC_CMDLINE", write_cmdline(tmp_path / "c", data))
    assert cmdline.command_line(argv) == learned


def test_the_command_line_is_read_bounded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import _rocm_hwq_autoset_cmdline as cmdline

    line = write_cmdline(tmp_path / "c", LINE_OF_M)
    monkeypatch.setattr(cmdline, "PROC_CMDLINE", line)
    argv = ["-m", "--module", "llama3"]
    monkeypatch.setattr(cmdline, "MAX_CMDLINE_BYTES", len(LINE_OF_M))
    assert cmdline.command_line(argv) is not None
    monkeypatch.setattr(cmdline, "MAX_CMDLINE_BYTES", len(LINE_OF_M) - 1)
    assert cmdline.command_line(argv) is None  # longer than the bound: not read
    monkeypatch.setattr(cmdline, "PROC_CMDLINE", str(tmp_path / "none"))
    assert cmdline.command_line(argv) is None  # no /proc


def test_the_real_command_line(tmp_path: Path) -> None:
    """A real process's own, as /proc gives it: sys.orig_argv where there is
    one (a script of its own: a pytest-xdist worker runs ``python -c``)."""
    script = tmp_path / "train.py"
    script.write_text(
        "import json, sys\n"
        "import _rocm_hwq_autoset_cmdline as cmdline\n"
        "print(json.dumps([cmdline.command_line(sys.argv),"
        " getattr(sys, 'orig_argv', None)]))\n"
    )
    args = [sys.executable, str(script), "--module", "llama3", "--config", "x"]
    done = subprocess.run(args, capture_output=True, text=True, timeout=60,
                          env={**os.environ, "ROCM_HWQ_AUTOSET": "0"})  # fmt: skip
    assert done.returncode == 0, done.stderr
    learned, orig = json.loads(done.stdout)
    assert learned is not None
    if orig is not None:
        assert learned == orig


@pytest.mark.parametrize(
    ("words", "opens"),
    [
        (["python", "-m", "torchtitan.train"], True),
        (["python3.9", "-u", "-m", "torchtitan.train"], True),
        (["python", "-m", "mypy"], False),  # --module of another program
    ],
)
def test_python_m_on_python_3_9_opens_the_gate_by_its_command_line(
    words: list[str], opens: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Was: ``python3.9 -m torchtitan.train --module M`` was turned away: its
    sys.argv holds only the arguments, and 3.9 has no sys.orig_argv."""
    import _rocm_hwq_autoset_cmdline as cmdline
    import _rocm_hwq_autoset_gate as gate

    args = ["--module", "llama3", "--config", "c"]
    data = b"".join(w.encode() + b"\0" for w in [*words, *args])
    monkeypatch.setattr(cmdline, "PROC_CMDLINE", write_cmdline(tmp_path / "c", data))
    monkeypatch.setattr(sys, "argv", ["-m", *args])
    monkeypatch.delattr(sys, "orig_argv", raising=False)
    monkeypatch.delenv("ROCM_HWQ_AUTOSET", raising=False)
    assert gate.may_be_launch() is opens
    # Given its arguments, the gate reads no process's command line.
    assert gate.may_be_launch(["-m", *args], {}) is False


@pytest.mark.parametrize(
    "argv", [["-m", "x"], ["-m", "--job.config_file", "j"], ["-m", "--modules"]]
)
def test_the_command_line_is_read_only_for_a_module_flag(
    argv: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The idle path (and a TOML launch, which any program makes) never reads it."""
    import _rocm_hwq_autoset_cmdline as cmdline
    import _rocm_hwq_autoset_gate as gate

    def never(argv: object) -> None:
        raise AssertionError("read /proc/self/cmdline")

    monkeypatch.setattr(cmdline, "command_line", never)
    monkeypatch.setattr(sys, "argv", argv)
    monkeypatch.delattr(sys, "orig_argv", raising=False)
    monkeypatch.delenv("ROCM_HWQ_AUTOSET", raising=False)
    assert gate.may_be_launch() is ("--job.config_file" in argv)


# The package's files gone (an editable install whose checkout lost them): the
# gate module beside it survives, and says so.


class _Dist:
    """A distribution whose ``direct_url.json`` is ``recorded``."""

    def __init__(self, recorded: str | None) -> None:
        self.recorded = recorded

    def read_text(self, name: str) -> str | None:
        assert name == "direct_url.json"
        return self.recorded


@pytest.mark.parametrize(
    ("recorded", "how", "command"),
    [
        ('{"url": "file:///src/my%20co", "dir_info": {"editable": true}}',
         " (an editable install of /src/my co)", "-m pip install -e '/src/my co'"),
        ('{"url": "file:///src/co", "dir_info": {}}', " (installed from /src/co)",
         "-m pip install --force-reinstall --no-deps /src/co"),
        ('{"url": "file:///w/r-0.3.0-py3-none-any.whl", "archive_info": {}}',
         " (installed from /w/r-0.3.0-py3-none-any.whl)",
         "-m pip install --force-reinstall --no-deps /w/r-0.3.0-py3-none-any.whl"),
        ('{"url": "https://h/r.git", "vcs_info": {"vcs": "git", "commit_id": "ab"}}',
         " (installed from git+https://h/r.git@ab)",
         "-m pip install --force-reinstall --no-deps git+https://h/r.git@ab"),
        (None, "", "-m pip install --force-reinstall --no-deps rocm-hwq-autoset"),
    ],
)  # fmt: skip
def test_reinstall_as_it_was_installed(
    recorded: str | None, how: str, command: str, monkeypatch: pytest.MonkeyPatch,
    request: pytest.FixtureRequest,
) -> None:  # fmt: skip
    """From the distribution's PEP 610 record: an editable install again from
    its checkout, anything else from the same source (the index: by name)."""
    from importlib import metadata

    import _rocm_hwq_autoset_reinstall as gate

    monkeypatch.setattr(metadata, "distribution", lambda name: _Dist(recorded))
    monkeypatch.setattr(sys, "executable", "/venv/bin/python")
    assert gate.reinstall() == (how, f"/venv/bin/python {command}")

    def none(name: str) -> object:
        raise metadata.PackageNotFoundError(name)

    monkeypatch.setattr(metadata, "distribution", none)
    how, command = gate.reinstall()  # no record: from the checkout, by hand
    pip = ["/venv/bin/python", "-m", "pip", "install", "CHECKOUT"]
    assert command.split()[:5] == pip
    check_lines(request, [("no distribution", f"{how}: {command}")], every_case=False)


UNIMPORTABLE = (
    "the package cannot be imported (ModuleNotFoundError: No module named"
    " 'rocm_hwq_autoset'): its files are missing (an editable install of /co);"
    " reinstall: /venv/bin/python -m pip install -e /co"
)


@pytest.fixture
def package_gone(monkeypatch: pytest.MonkeyPatch) -> Any:
    """The package cannot be imported; the modules beside it can: the console
    script's and the gate's entries."""
    import _rocm_hwq_autoset_cli as cli
    import _rocm_hwq_autoset_gate as gate
    import _rocm_hwq_autoset_reinstall as reinstall

    class Gone(importlib.abc.MetaPathFinder):
        def find_spec(self, name: str, *args: object) -> None:
            if name.split(".")[0] == "rocm_hwq_autoset":
                raise ModuleNotFoundError(f"No module named {name!r}", name=name)

    for name in [m for m in sys.modules if m.split(".")[0] == "rocm_hwq_autoset"]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setattr(sys, "meta_path", [Gone(), *sys.meta_path])
    monkeypatch.setattr(reinstall, "reinstall",
                        lambda: (" (an editable install of /co)",
                                 "/venv/bin/python -m pip install -e /co"))  # fmt: skip
    monkeypatch.setattr(gate, "_said", [])
    return SimpleNamespace(main=cli.main, start=gate.start)


@pytest.mark.parametrize(
    ("args", "stdout"),
    [
        (["doctor"], ""),
        (["explain", "--json", "--job.config_file", "j"],
         json.dumps({"error": UNIMPORTABLE}) + "\n"),
        (["explain", "--export", "--job.config_file", "j"], "false\n"),
        (["explain", "--", "--json"], ""),
    ],
)  # fmt: skip
def test_the_console_script_without_the_package_says_what_is_missing(
    args: list[str], stdout: str, package_gone: Any,
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    """Was: a ModuleNotFoundError traceback. One line, exit 2, and stdout's
    answer to a failure as the command line gives it."""
    monkeypatch.setattr(sys, "argv", ["rocm-hwq-autoset", *args])
    assert package_gone.main() == 2
    out, err = capsys.readouterr()
    assert (out, err) == (stdout, f"rocm-hwq-autoset: error: {UNIMPORTABLE}\n")


@pytest.mark.parametrize("level", ["verbose", " Verbose ", "", "quiet"])
def test_a_launch_without_the_package_says_it_in_verbose_mode_only(
    level: str, package_gone: Any, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    """Was: nothing even in verbose mode. Once however often site calls it."""
    monkeypatch.setattr(sys, "argv", ["train.py", "--job.config_file", "j.toml"])
    monkeypatch.setenv("ROCM_HWQ_AUTOSET_LOG", level)
    monkeypatch.delenv("ROCM_HWQ_AUTOSET", raising=False)
    package_gone.start()
    package_gone.start()
    said = capsys.readouterr()
    assert said.out == ""
    if level.strip().lower() == "verbose":
        # The gate's own line, with the package's lead and tail.
        assert said.err == f"{PREFIX}warning: {UNIMPORTABLE}; {UNSET_TAIL}\n"
    else:
        assert said.err == ""


@pytest.mark.parametrize(("level", "switch"),
                         [("verbose", "1"), ("", "1"), ("verbose", "0")])  # fmt: skip
def test_a_slip_for_the_config_file_flag_is_said_in_verbose_mode(
    level: str, switch: str, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str], request: pytest.FixtureRequest,
) -> None:  # fmt: skip
    """Issue #37: ``--job.config job.toml`` under ``ROCM_HWQ_AUTOSET_LOG=verbose``
    said nothing at all (the gate turned it away). Once per process; nothing
    by default, or with the switch off."""
    import _rocm_hwq_autoset_gate as gate

    monkeypatch.setattr(gate, "_said", [])
    monkeypatch.setattr(sys, "argv", [TITAN, "--job.config", "job.toml"])
    monkeypatch.setenv("ROCM_HWQ_AUTOSET_LOG", level)
    monkeypatch.setenv("ROCM_HWQ_AUTOSET", switch)
    gate.start()
    gate.start()
    said = capsys.readouterr()
    assert said.out == ""
    if not (level and switch == "1"):
        assert said.err == ""
        return
    lead, message = parsed(said.err)  # a skip, naming the slip and the flag meant
    assert lead == "skip" and message.split()[0] == "--job.config"
    assert message.split()[-1] == "--job.config_file?"
    check_lines(request, [("--job.config job.toml", said.err)], every_case=False)


def test_the_console_script_runs_the_command_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import _rocm_hwq_autoset_cli as gate
    from rocm_hwq_autoset import __version__

    monkeypatch.setattr(sys, "argv", ["rocm-hwq-autoset", "--version"])
    with pytest.raises(SystemExit) as stop:
        gate.main()
    assert stop.value.code == 0
    assert capsys.readouterr().out == f"rocm-hwq-autoset {__version__}\n"


def test_the_console_script_is_the_gate_modules() -> None:
    """It must survive the package: it lives beside it."""
    from rocm_hwq_autoset._config import parse_toml

    project = parse_toml((ROOT / "pyproject.toml").read_bytes())["project"]
    assert project["scripts"] == {"rocm-hwq-autoset": "_rocm_hwq_autoset_cli:main"}

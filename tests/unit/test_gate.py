"""The gate: the cheap check in the .pth line and in the PEP 829 entry point
agree, and agree with the decision's reading of the switch."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from ..helpers import child_env

ROOT = Path(__file__).resolve().parents[2]
PTH_LINE = (ROOT / "rocm_hwq_autoset.pth").read_text()
START = (ROOT / "rocm_hwq_autoset.start").read_text()

CASES = [
    ({}, ["x.py"], False),
    ({}, ["x.py", "--job.config_file", "a"], True),
    ({}, ["-m", "--job.config-file=a"], True),
    ({}, ["-c", "--job.configuration"], True),  # cheap check; the hook decides
    ({}, ["x.py", "--module", "llama3"], True),  # the hook checks for torchtitan
    ({}, ["x.py", "job.config_file"], False),
    ({}, ["x.py", "foo--job.config_file"], False),  # the .pth passes it, start() not
    ({}, ["x.py", "--modules"], True),  # cheap check; the hook decides
    ({"ROCM_HWQ_AUTOSET": "0"}, ["x", "--job.config_file", "a"], False),
    ({"ROCM_HWQ_AUTOSET": " OFF "}, ["x", "--job.config_file", "a"], False),
    ({"ROCM_HWQ_AUTOSET": "force"}, ["x", "--job.config_file", "a"], True),
]

PROBE = """
import json, os, sys
sys.argv = json.loads(os.environ["PROBE_ARGV"])
called = []
import rocm_hwq_autoset._hook as hook
hook.run = lambda: called.append("run")
if os.environ["PROBE_MODE"] == "pth":
    exec(os.environ["PROBE_PTH"])
else:
    import pkgutil
    pkgutil.resolve_name(os.environ["PROBE_START"].strip())()
print(json.dumps(called == ["run"]))
"""


@pytest.mark.parametrize("mode", ["pth", "start"])
@pytest.mark.parametrize(("env", "argv", "wanted"), CASES)
def test_cheap_check(
    mode: str, env: dict[str, str], argv: list[str], wanted: bool
) -> None:
    full_env = child_env(
        {
            "PROBE_ARGV": json.dumps(argv),
            "PROBE_MODE": mode,
            "PROBE_PTH": PTH_LINE,
            "PROBE_START": START,
            "PYTHONPATH": str(ROOT),
            **env,
        },
        no_site=True,
    )
    out = subprocess.run(
        [sys.executable, "-S", "-c", PROBE], env=full_env,
        capture_output=True, text=True,
        check=True,
    )  # fmt: skip
    assert json.loads(out.stdout) is wanted
    assert out.stderr == ""


def test_pth_is_one_import_line() -> None:
    lines = PTH_LINE.splitlines()
    assert len(lines) == 1 and lines[0].startswith("import ")
    assert START.strip() == "rocm_hwq_autoset:start"


def test_entry_module_imports_only_os_and_sys() -> None:
    code = (
        "import sys; before = set(sys.modules); import rocm_hwq_autoset; "
        "print(sorted(set(sys.modules) - before))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], env=child_env({"PYTHONPATH": str(ROOT)}),
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    assert out.stdout.strip() == "['rocm_hwq_autoset']"


def test_the_three_readers_of_the_switch_agree() -> None:
    """The .pth line, the gate and the decision each read the switch (the first
    two before importing anything): the same off values in all three."""
    from rocm_hwq_autoset import may_be_launch
    from rocm_hwq_autoset._environ import OFF_VALUES, switch

    assert str(OFF_VALUES).replace(" ", "") in PTH_LINE.replace(" ", "").replace(
        '"', "'"
    )
    for value in [*OFF_VALUES, "1", "force", "bogus", ""]:
        environ = {"ROCM_HWQ_AUTOSET": f" {value.upper()} "}
        gate = may_be_launch(["x", "--module"], environ)
        assert gate is (switch(environ)[0] != "off"), value


@pytest.mark.parametrize(("env", "argv", "wanted"), CASES)
def test_the_gate_in_this_process(
    env: dict[str, str], argv: list[str], wanted: bool,
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    """The same table, through ``start()`` as the .pth line calls it here."""
    import rocm_hwq_autoset
    from rocm_hwq_autoset import _hook

    called: list[str] = []
    monkeypatch.setattr(_hook, "run", lambda: called.append("run"))
    monkeypatch.setattr(sys, "argv", argv)
    monkeypatch.delenv("ROCM_HWQ_AUTOSET", raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    rocm_hwq_autoset.start()
    assert called == (["run"] if wanted else [])
    assert rocm_hwq_autoset.may_be_launch() is wanted


def test_the_gate_never_raises(monkeypatch: pytest.MonkeyPatch) -> None:
    """No sys.argv (an embedded interpreter), a hook that fails: nothing."""
    import rocm_hwq_autoset
    from rocm_hwq_autoset import _hook

    monkeypatch.delattr(sys, "argv")
    assert rocm_hwq_autoset.may_be_launch() is False
    monkeypatch.setattr(sys, "argv", ["x", "--module", "m"], raising=False)

    def broken() -> None:
        raise RuntimeError("broken install")

    monkeypatch.setattr(_hook, "run", broken)
    rocm_hwq_autoset.start()  # returns


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
    assert str(caught.value) == (
        "module 'rocm_hwq_autoset' has no attribute 'recomend'"
    )

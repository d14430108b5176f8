"""``doctor``: is the hook installed where ``site`` runs it, and what would it do?"""

from __future__ import annotations

import os
import site
import sys
import textwrap
from collections.abc import Sequence
from typing import TextIO

from .. import TRIGGERS
from .. import _decision as env
from .._decision import WARNING
from .._rocm import detect
from . import describe, hook_outcome
from .term import paint, row

PTH = "rocm_hwq_autoset.pth"
START = "rocm_hwq_autoset.start"
#: The first Python that runs ``.start`` files instead of ``.pth`` import lines.
PEP_829_PYTHON = (3, 15)
#: Where the detail column starts: after the status and the longest topic.
COLUMN = 6 + len(START) + 1


class Check:
    __slots__ = ("detail", "status", "topic")

    def __init__(self, status: str, topic: str, detail: str) -> None:
        self.status = status  # "ok", "note" or "FAIL"
        self.topic = topic
        self.detail = detail


def site_directories() -> list[tuple[str, bool]]:
    """The directories ``site`` processes ``.pth`` files in, each with whether
    it is processed in this interpreter."""
    dirs = [(d, True) for d in site.getsitepackages()]
    dirs.append((site.getusersitepackages(), bool(site.ENABLE_USER_SITE)))
    return dirs


def startup_file_checks() -> list[Check]:
    if sys.flags.no_site:
        # Without site, sys.prefix is not even the venv's: nothing to look for.
        return [Check("FAIL", "site", "python -S: site is skipped, so no .pth runs")]
    dirs = site_directories()
    found = [(d, on) for d, on in dirs if os.path.isfile(os.path.join(d, PTH))]
    active = [d for d, on in found if on]
    checks = []
    if active:
        checks.append(Check("ok", PTH, os.path.join(active[0], PTH)))
    elif found:
        checks.append(Check("FAIL", PTH, f"{os.path.join(found[0][0], PTH)} is in"
                            " the user site, which is disabled (-s, -I or"
                            " PYTHONNOUSERSITE)"))  # fmt: skip
    else:
        elsewhere = [p for p in sys.path if p and os.path.isfile(os.path.join(p, PTH))]
        if elsewhere:
            detail = (
                f"{os.path.join(elsewhere[0], PTH)}: its folder is on sys.path but"
                " is no site directory, so site ignores it (pip install --target?);"
                " install into the environment instead"
            )
        else:
            detail = "in no site directory of this interpreter: not installed"
        checks.append(Check("FAIL", PTH, detail))
    start_dirs = [d for d, on in dirs if on and os.path.isfile(os.path.join(d, START))]
    if sys.version_info >= PEP_829_PYTHON:
        checks.append(
            Check("ok", START, "present: Python runs it instead of the .pth line")
            if start_dirs
            else Check("FAIL", START, "missing: Python 3.15+ runs the hook from it")
        )  # fmt: skip
    elif start_dirs:
        checks.append(Check("ok", START, "present, for Python 3.15+ (PEP 829)"))
    return checks


def environment_checks(argv: Sequence[str], hook_ran: bool) -> list[Check]:
    checks = []
    verdict = detect(sys.path, os.environ)
    if verdict.rocm:
        checks.append(Check("ok", "ROCm", verdict.evidence))
    else:
        checks.append(Check("note", "not ROCm", verdict.evidence))
    switch = env.switch(os.environ)
    if switch == "off":
        checks.append(Check("note", env.SWITCH, f"{os.environ[env.SWITCH]}: opted out"))
    elif switch == "invalid":
        why = f"{os.environ[env.SWITCH]!r} is not {env.SWITCH_VALUES}: hook off"
        checks.append(Check("FAIL", env.SWITCH, why))
    _, log_problem = env.log_level(os.environ)
    if log_problem:
        checks.append(Check("FAIL", env.LOG, log_problem))
    value = os.environ.get(env.QUEUES)
    if not value:
        checks.append(Check("ok", env.QUEUES, f"unset (HIP's default:"
                            f" {env.HIP_DEFAULT_QUEUES})"))  # fmt: skip
    elif env.explicit_queues(os.environ) is None:
        mark = env.marker(os.environ)
        how = mark[1] if mark else ""
        where = "in this process" if hook_ran else "by a parent process"
        checks.append(
            Check("ok", env.QUEUES, f"{value}, set by rocm-hwq-autoset {where} ({how})")
        )  # fmt: skip
    elif env.positive_int(value) is None:
        checks.append(Check("FAIL", env.QUEUES, f"{value!r}, set by you, is not a"
                            " positive integer: HIP cannot use it"))  # fmt: skip
    else:
        checks.append(Check("ok", env.QUEUES, f"{value}, set by you: it always wins"))
    ran = "ran" if hook_ran else "did not run"
    checks.append(Check("note", "this process", f"the hook {ran} at start-up"))
    if argv:
        if not any(a.startswith(TRIGGERS) for a in argv):
            checks.append(Check("note", "for that launch", "no --job.config or"
                                " --module argument: the hook stays out (the"
                                " package is not imported)"))  # fmt: skip
        else:
            outcome = hook_outcome(argv)
            status = "FAIL" if outcome.level == WARNING else "ok"
            checks.append(Check(status, "for that launch", describe(outcome)))
    return checks


def run_doctor(argv: Sequence[str], out: TextIO) -> int:
    from .. import ran as hook_ran  # its value now, after start-up

    checks = [
        Check("note", "python", f"{sys.executable} ({sys.version.split()[0]})"),
        *startup_file_checks(),
        *environment_checks(argv, hook_ran),
    ]
    colours = {"ok": "green", "note": "yellow", "FAIL": "red"}
    for check in checks:
        text = row(check.topic, check.detail, indent=6, column=COLUMN)
        out.write(
            paint(check.status, colours[check.status], out) + text[len(check.status) :]
        )
        out.write("\n")
    failed = [c for c in checks if c.status == "FAIL"]
    if failed:
        summary = f"unhealthy: {failed[0].topic}: {failed[0].detail}"
        out.write("\n" + textwrap.fill(summary, 79, break_long_words=False,
                                       break_on_hyphens=False) + "\n")  # fmt: skip
        return 1
    out.write("\nhealthy\n")
    return 0

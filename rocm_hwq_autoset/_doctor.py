"""``doctor``: is the hook installed where ``site`` runs it, and what would it do?"""

from __future__ import annotations

import os
import site
import sys
import textwrap
from collections.abc import Sequence
from typing import NamedTuple, TextIO

from . import _environment as env
from ._entry import TRIGGERS
from ._rocm import detect
from ._startup import preview
from ._term import paint, row

PTH = "rocm_hwq_autoset.pth"
START = "rocm_hwq_autoset.start"
#: The first Python that runs ``.start`` files instead of ``.pth`` import lines.
PEP_829_PYTHON = (3, 15)
#: The first Python that ignores ``.pth`` import lines altogether.
PTH_IMPORTS_IGNORED = (3, 18)


class Check(NamedTuple):
    status: str  # "ok", "note" or "FAIL"
    topic: str
    detail: str


def site_directories() -> list[tuple[str, bool]]:
    """The directories ``site`` processes ``.pth`` files in, each with whether
    it is processed in this interpreter."""
    dirs = [(d, not sys.flags.no_site) for d in site.getsitepackages()]
    user = site.getusersitepackages()
    dirs.append((user, not sys.flags.no_site and bool(site.ENABLE_USER_SITE)))
    return dirs


def startup_file_checks() -> list[Check]:
    checks = []
    if sys.flags.no_site:
        checks.append(
            Check("FAIL", "site", "python -S: site is skipped, so no .pth runs")
        )
    found = [
        (d, on) for d, on in site_directories() if os.path.isfile(os.path.join(d, PTH))
    ]
    active = [d for d, on in found if on]
    if active:
        checks.append(Check("ok", PTH, os.path.join(active[0], PTH)))
    elif found:
        where = os.path.join(found[0][0], PTH)
        why = "site is skipped (-S)" if sys.flags.no_site else (
            "the user site is disabled (-s, -I or PYTHONNOUSERSITE)"
        )  # fmt: skip
        checks.append(Check("FAIL", PTH, f"{where} is not processed: {why}"))
    else:
        elsewhere = [
            p for p in sys.path if p and os.path.isfile(os.path.join(p, PTH))
        ]  # fmt: skip
        if elsewhere:
            detail = (
                f"{os.path.join(elsewhere[0], PTH)} is on sys.path but is no site"
                " directory, so site ignores it (pip install --target?); install"
                " into the environment instead"
            )
        else:
            detail = "in no site directory of this interpreter: not installed"
        checks.append(Check("FAIL", PTH, detail))
    start_dirs = [d for d, _ in found] or [d for d, _ in site_directories()]
    has_start = any(os.path.isfile(os.path.join(d, START)) for d in start_dirs)
    if sys.version_info >= PEP_829_PYTHON:
        checks.append(
            Check("ok", START, "present: Python runs it instead of the .pth line")
            if has_start
            else Check("FAIL", START, "missing: Python 3.15+ runs the hook from it")
        )  # fmt: skip
    elif has_start:
        checks.append(Check("ok", START, "present, for Python 3.15+ (PEP 829)"))
    return checks


def environment_checks(argv: Sequence[str], hook_ran: bool) -> list[Check]:
    checks = []
    verdict = detect(sys.path, os.environ)
    if verdict.rocm:
        checks.append(Check("ok", "ROCm", verdict.evidence))
    else:
        checks.append(Check("note", "not ROCm", verdict.evidence))
    if env.switch(os.environ) == "off":
        checks.append(Check("note", env.SWITCH, f"{os.environ[env.SWITCH]}: opted out"))
    value = os.environ.get(env.QUEUES)
    if not value:
        checks.append(Check("ok", env.QUEUES, "unset (HIP's default: 4)"))
    elif env.explicit_queues(os.environ) is not None:
        checks.append(Check("ok", env.QUEUES, f"{value}, set by you: it always wins"))
    else:
        how = env.origin(os.environ)
        where = "in this process" if hook_ran else "by a parent process"
        checks.append(
            Check("ok", env.QUEUES, f"{value}, set by rocm-hwq-autoset {where} ({how})")
        )  # fmt: skip
    ran = "ran" if hook_ran else "did not run"
    checks.append(Check("note", "this process", f"the hook {ran} at start-up"))
    if argv:
        if not any(a.startswith(TRIGGERS) for a in argv):
            checks.append(
                Check(
                    "note",
                    "for that launch",
                    "no --job.config argument:"
                    " the hook stays out (the package is not imported)",
                )
            )
        else:
            outcome = preview(os.environ, argv, sys.path)
            bad = outcome.startswith("warning:")
            checks.append(Check("FAIL" if bad else "ok", "for that launch", outcome))
    return checks


def run_doctor(argv: Sequence[str], out: TextIO, *, hook_ran: bool) -> int:
    checks = [
        Check("note", "python", f"{sys.executable} ({sys.version.split()[0]})"),
        *startup_file_checks(),
        *environment_checks(argv, hook_ran),
    ]
    colours = {"ok": "green", "note": "yellow", "FAIL": "red"}
    for check in checks:
        text = row(check.topic, check.detail, indent=6, column=28)
        out.write(
            paint(check.status, colours[check.status], out) + text[len(check.status) :]
        )
        out.write("\n")
    failed = [c for c in checks if c.status == "FAIL"]
    if failed:
        out.write(
            "\n"
            + textwrap.fill(f"unhealthy: {failed[0].topic}: {failed[0].detail}", 79)
        )
        out.write("\n")
        return 1
    out.write("\nhealthy\n")
    return 0

"""``doctor``: is the hook installed where ``site`` runs it, and what would it do?"""

from __future__ import annotations

import os
import shlex
import site
import sys
import textwrap
from collections.abc import Sequence
from typing import TYPE_CHECKING, TextIO

if TYPE_CHECKING:
    import argparse


from .._argv import FORMS, Launch
from .._config import ConfigError
from .._decision import SET, SKIP, WARNING, Outcome, unknown_warnings
from .._early import PEP_829_PYTHON, early_start_files, has_entry
from .._environ import (
    LOG,
    NAME,
    OFF,
    PTH,
    QUEUES,
    START,
    SWITCH,
    TIMEOUT,
    QueuesSetting,
    log_level,
    switch,
    timeout,
)
from .._evaluation import MAX_UNCHECKED, location, open_cache
from .._left_out import LEFT_OUT, verify_command
from ._common import (
    AS_IF_ON_ROCM,
    Option,
    Reading,
    add_options,
    hook_words,
    misspelt_variables,
    rocm,
    training_environ,
)
from .term import paint, row, unbroken

HELP = (
    "Check that the hook is installed where site runs it, what it saw, and what"
    " it would do for the training arguments (after '--'), as on a ROCm node."
)
EXAMPLE = """\
example:
  rocm-hwq-autoset doctor -- --job.config_file job.toml \\
      --parallelism.expert_parallel_degree 2"""
#: doctor's own options: none but --help.
OPTIONS: tuple[Option, ...] = ()


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_options(parser, OPTIONS)


#: The gate module the ``.pth`` line imports, beside the package.
GATE = "_rocm_hwq_autoset_gate"


def python_version() -> tuple[int, int]:
    """The running Python's version, whose ``site`` order doctor checks."""
    return sys.version_info[0], sys.version_info[1]


#: Where the detail column starts: after the status and the longest topic.
COLUMN = 6 + len(START) + 1


class Row:
    """One line of doctor's report: its status, what it is about, and what was
    found."""

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


def startup_file_checks() -> list[Row]:
    if sys.flags.no_site:
        # Without site, sys.prefix is not even the venv's: nothing to look for.
        return [Row("FAIL", "site", "python -S: site is skipped, so no .pth runs")]
    dirs = site_directories()
    found = [(d, on) for d, on in dirs if os.path.isfile(os.path.join(d, PTH))]
    active = [d for d, on in found if on]
    checks = []
    if active:
        checks.append(Row("ok", PTH, unbroken(os.path.join(active[0], PTH))))
        checks.append(early_starters_check())
    elif found:
        checks.append(Row("FAIL", PTH, f"{os.path.join(found[0][0], PTH)} is in"
                            " the user site, which is disabled (-s, -I or"
                            " PYTHONNOUSERSITE)"))  # fmt: skip
    else:
        elsewhere = [p for p in sys.path if p and os.path.isfile(os.path.join(p, PTH))]
        installed = installed_file(PTH)
        if installed is not None and not os.path.isfile(installed):
            # The distribution is there, its .pth not (an editable install's
            # checkout on sys.path holds one too, which site never reads).
            detail = (
                f"{installed} is missing, though {NAME} is installed (pip"
                " list shows it): the hook never runs; restore it:"
                f" {reinstall_command()}"
            )
        elif elsewhere:
            detail = (
                f"{os.path.join(elsewhere[0], PTH)}: its folder is on sys.path but"
                " is no site directory, so site ignores it (pip install --target?);"
                " install into the environment instead"
            )
        else:
            detail = (
                "in no site directory of this interpreter: not installed;"
                f" install: {reinstall_command()}"
            )
        checks.append(Row("FAIL", PTH, detail))
    ours = installed_file(PTH)
    if active and ours and _same(ours, os.path.join(active[0], PTH)):
        stale = stale_copy(ours, PTH)  # the distribution's: a checkout's copy?
        if stale is not None:
            checks.append(Row("FAIL", PTH, stale))
    start_dirs = [d for d, on in dirs if on and os.path.isfile(os.path.join(d, START))]
    if python_version() >= PEP_829_PYTHON:
        if not start_dirs:
            checks.append(
                Row("FAIL", START, "missing: Python 3.15+ runs the hook from it")
            )
        elif not has_entry(os.path.join(start_dirs[0], START)):
            checks.append(Row("FAIL", START, (
                f"{os.path.join(start_dirs[0], START)} names no entry point: it turns"
                f" the {PTH} line off (PEP 829) and the hook never runs; reinstall:"
                f" {reinstall_command()}")))  # fmt: skip
        else:
            checks.append(
                Row("ok", START, "present: Python runs it instead of the .pth line")
            )
    elif start_dirs:
        checks.append(Row("ok", START, "present, for Python 3.15+ (PEP 829)"))
    return checks


def early_starters_check() -> Row:
    """The start-up files ``site`` runs code from before the hook, in the
    running Python's order (``_early.run_before_ours``): one that starts HIP
    (imports torch and asks for a GPU, say) does so before the hook puts the
    value in place; the hook then warns, in that launch."""
    version = python_version()
    early = early_start_files(version)
    if early is None:
        return Row("note", "before it", f"site never runs the hook here (see {START})")
    if not early:
        return Row(
            "ok", "before it", "no start-up file site runs before the hook runs code"
        )
    order = (
        " (Python 3.15+: every .pth import line of every site folder, then the"
        " .start entries found before ours)"
        if version >= PEP_829_PYTHON
        else ""
    )
    plural = len(early) > 1
    return Row(
        "note",
        "before it",
        f"{len(early)} start-up file{'s' * plural} site runs before the hook"
        f" run{'s' * (not plural)} code{order}; one that starts HIP makes the hook"
        f" come too late (it warns then): {', '.join(early)}",
    )


def gate_check() -> Row:
    """The gate module, which the ``.pth`` line and the ``.start`` entry import
    by name: without it (or with another one first on the path) the hook never
    runs, and the ``.pth`` line says nothing. It belongs beside the package
    (both in site-packages, or both in a checkout on the path), or is the one
    the installed distribution put in site-packages: an editable install
    (hatchling's) copies it there and leaves the package in the checkout, and
    then the copy must still be the checkout's."""
    import importlib.util

    spec = importlib.util.find_spec(GATE)
    if spec is None or not spec.origin:
        return Row("FAIL", GATE, "missing: the .pth line imports it, and"
                     " without it the hook never runs; reinstall:"
                     f" {reinstall_command()}")  # fmt: skip
    beside = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    if _same(os.path.dirname(spec.origin), os.path.dirname(beside)):
        return Row("ok", GATE, unbroken(spec.origin))
    installed = installed_file(f"{GATE}.py")
    if installed is None or not _same(installed, spec.origin):
        return Row("FAIL", GATE, f"{spec.origin} comes first on sys.path, not"
                     f" the one beside {beside} nor the one installed with"
                     " it")  # fmt: skip
    stale = stale_copy(spec.origin, f"{GATE}.py")
    if stale is not None:
        return Row("FAIL", GATE, stale)
    return Row("ok", GATE, f"{spec.origin} (installed with the package)")


def installed_file(name: str) -> str | None:
    """Where the installed distribution put ``name`` (a file at the root of
    its site directory: the ``.pth``, the gate module), as its ``RECORD``
    lists it; None without a distribution, or one that lists no such file."""
    from importlib import metadata

    try:
        dist = metadata.distribution(NAME)
    except metadata.PackageNotFoundError:
        return None
    for path in dist.files or ():
        if str(path) == name:
            return str(dist.locate_file(path))
    return None


def _same(a: str, b: str) -> bool:
    return os.path.realpath(a) == os.path.realpath(b)


def stale_copy(installed: str, name: str) -> str | None:
    """What is wrong with a start-up file an editable install copied into
    site-packages (the ``.pth``, the gate module), where the package runs from
    a checkout that holds another version of it: the checkout was edited, or
    pulled, since the install; None where it is the same, or no checkout's."""
    package = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    mine = os.path.join(os.path.dirname(package), name)  # beside the package
    if not os.path.isfile(mine) or _same(mine, installed):
        return None
    try:
        with open(installed, "rb") as copy, open(mine, "rb") as source:
            if copy.read() == source.read():
                return None
    except OSError as exc:
        return f"{installed}: {exc.strerror}"
    return (
        f"{installed} is not {mine} (changed since the install): start-up runs"
        f" the old one; reinstall: {reinstall_command()}"
    )


def reinstall_command() -> str:
    """The command that installs the package again as it was installed
    (``_rocm_hwq_autoset_reinstall.reinstall``, its one home, beside the
    package); a plain one without it."""
    try:
        from _rocm_hwq_autoset_reinstall import reinstall

        return reinstall()[1]
    except Exception:  # no such module, an older one, unreadable metadata
        return (
            f"pip install --force-reinstall --no-deps {NAME} (pip install"
            " -e CHECKOUT for an editable install)"
        )


def _may_be_launch(training: Sequence[str]) -> bool:
    """Whether the start-up gate opens for ``python -m torchtitan.train
    TRAINING``: the switch is not off and an argument is one that opens it for
    a torchtitan program (``Form.opens``, of which the gate holds a copy)."""
    if switch(os.environ)[0] == OFF:  # the gate's own off values
        return False
    flags = {arg.partition("=")[0] for arg in training}
    return any(flag in flags for form in FORMS for flag in form.opens)


def environment_checks(training: Sequence[str]) -> list[Row]:
    from .. import _hook  # what the hook decided in this process, at start-up

    checks = []
    on_rocm, evidence = rocm()
    if on_rocm:
        checks.append(Row("ok", "ROCm", evidence))
    else:
        checks.append(Row("note", "not ROCm", evidence))
    mode, problem = switch(os.environ)
    if mode == OFF:
        checks.append(Row("note", SWITCH, f"{os.environ[SWITCH]}: opted out"))
    if problem:
        checks.append(Row("FAIL", SWITCH, f"{problem}: the hook does nothing"))
    _, log_problem = log_level(os.environ)
    if log_problem:
        checks.append(Row("FAIL", LOG, log_problem))
    _, timeout_problem = timeout(os.environ)
    if timeout_problem:
        checks.append(Row("FAIL", TIMEOUT, timeout_problem))
    checks += [Row("FAIL", slip.partition("=")[0], slip.partition("=")[2])
               for slip in misspelt_variables(os.environ)]  # fmt: skip
    setting = QueuesSetting(os.environ)
    usable = setting.explicit is None or setting.problem is None
    checks.append(Row("ok" if usable else "FAIL", QUEUES, setting.describe()))
    checks += cache_checks()
    checks.append(start_up_check(_hook.decided))
    if training:
        # The training arguments are python -m torchtitan.train's.
        if not _may_be_launch(training):
            why = (
                f"{SWITCH}={os.environ[SWITCH]}: opted out,"
                if mode == OFF
                else "no --job.config_file, nor --module for torchtitan:"
            )
            checks.append(Row("note", "for that launch", f"{why} the hook stays"
                                " out (the package is not imported)"))  # fmt: skip
        else:
            checks += launch_checks(training, on_rocm)
    return checks


def launch_checks(training: Sequence[str], on_rocm: bool) -> list[Row]:
    """What the hook would do for ``python -m torchtitan.train TRAINING`` on a
    ROCm node: off ROCm (a login node, an image build) it is checked as if on
    ROCm, so that a config the hook would refuse there fails here too. Then a
    note for each stream of that launch that Q leaves out."""
    as_if = "" if on_rocm else f" ({AS_IF_ON_ROCM})"
    try:
        reading = Reading(training, training_environ(None))
        outcome = reading.hook_outcome(as_if_on_rocm=not on_rocm)
    except ConfigError as exc:
        return [Row("FAIL", "for that launch", f"{exc}{as_if}")]
    status = "FAIL" if outcome.level == WARNING else "ok"
    checks = [Row(status, "for that launch", hook_words(outcome) + as_if)]
    rec = outcome.rec
    if rec is not None:
        checks += [Row("FAIL", "for that launch", warning.message)
                   for warning in unknown_warnings(rec)]  # fmt: skip
        checks += [
            Row("note", "not in Q", f"{lane}: {LEFT_OUT[lane][0]}; check it on a"
                f" profiler trace: {unbroken(verify_command(lane, rec.queues))}")
            for lane in rec.left_out_lanes
        ]  # fmt: skip
    return checks


def start_up_check(decided: Outcome | Launch | None) -> Row:
    """What the hook did in this process at interpreter start: nothing for the
    package's own commands (Python >= 3.10 tells them apart)."""
    if decided is None:
        detail = "the hook did not run at start-up (no --job.config or --module)"
    elif not isinstance(decided, Outcome):  # a --module launch it evaluated
        detail = "at start-up the hook started a --module evaluation"
    elif decided.level == SKIP:
        detail = f"at start-up the hook did nothing: {decided.message}"
    elif decided.level == SET:
        detail = f"at start-up the hook set {QUEUES}={decided.queues} here"
    else:
        detail = f"at start-up the hook warned: {decided.message}"
    return Row("note", "this process", detail)


def _not_made_yet(path: str) -> bool:
    """Whether the cache's folder is missing and could be made (not: a folder
    on the way to it is a file)."""
    try:
        os.stat(path)
    except FileNotFoundError:
        return True
    except OSError:
        return False
    return False


def cache_checks() -> list[Row]:
    """Where the cache of --module evaluations is, whether it is usable, and
    how many entries it holds."""
    try:
        cache, problem = open_cache(os.environ, create=False)
    except ConfigError as exc:
        return [Row("FAIL", "cache", str(exc))]
    if cache is None and not problem:
        return [Row("note", "cache", "off (ROCM_HWQ_AUTOSET_CACHE)")]
    if cache is None:
        where = location(os.environ)
        if where is None:  # no home: no cache, by design
            return [Row("note", "cache", problem)]
        if _not_made_yet(where):
            return [Row("ok", "cache", f"{where}: not made yet")]
        return [Row("FAIL", "cache", problem)]
    try:
        count = cache.count()
    except OSError as exc:
        return [Row("FAIL", "cache", f"{cache.path}: {exc.strerror}")]
    plural = "y" if count == 1 else "ies"
    if not os.access(cache.path, os.W_OK | os.X_OK):  # a read-only mount, chattr +i
        detail = (
            f"{cache.path}: read-only, {count} entr{plural}, none taken (no use of"
            f" one can be noted, and an entry is taken at most {MAX_UNCHECKED} times"
            " unchecked); none is stored: every --module launch evaluates again"
            " (seconds each)"
        )
        return [Row("FAIL", "cache", detail)]
    return [Row("ok", "cache", f"{cache.path}: usable, {count} entr{plural}")]


#: What the ``python`` on ``PATH`` is asked: its interpreter, its version, and
#: whether a site directory it processes holds the ``.pth`` (as ``site`` runs).
_TRAINING_PYTHON_PROBE = (
    "import os, site, sys\n"
    "dirs = site.getsitepackages()"
    " + ([site.getusersitepackages()] if site.ENABLE_USER_SITE else [])\n"
    "print(sys.prefix); print(sys.version.split()[0])\n"
    f"print(any(os.path.isfile(os.path.join(d, {PTH!r})) for d in dirs))\n"
)

#: Seconds the python on ``PATH`` has to answer :data:`_TRAINING_PYTHON_PROBE`.
TRAINING_PYTHON_TIMEOUT = 30


def training_python_check() -> Row:
    """The Python that will train: the first ``python`` on ``PATH``, which
    ``python -m torchtitan.train`` and torchrun's workers run. Where it is
    another interpreter than this one (an activated venv without the package,
    this command from another venv on ``PATH``), whether ``site`` runs the
    hook there (was: "healthy", for the other venv)."""
    import shutil
    import subprocess

    topic = "python on PATH"
    found = shutil.which("python")
    if found is None:
        return Row("note", topic, "none: the training's interpreter is not checked")
    here = f"{unbroken(found)}: this interpreter"
    if _same(os.path.dirname(found), os.path.dirname(sys.executable)):
        return Row("ok", topic, here)  # a venv's python links out of it: not realpath
    try:
        done = subprocess.run(
            [found, "-c", _TRAINING_PYTHON_PROBE], capture_output=True, text=True,
            timeout=TRAINING_PYTHON_TIMEOUT, stdin=subprocess.DEVNULL,
        )  # fmt: skip
        prefix, version, has_pth = done.stdout.split("\n")[:3]
    except (OSError, ValueError, subprocess.SubprocessError) as exc:
        return Row("FAIL", topic, f"{found}: cannot be asked ({exc})")
    if _same(prefix, sys.prefix):
        return Row("ok", topic, here)
    if has_pth == "True":
        return Row("ok", topic, f"{unbroken(found)} ({version}): {PTH} in its site")
    return Row(
        "FAIL", topic,
        f"{unbroken(found)} ({version}) is another Python, without {PTH}: the"
        " training it runs (python -m torchtitan.train, torchrun) has no hook;"
        f" install it there: {shlex.quote(found)} -m pip install {NAME}",
    )  # fmt: skip


def run(opts: argparse.Namespace, out: TextIO) -> int:
    checks = [
        Row("note", "python", f"{unbroken(sys.executable)} ({sys.version.split()[0]})"),
        training_python_check(),
        *startup_file_checks(),
        *([] if sys.flags.no_site else [gate_check()]),
        *environment_checks(opts.training),
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

"""Helpers shared by the tests: fake torches, a job config, the hook run on a
plain dict, interpreters and venvs."""

from __future__ import annotations

import contextlib
import glob
import os
import shutil
import subprocess
import sys
import time
import types
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from rocm_hwq_autoset._argv import MODULE, form_named
from rocm_hwq_autoset._config import ConfigError, load_toml
from rocm_hwq_autoset._decision import PREFIX, SKIP, WARNING, Outcome, _value, failed
from rocm_hwq_autoset._hook import apply, outcome_for
from rocm_hwq_autoset._rocm import detect
from rocm_hwq_autoset._traces import count_streams

ROOT = Path(__file__).resolve().parents[1]
#: Golden files: a message's or a report's wording, pinned once.
GOLDEN = ROOT / "tests" / "golden"
PYTHONS = ("3.9", "3.10", "3.11", "3.12", "3.13")
#: Editable installs are checked on the oldest and the newest Python.
EDITABLE_PYTHONS = ("3.9", "3.13")

#: Under pytest-xdist (``-n 2`` in pyproject.toml's addopts) the workers share
#: the run's temporary root (``--basetemp``'s parent of each worker's own).
XDIST_WORKER = "PYTEST_XDIST_WORKER"


def shared_root(factory: pytest.TempPathFactory) -> Path:
    """The folder every worker of this run shares: the run's own basetemp when
    not under xdist."""
    base = factory.getbasetemp()
    return base.parent if os.environ.get(XDIST_WORKER) else base


class RunLock:
    """Under xdist, what runs alone: a test marked ``serial`` (it measures a
    CPU share or a time, needs idle CPU for the package's idle-priority
    children to finish their work, or edits what other tests read), or the
    start of a module fixture (the benchmarks' quick runs: those that need idle
    CPU run alone; the rest compute in the background of their tests, beside
    other tests, never beside a ``serial`` one). Every test holds the run's
    lock shared, those exclusively; a turnstile taken first keeps the shared
    holders from starving one that waits. A wait is bounded (``SECONDS``): a
    test's setup has no pytest-timeout. Inside a hold of this process, nothing
    more is taken."""

    SECONDS = 1200.0
    #: This process's holds: exclusive, and shared after ``share``.
    holds = 0

    @classmethod
    @contextlib.contextmanager
    def held(
        cls, factory: pytest.TempPathFactory, *, alone: bool
    ) -> Iterator[Callable[[], None]]:
        """The lock, shared or ``alone``; it yields ``share``, which makes an
        exclusive hold a shared one (the turnstile, kept meanwhile, keeps
        every other taker out: none slips in between)."""
        if not os.environ.get(XDIST_WORKER) or cls.holds:
            yield lambda: None
            return
        import fcntl

        root = shared_root(factory)
        flags = os.O_RDWR | os.O_CREAT | os.O_CLOEXEC
        gate = os.open(root / "serial.gate", flags, 0o600)
        lock = os.open(root / "serial.lock", flags, 0o600)

        def share() -> None:
            fcntl.flock(lock, fcntl.LOCK_SH)
            fcntl.flock(gate, fcntl.LOCK_UN)

        try:
            cls._take(gate, fcntl.LOCK_EX)
            cls._take(lock, fcntl.LOCK_EX if alone else fcntl.LOCK_SH)
            if not alone:
                fcntl.flock(gate, fcntl.LOCK_UN)
            cls.holds += alone
            try:
                yield share
            finally:
                cls.holds -= alone
        finally:
            os.close(lock)
            os.close(gate)

    @classmethod
    def _take(cls, fd: int, how: int) -> None:
        import fcntl

        end = time.monotonic() + cls.SECONDS
        while True:
            try:
                fcntl.flock(fd, how | fcntl.LOCK_NB)
                return
            except BlockingIOError:
                if time.monotonic() > end:
                    pytest.fail(f"the run's serial lock not had in {cls.SECONDS:g} s")
                time.sleep(0.05)


ROCM_VERSION_PY = (
    "from typing import Optional\n\n"
    "__all__ = ['__version__', 'debug', 'cuda', 'git_version', 'hip', 'xpu']\n"
    "__version__ = '2.5.1+rocm6.2'\n"
    "debug = False\n"
    "cuda: Optional[str] = None\n"
    "git_version = 'a8d6afb511a69687bbb2b7e88a3cf67917e1697e'\n"
    "hip: Optional[str] = '6.2.41133-dd7f95766'\n"
    "xpu: Optional[str] = None\n"
)
CUDA_VERSION_PY = ROCM_VERSION_PY.replace("'6.2.41133-dd7f95766'", "None").replace(
    "cuda: Optional[str] = None", "cuda: Optional[str] = '12.4'"
)

#: DeepSeek-V3 with expert parallelism and the overlap: 5 lanes, Q = 8.
JOB = b"""
[model]
name = "deepseek_v3"
[parallelism]
expert_parallel_degree = 2
[compile]
enable_fsdp_ag_rs_overlap = true
"""
LINE = (
    "rocm-hwq-autoset: GPU_MAX_HW_QUEUES=8 (5 GPU streams: compute, all_reduce,"
    " dense_all_gather, reduce_scatter, expert_comm)\n"
)


# The configs the tests use, their expected lanes and a profiler trace are in
# tests/data.py.


def by_device(path: str) -> dict[Any, set[Any]]:
    """``count_streams`` of a trace without priorities, by device."""
    pools = count_streams(path)
    assert all(priority is None for _, priority in pools)
    return {device: streams for (device, _), streams in pools.items()}


def fake_torch(root: Path, version_py: str | None) -> Path:
    """A ``torch`` package whose import fails and whose ``version.py`` says
    ``version_py``; returns the folder to put on the path."""
    pkg = root / "torch"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("raise ImportError('never import me')\n")
    if version_py is not None:
        (pkg / "version.py").write_text(version_py)
    return root


def hook(
    environ: dict[str, str],
    args: Sequence[str],
    path: Sequence[str],
    program: str = "train.py",
) -> Outcome:
    """What the start-up hook does for ``python PROGRAM ARGS``, on a plain dict:
    decide, then apply."""
    outcome = outcome_for(
        environ, [program, *args], [],
        rocm=lambda: detect(path, environ), read_toml=load_toml,
    )  # fmt: skip
    assert isinstance(outcome, Outcome)
    apply(outcome, environ)
    return outcome


#: What a mutation run (tools/mutation.py) sets: the mutant under test, and the
#: file where a child interpreter notes the functions it ran.
MUTATION = ("MUTANT_UNDER_TEST", "MUTATION_HITS")


def child_env(env: Mapping[str, str], *, no_site: bool = False) -> dict[str, str]:
    """``env`` for a child interpreter the test starts, with a mutation run's
    variables passed on (none outside one): without them the mutant under test
    would not be active in the child. With ``no_site`` (``python -S``), the
    folder mutmut is in too, which the mutated package imports. They come
    after ``env``'s: a test may read the child's first variable."""
    out = dict(env)
    out.update((n, os.environ[n]) for n in MUTATION if n in os.environ and n not in env)
    if no_site and "MUTANT_UNDER_TEST" in os.environ:
        import mutmut

        where = str(Path(mutmut.__file__).resolve().parents[1])
        path = [out.get("PYTHONPATH", ""), where]
        out["PYTHONPATH"] = os.pathsep.join(p for p in path if p)
    return out


def find_python(version: str) -> str | None:
    """A CPython ``version`` interpreter: pyenv's first, then ``PATH``'s."""
    root = os.environ.get("PYENV_ROOT") or os.path.expanduser("~/.pyenv")
    found = sorted(
        glob.glob(os.path.join(root, "versions", f"{version}.*", "bin", "python3"))
    )
    found = [p for p in found if Path(p).parent.parent.name.count(".") == 2]
    return found[-1] if found else shutil.which(f"python{version}")


def require_python(version: str) -> str:
    python = find_python(version)
    if python is None:
        missing(f"CPython {version} is not installed (pyenv or PATH)")
    assert python is not None
    return python


#: Why a test of the real torchtitan skips, with the one command that makes
#: (once, then keeps) the venv it needs and names it.
NO_TORCHTITAN = (
    "no venv with torch 2.13.0 and torchtitan 0.3.0 named by ROCM_HWQ_TORCHTITAN;"
    ' make (once) and name it: eval "$(python tools/torchtitan_venv.py)"'
)


def missing(message: str) -> None:
    """Skip for something this machine lacks; fail under ``CI``, which needs it."""
    if os.environ.get("CI"):
        pytest.fail(message + "; CI requires it")
    pytest.skip(message)


#: What pip says when it reached no index at all (with retries: the errors).
NO_INDEX_SIGNS = ("NewConnectionError", "Max retries exceeded",
                  "Network is unreachable", "Temporary failure in name resolution",
                  "ConnectTimeout", "Connection refused")  # fmt: skip
#: What pip says for a requirement no index it reached has, and for every
#: requirement when it reached none: told apart by :func:`index_answers`.
NOTHING_FOUND = "(from versions: none)"


def require_index(
    pip_output: str,
    *,
    index_args: Sequence[str] = (),
    env: Mapping[str, str] | None = None,
) -> None:
    """Skip (fail under ``CI``) with the reason when pip could not reach its
    package index; return when the failure was anything else, for the caller
    to fail on: a wrong requirement (a typo'd name, a version that does not
    exist) fails everywhere. Without retries pip says the same for a name it
    cannot find as for an index it cannot reach: then the index (``index_args``,
    pip's environment ``env``) is asked for pip itself."""
    unreachable = any(sign in pip_output for sign in NO_INDEX_SIGNS)
    if not unreachable and NOTHING_FOUND in pip_output:
        unreachable = not index_answers(tuple(index_args), env)
    if unreachable:
        last = pip_output.strip().splitlines()[-1] if pip_output.strip() else ""
        missing(f"no package index reachable for pip ({last[:160]})")


def index_answers(
    index_args: tuple[str, ...] = (), env: Mapping[str, str] | None = None
) -> bool:
    """Whether pip's index lists pip (every index has it)."""
    done = subprocess.run(
        [sys.executable, "-m", "pip", "index", "versions", "pip", "--retries", "0",
         "--timeout", "10", *index_args],
        capture_output=True, text=True, timeout=120,
        env=None if env is None else dict(env),
    )  # fmt: skip
    return done.returncode == 0 and "Available versions:" in done.stdout


class Venv:
    def __init__(self, path: Path) -> None:
        self.path = path
        self.python = str(path / "bin" / "python")

    @property
    def site_packages(self) -> Path:
        return next(self.path.glob("lib/python3.*/site-packages"))


def run(
    environ: dict[str, str],
    argv: list[str],
    path: list[str],
    capsys: pytest.CaptureFixture[str],
) -> str:
    """What the hook says on stderr for ``python train.py ARGV`` (nothing on
    stdout), on a plain dict."""
    hook(environ, argv, path)
    out, err = capsys.readouterr()
    assert out == ""
    return err


#: A ``--module`` launch's arguments, for the decision's and the hook's tests.
MODULE_ARGS = ["--module", "graph_trainer.llama3", "--config", "c"]


def no_read(path: str) -> dict[str, object]:
    raise AssertionError("a --module launch reads no TOML")


def decide_module(environ: dict[str, str], args: list[str], module: str) -> Any:
    """What the hook decides for ``python -m MODULE ARGS`` on a ROCm machine."""
    return outcome_for(
        environ, ["-m", *args], ["python", "-m", module, *args],
        rocm=lambda: (True, "test"), read_toml=no_read,
    )  # fmt: skip


def said(err: str) -> tuple[str, str]:
    """The one line of the hook in ``err``, as (its level, its message): a
    warning, a skip (``nothing to do``), or ``say`` for a set value, a note or
    a detail, which have no lead. The wording is ``tests/golden/lines``'s."""
    assert err.count("\n") == 1 and err.startswith(PREFIX), err
    text = err[len(PREFIX) : -1]
    for level, lead in ((WARNING, "warning: "), (SKIP, "nothing to do: ")):
        if text.startswith(lead):
            return level, text[len(lead) :]
    return "say", text


def set_line(queues: int, lanes: Sequence[str], *, where: str = "") -> str:
    """The line that sets ``queues`` for ``lanes``, in the package's own words
    (``_decision``'s): Q and the streams are this value's."""
    rec = types.SimpleNamespace(
        queues=queues, lanes=tuple(lanes), left_out_lanes=(), unknown=()
    )
    outcome = _value({}, rec, MODULE, where=where)  # type: ignore[arg-type]
    line = outcome.line({})
    assert line is not None
    return line


def decided_line(args: Sequence[str], environ: Mapping[str, str] = {}) -> str:
    """The line the hook says for ``python train.py ARGS`` on a ROCm machine,
    decided in this process ("" for none): what a process started so says."""
    outcome = outcome_for(
        environ, ["train.py", *args], [],
        rocm=lambda: (True, "test"), read_toml=load_toml,
    )  # fmt: skip
    assert isinstance(outcome, Outcome)
    return outcome.line(environ) or ""


#: What a warning that sets nothing says it did, in the package's own words.
UNSET_TAIL = failed(form_named("job.config_file"), ConfigError("")).tail


def unset_line(form: str, error: ConfigError) -> str:
    """The warning that sets nothing for ``error``, in the package's own words."""
    line = failed(form_named(form), error).line({})
    assert line is not None
    return line


def check_golden(golden: Path, report: str) -> None:
    """``report`` is the golden file's text. With ``UPDATE_GOLDEN=1`` the file is
    written anew and the test fails, saying so: a comparison with what it just
    wrote would pass whatever the report says."""
    if os.environ.get("UPDATE_GOLDEN"):
        changed = not golden.exists() or golden.read_text() != report
        golden.write_text(report)
        pytest.fail(
            f"UPDATE_GOLDEN=1: {golden.name} written anew"
            f" ({'changed' if changed else 'unchanged'}); review the diff and run"
            " again without UPDATE_GOLDEN to compare",
            pytrace=False,
        )
    assert report == golden.read_text()


def lines_report(
    entries: Sequence[tuple[str, str | None]], tmp: Path | None = None
) -> str:
    """A golden of lines: each input, then what is said for it, indented (the
    test's temporary folder as ``TMP``)."""
    out = []
    for given, line in entries:
        said = ["(nothing)"] if not line else line.splitlines()
        out.append(given + "\n" + "".join(f"    {text}\n" for text in said))
    report = "".join(out)
    return report if tmp is None else report.replace(str(tmp), "TMP")


def check_lines(
    request: pytest.FixtureRequest,
    entries: Sequence[tuple[str, str | None]],
    tmp: Path | None = None,
    *,
    every_case: bool = True,
) -> None:
    """The lines a test's inputs get, against the test's own golden file,
    ``tests/golden/lines/<its module>/<its name>.txt`` (:func:`lines_report`):
    the test asserts values; their wording is pinned there. A parametrized
    test has one for each case, or, ``every_case=False``, one for all."""
    name = request.node.name if every_case else request.node.originalname
    name = name.replace("[", "-").rstrip("]")
    golden = GOLDEN / "lines" / request.node.path.stem / f"{name}.txt"
    golden.parent.mkdir(parents=True, exist_ok=True)
    check_golden(golden, lines_report(entries, tmp))

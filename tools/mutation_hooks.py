"""What a mutation run (``tools/mutation.py``) adds to the processes it tests.

``tools/mutation.py`` copies this file into ``mutants/`` and loads it in every
process that imports the mutated package:

* the process ``mutmut`` runs the tests in, as a pytest plugin
  (``pytest_add_cli_args = ["-p", "mutation_hooks"]``);
* every child interpreter a test starts with ``mutants/`` on its ``PYTHONPATH``,
  through ``mutants/sitecustomize.py`` (``import mutation_hooks``).

It does four things ``mutmut`` does not:

1. **mutmut reads the real environment.** Its trampolines look
   ``MUTANT_UNDER_TEST`` (and, while counting, ``MUTMUT_DEPENDENCY_DEPTH``) up
   in ``os.environ`` on every call of a mutated function. The ``--module``
   child's recorder (``deps.Recorder``) replaces ``os.environ`` by a mapping
   whose methods are themselves mutated: each lookup would call itself until
   the stack overflows. Here the trampolines see the ``os.environ`` of
   interpreter start, which shares its variables with the recorder's and
   records nothing.
2. **Functions run in another process count for the tests that ran them.**
   mutmut learns which tests run a function (and so which tests it runs against
   each of the function's mutants) by counting calls in its own process only:
   calls in a test forked by ``pytest-forked`` or in a child interpreter were
   lost, and their mutants reported as having no test. Here every such process
   appends the names it ran to a file (``MUTATION_HITS``); the plugin hands them
   to mutmut when the test ends. A module run as ``python -m MODULE`` counts,
   and is mutated, under its own name.
3. **A frame up is the caller's, as without mutmut.** A mutated function is
   called through two frames of mutmut's ``trampoline.py``; the recorder asks
   ``sys._getframe(N)`` who listed a folder or read a variable (the import
   system, ``site``, a walk of ``os.environ``), and got a trampoline frame:
   the import system's listing of the working directory counted as the
   config's, and each test that records an evaluation failed ("changed during
   the evaluation"). Here ``sys._getframe`` steps over those frames.
4. **A mutant ends its own worker at most.** mutmut's workers share its
   process group; a mutant can make a process a test starts kill "its own
   process group" (the ``--module`` child's reaper does, by design, in the
   session its parent gives it), which killed the whole run. Each worker here
   starts a session of its own: such a mutant ends its worker, and counts as
   killed.
5. **The package's frames are its own, as without mutmut.** The trampolines'
   frames stand between a mutated function's frames, in a file of mutmut's:
   code that tells its own frames from the program's by their file (the
   ``--module`` wait's ``parent.hide_our_frames``, which cuts them from a
   Ctrl-C's traceback) took the first trampoline for the program's frame, and
   its test could not run under mutation. Here the trampolines made from then
   on are filed as the mutated package's (a file of that folder's that does not
   exist).

A test that builds a child's environment from scratch passes ``MUTANT_UNDER_TEST``
and ``MUTATION_HITS`` on (``tests/helpers.child_env``), or the mutant is not
active in that child.
"""

from __future__ import annotations

import contextlib
import os
import sys
import types
from typing import Any

MUTANT = "MUTANT_UNDER_TEST"
HITS = "MUTATION_HITS"

#: ``os.environ`` as the interpreter started: a recorder may replace the name.
#: The ``--module`` child runs ``site`` (and so this module) recorded: then a
#: plain mapping over the recorder's variables, which records nothing.
_environ = os.environ
if type(_environ) is not os._Environ:
    _environ = os._Environ(
        _environ._data,  # type: ignore[attr-defined]
        _environ.encodekey,  # type: ignore[attr-defined]
        _environ.decodekey,  # type: ignore[attr-defined]
        _environ.encodevalue,  # type: ignore[attr-defined]
        _environ.decodevalue,  # type: ignore[attr-defined]
    )
#: The mutant and the hits file as this interpreter started: a program a test
#: runs may empty its environment (a config that deletes every variable), and
#: its mutant stays active, its calls counted.
_at_start = {name: _environ.get(name) for name in (MUTANT, HITS)}
#: The process that runs pytest for mutmut; None in every other process.
_main_pid: int | None = None
#: The names this process has written to ``MUTATION_HITS``: each once.
_noted: set[str] = set()
#: The process ``_noted`` belongs to: a forked copy starts its own.
_noted_by: int | None = None
#: ``os.getpid`` itself: a test may patch it (a forked copy, seen from its
#: owner), and the main process must stay the main process then.
_getpid = os.getpid


def _variable(name: str) -> str | None:
    """``name`` in the environment; in an interpreter a test started (not
    mutmut's, where mutmut sets it per mutant), as it started if gone since."""
    value = _environ.get(name)
    if value is None and _main_pid is None:
        return _at_start[name]
    return value


def _run_as_main() -> str | None:
    """The module this process runs as ``__main__`` (``python -m MODULE``)."""
    spec = getattr(sys.modules.get("__main__"), "__spec__", None)
    name = getattr(spec, "name", None)
    return name if isinstance(name, str) else None


def _mutant_under_test() -> str:
    """mutmut's ``get_mutant_under_test``. In ``python -m MODULE`` (the
    ``--module`` child), MODULE's functions run in ``__main__``, a copy mutmut
    does not know by that name: a mutant of MODULE is one of ``__main__`` too."""
    from mutmut.mutation import trampoline

    value = _variable(MUTANT)
    if value is None:
        value = trampoline._mutant_under_test or ""
    module, dot, function = value.rpartition(".")
    if dot and module == _run_as_main():
        return f"__main__.{function}"
    return value


def _note(name: str, caller: str | None = None) -> None:
    """mutmut's ``record_trampoline_hit``, in any process."""
    if name.startswith("__main__."):
        name = f"{_run_as_main()}.{name.partition('.')[2]}"
    global _noted_by
    pid = _getpid()
    if pid == _main_pid:
        _record(name, caller)
        return
    if _noted_by != pid:  # forked: what the parent wrote is not this one's
        _noted.clear()
        _noted_by = pid
    if name in _noted:
        return
    _noted.add(name)
    path = _variable(HITS)
    if not path:
        return
    try:
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CLOEXEC)
    except OSError:  # not this user's to write: the calls are not counted
        return
    try:
        os.write(fd, (name + "\n").encode())
    finally:
        os.close(fd)


def _install() -> None:
    from mutmut.mutation import trampoline

    global _record
    if trampoline.get_mutant_under_test is _mutant_under_test:
        return
    _record = trampoline.record_trampoline_hit
    trampoline.os = types.SimpleNamespace(environ=_environ)  # its only use of os
    trampoline.get_mutant_under_test = _mutant_under_test
    trampoline.record_trampoline_hit = _note


def _record(name: str, caller: str | None = None) -> None:  # replaced by _install
    raise AssertionError("not installed")


_install()

#: mutmut's frames between a mutated function's caller and its code: those of
#: its ``trampoline.py``, filed as the mutated package's (below).
_TRAMPOLINE = os.path.join("mutmut", "mutation", "trampoline.py")
_FILED_AS = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                         "rocm_hwq_autoset", "__mutmut_trampoline__.py")  # fmt: skip
_real_getframe = sys._getframe


def _filed(code: types.CodeType) -> types.CodeType:
    """``code`` and the functions it makes, as if written in :data:`_FILED_AS`."""
    consts = tuple(_filed(c) if isinstance(c, types.CodeType) else c
                   for c in code.co_consts)  # fmt: skip
    return code.replace(co_filename=_FILED_AS, co_consts=consts)


def _file_trampolines_as_the_package_s() -> None:
    from mutmut.mutation import trampoline

    wrap = trampoline.wrap_in_trampoline
    if wrap.__code__.co_filename != _FILED_AS:
        wrap.__code__ = _filed(wrap.__code__)


_file_trampolines_as_the_package_s()


def _is_trampoline(frame: Any) -> bool:
    """(Trampolines made before these hooks keep mutmut's file.)"""
    filename = frame.f_code.co_filename
    return filename == _FILED_AS or filename.endswith(_TRAMPOLINE)


def _getframe(depth: int = 0) -> Any:
    """``sys._getframe`` as without mutmut: mutmut's trampoline frames do not
    count as frames up (its caller's frame is 1 up, as ever)."""
    frame: Any = _real_getframe(1)
    for _ in range(depth):
        frame = frame.f_back
        while frame is not None and _is_trampoline(frame):
            frame = frame.f_back
        if frame is None:
            raise ValueError("call stack is not deep enough")
    return frame


sys._getframe = _getframe


#: How the ``--module`` child starts (``process.BOOT``): under ``python -S``,
#: its first call already a mutated function's, before ``site`` (and so
#: ``sitecustomize``) could load these hooks.
_BOOT_IMPORT = "from rocm_hwq_autoset._evaluation.child import boot"


def _load_in_boot(event: str, args: tuple[Any, ...]) -> None:
    """An audit hook: a child started as ``python -S -c BOOT`` loads these
    hooks first (the argument list is changed in place, before the exec)."""
    if event != "subprocess.Popen" or not isinstance(args[1], list):
        return
    argv = args[1]
    first = f"import mutation_hooks; {_BOOT_IMPORT}"
    for at, arg in enumerate(argv):
        if isinstance(arg, str) and _BOOT_IMPORT in arg and first not in arg:
            argv[at] = arg.replace(_BOOT_IMPORT, first)


sys.addaudithook(_load_in_boot)


# The pytest plugin, in mutmut's own process.


def pytest_configure(config: Any) -> None:
    global _main_pid
    if _main_pid is None:
        _main_pid = _getpid()
        hits = os.path.abspath(os.path.join(".mutation", f"hits.{_main_pid}"))
        os.makedirs(os.path.dirname(hits), exist_ok=True)
        open(hits, "w").close()
        # A test may start a child as another user (test_node's reader of
        # another user's processes): its calls count too.
        os.chmod(hits, 0o666)
        os.environ[HITS] = hits
    elif _getpid() != _main_pid:
        # A worker testing one mutant: a session of its own. A mutant may make
        # a process the tests start end "its own process group" (the --module
        # child's reaper does that): it ends this worker alone, which counts
        # the mutant as killed, never mutmut and its other workers.
        with contextlib.suppress(OSError):  # already a session's leader
            os.setsid()


def _take_hits() -> set[str]:
    path = os.environ.get(HITS)
    if not path:
        return set()
    try:
        with open(path, "r+") as hits:
            names = set(hits.read().split())
            hits.seek(0)
            hits.truncate()
    except OSError:
        return set()
    return names


def pytest_runtest_logreport(report: Any) -> None:
    """A forked test's duration: mutmut measures it in the fork, and loses it."""
    if _getpid() != _main_pid or report.when != "call":
        return
    from mutmut.state import state

    durations = state().duration_by_test
    if not durations.get(report.nodeid):
        durations[report.nodeid] = report.duration


def pytest_runtest_logfinish(nodeid: str, location: Any) -> None:
    """The functions this test ran in other processes count for it."""
    if _getpid() != _main_pid:
        return
    names = _take_hits()
    if not names or _mutant_under_test() != "stats":
        return
    from mutmut.state import state

    test = nodeid[len("mutants/") :] if nodeid.startswith("mutants/") else nodeid
    for name in names:
        state().tests_by_mangled_function_name[name].add(test)

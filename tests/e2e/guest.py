"""The guest contract as a differential test: a probe program, run once with
the hook on and once with it off (``ROCM_HWQ_AUTOSET=0``) under the same
conditions, records what its own code can observe; the two records must be
equal but for the differences :func:`allowed` names (docs/design.md, "The
guest contract").

The probe is one program in three launch forms: a script with a
``--job.config_file`` (a TOML launch), ``python -m torchtitan.probe --module
M --config FN`` (the training evaluated in the package's child), and a
torchrun-like launcher (a script named ``torchrun``) that starts it as one
worker, as torch elastic does. Each of its processes writes a record of its
own to a folder the harness names (``PROBE_OUT``); the harness adds what the
world outside sees: the exit status or signal, stdout, stderr without the
package's own lines, whether both pipes reach EOF as soon as the program has
ended, and the processes of the run still alive then.
"""

from __future__ import annotations

import contextlib
import difflib
import json
import os
import signal
import stat
import subprocess
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from ..helpers import ROCM_VERSION_PY, Venv, fake_torch
from ..standin import write_standin

#: The probe. Its own output (stdout, stderr, a thread's, a signal handler's,
#: an ``atexit`` handler's) goes where the run puts it; its record goes to
#: ``$PROBE_OUT/<role>.json``. ``PROBE_DO`` says what else it does: ``exit=N``,
#: ``signal`` (it ends by SIGTERM), ``silent`` (it writes nothing on stdout nor
#: stderr), ``stopkill`` (the launcher stops every
#: child it has, then kills itself), ``kill`` (the launcher kills itself).
PROBE = r"""
import atexit, json, os, signal, stat, sys, tempfile, threading
ROLE = ("launcher" if os.path.basename(sys.argv[0]) == "torchrun"
        else "worker" if "LOCAL_RANK" in os.environ else "main")
DO = dict(item.partition("=")[::2]
          for item in os.environ["PROBE_DO"].split(",") if item)
if ROLE != "launcher":
    try:
        import torch  # a training's first import: the hook waits for its value
    except ImportError:
        pass
record = {}

def disposition(handler):
    if handler in (signal.SIG_DFL, signal.SIG_IGN):
        return signal.Handlers(handler).name
    if handler is None:
        return None
    return f"{handler.__module__}.{handler.__qualname__}"

def descriptors():
    found = {}
    for name in os.listdir("/proc/self/fd"):
        fd = int(name)
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
            mode = os.fstat(fd).st_mode
            inheritable = os.get_inheritable(fd)
        except OSError:  # the listing's own descriptor, closed
            continue
        if ":[" in target or target.startswith("anon_inode:"):
            target = target.split(":")[0]  # pipe, socket, anon_inode
        found[str(fd)] = [target, stat.S_IFMT(mode), inheritable]
    return found

def save(role, record):
    out = os.path.join(os.environ["PROBE_OUT"], role + ".json")
    with open(out + ".part", "w") as f:
        json.dump(record, f)
    os.rename(out + ".part", out)

def children():
    kids = []
    for task in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{task}/children") as f:
                kids += [int(k) for k in f.read().split()]
        except OSError:  # a thread that ended meanwhile
            pass
    return kids

record["env"] = {k: v for k, v in os.environ.items() if k != "PROBE_OUT"}
record["queues"] = os.environ.get("GPU_MAX_HW_QUEUES")
mask = os.umask(0o22)
os.umask(mask)
record["umask"] = mask
record["cwd"] = os.getcwd()
record["signals"] = {s.name: disposition(signal.getsignal(s)) for s in signal.Signals
                     if s not in (signal.SIGKILL, signal.SIGSTOP)}
record["blocked"] = sorted(int(s) for s in signal.pthread_sigmask(signal.SIG_BLOCK, []))
record["fds"] = descriptors()
record["tasks"] = len(os.listdir("/proc/self/task"))  # its threads, C's too
# A copy of itself made by fork (before any thread of its own) sees what it
# holds, and ends.
copy = os.fork()
if copy == 0:
    save(ROLE + "-fork", {"fds": descriptors(), "env": record["env"],
                          "modules": [], "queues": None})
    os._exit(0)
try:
    record["fork"] = os.waitstatus_to_exitcode(os.waitpid(copy, 0)[1])
except ChildProcessError:  # SIGCHLD ignored: reaped by the kernel
    record["fork"] = "reaped"
record["stdio"] = [None if s is None else [s.encoding, s.errors, s.line_buffering]
                   for s in (sys.stdin, sys.stdout, sys.stderr)]
# Its own temporary folder, after it names one.
os.environ["TMPDIR"] = os.environ["PROBE_TMP"]
record["tempdir"] = tempfile.gettempdir()
with tempfile.NamedTemporaryFile(prefix="probe") as f:
    record["tempfile_dir"] = os.path.dirname(f.name)
# A thread, a signal handler and an atexit handler of its own, all talking.
def talk(what):
    if "silent" not in DO:
        print(f"{ROLE} {what} out")
        print(f"{ROLE} {what} err", file=sys.stderr)
thread = threading.Thread(target=talk, args=("thread",), name="probe-thread")
thread.start()
thread.join()
got = []
signal.signal(signal.SIGUSR1, lambda signum, frame: got.append(signum))
os.kill(os.getpid(), signal.SIGUSR1)
record["handled"] = got
atexit.register(talk, "atexit")
talk("main")
record["threads"] = sorted(t.name for t in threading.enumerate())
record["modules"] = sorted(sys.modules)
record["stdlib"] = [m for m in record["modules"]
                    if m.partition(".")[0] in sys.stdlib_module_names]
record["children"] = len(children())

save(ROLE, record)
status = int(DO.get("exit", "0"))
if ROLE == "launcher":
    if "stopkill" in DO or "kill" in DO:
        if "stopkill" in DO:
            for kid in children():
                os.kill(kid, signal.SIGSTOP)
        os.kill(os.getpid(), signal.SIGKILL)
    import subprocess
    i = sys.argv.index("-m")
    env = dict(os.environ, WORLD_SIZE="1", RANK="0", LOCAL_RANK="0")
    status = subprocess.call([sys.executable, "-u", *sys.argv[i:]], env=env)
if "signal" in DO:
    sys.stdout.flush()
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    os.kill(os.getpid(), signal.SIGTERM)
sys.exit(status)
"""

#: The package's own lines on stderr: everything else there is the program's.
OWN_LINE = b"rocm-hwq-autoset:"
#: What the switch that turns the hook off adds to the off run's environment.
SWITCH = "ROCM_HWQ_AUTOSET"
#: Seconds the pipes of a program that ended may take to reach EOF, and the
#: processes of its run to end: the package's child ends with its launcher.
SETTLE_SECONDS = 3.0

#: A config the stand-in evaluates (Q 4) and a TOML job (Q 8).
MODULE_ARGS = ["--module", "graph_trainer.llama3", "--config",
               "graph_trainer_llama3_debugmodel"]  # fmt: skip
JOB = b"[model]\nname = 'deepseek_v3'\n[parallelism]\nexpert_parallel_degree = 2\n"
#: The three launch forms: ``python ARGS``.
FORMS = {
    "script": ["probe.py", "--job.config_file", "job.toml"],
    "module": ["-m", "torchtitan.probe", *MODULE_ARGS],
    "torchrun": ["torchrun", "--nproc_per_node=1", "-m", "torchtitan.probe",
                 *MODULE_ARGS],
}  # fmt: skip


#: The package's own top-level modules (the gate and the modules beside it,
#: such as 3.9's command line reader), and its dependency's (TOML on 3.9/3.10).
PACKAGE_MODULES = ("rocm_hwq_autoset", "_rocm_hwq_autoset_", "tomli")


def allowed(record: Mapping[str, Any], off: Mapping[str, Any] | None) -> dict[str, Any]:
    """A probe's record without what the hook may change (the guest contract's
    allowed differences, each named here and in docs/design.md), against the
    same process's record with the hook ``off``: the value and the package's
    own variables; the off switch the off run is started with; modules the
    off run lacks that are the package's or the standard library's (what the
    ``--module`` launch's wait, its child's pipes and its ``import`` audit hook
    need); the package's child, a child of the process that evaluates, and
    the pipes to it that process holds above stdio's numbers, never
    inherited."""
    out = dict(record)
    out.pop("queues", None)
    out.pop("children", None)
    out["env"] = {
        name: value
        for name, value in record["env"].items()
        if name != "GPU_MAX_HW_QUEUES"
        and not name.startswith("ROCM_HWQ_AUTOSET_")
        and name != SWITCH
    }
    theirs = set(off["modules"]) if off is not None else set(record["modules"])
    ours = set(record.get("stdlib", ()))
    out.pop("stdlib", None)
    out["modules"] = [
        name
        for name in record["modules"]
        if name in theirs
        or not (name in ours or name.partition(".")[0].startswith(PACKAGE_MODULES))
    ]
    theirs_fds = off["fds"] if off is not None else record["fds"]
    out["fds"] = {
        fd: seen
        for fd, seen in record["fds"].items()
        if fd in theirs_fds or int(fd) <= 2 or seen != ["pipe", stat.S_IFIFO, False]
    }
    return out


class Guest:
    """One test's world: the stand-in torchtitan with the probe in it, a fake
    ROCm torch, a working directory with the probe script, a TOML job and the
    torchrun stand-in, a cache folder, and a folder for the records."""

    def __init__(self, root: Path, venv: Venv) -> None:
        self.root = root
        self.venv = venv
        self.rocm = fake_torch(root / "rocm", ROCM_VERSION_PY)
        self.standin = write_standin(root / "standin")
        (self.standin / "torchtitan" / "probe.py").write_text(PROBE)
        self.work = root / "work"
        self.work.mkdir()
        (self.work / "probe.py").write_text(PROBE)
        (self.work / "torchrun").write_text(PROBE)
        (self.work / "job.toml").write_bytes(JOB)
        self.tmp = root / "probe tmp ü"  # where the probe points TMPDIR
        self.tmp.mkdir()
        self.mark = f"PROBE_MARK={root}"
        self.runs = 0

    def env(self, **extra: str) -> dict[str, str]:
        name, _, value = self.mark.partition("=")
        path = os.pathsep.join(str(p) for p in (self.rocm, self.standin))
        return {"PATH": os.environ["PATH"], "PYTHONPATH": path, "HOME": str(self.root),
                "ROCM_HWQ_AUTOSET_CACHE_DIR": str(self.root / "cache"),
                "PROBE_TMP": str(self.tmp), name: value, **extra}  # fmt: skip

    def run(
        self,
        form: str,
        *,
        on: bool,
        env: Mapping[str, str | None] | None = None,
        do: str = "",
        stdout: str = "pipe",
        stderr: str = "pipe",
        stdin: str = "null",
        prepare: Callable[[], None] | None = None,
        prefix: tuple[str, ...] = (),
        cwd: Path | None = None,
    ) -> dict[str, Any]:
        """Run the probe in launch ``form`` with the hook ``on`` or off, ``env``
        over the world's (None: unset), its stdio as named (``pipe``, ``full``:
        /dev/full, ``closed``, ``null``), ``prepare`` run in the new process
        before it starts Python; what it and the world saw."""
        self.runs += 1
        out = self.root / f"records-{self.runs}"
        out.mkdir()
        full = self.env(PROBE_OUT=str(out), PROBE_DO=do)
        for name, value in (env or {}).items():
            if value is None:
                full.pop(name, None)
            else:
                full[name] = value
        if not on:
            full[SWITCH] = "0"
        opened: list[int] = []

        def stream(how: str) -> Any:
            if how == "pipe":
                return subprocess.PIPE
            if how == "closed":
                return subprocess.DEVNULL  # closed in ``start``
            fd = os.open("/dev/full" if how == "full" else os.devnull, os.O_RDWR)
            opened.append(fd)
            return fd

        stdio = (stdin, stdout, stderr)
        closed = [fd for fd, how in enumerate(stdio) if how == "closed"]

        def start() -> None:
            for fd in closed:
                os.close(fd)
            if prepare is not None:
                prepare()

        args = FORMS[form]
        try:
            proc = subprocess.Popen(
                [*prefix, self.venv.python, *args], cwd=cwd or self.work, env=full,
                stdin=stream(stdin), stdout=stream(stdout), stderr=stream(stderr),
                preexec_fn=start, start_new_session=True,
            )  # fmt: skip
        finally:
            for fd in opened:
                os.close(fd)
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        eof = True
        try:
            got_out, got_err = proc.communicate(timeout=SETTLE_SECONDS)
        except subprocess.TimeoutExpired:
            eof = False
        survivors = self.survivors()
        self.end(survivors)
        if not eof:
            got_out, got_err = proc.communicate(timeout=30)
        records = {p.stem: json.loads(p.read_text()) for p in out.glob("*.json")}
        status: int | str = proc.returncode
        if proc.returncode < 0:
            status = f"signal {signal.Signals(-proc.returncode).name}"
        seen: dict[str, Any] = {
            "status": status,
            "stdout": None if got_out is None else got_out.decode(errors="replace"),
            "stderr": None if got_err is None else b"".join(
                line for line in got_err.splitlines(keepends=True)
                if not line.startswith(OWN_LINE)
            ).decode(errors="replace"),
            "own lines": None if got_err is None else [
                line.decode(errors="replace") for line in got_err.splitlines()
                if line.startswith(OWN_LINE)
            ],
            "pipes reach EOF at its end": eof,
            "processes left": [desc for _, desc in survivors],
            "records": records,
        }  # fmt: skip
        return seen

    def survivors(self) -> list[tuple[int, str]]:
        """The processes of this world still alive once its program has ended
        (waiting :data:`SETTLE_SECONDS` at most for them to go): their command
        lines' first words and their state (``T``: stopped)."""
        deadline = time.monotonic() + SETTLE_SECONDS
        while True:
            found = []
            mark = self.mark.encode() + b"\0"
            for entry in Path("/proc").iterdir():
                if not entry.name.isdigit():
                    continue
                try:
                    if mark not in (entry / "environ").read_bytes():
                        continue
                    words = (entry / "cmdline").read_bytes().split(b"\0")
                    state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
                except OSError:
                    continue
                line = " ".join(w.decode(errors="replace")[:60] for w in words[:4])
                found.append((int(entry.name), f"{line} (state {state})"))
            if not found or time.monotonic() > deadline:
                return found
            time.sleep(0.05)

    @staticmethod
    def end(survivors: list[tuple[int, str]]) -> None:
        """End what a run left behind: processes this test's runs started."""
        for pid, _ in survivors:
            with contextlib.suppress(OSError):  # it ended meanwhile
                os.kill(pid, signal.SIGKILL)


def compared(off: Mapping[str, Any], on: Mapping[str, Any]) -> dict[str, Any]:
    """Both runs' observations as the contract compares them (:func:`allowed`
    applied to each record)."""

    def norm(seen: Mapping[str, Any], ref: Mapping[str, Any]) -> dict[str, Any]:
        out = {k: v for k, v in seen.items() if k not in ("records", "own lines")}
        out["records"] = {}
        for role, record in seen["records"].items():
            out["records"][role] = allowed(record, ref["records"].get(role))
        return out

    return {"off": norm(off, off), "on": norm(on, off)}


def differences(off: Mapping[str, Any], on: Mapping[str, Any]) -> str:
    """A readable diff of what the program observed with the hook off and on
    (empty: none), the allowed differences left out."""
    both = compared(off, on)
    left = json.dumps(both["off"], indent=1, sort_keys=True).splitlines()
    right = json.dumps(both["on"], indent=1, sort_keys=True).splitlines()
    diff = difflib.unified_diff(left, right, "hook off", "hook on", lineterm="")
    return "\n".join(diff)

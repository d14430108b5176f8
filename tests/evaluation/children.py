"""The real child of the --module evaluation, run on the stand-in torchtitan:
its environment, its answer, what it evaluated."""

from __future__ import annotations

import contextlib
import fcntl
import io
import json
import os
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from rocm_hwq_autoset._config import ConfigError
from rocm_hwq_autoset._evaluation import child as child_module
from rocm_hwq_autoset._evaluation.answer import Answer
from rocm_hwq_autoset._evaluation.cache import Cache
from rocm_hwq_autoset._evaluation.process import child_command

ROOT = Path(__file__).resolve().parents[2]


#: The child, started as the parent starts it (``python -S -c BOOT``).
CHILD = child_command(None)
# Every child these tests start has a session of its own, as the package's
# are (start_new_session): a child lowers its session's autogroup to nice 19
# once it answered (process.lowest_priority), and in the test run's session
# that left every later test of the run, and every later command of the shell
# that started it, at ~1.4 % of a CPU beside anything else running
# (test_recipes' 300 s bound then ran out).


def child(world: dict[str, str], args: list[str], *, cache: bool = True,
          key: str = "k" * 32, watched: bool = False,
          **env: str) -> subprocess.Popen[str]:  # fmt: skip
    """The child, started as a launcher starts it; ``watched``: with this
    process as its launcher (``--parent``), which holds its stdin open until
    it closes it."""
    options = ["--cache", world["CACHE"], "--key", key] if cache else []
    if watched:
        options += ["--parent", str(os.getpid())]
    os.makedirs(world["CACHE"], mode=0o700, exist_ok=True)
    return subprocess.Popen(
        [*CHILD, *options, "--",
         *args],
        cwd=world["WORK"], env={**world, **env}, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True, start_new_session=True,
        stdin=subprocess.PIPE if watched else None,
    )  # fmt: skip


def answer(process: subprocess.Popen[str]) -> dict[str, Any]:
    """The one line a child printed (an ``answer.Answer``, which reads back),
    as its fields: ``inputs`` and ``settings`` for a config, ``error`` and
    ``source`` for a refusal (a failure: ``source`` empty), and ``how``."""
    out, err = process.communicate(timeout=60)
    assert err == "" and out.count("\n") == 1, (out, err)
    return flat(json.loads(out))


def flat(doc: dict[str, Any]) -> dict[str, Any]:
    """An answer's JSON document as :func:`answer` gives it."""
    Answer.from_json(doc)
    if "config" in doc:
        return {**doc["config"], "how": doc["how"]}
    if "refused" in doc:
        return {"error": doc["refused"]["reason"], "source": doc["refused"]["source"],
                "how": doc["how"]}  # fmt: skip
    return {"error": doc["failed"], "source": "", "how": doc["how"]}


def refusal(reason: str, source: str = "", how: str = "evaluated") -> Answer:
    """An answer that is a refusal, as a peer publishes it."""
    return Answer(refusal=ConfigError(reason, source), how=how)


def evaluations(world: dict[str, str]) -> int:
    path = Path(world["STANDIN_LOG"])
    if not path.exists():
        return 0
    return sum(json.loads(line)[0] == "parse_args" for line in path.open())


def said(*lines: str) -> io.StringIO:
    return io.StringIO("".join(line + "\n" for line in lines))


class Forked:
    """``child.main(argv)`` in a fork, with ``env`` added to its
    environment; the alarm it sets is noted, not set. In a session of its own,
    as the real child is (``start_new_session``): the child lowers its
    session's autogroup to nice 19 (``lowest_priority``), which, in the test
    run's session, left every later test of the run, the torchtitan ones and
    their 300 s bounds among them, and every later command of the shell that
    started it, at ~1.4 % of a CPU beside anything else running."""

    def __init__(self, tmp_path: Path, argv: list[str], **env: str) -> None:
        self.out = tmp_path / "out"
        self.alarm = tmp_path / "alarm"
        self.pid = os.fork()
        if self.pid == 0:
            try:
                os.setsid()
                fd = os.open(self.out, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
                os.dup2(fd, 1)
                os.environ.update(env)
                signal.alarm = lambda seconds: self.alarm.write_text(str(seconds)) or 0
                child_module.main(argv)
            finally:
                os._exit(3)  # main raised

    def finish(self) -> tuple[int, str]:
        """Its exit status and what it printed."""
        _, status = os.waitpid(self.pid, 0)
        return os.waitstatus_to_exitcode(status), self.out.read_text()

    def blocked(self) -> bool:
        """Whether it waits for a lock."""
        with open("/proc/locks") as locks:
            return any("->" in line and f" {self.pid} " in line for line in locks)

    def wait_blocked(self) -> None:
        """Until it waits for a lock (it runs at our priority: bounded)."""
        deadline = time.monotonic() + 10
        while not self.blocked() and time.monotonic() < deadline:
            time.sleep(0.01)
        assert self.blocked()


@contextlib.contextmanager
def held(cache: Cache, name: str) -> Iterator[None]:
    """The cache's lock file ``name`` held, as a peer or a check holds it; a
    fork made meanwhile shares the descriptor, and the release ends the hold
    for both."""
    lock = os.open(os.path.join(cache.path, name), os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield
    finally:
        fcntl.flock(lock, fcntl.LOCK_UN)
        os.close(lock)

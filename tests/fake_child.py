"""A stand-in for ``rocm_hwq_autoset._evaluation.child``: the parent's tests run it
instead (``process.CHILD``), so that they control what the child does
and when, without torchtitan.

Its environment tells it what to do: ``FAKE_CHILD_LOG`` (a file: one JSON line
of what it was started with), ``FAKE_CHILD_SLEEP`` (seconds before answering),
``FAKE_CHILD_OUT`` (what to print; default a Q=8 result; ``FAKE_CHILD_OUT_TIMES``
repeats it), ``FAKE_CHILD_LINGER``
(seconds it goes on after printing, its stdout still open), ``FAKE_CHILD_EXIT``
(the status), ``FAKE_CHILD_SIGNAL`` (end by this signal instead of printing),
``FAKE_CHILD_STDERR`` (what to say on stderr first), ``FAKE_CHILD_SAY`` (what a
check writes on the descriptor ``--say`` names), ``FAKE_CHILD_GRANDCHILD``
(start a sleeping process of its own first, and log its pid). It watches its
parent as the real child does, unless ``FAKE_CHILD_STUCK`` (it stands for a
child stuck in the GPU driver, which neither its parent's end nor a signal ends
at once).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

from rocm_hwq_autoset import recommend
from rocm_hwq_autoset._evaluation.answer import Answer
from rocm_hwq_autoset._evaluation.process import watch
from rocm_hwq_autoset._model import Config, Inputs

#: What the tests' child answers by default: 5 lanes, Q = 8.
INPUTS = Inputs(moe=True, moe_from="traverse", ep=2, cudagraph=True)
SETTINGS = recommend(None).settings
#: Its answer, as the real child writes one.
ANSWER = json.loads(json.dumps(Answer(config=Config(INPUTS, SETTINGS)).to_json()))


def main(argv: list[str]) -> None:
    environ = os.environ
    record: dict[str, object] = {
        "argv": argv,
        "pid": os.getpid(),
        "pgid": os.getpgid(0),
        "ppid": os.getppid(),
        "switch": environ.get("ROCM_HWQ_AUTOSET"),
        "queues": environ.get("GPU_MAX_HW_QUEUES"),
        "niceness": os.nice(0),
        "stdin_is_pipe": not os.isatty(0) and os.fstat(0).st_size == 0,
    }
    if "--say" in argv:  # the file it says its line on
        said = os.fstat(int(argv[argv.index("--say") + 1]))
        record["say"] = [said.st_dev, said.st_ino]
    os.write(2, environ.get("FAKE_CHILD_STDERR", "").encode())
    if "--parent" in argv and not environ.get("FAKE_CHILD_STUCK"):
        watch(int(argv[argv.index("--parent") + 1]))
    if environ.get("FAKE_CHILD_GRANDCHILD"):
        grandchild = subprocess.Popen(
            [sys.executable, "-c", "import time; time.sleep(60)"]
        )
        record["grandchild"] = grandchild.pid
    if environ.get("FAKE_CHILD_LOG"):
        with open(environ["FAKE_CHILD_LOG"], "a") as log:
            log.write(json.dumps(record) + "\n")
    time.sleep(float(environ.get("FAKE_CHILD_SLEEP", "0")))
    if "--say" in argv and environ.get("FAKE_CHILD_SAY"):
        os.write(int(argv[argv.index("--say") + 1]), environ["FAKE_CHILD_SAY"].encode())
    if environ.get("FAKE_CHILD_SIGNAL"):
        os.kill(os.getpid(), int(environ["FAKE_CHILD_SIGNAL"]))
    out = environ.get("FAKE_CHILD_OUT", json.dumps(ANSWER))
    out *= int(environ.get("FAKE_CHILD_OUT_TIMES", "1"))  # past exec's limit
    os.write(1, (out + "\n").encode())
    time.sleep(float(environ.get("FAKE_CHILD_LINGER", "0")))
    os._exit(int(environ.get("FAKE_CHILD_EXIT", "0")))


def boot() -> None:
    """Started as the real child is (``python -S -c BOOT``): site here."""
    del sys.path[0]
    import site

    site.main()
    main(sys.argv[1:])


if __name__ == "__main__":
    main(sys.argv[1:])

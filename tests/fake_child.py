"""A stand-in for ``rocm_hwq_autoset._registry_child``: the parent's tests run it
instead (``_registry_parent.CHILD``), so that they control what the child does
and when, without torchtitan.

Its environment tells it what to do: ``FAKE_CHILD_LOG`` (a file: one JSON line
of what it was started with), ``FAKE_CHILD_SLEEP`` (seconds before answering),
``FAKE_CHILD_OUT`` (what to print; default a Q=8 result), ``FAKE_CHILD_EXIT``
(the status), ``FAKE_CHILD_GRANDCHILD`` (start a sleeping process of its own
first, and log its pid). It watches its parent as the real child does.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

from rocm_hwq_autoset import recommend
from rocm_hwq_autoset._model import Inputs
from rocm_hwq_autoset._registry_child import watch
from rocm_hwq_autoset._result import encode_result

#: What the tests' child answers by default: 5 lanes, Q = 8.
INPUTS = Inputs(moe=True, moe_from="traverse", ep=2, cudagraph=True)
SETTINGS = recommend(None).settings
RESULT = encode_result(INPUTS, SETTINGS)


def main(argv: list[str]) -> None:
    environ = os.environ
    record: dict[str, object] = {
        "argv": argv,
        "pid": os.getpid(),
        "pgid": os.getpgid(0),
        "ppid": os.getppid(),
        "switch": environ.get("ROCM_HWQ_AUTOSET"),
        "stdin_is_pipe": not os.isatty(0) and os.fstat(0).st_size == 0,
    }
    if "--parent" in argv:
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
    out = environ.get("FAKE_CHILD_OUT", json.dumps({**RESULT, "how": "evaluated"}))
    os.write(1, (out + "\n").encode())
    os._exit(int(environ.get("FAKE_CHILD_EXIT", "0")))


if __name__ == "__main__":
    main(sys.argv[1:])

"""The torchtitan venv the tests and benchmarks of the real torchtitan need:
CPython 3.11 from pyenv with ``torch==2.13.0`` (the CPU wheel this machine
keeps on disk for Python 3.11: any other version, or uv, would download a
multi-GB CUDA build), ``torchtitan==0.3.0`` and ``triton``. Made once, then
kept in ``${XDG_CACHE_HOME:-~/.cache}/rocm-hwq-autoset-ci/`` while the
requirements stay the same; ``.ci/run`` uses it too.

    eval "$(python tools/torchtitan_venv.py)"    # then python -m pytest ...

Stdout is one line, ``export ROCM_HWQ_TORCHTITAN=<the venv's python>``; what
it does is said on stderr. On a failure (no CPython 3.11, pip failing) stdout
is ``false``, so that the ``eval`` fails, and the exit status 1.
"""

from __future__ import annotations

import hashlib
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

REQUIREMENTS = "torch==2.13.0 torchtitan==0.3.0 triton"
VARIABLE = "ROCM_HWQ_TORCHTITAN"
#: The Python torch 2.13.0's CPU wheel on this machine is for.
PYTHON = "3.11"


def pyenv_root() -> Path:
    """``pyenv root``, else ``$PYENV_ROOT``, else ``~/.pyenv``."""
    if shutil.which("pyenv"):
        done = subprocess.run(["pyenv", "root"], capture_output=True, text=True)
        if done.returncode == 0 and done.stdout.strip():
            return Path(done.stdout.strip())
    return Path(os.environ.get("PYENV_ROOT") or Path.home() / ".pyenv")


def find_python(root: Path, version: str = PYTHON) -> Path | None:
    """The newest CPython ``version``.N under pyenv's versions, or None."""
    found = [
        (int(m.group(1)), p)
        for p in (root / "versions").glob(f"{version}.*")
        if (m := re.fullmatch(re.escape(version) + r"\.(\d+)", p.name))
        and (p / "bin" / "python3").is_file()
    ]
    return max(found)[1] / "bin" / "python3" if found else None


def keep_dir(environ: dict[str, str], requirements: str = REQUIREMENTS) -> Path:
    """Where the venv is kept: named by the requirements' hash (as ``.ci/run``
    named it: ``echo "$requirements" | sha256sum``, its first 12 digits)."""
    cache = environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    digest = hashlib.sha256((requirements + "\n").encode()).hexdigest()[:12]
    return Path(cache) / "rocm-hwq-autoset-ci" / f"torchtitan-{digest}"


def build(keep: Path, python: Path, requirements: str = REQUIREMENTS) -> None:
    """The venv at ``keep``, anew; ``ready`` marks it complete."""
    shutil.rmtree(keep, ignore_errors=True)
    keep.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run([str(python), "-m", "venv", str(keep)], check=True)
    subprocess.run(
        [str(keep / "bin" / "pip"), "install", "--quiet",
         "--disable-pip-version-check", *requirements.split()],
        check=True,
    )  # fmt: skip
    (keep / "ready").touch()


def main(argv: list[str]) -> int:
    if argv:
        print(__doc__, file=sys.stderr)
        return 2
    keep = keep_dir(dict(os.environ))
    say = f"{Path(__file__).name}:"
    if not (keep / "ready").is_file():
        root = pyenv_root()
        python = find_python(root)
        if python is None:
            print(f"{say} no CPython {PYTHON} under {root}/versions (pyenv install"
                  f" {PYTHON}); {VARIABLE} not set", file=sys.stderr)  # fmt: skip
            print("false")
            return 1
        print(f"{say} making {keep} with {python}: pip install {REQUIREMENTS}"
              " (once; kept while the requirements stay the same)",
              file=sys.stderr)  # fmt: skip
        try:
            build(keep, python)
        except (OSError, subprocess.CalledProcessError) as exc:
            print(f"{say} {exc}; {VARIABLE} not set", file=sys.stderr)
            print("false")
            return 1
    print(f"export {VARIABLE}={shlex.quote(str(keep / 'bin' / 'python'))}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

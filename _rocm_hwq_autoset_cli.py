"""The ``rocm-hwq-autoset`` console script: the package's command line
(``rocm_hwq_autoset._cli.main``), and its one-line answer where the package
cannot be imported.

It stands beside the package, not in it, so that it survives the package's
files (an editable install whose checkout moved) and says so in one line
(``_rocm_hwq_autoset_reinstall``) instead of a traceback.
"""

import sys

TYPE_CHECKING = False  # not typing's: a command that fails fast imports little
if TYPE_CHECKING:
    from typing import TextIO

PROG = "rocm-hwq-autoset"


def main() -> int:
    """The console script: the package's command line. Where the package
    cannot be imported, one line on stderr naming what is missing and the
    command that reinstalls it, exit 2; with ``--json``, ``{"error": ...}`` on
    stdout, and with ``--export``, ``false`` (so that ``eval "$(...)"``
    fails), as the command line itself answers a failure
    (``_cli.failure_output``)."""
    try:
        from rocm_hwq_autoset._cli import main as cli
    except ImportError as exc:
        from _rocm_hwq_autoset_reinstall import unimportable

        message = unimportable(exc)
        args = list(sys.argv[1:])
        own = args[: args.index("--")] if "--" in args else args
        names = {arg.partition("=")[0] for arg in own}
        if "--json" in names:
            import json

            _write(sys.stdout, json.dumps({"error": message}) + "\n")
        elif "--export" in names:
            _write(sys.stdout, "false\n")
        _write(sys.stderr, f"{PROG}: error: {message}\n")
        return 2
    return cli()


def _write(stream: "TextIO | None", text: str) -> None:
    """``text`` on a stream that may be closed (None) or refuse it."""
    try:
        if stream is not None:
            stream.write(text)
            stream.flush()
    except Exception:
        pass

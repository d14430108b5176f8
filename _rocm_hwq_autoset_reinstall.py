"""How this distribution was installed, and the command that installs it
again: what is said where the package cannot be imported (its files gone, as
under an editable install whose checkout moved).

It stands beside the package and imports nothing of it (nor anything beyond
``os`` and ``sys`` until asked), so that it survives the package: the console
script (``_rocm_hwq_autoset_cli``) and the start-up gate's verbose line say
:func:`unimportable`, and ``doctor`` gives :func:`reinstall`'s command for a
missing or stale start-up file.
"""

import sys

#: The installed distribution's name, as ``pip list`` shows it.
DISTRIBUTION = "rocm-hwq-autoset"


def unimportable(exc: ImportError) -> str:
    """What an import of the package that failed says: the module missing and
    the command that reinstalls it."""
    try:
        how, command = reinstall()
    except Exception:  # a broken distribution's metadata: the plain command
        how, command = "", f"pip install --force-reinstall --no-deps {DISTRIBUTION}"
    return (
        f"the package cannot be imported ({type(exc).__name__}: {exc}):"
        f" its files are missing{how}; reinstall: {command}"
    )


def reinstall() -> "tuple[str, str]":
    """How this interpreter's ``rocm-hwq-autoset`` was installed (`` (an
    editable install of PATH)``, `` (installed from PATH)``, or ``""`` for one
    from the index), and the command that installs it again the same way, as
    the distribution's ``direct_url.json`` (PEP 610) records it: ``pip install
    -e CHECKOUT`` for an editable install, ``pip install --force-reinstall
    --no-deps`` of the same source otherwise (the name alone: the index)."""
    import json
    import shlex
    from importlib import metadata
    from urllib.parse import unquote, urlsplit

    pip = f"{shlex.quote(sys.executable)} -m pip install"
    again = f"{pip} --force-reinstall --no-deps"
    try:
        recorded = metadata.distribution(DISTRIBUTION).read_text("direct_url.json")
    except metadata.PackageNotFoundError:  # run from a checkout, never installed
        return " (no installed distribution)", f"{pip} CHECKOUT (or a wheel)"
    if not recorded:  # from the package index
        return "", f"{again} {DISTRIBUTION}"
    info = json.loads(recorded)
    url = str(info.get("url", ""))
    parts = urlsplit(url)
    if parts.scheme == "file":
        where = unquote(parts.path)
        if (info.get("dir_info") or {}).get("editable"):
            return (
                f" (an editable install of {where})",
                f"{pip} -e {shlex.quote(where)}",
            )
        return f" (installed from {where})", f"{again} {shlex.quote(where)}"
    vcs_info = info.get("vcs_info") or {}
    vcs, commit = vcs_info.get("vcs"), vcs_info.get("commit_id")
    source = f"{vcs}+{url}" + (f"@{commit}" if commit else "") if vcs else url
    return f" (installed from {source})", f"{again} {shlex.quote(source)}"

"""Names that neither the model nor torchtitan 0.2.2's job config has, said.

A name a typo away from a field the model reads is refused with the one it
means (the did-you-mean search: edit distance, the parallel degrees'
shorthands): it would change Q without a word. Any other is named, one warning
per input: torchtitan 0.2.2 refuses it, but its releases differ in their
fields, so Q is set all the same.

A TOML launch loads this module only where it finds such a name
(``_config.unknown_keys``, ``_argv.unknown_flags``, a flag that
``_config.never_a_typo`` does not clear); the commands ask it too.
"""

from __future__ import annotations

from ._config import (
    FIELDS,
    SECTIONS,
    TORCHTITAN_RELEASE,
    ConfigError,
    never_a_typo,
    source_in,
)

# Near misses: a name an edit or two away from a field the model reads is a typo
# that would change Q without a word. No field of torchtitan's own is that close
# to one of ours (tests/unit/test_config.py holds that against its table).

#: Most edits (insert, delete, replace) between a typo and the field it means.
MAX_EDITS = 2


def near_miss(name: str) -> str | None:
    """The field ``name`` (``section.field``) is a typo of, or None when it is
    one exactly, is torchtitan's, or is not close to any. A TOML key must be
    spelt exactly (a ``-`` for a ``_`` is a typo there); a flag is normalized by
    its caller."""
    if never_a_typo(name):
        return None  # ours, torchtitan's, or in a section of torchtitan's only
    section = name.partition(".")[0]
    if section not in SECTIONS and not any(
        edits_within(section, ours, MAX_EDITS) for ours in SECTIONS
    ):
        return None  # not even the section is close to one of ours
    for ours in FIELDS:
        if edits_within(name, ours, MAX_EDITS):
            return ours
    return shorthands().get(name)


#: :func:`shorthands`, derived once: :func:`near_miss` asks it for every key of
#: our sections that is no field of ours nor of torchtitan's.
_shorthands: dict[str, str] = {}


def shorthands() -> dict[str, str]:
    """Each parallel degree of ours by its shorthand (:func:`_derive_shorthands`)."""
    if not _shorthands:
        _shorthands.update(_derive_shorthands())
    return dict(_shorthands)


def _derive_shorthands() -> dict[str, str]:
    """Each parallel degree of ours by the shorthand a hand types for it, as
    ``section.short``: its initials through ``parallel``, the words before
    ``degree`` after them, ``_degree`` or not (``parallelism.tp``,
    ``parallelism.ep_degree``, ``parallelism.dp_shard``); a shorthand two
    fields share (``dp``) is none. torchtitan has no such field: tyro and its
    TOML reader refuse each (issue #37: ``--parallelism.tp 2`` gave a Q that
    counted no TP, without a word)."""
    found: dict[str, str] = {}
    shared = set()
    for ours in FIELDS:
        section, _, name = ours.rpartition(".")
        words = name.split("_")
        if "parallel" not in words or words[-1] != "degree":
            continue
        at = words.index("parallel")
        short = "".join(w[0] for w in words[: at + 1])
        short += "".join(f"_{w}" for w in words[at + 1 : -1])
        for each in (f"{section}.{short}", f"{section}.{short}_degree"):
            if each in found:
                shared.add(each)
            found[each] = ours
    return {k: v for k, v in found.items() if k not in shared}


def edits_within(a: str, b: str, limit: int) -> bool:
    """Whether the edit distance of ``a`` and ``b`` (Levenshtein's: inserts,
    deletes, replacements) is at most ``limit``. Past their common prefix, the
    first differing character is replaced, deleted, or has one inserted before
    it: three ways on, each with one edit fewer to spend (at most 3**limit)."""
    if abs(len(a) - len(b)) > limit:
        return False
    same = 0
    end = min(len(a), len(b))
    while same < end and a[same] == b[same]:
        same += 1
    if same == end:  # one is a prefix of the other: the rest is inserted
        return True
    if limit == 0:
        return False
    a, b = a[same:], b[same:]
    return (
        edits_within(a[1:], b[1:], limit - 1)
        or edits_within(a[1:], b, limit - 1)
        or edits_within(a, b[1:], limit - 1)
    )


def refusals(flags: list[str], keys: list[str], where: str) -> tuple[ConfigError, ...]:
    """What torchtitan 0.2.2 refuses in a TOML launch that the model does not
    read, from the command line's unknown flags (``_argv.unknown_flags``) and
    the config's unknown keys (``_config.unknown_keys``, read from
    ``where``): one ``ConfigError``, not raised, for the flags and one for the
    keys, each naming them all. ``ConfigError`` raised for the first key a
    typo away from a section or field the model reads."""
    for key in keys:
        _refuse_typo(key, where)
    release = (
        f"torchtitan {TORCHTITAN_RELEASE}'s job config (the TOML era's last"
        " release), which refuses the job for it"
    )
    found = []
    if flags:
        found.append(ConfigError(f"no such option in {release}", ", ".join(flags)))
    if keys:
        found.append(ConfigError(f"no such field in {release}",
                                 source_in(where, ", ".join(keys))))  # fmt: skip
    return tuple(found)


def _refuse_typo(name: str, where: str) -> None:
    """``ConfigError`` for a key (``name``, its dotted path) of a config read
    from ``where`` a typo away from a section or field the model reads."""
    if "." not in name:
        for ours in SECTIONS:
            if edits_within(name, ours, MAX_EDITS):
                raise ConfigError(
                    f"not a torchtitan section; did you mean [{ours}]?",
                    source_in(where, f"[{name}]"),
                )
        return
    meant = near_miss(name)
    if meant is not None:
        raise ConfigError(
            f"not a torchtitan field; did you mean {meant}?", source_in(where, name)
        )

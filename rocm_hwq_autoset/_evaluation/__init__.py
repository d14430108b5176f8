"""The ``--module``/``--config`` evaluation: torchtitan >= 0.3.0's config is a
Python function, so a child interpreter evaluates it (``child``), started and
waited for by the launcher or the training process (``parent``); the answers
are kept in a cache (``cache``) with what each evaluation read (``deps``), and
passed between processes as values with one text form (``answer``).

Nothing here runs in a process that is not a ``--module`` launch (a TOML
launch never imports this package).
"""

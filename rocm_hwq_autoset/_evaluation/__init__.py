"""The ``--module``/``--config`` wing: torchtitan >= 0.3.0's config is a Python
function, so a child interpreter evaluates it. The hook and the commands come
in through this one door: :func:`start` (the hook, at interpreter start: the
cache's answer at once, or a child started and waited for only when the value
is needed), :func:`evaluate` (the commands: now, waiting, and the line that
says so, :func:`waiting`), and the cache's :func:`open_cache` and
:func:`location` (``doctor``).

Inside, from the ground up: what an evaluation read and whether it changed
(``deps``); its answer as a value and its text form (``answer``); the cache of
answers (``cache``); one child's process, both sides (``process``); the
process starts a launcher makes, watched (``spawns``); torchtitan's registry
read in the child (``registry``); the child's own work (``child``); the
parent's (``parent``). Nothing here runs in a process that is not a
``--module`` launch: a TOML launch never imports this package.
"""

from .cache import MAX_UNCHECKED, location, open_cache
from .lines import waiting
from .parent import evaluate, start

__all__ = ["MAX_UNCHECKED", "evaluate", "location", "open_cache", "start", "waiting"]

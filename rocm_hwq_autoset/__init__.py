"""Set ``GPU_MAX_HW_QUEUES`` for torchtitan launches on ROCm at interpreter start.

The start-up gate is a module beside the package, ``_rocm_hwq_autoset_gate``:
``rocm_hwq_autoset.pth`` (and, on Python 3.15+, ``rocm_hwq_autoset.start``)
calls it, and it imports this package only for a training launch, to run the
hook (``_hook``). Importing this module imports nothing: it is imported by a
launch's start-up.

The public API, loaded on first use: :func:`recommend`, :class:`Recommendation`
and :class:`ConfigError`.
"""

TYPE_CHECKING = False  # not typing's: importing typing costs start-up time
if TYPE_CHECKING:
    from ._api import recommend
    from ._config import ConfigError
    from ._model import Recommendation

__version__ = "0.3.0"
__all__ = ["ConfigError", "Recommendation", "__version__", "recommend"]

_LAZY = {
    "recommend": "._api",
    "Recommendation": "._model",
    "ConfigError": "._config",
}


def __getattr__(name: str) -> object:
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name], __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

"""Set ``GPU_MAX_HW_QUEUES`` for torchtitan launches on ROCm at interpreter start.

The public API is :func:`recommend`, :class:`Recommendation` and :class:`ConfigError`.
They are loaded on first use: the start-up hook imports this package in every
training launch (and, on Python 3.15+, every process), so it must cost next to
nothing.
"""

TYPE_CHECKING = False  # not typing's: importing typing costs start-up time

__version__ = "0.2.0"
__all__ = ["ConfigError", "Recommendation", "__version__", "recommend"]

if TYPE_CHECKING:
    from ._launch import ConfigError
    from ._model import Recommendation, recommend


def __getattr__(name: str) -> object:
    if name in ("Recommendation", "recommend"):
        from . import _model

        return getattr(_model, name)
    if name == "ConfigError":
        from ._launch import ConfigError

        return ConfigError
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

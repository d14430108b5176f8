"""Set ``GPU_MAX_HW_QUEUES`` for torchtitan launches on ROCm at interpreter start.

The public API is :func:`recommend`, :class:`Recommendation` and :class:`ConfigError`.
They are loaded on first use: this module is imported by the PEP 829 ``.start``
entry point in every Python process, so it must cost next to nothing.
"""

TYPE_CHECKING = False  # not typing's: importing typing costs start-up time

__version__ = "0.1.0"
__all__ = ["ConfigError", "Recommendation", "__version__", "recommend"]

if TYPE_CHECKING:
    from ._api import Recommendation, recommend
    from ._errors import ConfigError


def __getattr__(name: str) -> object:
    if name in ("Recommendation", "recommend"):
        from . import _api

        return getattr(_api, name)
    if name == "ConfigError":
        from ._errors import ConfigError

        return ConfigError
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

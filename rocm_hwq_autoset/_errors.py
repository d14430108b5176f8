"""The one error the package raises on purpose."""


class ConfigError(ValueError):
    """The job config or its command line cannot be read as torchtitan would.

    The message is one line, meant for a user: it names the flag, field or file and
    what is wrong with it.
    """


class TraceError(ValueError):
    """A profiler trace cannot be read: not JSON, not a trace, truncated."""

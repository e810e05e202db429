"""warptrace's own errors: each carries a one-line message meant for the user."""

from __future__ import annotations


class WarptraceError(Exception):
    """Base class; ``str(error)`` is a complete one-line message. ``exit_code`` is the CLI status."""

    exit_code = 2


class TraceError(WarptraceError):
    """A trace directory is missing, unreadable, truncated, corrupt or of an unknown schema version."""


class UsageError(WarptraceError):
    """Bad command-line usage (missing script, unknown option)."""


class ScriptError(WarptraceError):
    """The user's script cannot be found or started (not a failure *inside* the script)."""


class TraceWarning(UserWarning):
    """An incomplete trace had a damaged tail: it is analyzed up to its consistent prefix."""

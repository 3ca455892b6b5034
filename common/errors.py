"""Errors that end a process with one clear line instead of a traceback."""

from __future__ import annotations


class FatalError(Exception):
    """A problem the operator must fix; entry points print it and exit non-zero."""

    exit_code = 2


class ConfigError(FatalError):
    """An environment variable holds a value the settings cannot use."""


class UnreachableError(FatalError):
    """A server named by the settings cannot be reached."""

    exit_code = 3


class MigrationError(FatalError):
    """The database schema is missing or older than the code expects."""

    exit_code = 4

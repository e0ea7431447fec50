"""Exception types callers can catch. Every error meant for a user derives from DynakragError."""

from __future__ import annotations


class DynakragError(Exception):
    """Base class of every error dynakrag raises on purpose."""


class UserInputError(DynakragError, ValueError):
    """The caller's input is unusable (empty or over-long question, bad option)."""


class ConfigurationError(UserInputError):
    """A setting has an invalid value."""


class CorpusError(UserInputError):
    """A corpus or index is missing, unreadable or malformed."""


class ModelUnavailableError(DynakragError, RuntimeError):
    """A language or embedding model could not be loaded or reached."""


class DatabaseUnavailableError(DynakragError, RuntimeError):
    """A database server (PostgreSQL) could not be reached, or refused the login."""

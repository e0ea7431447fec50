"""Exception types callers can catch (every error meant for a user derives from DynakragError),
and how a validation error reads in one line."""

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


def one_line(error: ValueError) -> str:
    """A validation error in one line: each failing field and what is wrong with it (a pydantic
    ``ValidationError``), else the error's text."""
    details = getattr(error, "errors", None)
    if not callable(details):
        return str(error)
    return "; ".join(
        f"{'.'.join(map(str, e['loc'])) or 'record'}: {e['msg'].removeprefix('Value error, ')}"
        for e in details()
    )

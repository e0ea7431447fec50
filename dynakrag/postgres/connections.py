"""Connections to a PostgreSQL server with dynakrag's settings, and retrying what a transient
fault broke (see :mod:`dynakrag.postgres` for the rules)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar
from urllib.parse import urlsplit, urlunsplit

from dynakrag.errors import DatabaseUnavailableError, UserInputError

if TYPE_CHECKING:
    from psycopg import Connection
    from psycopg_pool import ConnectionPool

__all__ = [
    "CONNECT_TIMEOUT_S",
    "POSTGRES_SCHEMES",
    "PREPARE_THRESHOLD",
    "RETRY_ATTEMPTS",
    "RETRY_WINDOW_S",
    "ServerUnreachableError",
    "connect",
    "connection_kwargs",
    "connection_pool",
    "is_postgres_url",
    "redact",
    "retrying",
]

Result = TypeVar("Result")

POSTGRES_SCHEMES: tuple[str, ...] = ("postgresql", "postgres")
"""URL schemes that name a PostgreSQL database (libpq accepts both)."""
CONNECT_TIMEOUT_S = 10
"""Seconds a connection attempt may take before the server counts as unreachable."""
PREPARE_THRESHOLD: int | None = None
"""psycopg's ``prepare_threshold`` of every connection: ``None``, never a server-side prepared
statement (what transaction-mode poolers need; see :mod:`dynakrag.postgres`)."""
RETRY_ATTEMPTS = 8
"""Tries of one database operation that fails with a transient error (see :func:`retrying`)."""
RETRY_WINDOW_S = 60.0
"""Seconds after which a failing operation is not tried again, whatever the attempts left:
long enough for a server restart, short enough that a dead server is reported."""
POOL_TIMEOUT_S = 15.0
"""Seconds a statement waits for a pooled connection (a pool that cannot reconnect)."""
INSTALL_HINT = "pip install 'dynakrag[postgres]' (make setup installs it)"
"""How to install the drivers and the embedded server, for one-line errors."""


class ServerUnreachableError(DatabaseUnavailableError):
    """A connection to the server failed (down, restarting, refusing the login): what
    :func:`connect` raises, and one of the faults :func:`retrying` waits out."""


def is_postgres_url(text: object) -> bool:
    """Whether ``text`` is a PostgreSQL URL (``postgresql://...`` or ``postgres://...``) rather
    than a file path; a ``Path`` never is one."""
    if not isinstance(text, str):
        return False
    scheme, separator, _ = text.partition("://")
    return bool(separator) and scheme.lower() in POSTGRES_SCHEMES


def redact(url: str) -> str:
    """``url`` without its password, for messages and logs."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    netloc = parts.netloc.rsplit("@", 1)[1]
    user = parts.username or ""
    return urlunsplit(parts._replace(netloc=f"{user}:***@{netloc}"))


def connection_kwargs() -> dict[str, Any]:
    """The settings of every connection dynakrag makes (see :mod:`dynakrag.postgres`)."""
    from psycopg.rows import dict_row

    return {"autocommit": True, "row_factory": dict_row, "prepare_threshold": PREPARE_THRESHOLD}


def _require_url(url: str) -> str:
    if not is_postgres_url(url):
        raise UserInputError(f"not a PostgreSQL URL: {url!r} (expected postgresql://...)")
    return url


def _drivers() -> Any:
    try:
        import psycopg
        import psycopg_pool  # noqa: F401  (checked here so a missing pool fails in one line)
    except ImportError:
        raise UserInputError(f"PostgreSQL support is not installed: {INSTALL_HINT}") from None
    return psycopg


def connect(url: str) -> Connection[Any]:
    """One connection to ``url`` with dynakrag's settings; the caller closes it.

    Raises :class:`UserInputError` for a URL that is not PostgreSQL's or missing drivers, and
    :class:`DatabaseUnavailableError` (one line, password redacted) when the server cannot be
    reached or refuses the login.
    """
    psycopg = _drivers()
    try:
        return psycopg.Connection.connect(
            _require_url(url), connect_timeout=CONNECT_TIMEOUT_S, **connection_kwargs()
        )
    except psycopg.OperationalError as exc:
        reason = " ".join(str(exc).split()) or type(exc).__name__
        raise ServerUnreachableError(
            f"cannot connect to PostgreSQL at {redact(url)}: {reason}"
        ) from None


def connection_pool(url: str, *, max_size: int = 4) -> ConnectionPool[Any]:
    """An open pool of at most ``max_size`` connections to ``url``; ``pool.close()`` when done.

    The server is reached once first, so a bad URL fails here with
    :class:`DatabaseUnavailableError` rather than as a pool timeout at the first query.
    """
    connect(url).close()
    from psycopg_pool import ConnectionPool

    return ConnectionPool(
        url,
        min_size=1,
        max_size=max_size,
        kwargs={"connect_timeout": CONNECT_TIMEOUT_S, **connection_kwargs()},
        open=True,
        name="dynakrag",
        # A connection a restart or pg_terminate_backend broke while idle in the pool is
        # replaced when lent, instead of failing the statement it was lent for.
        check=ConnectionPool.check_connection,
        timeout=POOL_TIMEOUT_S,
        # After a restart the pool reconnects in the background for this long, no longer.
        reconnect_timeout=RETRY_WINDOW_S,
    )


def _transient_errors() -> tuple[type[BaseException], ...]:
    """The errors a retry may heal: the server went away or restarted, the connection was
    dropped, a statement hit ``statement_timeout``, the pool had no connection to lend."""
    import psycopg
    from psycopg_pool import PoolTimeout

    return (psycopg.OperationalError, PoolTimeout, ServerUnreachableError)


def retrying(
    operation: Callable[[], Result],
    *,
    what: str,
    attempts: int = RETRY_ATTEMPTS,
    window_s: float = RETRY_WINDOW_S,
    on_retry: Callable[[BaseException], None] | None = None,
) -> Result:
    """``operation()``, tried again after a transient database error (see
    :func:`_transient_errors`) with exponential backoff (0.1 s doubling to 5 s, jittered),
    at most ``attempts`` times and not after ``window_s`` seconds; then one-line
    :class:`DatabaseUnavailableError` saying ``what`` failed. Other errors pass at once.
    ``operation`` must be idempotent: an error after a commit reached the server (the
    acknowledgement lost) runs it again."""
    from tenacity import (
        RetryError,
        Retrying,
        retry_if_exception_type,
        stop_after_attempt,
        stop_after_delay,
        wait_exponential_jitter,
    )

    retryer = Retrying(
        retry=retry_if_exception_type(_transient_errors()),
        stop=stop_after_attempt(attempts) | stop_after_delay(window_s),
        wait=wait_exponential_jitter(multiplier=0.1, max=5.0, jitter=0.1),
        before_sleep=(lambda state: on_retry(state.outcome.exception()))
        if on_retry is not None
        else None,
    )
    try:
        return retryer(operation)
    except RetryError as exc:
        last = exc.last_attempt.exception()
        reason = " ".join(str(last).split()) or type(last).__name__
        raise DatabaseUnavailableError(
            f"{what} failed after {exc.last_attempt.attempt_number} tries: {reason}"
        ) from None

"""LangGraph checkpoints in PostgreSQL: a set-up ``PostgresSaver`` over a pool, its reads and
writes retried, its serializer strict (see :mod:`dynakrag.postgres`)."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

from dynakrag.errors import DatabaseUnavailableError, UserInputError
from dynakrag.postgres.connections import (
    INSTALL_HINT,
    connect,
    connection_pool,
    redact,
    retrying,
)

if TYPE_CHECKING:
    from langgraph.checkpoint.postgres import PostgresSaver
    from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

__all__ = ["SETUP_WAIT_S", "postgres_saver", "strict_serializer"]

SETUP_WAIT_S = 300.0
"""Seconds a process waits for another one to finish setting up the checkpoint tables."""
_SETUP_LOCK = 0x64796E616B726167  # "dynakrag": the advisory lock key of schema set-up


def strict_serializer() -> JsonPlusSerializer:
    """LangGraph's checkpoint serializer restricted to its allow-listed safe types."""
    from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

    return JsonPlusSerializer(allowed_msgpack_modules=None)


def postgres_saver(url: str, *, max_size: int = 4) -> PostgresSaver:
    """A set-up ``PostgresSaver`` (full checkpoint history) over a pool to ``url``.

    Its tables are created or migrated on first use (``setup()`` is idempotent). The caller
    owns the pool: ``saver.conn.close()`` when done. Several processes may log into the same
    database at once; give each run its own ``thread_id``.
    """
    pool = connection_pool(url, max_size=max_size)
    try:
        import langgraph.checkpoint.postgres  # noqa: F401  (missing extra: one line)
    except ImportError:
        pool.close()
        raise UserInputError(f"PostgreSQL checkpoints are not installed: {INSTALL_HINT}") from None
    try:
        saver = _resilient_saver_class()(pool, serde=strict_serializer())
        # The check, the lock and the set-up are retried as one: a connection dropped between
        # them (behind a pooler, the server side of a live client) leaves nothing half done.
        retrying(lambda: _set_up(url, saver), what=f"setting up checkpoints at {redact(url)}")
    except BaseException:
        pool.close()
        raise
    return saver


def _resilient_saver_class() -> type[PostgresSaver]:
    """``PostgresSaver`` whose reads and writes are retried after a transient fault (see
    :func:`retrying`). Each is safe to repeat: checkpoints and blobs are upserts keyed by
    (thread, namespace, checkpoint id), pending writes by (checkpoint, task, index), so a
    write whose acknowledgement was lost is written again, not twice."""
    from langgraph.checkpoint.postgres import PostgresSaver

    class ResilientPostgresSaver(PostgresSaver):
        def get_tuple(self, config: Any) -> Any:
            read = super().get_tuple
            return retrying(lambda: read(config), what="reading a checkpoint")

        def list(self, config: Any, **kwargs: Any) -> Iterator[Any]:
            # Read whole before yielding: a retry cannot resume a half-consumed cursor.
            read = super().list
            yield from retrying(lambda: list(read(config, **kwargs)), what="listing checkpoints")

        def put(self, config: Any, checkpoint: Any, metadata: Any, new_versions: Any) -> Any:
            write = super().put
            return retrying(
                lambda: write(config, checkpoint, metadata, new_versions),
                what="writing a checkpoint",
            )

        def put_writes(
            self, config: Any, writes: Sequence[tuple[str, Any]], task_id: str, task_path: str = ""
        ) -> None:
            write = super().put_writes
            retrying(
                lambda: write(config, writes, task_id, task_path),
                what="writing a checkpoint's pending writes",
            )

    return ResilientPostgresSaver


def _set_up(url: str, saver: PostgresSaver) -> None:
    """Create or migrate ``saver``'s tables unless they are current (idempotent)."""
    if not _schema_is_current(url, saver):
        with _setup_lock(url):
            saver.setup()


@contextlib.contextmanager
def _setup_lock(url: str) -> Iterator[None]:
    """One process at a time sets up the schema: workers starting together would race
    through the saver's migrations (duplicate versions).

    A session-level advisory lock, taken by polling rather than by a blocking
    ``pg_advisory_lock``: a session blocked in a statement holds a snapshot, and the
    migrations' ``CREATE INDEX CONCURRENTLY`` waits for every such snapshot, so blocked waiters
    and the lock holder would wait for each other for ever (an open transaction holding a
    transaction-level lock keeps its catalog snapshot, the same dead end). Released
    explicitly, and with its connection.
    """
    query = "SELECT pg_try_advisory_lock(%s) AS taken"
    deadline = time.monotonic() + SETUP_WAIT_S
    with contextlib.closing(connect(url)) as conn:
        while not conn.execute(query, (_SETUP_LOCK,)).fetchone()["taken"]:
            if time.monotonic() > deadline:
                raise DatabaseUnavailableError(
                    f"another process has held the checkpoint set-up lock of {redact(url)} "
                    f"for over {SETUP_WAIT_S:.0f} s (behind a transaction-mode pooler a "
                    "crashed set-up can leave it: restart the pooler)"
                )
            time.sleep(0.05)
        try:
            yield
        finally:
            with contextlib.suppress(Exception):
                conn.execute("SELECT pg_advisory_unlock(%s)", (_SETUP_LOCK,))


def _schema_is_current(url: str, saver: PostgresSaver) -> bool:
    """Whether every migration of ``saver`` already ran on ``url`` (then no set-up, and no
    lock, is needed: behind a transaction-mode pooler a session lock cannot be relied on)."""
    with contextlib.closing(connect(url)) as conn:
        if not conn.execute("SELECT to_regclass('checkpoint_migrations') AS t").fetchone()["t"]:
            return False
        row = conn.execute("SELECT max(v) AS v FROM checkpoint_migrations").fetchone()
    return row["v"] is not None and int(row["v"]) >= len(saver.MIGRATIONS) - 1

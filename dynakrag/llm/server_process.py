"""One llama.cpp server subprocess of the embedded model, on a free local port.

:class:`EmbeddedServer` starts ``llama_cpp.server`` (see :mod:`dynakrag.llm.server_command`),
waits until it answers, restarts it once after it died, and keeps its log. The port, health and
log helpers here, and :class:`ServerBase`, serve :class:`dynakrag.llm.shared_server.SharedServer`
too.
"""

from __future__ import annotations

import contextlib
import re
import socket
import subprocess
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Self

from dynakrag.errors import ModelUnavailableError
from dynakrag.llm.embedded_models import EmbeddedModel, embedded_model
from dynakrag.llm.model_assembly import assemble_model
from dynakrag.llm.server_command import llama_command_factory
from dynakrag.llm.server_settings import ServerSettings
from dynakrag.llm.server_supervisor import stop_process

_LOG_TAIL_LINES = 20
_LOGS_KEPT = 20
_PORT_IN_USE = re.compile(r"address already in use|errno 98|errno 48", re.IGNORECASE)
_START_ATTEMPTS = 3


def find_free_port(host: str = "127.0.0.1") -> int:
    """A TCP port on ``host`` that was free a moment ago (the OS picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def port_is_free(host: str, port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        # Servers bind with SO_REUSEADDR, so a port whose old connections linger in TIME_WAIT
        # is free for them: test it the same way.
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError:
            return False
    return True


def port_accepts(host: str, port: int, timeout: float = 2.0) -> bool:
    """True when something listens on ``host:port``: the kernel completes the connection even
    while the server is busy with a long prompt and cannot answer HTTP yet."""
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


def log_tail(path: Path, lines: int = _LOG_TAIL_LINES) -> str:
    """The last ``lines`` lines of a server log (empty when it cannot be read)."""
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""
    return "\n".join(text.rstrip().splitlines()[-lines:])


def prune_server_logs(logs: Path, keep: int = _LOGS_KEPT) -> None:
    """Delete all but the newest ``keep`` server logs (one per port used, ~200 KB each)."""
    found = []
    for path in logs.glob("embedded-server-*.log"):
        with contextlib.suppress(OSError):
            found.append((path.stat().st_mtime, path))
    found.sort(reverse=True)
    for _, path in found[keep:]:
        with contextlib.suppress(OSError):
            path.unlink(missing_ok=True)


class ServerBase:
    """What :class:`EmbeddedServer` and :class:`~dynakrag.llm.shared_server.SharedServer`
    share: their settings, the log of the current server process, one restart after the server
    died, and use as a context manager (``start`` on entry, ``stop`` on exit)."""

    def __init__(
        self,
        cache_dir: Path | None,
        host: str,
        settings: ServerSettings | None,
        startup_timeout: float,
        command_factory: Callable[[int], Sequence[str]] | None,
        spec: EmbeddedModel | str | None,
    ) -> None:
        if cache_dir is None:
            from dynakrag.configuration import default_cache_dir

            cache_dir = default_cache_dir()
        self.cache_dir = Path(cache_dir)
        self.spec = embedded_model(spec)
        self.host = host
        self.settings = settings or ServerSettings.from_configuration()
        self.startup_timeout = startup_timeout
        self._command_factory = command_factory
        self._log_path: Path | None = None
        self._deaths = 0
        self._lock = threading.RLock()

    @property
    def port(self) -> int:  # pragma: no cover - each server knows its own
        raise NotImplementedError

    @property
    def base_url(self) -> str:
        """OpenAI-compatible base URL, e.g. ``http://127.0.0.1:PORT/v1``."""
        return f"http://{self.host}:{self.port}/v1"

    @property
    def log_path(self) -> Path | None:
        """The log file (stdout and stderr) of the current or last server process."""
        return self._log_path

    def start(self) -> Self:  # pragma: no cover - each server starts its own way
        raise NotImplementedError

    def stop(self) -> None:  # pragma: no cover
        raise NotImplementedError

    def _count_death(self, exit_code: int | None = None) -> None:
        """Count that the server died: the first death is restarted, the second is final."""
        self._deaths += 1
        if self._deaths > 1:
            code = "" if exit_code is None else f" (exit code {exit_code})"
            raise ModelUnavailableError(
                f"the embedded model server died again{code} after one restart; giving up. "
                f"Last log lines from {self._log_path}:\n"
                f"{log_tail(self._log_path) if self._log_path else ''}"
            )

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()


class EmbeddedServer(ServerBase):
    """One ``llama_cpp.server`` subprocess on a free local port.

    ``command_factory(port)`` overrides the server argv (tests start a stand-in); without it
    the model (``model``, else ``spec``'s file assembled into ``cache_dir``) is served.
    """

    def __init__(
        self,
        cache_dir: Path | None = None,
        *,
        model: Path | None = None,
        host: str = "127.0.0.1",
        port: int | None = None,
        settings: ServerSettings | None = None,
        startup_timeout: float = 120.0,
        command_factory: Callable[[int], Sequence[str]] | None = None,
        progress: bool = True,
        spec: EmbeddedModel | str | None = None,
    ) -> None:
        super().__init__(cache_dir, host, settings, startup_timeout, command_factory, spec)
        self.progress = progress
        self.model = model
        self._requested_port = port
        self._port: int | None = None
        self._process: subprocess.Popen[bytes] | None = None

    # --- properties ------------------------------------------------------------------------

    @property
    def port(self) -> int:
        """The port the server listens on (after :meth:`start`)."""
        if self._port is None:
            raise ModelUnavailableError("the embedded model server has not been started")
        return self._port

    @property
    def pid(self) -> int | None:
        """Process id of the running server, or None."""
        return self._process.pid if self._process is not None else None

    # --- lifecycle -------------------------------------------------------------------------

    def is_alive(self) -> bool:
        """True while the server process is running."""
        process = self._process
        return process is not None and process.poll() is None

    def start(self) -> EmbeddedServer:
        """Start the server and wait until ``GET /v1/models`` answers 200. No-op if running."""
        with self._lock:
            if self.is_alive():
                return self
            self._reap()
            command_factory = self._command_factory or self._llama_command_factory()
            preferred = self._port or self._requested_port
            last_error: ModelUnavailableError | None = None
            for _attempt in range(_START_ATTEMPTS):
                if preferred is not None and port_is_free(self.host, preferred):
                    port = preferred
                else:
                    port = find_free_port(self.host)
                preferred = None
                try:
                    self._launch(command_factory, port)
                    return self
                except _PortTakenError as exc:
                    last_error = ModelUnavailableError(str(exc))
            assert last_error is not None
            raise last_error

    def ensure_running(self) -> EmbeddedServer:
        """Start the server if needed; restart it once after it died, then give up."""
        with self._lock:
            if self.is_alive():
                return self
            if self._process is not None:
                self._count_death(self._process.returncode)
            return self.start()

    def stop(self) -> None:
        """Stop the server: SIGTERM, then SIGKILL after 5 s. Safe to call twice."""
        with self._lock:
            process = self._process
            self._process = None
            if process is None:
                return
            stop_process(process)
            self._close_stdin(process)

    # --- internals -------------------------------------------------------------------------

    def _llama_command_factory(self) -> Callable[[int], list[str]]:
        self.model = self.model or assemble_model(
            self.cache_dir, progress=self.progress, spec=self.spec
        )
        return llama_command_factory(self.model, host=self.host, settings=self.settings)

    def _launch(self, command_factory: Callable[[int], Sequence[str]], port: int) -> None:
        logs = self.cache_dir / "logs"
        logs.mkdir(parents=True, exist_ok=True)
        prune_server_logs(logs)
        log_path = logs / f"embedded-server-{port}.log"
        self._log_path = log_path
        argv = list(command_factory(port))
        with log_path.open("wb") as log:
            try:
                process = subprocess.Popen(
                    argv, stdin=subprocess.PIPE, stdout=log, stderr=subprocess.STDOUT
                )
            except OSError as exc:
                raise ModelUnavailableError(
                    f"cannot start the embedded model server ({argv[0]}): {exc}"
                ) from exc
        self._process = process
        self._port = port
        self._wait_until_ready(process, port, log_path)

    def _wait_until_ready(
        self, process: subprocess.Popen[bytes], port: int, log_path: Path
    ) -> None:
        url = f"http://{self.host}:{port}/v1/models"
        deadline = time.monotonic() + self.startup_timeout
        delay = 0.05
        while True:
            code = process.poll()
            if code is not None:
                self._process = None
                self._close_stdin(process)
                tail = log_tail(log_path)
                if _PORT_IN_USE.search(tail):
                    raise _PortTakenError(
                        f"port {port} was taken before the embedded model server could bind it"
                    )
                raise ModelUnavailableError(
                    f"the embedded model server exited with code {code} while starting. "
                    f"Last lines of {log_path}:\n{tail}"
                )
            # Checked after poll(): a server already on this port must not pass for ours.
            if health_ok(url) and process.poll() is None:
                return
            if time.monotonic() >= deadline:
                self.stop()
                raise ModelUnavailableError(
                    f"the embedded model server did not answer {url} within "
                    f"{self.startup_timeout:.0f} s. Last lines of {log_path}:\n{log_tail(log_path)}"
                )
            time.sleep(delay)
            delay = min(delay * 2, 0.5)

    def _reap(self) -> None:
        if self._process is not None:
            self._close_stdin(self._process)

    @staticmethod
    def _close_stdin(process: subprocess.Popen[bytes]) -> None:
        if process.stdin is not None:
            with contextlib.suppress(OSError):
                process.stdin.close()


class _PortTakenError(Exception):
    """The server lost the race for its port; start() retries on another one."""


_NO_PROXY_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def health_ok(url: str) -> bool:
    """True when ``GET url`` answers 200 (proxies bypassed: the server is local)."""
    try:
        with _NO_PROXY_OPENER.open(url, timeout=2.0) as response:
            return int(response.status) == 200
    except (urllib.error.URLError, OSError, ValueError):
        return False

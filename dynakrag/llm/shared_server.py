"""One embedded model server per machine, shared by every dynakrag process under leases.

:class:`SharedServer` finds the machine's server in a registry file or starts it through
:mod:`dynakrag.llm.server_supervisor`, and holds a lease on it while this process uses it; the
supervisor stops the server once no process has held a lease for a while.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import IO, Any

from dynakrag.errors import ModelUnavailableError
from dynakrag.llm.embedded_models import DEFAULT_EMBEDDED_MODEL, EmbeddedModel
from dynakrag.llm.model_assembly import assemble_model, exclusive_file_lock
from dynakrag.llm.server_command import llama_command_factory
from dynakrag.llm.server_process import (
    ServerBase,
    find_free_port,
    health_ok,
    log_tail,
    port_accepts,
    port_is_free,
    prune_server_logs,
)
from dynakrag.llm.server_settings import ServerSettings

SUPERVISOR_SCRIPT = Path(__file__).with_name("server_supervisor.py")
DEFAULT_IDLE_S = 10.0
"""How long the shared server outlives its last user (``DYNAKRAG_SERVER_IDLE_S``)."""


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # alive, owned by another user
        return True
    return True


class SharedServer(ServerBase):
    """The machine's one embedded model server, found or started, used under a lease.

    Every process that wants the model takes the registry lock
    (``<cache_dir>/server/registry.lock``), reads ``registry.json`` and reuses the server it
    names when that server's process is alive, listens on its port and serves the same model
    (``identity``: the model's SHA-256 and the server settings). Listening, not answering HTTP:
    llama.cpp's server answers nothing, not even ``/v1/models``, while it evaluates a long
    prompt, and a user that took that for a dead server would start a second one on the same
    cores. Otherwise it starts one through :mod:`dynakrag.llm.server_supervisor`, in its own
    session so a Ctrl-C aimed at one user does not stop everyone's server. Either way it then
    holds a shared ``flock`` on that server's users file (``users-<port>``) for as long as it
    uses the server; the supervisor stops the server ``idle_s`` seconds after the last such lock
    is gone, which includes users that crashed (the kernel drops their locks). One users file
    per server: a server left behind (its registry entry replaced) still stops with its own
    last user instead of living as long as anyone uses any server.

    Same interface as :class:`~dynakrag.llm.server_process.EmbeddedServer` (``start``,
    ``ensure_running``, ``stop``, ``base_url``, ``pid``, ``is_alive``); :meth:`stop` only ends
    this process's lease, and :meth:`shutdown` stops the server for everyone.
    """

    def __init__(
        self,
        cache_dir: Path | None = None,
        *,
        identity: str | None = None,
        command_factory: Callable[[int], Sequence[str]] | None = None,
        host: str = "127.0.0.1",
        settings: ServerSettings | None = None,
        idle_s: float | None = None,
        startup_timeout: float = 120.0,
        progress: bool = True,
        spec: EmbeddedModel | str | None = None,
    ) -> None:
        super().__init__(cache_dir, host, settings, startup_timeout, command_factory, spec)
        self.progress = progress
        self.identity = identity or f"{self.spec.sha256}:{self.settings.identity()}"
        if idle_s is None:
            idle_s = float(os.environ.get("DYNAKRAG_SERVER_IDLE_S") or DEFAULT_IDLE_S)
        self.idle_s = idle_s
        # One registry per model: servers of two models live side by side.
        default = self.spec.name == DEFAULT_EMBEDDED_MODEL
        directory = self.cache_dir / ("server" if default else f"server-{self.spec.name}")
        self.registry_path = directory / "registry.json"
        self._lock_path = directory / "registry.lock"
        self._entry: dict[str, Any] | None = None
        self._lease: IO[str] | None = None
        self._supervisor: subprocess.Popen[bytes] | None = None

    # --- the EmbeddedServer interface ---------------------------------------------------------

    @property
    def port(self) -> int:
        if self._entry is None:
            raise ModelUnavailableError("the embedded model server has not been started")
        return int(self._entry["port"])

    @property
    def pid(self) -> int | None:
        return int(self._entry["server_pid"]) if self._entry else None

    @property
    def started_here(self) -> bool:
        """True when this process started the server it uses (False: it found a running one)."""
        return self._supervisor is not None

    def is_alive(self) -> bool:
        if self._supervisor is not None:
            self._supervisor.poll()  # reap our exited supervisor instead of keeping a zombie
        return self._entry is not None and _pid_alive(int(self._entry["server_pid"]))

    def start(self) -> SharedServer:
        """Use the running shared server, or start it; then hold a lease on it."""
        with self._lock:
            if self._lease is not None and self.is_alive():
                return self
            self.registry_path.parent.mkdir(parents=True, exist_ok=True)
            preferred = self._entry["port"] if self._entry else None
            with exclusive_file_lock(self._lock_path):
                entry = self._running_entry()
                if entry is None:
                    entry = self._launch(preferred)
                if self._entry is not None and entry["port"] != self._entry["port"]:
                    self.stop()  # the lease on a server we no longer use
                self._entry = entry
                self._take_lease()
            return self

    def ensure_running(self) -> SharedServer:
        """Start or join the server; after it died, restart it once, then give up."""
        with self._lock:
            if self._entry is not None and not self.is_alive():
                self._count_death()
            return self.start()

    def stop(self) -> None:
        """End this process's lease; the server stops once nobody holds one (after idle_s)."""
        with self._lock:
            if self._lease is not None:
                with contextlib.suppress(OSError):
                    self._lease.close()  # closing the descriptor drops the flock
                self._lease = None

    def shutdown(self) -> None:
        """Stop the shared server now, for every user (tests, ``dynakrag server stop``)."""
        with self._lock:
            self.stop()
            entry = self._entry or self._read_registry()
            if entry and _pid_alive(int(entry["supervisor_pid"])):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(int(entry["supervisor_pid"]), 15)
                deadline = time.monotonic() + 10
                while _pid_alive(int(entry["server_pid"])) and time.monotonic() < deadline:
                    if self._supervisor is not None:
                        self._supervisor.poll()
                    time.sleep(0.05)
            if self._supervisor is not None:
                with contextlib.suppress(subprocess.TimeoutExpired):
                    self._supervisor.wait(timeout=5)

    # --- internals ------------------------------------------------------------------------

    def _read_registry(self) -> dict[str, Any] | None:
        try:
            entry = json.loads(self.registry_path.read_text())
        except (OSError, ValueError):
            return None
        keys = {"supervisor_pid", "server_pid", "port", "identity"}
        return entry if isinstance(entry, dict) and keys <= entry.keys() else None

    def _running_entry(self) -> dict[str, Any] | None:
        """The registry's server when it is alive, healthy and serves our model."""
        entry = self._read_registry()
        if entry is None or entry["identity"] != self.identity:
            return None
        if not _pid_alive(int(entry["server_pid"])):
            return None
        if not port_accepts(self.host, int(entry["port"])):
            return None
        self._log_path = self.cache_dir / "logs" / f"embedded-server-{int(entry['port'])}.log"
        return entry

    def _users_path(self, port: int) -> Path:
        return self.registry_path.with_name(f"users-{port}")

    def _take_lease(self) -> None:
        if self._lease is None:
            assert self._entry is not None
            self._lease = self._users_path(int(self._entry["port"])).open("a+")
            # A shared flock, held by every user at once: filelock has no shared mode (its
            # read-write locks are SQLite files), so the lease stays on fcntl.
            fcntl.flock(self._lease.fileno(), fcntl.LOCK_SH)

    def _launch(self, preferred: int | None) -> dict[str, Any]:
        """Start a supervisor and its server; called with the registry lock held."""
        if self._command_factory is None:
            model = assemble_model(self.cache_dir, progress=self.progress, spec=self.spec)
            self._command_factory = llama_command_factory(
                model, host=self.host, settings=self.settings
            )
        port = preferred if preferred and port_is_free(self.host, preferred) else None
        port = port or find_free_port(self.host)
        logs = self.cache_dir / "logs"
        logs.mkdir(parents=True, exist_ok=True)
        prune_server_logs(logs)
        self._log_path = logs / f"embedded-server-{port}.log"
        argv = [
            sys.executable,
            str(SUPERVISOR_SCRIPT),
            "--port", str(port),
            "--identity", self.identity,
            "--registry", str(self.registry_path),
            "--users", str(self._users_path(port)),
            "--lock", str(self._lock_path),
            "--idle", str(self.idle_s),
            "--",
            *self._command_factory(port),
        ]  # fmt: skip
        with self._log_path.open("wb") as log:
            try:
                self._supervisor = subprocess.Popen(
                    argv,
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                )
            except OSError as exc:
                raise ModelUnavailableError(
                    f"cannot start the embedded model server: {exc}"
                ) from exc
        return self._wait_until_ready(self._supervisor, port)

    def _wait_until_ready(self, supervisor: subprocess.Popen[bytes], port: int) -> dict[str, Any]:
        url = f"http://{self.host}:{port}/v1/models"
        deadline = time.monotonic() + self.startup_timeout
        delay = 0.05
        while True:
            entry = self._read_registry()
            if supervisor.poll() is not None:
                raise ModelUnavailableError(
                    f"the embedded model server exited while starting. Last lines of "
                    f"{self._log_path}:\n{log_tail(self._log_path) if self._log_path else ''}"
                )
            ours = entry is not None and entry["supervisor_pid"] == supervisor.pid
            if ours and health_ok(url) and _pid_alive(int(entry["server_pid"])):
                return entry
            if time.monotonic() >= deadline:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(supervisor.pid, 15)
                raise ModelUnavailableError(
                    f"the embedded model server did not answer {url} within "
                    f"{self.startup_timeout:.0f} s. Last lines of {self._log_path}:\n"
                    f"{log_tail(self._log_path) if self._log_path else ''}"
                )
            time.sleep(delay)
            delay = min(delay * 2, 0.5)

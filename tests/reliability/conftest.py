"""Fixtures of the reliability tests: a clean environment, the report recorder, and one
``langgraph dev`` server (with a fake OpenAI-compatible model on loopback) shared by the
server tests, started the way tests/integration/test_studio.py starts it.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.reliability.support import (
    REPO_ROOT,
    FakeOpenAI,
    clean_env,
    demo_corpus,
    free_port,
    no_proxy,
    tagged_responder,
)

LANGGRAPH = Path(sys.executable).with_name("langgraph")
STARTUP_TIMEOUT_S = 90.0

Recorder = Callable[[str, int, str], None]


@pytest.fixture(autouse=True)
def _no_dynakrag_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """Settings from the caller's environment never leak into these tests."""
    for name in list(os.environ):
        if name.startswith("DYNAKRAG_"):
            monkeypatch.delenv(name)


@pytest.fixture
def reliability(record_property: Callable[[str, object], None]) -> Recorder:
    """``reliability(what, tried, held)`` adds one row to RELIABILITY.md (via junitxml)."""

    def record(what: str, tried: int, held: str) -> None:
        record_property("reliability", json.dumps({"what": what, "tried": tried, "held": held}))

    return record


@dataclass
class Studio:
    url: str
    fake: FakeOpenAI


def _ready(url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{url}/ok", timeout=2) as response:
            return response.status == 200
    except (urllib.error.URLError, OSError):
        return False


def _tail(path: Path, lines: int = 40) -> str:
    return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])


def _kill_group(process: subprocess.Popen[bytes]) -> None:
    """SIGTERM the server's process group, then SIGKILL whatever is left."""
    try:
        os.killpg(process.pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    with contextlib.suppress(subprocess.TimeoutExpired):
        process.wait(timeout=10)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)
    process.wait(timeout=10)


@pytest.fixture(scope="session")
def studio(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Studio]:
    """``langgraph dev`` on a free loopback port; its generator is a fake OpenAI server whose
    final answers name the question they answer (``tagged_responder``)."""
    pytest.importorskip("langgraph_sdk", reason="needs dynakrag[studio]")
    if not LANGGRAPH.exists():
        pytest.skip("needs the langgraph CLI (dynakrag[studio])")
    tmp = tmp_path_factory.mktemp("studio")
    fake = FakeOpenAI(tagged_responder(demo_corpus()))
    threading.Thread(target=fake.serve_forever, name="fake-openai", daemon=True).start()
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    env = clean_env(
        LANGGRAPH_CLI_NO_ANALYTICS="1",
        LANGGRAPH_NO_VERSION_CHECK="true",
        DYNAKRAG_CACHE_DIR=str(tmp / "cache"),
        DYNAKRAG_LLM_BASE_URL=fake.base_url,
        DYNAKRAG_LLM_MAX_RETRIES="0",
        # The fake's answers name their question, which no passage states: with abstention on
        # they would all become no-answers, and these tests check whose answer comes back.
        DYNAKRAG_ABSTAIN="0",
        OPENAI_API_KEY="dummy",
    )
    log_path = tmp / "langgraph-dev.log"
    log = log_path.open("wb")
    command = [str(LANGGRAPH), "dev", "--no-browser", "--no-reload"]
    command += ["--port", str(port), "--host", "127.0.0.1"]
    server = subprocess.Popen(
        command,
        cwd=REPO_ROOT,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        start_new_session=True,
    )
    proxy_settings = pytest.MonkeyPatch()
    proxy_settings.setenv("NO_PROXY", no_proxy())
    proxy_settings.setenv("no_proxy", no_proxy())
    try:
        deadline = time.monotonic() + STARTUP_TIMEOUT_S
        while not _ready(url):
            if server.poll() is not None:
                pytest.fail(f"langgraph dev exited ({server.returncode}):\n{_tail(log_path)}")
            if time.monotonic() > deadline:
                pytest.fail(f"langgraph dev not ready:\n{_tail(log_path)}")
            time.sleep(0.25)
        yield Studio(url=url, fake=fake)
    finally:
        _kill_group(server)
        proxy_settings.undo()
        log.close()
        fake.shutdown()
        fake.server_close()

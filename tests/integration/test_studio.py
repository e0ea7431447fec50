"""``langgraph dev`` serves the graph of ``langgraph.json``; the SDK runs questions through it.

The server's chat model is ``ChatOpenAI`` pointed (``DYNAKRAG_LLM_BASE_URL``) at a tiny
OpenAI-compatible server on loopback that answers like ``tests.fakes.demo_responder``; the
retriever is the real demo index (MiniLM), built into a temporary cache on the first run.
Everything stays on 127.0.0.1.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from dynakrag import prompts
from dynakrag.data.demo_corpus import generate_demo_corpus
from dynakrag.data.demo_questions import DemoQuestion
from dynakrag.state import ACTIONS
from tests.fakes import chat_completion_body, demo_responder

pytestmark = pytest.mark.slow

REPO_ROOT = Path(__file__).resolve().parents[2]
LANGGRAPH = Path(sys.executable).with_name("langgraph")
STARTUP_TIMEOUT_S = 60.0
RUN_TIMEOUT_S = 60.0

langgraph_sdk = pytest.importorskip("langgraph_sdk", reason="needs dynakrag[studio]")
if not LANGGRAPH.exists():
    pytest.skip("needs the langgraph CLI (dynakrag[studio])", allow_module_level=True)


@dataclass
class _Message:
    """The one attribute demo_responder reads from a message."""

    content: str


class FakeOpenAI(ThreadingHTTPServer):
    """An OpenAI-compatible ``/v1/chat/completions`` endpoint replying like demo_responder."""

    daemon_threads = True

    def __init__(self, answers: dict[str, str]) -> None:
        super().__init__(("127.0.0.1", 0), _ChatHandler)
        self.respond = demo_responder(answers)
        self.requests = 0
        self.lock = threading.Lock()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/v1"


class _ChatHandler(BaseHTTPRequestHandler):
    server: FakeOpenAI

    def do_POST(self) -> None:
        if self.path.rstrip("/") != "/v1/chat/completions":
            self._send(404, {"error": {"message": f"no route {self.path}"}})
            return
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
        messages = [_Message(_text(m.get("content"))) for m in body.get("messages", [])]
        try:
            text = self.server.respond(messages)  # type: ignore[arg-type]
        except Exception as exc:  # an unexpected prompt: a server error the client sees
            self._send(500, {"error": {"message": str(exc), "type": "server_error"}})
            return
        with self.server.lock:
            self.server.requests += 1
        prompt_tokens = sum(len(m.content) for m in messages) // 4
        self._send(
            200,
            chat_completion_body(
                text,
                model=body.get("model", "fake"),
                number=self.server.requests,
                prompt_tokens=prompt_tokens,
            ),
        )

    def _send(self, status: int, payload: dict[str, Any]) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:  # keep pytest output quiet
        pass


def _text(content: Any) -> str:
    """A message's text, whether sent as a string or as content parts."""
    if isinstance(content, list):
        return "".join(part.get("text", "") for part in content if isinstance(part, dict))
    return str(content or "")


def _no_proxy() -> str:
    """NO_PROXY extended with loopback, so that no configured proxy sees these requests."""
    current = os.environ.get("NO_PROXY") or os.environ.get("no_proxy") or ""
    return ",".join(part for part in (current, "127.0.0.1", "localhost") if part)


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _ready(url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{url}/ok", timeout=2) as response:
            return response.status == 200
    except (urllib.error.URLError, OSError):
        return False


@dataclass
class Studio:
    url: str
    fake: FakeOpenAI
    questions: list[DemoQuestion]


@pytest.fixture(scope="module")
def studio(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Studio]:
    tmp = tmp_path_factory.mktemp("studio")
    corpus = generate_demo_corpus(7)
    fake = FakeOpenAI({q.question: q.answer for q in corpus.questions})
    threading.Thread(target=fake.serve_forever, name="fake-openai", daemon=True).start()

    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    env = {
        **os.environ,
        "LANGGRAPH_CLI_NO_ANALYTICS": "1",
        "LANGGRAPH_NO_VERSION_CHECK": "true",
        "LANGSMITH_TRACING": "false",
        "DYNAKRAG_CACHE_DIR": str(tmp / "cache"),
        "DYNAKRAG_LLM_BASE_URL": fake.base_url,
        "DYNAKRAG_LLM_MAX_RETRIES": "0",
        "OPENAI_API_KEY": "dummy",
        "NO_PROXY": _no_proxy(),
        "no_proxy": _no_proxy(),
    }
    for name in ("LANGSMITH_API_KEY", "LANGCHAIN_API_KEY", "LANGCHAIN_TRACING_V2"):
        env.pop(name, None)
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
        start_new_session=True,  # its own process group, killed as a whole below
    )
    proxy_settings = pytest.MonkeyPatch()
    proxy_settings.setenv("NO_PROXY", env["NO_PROXY"])  # for this process's own clients
    proxy_settings.setenv("no_proxy", env["NO_PROXY"])
    try:
        deadline = time.monotonic() + STARTUP_TIMEOUT_S
        while not _ready(url):
            if server.poll() is not None:
                pytest.fail(f"langgraph dev exited ({server.returncode}):\n{_tail(log_path)}")
            if time.monotonic() > deadline:
                waited = f"{STARTUP_TIMEOUT_S:.0f}s"
                pytest.fail(f"langgraph dev not ready after {waited}:\n{_tail(log_path)}")
            time.sleep(0.25)
        yield Studio(url=url, fake=fake, questions=list(corpus.questions[:3]))
    finally:
        _kill_group(server)
        proxy_settings.undo()
        log.close()
        fake.shutdown()
        fake.server_close()


def _kill_group(process: subprocess.Popen[bytes]) -> None:
    """SIGTERM the server's process group, then SIGKILL whatever is left."""
    try:
        os.killpg(process.pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    with contextlib.suppress(subprocess.TimeoutExpired):
        process.wait(timeout=10)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)  # workers the CLI started, if still there
    process.wait(timeout=10)


def _tail(path: Path, lines: int = 40) -> str:
    return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])


def _client(studio: Studio) -> Any:
    return langgraph_sdk.get_client(url=studio.url, api_key=None)


async def _ask(client: Any, question: str) -> dict[str, Any]:
    """Run ``question`` on a new thread, deleted afterwards (the server persists threads)."""
    thread = await client.threads.create()
    try:
        result = await asyncio.wait_for(
            client.runs.wait(thread["thread_id"], "dynakrag", input={"question": question}),
            timeout=RUN_TIMEOUT_S,
        )
    finally:
        await client.threads.delete(thread["thread_id"])
    assert isinstance(result, dict), result
    assert "__error__" not in result, result["__error__"]
    return result


def test_graph_exposes_the_seven_actions(studio: Studio) -> None:
    async def main() -> dict[str, Any]:
        return await _client(studio).assistants.get_graph("dynakrag")

    graph = asyncio.run(main())
    nodes = {node["id"] for node in graph["nodes"]}
    assert set(ACTIONS) <= nodes
    assert {"prepare", "controller"} <= nodes


def test_run_answers_through_the_server(studio: Studio) -> None:
    question = studio.questions[0]
    before = studio.fake.requests
    result = asyncio.run(_ask(_client(studio), question.question))
    assert result["answer"]
    assert result["answer"] == question.answer
    actions = [entry["action"] for entry in result["trace"]]
    assert actions[-1] == "stop_answer"
    assert set(actions) <= set(ACTIONS)
    assert studio.fake.requests > before  # the answer came through the OpenAI-compatible API
    assert result["llm_calls"] >= 1


def test_concurrent_runs_get_their_own_answers(studio: Studio) -> None:
    async def main() -> list[dict[str, Any]]:
        client = _client(studio)
        return await asyncio.gather(*(_ask(client, q.question) for q in studio.questions))

    results = asyncio.run(main())
    assert len({q.answer for q in studio.questions}) == len(studio.questions)
    for question, result in zip(studio.questions, results, strict=True):
        assert result["question"] == question.question
        assert result["answer"] == question.answer
        assert result["answer"] != prompts.INSUFFICIENT_EVIDENCE

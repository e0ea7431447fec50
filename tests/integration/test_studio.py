"""``langgraph dev`` serves the graph of ``langgraph.json``; the SDK runs questions through it.

The server's chat model is ``ChatOpenAI`` pointed (``DYNAKRAG_LLM_BASE_URL``) at a tiny
OpenAI-compatible server on loopback that answers like ``tests.fakes.demo_responder``; the
retriever is the real demo index (MiniLM), built into a temporary cache on the first run.
Everything stays on 127.0.0.1.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from dynakrag import prompts
from dynakrag.data.demo_corpus import generate_demo_corpus
from dynakrag.data.demo_questions import DemoQuestion
from dynakrag.state import ACTIONS
from tests.fakes import demo_chain_script, demo_responder
from tests.reliability.support import LANGGRAPH, FakeOpenAI, dev_server, no_proxy, serving

pytestmark = pytest.mark.slow

STARTUP_TIMEOUT_S = 60.0
RUN_TIMEOUT_S = 60.0

langgraph_sdk = pytest.importorskip("langgraph_sdk", reason="needs dynakrag[studio]")
if not LANGGRAPH.exists():
    pytest.skip("needs the langgraph CLI (dynakrag[studio])", allow_module_level=True)


@dataclass
class Studio:
    url: str
    fake: FakeOpenAI
    questions: list[DemoQuestion]


@pytest.fixture(scope="module")
def studio(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Studio]:
    tmp = tmp_path_factory.mktemp("studio")
    corpus = generate_demo_corpus(7)
    # The default chain asks the demo questions hop by hop: the fake plans and answers the hops.
    with serving(FakeOpenAI(demo_responder(*demo_chain_script(corpus)))) as fake:
        env = {
            **os.environ,
            "LANGSMITH_TRACING": "false",
            "DYNAKRAG_CACHE_DIR": str(tmp / "cache"),
            "DYNAKRAG_LLM_BASE_URL": fake.base_url,
            "DYNAKRAG_LLM_MAX_RETRIES": "0",
            "OPENAI_API_KEY": "dummy",
            "NO_PROXY": no_proxy(),
            "no_proxy": no_proxy(),
        }
        for name in ("LANGSMITH_API_KEY", "LANGCHAIN_API_KEY", "LANGCHAIN_TRACING_V2"):
            env.pop(name, None)
        proxy_settings = pytest.MonkeyPatch()
        proxy_settings.setenv("NO_PROXY", env["NO_PROXY"])  # for this process's own clients
        proxy_settings.setenv("no_proxy", env["NO_PROXY"])
        try:
            log = tmp / "langgraph-dev.log"
            with dev_server(env, log, startup_timeout_s=STARTUP_TIMEOUT_S) as server:
                yield Studio(url=server.url, fake=fake, questions=list(corpus.questions[:3]))
        finally:
            proxy_settings.undo()


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


def test_studio_shows_the_per_run_settings_and_a_run_obeys_them(studio: Studio) -> None:
    """The assistant's context schema is the settings form Studio draws (per-run fields only);
    a run given another ``max_steps`` through the SDK stops within it."""
    question = studio.questions[0].question

    async def main() -> tuple[dict[str, Any], dict[str, Any]]:
        client = _client(studio)
        assistant = (await client.assistants.search(graph_id="dynakrag", limit=1))[0]
        schemas = await client.assistants.get_schemas(assistant["assistant_id"])
        thread = await client.threads.create()
        try:
            result = await asyncio.wait_for(
                client.runs.wait(
                    thread["thread_id"],
                    "dynakrag",
                    input={"question": question},
                    context={"max_steps": 1},
                ),
                timeout=RUN_TIMEOUT_S,
            )
        finally:
            await client.threads.delete(thread["thread_id"])
        return schemas, result

    schemas, result = asyncio.run(main())
    form = schemas["context_schema"]["properties"]
    assert {"max_steps", "policy", "sub_question_answering"} <= set(form)
    assert "retriever" not in form and "cache_dir" not in form  # fixed when the graph is built
    assert form["max_steps"].get("description")
    assert "__error__" not in result, result.get("__error__")
    final = {"compress_answer_evidence", "stop_answer"}
    acquired = [e["action"] for e in result["trace"] if e["action"] not in final]
    assert len(acquired) == 1  # one control step, then compress and answer

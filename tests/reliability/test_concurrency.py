"""Concurrency: many runs at once on one compiled graph, and on the dev server, each get the
answer of their own question (no state shared between runs).

The fake reader tags every final answer with the id of the question it answers
(``tagged_responder``), and sleeps a little per call so that runs interleave.
"""

from __future__ import annotations

import asyncio
import time
import zlib
from typing import Any

import pytest
from langchain_core.messages import BaseMessage
from langgraph.checkpoint.memory import InMemorySaver

from dynakrag.data.demo import demo_passages
from dynakrag.graph.builder import build_graph
from dynakrag.llm.fake import ScriptedChatModel
from tests.fakes import KeywordSearcher
from tests.reliability.conftest import Recorder, Studio
from tests.reliability.support import demo_corpus, tagged_responder

CONCURRENT_RUNS = 50
SERVER_RUNS = 20
RUN_TIMEOUT_S = 60.0


def _graph(checkpointer: Any = None) -> Any:
    corpus = demo_corpus()
    tagged = tagged_responder(corpus)

    def respond(messages: list[BaseMessage]) -> str:
        # A deterministic, prompt-dependent pause: runs overlap inside model calls.
        time.sleep((zlib.crc32(str(messages[-1].content).encode()) % 5) / 1000)
        return tagged(messages)

    return build_graph(
        KeywordSearcher(demo_passages(corpus)),
        ScriptedChatModel(respond=respond),
        checkpointer=checkpointer,
    )


def _summary(final: dict[str, Any]) -> tuple[Any, ...]:
    return (
        final["question"],
        final["answer"],
        tuple((e["action"], e.get("search_query"), tuple(e["added"])) for e in final["trace"]),
        tuple(doc["id"] for doc in final["evidence"]),
        final["steps"],
        final["retrieval_calls"],
        final["llm_calls"],
        final["prompt_tokens"],
    )


@pytest.mark.parametrize("checkpointed", [False, True], ids=["no-checkpointer", "in-memory"])
def test_concurrent_ainvoke_runs_get_their_own_answers(
    checkpointed: bool, reliability: Recorder
) -> None:
    corpus = demo_corpus()
    questions = list(corpus.questions[:CONCURRENT_RUNS])
    assert len({q.question for q in questions}) == CONCURRENT_RUNS
    graph = _graph(InMemorySaver() if checkpointed else None)

    def config(index: int) -> dict[str, Any]:
        return {"configurable": {"thread_id": f"t{index}"}} if checkpointed else {}

    # Sequential baseline, then all at once on the same compiled graph.
    baseline = [
        graph.invoke({"question": q.question}, config(1000 + i)) for i, q in enumerate(questions)
    ]

    async def main() -> list[dict[str, Any]]:
        return await asyncio.gather(
            *(graph.ainvoke({"question": q.question}, config(i)) for i, q in enumerate(questions))
        )

    started = time.monotonic()
    results = asyncio.run(main())
    elapsed = time.monotonic() - started
    for question, before, after in zip(questions, baseline, results, strict=True):
        assert after["question"] == question.question
        assert after["answer"].endswith(f"[{question.id}]"), (question.id, after["answer"])
        assert _summary(after) == _summary(before), question.id
    reliability(
        f"{CONCURRENT_RUNS} concurrent graph.ainvoke runs, one graph "
        f"({'InMemorySaver' if checkpointed else 'no checkpointer'})",
        CONCURRENT_RUNS,
        f"each got its own question's answer, trace and counters (= sequential run); "
        f"{elapsed:.1f}s",
    )


async def _ask(client: Any, question: str) -> dict[str, Any]:
    thread = await client.threads.create()
    try:
        return await asyncio.wait_for(
            client.runs.wait(thread["thread_id"], "dynakrag", input={"question": question}),
            timeout=RUN_TIMEOUT_S,
        )
    finally:
        await client.threads.delete(thread["thread_id"])


@pytest.mark.slow
def test_dev_server_completes_concurrent_runs(studio: Studio, reliability: Recorder) -> None:
    import langgraph_sdk

    questions = list(demo_corpus().questions[:SERVER_RUNS])
    before = studio.fake.requests

    async def main() -> list[dict[str, Any]]:
        client = langgraph_sdk.get_client(url=studio.url, api_key=None)
        return await asyncio.gather(*(_ask(client, q.question) for q in questions))

    started = time.monotonic()
    results = asyncio.run(main())
    elapsed = time.monotonic() - started
    for question, result in zip(questions, results, strict=True):
        assert isinstance(result, dict) and "__error__" not in result, result
        assert result["question"] == question.question
        assert result["answer"].endswith(f"[{question.id}]"), (question.id, result["answer"])
        assert result["trace"][-1]["action"] == "stop_answer"
    assert studio.fake.requests > before
    reliability(
        f"{SERVER_RUNS} concurrent runs on the dev server (langgraph dev, SDK)",
        SERVER_RUNS,
        f"all completed, each with its own question's answer; {elapsed:.1f}s",
    )


@pytest.fixture(autouse=True)
def _abstention_off(monkeypatch: pytest.MonkeyPatch) -> None:
    """These tests count answers of fakes that state them without passages to ground them
    (abstention would turn each into a no-answer); abstention has its own tests."""
    monkeypatch.setenv("DYNAKRAG_ABSTAIN", "0")

"""The SQLite LLM cache: hits skip the model, keys cover model, prompt and parameters."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
from langchain_core.messages import BaseMessage
from langchain_core.outputs import ChatGeneration, Generation

from dynakrag.llm.cache import CachedChatModel, SQLiteLLMCache, default_cache_path, model_identity
from dynakrag.llm.client import LLMClient
from dynakrag.llm.fake import ScriptedChatModel
from tests.threads import errors_in_threads


class CountingModel:
    """A scripted reply that echoes the last message; counts the calls the model really gets."""

    def __init__(self, reply: str | None = None) -> None:
        self.calls = 0
        self.reply = reply
        self._lock = threading.Lock()

    def __call__(self, messages: list[BaseMessage]) -> str:
        with self._lock:
            self.calls += 1
        return self.reply if self.reply is not None else f"echo: {messages[-1].content}"

    def chat_model(self) -> ScriptedChatModel:
        return ScriptedChatModel(respond=self)


MESSAGES = [("system", "You answer."), ("human", "Question: who?")]


def cached_client(
    tmp_path: Path, counter: CountingModel, **kwargs
) -> tuple[LLMClient, SQLiteLLMCache]:
    cache = SQLiteLLMCache.in_dir(tmp_path)
    model = CachedChatModel(inner=counter.chat_model(), disk_cache=cache, **kwargs)
    return LLMClient(model, max_retries=0), cache


def test_second_identical_call_is_a_hit_and_skips_the_model(tmp_path: Path) -> None:
    counter = CountingModel()
    llm, cache = cached_client(tmp_path, counter)
    first, first_usage = llm.text(MESSAGES)
    second, second_usage = llm.text(MESSAGES)
    assert first == second == "echo: Question: who?"
    assert counter.calls == 1
    assert (cache.hits, cache.misses, cache.writes) == (1, 1, 1)
    # The cached reply keeps its token usage: a rerun accounts exactly as the first run did.
    assert second_usage == first_usage
    assert cache.stats()["path"] == str(default_cache_path(tmp_path))


def test_the_cache_persists_across_processes_and_instances(tmp_path: Path) -> None:
    counter = CountingModel()
    llm, cache = cached_client(tmp_path, counter)
    llm.text(MESSAGES)
    cache.close()
    llm2, cache2 = cached_client(tmp_path, counter)
    assert llm2.text(MESSAGES)[0] == "echo: Question: who?"
    assert counter.calls == 1
    assert cache2.hits == 1 and cache2.misses == 0
    assert len(cache2) == 1


def test_key_covers_prompt_parameters_and_model_identity(tmp_path: Path) -> None:
    counter = CountingModel()
    cache = SQLiteLLMCache.in_dir(tmp_path)
    model = CachedChatModel(inner=counter.chat_model(), disk_cache=cache)
    model.invoke(MESSAGES)
    model.invoke([*MESSAGES[:1], ("human", "Question: where?")])  # another prompt
    model.bind(response_format={"type": "json_object"}).invoke(MESSAGES)  # other parameters
    model.invoke(MESSAGES, stop=["\n"])  # other stop words
    other = CachedChatModel(inner=counter.chat_model(), disk_cache=cache, identity="other-model")
    other.invoke(MESSAGES)  # another model
    assert counter.calls == 5 and cache.hits == 0
    model.bind(response_format={"type": "json_object"}).invoke(MESSAGES)
    other.invoke(MESSAGES)
    assert counter.calls == 5 and cache.hits == 2


def test_empty_replies_are_not_stored(tmp_path: Path) -> None:
    counter = CountingModel(reply="")
    llm, cache = cached_client(tmp_path, counter)
    assert llm.text(MESSAGES)[0] is None
    assert llm.text(MESSAGES)[0] is None
    assert counter.calls == 2 and cache.writes == 0 and len(cache) == 0


def test_json_replies_round_trip(tmp_path: Path) -> None:
    counter = CountingModel(reply='{"answers": ["Paris"]}')
    llm, cache = cached_client(tmp_path, counter)
    assert llm.json(MESSAGES)[0] == {"answers": ["Paris"]}
    assert llm.json(MESSAGES)[0] == {"answers": ["Paris"]}
    assert counter.calls == 1 and cache.hits == 1


def test_thread_safe_under_concurrent_calls(tmp_path: Path) -> None:
    counter = CountingModel()
    llm, cache = cached_client(tmp_path, counter)

    def work(worker: int) -> None:
        for i in range(20):
            text, _ = llm.text([("system", "s"), ("human", f"q{(worker + i) % 10}")])
            assert text == f"echo: q{(worker + i) % 10}"

    errors = errors_in_threads(work, [(n,) for n in range(8)])
    assert not errors
    assert cache.hits + cache.misses == 160
    assert len(cache) == 10
    assert counter.calls == cache.misses  # every miss, and only a miss, called the model


def test_is_a_langchain_base_cache(tmp_path: Path) -> None:
    cache = SQLiteLLMCache(tmp_path / "sub" / "c.sqlite")
    assert cache.lookup("p", "m") is None
    cache.update("p", "m", [Generation(text="plain", generation_info={"a": 1})])
    (gen,) = cache.lookup("p", "m")
    assert gen.text == "plain" and gen.generation_info == {"a": 1}
    cache.clear()
    assert cache.lookup("p", "m") is None
    # As a chat model's own ``cache=`` it works through LangChain's llm_string too.
    counter = CountingModel()
    model = ScriptedChatModel(respond=counter, cache=cache)
    assert model.invoke(MESSAGES).content == model.invoke(MESSAGES).content
    assert counter.calls == 1
    (stored,) = cache.lookup(
        # any entry written by LangChain decodes back to a ChatGeneration
        *next(iter(cache._conn.execute("SELECT prompt, llm_string FROM llm_cache").fetchall()))
    )
    assert isinstance(stored, ChatGeneration)


def test_model_identity_ignores_the_endpoint_port() -> None:
    from langchain_openai import ChatOpenAI

    def chat(port: int) -> ChatOpenAI:
        return ChatOpenAI(
            base_url=f"http://127.0.0.1:{port}/v1", api_key="x", model="local", temperature=0
        )

    assert model_identity(chat(1234)) == model_identity(chat(4321))
    other = ChatOpenAI(base_url="http://127.0.0.1:1/v1", api_key="x", model="big", temperature=0)
    assert model_identity(other) != model_identity(chat(1))


@pytest.mark.parametrize("damaged", ["not json", '[{"message": {}}]'])
def test_a_damaged_row_is_a_miss(tmp_path: Path, damaged: str) -> None:
    cache = SQLiteLLMCache.in_dir(tmp_path)
    cache.update("p", "m", [Generation(text="x")])
    with cache._conn:
        cache._conn.execute("UPDATE llm_cache SET value = ?", (damaged,))
    assert cache.lookup("p", "m") is None
    assert cache.misses == 1


def test_a_call_budget_reaches_a_cached_openai_model(tmp_path) -> None:
    """Per-call completion budgets pass through the disk cache to the OpenAI-compatible model."""
    from langchain_openai import ChatOpenAI

    from dynakrag.llm.cache import CachedChatModel, SQLiteLLMCache
    from dynakrag.llm.client import request_options

    inner = ChatOpenAI(
        base_url="http://127.0.0.1:9/v1", api_key="x", model="m", extra_body={"max_tokens": 256}
    )
    cached = CachedChatModel(inner=inner, disk_cache=SQLiteLLMCache(tmp_path / "c.sqlite"))
    assert request_options(cached, max_tokens=48) == {"extra_body": {"max_tokens": 48}}
    assert request_options(cached, max_tokens=999) == {"extra_body": {"max_tokens": 256}}

"""The LLM client under the actions: retries with backoff, empty and unparseable replies,
usage summed over attempts, a lost backend not retried, a lazily built model, and the JSON
object parser."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from langchain_core.messages import BaseMessage

from dynakrag.errors import ModelUnavailableError
from dynakrag.llm import client as client_module
from dynakrag.llm.client import LLMClient, Usage, estimate_tokens, parse_json_object
from dynakrag.llm.fake import ScriptedChatModel
from tests.unit.actions.support import Recorder, failing, fixed


def _client(responder: Callable[[list[BaseMessage]], str], **kwargs: Any) -> LLMClient:
    return LLMClient(ScriptedChatModel(respond=responder), **{"backoff_s": 0, **kwargs})


MESSAGES = [("system", "You answer."), ("human", "Question: where?")]
PROMPT_TEXT = "You answer.\nQuestion: where?"


def test_llm_client_retries_then_gives_none(monkeypatch: pytest.MonkeyPatch) -> None:
    sleeps: list[float] = []
    monkeypatch.setattr(client_module.time, "sleep", sleeps.append)
    recorder = failing()
    llm = LLMClient(ScriptedChatModel(respond=recorder), max_retries=2, backoff_s=0.5)
    text, usage = llm.text(MESSAGES)
    assert text is None
    assert len(recorder.calls) == 3
    assert sleeps == [0.5, 1.0]  # exponential backoff between attempts, none after the last
    assert usage == Usage(3, 3 * estimate_tokens(PROMPT_TEXT), 0)
    reply, usage = llm.json(MESSAGES)
    assert reply is None and usage.llm_calls == 3


def test_llm_client_does_not_repeat_a_reply_cut_at_its_budget() -> None:
    class LengthFinishReasonError(Exception):  # the openai client's, by name
        pass

    calls: list[int] = []

    def respond(messages: list[BaseMessage]) -> str:
        calls.append(1)
        raise LengthFinishReasonError("the length limit was reached")

    llm = _client(respond, max_retries=2)
    reply, usage = llm.json(MESSAGES)
    assert reply is None and len(calls) == 1 and usage.llm_calls == 1
    assert llm.failed_requests == 1


def test_llm_client_retries_an_empty_completion_and_sums_usage() -> None:
    replies = iter(["", "  ", "Velford"])
    recorder = Recorder(lambda system, human: next(replies))
    text, usage = _client(recorder, max_retries=2).text(MESSAGES)
    assert text == "Velford"
    assert usage == Usage(3, *recorder.tokens())


def test_llm_client_usage_sums_over_failed_and_successful_attempts() -> None:
    outcomes = iter([RuntimeError("timeout"), "ok"])

    def respond(messages: list[BaseMessage]) -> str:
        outcome = next(outcomes)
        if isinstance(outcome, Exception):
            raise outcome
        return outcome

    text, usage = _client(respond, max_retries=1).text(MESSAGES)
    assert text == "ok"
    prompt_chars = sum(len(content) for _, content in MESSAGES)
    assert usage == Usage(2, estimate_tokens(PROMPT_TEXT) + prompt_chars // 4, len("ok") // 4)


def test_llm_client_waits_only_after_a_failed_request(monkeypatch: pytest.MonkeyPatch) -> None:
    sleeps: list[float] = []
    monkeypatch.setattr(client_module.time, "sleep", sleeps.append)
    outcomes = iter(["", RuntimeError("503"), " ", "Velford"])

    def respond(messages: list[BaseMessage]) -> str:
        outcome = next(outcomes)
        if isinstance(outcome, Exception):
            raise outcome
        return outcome

    llm = LLMClient(ScriptedChatModel(respond=respond), max_retries=3, backoff_s=0.5)
    text, usage = llm.text(MESSAGES)
    assert text == "Velford"
    # The backoff of the second attempt's fault (0.5 * 2); an empty reply is asked again at once.
    assert sleeps == [1.0]
    assert (llm.replies, llm.failed_requests, usage.llm_calls) == (3, 1, 4)


def test_llm_client_does_not_retry_a_lost_backend() -> None:
    calls: list[int] = []

    def respond(messages: list[BaseMessage]) -> str:
        calls.append(1)
        raise ModelUnavailableError("the embedded server died again")

    llm = _client(respond, max_retries=2)
    with pytest.raises(ModelUnavailableError, match="died again"):
        llm.text(MESSAGES)
    assert len(calls) == 1 and llm.failed_requests == 0


def test_llm_client_lets_ctrl_c_through_at_once() -> None:
    calls: list[int] = []

    def interrupted(messages: list[BaseMessage]) -> str:
        calls.append(1)
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        _client(interrupted, max_retries=3).text(MESSAGES)
    assert len(calls) == 1  # not asked again, not swallowed as "no reply"


def test_llm_client_json_retries_unparseable_replies() -> None:
    replies = iter(["Sure, here you go", 'Result: {"answers": ["Velford"]} done'])
    recorder = Recorder(lambda system, human: next(replies))
    reply, usage = _client(recorder, json_retries=1, json_mode=False).json(MESSAGES)
    assert reply == {"answers": ["Velford"]}
    assert usage == Usage(2, *recorder.tokens())
    # By default (temperature 0 repeats itself), one unparseable reply gives None.
    reply, usage = _client(fixed("nope"), max_retries=0, json_mode=False).json(MESSAGES)
    assert reply is None and usage.llm_calls == 1


def test_llm_client_builds_its_model_lazily_once() -> None:
    built: list[int] = []

    def factory() -> ScriptedChatModel:
        built.append(1)
        return ScriptedChatModel(respond=fixed("hi"))

    llm = LLMClient(factory, max_retries=0, backoff_s=0)
    assert built == []
    assert llm.text(MESSAGES)[0] == "hi"
    assert llm.text(MESSAGES)[0] == "hi"
    assert built == [1]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('{"a": 1}', {"a": 1}),
        ('```json\n{"answers": ["x", "UNKNOWN"]}\n```', {"answers": ["x", "UNKNOWN"]}),
        ('```\n{"a": {"b": [1, 2]}}\n```\nHope this helps!', {"a": {"b": [1, 2]}}),
        (
            'Sure! Here is the JSON: {"sub_questions": ["q1", "q2"]} Let me know.',
            {"sub_questions": ["q1", "q2"]},
        ),
        ('The set {x, y} is not JSON, but {"ok": true} is.', {"ok": True}),
        ('  {"a": "brace } inside"}  ', {"a": "brace } inside"}),
        ("no json here", None),
        ("[1, 2, 3]", None),
        ('{"unterminated": ', None),
        ("", None),
    ],
)
def test_parse_json_object(text: str, expected: dict[str, Any] | None) -> None:
    assert parse_json_object(text) == expected

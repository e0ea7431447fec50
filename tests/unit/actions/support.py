"""The hand-made world of the action tests: a question about Ada Voss's employer, its
passages, recorded fake model replies by prompt kind, states built by hand, and the check of
one action's trace entry, counters and accounting."""

from __future__ import annotations

import operator
from collections.abc import Callable
from typing import Any

from langchain_core.messages import BaseMessage

from dynakrag.actions.common import Resources
from dynakrag.llm.client import LLMClient
from dynakrag.llm.fake import ScriptedChatModel
from dynakrag.retrieval.passage import Passage
from dynakrag.state import Document, State, initial_state, merge_accounting
from tests.fakes import KeywordSearcher, prompt_kind

QUESTION = "In which city is the headquarters of the company where Ada Voss works?"
SUB_QUESTIONS = [
    "Which company does Ada Voss work for?",
    "In which city is the headquarters of #1?",
    "Who founded #1?",
]

PASSAGES = [
    Passage("ada", "Ada Voss", "Ada Voss is an engineer who works at Kestrel Labs."),
    Passage(
        "kestrel",
        "Kestrel Labs",
        "Kestrel Labs is a robotics company. The headquarters of Kestrel Labs is in Velford. "
        "Kestrel Labs was founded by Tom Reyl.",
    ),
    Passage("ada-painter", "Ada Voss (painter)", "Ada Voss is also the name of a painter."),
    Passage("tom", "Tom Reyl", "Tom Reyl was born in Quarmouth."),
    Passage("velford", "Velford", "Velford is a city on the river Orvane."),
    Passage("banana", "Bananas", "Bananas are a yellow fruit."),
]
BY_ID = {p.id: p for p in PASSAGES}

ADDITIVE = ("trace", "steps", "retrieval_calls", "llm_calls", "prompt_tokens", "completion_tokens")


# --- helpers -------------------------------------------------------------------------------


class Recorder:
    """A responder that records every prompt and replies with ``reply(kind, human)``
    (``kind``: :func:`tests.fakes.prompt_kind`)."""

    def __init__(self, reply: Callable[[str, str], str]) -> None:
        self.reply = reply
        self.calls: list[list[BaseMessage]] = []
        self.replies: list[str] = []

    def __call__(self, messages: list[BaseMessage]) -> str:
        self.calls.append(messages)
        text = self.reply(prompt_kind(messages), str(messages[-1].content))
        self.replies.append(text)
        return text

    @property
    def kinds(self) -> list[str]:
        return [prompt_kind(m) for m in self.calls]

    def tokens(self) -> tuple[int, int]:
        """Prompt and completion tokens ScriptedChatModel reports for the recorded calls."""
        prompt = sum(sum(len(str(m.content)) for m in msgs) // 4 for msgs in self.calls)
        completion = sum(len(text) // 4 for text in self.replies)
        return prompt, completion


def fixed(text: str) -> Recorder:
    return Recorder(lambda system, human: text)


def by_prompt(**replies: str) -> Recorder:
    """Replies keyed by prompt kind: decompose, sufficiency, rewrite, answer."""

    def reply(kind: str, human: str) -> str:
        if kind not in replies:
            raise AssertionError(f"unexpected {kind} prompt")
        return replies[kind]

    return Recorder(reply)


def failing() -> Recorder:
    def reply(system: str, human: str) -> str:
        raise RuntimeError("model down")

    return Recorder(reply)


def resources(
    responder: Callable[[list[BaseMessage]], str] | None = None,
) -> tuple[Resources, KeywordSearcher]:
    searcher = KeywordSearcher(PASSAGES)
    model = ScriptedChatModel(respond=responder or fixed("unused"))
    return Resources(searcher=searcher, llm=LLMClient(model, max_retries=0, backoff_s=0)), searcher


def doc(passage_id: str) -> Document:
    p = BY_ID[passage_id]
    return Document(id=p.id, title=p.title, text=p.text)


def make_state(**overrides: Any) -> State:
    state: dict[str, Any] = dict(initial_state(QUESTION))
    state.update(overrides)
    return state  # type: ignore[return-value]


def apply(state: State, update: dict[str, Any]) -> State:
    """Merge an update the way the graph's reducers do."""
    merged: dict[str, Any] = dict(state)
    for key, value in update.items():
        if key in ADDITIVE:
            merged[key] = operator.add(merged.get(key, [] if key == "trace" else 0), value)
        elif key == "accounting":
            merged[key] = merge_accounting(merged.get(key), value)
        else:
            merged[key] = value
    return merged  # type: ignore[return-value]


def check_accounting(
    state: State,
    update: dict[str, Any],
    action: str,
    *,
    retrieval_calls: int,
    llm_calls: int,
    step: bool = True,
    tokens: tuple[int, int] | None = None,
) -> dict[str, Any]:
    """The trace entry, counters and per-node accounting of one action's update."""
    (entry,) = update["trace"]
    assert entry["action"] == action
    assert entry["step"] == len(state.get("trace", [])) + 1
    counters = {
        "retrieval_calls": retrieval_calls,
        "llm_calls": llm_calls,
        "prompt_tokens": update["prompt_tokens"],
        "completion_tokens": update["completion_tokens"],
    }
    for key, value in counters.items():
        assert update[key] == value, key
        assert entry[key] == value, key
    if tokens is not None:
        assert (update["prompt_tokens"], update["completion_tokens"]) == tokens
    if llm_calls == 0:
        assert update["prompt_tokens"] == update["completion_tokens"] == 0
    assert update["steps"] == (1 if step else 0)
    assert update["accounting"] == {action: {"calls": 1, **counters}}
    return entry

"""A collection's model client for one question: each distinct request asked once, all counted.

Collection runs many actions from many states of one question, and several of them send the
model the very same request: a rewrite from a state and from the same state after a
sufficiency check (the check changes no evidence and no query), the decomposition of the
question by every sufficiency check before the first, an answer from two states with the same
evidence window. A request is a function of the action and of the part of the state the
action reads (question, query, evidence window, sub-questions), so remembering each request's
reply for the question is a per-state memo keyed by the state's content and the action: a gap
query or rewrite is generated once per such state and reused by every rollout and branch that
reaches it. At temperature 0 a repeated request would get the same reply anyway; the memo
only saves asking.

A reply from memory comes with the usage of the request that made it, so the states (whose
accounting the features read) and therefore the records are the ones collection writes without
the memo. What the model really spent is counted apart (:attr:`RequestMemo.spent`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from langchain_core.language_models import BaseChatModel

from dynakrag.llm.client import NO_USAGE, LLMClient, Messages, Usage

__all__ = ["RequestMemo"]


class RequestMemo(LLMClient):
    """``client`` with a memory of its replies (for one question) and a count of its requests.

    Every request goes to ``client`` (its retries, failure counters and truncation handling),
    unless the same request (messages, JSON or text, budget, schema) was answered before.
    ``remember=False`` only counts (to measure the memo). Log-prob requests
    (:meth:`LLMClient.reply`) are never remembered.
    """

    def __init__(self, client: LLMClient, *, remember: bool = True) -> None:
        # No LLMClient.__init__: model, retries and health counters are ``client``'s.
        self.client = client
        self.remember = remember
        self._replies: dict[str, tuple[str, Usage]] = {}
        self.hits = 0
        """Requests answered from memory."""
        self.spent = NO_USAGE
        """What the requests sent to the model cost (``llm_calls`` counts attempts)."""

    # The wrapped client's model, settings and health, read through.
    @property
    def model(self) -> BaseChatModel:
        return self.client.model

    @property
    def json_mode(self) -> bool:
        return self.client.json_mode

    @property
    def json_retries(self) -> int:  # type: ignore[override]
        return self.client.json_retries

    @property
    def failed_requests(self) -> int:  # type: ignore[override]
        return self.client.failed_requests

    @property
    def replies(self) -> int:  # type: ignore[override]
        return self.client.replies

    @property
    def last_error(self) -> str | None:  # type: ignore[override]
        return self.client.last_error

    def reply(
        self, messages: Messages, *, max_tokens: int | None = None, logprobs: bool = False
    ) -> tuple[Any | None, Usage]:
        message, usage = self.client.reply(messages, max_tokens=max_tokens, logprobs=logprobs)
        self.spent += usage
        return message, usage

    def _call(
        self,
        messages: Messages,
        *,
        json_reply: bool,
        max_tokens: int | None = None,
        schema: Mapping[str, Any] | None = None,
    ) -> tuple[str | None, Usage]:
        key = json.dumps(
            [list(map(list, messages)), json_reply, max_tokens, schema],
            sort_keys=True,
            ensure_ascii=False,
        )
        if self.remember and key in self._replies:
            self.hits += 1
            return self._replies[key]
        text, usage = self.client._call(
            messages, json_reply=json_reply, max_tokens=max_tokens, schema=schema
        )
        self.spent += usage
        if self.remember and text is not None:  # a failure is not remembered
            self._replies[key] = (text, usage)
        return text, usage

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
from typing import Any

from dynakrag.llm.client import NO_USAGE, ClientWrapper, LLMClient, Messages, Usage

__all__ = ["RequestMemo"]


class RequestMemo(ClientWrapper):
    """``client`` with a memory of its replies (for one question) and a count of its requests.

    Every request goes to ``client`` (its retries, failure counters and truncation handling),
    unless the same request (messages, JSON or text, budget, schema) was answered before.
    ``remember=False`` only counts (to measure the memo). Log-prob requests
    (:meth:`LLMClient.reply`) are never remembered.
    """

    def __init__(self, client: LLMClient, *, remember: bool = True) -> None:
        super().__init__(client)  # the model, retries and health counters are ``client``'s
        self.remember = remember
        self._replies: dict[str, tuple[str, Usage]] = {}
        self.hits = 0
        """Requests answered from memory."""
        self.spent = NO_USAGE
        """What the requests sent to the model cost (``llm_calls`` counts attempts)."""

    def reply(
        self, messages: Messages, *, max_tokens: int | None = None, logprobs: bool = False
    ) -> tuple[Any | None, Usage]:
        message, usage = self.inner.reply(messages, max_tokens=max_tokens, logprobs=logprobs)
        self.spent += usage
        return message, usage

    def _call(self, messages: Messages, **options: Any) -> tuple[str | None, Usage]:
        # The request is the messages and the call's options (JSON or text, budget, schema).
        key = json.dumps([list(map(list, messages)), options], sort_keys=True, ensure_ascii=False)
        if self.remember and key in self._replies:
            self.hits += 1
            return self._replies[key]
        text, usage = self.inner._call(messages, **options)
        self.spent += usage
        if self.remember and text is not None:  # a failure is not remembered
            self._replies[key] = (text, usage)
        return text, usage

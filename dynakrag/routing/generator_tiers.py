"""Generator tiers: the settings the generator router chooses between, and the ``"answer"``
perplexity signal measured on the light tier's own answer.

A tier calls its model through :class:`~dynakrag.llm.client.LLMClient` (its retries, health
counters and :class:`~dynakrag.errors.ModelUnavailableError`). The answer signal reads the
chat log-probs of the light tier's answer (``LLMClient.reply(..., logprobs=True)``:
``response_metadata["logprobs"]``); it costs no extra call: when the router stays light, that
answer is the answer.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from langchain_core.language_models import BaseChatModel

from dynakrag import prompts
from dynakrag.errors import ModelUnavailableError
from dynakrag.llm.answers import parse_reasoned_answer, parse_short_answer
from dynakrag.llm.client import LLMClient, Messages, Usage, message_text
from dynakrag.routing.perplexity import (
    LogprobsUnavailableError,
    PassageLike,
    PerplexitySignal,
    chat_logprobs,
    passage_dicts,
    perplexity_of,
)

__all__ = [
    "GeneratorTier",
    "MessageBuilder",
    "answer_perplexity",
    "default_generator_tiers",
    "light_tier",
    "measure_answer",
    "reasoning_tier",
]

logger = logging.getLogger(__name__)

MessageBuilder = Callable[[str, Sequence[prompts.PromptPassage]], Messages]


@dataclass(frozen=True)
class GeneratorTier:
    """One generator setting: the client it calls, its prompt, token budget and answer parser.

    ``max_tokens`` is applied to OpenAI-compatible models (see
    :func:`~dynakrag.llm.client.request_options`); other models are called as configured.
    ``parse`` returns ``None`` when a reply holds no answer (the router then falls back, see
    :meth:`~dynakrag.routing.generator.GeneratorRouter.answer`).
    """

    name: str
    llm: LLMClient
    build_messages: MessageBuilder = prompts.answer_messages
    max_tokens: int | None = None
    parse: Callable[[str], str | None] = parse_short_answer

    def messages(self, question: str, passages: Sequence[PassageLike]) -> Messages:
        """This tier's prompt for ``question`` over ``passages``."""
        return self.build_messages(question, passage_dicts(passages))

    def generate(
        self, question: str, passages: Sequence[PassageLike], *, logprobs: bool = False
    ) -> tuple[str | None, Any | None, Usage]:
        """``(raw reply text, reply message, usage)`` of this tier's prompt; the text and
        message are ``None`` when every attempt failed."""
        reply, usage = self.llm.reply(
            self.messages(question, passages), max_tokens=self.max_tokens, logprobs=logprobs
        )
        return (message_text(reply) if reply is not None else None), reply, usage


def _as_client(llm: LLMClient | BaseChatModel) -> LLMClient:
    return llm if isinstance(llm, LLMClient) else LLMClient(llm)


def light_tier(
    llm: LLMClient | BaseChatModel, *, max_tokens: int = 32, name: str = "light"
) -> GeneratorTier:
    """The cheap setting: answer-only prompt (:func:`dynakrag.prompts.answer_messages`)."""
    return GeneratorTier(
        name, _as_client(llm), prompts.answer_messages, max_tokens, parse_short_answer
    )


def reasoning_tier(
    llm: LLMClient | BaseChatModel, *, max_tokens: int = 384, name: str = "reasoning"
) -> GeneratorTier:
    """The heavy setting: reason first, then answer
    (:data:`dynakrag.prompts.REASONING_ANSWER_SYSTEM`)."""
    return GeneratorTier(
        name, _as_client(llm), prompts.reasoning_messages, max_tokens, parse_reasoned_answer
    )


def default_generator_tiers(
    llm: LLMClient | BaseChatModel,
    heavy_llm: LLMClient | BaseChatModel | None = None,
    *,
    light_max_tokens: int = 32,
    heavy_max_tokens: int = 384,
) -> list[GeneratorTier]:
    """``[light, reasoning]``: the heavy tier reasons with ``heavy_llm`` (a larger endpoint)
    when given, else with ``llm`` itself (one client, so its health counters see both)."""
    client = _as_client(llm)
    return [
        light_tier(client, max_tokens=light_max_tokens),
        reasoning_tier(
            _as_client(heavy_llm) if heavy_llm is not None else client, max_tokens=heavy_max_tokens
        ),
    ]


def answer_perplexity(
    tier: GeneratorTier,
    question: str,
    passages: Sequence[PassageLike],
    *,
    strict: bool = False,
) -> PerplexitySignal | None:
    """Perplexity of the answer ``tier`` generates (kind ``"answer"``; the parsed answer is in
    the signal). ``None`` (logged) when no reply or no log-probs came back, unless
    ``strict``."""
    signal, _, _ = measure_answer(tier, question, passages, strict)
    return signal


def measure_answer(
    tier: GeneratorTier, question: str, passages: Sequence[PassageLike], strict: bool
) -> tuple[PerplexitySignal | None, str | None, Usage]:
    """``(answer signal or None, the tier's raw reply or None, usage)``: one call of ``tier``
    with log-probs; its reply is kept, so a router that stays light answers with it."""
    raw, reply, usage = tier.generate(question, passages, logprobs=True)
    if raw is None:
        if strict:
            raise ModelUnavailableError(f"generator tier {tier.name!r} gave no reply")
        return None, None, usage
    answer = tier.parse(raw)
    values = chat_logprobs(reply)
    summary = perplexity_of(values) if values else None
    if summary is None:
        message = (
            f"generator tier {tier.name!r} returned no log-probs (response_metadata['logprobs'] "
            "is empty: the backend or the chat model does not support logprobs)"
        )
        if strict:
            raise LogprobsUnavailableError(message)
        logger.warning("no answer perplexity: %s", message)
        return None, raw, usage
    ppl, mean, count = summary
    return PerplexitySignal(ppl, "answer", count, mean, answer=answer, usage=usage), raw, usage

"""Context perplexity from prompt log-probs: only the context's tokens are scored (with or
without the BOS text in the offsets), a server without prompt log-probs falls back to the
answer-token signal, shifted log-probs are detected, and the router uses the scorer. Fast:
an in-process mock of the /completions endpoint."""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Callable
from typing import Any

import httpx
import numpy as np
import pytest

from dynakrag.errors import UserInputError
from dynakrag.routing.generator import GeneratorRouter, context_perplexity
from dynakrag.routing.generator_tiers import default_generator_tiers
from dynakrag.routing.perplexity import LogprobsUnavailableError, PerplexitySignal
from dynakrag.routing.prompt_logprobs import (
    EMBEDDED_BOS_TEXT,
    PromptLogprobScorer,
    prompt_perplexity,
)
from tests.unit.routing.support import FLUENT, NONSENSE, median, reader


def completions_server(
    logprob_of: Callable[[str], float], *, bos_in_offsets: bool = False, echo_logprobs: bool = True
) -> tuple[httpx.Client, list[dict[str, Any]]]:
    """An httpx client whose /completions echoes the prompt word by word (one token per
    word, offsets counted without the BOS text like llama-cpp-python), plus one generated
    token; the first echoed token has no log-prob."""
    bodies: list[dict[str, Any]] = []

    def handler(request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        bodies.append(body)
        prompt: str = body["prompt"]
        bos = EMBEDDED_BOS_TEXT if prompt.startswith(EMBEDDED_BOS_TEXT) else ""
        text = prompt[len(bos) :]
        tokens, offsets, values = [], [], []
        position = 0
        for word in text.split(" "):
            tokens.append(word)
            offsets.append(position + (len(bos) if bos_in_offsets else 0))
            values.append(logprob_of(word))
            position += len(word) + 1
        tokens.append("<gen>")
        offsets.append(len(text) + (len(bos) if bos_in_offsets else 0))
        values.append(-9.0)
        values[0] = None
        logprobs = {"tokens": tokens, "text_offset": offsets, "token_logprobs": values}
        choice = {"text": prompt + "x", "logprobs": logprobs if echo_logprobs else None}
        usage = {"prompt_tokens": len(tokens) - 1, "completion_tokens": 1}
        return httpx.Response(200, json={"choices": [choice], "usage": usage})

    return httpx.Client(transport=httpx.MockTransport(handler)), bodies


NONSENSE_WORDS = {"nonsense", "marmalade", "whisk", "galloped", "quarterly."}


def word_logprob(word: str) -> float:
    return -5.0 if word in NONSENSE_WORDS else -0.5


def test_prompt_perplexity_scores_only_the_context_tokens() -> None:
    client, bodies = completions_server(word_logprob)
    scorer = PromptLogprobScorer(
        "http://x/v1", "local", bos_text=EMBEDDED_BOS_TEXT, http_client=client
    )
    fluent = prompt_perplexity(scorer, "Oslo is fine", question="Q?", strict=True)
    assert bodies[0]["prompt"] == EMBEDDED_BOS_TEXT + "Question: Q?\nPassages:\nOslo is fine"
    assert bodies[0]["echo"] is True and bodies[0]["max_tokens"] == 1
    assert bodies[0]["logprobs"] == 1
    # "Question:", "Q?\nPassages:\nOslo" are prefix tokens; "is", "fine" are context;
    # the generated token is not part of the prompt.
    assert fluent is not None and fluent.kind == "context" and fluent.tokens == 2
    assert fluent.perplexity == pytest.approx(math.exp(0.5))
    assert fluent.usage.llm_calls == 1
    unsure = prompt_perplexity(scorer, "x nonsense nonsense", question="Q?", strict=True)
    assert unsure is not None and unsure.perplexity == pytest.approx(math.exp(5.0))
    # Without a question the first context token has no log-prob (nothing precedes it).
    alone = prompt_perplexity(scorer, [{"title": "T", "text": "a b"}])  # words "T\na", "b"
    assert alone is not None and alone.tokens == 1


def test_prompt_perplexity_handles_offsets_that_include_the_bos_text() -> None:
    client, _ = completions_server(word_logprob, bos_in_offsets=True)
    scorer = PromptLogprobScorer("http://x/v1", "m", bos_text=EMBEDDED_BOS_TEXT, http_client=client)
    signal = prompt_perplexity(scorer, "Oslo is fine", question="Q?", strict=True)
    assert signal is not None and signal.tokens == 2


def test_prompt_perplexity_without_logprobs(caplog: pytest.LogCaptureFixture) -> None:
    client, _ = completions_server(word_logprob, echo_logprobs=False)
    scorer = PromptLogprobScorer("http://x/v1", "m", http_client=client)
    with caplog.at_level(logging.WARNING, logger="dynakrag.routing"):
        assert prompt_perplexity(scorer, "Oslo is fine") is None
    assert "no prompt log-probs" in caplog.text
    with pytest.raises(LogprobsUnavailableError, match="does not support prompt log-probs"):
        prompt_perplexity(scorer, "Oslo is fine", strict=True)
    assert prompt_perplexity(scorer, "   ") is None
    # context_perplexity falls back to the answer-token signal, and says so.
    light = default_generator_tiers(reader())[0]
    signal = context_perplexity("Capital of Norway?", FLUENT, scorer=scorer, tier=light)
    assert isinstance(signal, PerplexitySignal) and signal.kind == "answer"
    with pytest.raises(UserInputError):
        context_perplexity("q", FLUENT)


def test_alignment_check_detects_shifted_logprobs() -> None:
    aligned, _ = completions_server(lambda w: -0.05)
    scorer = PromptLogprobScorer("http://x/v1", "m", http_client=aligned, verify_alignment=True)
    assert prompt_perplexity(scorer, "Oslo is fine", strict=True) is not None
    shifted, bodies = completions_server(lambda w: -9.0)
    bad = PromptLogprobScorer("http://x/v1", "m", http_client=shifted, verify_alignment=True)
    with pytest.raises(LogprobsUnavailableError, match="shifted by one token"):
        bad.score("Oslo is fine")
    assert bodies[0]["prompt"].startswith("1 2 3")
    assert prompt_perplexity(bad, "Oslo is fine") is None
    assert len(bodies) == 1  # the verdict is kept, not asked again


def test_router_with_a_scorer_uses_context_perplexity() -> None:
    client, _ = completions_server(word_logprob)
    scorer = PromptLogprobScorer("http://x/v1", "m", http_client=client)
    model = reader()
    router = GeneratorRouter(default_generator_tiers(model), median(2.0, "context"), scorer=scorer)
    easy = router.answer("Capital?", FLUENT)
    assert easy.decision.signal == "context_perplexity" and easy.decision.tier == 0
    assert easy.answer == "Oslo" and easy.usage.llm_calls == 2  # scoring + light answer
    hard = router.answer("Capital?", NONSENSE)
    assert hard.decision.tier == 1 and hard.answer == "Oslo"
    assert np.isfinite(hard.decision.value or math.nan)

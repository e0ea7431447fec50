"""Generator routing signals on the real embedded model (llama-cpp-python server).

Checks what the module docstring of :mod:`dynakrag.routing.prompt_logprobs` states: echoed prompt
log-probs line up with their tokens once the BOS text is prepended, a nonsense context is more
perplexing than a fluent one, and chat completions return answer log-probs.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from langchain_openai import ChatOpenAI

from dynakrag.configuration import Configuration
from dynakrag.llm.client import LLMClient
from dynakrag.llm.server_command import MODEL_ALIAS
from dynakrag.llm.server_process import EmbeddedServer
from dynakrag.llm.server_settings import ServerSettings
from dynakrag.routing.generator_tiers import GeneratorTier, answer_perplexity
from dynakrag.routing.prompt_logprobs import (
    EMBEDDED_BOS_TEXT,
    PromptLogprobScorer,
    prompt_perplexity,
)
from tests.markers import NEEDS_EMBEDDED_MODEL

pytestmark = NEEDS_EMBEDDED_MODEL

QUESTION = "What is the capital of France?"
FLUENT = [{"title": "", "text": "Paris is the capital of France."}]
NONSENSE = [{"title": "", "text": "Purple whisk galloped beneath marmalade."}]


@pytest.fixture(scope="module")
def logits_server() -> Iterator[EmbeddedServer]:
    # A server of its own that keeps logits (embedded_prompt_logprobs): llama-cpp-python gives
    # log-probs, prompt or answer, only then, and the process-wide server does not keep them.
    settings = ServerSettings.from_configuration(
        Configuration.from_env(embedded_prompt_logprobs=True)
    )
    with EmbeddedServer(settings=settings) as server:
        yield server


@pytest.fixture(scope="module")
def scorer(logits_server: EmbeddedServer) -> PromptLogprobScorer:
    return PromptLogprobScorer(
        logits_server.base_url,
        MODEL_ALIAS,
        bos_text=EMBEDDED_BOS_TEXT,
        trust_env=False,
        max_chars=200,
        timeout=120.0,
    )


def test_echoed_prompt_logprobs_are_aligned(scorer: PromptLogprobScorer) -> None:
    scorer.check_alignment()  # raises when log-probs are shifted by one token


def test_nonsense_context_is_more_perplexing_than_a_fluent_one(
    scorer: PromptLogprobScorer,
) -> None:
    # No question prefix: the server's cost grows with every echoed token.
    fluent = prompt_perplexity(scorer, FLUENT, strict=True)
    nonsense = prompt_perplexity(scorer, NONSENSE, strict=True)
    assert fluent is not None and nonsense is not None
    assert fluent.kind == nonsense.kind == "context"
    assert fluent.tokens >= 5 and nonsense.tokens >= 5
    assert nonsense.perplexity > 2 * fluent.perplexity, (fluent, nonsense)


def test_chat_completions_return_answer_logprobs(logits_server: EmbeddedServer) -> None:
    # A short prompt keeps prompt evaluation cheap on a 2-core box; the code path is the one
    # light_tier uses (ChatOpenAI bound with logprobs=True, top_logprobs=1, max_tokens).
    tier = GeneratorTier(
        "light",
        LLMClient(
            ChatOpenAI(
                base_url=logits_server.base_url,
                api_key="local",
                model=MODEL_ALIAS,
                temperature=0,
                timeout=120.0,
                max_retries=0,
            ),
            max_retries=0,
        ),
        build_messages=lambda q, ps: [("human", f"{ps[0]['text']}\n{q} One word.")],
        max_tokens=4,
    )
    signal = answer_perplexity(tier, QUESTION, FLUENT, strict=True)
    assert signal is not None and signal.kind == "answer" and signal.tokens >= 1
    assert signal.answer is not None and "paris" in signal.answer.lower()
    assert 1.0 <= signal.perplexity < 5.0

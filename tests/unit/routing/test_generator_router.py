"""Generator routing: the perplexity signals (answer-token log-probs, their parsing), the
router that stays on the light tier or escalates to the reasoning one, the request options
that ask a model for log-probs, and the tiers calling the model through LLMClient. Fast:
fake chat models."""

from __future__ import annotations

import json
import logging
import math

import pytest
from langchain_core.messages import AIMessage, BaseMessage

from dynakrag.errors import ConfigurationError, ModelUnavailableError
from dynakrag.llm.answers import parse_reasoned_answer, parse_short_answer
from dynakrag.llm.client import LLMClient, request_options
from dynakrag.retrieval.passage import Passage
from dynakrag.retrieval.provenance import Hit
from dynakrag.routing.generator import GeneratorRouter, retrieved_contexts
from dynakrag.routing.generator_tiers import answer_perplexity, default_generator_tiers
from dynakrag.routing.perplexity import (
    LogprobsUnavailableError,
    chat_logprobs,
    perplexity_of,
    render_context,
)
from dynakrag.routing.retriever import RetrieverTiers
from tests.unit.routing.support import FLUENT, NONSENSE, LogprobChat, idf_thresholds, median, reader

# --------------------------------------------------------------------------------------------
# Generator routing: signals
# --------------------------------------------------------------------------------------------


def test_perplexity_of_and_chat_logprobs() -> None:
    ppl, mean, n = perplexity_of([None, -1.0, -1.0])  # type: ignore[misc]
    assert (ppl, mean, n) == (pytest.approx(math.e), -1.0, 2)
    assert perplexity_of([None]) is None and perplexity_of([]) is None
    clipped = perplexity_of([-math.inf])
    assert clipped is not None and clipped[1] == -50.0
    assert chat_logprobs(AIMessage(content="x")) is None
    as_dicts = AIMessage(content="x", response_metadata={"logprobs": [{"logprob": -0.5}]})
    assert chat_logprobs(as_dicts) == [-0.5]
    floats = AIMessage(content="x", response_metadata={"logprobs": [-0.5, -1]})
    assert chat_logprobs(floats) == [-0.5, -1.0]
    empty = AIMessage(content="x", response_metadata={"logprobs": {"content": []}})
    assert chat_logprobs(empty) is None


def test_render_context_and_answer_parsers() -> None:
    hit = Hit(Passage("o", "Oslo", "Oslo text."), 1.0, "bm25", 1, (("bm25", 1, 1.0),))
    assert render_context([hit, {"title": "", "text": "plain"}]) == "Oslo\nOslo text.\n\nplain"
    assert parse_short_answer("  Answer: Oslo ") == "Oslo"
    assert parse_short_answer("Oslo") == "Oslo"
    assert parse_reasoned_answer("Step one.\nAnswer: Oslo\n") == "Oslo"
    assert parse_reasoned_answer("Reasoning.\n**Final answer:** Oslo") == "Oslo"
    assert parse_reasoned_answer("cut off mid reasoning") is None
    assert parse_reasoned_answer("") is None


def test_answer_perplexity_reads_response_metadata_logprobs() -> None:
    light = default_generator_tiers(reader())[0]
    fluent = answer_perplexity(light, "Capital of Norway?", FLUENT, strict=True)
    unsure = answer_perplexity(light, "Capital of Norway?", NONSENSE, strict=True)
    assert fluent is not None and unsure is not None
    assert fluent.kind == "answer" and fluent.answer == "Oslo" and fluent.tokens == 2
    assert fluent.perplexity == pytest.approx(math.exp(0.1))
    assert unsure.perplexity == pytest.approx(math.exp(3.0))
    assert fluent.usage.llm_calls == 1
    no_lp = default_generator_tiers(reader(with_logprobs=False))[0]
    assert answer_perplexity(no_lp, "q", FLUENT) is None
    with pytest.raises(LogprobsUnavailableError, match="no log-probs"):
        answer_perplexity(no_lp, "q", FLUENT, strict=True)


# --------------------------------------------------------------------------------------------
# Generator routing: the router
# --------------------------------------------------------------------------------------------


def test_router_stays_light_on_low_perplexity_and_escalates_on_high() -> None:
    model = reader()
    router = GeneratorRouter(default_generator_tiers(model), median(2.0))
    easy = router.answer("Capital of Norway?", FLUENT)
    assert easy.answer == "Oslo" and easy.decision.tier == 0
    assert easy.decision.tier_name == "light" and easy.decision.signal == "answer_perplexity"
    assert easy.decision.router == "generator" and easy.decision.query == "Capital of Norway?"
    assert easy.decision.level == 0
    assert easy.usage.llm_calls == 1  # the measuring call was the answer
    assert len(model.calls) == 1

    hard = router.answer("Capital of Norway?", NONSENSE)
    assert hard.decision.tier == 1 and hard.decision.tier_name == "reasoning"
    assert hard.answer == "Oslo"  # parsed from the "Answer:" line
    assert hard.raw is not None and hard.raw.startswith("Oslo is the capital")
    assert hard.usage.llm_calls == 2
    assert hard.signal is not None and hard.signal.answer == "Bergen"
    assert hard.decision.level == 1 and hard.decision.value == pytest.approx(math.exp(3.0))
    assert router.log.last == hard.decision
    assert router.log.tier_counts() == {"light": 1, "reasoning": 1}
    json.dumps(hard.decision.to_dict())
    json.dumps(hard.signal.to_dict())


def test_heavy_reply_without_answer_line_falls_back() -> None:
    tiers = default_generator_tiers(reader(cut_off=True))
    router = GeneratorRouter(tiers, median(2.0))
    result = router.answer("Capital of Norway?", NONSENSE)
    assert result.decision.tier == 1 and result.answer == "Bergen"  # the light answer
    assert result.raw == "Oslo is the capital of Norway.\nSo the"
    fixed = router.always(1).answer("Capital of Norway?", NONSENSE)
    assert fixed.answer == "So the"  # nothing measured: the reply's last line


def test_router_without_logprobs_stays_light_and_logs(caplog: pytest.LogCaptureFixture) -> None:
    model = reader(with_logprobs=False)
    router = GeneratorRouter(default_generator_tiers(model), median(2.0))
    with caplog.at_level(logging.INFO, logger="dynakrag.routing"):
        result = router.answer("Capital of Norway?", NONSENSE)
    assert result.signal is None and result.decision.value is None
    assert result.decision.signal is None and result.decision.level is None
    assert result.decision.tier == 0 and result.answer == "Bergen"
    assert len(model.calls) == 1
    assert "returned no log-probs" in caplog.text
    assert "staying on the light tier" in caplog.text


def test_router_always_and_validation() -> None:
    model = reader()
    tiers = default_generator_tiers(model)
    router = GeneratorRouter(tiers, median(2.0))
    heavy = router.always(-1).answer("Capital of Norway?", FLUENT)
    assert heavy.decision.fixed and heavy.decision.tier_name == "reasoning"
    assert heavy.signal is None and len(model.calls) == 1  # no measuring call
    light = router.always("light").answer("Capital of Norway?", FLUENT)
    assert light.answer == "Oslo" and light.decision.tier == 0
    assert GeneratorRouter(tiers, None, fixed_tier=0).tier_for(None) == 0
    with pytest.raises(ConfigurationError):
        GeneratorRouter(tiers, None)
    with pytest.raises(ConfigurationError, match="fitted on 'context_perplexity'"):
        GeneratorRouter(tiers, median(2.0, "context"))
    with pytest.raises(ConfigurationError, match="fitted on 'avg_idf'"):
        GeneratorRouter(tiers, idf_thresholds(1.0, 2.0, 3.0))
    with pytest.raises(ConfigurationError):
        router.always("unknown")
    with pytest.raises(ConfigurationError):
        GeneratorRouter([tiers[0], tiers[0]], None, fixed_tier=0)


def test_router_fits_median_thresholds_on_train_contexts() -> None:
    router = GeneratorRouter(default_generator_tiers(reader()), None, fixed_tier=0)
    contexts = [("q1", FLUENT), ("q2", NONSENSE), ("q3", FLUENT)]
    th = router.fit_thresholds(contexts, source="toy/train")
    assert th.signal == "answer_perplexity" and th.n == 3 and th.source == "toy/train"
    assert th.values == (pytest.approx(math.exp(0.1)),)  # the median of e^.1, e^3, e^.1
    silent = GeneratorRouter(
        default_generator_tiers(reader(with_logprobs=False)), None, fixed_tier=0
    )
    with pytest.raises(LogprobsUnavailableError):
        silent.fit_thresholds(contexts)


def test_chat_openai_gets_logprobs_top_logprobs_and_max_tokens() -> None:
    from langchain_openai import ChatOpenAI

    model = ChatOpenAI(
        base_url="http://127.0.0.1:9/v1", api_key="x", model="m", extra_body={"a": 1}
    )
    assert request_options(model, max_tokens=16, logprobs=True) == {
        "extra_body": {"a": 1, "max_tokens": 16},
        "logprobs": True,
        "top_logprobs": 1,
    }
    assert request_options(model) == {}
    fake = reader()
    # Other models are called as configured.
    assert request_options(fake, max_tokens=16, logprobs=True) == {}


# --------------------------------------------------------------------------------------------
# Generator tiers call the model through LLMClient
# --------------------------------------------------------------------------------------------


def test_generator_tiers_call_the_model_through_the_llm_client() -> None:
    client = LLMClient(reader(), max_retries=0)
    router = GeneratorRouter(default_generator_tiers(client), median(2.0))
    assert all(tier.llm is client for tier in router.tiers)  # one client: one health record
    router.answer("Capital of Norway?", NONSENSE)  # measure (light) + answer (reasoning)
    assert client.replies == 2 and client.failed_requests == 0 and not client.unreachable


def test_generator_faults_are_counted_by_the_client_and_a_lost_model_raises() -> None:
    def refused(messages: list[BaseMessage]) -> tuple[str, list[float] | None]:
        raise RuntimeError("connection refused")

    client = LLMClient(LogprobChat(respond=refused), max_retries=1, backoff_s=0.0)
    router = GeneratorRouter(default_generator_tiers(client), median(2.0))
    result = router.answer("Capital of Norway?", FLUENT)
    assert result.answer is None and result.signal is None and result.decision.tier == 0
    assert client.failed_requests == 2 and client.unreachable
    assert "connection refused" in (client.last_error or "")

    def gone(messages: list[BaseMessage]) -> tuple[str, list[float] | None]:
        raise ModelUnavailableError("the embedded server stopped")

    lost = GeneratorRouter(default_generator_tiers(LogprobChat(respond=gone)), median(2.0))
    with pytest.raises(ModelUnavailableError, match="stopped"):
        lost.answer("Capital of Norway?", FLUENT)


def test_retrieved_contexts_pair_each_question_with_its_top_k(tiers: RetrieverTiers) -> None:
    contexts = retrieved_contexts(["Oslo Norway city", "Lima Peru city"], tiers.bm25, k=2)
    assert [question for question, _ in contexts] == ["Oslo Norway city", "Lima Peru city"]
    assert [len(passages) for _, passages in contexts] == [2, 2]
    assert contexts[0][1][0].id == "oslo"

"""Per-query retriever routing (avg IDF, thresholds, tiers) and generator routing (perplexity
signals, thresholds, the router). Fast: hand-made corpora, fake embeddings, fake chat models,
an in-process mock of the completions endpoint."""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest
from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.embeddings import DeterministicFakeEmbedding
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from pydantic import Field

from dynakrag.errors import ConfigurationError, CorpusError, ModelUnavailableError, UserInputError
from dynakrag.llm.answers import parse_reasoned_answer, parse_short_answer
from dynakrag.llm.client import LLMClient, request_options
from dynakrag.retrieval.base import Searcher
from dynakrag.retrieval.dense import DenseIndex
from dynakrag.retrieval.lexical import BM25Index
from dynakrag.retrieval.passage import Passage
from dynakrag.retrieval.provenance import Hit, search_with_provenance
from dynakrag.routing.decisions import DecisionLog, RoutingDecision
from dynakrag.routing.generator import GeneratorRouter, context_perplexity, retrieved_contexts
from dynakrag.routing.generator_tiers import answer_perplexity, default_generator_tiers
from dynakrag.routing.perplexity import (
    LogprobsUnavailableError,
    PerplexitySignal,
    chat_logprobs,
    fit_perplexity_thresholds,
    perplexity_of,
    render_context,
)
from dynakrag.routing.prompt_logprobs import (
    EMBEDDED_BOS_TEXT,
    PromptLogprobScorer,
    prompt_perplexity,
)
from dynakrag.routing.retriever import (
    TIER_NAMES,
    DecomposeSearcher,
    QueryDifficulty,
    RetrieverTiers,
    RoutedHit,
    RoutedSearcher,
    build_tiers,
    fit_idf_thresholds,
    passage_queries,
)
from dynakrag.routing.thresholds import PercentileThresholds
from tests.benchmark_scripts import benchmark_module

# --------------------------------------------------------------------------------------------
# Fixtures
# --------------------------------------------------------------------------------------------

# "city" is in every passage, "river" in most; each name is in exactly one.
CORPUS = [
    Passage("zan", "Zanzibar", "Zanzibar is a city on an island with a river."),
    Passage("quo", "Quokka Town", "Quokka Town is a city near the river delta."),
    Passage("oslo", "Oslo", "Oslo is a city and the capital of Norway, on a river."),
    Passage("lima", "Lima", "Lima is a city and the capital of Peru, by a river."),
    Passage("rome", "Rome", "Rome is an old city on the river Tiber."),
    Passage("kyiv", "Kyiv", "Kyiv is a city on the river Dnipro."),
    Passage("bern", "Bern", "Bern is a small city, the federal seat of Switzerland."),
    Passage("gent", "Gent", "Gent is a city in Flanders with a harbour and canals."),
]


@pytest.fixture(scope="module")
def bm25() -> BM25Index:
    return BM25Index.build(CORPUS)


@pytest.fixture(scope="module")
def tiers() -> RetrieverTiers:
    return build_tiers(CORPUS, DeterministicFakeEmbedding(size=16))


def idf_thresholds(p25: float, p50: float, p75: float) -> PercentileThresholds:
    """Avg-IDF thresholds set by hand (lower avg IDF is harder)."""
    return PercentileThresholds("avg_idf", (p25, p50, p75), (25.0, 50.0, 75.0), "lower")


def median(value: float, kind: str = "answer") -> PercentileThresholds:
    """A one-cut perplexity threshold set by hand (higher perplexity is harder)."""
    return PercentileThresholds(f"{kind}_perplexity", (value,), (50.0,), "higher")


class TableDifficulty(QueryDifficulty):
    """A difficulty with hand-set values (for hand-computed percentiles)."""

    def __init__(self, bm25: BM25Index, table: dict[str, float]) -> None:
        super().__init__(bm25)
        self.table = table

    def average_idf(self, query: str) -> float:
        return self.table[query]


class Recorder:
    """A searcher returning fixed passages per query word; records every query."""

    def __init__(self, by_word: dict[str, list[str]], name: str = "rec") -> None:
        self.by_word = by_word
        self.queries: list[str] = []
        self.name = name
        self.passages = {p.id: p for p in CORPUS}

    def search(self, query: str, k: int) -> list[tuple[Passage, float]]:
        self.queries.append(query)
        ids: list[str] = []
        for word in query.lower().replace("?", "").split():
            ids += [i for i in self.by_word.get(word, []) if i not in ids]
        return [(self.passages[i], 1.0 / (r + 1)) for r, i in enumerate(ids[:k])]


# --------------------------------------------------------------------------------------------
# Query difficulty and thresholds
# --------------------------------------------------------------------------------------------


def test_avg_idf_is_higher_for_rare_term_queries(bm25: BM25Index) -> None:
    difficulty = QueryDifficulty(bm25)
    rare = difficulty("Zanzibar Quokka")
    common = difficulty("city river")
    assert rare > common > 0.0
    assert difficulty("the of and") == 0.0  # stopwords only: no index term
    assert math.isclose(difficulty("Zanzibar"), bm25.idf("zanzibar"))
    assert [t for t, _ in difficulty.term_idfs("Zanzibar city Zanzibar")] == ["zanzibar", "city"]


def test_thresholds_are_the_hand_computed_percentiles(bm25: BM25Index) -> None:
    # Four values: numpy's linear percentiles are 1 + 3q/100 -> 1.75, 2.5, 3.25.
    table = {"a": 4.0, "b": 1.0, "c": 3.0, "d": 2.0}
    th = fit_idf_thresholds(list(table), TableDifficulty(bm25, table), source="hand")
    assert th.values == (1.75, 2.5, 3.25) and th.percentiles == (25.0, 50.0, 75.0)
    assert (th.at(75), th.at(50), th.at(25)) == (3.25, 2.5, 1.75)
    assert th.signal == "avg_idf" and th.harder == "lower" and th.levels == 4
    assert th.n == 4 and th.source == "hand"
    assert th.details["corpus_size"] == len(CORPUS)
    assert th.details["vocabulary_size"] == bm25.vocabulary_size

    # Five real queries: the percentiles are exactly the 2nd, 3rd, 4th smallest avg IDF.
    queries = ["city", "city river", "capital river", "Oslo Norway", "Zanzibar Quokka"]
    values = sorted(bm25.average_idf(q) for q in queries)
    th5 = fit_idf_thresholds(queries, bm25)
    assert th5.values == pytest.approx(values[1:4])


def test_threshold_levels_at_the_boundaries() -> None:
    th = idf_thresholds(p25=1.0, p50=2.0, p75=3.0)
    assert [th.level(v) for v in (5.0, 3.0, 2.9, 2.0, 1.5, 1.0, 0.99, 0.0)] == [
        0,
        0,
        1,
        1,
        2,
        2,
        3,
        3,
    ]


def test_threshold_fit_is_deterministic_and_validated(bm25: BM25Index) -> None:
    queries = [f"{a} {b}" for a in ("Oslo", "city", "river", "Lima") for b in ("Peru", "city")]
    one = fit_idf_thresholds(queries, bm25, max_queries=4, seed=3)
    assert one == fit_idf_thresholds(queries, bm25, max_queries=4, seed=3)
    assert one.n == 4
    with pytest.raises(UserInputError):
        fit_idf_thresholds([], bm25)
    with pytest.raises(UserInputError):
        fit_idf_thresholds(queries, bm25, max_queries=0)
    with pytest.raises(ConfigurationError):
        idf_thresholds(p25=0.5, p50=2.0, p75=1.0)
    with pytest.raises(ConfigurationError):
        idf_thresholds(p25=0.5, p50=2.0, p75=math.nan)


def test_thresholds_json_round_trip(tmp_path: Path, bm25: BM25Index) -> None:
    th = fit_idf_thresholds(["Oslo", "city", "river Tiber", "Gent canals"], bm25, source="x/train")
    path = th.save(tmp_path / "sub" / "idf.json")
    data = json.loads(path.read_text())
    assert data["format"] == "dynakrag.percentile_thresholds/1"
    assert data["signal"] == "avg_idf" and data["details"]["corpus_size"] == len(CORPUS)
    assert PercentileThresholds.load(path) == th
    path.write_text("{not json")
    with pytest.raises(ConfigurationError):
        PercentileThresholds.load(path)
    with pytest.raises(ConfigurationError):
        PercentileThresholds.from_dict({**data, "format": "other"})
    with pytest.raises(ConfigurationError):
        PercentileThresholds.from_dict({**data, "values": [1, "x", 2]})
    with pytest.raises(ConfigurationError):
        PercentileThresholds.load(tmp_path / "missing.json")


def test_oov_rate_is_recorded_and_warned(bm25: BM25Index, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="dynakrag.routing.retriever"):
        known = fit_idf_thresholds(["Oslo city", "Lima river"], bm25)
    assert known.details["oov_rate"] == 0.0 and caplog.text == ""
    with caplog.at_level(logging.WARNING, logger="dynakrag.routing.retriever"):
        unseen = fit_idf_thresholds(["Oslo Xanadu", "Lima Atlantis"], bm25)
    assert unseen.details["oov_rate"] == 0.5
    assert "absent from the corpus" in caplog.text


def test_benchmark_fits_idf_thresholds_on_train_rows_only(monkeypatch: pytest.MonkeyPatch) -> None:
    from dynakrag.data.datasets import QAExample

    asked: list[str] = []

    def fake_load(dataset: str, split: str, limit: int | None = None) -> list[QAExample]:
        asked.append(split)
        rows = [("Oslo Norway", CORPUS[2]), ("Lima Peru", CORPUS[3]), ("city", CORPUS[0])]
        return [
            QAExample(f"q{i}", q, ("a",), (p.id,), (p,), dataset, i, split)
            for i, (q, p) in enumerate(rows)
        ]

    with benchmark_module("routing") as benchmark:
        monkeypatch.setattr(benchmark, "load_examples", fake_load)
        own = benchmark.train_idf_thresholds("toy", limit=3, seed=13)
    # Indexed on the train rows' own paragraphs: every question term is in that corpus.
    assert own.source == "toy/train" and own.n == 3
    assert own.details["corpus_size"] == 3 and own.details["oov_rate"] == 0.0
    assert asked == ["train"]


def test_thresholds_warn_on_another_corpus(
    bm25: BM25Index, caplog: pytest.LogCaptureFixture
) -> None:
    th = fit_idf_thresholds(["Oslo", "city"], bm25)
    other = BM25Index.build(CORPUS[:3])
    with caplog.at_level(logging.WARNING, logger="dynakrag.routing.retriever"):
        RoutedSearcher([("bm25", other)], th, other)
    assert "fitted on a corpus of 8 passages" in caplog.text
    with pytest.raises(ConfigurationError, match="needs 'avg_idf' thresholds"):
        RoutedSearcher([("bm25", bm25)], median(2.0), bm25)


# --------------------------------------------------------------------------------------------
# Routing
# --------------------------------------------------------------------------------------------

QUERIES = [
    "Zanzibar Quokka",
    "Oslo Norway",
    "capital of Peru",
    "old city Tiber",
    "city on a river",
    "city",
    "the of",
]


def test_routing_is_monotone_in_difficulty(tiers: RetrieverTiers) -> None:
    th = fit_idf_thresholds(QUERIES, tiers.bm25)
    routed = tiers.routed(th)
    ordered = sorted(QUERIES, key=routed.difficulty, reverse=True)  # easiest (rarest) first
    chosen = [routed.tier_for(q) for q in ordered]
    assert chosen == sorted(chosen)
    assert chosen[0] == 0 and chosen[-1] == 3
    assert routed.log.decisions == ()  # tier_for neither searches nor logs


def test_fewer_tiers_clamp_the_level(bm25: BM25Index) -> None:
    th = idf_thresholds(p25=8.0, p50=9.0, p75=10.0)  # every query is level 3
    routed = RoutedSearcher([("bm25", bm25), ("also-bm25", bm25)], th, bm25)
    assert routed.tier_for("city") == 1


def test_provenance_carries_tier_and_avg_idf(tiers: RetrieverTiers) -> None:
    th = fit_idf_thresholds(QUERIES, tiers.bm25)
    routed = tiers.routed(th)
    assert isinstance(routed, Searcher)
    query = "Zanzibar Quokka"
    hits, dropped = search_with_provenance(routed, query, 3)
    avg = tiers.bm25.average_idf(query)
    assert hits and all(isinstance(h, RoutedHit) and isinstance(h, Hit) for h in hits)
    assert {h.retriever for h in hits} == {"routed:bm25"}
    assert all(h.tier == 0 and h.tier_name == "bm25" for h in hits)
    assert all(h.avg_idf == pytest.approx(avg) for h in hits)
    assert hits[0].to_dict()["route"] == {"tier": 0, "tier_name": "bm25", "avg_idf": avg}
    assert hits[0].sources[0][0] == "bm25"
    assert all(d.get("route_tier") == "bm25" for d in dropped)
    route = routed.log.last
    assert isinstance(route, RoutingDecision) and route.router == "retriever"
    assert route.query == query and route.tier == 0
    assert route.level == 0 and not route.fixed and route.seconds >= 0.0
    assert route.signal == "avg_idf" and route.value == pytest.approx(avg)
    json.dumps(route.to_dict())

    hard = "city"  # in every passage: the lowest avg IDF but one
    assert [p.id for p, _ in routed.search(hard, 2)]
    assert routed.log.last is not None and routed.log.last.tier_name == "hybrid+decompose"
    assert routed.log.last.sub_queries == ()  # nothing to split in this query
    assert [r.query for r in routed.log.decisions] == [query, hard]
    assert routed.log.tier_counts() == {"bm25": 1, "dense": 0, "hybrid": 0, "hybrid+decompose": 1}
    routed.log.clear()
    assert routed.log.decisions == () and routed.log.last is None


def test_always_cheapest_and_heaviest(tiers: RetrieverTiers) -> None:
    routed = tiers.routed(fit_idf_thresholds(QUERIES, tiers.bm25))
    cheapest, heaviest = routed.cheapest(), routed.heaviest()
    assert cheapest.tiers == routed.tiers  # shared, nothing rebuilt
    for query in QUERIES:
        cheapest.search(query, 2)
        heaviest.search(query, 2)
    assert {r.tier for r in cheapest.log.decisions} == {0}
    assert {r.tier for r in heaviest.log.decisions} == {3}
    assert all(r.fixed for r in heaviest.log.decisions)
    # The level is still recorded.
    assert heaviest.log.decisions[0].level == routed.tier_for(QUERIES[0])
    hits, _ = heaviest.search_with_provenance("Oslo and Lima", 2)
    assert {h.retriever for h in hits} == {"always:hybrid+decompose"}
    assert heaviest.log.last is not None
    assert heaviest.log.last.sub_queries == ("Oslo", "Lima")
    assert routed.always("dense").fixed_tier == 1
    assert routed.always(-2).fixed_tier == 2
    # A fixed tier needs no thresholds.
    fixed = RoutedSearcher(tiers.tiers, None, tiers.bm25, fixed_tier="bm25")
    assert fixed.tier_for("anything") == 0
    for bad in ("nope", 4, -5, True):
        with pytest.raises(ConfigurationError):
            routed.always(bad)  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError):
        RoutedSearcher(tiers.tiers, None, tiers.bm25)
    with pytest.raises(ConfigurationError):
        RoutedSearcher([], None, tiers.bm25, fixed_tier=0)
    with pytest.raises(ConfigurationError):
        RoutedSearcher([("a", tiers.bm25), ("a", tiers.dense)], None, tiers.bm25, fixed_tier=0)


# --------------------------------------------------------------------------------------------
# Decomposition tier
# --------------------------------------------------------------------------------------------


def test_decompose_searches_each_part_and_fuses() -> None:
    base = Recorder({"oslo": ["oslo", "bern"], "lima": ["lima"], "and": []})
    searcher = DecomposeSearcher(base)
    hits, _ = searcher.search_with_provenance("Oslo and Lima", 3)
    assert base.queries == ["Oslo and Lima", "Oslo", "Lima"]
    assert [h.passage.id for h in hits] == ["oslo", "lima", "bern"]
    assert all(h.retriever == "hybrid+decompose" for h in hits)
    assert [s[0] for s in hits[0].sources] == ["query", "part1"]
    assert [s[0] for s in hits[1].sources] == ["query", "part2"]
    # RRF: found at rank 1 by "query" and "part1" -> 2/61.
    assert hits[0].score == pytest.approx(2 / 61)
    assert searcher.sub_queries("Oslo and Lima") == ["Oslo", "Lima"]

    base.queries.clear()
    searcher.search("Oslo", 2)  # nothing to split: one search
    assert base.queries == ["Oslo"]


# --------------------------------------------------------------------------------------------
# Building the tiers
# --------------------------------------------------------------------------------------------


class CountingEmbedding(DeterministicFakeEmbedding):
    """Counts how many texts were embedded as documents."""

    embedded: int = 0

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        self.embedded += len(texts)
        return super().embed_documents(texts)


def test_build_tiers_shares_one_bm25_and_one_dense_index() -> None:
    embeddings = CountingEmbedding(size=8)
    built = build_tiers(CORPUS, embeddings)
    assert embeddings.embedded == len(CORPUS)  # one embedding pass for all tiers
    assert [name for name, _ in built.tiers] == list(TIER_NAMES)
    assert built.hybrid.retrievers["bm25"] is built.bm25
    assert built.hybrid.retrievers["dense"] is built.dense
    assert built.decompose.base is built.hybrid
    for _, searcher in built.tiers:
        assert searcher.search("Oslo Norway", 2)
    other = DenseIndex.build(CORPUS[:2], embeddings, progress=False)
    with pytest.raises(CorpusError):
        RetrieverTiers.from_indexes(built.bm25, other)


# --------------------------------------------------------------------------------------------
# Generator routing: signals
# --------------------------------------------------------------------------------------------

Respond = Callable[[list[BaseMessage]], tuple[str, list[float] | None]]


class LogprobChat(BaseChatModel):
    """Replies ``respond(messages) -> (text, logprobs)``; logprobs go into
    ``response_metadata["logprobs"]`` in ChatOpenAI's format (omitted when ``None``)."""

    respond: Respond
    calls: list[str] = Field(default_factory=list)

    @property
    def _llm_type(self) -> str:
        return "logprob-fake"

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        self.calls.append(str(messages[0].content))
        text, logprobs = self.respond(messages)
        metadata: dict[str, Any] = {}
        if logprobs is not None:
            metadata["logprobs"] = {
                "content": [{"token": f"t{i}", "logprob": v} for i, v in enumerate(logprobs)]
            }
        usage = {"input_tokens": 10, "output_tokens": len(text) // 4 + 1, "total_tokens": 11}
        message = AIMessage(content=text, response_metadata=metadata, usage_metadata=usage)
        return ChatResult(generations=[ChatGeneration(message=message)])


def reader(*, with_logprobs: bool = True, cut_off: bool = False) -> LogprobChat:
    """Confident (log-prob -0.1) on fluent passages, unsure (-3.0) when one says "nonsense";
    the reasoning prompt gets a reason-then-answer reply (without its answer line when
    ``cut_off``)."""

    def respond(messages: list[BaseMessage]) -> tuple[str, list[float] | None]:
        prompt = str(messages[-1].content)
        unsure = "nonsense" in prompt
        if "reason step by step" in str(messages[0].content):
            if cut_off:
                return "Oslo is the capital of Norway.\nSo the", None
            return "Oslo is the capital of Norway.\nAnswer: Oslo", None
        logprobs = [-3.0, -3.0] if unsure else [-0.1, -0.1]
        return ("Bergen" if unsure else "Oslo"), (logprobs if with_logprobs else None)

    return LogprobChat(respond=respond)


FLUENT = [{"title": "Oslo", "text": "Oslo is the capital of Norway."}]
NONSENSE = [{"title": "Oslo", "text": "nonsense marmalade whisk galloped quarterly."}]


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


def test_perplexity_thresholds_fit_tiers_and_json(tmp_path: Path) -> None:
    th = fit_perplexity_thresholds([1.0, 2.0, 3.0, 4.0], kind="context")
    assert th.values == (2.5,) and th.percentiles == (50.0,)
    assert th.signal == "context_perplexity" and th.harder == "higher"
    assert [th.level(v) for v in (1.0, 2.5, 2.6)] == [0, 0, 1]
    three = fit_perplexity_thresholds([1.0, 2.0, 3.0, 4.0], kind="answer", percentiles=(75, 25))
    assert three.values == (1.75, 3.25) and [three.level(v) for v in (1, 2, 4)] == [0, 1, 2]
    assert PercentileThresholds.load(th.save(tmp_path / "ppl.json")) == th
    with pytest.raises(UserInputError):
        fit_perplexity_thresholds([], kind="answer")
    with pytest.raises(UserInputError):
        fit_perplexity_thresholds([1.0], kind="answer", percentiles=(150,))
    with pytest.raises(ConfigurationError):
        PercentileThresholds("answer_perplexity", (3.0, 1.0), (25.0, 75.0), "higher")
    with pytest.raises(ConfigurationError):
        fit_perplexity_thresholds([1.0], kind="other")  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError):
        PercentileThresholds("answer_perplexity", (1.0,), (50.0,), "sideways")  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError):
        PercentileThresholds("answer_perplexity", (1.0, 2.0), (50.0,), "higher")
    with pytest.raises(ConfigurationError):
        PercentileThresholds.from_dict({"format": "x"})
    with pytest.raises(ConfigurationError):
        th.at(90)


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
# Context perplexity from prompt log-probs (mocked /completions endpoint)
# --------------------------------------------------------------------------------------------


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


# --------------------------------------------------------------------------------------------
# One decision record and log for both routers
# --------------------------------------------------------------------------------------------


def test_both_routers_log_the_same_decision_record(tiers: RetrieverTiers) -> None:
    searcher = tiers.routed(fit_idf_thresholds(QUERIES, tiers.bm25))
    searcher.search("Oslo Norway", 2)
    router = GeneratorRouter(default_generator_tiers(reader()), median(2.0))
    router.answer("Capital of Norway?", FLUENT)
    retrieved, generated = searcher.log.last, router.log.last
    assert isinstance(retrieved, RoutingDecision) and isinstance(generated, RoutingDecision)
    assert (retrieved.router, generated.router) == ("retriever", "generator")
    assert set(retrieved.to_dict()) == set(generated.to_dict())


def test_decision_log_is_bounded_and_per_thread() -> None:
    import threading

    log = DecisionLog(("a", "b"), max_log=2)
    for i, name in enumerate(["a", "b", "b"]):
        log.record(RoutingDecision("retriever", f"q{i}", "ab".index(name), name))
    assert [d.query for d in log.decisions] == ["q1", "q2"]
    assert log.tier_counts() == {"a": 0, "b": 2}
    seen: list[RoutingDecision | None] = []
    other = threading.Thread(target=lambda: seen.append(log.last))
    other.start()
    other.join()
    assert seen == [None]  # another thread's latest decision is its own
    assert log.last is not None and log.last.query == "q2"


# --------------------------------------------------------------------------------------------
# Stand-in queries from the corpus
# --------------------------------------------------------------------------------------------


def test_passage_queries_are_first_sentences_or_titles() -> None:
    passages = [
        Passage("a", "Oslo", "Oslo is the capital of Norway. It lies on a fjord."),
        Passage("b", "Bare Title", ""),
        Passage("c", "", "  "),
    ]
    assert passage_queries(passages) == ["Oslo is the capital of Norway.", "Bare Title"]

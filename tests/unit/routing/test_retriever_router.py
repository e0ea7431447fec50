"""Per-query retriever routing: the tier a query's difficulty chooses (monotone, clamped to
the tiers there are), the route carried in each hit's provenance, fixed tiers, the
decomposition tier, the tiers built over one BM25 and one dense index, and the stand-in
queries drawn from a corpus. Fast: a hand-made corpus and fake embeddings."""

from __future__ import annotations

import json

import pytest
from langchain_core.embeddings import DeterministicFakeEmbedding

from dynakrag.errors import ConfigurationError, CorpusError
from dynakrag.retrieval.base import Searcher
from dynakrag.retrieval.dense import DenseIndex
from dynakrag.retrieval.lexical import BM25Index
from dynakrag.retrieval.passage import Passage
from dynakrag.retrieval.provenance import Hit, search_with_provenance
from dynakrag.routing.decisions import RoutingDecision
from dynakrag.routing.retriever import (
    TIER_NAMES,
    DecomposeSearcher,
    RetrieverTiers,
    RoutedHit,
    RoutedSearcher,
    build_tiers,
    fit_idf_thresholds,
    passage_queries,
)
from tests.unit.routing.support import CORPUS, QUERIES, idf_thresholds


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
# Routing
# --------------------------------------------------------------------------------------------


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
# Stand-in queries from the corpus
# --------------------------------------------------------------------------------------------


def test_passage_queries_are_first_sentences_or_titles() -> None:
    passages = [
        Passage("a", "Oslo", "Oslo is the capital of Norway. It lies on a fjord."),
        Passage("b", "Bare Title", ""),
        Passage("c", "", "  "),
    ]
    assert passage_queries(passages) == ["Oslo is the capital of Norway.", "Bare Title"]

"""Per-query retriever selection (DRAG-QPP, training-free): average IDF picks the retriever.

Four retriever tiers of increasing cost share one corpus:

``bm25``
    Lexical BM25 (:class:`~dynakrag.retrieval.lexical.BM25Index`).
``dense``
    Dense cosine search (:class:`~dynakrag.retrieval.dense.DenseIndex`).
``hybrid``
    BM25 + dense fused by reciprocal rank (:class:`~dynakrag.retrieval.hybrid.HybridRetriever`).
``hybrid+decompose``
    The hybrid searched with the query and with each part of a rule-based split of the query
    (:func:`~dynakrag.decomposition.split_query`: conjunctions, commas and semicolons outside
    quotes), fused by RRF (:class:`DecomposeSearcher`).

A query's difficulty is the mean BM25 idf of its terms on the corpus (:class:`QueryDifficulty`):
rare terms (entity names) make a specific, easy query; common terms a vague, hard one.
:func:`fit_idf_thresholds` takes the 25th/50th/75th percentiles of that value over training
queries (:class:`~dynakrag.routing.thresholds.PercentileThresholds`, signal ``"avg_idf"``);
avg IDF >= p75 routes to tier 0 (cheapest), >= p50 to 1, >= p25 to 2, else to 3 (heaviest).
Without training questions, :func:`passage_queries` stands in for them: the first sentence of
each passage, a short text naming an entity and a relation, as questions do.
:class:`RoutedSearcher` is a :class:`~dynakrag.retrieval.base.Searcher` doing that routing and
recording each decision (tier, avg IDF, latency) in its hits' provenance and its decision log.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, fields

from langchain_core.embeddings import Embeddings

from dynakrag.decomposition import split_query
from dynakrag.errors import ConfigurationError, CorpusError, UserInputError
from dynakrag.retrieval.base import Searcher
from dynakrag.retrieval.dense import DenseIndex
from dynakrag.retrieval.hybrid import (
    DEFAULT_K_RRF,
    HybridRetriever,
    fusion_candidate_k,
    reciprocal_rank_fusion,
)
from dynakrag.retrieval.lexical import BM25Index, tokenize
from dynakrag.retrieval.passage import Passage
from dynakrag.retrieval.provenance import (
    Dropped,
    Hit,
    HitRecord,
    ProvenanceResult,
    ProvenanceSearchMixin,
    search_with_provenance,
)
from dynakrag.retrieval.views import first_sentence
from dynakrag.routing.decisions import DecisionLog, RoutingDecision, check_tier_names, tier_index
from dynakrag.routing.thresholds import PercentileThresholds
from dynakrag.state import RouteChoice

__all__ = [
    "IDF_PERCENTILES",
    "IDF_SIGNAL",
    "LEVELS",
    "TIER_NAMES",
    "DecomposeSearcher",
    "QueryDifficulty",
    "RetrieverTiers",
    "RoutedHit",
    "RoutedSearcher",
    "build_tiers",
    "fit_idf_thresholds",
    "passage_queries",
]

logger = logging.getLogger(__name__)

TIER_NAMES: tuple[str, ...] = ("bm25", "dense", "hybrid", "hybrid+decompose")
"""The retriever tiers of :func:`build_tiers`, cheapest first."""

IDF_SIGNAL = "avg_idf"
"""The signal name of avg-IDF thresholds."""
IDF_PERCENTILES: tuple[float, ...] = (25.0, 50.0, 75.0)
"""The paper's cut points: the 25th, 50th and 75th percentiles of training avg IDF."""
LEVELS = len(IDF_PERCENTILES) + 1
"""Difficulty levels the three thresholds define (0 = easiest/most specific .. 3 = hardest)."""

OOV_WARNING_RATE = 0.1
"""Share of training query terms absent from the corpus above which the fit warns."""


# --------------------------------------------------------------------------------------------
# Query difficulty and thresholds
# --------------------------------------------------------------------------------------------


class QueryDifficulty:
    """Average idf of a query's distinct index terms on a corpus (pre-retrieval QPP signal).

    Higher means more specific (rarer words). A query with no index term scores ``0.0``, the
    hardest possible value. Values are cached per query string.
    """

    def __init__(self, bm25: BM25Index, *, cache_size: int = 4096) -> None:
        self.bm25 = bm25
        self._cache: dict[str, float] = {}
        self._cache_size = cache_size
        self._lock = threading.Lock()

    def __call__(self, query: str) -> float:
        """:meth:`average_idf` of ``query``."""
        return self.average_idf(query)

    def average_idf(self, query: str) -> float:
        """Mean Lucene idf of the distinct terms of ``query`` (``0.0`` when it has none)."""
        with self._lock:
            cached = self._cache.get(query)
        if cached is not None:
            return cached
        value = float(self.bm25.average_idf(query))
        with self._lock:
            if len(self._cache) >= self._cache_size:
                self._cache.clear()
            self._cache[query] = value
        return value

    def term_idfs(self, query: str) -> list[tuple[str, float]]:
        """``(term, idf)`` for each distinct index term of ``query``, in query order."""
        return [(term, self.bm25.idf(term)) for term in dict.fromkeys(tokenize(query))]


def _as_difficulty(source: BM25Index | QueryDifficulty) -> QueryDifficulty:
    if isinstance(source, QueryDifficulty):
        return source
    if isinstance(source, BM25Index):
        return QueryDifficulty(source)
    raise ConfigurationError(
        f"expected a BM25Index or QueryDifficulty, got {type(source).__name__}"
    )


def passage_queries(passages: Iterable[Passage]) -> list[str]:
    """Stand-in training queries drawn from a corpus itself: each passage's first sentence
    (:func:`~dynakrag.retrieval.views.first_sentence`), or its title when it has no text."""
    queries = [first_sentence(p).strip() or p.title.strip() for p in passages]
    return [query for query in queries if query]


def fit_idf_thresholds(
    train_queries: Iterable[str],
    bm25: BM25Index | QueryDifficulty,
    *,
    max_queries: int | None = None,
    seed: int = 13,
    source: str = "",
) -> PercentileThresholds:
    """The p25/p50/p75 (numpy's linear interpolation) of the avg IDF of ``train_queries`` on
    ``bm25``'s corpus. Never pass evaluation questions.

    ``max_queries`` fits on a sample of that size drawn with ``seed`` (deterministic). The
    thresholds' ``details`` record the corpus (``corpus_size``, ``vocabulary_size``) and the
    ``oov_rate``: the share of query terms absent from that corpus (each gets the maximum idf,
    so a high rate inflates the thresholds: fit on a corpus that holds the queries' evidence).
    """
    queries = list(train_queries)
    if not queries:
        raise UserInputError("cannot fit IDF thresholds on zero train queries")
    if max_queries is not None:
        if isinstance(max_queries, bool) or max_queries < 1:
            raise UserInputError(f"max_queries must be >= 1, got {max_queries!r}")
        if len(queries) > max_queries:
            queries = random.Random(seed).sample(queries, max_queries)
    difficulty = _as_difficulty(bm25)
    terms = [t for q in queries for t in dict.fromkeys(tokenize(q))]
    missing = sum(1 for t in terms if difficulty.bm25.document_frequency(t) == 0)
    oov_rate = missing / len(terms) if terms else 0.0
    if oov_rate > OOV_WARNING_RATE:
        logger.warning(
            "%.0f%% of the train query terms are absent from the corpus (maximum idf): the IDF "
            "thresholds are inflated and most queries will look hard. Fit on a corpus holding "
            "the train questions' evidence",
            100 * oov_rate,
        )
    return PercentileThresholds.fit(
        (difficulty(q) for q in queries),
        signal=IDF_SIGNAL,
        harder="lower",
        percentiles=IDF_PERCENTILES,
        source=source,
        details={
            "corpus_size": len(difficulty.bm25),
            "vocabulary_size": difficulty.bm25.vocabulary_size,
            "oov_rate": oov_rate,
        },
    )


def _check_corpus(thresholds: PercentileThresholds, bm25: BM25Index) -> None:
    """Log a warning when ``bm25`` is not the corpus the thresholds were fitted on."""
    size = int(thresholds.details.get("corpus_size", 0))
    vocabulary = int(thresholds.details.get("vocabulary_size", 0))
    if size and (size, vocabulary) != (len(bm25), bm25.vocabulary_size):
        logger.warning(
            "IDF thresholds were fitted on a corpus of %d passages / %d terms but are used "
            "with one of %d / %d: routing decisions may be skewed",
            size,
            vocabulary,
            len(bm25),
            bm25.vocabulary_size,
        )


# --------------------------------------------------------------------------------------------
# Decomposition tier
# --------------------------------------------------------------------------------------------


class DecomposeSearcher(ProvenanceSearchMixin):
    """Searches ``base`` with the query and with each part of
    :func:`~dynakrag.decomposition.split_query`, then fuses the rankings by RRF (keys
    ``"query"``, ``"part1"``, ...). A query with a single part is searched once, as by ``base``.
    """

    def __init__(
        self,
        base: Searcher,
        *,
        k_rrf: float = DEFAULT_K_RRF,
        candidate_k: int | None = None,
        max_parts: int = 4,
        name: str = "hybrid+decompose",
    ) -> None:
        if not callable(getattr(base, "search", None)):
            raise ConfigurationError("DecomposeSearcher needs a base with search(query, k)")
        self.base = base
        self.k_rrf = float(k_rrf)
        self.candidate_k = candidate_k
        self.max_parts = max_parts
        self.name = name

    def sub_queries(self, query: str) -> list[str]:
        """The parts ``query`` is additionally searched with (empty when it is not split)."""
        parts = split_query(query, max_parts=self.max_parts)
        return parts if len(parts) > 1 else []

    def _search_with_provenance(self, query: str, k: int) -> ProvenanceResult:
        """Fused top ``k``; each hit's ``sources`` say which (sub-)query found it."""
        parts = self.sub_queries(query)
        depth = self.candidate_k or fusion_candidate_k(k)
        rankings: dict[str, list[Hit]] = {}
        dropped: list[Dropped] = []
        for key, text in [("query", query), *((f"part{i}", p) for i, p in enumerate(parts, 1))]:
            hits, inner = search_with_provenance(self.base, text, depth)
            dropped.extend({**record, "sub_query": text} for record in inner)
            rankings[key] = hits[:depth]
        hits, fusion_dropped = reciprocal_rank_fusion(rankings, k, k_rrf=self.k_rrf, name=self.name)
        return hits, dropped + fusion_dropped


# --------------------------------------------------------------------------------------------
# Routing
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class RoutedHit(Hit):
    """A :class:`Hit` that also says which tier the router chose and why (the avg IDF)."""

    tier: int = 0
    tier_name: str = ""
    avg_idf: float = 0.0

    @classmethod
    def of(cls, hit: Hit, retriever: str, tier: int, tier_name: str, avg_idf: float) -> RoutedHit:
        """``hit`` as ``retriever`` returns it after routing to ``tier`` (its other fields kept)."""
        kept = {field.name: getattr(hit, field.name) for field in fields(Hit)}
        return cls(
            **{**kept, "retriever": retriever}, tier=tier, tier_name=tier_name, avg_idf=avg_idf
        )

    def to_dict(self) -> HitRecord:
        """:meth:`Hit.to_dict` plus ``"route": {"tier", "tier_name", "avg_idf"}``."""
        data = super().to_dict()
        route: RouteChoice = {
            "tier": self.tier,
            "tier_name": self.tier_name,
            "avg_idf": self.avg_idf,
        }
        data["route"] = route
        return data


class RoutedSearcher(ProvenanceSearchMixin):
    """A :class:`Searcher` that sends each query to a retriever tier by its avg IDF.

    ``tiers`` are ``(name, searcher)`` pairs, cheapest first. Difficulty level ``L`` (from
    ``thresholds``, signal ``"avg_idf"``) runs tier ``min(L, len(tiers) - 1)``. Every search is
    recorded in :attr:`log` (a :class:`~dynakrag.routing.decisions.DecisionLog`, the
    ``max_log`` most recent kept). Hits are :class:`RoutedHit` named ``"<name>:<tier name>"``.
    """

    def __init__(
        self,
        tiers: Sequence[tuple[str, Searcher]],
        thresholds: PercentileThresholds | None,
        bm25: BM25Index | QueryDifficulty,
        *,
        fixed_tier: int | str | None = None,
        name: str | None = None,
        max_log: int = 100_000,
    ) -> None:
        self.tiers: tuple[tuple[str, Searcher], ...] = tuple(tiers)
        check_tier_names([tier_name for tier_name, _ in self.tiers])
        for tier_name, searcher in self.tiers:
            if not callable(getattr(searcher, "search", None)):
                raise ConfigurationError(f"tier {tier_name!r} has no search(query, k) method")
        self.difficulty = _as_difficulty(bm25)
        self.fixed_tier = None if fixed_tier is None else tier_index(self.tier_names, fixed_tier)
        if thresholds is None and self.fixed_tier is None:
            raise ConfigurationError("RoutedSearcher needs thresholds unless a tier is fixed")
        if thresholds is not None:
            if thresholds.signal != IDF_SIGNAL:
                raise ConfigurationError(
                    f"RoutedSearcher needs {IDF_SIGNAL!r} thresholds, got {thresholds.signal!r}"
                )
            _check_corpus(thresholds, self.difficulty.bm25)
        self.thresholds = thresholds
        self.name = name or ("always" if self.fixed_tier is not None else "routed")
        self.log = DecisionLog(self.tier_names, max_log=max_log)

    # --- variants -------------------------------------------------------------------------

    def always(self, tier: int | str) -> RoutedSearcher:
        """The same tiers with ``tier`` (index, negative allowed, or name) for every query."""
        return RoutedSearcher(self.tiers, self.thresholds, self.difficulty, fixed_tier=tier)

    def cheapest(self) -> RoutedSearcher:
        """Baseline "always-cheapest": every query on tier 0."""
        return self.always(0)

    def heaviest(self) -> RoutedSearcher:
        """Baseline "always-heaviest": every query on the last tier."""
        return self.always(-1)

    # --- routing --------------------------------------------------------------------------

    @property
    def tier_names(self) -> tuple[str, ...]:
        """Tier names, cheapest first."""
        return tuple(tier_name for tier_name, _ in self.tiers)

    def tier_for(self, query: str) -> int:
        """The tier index ``query`` is routed to (nothing is searched or logged)."""
        return self._decide(query)[2]

    def _decide(self, query: str) -> tuple[float, int | None, int]:
        avg_idf = self.difficulty(query)
        level = self.thresholds.level(avg_idf) if self.thresholds is not None else None
        if self.fixed_tier is not None:
            return avg_idf, level, self.fixed_tier
        assert level is not None
        return avg_idf, level, min(level, len(self.tiers) - 1)

    def _search_with_provenance(self, query: str, k: int) -> ProvenanceResult:
        """Route ``query``, search its tier, and log the decision."""
        avg_idf, level, tier = self._decide(query)
        tier_name, searcher = self.tiers[tier]
        started = time.perf_counter()
        hits, dropped = search_with_provenance(searcher, query, k, name=tier_name)
        seconds = time.perf_counter() - started
        sub_queries = getattr(searcher, "sub_queries", None)
        fixed = self.fixed_tier is not None
        self.log.record(
            RoutingDecision(
                router="retriever",
                query=query,
                tier=tier,
                tier_name=tier_name,
                signal=IDF_SIGNAL,
                value=avg_idf,
                level=level,
                fixed=fixed,
                reason="fixed tier" if fixed else f"avg IDF {avg_idf:.3g} is level {level}",
                seconds=seconds,
                sub_queries=tuple(sub_queries(query)) if callable(sub_queries) else (),
            )
        )
        label = f"{self.name}:{tier_name}"
        routed = [RoutedHit.of(hit, label, tier, tier_name, avg_idf) for hit in hits]
        return routed, [{**record, "route_tier": tier_name} for record in dropped]


# --------------------------------------------------------------------------------------------
# Building the tiers
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class RetrieverTiers:
    """The four tiers over one corpus, sharing one BM25 and one dense index."""

    bm25: BM25Index
    dense: DenseIndex
    hybrid: HybridRetriever
    decompose: DecomposeSearcher

    @property
    def tiers(self) -> tuple[tuple[str, Searcher], ...]:
        """``(name, searcher)`` pairs, cheapest first (names :data:`TIER_NAMES`)."""
        searchers = (self.bm25, self.dense, self.hybrid, self.decompose)
        return tuple(zip(TIER_NAMES, searchers, strict=True))

    def routed(self, thresholds: PercentileThresholds) -> RoutedSearcher:
        """A :class:`RoutedSearcher` over these tiers."""
        return RoutedSearcher(self.tiers, thresholds, self.bm25)

    @classmethod
    def from_indexes(
        cls,
        bm25: BM25Index,
        dense: DenseIndex,
        *,
        k_rrf: float = DEFAULT_K_RRF,
        max_parts: int = 4,
    ) -> RetrieverTiers:
        """Tiers over already built (or loaded) indexes of the same passages."""
        if [p.id for p in bm25.passages] != [p.id for p in dense.passages]:
            raise CorpusError("the BM25 and dense indexes do not hold the same passages")
        hybrid = HybridRetriever({"bm25": bm25, "dense": dense}, k_rrf=k_rrf, name="hybrid")
        decompose = DecomposeSearcher(hybrid, k_rrf=k_rrf, max_parts=max_parts)
        return cls(bm25=bm25, dense=dense, hybrid=hybrid, decompose=decompose)


def build_tiers(
    passages: Sequence[Passage],
    embeddings: Embeddings,
    *,
    progress: bool = False,
    batch_size: int = 32,
    k_rrf: float = DEFAULT_K_RRF,
    max_parts: int = 4,
) -> RetrieverTiers:
    """Index ``passages`` once (one BM25, one dense index) and build all four tiers on them."""
    bm25 = BM25Index.build(passages, progress=progress)
    dense = DenseIndex.build(passages, embeddings, batch_size=batch_size, progress=progress)
    return RetrieverTiers.from_indexes(bm25, dense, k_rrf=k_rrf, max_parts=max_parts)

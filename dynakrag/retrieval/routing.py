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
    (:func:`split_query`: conjunctions, commas and semicolons outside quotes), fused by RRF
    (:class:`DecomposeSearcher`).

A query's difficulty is the mean BM25 idf of its terms on the corpus (:class:`QueryDifficulty`):
rare terms (entity names) make a specific, easy query; common terms a vague, hard one.
:class:`IDFThresholds` holds the 75th/50th/25th percentiles of that value over *train* queries;
avg IDF >= p75 routes to tier 0 (cheapest), >= p50 to 1, >= p25 to 2, else to 3 (heaviest).
:class:`RoutedSearcher` is a :class:`~dynakrag.retrieval.base.Searcher` doing that routing and
recording each decision (tier, avg IDF, latency) in its hits' provenance and a route log.
"""

from __future__ import annotations

import json
import logging
import math
import random
import re
import threading
import time
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from langchain_core.embeddings import Embeddings

from dynakrag.errors import ConfigurationError, CorpusError, UserInputError
from dynakrag.retrieval.base import Searcher
from dynakrag.retrieval.dense import DenseIndex, _write_atomic
from dynakrag.retrieval.hybrid import (
    DEFAULT_K_RRF,
    HybridRetriever,
    default_candidate_k,
    reciprocal_rank_fusion,
)
from dynakrag.retrieval.lexical import BM25Index, tokenize
from dynakrag.retrieval.passage import Passage
from dynakrag.retrieval.provenance import (
    Dropped,
    Hit,
    ProvenanceResult,
    ProvenanceSearchMixin,
    check_k,
    search_with_provenance,
)

logger = logging.getLogger(__name__)

TIER_NAMES: tuple[str, ...] = ("bm25", "dense", "hybrid", "hybrid+decompose")
"""The retriever tiers of :func:`build_tiers`, cheapest first."""

LEVELS = 4
"""Difficulty levels the three thresholds define (0 = easiest/most specific .. 3 = hardest)."""

THRESHOLDS_FORMAT = "dynakrag.idf_thresholds/1"

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


@dataclass(frozen=True)
class IDFThresholds:
    """Avg-IDF cut points from train queries: ``p75 >= p50 >= p25``.

    :meth:`level` maps an avg IDF to a difficulty level: ``>= p75`` -> 0, ``>= p50`` -> 1,
    ``>= p25`` -> 2, else 3. ``n_queries``, ``source``, ``corpus_size`` and
    ``vocabulary_size`` record what the thresholds were fitted on; ``oov_rate`` is the share
    of train query terms absent from that corpus (each gets the maximum idf, so a high rate
    inflates the thresholds: fit on a corpus that holds the train questions' evidence).
    """

    p75: float
    p50: float
    p25: float
    n_queries: int = 0
    source: str = ""
    corpus_size: int = 0
    vocabulary_size: int = 0
    oov_rate: float = 0.0

    def __post_init__(self) -> None:
        values = (self.p75, self.p50, self.p25)
        if not all(isinstance(v, int | float) and math.isfinite(v) for v in values):
            raise ConfigurationError(f"IDF thresholds must be finite numbers, got {values}")
        if not self.p75 >= self.p50 >= self.p25:
            raise ConfigurationError(f"IDF thresholds must satisfy p75 >= p50 >= p25, got {values}")

    # --- fitting --------------------------------------------------------------------------

    @classmethod
    def fit(
        cls,
        train_queries: Iterable[str],
        bm25: BM25Index | QueryDifficulty,
        *,
        max_queries: int | None = None,
        seed: int = 13,
        source: str = "",
    ) -> IDFThresholds:
        """Percentiles (numpy's default linear interpolation) of the avg IDF of
        ``train_queries`` on ``bm25``'s corpus. Never pass evaluation questions.

        ``max_queries`` fits on a sample of that size drawn with ``seed`` (deterministic).
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
        values = np.asarray([difficulty(q) for q in queries], dtype=np.float64)
        p75, p50, p25 = (float(np.percentile(values, q)) for q in (75, 50, 25))
        terms = [t for q in queries for t in dict.fromkeys(tokenize(q))]
        missing = sum(1 for t in terms if difficulty.bm25.document_frequency(t) == 0)
        oov_rate = missing / len(terms) if terms else 0.0
        if oov_rate > 0.1:
            logger.warning(
                "%.0f%% of the train query terms are absent from the corpus (maximum idf): "
                "the IDF thresholds are inflated and most queries will look hard. Fit on a "
                "corpus holding the train questions' evidence (fit_dataset(..., bm25=None))",
                100 * oov_rate,
            )
        return cls(
            p75=p75,
            p50=p50,
            p25=p25,
            n_queries=len(queries),
            source=source,
            corpus_size=len(difficulty.bm25),
            vocabulary_size=difficulty.bm25.vocabulary_size,
            oov_rate=oov_rate,
        )

    @classmethod
    def fit_dataset(
        cls,
        dataset: str,
        bm25: BM25Index | QueryDifficulty | None = None,
        *,
        limit: int | None = None,
        max_queries: int | None = None,
        seed: int = 13,
    ) -> IDFThresholds:
        """:meth:`fit` on the questions of ``dataset``'s **train** split (never eval rows).

        ``bm25=None`` indexes the train rows' own paragraphs (:func:`~dynakrag.data.datasets.
        open_corpus` of the train examples): use it when the retrieval corpus is built per split
        (distractor/open pools), since train questions' entities are absent from the eval pool.
        Keep ``limit`` near the number of eval questions so both corpora have a similar size
        (idf grows with it).
        """
        from dynakrag.data.datasets import load_examples, open_corpus

        examples = load_examples(dataset, "train", limit=limit)
        if bm25 is None:
            bm25 = BM25Index.build(open_corpus(examples))
        return cls.fit(
            (e.question for e in examples),
            bm25,
            max_queries=max_queries,
            seed=seed,
            source=f"{dataset}/train",
        )

    # --- routing --------------------------------------------------------------------------

    def level(self, avg_idf: float) -> int:
        """Difficulty level of an avg IDF: 0 (>= p75, specific) .. 3 (< p25, vague)."""
        if avg_idf >= self.p75:
            return 0
        if avg_idf >= self.p50:
            return 1
        if avg_idf >= self.p25:
            return 2
        return 3

    def check_corpus(self, bm25: BM25Index) -> None:
        """Log a warning when ``bm25`` is not the corpus the thresholds were fitted on."""
        fitted = (self.corpus_size, self.vocabulary_size)
        if self.corpus_size and fitted != (len(bm25), bm25.vocabulary_size):
            logger.warning(
                "IDF thresholds were fitted on a corpus of %d passages / %d terms but are used "
                "with one of %d / %d: routing decisions may be skewed",
                *fitted,
                len(bm25),
                bm25.vocabulary_size,
            )

    # --- persistence ----------------------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        """JSON-friendly form (with a ``format`` tag)."""
        return {"format": THRESHOLDS_FORMAT, **asdict(self)}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> IDFThresholds:
        """Inverse of :meth:`to_dict`; raises :class:`ConfigurationError` on a bad dict."""
        if not isinstance(data, dict) or data.get("format") != THRESHOLDS_FORMAT:
            raise ConfigurationError(f"not an IDF thresholds object ({THRESHOLDS_FORMAT})")
        try:
            return cls(
                p75=float(data["p75"]),
                p50=float(data["p50"]),
                p25=float(data["p25"]),
                n_queries=int(data.get("n_queries", 0)),
                source=str(data.get("source", "")),
                corpus_size=int(data.get("corpus_size", 0)),
                vocabulary_size=int(data.get("vocabulary_size", 0)),
                oov_rate=float(data.get("oov_rate", 0.0)),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise ConfigurationError(f"invalid IDF thresholds: {exc}") from exc

    def save(self, path: str | Path) -> Path:
        """Write the thresholds as JSON (atomically)."""
        target = Path(path).expanduser()
        target.parent.mkdir(parents=True, exist_ok=True)
        _write_atomic(target, (json.dumps(self.to_dict(), indent=2) + "\n").encode("utf-8"))
        return target

    @classmethod
    def load(cls, path: str | Path) -> IDFThresholds:
        """Read thresholds written by :meth:`save`."""
        source = Path(path).expanduser()
        try:
            data = json.loads(source.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise ConfigurationError(f"cannot read IDF thresholds from {source}: {exc}") from exc
        return cls.from_dict(data)


# --------------------------------------------------------------------------------------------
# Rule-based query decomposition
# --------------------------------------------------------------------------------------------

_SEPARATOR = re.compile(r"[,;]|\b(?:and|or|but)\b", re.IGNORECASE)
_OPENERS = {'"': '"', "“": "”", "'": "'", "‘": "’"}
_STRIP = " \t\n\r?!.:"


def _closes(text: str, j: int, closer: str) -> bool:
    """Whether ``text[j]`` closes a quotation opened with ``closer``'s opener."""
    if text[j] != closer:
        return False
    # A closing single quote followed by a letter is an apostrophe (``'rock'n'roll``).
    return not (closer in "'’" and j + 1 < len(text) and text[j + 1].isalnum())


def _quoted_mask(text: str) -> list[bool]:
    """For each character, whether it lies inside a quotation (linear time).

    Double quotes always open/close. A single quote (``'`` or ``‘``) opens only when not
    preceded by a letter or digit and closes only when not followed by one, so apostrophes
    (``Curie's``, ``don't``) never open a quotation. An unclosed quotation is not a quotation.
    """
    mask = [False] * len(text)
    if not any(char in _OPENERS for char in text):
        return mask
    # next_close[c][i]: the first position >= i closing a quotation of closer c, or -1.
    next_close: dict[str, list[int]] = {}
    for closer in set(_OPENERS.values()):
        positions = [-1] * (len(text) + 1)
        for j in range(len(text) - 1, -1, -1):
            positions[j] = j if _closes(text, j, closer) else positions[j + 1]
        next_close[closer] = positions
    i = 0
    while i < len(text):
        closer = _OPENERS.get(text[i])
        apostrophe = text[i] in "'‘" and i > 0 and text[i - 1].isalnum()
        if closer is not None and not apostrophe:
            end = next_close[closer][i + 1]
            if end != -1:
                for j in range(i, end + 1):
                    mask[j] = True
                i = end + 1
                continue
        i += 1
    return mask


def split_query(query: str, *, max_parts: int = 4) -> list[str]:
    """Cheap rule-based decomposition: ``query`` cut at commas, semicolons and the words
    ``and``/``or``/``but`` that lie outside quotes.

    Parts are stripped of spaces and ``?!.:``; parts without a letter or digit and repeats
    are dropped; at most ``max_parts`` are kept. ``"A and B, 'C and D'"`` gives
    ``["A", "B", "'C and D'"]``. A query with nothing to cut gives itself, stripped.
    """
    if max_parts < 1:
        raise UserInputError(f"max_parts must be >= 1, got {max_parts!r}")
    mask = _quoted_mask(query)
    parts: list[str] = []
    start = 0
    for match in _SEPARATOR.finditer(query):
        if mask[match.start()]:
            continue
        parts.append(query[start : match.start()])
        start = match.end()
    parts.append(query[start:])
    kept: list[str] = []
    for part in parts:
        part = part.strip(_STRIP)
        if any(char.isalnum() for char in part) and part not in kept:
            kept.append(part)
    if not kept:
        return [query.strip(_STRIP)] if query.strip(_STRIP) else []
    return kept[:max_parts]


class DecomposeSearcher(ProvenanceSearchMixin):
    """Searches ``base`` with the query and with each part of :func:`split_query`, then fuses
    the rankings by RRF (keys ``"query"``, ``"part1"``, ...). A query with a single part is
    searched once, as by ``base``.
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

    def search_with_provenance(self, query: str, k: int) -> ProvenanceResult:
        """Fused top ``k``; each hit's ``sources`` say which (sub-)query found it."""
        check_k(k)
        parts = self.sub_queries(query)
        depth = self.candidate_k or default_candidate_k(k)
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

    def to_dict(self) -> dict[str, Any]:
        """:meth:`Hit.to_dict` plus ``"route": {"tier", "tier_name", "avg_idf"}``."""
        data = super().to_dict()
        data["route"] = {"tier": self.tier, "tier_name": self.tier_name, "avg_idf": self.avg_idf}
        return data


@dataclass(frozen=True)
class Route:
    """One routing decision: the query, its avg IDF and difficulty level, the tier run, whether
    the tier was fixed (``always``), the search latency and the sub-queries of a decompose tier.
    """

    query: str
    avg_idf: float
    level: int | None
    tier: int
    tier_name: str
    fixed: bool = False
    seconds: float = 0.0
    sub_queries: tuple[str, ...] = field(default=())

    def to_dict(self) -> dict[str, Any]:
        """JSON-friendly form."""
        data = asdict(self)
        data["sub_queries"] = list(self.sub_queries)
        return data


class RoutedSearcher(ProvenanceSearchMixin):
    """A :class:`Searcher` that sends each query to a retriever tier by its avg IDF.

    ``tiers`` are ``(name, searcher)`` pairs, cheapest first. Difficulty level ``L`` (0..3, from
    ``thresholds``) runs tier ``min(L, len(tiers) - 1)``. Every search is appended to
    :attr:`routes` (thread-safe; ``max_log`` most recent kept); :attr:`last_route` is the
    calling thread's latest. Hits are :class:`RoutedHit` named ``"<name>:<tier name>"``.
    """

    def __init__(
        self,
        tiers: Sequence[tuple[str, Searcher]],
        thresholds: IDFThresholds | None,
        bm25: BM25Index | QueryDifficulty,
        *,
        fixed_tier: int | str | None = None,
        name: str | None = None,
        max_log: int = 100_000,
    ) -> None:
        self.tiers: tuple[tuple[str, Searcher], ...] = tuple(tiers)
        if not self.tiers:
            raise ConfigurationError("RoutedSearcher needs at least one tier")
        names = [tier_name for tier_name, _ in self.tiers]
        if len(set(names)) != len(names) or not all(isinstance(n, str) and n for n in names):
            raise ConfigurationError(f"tier names must be unique non-empty strings, got {names}")
        for tier_name, searcher in self.tiers:
            if not callable(getattr(searcher, "search", None)):
                raise ConfigurationError(f"tier {tier_name!r} has no search(query, k) method")
        self.difficulty = _as_difficulty(bm25)
        self.fixed_tier = None if fixed_tier is None else self._tier_index(fixed_tier)
        if thresholds is None and self.fixed_tier is None:
            raise ConfigurationError("RoutedSearcher needs thresholds unless a tier is fixed")
        self.thresholds = thresholds
        if thresholds is not None:
            thresholds.check_corpus(self.difficulty.bm25)
        self.name = name or ("always" if self.fixed_tier is not None else "routed")
        self.max_log = max_log
        self._log: list[Route] = []
        self._lock = threading.Lock()
        self._local = threading.local()

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

    def _tier_index(self, tier: int | str) -> int:
        if isinstance(tier, str):
            names = [tier_name for tier_name, _ in self.tiers]
            if tier not in names:
                raise ConfigurationError(f"unknown tier {tier!r}; tiers: {names}")
            return names.index(tier)
        if isinstance(tier, bool) or not isinstance(tier, int):
            raise ConfigurationError(f"tier must be an index or a name, got {tier!r}")
        if not -len(self.tiers) <= tier < len(self.tiers):
            raise ConfigurationError(f"tier {tier} out of range for {len(self.tiers)} tiers")
        return tier % len(self.tiers)

    def search_with_provenance(self, query: str, k: int) -> ProvenanceResult:
        """Route ``query``, search its tier, and log the decision."""
        check_k(k)
        avg_idf, level, tier = self._decide(query)
        tier_name, searcher = self.tiers[tier]
        started = time.perf_counter()
        hits, dropped = search_with_provenance(searcher, query, k, name=tier_name)
        seconds = time.perf_counter() - started
        sub_queries = getattr(searcher, "sub_queries", None)
        route = Route(
            query=query,
            avg_idf=avg_idf,
            level=level,
            tier=tier,
            tier_name=tier_name,
            fixed=self.fixed_tier is not None,
            seconds=seconds,
            sub_queries=tuple(sub_queries(query)) if callable(sub_queries) else (),
        )
        self._record(route)
        label = f"{self.name}:{tier_name}"
        routed = [
            RoutedHit(
                passage=hit.passage,
                score=hit.score,
                retriever=label,
                rank=hit.rank,
                sources=hit.sources,
                via=hit.via,
                tier=tier,
                tier_name=tier_name,
                avg_idf=avg_idf,
            )
            for hit in hits
        ]
        return routed, [{**record, "route_tier": tier_name} for record in dropped]

    # --- accounting -----------------------------------------------------------------------

    def _record(self, route: Route) -> None:
        self._local.last = route
        with self._lock:
            self._log.append(route)
            if len(self._log) > self.max_log:
                del self._log[: len(self._log) - self.max_log]

    @property
    def last_route(self) -> Route | None:
        """The latest decision made in the calling thread (None before the first search)."""
        return getattr(self._local, "last", None)

    @property
    def routes(self) -> tuple[Route, ...]:
        """Every logged decision, oldest first."""
        with self._lock:
            return tuple(self._log)

    def tier_counts(self) -> dict[str, int]:
        """How many logged searches each tier ran (every tier listed, cheapest first)."""
        counts = Counter(route.tier_name for route in self.routes)
        return {tier_name: counts.get(tier_name, 0) for tier_name in self.tier_names}

    def clear_log(self) -> None:
        """Forget the logged decisions."""
        with self._lock:
            self._log.clear()
        self._local = threading.local()


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

    def routed(self, thresholds: IDFThresholds) -> RoutedSearcher:
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


__all__ = [
    "LEVELS",
    "TIER_NAMES",
    "DecomposeSearcher",
    "IDFThresholds",
    "QueryDifficulty",
    "RetrieverTiers",
    "Route",
    "RoutedHit",
    "RoutedSearcher",
    "build_tiers",
    "split_query",
]

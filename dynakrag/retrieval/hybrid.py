"""Hybrid retrieval: reciprocal-rank fusion (RRF) of several retrievers, with provenance.

Each retriever ranks its own top ``candidate_k``; a passage's fused score is

    sum over the retrievers that found it of  weight[r] / (k_rrf + rank_r(passage))

(ranks 1-based; Cormack et al., 2009). Only ranks matter, so dense cosines and BM25 scores
need no calibration against each other. Every candidate that does not make the final list is
recorded with the reason, as is which retrievers found each returned passage and where.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from dynakrag.errors import ConfigurationError
from dynakrag.retrieval.base import Searcher
from dynakrag.retrieval.passage import Passage
from dynakrag.retrieval.provenance import (
    Dropped,
    Hit,
    ProvenanceResult,
    ProvenanceSearchMixin,
    check_k,
    search_with_provenance,
)

DEFAULT_K_RRF = 60


def fusion_candidate_k(k: int) -> int:
    """How deep each ranking is read before fusing them into a final ``k``:
    ``max(3 * k, 30)`` (a passage ranked low by one retriever can still win on the sum)."""
    return max(3 * k, 30)


@dataclass
class _Fused:
    passage: Passage
    first_seen: int
    score: float = 0.0
    best_rank: int = 0
    sources: list[tuple[str, int, float]] = field(default_factory=list)
    via: dict[str, None] = field(default_factory=dict)  # insertion-ordered set


def reciprocal_rank_fusion(
    rankings: Mapping[str, Sequence[Hit | tuple[Passage, float]]],
    k: int,
    *,
    k_rrf: float = DEFAULT_K_RRF,
    weights: Mapping[str, float] | None = None,
    name: str = "hybrid",
) -> ProvenanceResult:
    """Fuse ranked lists (best first, keyed by retriever name) into the ``k`` best passages.

    De-duplication is by passage id. Within one list only the first (best) occurrence of a
    passage counts; later ones are dropped as ``"duplicate of <id> from <retriever>"``. Across
    lists occurrences are merged into one hit whose ``sources`` lists each ``(retriever, rank,
    score)``. Ties in fused score go to the better single rank, then to the passage seen first
    (in ``rankings`` order). Fused candidates past ``k`` are dropped as ``"below top-k cutoff
    (fused rank N)"``.
    """
    check_k(k)
    weights = dict(weights or {})
    fused: dict[str, _Fused] = {}
    dropped: list[Dropped] = []
    for retriever, ranking in rankings.items():
        weight = float(weights.get(retriever, 1.0))
        seen_here: set[str] = set()
        for rank, item in enumerate(ranking, start=1):
            if isinstance(item, Hit):
                passage, score, via = item.passage, item.score, item.via
            else:
                passage, score = item
                via = ()
            score = float(score)
            pid = passage.id
            if pid in seen_here:
                dropped.append(
                    {
                        "passage_id": pid,
                        "retriever": retriever,
                        "rank": rank,
                        "score": score,
                        "reason": f"duplicate of {pid} from {retriever}",
                    }
                )
                continue
            seen_here.add(pid)
            entry = fused.get(pid)
            if entry is None:
                entry = fused[pid] = _Fused(passage=passage, first_seen=len(fused), best_rank=rank)
            entry.score += weight / (k_rrf + rank)
            entry.best_rank = min(entry.best_rank, rank)
            entry.sources.append((retriever, rank, score))
            entry.via.update(dict.fromkeys(via))

    ordered = sorted(fused.values(), key=lambda e: (-e.score, e.best_rank, e.first_seen))
    hits: list[Hit] = []
    for fused_rank, entry in enumerate(ordered, start=1):
        if fused_rank <= k:
            hits.append(
                Hit(
                    passage=entry.passage,
                    score=entry.score,
                    retriever=name,
                    rank=fused_rank,
                    sources=tuple(entry.sources),
                    via=tuple(entry.via),
                )
            )
        else:
            dropped.append(
                {
                    "passage_id": entry.passage.id,
                    "retriever": name,
                    "rank": fused_rank,
                    "score": entry.score,
                    "reason": f"below top-k cutoff (fused rank {fused_rank})",
                    "sources": [
                        {"retriever": r, "rank": rank, "score": s} for r, rank, s in entry.sources
                    ],
                }
            )
    return hits, dropped


class HybridRetriever(ProvenanceSearchMixin):
    """Reciprocal-rank fusion over named retrievers (any :class:`Searcher`: dense, BM25,
    parent-document, multi-vector, a LangChain store, another hybrid).

    ``weights`` (default 1.0 each) scale a retriever's contribution; a retriever with weight 0
    is not queried. ``candidate_k`` fixes how deep each retriever is read (default
    :func:`fusion_candidate_k`).
    """

    def __init__(
        self,
        retrievers: Mapping[str, Searcher],
        k_rrf: float = DEFAULT_K_RRF,
        weights: Mapping[str, float] | None = None,
        candidate_k: int | None = None,
        *,
        name: str = "hybrid",
    ) -> None:
        if not retrievers:
            raise ConfigurationError("HybridRetriever needs at least one retriever")
        for key, retriever in retrievers.items():
            if not isinstance(key, str) or not key:
                raise ConfigurationError(f"retriever names must be non-empty strings, got {key!r}")
            if not callable(getattr(retriever, "search", None)):
                raise ConfigurationError(f"retriever {key!r} has no search(query, k) method")
        if not (isinstance(k_rrf, int | float) and math.isfinite(k_rrf) and k_rrf >= 0):
            raise ConfigurationError(f"k_rrf must be a finite number >= 0, got {k_rrf!r}")
        weights = dict(weights or {})
        unknown = sorted(set(weights) - set(retrievers))
        if unknown:
            raise ConfigurationError(
                f"weights name unknown retrievers {unknown}; known: {sorted(retrievers)}"
            )
        for key, weight in weights.items():
            if not (isinstance(weight, int | float) and math.isfinite(weight) and weight >= 0):
                raise ConfigurationError(
                    f"weight of {key!r} must be a finite number >= 0, got {weight!r}"
                )
        if not any(weights.get(key, 1.0) > 0 for key in retrievers):
            raise ConfigurationError("at least one retriever needs a weight above 0")
        if candidate_k is not None and (isinstance(candidate_k, bool) or candidate_k < 1):
            raise ConfigurationError(f"candidate_k must be >= 1, got {candidate_k!r}")
        self.retrievers: dict[str, Searcher] = dict(retrievers)
        self.k_rrf = float(k_rrf)
        self.weights: dict[str, float] = {key: float(weights.get(key, 1.0)) for key in retrievers}
        self.candidate_k = candidate_k
        self.name = name

    def _search_with_provenance(self, query: str, k: int) -> ProvenanceResult:
        """The fused top ``k`` as :class:`Hit` objects, plus every candidate left out (each
        retriever's own drops first, then duplicates and the fused cutoff)."""
        depth = self.candidate_k or fusion_candidate_k(k)
        rankings: dict[str, list[Hit]] = {}
        dropped: list[Dropped] = []
        for key, retriever in self.retrievers.items():
            if self.weights[key] == 0.0:
                continue
            hits, inner_dropped = search_with_provenance(retriever, query, depth, name=key)
            for record in inner_dropped:
                # Name the stage as this hybrid knows it; keep the inner name when it differs.
                inner = record.get("retriever")
                extra = {"inner_retriever": inner} if inner not in (None, key) else {}
                dropped.append({**record, "retriever": key, **extra})
            for rank, hit in enumerate(hits[depth:], start=depth + 1):
                # A searcher that ignores k (e.g. a fixed-size LangChain retriever).
                dropped.append(
                    {
                        "passage_id": hit.passage.id,
                        "retriever": key,
                        "rank": rank,
                        "score": hit.score,
                        "reason": f"beyond candidate_k ({depth}) of {key}",
                    }
                )
            rankings[key] = hits[:depth]
        hits, fusion_dropped = reciprocal_rank_fusion(
            rankings, k, k_rrf=self.k_rrf, weights=self.weights, name=self.name
        )
        return hits, dropped + fusion_dropped

"""The one place a searcher is built by name: :func:`build_searcher`.

``dense``
    :class:`~dynakrag.retrieval.dense.DenseIndex` (MiniLM unless ``embeddings`` are given),
    loaded from ``index_dir`` when one is stored there, else built (and saved there).
``bm25``
    :class:`~dynakrag.retrieval.lexical.BM25Index` (no embeddings needed).
``hybrid``
    Dense and BM25 fused by reciprocal rank (:class:`~dynakrag.retrieval.hybrid.
    HybridRetriever`).
``routed``
    DRAG-QPP: each query goes to the bm25, dense, hybrid or hybrid+decompose tier by its
    average IDF (:class:`~dynakrag.routing.retriever.RoutedSearcher`). Its thresholds are,
    in order of preference: the ``thresholds`` given; else the 25th/50th/75th percentiles of
    the avg IDF of ``train_questions`` on these passages (the paper's way: pass training
    questions, never evaluation ones); else the same percentiles over the corpus itself, with
    each passage's first sentence standing in for a question
    (:func:`~dynakrag.routing.retriever.passage_queries`; at most :data:`MAX_FIT_QUERIES`,
    sampled with ``seed``). Either way the thresholds are fitted on the given passages' BM25
    statistics, so they match the corpus being searched.

A saved dense index (``dense=``, from :func:`open_index`: a FAISS index folder or a pgvector
collection URL) stands in for embedding the passages; BM25 and the other tiers are built over
the same passages, so ``hybrid`` fuses a pgvector collection with BM25 as it fuses FAISS.

This module sits in the routing layer because ``routed`` needs the routers; the CLI, the
evaluation runner, trajectory collection and the benchmarks all build searchers here.
"""

from __future__ import annotations

import contextlib
import hashlib
from collections.abc import Sequence
from pathlib import Path
from typing import get_args

from langchain_core.embeddings import Embeddings

from dynakrag.configuration import RetrieverName
from dynakrag.errors import CorpusError, UserInputError
from dynakrag.retrieval.base import Searcher
from dynakrag.retrieval.dense import DenseIndex
from dynakrag.retrieval.hybrid import HybridRetriever
from dynakrag.retrieval.lexical import BM25Index
from dynakrag.retrieval.passage import Passage
from dynakrag.routing.retriever import RetrieverTiers, fit_idf_thresholds, passage_queries
from dynakrag.routing.thresholds import PercentileThresholds

__all__ = [
    "MAX_FIT_QUERIES",
    "RETRIEVERS",
    "RetrieverName",
    "build_searcher",
    "needs_embeddings",
    "open_index",
    "pool_index_dir",
]

RETRIEVERS: tuple[str, ...] = get_args(RetrieverName)
"""Every retriever :func:`build_searcher` knows, by name."""

MAX_FIT_QUERIES = 2000
"""Most stand-in queries the ``routed`` thresholds are fitted on when fitted on the corpus."""


def needs_embeddings(name: str) -> bool:
    """Whether the retriever ``name`` embeds passages (everything but ``bm25``)."""
    return name != "bm25"


def build_searcher(
    name: str,
    passages: Sequence[Passage],
    *,
    embeddings: Embeddings | None = None,
    index_dir: Path | None = None,
    progress: bool = False,
    thresholds: PercentileThresholds | None = None,
    train_questions: Sequence[str] | None = None,
    seed: int = 13,
    dense: Searcher | None = None,
) -> Searcher:
    """The searcher ``name`` (one of :data:`RETRIEVERS`) over ``passages``.

    ``embeddings``: for every retriever but ``bm25`` (default: MiniLM, created here).
    ``index_dir``: where the dense index is loaded from, or else built and saved to (a cache:
    a stale or damaged one is rebuilt, a failed save ignored). ``progress`` shows the
    embedding bar. ``thresholds``, ``train_questions`` and ``seed`` apply to ``routed`` only
    (see the module docstring). ``dense``: a saved dense index over ``passages``
    (:func:`open_index`), used instead of embedding them.
    """
    if name not in RETRIEVERS:
        raise UserInputError(f"unknown retriever {name!r}; choose one of {', '.join(RETRIEVERS)}")
    if name == "bm25":
        return BM25Index.build(passages)
    if dense is None:
        if embeddings is None:
            from dynakrag.retrieval.embeddings import default_embeddings

            embeddings = default_embeddings()
        dense = _dense_index(passages, embeddings, progress=progress, index_dir=index_dir)
    if name == "dense":
        return dense
    bm25 = BM25Index.build(passages)
    if name == "hybrid":
        return HybridRetriever({"dense": dense, "bm25": bm25})
    if thresholds is None:
        from_questions = train_questions is not None
        thresholds = fit_idf_thresholds(
            list(train_questions) if from_questions else passage_queries(passages),
            bm25,
            max_queries=None if from_questions else MAX_FIT_QUERIES,
            seed=seed,
            source="train questions" if from_questions else "corpus first sentences",
        )
    return RetrieverTiers.from_indexes(bm25, dense).routed(thresholds)


def open_index(location: str | Path, embeddings: Embeddings) -> Searcher:
    """A saved dense index: the pgvector collection at a ``postgresql://...?collection=NAME``
    URL, else the FAISS index folder ``location`` (:class:`CorpusError` if there is none).

    Either has ``passages`` (corpus order) for building BM25 over the same passages; pass it
    to :func:`build_searcher` as ``dense``.
    """
    from dynakrag.postgres.connections import is_postgres_url

    if is_postgres_url(location):
        from dynakrag.retrieval.pgvector import PgVectorIndex

        return PgVectorIndex.open(str(location), embeddings)
    return DenseIndex.load(location, embeddings)


def pool_index_dir(
    cache_dir: Path, name: str, passages: Sequence[Passage], embeddings: Embeddings
) -> Path:
    """Where the dense index of a pool of ``passages`` is kept between runs (``index_dir`` of
    :func:`build_searcher`): keyed by the embedding model and the passage ids, so every run
    that searches the same pool (an eval, a collection) loads it instead of embedding it."""
    from dynakrag.retrieval.dense import model_name_of

    digest = hashlib.sha256(model_name_of(embeddings).encode())
    for passage in passages:
        digest.update(b"\n" + passage.id.encode())
    return cache_dir / "eval-indexes" / f"{name}-{digest.hexdigest()[:16]}"


def _dense_index(
    passages: Sequence[Passage],
    embeddings: Embeddings,
    *,
    progress: bool,
    index_dir: Path | None,
) -> DenseIndex:
    if index_dir is not None and index_dir.is_dir():
        try:
            return DenseIndex.load(index_dir, embeddings)
        except CorpusError:
            pass  # stale or damaged: rebuild below
    index = DenseIndex.build(list(passages), embeddings, progress=progress)
    if index_dir is not None:
        with contextlib.suppress(OSError):  # the cache is an optimisation only
            index.save(index_dir)
    return index

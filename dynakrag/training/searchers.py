"""The searchers a collection's questions search: each question's own passages (the distractor
setting) or one index over a pooled corpus (the open setting)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from dynakrag.data.datasets import QAExample
from dynakrag.errors import UserInputError
from dynakrag.retrieval.base import Searcher
from dynakrag.retrieval.passage import Passage

__all__ = ["collection_searcher_factory", "distractor_searcher_factory"]


def distractor_searcher_factory(
    retriever: str = "bm25", embeddings: Any = None
) -> Callable[[QAExample], Searcher]:
    """Per-example searchers over the example's own passages (the distractor setting).

    ``retriever`` is one of :data:`~dynakrag.routing.factory.RETRIEVERS`, built by
    :func:`~dynakrag.routing.factory.build_searcher` (MiniLM unless ``embeddings`` is given,
    created once for all examples). DS-RAG examples, which have no passages of their own,
    search the chunked DS-RAG corpus (indexed once).
    """
    from dynakrag.routing.factory import RETRIEVERS, build_searcher, needs_embeddings

    if retriever not in RETRIEVERS:
        raise UserInputError(
            f"unknown retriever {retriever!r}; choose one of {', '.join(RETRIEVERS)}"
        )
    shared: dict[str, Searcher] = {}

    def build(passages: Sequence[Passage]) -> Searcher:
        nonlocal embeddings
        if embeddings is None and needs_embeddings(retriever):
            from dynakrag.retrieval.embeddings import default_embeddings

            embeddings = default_embeddings()  # one model for every example
        return build_searcher(retriever, passages, embeddings=embeddings)

    def factory(example: QAExample) -> Searcher:
        if example.passages:
            return build(example.passages)
        if "dsrag" not in shared:
            from dynakrag.data.datasets import dsrag_corpus

            shared["dsrag"] = build(dsrag_corpus())
        return shared["dsrag"]

    return factory


def collection_searcher_factory(
    retriever: str, corpus: Sequence[Passage] | None = None, *, index_root: Path | None = None
) -> Callable[[QAExample], Searcher]:
    """The searcher factory of a collection, in one process or on a worker.

    Without ``corpus`` (the distractor setting) each question searches its own passages
    (:func:`distractor_searcher_factory`). With it (the open setting) every question searches
    one index over the pooled ``corpus``, built when the first question asks for it, so a
    resumed collection with nothing left to do indexes nothing. With ``index_root`` (a cache
    folder) the pool's dense index is kept there and loaded by the next run over the same
    pool (:func:`~dynakrag.routing.factory.pool_index_dir`) instead of embedded again.
    """
    from dynakrag.routing.factory import build_searcher, needs_embeddings, pool_index_dir

    factory = distractor_searcher_factory(retriever)  # checks the retriever's name now
    if corpus is None:
        return factory
    pool = list(corpus)
    built: list[Searcher] = []

    def pooled_searcher(example: QAExample) -> Searcher:
        if not built:
            embeddings, index_dir = None, None
            if needs_embeddings(retriever):
                from dynakrag.retrieval.embeddings import default_embeddings

                embeddings = default_embeddings()
                if index_root is not None:
                    index_dir = pool_index_dir(index_root, "collect", pool, embeddings)
            built.append(
                build_searcher(retriever, pool, embeddings=embeddings, index_dir=index_dir)
            )
        return built[0]

    return pooled_searcher

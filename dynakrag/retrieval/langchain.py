"""Adapters between dynakrag searchers and LangChain retrievers / vector stores.

* :class:`SearcherRetriever` exposes any dynakrag :class:`Searcher` as a LangChain
  ``BaseRetriever`` (usable in LCEL chains, agents, LangChain tooling).
* :class:`LangChainSearcher` turns any LangChain ``VectorStore`` or ``BaseRetriever`` into a
  dynakrag :class:`Searcher`, so a user can plug their own vector store into the graph.
"""

from __future__ import annotations

import hashlib
from typing import Any

from langchain_core.callbacks import CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever
from langchain_core.vectorstores import VectorStore, VectorStoreRetriever
from pydantic import Field

from dynakrag.errors import ConfigurationError
from dynakrag.retrieval.base import Searcher
from dynakrag.retrieval.passage import Passage
from dynakrag.retrieval.provenance import (
    Hit,
    ProvenanceMixin,
    check_k,
    search_with_provenance,
)


def hit_to_document(hit: Hit) -> Document:
    """A LangChain ``Document``: the passage text, with ``id``, ``title``, ``score``,
    ``retriever`` and ``rank`` in the metadata (plus ``parent_id`` and ``via`` when set)."""
    metadata: dict[str, Any] = {
        "id": hit.passage.id,
        "title": hit.passage.title,
        "score": hit.score,
        "retriever": hit.retriever,
        "rank": hit.rank,
    }
    if hit.passage.parent_id is not None:
        metadata["parent_id"] = hit.passage.parent_id
    if hit.via:
        metadata["via"] = list(hit.via)
    return Document(id=hit.passage.id, page_content=hit.passage.text, metadata=metadata)


def document_to_passage(document: Document) -> Passage:
    """A :class:`Passage` from a LangChain ``Document``.

    The id is the document's ``id``, else its ``metadata["id"]``, else ``lc-`` plus a hash of
    its text (stable, so the same text de-duplicates in a hybrid). ``title`` and ``parent_id``
    come from the metadata when present.
    """
    metadata = document.metadata or {}
    pid = document.id or metadata.get("id")
    if pid is None or str(pid) == "":
        digest = hashlib.sha256(document.page_content.encode("utf-8")).hexdigest()[:16]
        pid = f"lc-{digest}"
    title = metadata.get("title")
    parent = metadata.get("parent_id")
    return Passage(
        id=str(pid),
        title="" if title is None else str(title),
        text=document.page_content,
        parent_id=None if parent is None else str(parent),
    )


class SearcherRetriever(BaseRetriever):
    """A LangChain retriever over any dynakrag :class:`Searcher` (dense, BM25, hybrid, views).

    ``invoke(query)`` returns the ``k`` best passages as documents (see
    :func:`hit_to_document`); ``metadata["retriever"]``/``["rank"]`` are the searcher's own
    provenance when it records one.
    """

    searcher: Any
    """The wrapped searcher (anything with ``search(query, k)``)."""
    k: int = Field(default=4, ge=1)
    """How many documents a call returns."""

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun
    ) -> list[Document]:
        hits, _ = search_with_provenance(self.searcher, query, self.k)
        return [hit_to_document(hit) for hit in hits]


class LangChainSearcher(ProvenanceMixin):
    """A dynakrag :class:`Searcher` over a LangChain ``VectorStore`` or ``BaseRetriever``.

    Vector stores (and a similarity-type ``VectorStoreRetriever``, unwrapped to its store with
    its ``search_kwargs`` kept) are asked for exactly ``k`` results, preferring
    ``similarity_search_with_relevance_scores`` (scores in [0, 1], higher is better), then
    ``similarity_search_with_score`` (the store's own score: some stores return a distance,
    lower is better; the store's order is kept either way), then ``similarity_search`` with
    rank-based scores. Any other retriever is ``invoke``-d and its first ``k`` documents scored
    ``1 / rank``. ``score_kind`` tells which applied on the last search (``"relevance"``,
    ``"store"`` or ``"rank"``). A :class:`SearcherRetriever` is unwrapped to its searcher.
    """

    def __init__(self, source: VectorStore | BaseRetriever, *, name: str | None = None) -> None:
        self._store: VectorStore | None = None
        self._store_kwargs: dict[str, Any] = {}
        self._retriever: BaseRetriever | None = None
        self._searcher: Searcher | None = None
        if isinstance(source, SearcherRetriever):
            self._searcher = source.searcher
        elif isinstance(source, VectorStoreRetriever) and source.search_type == "similarity":
            self._store = source.vectorstore
            self._store_kwargs = {k: v for k, v in source.search_kwargs.items() if k != "k"}
        elif isinstance(source, VectorStore):
            self._store = source
        elif isinstance(source, BaseRetriever):
            self._retriever = source
        else:
            raise ConfigurationError(
                "LangChainSearcher needs a LangChain VectorStore or BaseRetriever, got "
                f"{type(source).__name__}"
            )
        self.source = source
        self.name = name or f"langchain:{type(source).__name__}"
        self.score_kind: str | None = None
        self._store_mode: str | None = None  # the first store method found to work

    def search(self, query: str, k: int) -> list[tuple[Passage, float]]:
        """The ``k`` best passages for ``query``, best first (see the class docstring)."""
        check_k(k)
        if self._searcher is not None:
            self.score_kind = "searcher"
            return list(self._searcher.search(query, k))[:k]
        if self._store is not None:
            pairs = self._search_store(query, k)
        else:
            assert self._retriever is not None
            documents = list(self._retriever.invoke(query))[:k]
            pairs = [(doc, 1.0 / rank) for rank, doc in enumerate(documents, start=1)]
            self.score_kind = "rank"
        return [(document_to_passage(doc), float(score)) for doc, score in pairs[:k]]

    def _search_store(self, query: str, k: int) -> list[tuple[Document, float]]:
        assert self._store is not None
        store, kwargs = self._store, self._store_kwargs
        if self._store_mode in (None, "relevance"):
            try:
                pairs = store.similarity_search_with_relevance_scores(query, k=k, **kwargs)
            except NotImplementedError:
                self._store_mode = "store"
            else:
                self._store_mode = self.score_kind = "relevance"
                return list(pairs)
        if self._store_mode == "store":
            try:
                pairs = store.similarity_search_with_score(query, k=k, **kwargs)
            except NotImplementedError:
                self._store_mode = "rank"
            else:
                self.score_kind = "store"
                return list(pairs)
        documents = store.similarity_search(query, k=k, **kwargs)
        self.score_kind = "rank"
        return [(doc, 1.0 / rank) for rank, doc in enumerate(documents, start=1)]

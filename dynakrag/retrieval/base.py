"""The retrieval interface the actions depend on."""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from dynakrag.retrieval.passage import Passage


@runtime_checkable
class Searcher(Protocol):
    """Anything that ranks passages for a query (a dense index, BM25, a hybrid, ...)."""

    def search(self, query: str, k: int) -> list[tuple[Passage, float]]:
        """The ``k`` best passages for ``query``, best first, with their scores."""
        ...

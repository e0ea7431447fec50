"""Provenance of retrieved passages: which retriever found what, at which rank, and why a
candidate was dropped.

Every dynakrag retriever has ``search_with_provenance(query, k) -> (hits, dropped)``; for any
other :class:`~dynakrag.retrieval.base.Searcher` (e.g. :class:`DenseIndex` or a user's own),
the module-level :func:`search_with_provenance` derives the same answer from ``search``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, TypedDict

from dynakrag.errors import UserInputError
from dynakrag.retrieval.base import Searcher
from dynakrag.retrieval.passage import Passage
from dynakrag.state import RetrieverRank, RouteChoice

Dropped = dict[str, Any]
"""A candidate left out of the results: ``{"passage_id", "retriever", "rank", "score",
"reason", ...}`` (plain JSON values, ready for graph state or a trace)."""

ProvenanceResult = tuple[list["Hit"], list[Dropped]]


class HitRecord(TypedDict, total=False):
    """:meth:`Hit.to_dict`: the passage's fields flattened, with its provenance; ``parent_id``,
    ``via`` and ``route`` only where they apply."""

    id: str
    title: str
    text: str
    score: float
    retriever: str
    rank: int
    sources: list[RetrieverRank]
    parent_id: str
    via: list[str]
    route: RouteChoice


@dataclass(frozen=True)
class Hit:
    """One retrieved passage with where it came from.

    ``score`` and ``rank`` (1-based) are those of the retriever that returned the hit
    (``retriever``); ``sources`` lists every underlying retriever that found the passage as
    ``(name, rank, score)``; ``via`` names the indexed units that matched when those differ
    from the passage returned (child chunks of a parent, title/sentence/body views), best first.
    """

    passage: Passage
    score: float
    retriever: str
    rank: int
    sources: tuple[tuple[str, int, float], ...]
    via: tuple[str, ...] = ()

    def to_dict(self) -> HitRecord:
        """JSON-friendly form (passage fields flattened), e.g. for graph state or traces."""
        sources: list[RetrieverRank] = [
            {"retriever": name, "rank": rank, "score": score} for name, rank, score in self.sources
        ]
        data: HitRecord = {
            "id": self.passage.id,
            "title": self.passage.title,
            "text": self.passage.text,
            "score": self.score,
            "retriever": self.retriever,
            "rank": self.rank,
            "sources": sources,
        }
        if self.passage.parent_id is not None:
            data["parent_id"] = self.passage.parent_id
        if self.via:
            data["via"] = list(self.via)
        return data


def check_k(k: int) -> None:
    """Reject a non-positive ``k`` the way every dynakrag searcher does."""
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise UserInputError(f"k must be an integer >= 1, got {k!r}")


def searcher_name(searcher: object) -> str:
    """A short name for ``searcher``: its ``name`` attribute, else its lower-cased class name."""
    name = getattr(searcher, "name", None)
    if isinstance(name, str) and name:
        return name
    cls = type(searcher).__name__
    return {"DenseIndex": "dense", "BM25Index": "bm25"}.get(cls, cls.lower())


def hits_from_ranking(ranking: Sequence[tuple[Passage, float]], retriever: str) -> list[Hit]:
    """Wrap a plain ``search`` result (best first) as hits ranked 1..n by ``retriever``."""
    return [
        Hit(
            passage=passage,
            score=float(score),
            retriever=retriever,
            rank=rank,
            sources=((retriever, rank, float(score)),),
        )
        for rank, (passage, score) in enumerate(ranking, start=1)
    ]


def search_with_provenance(
    searcher: Searcher, query: str, k: int, *, name: str | None = None
) -> ProvenanceResult:
    """``(hits, dropped)`` for any searcher: its own ``search_with_provenance`` when it has one,
    otherwise its ``search`` results as hits (named ``name`` or :func:`searcher_name`) with
    nothing dropped."""
    own = getattr(searcher, "search_with_provenance", None)
    if callable(own):
        hits, dropped = own(query, k)
        return list(hits), list(dropped)
    return hits_from_ranking(searcher.search(query, k), name or searcher_name(searcher)), []


class ProvenanceMixin:
    """Gives a searcher whose ``search`` is primary a ``search_with_provenance``.

    Subclasses set ``name`` (class attribute or per instance).
    """

    name: str = "searcher"

    def search(self, query: str, k: int) -> list[tuple[Passage, float]]:  # pragma: no cover
        raise NotImplementedError

    def search_with_provenance(self, query: str, k: int) -> ProvenanceResult:
        """Results of ``search`` as :class:`Hit` objects; a plain searcher drops nothing."""
        return hits_from_ranking(self.search(query, k), self.name), []


class ProvenanceSearchMixin:
    """The converse of :class:`ProvenanceMixin`, for retrievers whose provenance search is
    primary (``_search_with_provenance``, called with a checked ``k``): ``search`` is
    ``search_with_provenance`` without the bookkeeping."""

    name: str = "searcher"

    def search_with_provenance(self, query: str, k: int) -> ProvenanceResult:
        """The ``k`` best passages for ``query`` as hits, and the candidates left out."""
        check_k(k)
        return self._search_with_provenance(query, k)

    def _search_with_provenance(self, query: str, k: int) -> ProvenanceResult:  # pragma: no cover
        raise NotImplementedError

    def search(self, query: str, k: int) -> list[tuple[Passage, float]]:
        """The ``k`` best passages for ``query``, best first, with their scores."""
        hits, _ = self.search_with_provenance(query, k)
        return [(hit.passage, hit.score) for hit in hits]

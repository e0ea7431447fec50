"""Search small, read large: parent-document and multi-vector retrieval.

Both index *units* (child chunks, or title / first-sentence / body views) that point to a
parent passage through ``parent_id``, search the units, and return each parent once, scored by
its best-ranked unit, with the matching unit ids in :attr:`Hit.via`.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence

from dynakrag.errors import ConfigurationError, CorpusError
from dynakrag.retrieval.base import Searcher
from dynakrag.retrieval.corpus import chunk_text
from dynakrag.retrieval.passage import Passage
from dynakrag.retrieval.provenance import (
    Dropped,
    Hit,
    ProvenanceResult,
    ProvenanceSearchMixin,
    search_with_provenance,
    searcher_name,
)

IndexFactory = Callable[[list[Passage]], Searcher]
"""Builds a searcher over passages, e.g. ``BM25Index.build`` or
``lambda ps: DenseIndex.build(ps, embeddings, progress=False)``."""

ViewFunction = Callable[[Passage], "str | Sequence[str] | None"]
"""Text(s) of one view of a parent passage; empty or ``None`` means no such view."""

_MAX_WIDENING = 64
"""Units are read at most this many times deeper than at first while looking for k parents."""

_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[\"'(\[]?[A-Z0-9])")
_LAST_WORD = re.compile(r"(\S+)\.$")
# A period after these (or after a single letter, an initial) does not end a sentence.
_ABBREVIATIONS: frozenset[str] = frozenset(
    "mr mrs ms dr prof st jr sr vs no nos co inc ltd corp gen col lt sgt rev hon fig approx "
    "jan feb mar apr jun jul aug sep sept oct nov dec mt ft e.g i.e etc".split()
)


def unit_candidate_k(k: int) -> int:
    """How many child units (chunks, views) are read first to find ``k`` parents:
    ``max(4 * k, 40)``, deeper than :func:`~dynakrag.retrieval.hybrid.fusion_candidate_k`
    because several units share a parent (doubled while too few parents were found)."""
    return max(4 * k, 40)


def split_into_children(
    passages: Sequence[Passage], chunk_words: int = 100, overlap: int = 20
) -> list[Passage]:
    """Cut each passage into word windows (:func:`chunk_text`) as child passages.

    Child ids are ``<parent id>::chunk<N>``; each keeps its parent's title (context for the
    embedding) and has ``parent_id`` set to the parent's id.
    """
    chunk_text("", chunk_words, overlap)  # validate the options even for an empty list
    children: list[Passage] = []
    for parent in passages:
        for number, chunk in enumerate(chunk_text(parent.text, chunk_words, overlap)):
            children.append(
                Passage(
                    id=f"{parent.id}::chunk{number}",
                    title=parent.title,
                    text=chunk,
                    parent_id=parent.id,
                )
            )
    return children


def _parent_map(parents: Sequence[Passage] | Mapping[str, Passage]) -> dict[str, Passage]:
    if isinstance(parents, Mapping):
        return dict(parents)
    mapping: dict[str, Passage] = {}
    for parent in parents:
        if parent.id in mapping:
            raise CorpusError(f"duplicate parent passage id {parent.id!r}")
        mapping[parent.id] = parent
    return mapping


class ParentDocumentRetriever(ProvenanceSearchMixin):
    """Searches child units and returns their parents, each parent once.

    ``searcher_over_children`` ranks passages whose ``parent_id`` is a key of ``parents``. A
    parent's score is the score of its best-ranked child; parents are ordered by that child's
    rank. Children whose parent is unknown, and further children of a parent already found,
    are recorded as dropped. Units are read ``candidate_k`` deep (default
    :func:`unit_candidate_k`), doubling until ``k`` parents are found or the child searcher
    runs out.
    """

    def __init__(
        self,
        searcher_over_children: Searcher,
        parents: Mapping[str, Passage] | Sequence[Passage],
        *,
        name: str = "parent",
        candidate_k: int | None = None,
    ) -> None:
        if candidate_k is not None and (isinstance(candidate_k, bool) or candidate_k < 1):
            raise ConfigurationError(f"candidate_k must be >= 1, got {candidate_k!r}")
        self.searcher = searcher_over_children
        self.parents: dict[str, Passage] = _parent_map(parents)
        self.name = name
        self.candidate_k = candidate_k

    @classmethod
    def from_passages(
        cls,
        passages: Sequence[Passage],
        index_factory: IndexFactory,
        *,
        chunk_words: int = 100,
        overlap: int = 20,
        name: str = "parent",
        candidate_k: int | None = None,
    ) -> ParentDocumentRetriever:
        """Split ``passages`` into children, index them with ``index_factory``, and return
        the passages themselves as parents."""
        parents = _parent_map(passages)
        children = split_into_children(list(parents.values()), chunk_words, overlap)
        if not children:
            raise CorpusError("no passage has any text to split into children")
        return cls(index_factory(children), parents, name=name, candidate_k=candidate_k)

    def _search_with_provenance(self, query: str, k: int) -> ProvenanceResult:
        """The ``k`` best parents as hits (``via``: matching child ids, best first) and the
        dropped children / parents with reasons."""
        depth = self.candidate_k or unit_candidate_k(k)
        max_depth = depth * _MAX_WIDENING
        unit_source = searcher_name(self.searcher)
        while True:
            units, inner_dropped = search_with_provenance(
                self.searcher, query, depth, name=unit_source
            )
            if len(units) < depth or depth >= max_depth or self._count_parents(units) >= k:
                break
            depth *= 2
        return self._group(units, k, unit_source, list(inner_dropped))

    def _count_parents(self, units: Sequence[Hit]) -> int:
        return len({u.passage.parent_id for u in units if u.passage.parent_id in self.parents})

    def _group(
        self, units: Sequence[Hit], k: int, unit_source: str, dropped: list[Dropped]
    ) -> ProvenanceResult:
        groups: dict[str, tuple[Hit, list[str]]] = {}  # parent id -> (best unit, unit ids)
        for rank, unit in enumerate(units, start=1):
            unit_id, parent_id = unit.passage.id, unit.passage.parent_id
            record = {"passage_id": unit_id, "retriever": unit_source, "rank": rank}
            if parent_id is None or parent_id not in self.parents:
                dropped.append(
                    {
                        **record,
                        "score": unit.score,
                        "parent_id": parent_id,
                        "reason": f"no parent passage {parent_id!r} for {unit_id}",
                    }
                )
                continue
            if parent_id in groups:
                best, unit_ids = groups[parent_id]
                unit_ids.append(unit_id)
                dropped.append(
                    {
                        **record,
                        "score": unit.score,
                        "parent_id": parent_id,
                        "reason": f"duplicate of {parent_id} from {best.passage.id}",
                    }
                )
                continue
            # Re-rank the unit 1..n in this list: the inner retriever may number differently.
            groups[parent_id] = (
                Hit(unit.passage, unit.score, unit.retriever, rank, unit.sources, unit.via),
                [unit_id],
            )

        hits: list[Hit] = []
        for parent_rank, (parent_id, (best, unit_ids)) in enumerate(groups.items(), start=1):
            if parent_rank > k:
                dropped.append(
                    {
                        "passage_id": parent_id,
                        "retriever": self.name,
                        "rank": parent_rank,
                        "score": best.score,
                        "reason": f"below top-k cutoff (parent rank {parent_rank})",
                        "via": unit_ids,
                    }
                )
                continue
            hits.append(
                Hit(
                    passage=self.parents[parent_id],
                    score=best.score,
                    retriever=self.name,
                    rank=parent_rank,
                    sources=((unit_source, best.rank, best.score),),
                    via=tuple(unit_ids),
                )
            )
        return hits, dropped


def first_sentence(passage: Passage) -> str:
    """The passage text up to its first sentence end: ``.``, ``!`` or ``?`` followed by a
    capital or digit, not after an initial or a common abbreviation (``Dr.``, ``St.``); the
    whole text when it is one sentence."""
    text = " ".join(passage.text.split())
    for boundary in _SENTENCE_END.finditer(text):
        head = text[: boundary.start()]
        last = _LAST_WORD.search(head)
        if last is not None:
            word = last.group(1).lower().lstrip("\"'([")
            if len(word) == 1 or word in _ABBREVIATIONS:
                continue
        return head
    return text


def chunked_body(chunk_words: int = 100, overlap: int = 20) -> ViewFunction:
    """A body view that cuts long texts into word windows (one unit per window)."""
    chunk_text("", chunk_words, overlap)  # validate now, not at index time

    def view(passage: Passage) -> list[str]:
        return chunk_text(passage.text, chunk_words, overlap)

    return view


DEFAULT_VIEWS: Mapping[str, ViewFunction] = {
    "title": lambda passage: passage.title,
    "first_sentence": first_sentence,
    "body": lambda passage: passage.text,
}
"""Title, first sentence and body: the views :class:`MultiVectorRetriever` builds by default."""


def build_views(
    parents: Sequence[Passage], views: Mapping[str, ViewFunction] = DEFAULT_VIEWS
) -> list[Passage]:
    """One passage per (parent, view text): id ``<parent id>::<view>`` (``::<view><N>`` when a
    view gives several texts), ``parent_id`` set, no title (so a title-aware index embeds each
    view's own text only). Empty views and a view repeating an earlier view's text for the same
    parent (e.g. a one-sentence body) are skipped.
    """
    units: list[Passage] = []
    for parent in parents:
        seen: set[str] = set()
        for view_name, view in views.items():
            texts = view(parent)
            if texts is None:
                continue
            many = not isinstance(texts, str)
            for number, text in enumerate([texts] if isinstance(texts, str) else texts):
                normalised = " ".join(text.split())
                if not normalised or normalised in seen:
                    continue
                seen.add(normalised)
                suffix = f"{view_name}{number}" if many else view_name
                units.append(
                    Passage(id=f"{parent.id}::{suffix}", title="", text=text, parent_id=parent.id)
                )
    return units


class MultiVectorRetriever(ParentDocumentRetriever):
    """Indexes several views of each parent (by default title, first sentence, body) with
    ``index_factory`` and returns parents, each once, with the matching view ids in ``via``.

    Extra views (an LLM summary, hypothetical questions) are functions added to ``views``.
    """

    def __init__(
        self,
        parents: Sequence[Passage],
        index_factory: IndexFactory,
        *,
        views: Mapping[str, ViewFunction] = DEFAULT_VIEWS,
        name: str = "multivector",
        candidate_k: int | None = None,
    ) -> None:
        if not views:
            raise ConfigurationError("MultiVectorRetriever needs at least one view")
        parent_map = _parent_map(parents)
        self.views: tuple[Passage, ...] = tuple(build_views(list(parent_map.values()), views))
        if not self.views:
            raise CorpusError("no parent passage has any non-empty view to index")
        super().__init__(
            index_factory(list(self.views)), parent_map, name=name, candidate_k=candidate_k
        )

"""Dynamic Input Context Selection (DICS, paper Section 2.3.2): one chunk per criterion.

:func:`dics_select` scores every selection criterion against every retrieved chunk with the GS
selector (cosine of the criterion's graph embedding and the projected chunk embedding) and
keeps one chunk per criterion, so the context grows with the number of criteria, not with a
fixed top-K.

Rules
    * Candidates are de-duplicated by id first (the same chunk retrieved by several
      sub-questions counts once; its first position is kept).
    * Distinct chunks: criteria are served in order of their best similarity (most confident
      first, ties by criterion order); when two criteria want the same chunk, the less similar
      one takes its best unused chunk. Only when there are more criteria than chunks does a
      criterion share a chunk (``DicsChoice.shared``); the context then holds every chunk once.
    * A criterion whose graph is malformed is dropped (named in ``reason``).

Fallbacks (never raise)
    * No candidate chunks: an empty selection, ``mode="empty"``.
    * No usable criteria: the ``fallback_k`` (default 4, the paper's reranking top-K for 2-4
      gold chunks a question) chunks most similar to ``question`` by plain text cosine
      (``mode="question"``), or the first ``fallback_k`` in retrieval order when no question
      is given (``mode="order"``).
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import Literal, Protocol

import numpy as np

from dynakrag.dsrag.selector import assign_chunks
from dynakrag.dsrag.selector_graphs import check_graph
from dynakrag.dsrag.types import Criterion, CriterionGraph

__all__ = ["DEFAULT_FALLBACK_K", "ChunkScorer", "DicsChoice", "DicsResult", "dics_select"]

DEFAULT_FALLBACK_K = 4
"""Chunks kept when a question yields no criteria (the paper's top-K for its baselines)."""

DicsMode = Literal["criteria", "question", "order", "empty"]


class ChunkScorer(Protocol):
    """What DICS needs from a selector (:class:`~dynakrag.dsrag.selector.GraphSelector`)."""

    def score(
        self, criteria_graphs: Sequence[CriterionGraph], chunk_texts: Sequence[str]
    ) -> np.ndarray: ...

    def text_similarity(self, query: str, texts: Sequence[str]) -> np.ndarray: ...


@dataclass(frozen=True)
class DicsChoice:
    """One chosen chunk: for criterion ``criterion`` (None in a fallback), the candidate at
    ``index`` (after de-duplication) with similarity ``score``."""

    criterion: int | None
    chunk_id: Hashable
    index: int
    score: float
    shared: bool = False


@dataclass(frozen=True)
class DicsResult:
    """The selected context: ``chunks`` (id, text) in selection order, each once."""

    chunks: tuple[tuple[Hashable, str], ...]
    choices: tuple[DicsChoice, ...]
    mode: DicsMode
    reason: str = ""

    @property
    def chunk_ids(self) -> tuple[Hashable, ...]:
        return tuple(chunk_id for chunk_id, _ in self.chunks)

    @property
    def texts(self) -> tuple[str, ...]:
        return tuple(text for _, text in self.chunks)

    def __len__(self) -> int:
        return len(self.chunks)


def dics_select(
    criteria: Sequence[Criterion],
    chunks: Sequence[tuple[Hashable, str]],
    selector: ChunkScorer,
    *,
    question: str | None = None,
    fallback_k: int = DEFAULT_FALLBACK_K,
) -> DicsResult:
    """Choose one distinct chunk per criterion from ``chunks`` (``(id, text)`` pairs); see the
    module doc for the rules and fallbacks."""
    first: dict[Hashable, tuple[Hashable, str]] = {}
    for chunk_id, text in chunks:
        first.setdefault(chunk_id, (chunk_id, text))  # first occurrence wins, in order
    unique = list(first.values())
    if not unique:
        return DicsResult((), (), "empty", "no candidate chunks were retrieved")
    graphs: list[CriterionGraph] = []
    kept: list[int] = []
    dropped: list[str] = []
    for i, criterion in enumerate(criteria):
        try:
            graph = criterion.as_graph()
            check_graph(graph)
        except (KeyError, ValueError, AttributeError) as exc:
            dropped.append(f"criterion {i} ({type(exc).__name__}: {exc})")
            continue
        graphs.append(graph)
        kept.append(i)
    note = f"; dropped malformed {', '.join(dropped)}" if dropped else ""
    texts = [text for _, text in unique]
    if not graphs:
        return _fallback(unique, texts, selector, question, fallback_k, note)
    scores = selector.score(graphs, texts)
    choices = []
    for row, (column, shared) in enumerate(assign_chunks(scores)):
        choices.append(
            DicsChoice(
                criterion=kept[row],
                chunk_id=unique[column][0],
                index=column,
                score=float(scores[row, column]),
                shared=shared,
            )
        )
    selected = list(dict.fromkeys(choice.index for choice in choices))
    return DicsResult(
        tuple(unique[j] for j in selected),
        tuple(choices),
        "criteria",
        f"one chunk for each of {len(graphs)} criteria{note}",
    )


def _fallback(
    unique: Sequence[tuple[Hashable, str]],
    texts: Sequence[str],
    selector: ChunkScorer,
    question: str | None,
    fallback_k: int,
    note: str,
) -> DicsResult:
    k = max(0, min(fallback_k, len(unique)))
    if question and question.strip():
        sims = np.asarray(selector.text_similarity(question, texts), dtype=np.float64)
        order = [int(j) for j in np.argsort(-sims, kind="stable")[:k]]
        mode: DicsMode = "question"
        why = f"no usable criteria: the {k} chunks most similar to the question{note}"
    else:
        sims = np.zeros(len(unique))
        order = list(range(k))
        mode = "order"
        why = f"no usable criteria and no question: the first {k} chunks retrieved{note}"
    choices = tuple(
        DicsChoice(criterion=None, chunk_id=unique[j][0], index=j, score=float(sims[j]))
        for j in order
    )
    return DicsResult(tuple(unique[j] for j in order), choices, mode, why)

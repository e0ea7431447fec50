"""Searching for evidence: one search, the unseen passages it adds and its frontier statistics.

The frontier statistics (how deep the search went, how many unseen candidates are left, score
margins) are what the policy features read to judge whether another search is worth it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from dynakrag.actions.bridge_entities import detect_bridge_entities
from dynakrag.actions.chain import note_search
from dynakrag.actions.common import Resources, action_update
from dynakrag.actions.statements import names_entity
from dynakrag.configuration import Configuration
from dynakrag.llm.client import NO_USAGE, Usage
from dynakrag.retrieval.provenance import search_with_provenance
from dynakrag.state import Document, FrontierStats, State, StateUpdate, TraceDetails


def acquire(
    state: State,
    resources: Resources,
    cfg: Configuration,
    query: str,
    action: str,
    names: Sequence[str] = (),
) -> tuple[list[Document], FrontierStats]:
    """Search ``query`` and take the best ``docs_per_action`` passages not yet in evidence.

    With ``names`` (the entities a hop asks about) the candidates that name one of them exactly
    come first, in their ranked order: a dense retriever ranks look-alike names (Ambelwyn,
    Ambelstead) and namesakes ("Kenton Terry Richardson" for Terry Richardson) close together,
    and only the exact one is the hop's entity. (Putting the entity's own passage first
    instead found fewer hop passages on MuSiQue train rows: benchmarks/hop_retrieval.py.)
    Returns the new documents and the frontier statistics of this search.
    """
    seen = {doc["id"] for doc in state.get("evidence", [])}
    hits, dropped = search_with_provenance(resources.searcher, query, cfg.frontier_depth)
    if names:
        hits = sorted(hits, key=lambda hit: nearness(hit.passage, names))
    step = len(state.get("trace", [])) + 1
    added: list[Document] = []
    depth_reached = 0
    for rank, hit in enumerate(hits, start=1):
        if hit.passage.id in seen:
            continue
        if len(added) == cfg.docs_per_action:
            break
        seen.add(hit.passage.id)
        depth_reached = rank
        provenance = hit.to_dict()
        added.append(
            Document(
                id=hit.passage.id,
                title=hit.passage.title,
                text=hit.passage.text,
                score=float(hit.score),
                query=query,
                action=action,
                step=step,
                retriever=hit.retriever,
                rank=rank,
                sources=provenance["sources"],
            )
        )
        if "route" in provenance:  # a routed searcher records its tier and avg IDF
            added[-1]["route"] = provenance["route"]
    scores = [float(hit.score) for hit in hits]
    unseen_left = sum(1 for hit in hits if hit.passage.id not in seen)
    frontier: FrontierStats = {
        "exhausted": unseen_left == 0,
        "query": query,
        "candidates": len(hits),
        "depth_reached": depth_reached,
        "unseen_left": unseen_left,
        "top_score": scores[0] if scores else 0.0,
        "added_mean_score": (sum(d["score"] for d in added) / len(added)) if added else 0.0,
        "margin": (scores[0] - scores[1]) if len(scores) > 1 else 0.0,
        "dropped": len(dropped),
    }
    return added, frontier


def nearness(passage: Any, names: Sequence[str]) -> int:
    """0 for a passage that names one of ``names`` (in a namesake's passage, standing alone:
    :func:`~dynakrag.actions.statements.names_entity`), else 1."""
    doc = Document(id=passage.id, title=passage.title, text=passage.text)
    text = f"{passage.title} {passage.text}"
    return 0 if any(names_entity(doc, text, name) for name in names) else 1


def acquisition_update(
    state: State,
    resources: Resources,
    cfg: Configuration,
    action: str,
    search_query: str,
    *,
    usage: Usage = NO_USAGE,
    details: TraceDetails | None = None,
    names: Sequence[str] = (),
    **changes: Any,
) -> StateUpdate:
    """Search, extend the evidence, refresh bridge entities and report the step.

    ``names``: entities whose passages come first (see :func:`acquire`); ``changes`` are
    further state updates of the action (e.g. a new ``query``). With a chain of hops the
    search is recorded as one of the next open hop's searches.
    """
    added, frontier = acquire(state, resources, cfg, search_query, action, names)
    if state.get("hops"):
        changes.setdefault("hops", note_search(state["hops"], search_query))
    evidence = [*state.get("evidence", []), *added]
    exhausted = list(state.get("exhausted_queries", []))
    if frontier["exhausted"] and search_query not in exhausted:
        changes.setdefault("exhausted_queries", [*exhausted, search_query])
    bridges = detect_bridge_entities(state["question"], evidence, state.get("sub_questions", []))
    return action_update(
        state,
        action,
        usage=usage,
        retrieval_calls=1,
        added=added,
        details={"search_query": search_query, **(details or {})},
        evidence=evidence,
        frontier=frontier,
        bridge_entities=bridges,
        **changes,
    )

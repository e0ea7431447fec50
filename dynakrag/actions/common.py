"""What the actions share: dependencies, evidence acquisition and the update they return."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from dynakrag.configuration import Configuration
from dynakrag.llm.client import NO_USAGE, LLMClient, Usage
from dynakrag.retrieval.base import Searcher
from dynakrag.retrieval.provenance import search_with_provenance
from dynakrag.state import Document, State


@dataclass
class Resources:
    """What the action nodes call out to: bound once when the graph is built."""

    searcher: Searcher
    llm: LLMClient


def action_update(
    state: State,
    action: str,
    *,
    usage: Usage = NO_USAGE,
    retrieval_calls: int = 0,
    added: list[Document] | None = None,
    counts_as_step: bool = True,
    details: dict[str, Any] | None = None,
    **changes: Any,
) -> dict[str, Any]:
    """The partial state update of one action: its changes plus trace and accounting."""
    added = added or []
    entry: dict[str, Any] = {
        "step": len(state.get("trace", [])) + 1,
        "action": action,
        "valid_actions": list(state.get("valid_actions", [])),
        "scores": dict(state.get("policy_scores", {})),
        "query": state.get("query", state["question"]),
        "added": [doc["id"] for doc in added],
        "retrieval_calls": retrieval_calls,
        "llm_calls": usage.llm_calls,
        "prompt_tokens": usage.prompt_tokens,
        "completion_tokens": usage.completion_tokens,
    }
    entry.update(details or {})
    update: dict[str, Any] = {
        "trace": [entry],
        "steps": 1 if counts_as_step else 0,
        "retrieval_calls": retrieval_calls,
        "llm_calls": usage.llm_calls,
        "prompt_tokens": usage.prompt_tokens,
        "completion_tokens": usage.completion_tokens,
        "accounting": {
            action: {
                "calls": 1,
                "retrieval_calls": retrieval_calls,
                "llm_calls": usage.llm_calls,
                "prompt_tokens": usage.prompt_tokens,
                "completion_tokens": usage.completion_tokens,
            }
        },
        "last_new_docs": len(added),
    }
    update.update(changes)
    return update


def evidence_window(state: State, cfg: Configuration) -> list[Document]:
    """The passages a prompt sees: the first ``max_final_docs`` in acquisition order."""
    return list(state.get("evidence", []))[: cfg.max_final_docs]


def acquire(
    state: State,
    resources: Resources,
    cfg: Configuration,
    query: str,
    action: str,
) -> tuple[list[Document], dict[str, Any]]:
    """Search ``query`` and take the best ``docs_per_action`` passages not yet in evidence.

    Returns the new documents and the frontier statistics of this search.
    """
    seen = {doc["id"] for doc in state.get("evidence", [])}
    hits, dropped = search_with_provenance(resources.searcher, query, cfg.frontier_depth)
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
    frontier = {
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


def acquisition_update(
    state: State,
    resources: Resources,
    cfg: Configuration,
    action: str,
    search_query: str,
    *,
    usage: Usage = NO_USAGE,
    details: dict[str, Any] | None = None,
    **changes: Any,
) -> dict[str, Any]:
    """Search, extend the evidence, refresh bridge entities and report the step.

    ``changes`` are further state updates of the action (e.g. a new ``query``).
    """
    added, frontier = acquire(state, resources, cfg, search_query, action)
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


_PROPER_NAME = re.compile(r"\b(?:[A-Z][\w'’-]+)(?:\s+(?:of|de|van|von|the|and)?\s*[A-Z][\w'’-]+)+")
# Capitalised only because they start a sentence: never part of a name.
_STOP_NAMES = frozenset(
    "The A An In On At For From By With After Before During Since Outside Inside Of To As "
    "When Where Who What Which Whose How It Its He She They This That These Those His Her "
    "Their Our We I".split()
)


def detect_bridge_entities(
    question: str,
    evidence: list[Document],
    sub_questions: list[Any],
    limit: int = 8,
) -> list[str]:
    """Entities named in the evidence (or answered sub-questions) but not in the question.

    Candidates are answers of sub-questions first, then multi-word proper names in the evidence
    ranked by how many passages mention them; names that already title an evidence passage are
    left out, since their document is already here.
    """
    question_lower = question.lower()
    titles = {doc.get("title", "").lower() for doc in evidence}
    ordered: list[str] = []

    def consider(name: str) -> None:
        name = name.strip(" .,;:'\"")
        words = name.split()
        while words and words[0] in _STOP_NAMES:
            words = words[1:]
        name = " ".join(words)
        low = name.lower()
        if len(name) < 3 or low in question_lower or low in titles:
            return
        if any(low == existing.lower() for existing in ordered):
            return
        ordered.append(name)

    for sub in sub_questions:
        answer = sub.get("answer") if isinstance(sub, dict) else None
        if answer and answer.strip() and not looks_like_value(answer):
            consider(answer)
    mentions: dict[str, int] = {}
    first_seen: dict[str, int] = {}
    for position, doc in enumerate(evidence):
        for match in set(_PROPER_NAME.findall(doc.get("text", ""))):
            mentions[match] = mentions.get(match, 0) + 1
            first_seen.setdefault(match, position)
    for name in sorted(mentions, key=lambda n: (-mentions[n], first_seen[n], n)):
        consider(name)
    return ordered[:limit]


def looks_like_value(text: str) -> bool:
    """Dates, numbers and yes/no answers are facts, not entities to expand."""
    stripped = text.strip().lower()
    return stripped in {"yes", "no", "unknown"} or bool(re.fullmatch(r"[\d\s,./-]+", stripped))


_WORD = re.compile(r"[a-z0-9]+")
_FUNCTION_WORDS = frozenset(
    "a an the of in on at to for by with from and or is was were are be been which who whom "
    "what where when how did does do that this as its it his her their founded".split()
)
_CAPITALISED = re.compile(r"[A-Z][\w'’-]*(?:\s+[A-Z][\w'’-]*)*")


def content_words(text: str) -> set[str]:
    """Lower-cased words of ``text`` without function words."""
    return {w for w in _WORD.findall(text.lower()) if w not in _FUNCTION_WORDS and len(w) > 1}


def question_names(text: str) -> list[str]:
    """Capitalised names in a question, leaving out its first word and question words."""
    body = text.strip()
    _, _, rest = body.partition(" ")
    names = []
    for match in _CAPITALISED.findall(rest):
        words = [w for w in match.split() if w not in _STOP_NAMES]
        if words:
            names.append(" ".join(words))
    return names

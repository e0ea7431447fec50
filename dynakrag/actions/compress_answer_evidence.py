"""compress_answer_evidence: keep the passages that support the answer, before answering.

The default compressor is lexical: it keeps passages that state a sub-question's answer or
share content words with the question and sub-questions (no model call). With
``compression="dics"`` DS-RAG's DICS chooses one passage per selection criterion instead.
"""

from __future__ import annotations

import re
from typing import Any

from dynakrag.actions.common import Resources, action_update
from dynakrag.actions.text import content_words, looks_like_value
from dynakrag.configuration import Configuration
from dynakrag.llm.client import NO_USAGE, Usage
from dynakrag.state import Document, State


def support_score(doc: Document, focus_words: set[str], answers: list[str]) -> float:
    """How strongly a passage supports the question: answers it states, then word overlap."""
    text = f"{doc.get('title', '')} {doc.get('text', '')}".lower()
    # Yes/no and bare numbers would match almost any passage: only entities count as stated.
    answer_hits = sum(
        1
        for answer in answers
        if not looks_like_value(answer)
        and re.search(rf"\b{re.escape(answer.lower())}\b", text) is not None
    )
    overlap = len(focus_words & content_words(text)) / max(1, len(focus_words))
    return 2.0 * answer_hits + overlap


def dics_compress(
    state: State, resources: Resources, cfg: Configuration
) -> tuple[list[Document], Usage, dict[str, Any]]:
    """DS-RAG selection: one passage per selection criterion of the question's graph.

    The criteria come from the sub-questions the sufficiency check recorded, else from EPQD.
    Documented fallback: an empty selection keeps the evidence as it was.
    """
    from dynakrag.dsrag.pipeline import decompose_question, select_context

    evidence = state.get("evidence", [])
    usage = NO_USAGE
    sub_questions = [sub["question"] for sub in state.get("sub_questions", [])]
    if not sub_questions:
        decomposition = decompose_question(state["question"], resources.llm, cfg)
        sub_questions, usage = list(decomposition.sub_questions), decomposition.usage
    selection = select_context(
        state["question"],
        sub_questions,
        [(doc["id"], f"{doc.get('title', '')} {doc.get('text', '')}".strip()) for doc in evidence],
        resources.llm,
        cfg,
    )
    by_id = {doc["id"]: doc for doc in evidence}
    kept = [by_id[chunk_id] for chunk_id in selection.selected_ids][: cfg.max_final_docs]
    details = {
        "criteria": [criterion.text for criterion in selection.criteria.criteria],
        "criteria_fallback": selection.criteria.fallback,
        "dics_mode": selection.dics.mode,
    }
    return (kept or evidence[: cfg.max_final_docs]), usage + selection.usage, details


def compress_answer_evidence(
    state: State, resources: Resources, cfg: Configuration
) -> dict[str, Any]:
    """Keep supporting passages (at most ``max_final_docs``): ``passthrough`` the first ones,
    ``dics`` one per selection criterion in selection order, ``heuristic`` (default) the
    passages that state a sub-answer or score near the best, in their original order."""
    evidence = state.get("evidence", [])
    usage = NO_USAGE
    details: dict[str, Any] = {}
    if cfg.compression == "passthrough":
        kept = evidence[: cfg.max_final_docs]
    elif cfg.compression == "dics":
        kept, usage, details = dics_compress(state, resources, cfg)
    else:
        subs = state.get("sub_questions", [])
        answers = [sub["answer"] for sub in subs if sub.get("answer")]
        focus = content_words(" ".join([state["question"], *(s["question"] for s in subs)]))
        scored = [(support_score(doc, focus, answers), i) for i, doc in enumerate(evidence)]
        best = max((s for s, _ in scored), default=0.0)
        # Keep every passage that states a sub-answer (score >= 2), and the others at least
        # half as supportive as the best one.
        positive = sorted((s, i) for s, i in scored if s >= 2.0 or (s > 0 and s >= best / 2))
        positive = positive[::-1][: cfg.max_final_docs]
        # Documented fallback: nothing scored as support keeps the evidence as it was.
        keep = {i for _, i in positive} or set(range(min(len(evidence), cfg.max_final_docs)))
        kept = [doc for i, doc in enumerate(evidence) if i in keep]
    return action_update(
        state,
        "compress_answer_evidence",
        counts_as_step=False,
        usage=usage,
        details={"kept": [d["id"] for d in kept], "dropped": len(evidence) - len(kept), **details},
        evidence=kept,
        compressed=True,
    )

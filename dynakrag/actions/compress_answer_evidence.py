"""compress_answer_evidence: keep the passages that support the answer, before answering.

The default compressor is lexical: it keeps passages that state a sub-question's answer or
share content words with the question and sub-questions (no model call). With
``compression="dics"`` DS-RAG's DICS chooses one passage per selection criterion instead
(:func:`dics_compress`); its model calls are part of the action's cost ``c(s, a)``
(:func:`~dynakrag.dsrag.extraction.compression_model_calls`). With a chain of hops the
criteria are the hops, one each, and the things the question names (:func:`dics_per_hop`, no
model call): a resolved hop is served by the passage that states it, an open one by DICS's
choice among its entity's passages and the passages scoring near the best on its words.
"""

from __future__ import annotations

import re

from dynakrag.actions.chain import evidence_verdict, hop_entities, hop_text, names_in
from dynakrag.actions.chain_answer import chain_passages, is_bridge_chain
from dynakrag.actions.common import Resources, action_update
from dynakrag.actions.grounding import EVIDENCE_VERDICT
from dynakrag.actions.statements import about, passage_text, subject_of
from dynakrag.actions.sufficiency_check import is_grounded
from dynakrag.actions.text import content_words, looks_like_value, question_names
from dynakrag.configuration import Configuration
from dynakrag.llm.client import NO_USAGE, Usage
from dynakrag.state import Document, State, StateUpdate, TraceDetails


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


def answer_passages(state: State) -> list[tuple[str, str, Document]]:
    """``(sub-question, answer, passage)`` for each verified sub-answer: the first passage of
    the evidence that states it together with a name of its sub-question (the sufficiency
    check's grounding test). Yes/no answers and sub-questions without names point to no
    passage."""
    found = []
    evidence = state.get("evidence", [])
    for sub in state.get("sub_questions") or []:
        answer, question = sub.get("answer"), sub.get("question", "")
        if not answer or answer.strip().lower() in {"yes", "no"} or not question_names(question):
            continue
        doc = next((d for d in evidence if is_grounded(answer, question, [d])), None)
        if doc is not None:
            found.append((question, answer, doc))
    return found


def _candidates(evidence: list[Document]) -> list[tuple[str, str]]:
    """The evidence as DICS's candidate chunks: ``(id, title and text)``."""
    return [
        (doc["id"], f"{doc.get('title', '')} {doc.get('text', '')}".strip()) for doc in evidence
    ]


def dics_compress(
    state: State, resources: Resources, cfg: Configuration
) -> tuple[list[Document], Usage, TraceDetails]:
    """DS-RAG selection inside the graph: one passage per selection criterion, plus the
    passages that state verified sub-answers, in evidence order (at most ``max_final_docs``).

    The criteria come from the sub-questions the controller already has (the sufficiency
    check's parts, made compatible by
    :func:`~dynakrag.dsrag.extraction.compatible_sub_questions`; EPQD's parts with
    ``decomposition="epqd"``), else from the question alone, through the question analysis
    ``dsrag_extraction`` chooses. The trace records which criterion chose which passage.
    Documented fallback: an empty selection keeps the evidence as it was.
    """
    if state.get("hops"):
        return dics_per_hop(state, cfg)
    from dynakrag.dsrag.extraction import compatible_sub_questions
    from dynakrag.dsrag.pipeline import analyse, select_for_analysis

    evidence = state.get("evidence", [])
    given = compatible_sub_questions(state.get("sub_questions") or [])
    analysis = analyse(state["question"], resources.llm, cfg, sub_questions=given or None)
    selection = select_for_analysis(
        analysis,
        _candidates(evidence),
        cfg,
    )
    stated = answer_passages(state)
    keep = set(selection.selected_ids) | {doc["id"] for _, _, doc in stated}
    kept = [doc for doc in evidence if doc["id"] in keep][: cfg.max_final_docs]
    details: TraceDetails = {
        "criteria": [criterion.text for criterion in selection.criteria.criteria],
        "criteria_fallback": selection.criteria.fallback,
        "dics_mode": selection.dics.mode,
        "dics_choices": selection.choices(),
        "answer_passages": [
            {"sub_question": question, "answer": answer, "passage": doc["id"]}
            for question, answer, doc in stated
        ],
        "extraction": analysis.record(),
    }
    return (kept or evidence[: cfg.max_final_docs]), analysis.usage, details


def dics_per_hop(state: State, cfg: Configuration) -> tuple[list[Document], Usage, TraceDetails]:
    """DICS with a chain of hops: one selection criterion per hop, plus one per thing the
    question names. A resolved hop's criterion is served by the passage that states its
    answer, and by the passages that named each entity it went through (a person's city, then
    the city's country). An open hop's criterion has no passage a sentence vouches for, so
    it keeps its candidates: DICS's choice (the GS selector over the hop's own criterion, no
    model call) among the passages whose subject is the hop's entity (else those about it),
    and the passages scoring at least half the best on the hop's words and the answers found
    (:func:`support_score`, as the lexical compression scores the question). Where the reader
    composes the answer from the hops' answers (no bridge chain: a comparison), each answer
    that is an entity keeps its own passage too. A thing the question names that no kept
    passage is about is served by the first passage about it (the team a question describes,
    beside the university a hop asks about). Kept: every passage serving a criterion, in
    evidence order, each recorded with the hop it serves (0: the question). Documented
    fallback: nothing served keeps the evidence as it was."""
    from dynakrag.dsrag.criteria import one_criterion_each
    from dynakrag.dsrag.dics import dics_select
    from dynakrag.dsrag.pipeline import resolve_selector

    hops = state["hops"]
    evidence = state.get("evidence", [])
    present = {doc["id"] for doc in evidence}
    answers = [str(hop["answer"]) for hop in hops if hop["status"] == "resolved" and hop["answer"]]
    served: list[tuple[int, str, str]] = []  # (hop, passage, how)
    for number, hop in enumerate(hops, start=1):
        if hop["status"] == "resolved" and hop["passage"] in present:
            served.append((number, str(hop["passage"]), "states its answer"))
            for sentence in hop["via_sentences"]:
                named = next((d for d in evidence if sentence in passage_text(d)), None)
                if named is not None:
                    served.append((number, str(named["id"]), "names the entity it went through"))
            continue
        if not evidence:
            continue
        text = hop_text(hops, number - 1)
        names = hop_entities(hops, number - 1)
        own = [d for d in evidence if any(subject_of(d, n) for n in names)] or [
            d for d in evidence if any(about(d, n) for n in names)
        ]
        if own:
            chosen = dics_select(
                one_criterion_each([text]),
                _candidates(own),
                resolve_selector(cfg),
                question=state["question"],
            )
            served += [
                (number, str(c.chunk_id), "chosen by DICS among its entity's passages")
                for c in chosen.choices
                if c.criterion is not None
            ]
        scored = [(support_score(d, content_words(text), answers), d) for d in evidence]
        best = max(score for score, _ in scored)
        served += [
            (number, str(d["id"]), "scores near the best on its words")
            for score, d in scored
            if score > 0 and score >= best / 2
        ]
    if not is_bridge_chain(hops):
        # The reader composes the answer from the hops' answers (which director is younger):
        # each answer that is an entity is read on its own passage.
        for number, hop in enumerate(hops, start=1):
            answer = hop["answer"]
            if hop["status"] != "resolved" or not answer or looks_like_value(answer):
                continue
            own_doc = next((d for d in evidence if subject_of(d, answer)), None)
            if own_doc is not None:
                served.append((number, str(own_doc["id"]), "is its answer's own passage"))
    for name in names_in(state["question"]):
        taken = {passage for _, passage, _ in served}
        if any(about(d, name) for d in evidence if d["id"] in taken):
            continue
        own_doc = next((d for d in evidence if about(d, name)), None)
        if own_doc is not None:
            served.append((0, str(own_doc["id"]), f"about {name}, which the question names"))
    keep = {passage for _, passage, _ in served}
    kept = [doc for doc in evidence if doc["id"] in keep][: cfg.max_final_docs]
    details: TraceDetails = {
        "dics_mode": "hops",
        "hop_passages": [
            {"hop": number, "passage": passage, "how": how}
            for number, passage, how in dict.fromkeys(served)
        ],
    }
    return (kept or evidence[: cfg.max_final_docs]), NO_USAGE, details


def compress_answer_evidence(state: State, resources: Resources, cfg: Configuration) -> StateUpdate:
    """Keep supporting passages (at most ``max_final_docs``): ``passthrough`` the first ones,
    ``dics`` one per selection criterion plus those stating verified sub-answers, ``heuristic``
    (default) the passages that state a sub-answer or score near the best; all in their
    original order."""
    evidence = state.get("evidence", [])
    usage = NO_USAGE
    details: TraceDetails = {}
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
        # The passages that state the chain's hops are the answer's citations: always kept;
        # with a chain, so are the passages about a thing the question names (what a reader
        # of an incomplete chain needs to see).
        hops = state.get("hops") or []
        chained = set(chain_passages(hops))
        keep |= {i for i, doc in enumerate(evidence) if doc["id"] in chained}
        if hops:
            names = question_names(state["question"])
            keep |= {i for i, doc in enumerate(evidence) if any(about(doc, n) for n in names)}
        kept = [doc for i, doc in enumerate(evidence) if i in keep]
    if cfg.abstain:
        # The answer reads the kept passages, but whether the evidence covers the question is
        # judged on all of it: a passage naming the question's subject may be dropped here. A
        # chain judges coverage by its hops (chain.evidence_verdict).
        verdict = evidence_verdict(state["question"], evidence, state.get("hops") or [])
        details[EVIDENCE_VERDICT] = verdict.record() if verdict is not None else None
    return action_update(
        state,
        "compress_answer_evidence",
        counts_as_step=False,
        usage=usage,
        details={"kept": [d["id"] for d in kept], "dropped": len(evidence) - len(kept), **details},
        evidence=kept,
        compressed=True,
    )

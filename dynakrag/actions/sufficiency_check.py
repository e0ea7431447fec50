"""sufficiency_check: judge readiness structurally, one sub-question at a time.

A yes/no "is this enough?" prompt is unreliable with small models (they say yes to evidence
that misses an entity), so the generator instead answers each sub-question from the evidence
or says UNKNOWN; every UNKNOWN part becomes a recorded gap.

With the ``abstain`` setting (default) "sufficient" also needs the question to have content
and every name it asks about (:func:`dynakrag.actions.grounding.missing_entities`) to be in
the evidence; each missing name becomes a gap too, so the controller searches for it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from dynakrag import prompts
from dynakrag.actions.bridge_entities import detect_bridge_entities
from dynakrag.actions.chain import (
    chain_complete,
    chain_failed,
    hop_text,
    next_open_hop,
    note_search,
    plan_hops,
    resolve_hops,
    sub_questions_of,
    without_trailing_checks,
)
from dynakrag.actions.common import Resources, action_update, evidence_window
from dynakrag.actions.gaps import open_gaps
from dynakrag.actions.grounding import has_answerable_content, missing_entities
from dynakrag.actions.text import content_words, question_names
from dynakrag.configuration import Configuration
from dynakrag.decomposition import REFERENCE, decompose, one_fact, resolve_references
from dynakrag.llm.client import NO_USAGE, LLMClient, Usage
from dynakrag.state import Document, State, StateUpdate, SubQuestion, TraceDetails

# EPQD makes one sub-question per part; long DS-RAG questions have up to ~10 parts.
MAX_EPQD_SUB_QUESTIONS = 10


def is_grounded(answer: str, sub_question: str, evidence: Sequence[prompts.PromptPassage]) -> bool:
    """Whether one passage states ``answer`` together with a name from ``sub_question``.

    Small generators happily answer from the wrong passage (a distractor company's city), so an
    answer counts only when a single passage mentions both the answer and the sub-question's
    subject. Yes/no answers and sub-questions without names need only the passage support
    their words.
    """
    answer_words = content_words(answer)
    if answer.strip().lower() in {"yes", "no"}:
        return True
    names = [name.lower() for name in question_names(sub_question)]
    for doc in evidence:
        text = f"{doc.get('title', '')} {doc.get('text', '')}".lower()
        if answer_words and not answer_words <= content_words(text):
            continue
        if not names or any(name in text for name in names):
            return True
    return False


def sufficiency_check(state: State, resources: Resources, cfg: Configuration) -> StateUpdate:
    """Answer each sub-question from the evidence; record what is still missing."""
    if cfg.sub_question_answering == "chain":
        return _check_chain(state, resources, cfg)
    question = state["question"]
    usage = NO_USAGE
    known = state.get("sub_questions") or []
    if known:
        texts = [sub["question"] for sub in known]
    elif cfg.decomposition == "epqd":
        texts, usage = _plan(question, resources, cfg)
    else:
        texts, usage = decompose(question, resources.llm)
    evidence = evidence_window(state, cfg)
    if cfg.sub_question_answering == "sequential":
        answers, rejected, parsed, answer_usage = _answer_in_order(texts, evidence, resources.llm)
    else:
        answers, rejected, parsed, answer_usage = _answer_jointly(
            question, texts, evidence, resources.llm
        )
    usage += answer_usage
    sub_questions = [
        SubQuestion(question=resolve_references(text, answers), answer=answer)
        for text, answer in zip(texts, answers, strict=True)
    ]
    queried = state.get("queried_gaps", [])
    gaps = open_gaps(sub_questions, queried)
    sufficient = all(answer is not None for answer in answers)
    details: TraceDetails = {"parsed": parsed, "ungrounded_answers": rejected}
    if cfg.abstain:
        missing = missing_entities(question, evidence)
        searched = {gap.lower() for gap in [*queried, *gaps]}
        gaps += [name for name in missing if name.lower() not in searched]
        sufficient = sufficient and not missing and has_answerable_content(question)
        details["missing_entities"] = missing
    bridges = detect_bridge_entities(question, state.get("evidence", []), sub_questions)
    return _verdict(state, usage, sufficient, gaps, sub_questions, bridges, details)


def _verdict(
    state: State,
    usage: Usage,
    sufficient: bool,
    gaps: list[str],
    sub_questions: list[SubQuestion],
    bridge_entities: list[str],
    details: TraceDetails,
    **changes: Any,
) -> StateUpdate:
    """The check's update: whether the evidence suffices and the gaps, in the state and in the
    trace entry (with the mode's own ``details``); ``changes``: the mode's own state fields."""
    return action_update(
        state,
        "sufficiency_check",
        usage=usage,
        details={"sufficient": sufficient, "gaps": gaps, **details},
        **changes,
        sub_questions=sub_questions,
        gaps=gaps,
        sufficient=sufficient,
        evidence_count_at_check=len(state.get("evidence", [])),
        bridge_entities=bridge_entities,
    )


def _plan(question: str, resources: Resources, cfg: Configuration) -> tuple[list[str], Usage]:
    """The sub-questions of ``question``: EPQD's parts, or the decomposition's checked by the
    rules (a part that joins two facts cut in two, a plan that lost a relation replaced). A
    question that plainly asks one fact (:func:`one_fact`) is its own plan: a one-hop question
    then costs the model one call, as reading it would."""
    if cfg.decomposition == "epqd":
        from dynakrag.dsrag.pipeline import decompose_question

        epqd = decompose_question(question, resources.llm, cfg)
        return list(epqd.sub_questions[:MAX_EPQD_SUB_QUESTIONS]) or [question], epqd.usage
    if one_fact(question):
        return [question], NO_USAGE
    return decompose(question, resources.llm, split_joined=True)


def _check_chain(state: State, resources: Resources, cfg: Configuration) -> StateUpdate:
    """Hop by hop (:mod:`dynakrag.actions.chain`): plan the hops once, resolve the open ones
    from the evidence, record the next hop's search as the gap (or the entity a hop goes on
    through as the bridge entity)."""
    question = state["question"]
    hops = state.get("hops") or []
    usage = NO_USAGE
    planned: list[str] = []
    checks: list[str] = []
    if not hops:
        planned, usage = _plan(question, resources, cfg)
        hops, checks = without_trailing_checks(question, plan_hops(planned))
        if len(hops) == 1 and hops[0]["question"].strip().lower() == question.strip().lower():
            # The run's first retrieval searched this very question: the hop's own search.
            hops = note_search(hops, question)
    evidence = state.get("evidence", [])
    hops, hop_usage, asked = resolve_hops(hops, question, evidence, resources.llm)
    usage += hop_usage
    sub_questions = sub_questions_of(hops)
    gaps: list[str] = []
    through: list[str] = []
    index = next_open_hop(hops)
    if index is not None and not chain_failed(hops):
        if hops[index]["via"]:
            through = [hops[index]["via"][-1]]
        else:
            text = hop_text(hops, index)
            searched = {query.lower() for query in [*state.get("queried_gaps", []),
                                                     *hops[index]["queries"]]}  # fmt: skip
            gaps = [] if text.lower() in searched else [text]
    sufficient = chain_complete(hops)
    details: TraceDetails = {
        **({"plan": planned} if planned else {}),
        **({"checks_left_out": checks} if checks else {}),
        "hops_asked": asked,
        "hops": [
            {"hop": i + 1, "status": h["status"], "answer": h["answer"], "why": h["why"]}
            for i, h in enumerate(hops)
        ],
    }
    bridges = detect_bridge_entities(question, evidence, sub_questions)
    bridges = [*through, *(b for b in bridges if b not in through)]  # the hop's own first
    return _verdict(state, usage, sufficient, gaps, sub_questions, bridges, details, hops=hops)


def _sub_answer(
    item: str | None,
    text: str,
    answers: list[str | None],
    evidence: list[Document],
    rejected: list[str],
) -> str | None:
    """The model's answer ``item`` to sub-question ``text`` if it stands, else None (UNKNOWN).

    UNKNOWN: no value, the model's UNKNOWN or refusal (the check shares the answer's system
    text, whose refusal is "insufficient evidence"), a value still holding a ``#k``, a
    sub-question that depends on an answer not found yet (its ``#k`` unresolved: whatever the
    model names there is a guess), or a value no passage states with the sub-question's subject
    (recorded in ``rejected``).
    """
    value = "" if item is None else item.strip()
    resolved = resolve_references(text, answers)
    if (
        not value
        or value.upper().startswith(prompts.UNKNOWN)
        or value.lower().startswith(prompts.INSUFFICIENT_EVIDENCE)
        or "#" in value
        or REFERENCE.search(resolved)
    ):
        return None
    if not is_grounded(value, resolved, evidence):
        rejected.append(value)
        return None
    return value[:200]


def _answer_jointly(
    question: str, texts: list[str], evidence: list[Document], llm: LLMClient
) -> tuple[list[str | None], list[str], bool, Usage]:
    """One call answers every sub-question (a JSON list, in order)."""
    reply, usage = llm.structured(
        prompts.sufficiency_messages(question, texts, evidence),
        prompts.AnswersReply,
        max_tokens=prompts.sufficiency_max_tokens(len(texts)),
    )
    # Documented fallback: an unusable reply counts as UNKNOWN for every part.
    answers: list[str | None] = []
    rejected: list[str] = []
    for index, text in enumerate(texts):
        item = reply.answer(index) if reply is not None else None
        answers.append(_sub_answer(item, text, answers, evidence, rejected))
    return answers, rejected, reply is not None, usage


def _answer_in_order(
    texts: list[str], evidence: list[Document], llm: LLMClient
) -> tuple[list[str | None], list[str], bool, Usage]:
    """One call per sub-question, in order, earlier answers written into its ``#k``.

    A small model asked several sub-questions at once shifts answers between them (the city for
    the company); asked one at a time, with the bridge already filled in, it cannot. A
    sub-question whose ``#k`` is still unknown is not asked at all.
    """
    answers: list[str | None] = []
    rejected: list[str] = []
    usage = NO_USAGE
    parsed = True
    for text in texts:
        resolved = resolve_references(text, answers)
        if REFERENCE.search(resolved):
            answers.append(None)
            continue
        reply, call_usage = llm.structured(
            prompts.sufficiency_messages(None, [resolved], evidence),
            prompts.AnswersReply,
            max_tokens=prompts.sufficiency_max_tokens(1),
        )
        usage += call_usage
        parsed = parsed and reply is not None
        item = reply.answer(0) if reply is not None else None
        answers.append(_sub_answer(item, text, answers, evidence, rejected))
    return answers, rejected, parsed, usage

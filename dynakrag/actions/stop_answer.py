"""stop_answer: end the run and write the final answer from the evidence, or abstain.

With the ``abstain`` setting (default) the answer must stand on the evidence
(:mod:`dynakrag.actions.grounding`): a question without content, without evidence, naming what
no passage mentions or sharing too few words with the passages gets no answer and no model
call; an answer the passages do not state is withdrawn. The run then ends with ``answer`` empty,
``abstained`` true and ``abstain_reason`` saying why. Either way ``answer_citations`` lists the
passages an answer rests on.
"""

from __future__ import annotations

from dynakrag import prompts
from dynakrag.actions.answer_kind import asked_for, is_an_option, not_an_option
from dynakrag.actions.chain import (
    chain_complete,
    evidence_verdict,
    hop_entities,
    hop_text,
    rejected_answers,
    repeats_a_given_name,
)
from dynakrag.actions.chain_answer import chain_answer, chain_passages, is_bridge_chain
from dynakrag.actions.common import Resources, action_update, evidence_window
from dynakrag.actions.compress_answer_evidence import answer_passages
from dynakrag.actions.grounding import (
    EVIDENCE_VERDICT,
    AbstentionVerdict,
    abstain,
    check_answer,
    is_yes_no,
    normalised,
    verdict_from_record,
)
from dynakrag.actions.statements import known, mentions, passage_text
from dynakrag.actions.text import (
    capitalised_words,
    content_words,
    looks_like_value,
    question_names,
)
from dynakrag.configuration import Configuration
from dynakrag.llm.answers import parse_final_answer
from dynakrag.llm.client import NO_USAGE, Usage
from dynakrag.state import Document, Hop, State, StateUpdate


def stop_answer(state: State, resources: Resources, cfg: Configuration) -> StateUpdate:
    """Answer from at most ``max_final_docs`` passages, or abstain (setting ``abstain``).

    Fallbacks: no evidence, or no usable reply, gives the last sub-question's answer when the
    sufficiency check found every part and that answer is an entity, else "insufficient
    evidence" (with ``abstain``: an abstention).
    """
    question = state["question"]
    evidence = evidence_window(state, cfg)
    hops = state.get("hops") or []
    if cfg.abstain:
        early = _verdict_before_answer(state, evidence)
        if early is not None:
            return _final_update(state, evidence, "", early, NO_USAGE, fallback=False)
    chain_given: tuple[str, AbstentionVerdict] | None = None
    if hops:
        chained = _chain_verdict(state, hops, cfg)
        if chained is not None and cfg.chain_answer == "reader" and chained[1].grounding == "chain":
            chain_given = chained  # the reader answers first; the chain's answer is the fallback
        elif chained is not None:
            answer, verdict = chained
            return _final_update(state, evidence, answer, verdict, NO_USAGE, fallback=False)
    answer, usage = _read_answer(state, resources, evidence)
    fallback = answer is None
    if fallback:
        subs = state.get("sub_questions", [])
        last = subs[-1]["answer"] if subs and state.get("sufficient") else None
        # A chain's last sub-answer answers it; a bare value (a comparison's date) does not.
        answer = last if last and not looks_like_value(last) else prompts.INSUFFICIENT_EVIDENCE
    assert answer is not None
    window = {doc["id"] for doc in evidence}
    chain = [doc["id"] for _, _, doc in answer_passages(state) if doc["id"] in window]
    checked = state.get("evidence_count_at_check", -1) >= 0
    verdict = check_answer(
        question,
        answer,
        evidence,
        sub_questions=state.get("sub_questions") if checked else None,
        chain_passages=chain,
        llm=resources.llm if cfg.abstain else None,
    )
    if not cfg.abstain:
        # The earlier behaviour: the answer stands; the citations are kept when it is stated.
        verdict = AbstentionVerdict(
            False, citations=() if verdict.abstained else verdict.citations, grounding=""
        )
    usage += verdict.usage
    if (
        hops
        and cfg.abstain
        and not verdict.abstained
        and repeats_a_given_name(answer, question, question)
        and not is_an_option(answer, question)
    ):
        # The reader named the question's own subject, as a chain's hop may not either
        # ("What do E. B. White and Dan Masterson have in common?" -> "E. B. White"); one of
        # the names the question offers to choose from ("Between A and B, which ...?") stands.
        verdict = abstain("repeats_the_question", answer=answer)
    if hops and cfg.abstain and not verdict.abstained and not_an_option(answer, question):
        verdict = abstain("not_an_option", answer=answer)
    if (
        hops
        and cfg.abstain
        and not verdict.abstained
        and not chain_complete(hops)
        and not _connected(answer, verdict.citations, hops, state)
    ):
        # An incomplete chain's reader answered from a passage about something else (the
        # seats of an arena the chain never reached).
        verdict = abstain("answer_unconnected", answer=answer)
    if verdict.abstained and hops and cfg.abstain:
        # The reader's answer did not stand either: say where the chain stopped.
        verdict = _chain_abstention(question, hops) or verdict
    if hops and cfg.abstain and not verdict.abstained:
        passed = _earlier_hop_answered(question, answer, hops)
        if passed is not None:
            # The reader stopped at a bridge the chain passes through (the father, not what
            # the father was voted).
            verdict = abstain("answers_an_earlier_hop", answer=answer, hop=passed)
    if verdict.abstained and chain_given is not None:
        answer, verdict = chain_given  # the reader's usage is counted above
    final = "" if verdict.abstained else answer
    return _final_update(state, evidence, final, verdict, usage, fallback=fallback)


def _chain_verdict(
    state: State, hops: list[Hop], cfg: Configuration
) -> tuple[str, AbstentionVerdict] | None:
    """With a chain of hops: its own answer (a bridge's last hop, a comparison computed from
    the hops' values), cited with every hop's passage; with ``abstain`` (and
    ``incomplete_chain="abstain"``), an abstention naming the hop no passage stated. None: the
    reader composes the answer from the evidence and the resolved hops."""
    given = chain_answer(state["question"], hops)
    if given is not None:
        answer, how = given
        return answer, AbstentionVerdict(
            False, citations=tuple(chain_passages(hops)), grounding=how
        )
    if not cfg.abstain:
        return None
    absent = _absent_hop_entity(hops, state.get("evidence", []))
    if absent is not None:
        return "", absent
    if cfg.incomplete_chain == "read" and _has_foothold(state["question"], hops, state):
        return None  # the reader answers from the evidence and the hops found
    stopped = _chain_abstention(state["question"], hops)
    return None if stopped is None else ("", stopped)


def _earlier_hop_answered(question: str, answer: str, hops: list[Hop]) -> int | None:
    """The number of a resolved hop, other than a bridge chain's last, whose answer is
    ``answer`` (None: none is, the chain is no bridge, its last hop was given that answer too
    and turned it down as a repeat, or that hop asked for the very thing the question asks
    for: "... by which equity firm?" planned as "What equity firm owns X?" and a hop after
    it that the question does not ask)."""
    if not is_bridge_chain(hops):
        return None
    wanted = normalised(answer)
    if any(normalised(turned_down) == wanted for turned_down in rejected_answers(hops[-1])):
        return None  # the last hop found the same answer too: a plan that asked it twice
    if is_an_option(answer, question):
        return None  # "..., A or B?": a hop that found one of the two found the answer
    asked_noun = asked_for(question)[1]
    for number, hop in enumerate(hops[:-1], start=1):
        if hop["status"] == "resolved" and normalised(hop["answer"] or "") == wanted:
            return None if asked_noun and hop["type_noun"] == asked_noun else number
    return None


def _stuck_hop(hops: list[Hop]) -> int | None:
    """The first hop the chain did not resolve (None: a complete chain)."""
    return next((i for i, hop in enumerate(hops) if hop["status"] != "resolved"), None)


def _absent_hop_entity(hops: list[Hop], evidence: list[Document]) -> AbstentionVerdict | None:
    """An incomplete chain stopped at a hop whose entity the passages know nothing of: none
    is about it, none names it in full and no title is a form of its name ("Kaiser Ventures"
    for "Kaiser Ventures Corporation", "Bob Seger" for "Robert C Seger"). What a reader would
    answer is then a guess from passages about other things. None: the chain is complete, or
    the hop's entity has a passage."""
    stuck = _stuck_hop(hops)
    if stuck is None:
        return None
    names = hop_entities(hops, stuck)
    if not names or any(known(name, evidence) for name in names):
        return None
    return abstain("hop_entity_absent", names=" / ".join(names), what=repr(hop_text(hops, stuck)))


def _connected(
    answer: str, citations: tuple[str, ...] | list[str], hops: list[Hop], state: State
) -> bool:
    """Whether a reader's answer to an incomplete chain is stated in a passage linked to the
    question: one that names a capitalised word of the question or what a hop resolved, or
    one whose title a passage naming such a thing mentions (the bridge the chain did not
    resolve: the company's page, named on the employee's). A yes/no, or an answer citing no
    passage, is not judged here."""
    if is_yes_no(answer) or not citations:
        return True
    names = capitalised_words(state["question"]) + [
        str(hop["answer"]) for hop in hops if hop["status"] == "resolved" and hop["answer"]
    ]
    evidence = state.get("evidence", [])
    anchors = [doc for doc in evidence if any(mentions(passage_text(doc), n) for n in names)]
    wanted = set(citations)
    for doc in evidence:
        if doc.get("id") not in wanted:
            continue
        title = str(doc.get("title", ""))
        if doc in anchors or (
            title and any(mentions(passage_text(anchor), title) for anchor in anchors)
        ):
            return True
    return False


def _has_foothold(question: str, hops: list[Hop], state: State) -> bool:
    """Whether a reader answering an incomplete chain has something to stand on: a hop the
    chain resolved, or a thing the question names that a passage is about (a name of the
    question mentioned in a passage, or a word of it in a passage's title). An instruction in
    place of a question, or a question about nothing the passages know, gets no reader's
    guess: the chain's abstention stands."""
    if any(hop["status"] == "resolved" for hop in hops):
        return True
    evidence = state.get("evidence", [])
    words = content_words(question)
    for doc in evidence:
        text = passage_text(doc)
        if words & content_words(str(doc.get("title", ""))) or any(
            mentions(text, name) for name in question_names(question)
        ):
            return True
    return False


def _chain_abstention(question: str, hops: list[Hop]) -> AbstentionVerdict | None:
    """Why a chain gives no answer: the first hop no passage stated, or, complete, a last hop
    that asks for something other than the question (None: a complete chain the reader
    composes from, a yes/no, an aggregation, or a choice its last hop answered with neither
    of the two)."""
    if chain_complete(hops):
        if is_bridge_chain(hops) and not not_an_option(str(hops[-1]["answer"]), question):
            asked = asked_for(question)
            return abstain(
                "chain_off_target", found=hops[-1]["expects"], asked=asked[1] or asked[0]
            )
        return None
    return abstain("chain_incomplete", what=repr(hop_text(hops, _stuck_hop(hops) or 0)))


def _verdict_before_answer(state: State, evidence: list[Document]) -> AbstentionVerdict | None:
    """:func:`abstention_before_answer` of the evidence the controller acquired: of the
    passages before compression when ``compress_answer_evidence`` just ran (it judged them: a
    passage naming the question's subject may have been dropped there), else of the answer's
    passages. A chain judges coverage by its hops, not by the share of the question's words."""
    trace = state.get("trace") or []
    last = trace[-1] if trace else {}
    if last.get("action") == "compress_answer_evidence" and EVIDENCE_VERDICT in last:
        recorded = last[EVIDENCE_VERDICT]
        return verdict_from_record(recorded) if recorded else None
    return evidence_verdict(state["question"], evidence, state.get("hops") or [])


def _read_answer(
    state: State, resources: Resources, evidence: list[Document]
) -> tuple[str | None, Usage]:
    """The reader's answer over ``evidence`` (None: no evidence or no usable reply)."""
    if not evidence:
        return None, NO_USAGE
    facts = [
        (sub["question"], sub["answer"])
        for sub in state.get("sub_questions", [])
        if sub.get("answer")
    ]
    reply, usage = resources.llm.text(
        prompts.answer_messages(state["question"], evidence, facts),
        max_tokens=prompts.ANSWER_MAX_TOKENS,
    )
    return parse_final_answer(reply), usage


def _final_update(
    state: State,
    evidence: list[Document],
    answer: str,
    verdict: AbstentionVerdict,
    usage: Usage,
    *,
    fallback: bool,
) -> StateUpdate:
    return action_update(
        state,
        "stop_answer",
        counts_as_step=False,
        usage=usage,
        details={
            "answer": answer,
            "fallback": fallback,
            "final_docs": len(evidence),
            **verdict.record(),
        },
        answer=answer,
        evidence=evidence,
        abstained=verdict.abstained,
        abstain_reason=verdict.reason,
        answer_citations=list(verdict.citations),
    )

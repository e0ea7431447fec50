"""The chain: a multi-hop question as a plan of single-relation hops, resolved one at a time.

A plan comes from the decomposition (:func:`dynakrag.decomposition.decompose`): each
sub-question is one hop, ``#k`` standing for hop k's answer. Hops are resolved in order, each
with the answers found so far written into it:

* the generator is asked the hop alone, over the passages about the hop's entity (the name it
  asks about, exactly: look-alike names are other entities);
* its answer stands only when one sentence of one of those passages states it about that
  entity (:func:`~dynakrag.actions.statements.find_statement`), it is of the kind the hop
  expects (:func:`~dynakrag.actions.statements.kind_fits`) and
  it is not an entity the hop or the question already names;
* when the sentence labels the answer as an entity of another class than the hop asks for
  (asked for a country, it names "the city of Ambelstead"), the hop is extended through that
  entity (:attr:`~dynakrag.state.Hop.via`): its passages are searched and the hop is asked
  again with the sentence found so far;
* a miss is searched again once with a rewritten query; then the hop fails, and the run
  answers from what it has or abstains.

The chain's own answer (the last hop's, or a comparison computed from the hops' values) is in
:mod:`dynakrag.actions.chain_answer`.

Nothing here is written for a dataset's wording: kinds come from question words and the noun
asked for, entity classes from a short list of common nouns.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from dynakrag import prompts
from dynakrag.actions.answer_kind import (
    KIND_OF_CLASS,
    POSSESSIVE,
    answers_what_is_asked,
    asked_for,
    expected_kind,
)
from dynakrag.actions.grounding import (
    MIN_QUESTION_COVERAGE,
    AbstentionVerdict,
    abstention_before_answer,
    is_yes_no,
    normalised,
    question_coverage,
    question_entities,
)
from dynakrag.actions.statements import (
    Statement,
    about,
    find_statement,
    kind_fits,
    label_of,
    labelled_names,
    mentions,
    passage_text,
    sentences,
    whole_name,
)
from dynakrag.actions.text import content_words
from dynakrag.choices import offered_options
from dynakrag.decomposition import REFERENCE, resolve_references
from dynakrag.entity_classes import entity_class, lies_within
from dynakrag.llm.client import NO_USAGE, LLMClient, Usage
from dynakrag.state import Document, Hop, HopQuestion, Rejection, SubQuestion
from dynakrag.values import comparison_asked, dates_in, first_number

__all__ = [
    "MAX_HOP_PASSAGES",
    "SEARCHES_PER_HOP",
    "asked_question",
    "chain_complete",
    "chain_failed",
    "hop_entities",
    "hop_text",
    "hop_to_close",
    "judge_answer",
    "names_in",
    "next_hop_entities",
    "next_hop_search",
    "next_open_hop",
    "note_search",
    "passages_for",
    "plan_hops",
    "rejected_answers",
    "repeats_a_given_name",
    "resolve_hops",
    "searches_left",
    "sub_questions_of",
    "without_trailing_checks",
]

MAX_HOP_PASSAGES = 4
"""Passages shown to the generator for one hop (those about its entity come first)."""
SEARCHES_PER_HOP = 2
"""Searches one hop of a longer chain may take (its own query, then one rewritten retry), plus
one per entity it is extended through (see :func:`searches_left`)."""


def plan_hops(sub_questions: Sequence[str]) -> list[Hop]:
    """Open hops for the decomposition's sub-questions (in order)."""
    hops: list[Hop] = []
    for text in sub_questions:
        kind, noun = expected_kind(re.sub(REFERENCE, "X", text))
        hops.append(
            Hop(
                question=text,
                expects=kind,
                type_noun=noun,
                status="open",
                answer=None,
                passage=None,
                sentence=None,
                via=[],
                via_sentences=[],
                queries=[],
                asked=[],
                rejected=[],
                why="",
            )
        )
    return hops


def without_trailing_checks(question: str, hops: Sequence[Hop]) -> tuple[list[Hop], list[str]]:
    """The plan less the hops at its end that only check a value the question itself states,
    and those hops' questions: a yes/no hop in a question that asks no yes/no ("... by #1?"),
    or a date or number hop that is not what the question asks for when the question writes a
    date or number ("When was #1 founded?" for "Which college, founded in 1855, ...?"). Their
    answers change nothing the chain answers (no later hop uses them, and the answer is the hop
    before), while each costs a model call and its searches. Kept whole: a yes/no, choice or
    comparison question, whose hops are its values, and a plan whose hop left does not ask for
    what the question asks for."""
    hops = list(hops)
    if (
        len(hops) < 2
        or asked_for(question)[0] == "yes/no"
        or offered_options(question) is not None
        or comparison_asked(question) is not None
    ):
        return hops, []
    kept = hops
    while len(kept) > 1 and _checks_a_stated_value(question, kept[-1]):
        kept = kept[:-1]
    last = kept[-1]
    if len(kept) == len(hops) or last["expects"] == "yes/no":
        return hops, []  # a yes/no left to answer: the question asks yes or no after all
    if not answers_what_is_asked(question, last):
        return hops, []
    return kept, [hop["question"] for hop in hops[len(kept) :]]


def _checks_a_stated_value(question: str, hop: Hop) -> bool:
    if hop["expects"] == "yes/no":
        return True
    if hop["expects"] not in ("date", "number") or answers_what_is_asked(question, hop):
        return False
    if hop["expects"] == "date":
        return bool(dates_in(question) or _YEAR.search(question))
    return first_number(question) is not None


_YEAR = re.compile(r"\b(?:1[0-9]{3}|20[0-9]{2})\b")
"""A year written alone ("founded in 1855"), which :func:`dates_in` does not count as a date."""


def _answers(hops: Sequence[Hop]) -> list[str | None]:
    return [hop["answer"] if hop["status"] == "resolved" else None for hop in hops]


def hop_text(hops: Sequence[Hop], index: int) -> str:
    """Hop ``index``'s question with the answers found so far written into its ``#k``."""
    return resolve_references(hops[index]["question"], _answers(hops))


def asked_question(hops: Sequence[Hop], index: int) -> str:
    """What hop ``index`` is asked: its question with the answers found so far, or, once it
    went through a place smaller than the place it asks for ("born in the city of Rynford" for
    "In which country was X born?"), which such place holds that one ("In which country is
    Rynford?"): the smaller place's own passage states that, and rarely names the person."""
    hop = hops[index]
    text = hop_text(hops, index)
    if not hop["via"] or not hop["via_sentences"] or hop["expects"] != "place":
        return text
    through = hop["via"][-1]
    label = label_of(through, hop["via_sentences"][-1])
    noun = hop["type_noun"].lower()
    if label is None or not lies_within(entity_class(label), entity_class(noun)):
        return text
    return prompts.CONTAINING_PLACE_QUESTION.format(noun=noun, place=through)


def next_open_hop(hops: Sequence[Hop]) -> int | None:
    """The first hop neither resolved nor failed whose ``#k`` are all answered, else None."""
    for index, hop in enumerate(hops):
        if hop["status"] == "open" and not REFERENCE.search(hop_text(hops, index)):
            return index
    return None


def chain_complete(hops: Sequence[Hop]) -> bool:
    """Every hop resolved (and there is a plan)."""
    return bool(hops) and all(hop["status"] == "resolved" for hop in hops)


def evidence_verdict(
    question: str, evidence: Sequence[Mapping[str, Any]], hops: Sequence[Hop]
) -> AbstentionVerdict | None:
    """:func:`~dynakrag.actions.grounding.abstention_before_answer` for a run with or without
    a chain: a chain judges coverage by its hops, not by the share of the question's words,
    and a complete one is not undone by a one-word side condition no passage mentions. A
    question that names nothing ("--max-steps 999999") gives its hops no entity to be about,
    so the share of its words in the passages judges it, as without a chain. A complete chain
    none of whose hops is about an entity is anchored by the question's words alone: it excuses
    a name only where the passages hold enough of them ("What race track in the Midwest hosts
    a 500 mile race every May?"), not where they hold none ("SELECT * FROM passages;" planned
    as "What is the first passage in the database?")."""
    names = names_in(question)
    anchored = any(hop_entities(hops, index) for index in range(len(hops))) or (
        question_coverage(question, evidence) >= MIN_QUESTION_COVERAGE
    )
    return abstention_before_answer(
        question,
        evidence,
        coverage=not hops or not names,
        complete_chain=chain_complete(hops) and anchored,
    )


def chain_failed(hops: Sequence[Hop]) -> bool:
    """The chain cannot finish: a hop failed, or no open hop can be asked."""
    if not hops or chain_complete(hops):
        return False
    return any(hop["status"] == "failed" for hop in hops) or next_open_hop(hops) is None


def hop_entities(hops: Sequence[Hop], index: int) -> list[str]:
    """What hop ``index`` asks about: the last entity it was extended through, else the names
    in its resolved question (leaving out numbers)."""
    hop = hops[index]
    if hop["via"]:
        return [hop["via"][-1]]
    # "Ada Voss's employer" asks about Ada Voss.
    return [POSSESSIVE.sub("", entity) for entity in names_in(hop_text(hops, index))]


def bridge_answers(hops: Sequence[Hop], index: int) -> list[str]:
    """The earlier hops' answers that hop ``index`` goes on from (its ``#k``, resolved)."""
    return [
        hops[number - 1]["answer"] or ""
        for number in map(int, REFERENCE.findall(hops[index]["question"]))
        if 1 <= number <= index and hops[number - 1]["answer"]
    ]


def names_a_bridge(doc: Document, bridges: Sequence[str]) -> bool:
    """Whether a passage names one of ``bridges`` (title or text), also by a shorter form: the
    name before a comma or a bracket ("Wilmington" for "Wilmington, Delaware"), a name of
    several words by its last word ("Mancini" for Henry Mancini)."""
    text = f"{doc.get('title', '')}\n{doc.get('text', '')}"
    return any(mentions(text, form) for bridge in bridges for form in _short_forms(bridge))


def _short_forms(name: str) -> set[str]:
    head = re.split(r"\s*[,(]", name, maxsplit=1)[0].strip()
    words = head.split()
    last = words[-1] if len(words) > 1 and words[-1][:1].isupper() else ""
    return {form for form in (name, head, last) if form}


def names_in(text: str) -> list[str]:
    """The entities ``text`` names, leaving out bare numbers."""
    return [entity for entity in question_entities(text) if not entity.replace(",", "").isdigit()]


def next_hop_entities(state: Mapping[str, Any]) -> list[str]:
    """The entities the state's next open hop asks about (none without a chain)."""
    hops = state.get("hops") or []
    index = next_open_hop(hops)
    return hop_entities(hops, index) if index is not None else []


def next_hop_search(state: Mapping[str, Any]) -> tuple[str, str] | None:
    """The next open hop's question (answers written in) and its last search, or None."""
    hops = state.get("hops") or []
    index = next_open_hop(hops)
    if index is None:
        return None
    text = hop_text(hops, index)
    return text, (hops[index]["queries"] or [text])[-1]


def note_search(hops: Sequence[Hop], query: str) -> list[Hop]:
    """The hops with ``query`` recorded as a search of the next open hop."""
    index = next_open_hop(hops)
    updated = [Hop(**hop) for hop in hops]  # type: ignore[typeddict-item]
    if index is not None:
        updated[index]["queries"] = [*updated[index]["queries"], query]
    return updated


def sub_questions_of(hops: Sequence[Hop]) -> list[SubQuestion]:
    """The hops as the state's sub-questions (resolved text, answer or None)."""
    answers = _answers(hops)
    return [SubQuestion(question=hop_text(hops, i), answer=answers[i]) for i in range(len(hops))]


# ------------------------------------------------------------------------------ passages


def passages_for(hops: Sequence[Hop], index: int, evidence: Sequence[Document]) -> list[Document]:
    """The passages to show for hop ``index``: those about its entity, then those naming it;
    with no entity, the passages its own searches found, else the first of the evidence."""
    hop = hops[index]
    names = hop_entities(hops, index)
    if names:
        own = [d for d in evidence if any(about(d, n) for n in names)]
        if hop["via"] or (not own and not hop["queries"]):
            # An entity the hop goes on through is read from its own passages; an entity with
            # no passage of its own yet is searched before the generator is asked.
            return own[:MAX_HOP_PASSAGES]
        naming = [
            d for d in evidence if d not in own and any(mentions(passage_text(d), n) for n in names)
        ]
        return (own + naming)[:MAX_HOP_PASSAGES]
    searched = set(hops[index]["queries"])
    own = [d for d in evidence if d.get("query") in searched]
    return (own or list(evidence))[:MAX_HOP_PASSAGES]


def _offers_choice(text: str) -> bool:
    """Whether ``text`` asks to choose among names it gives ("A or B"). "Between A and B, who
    is older?" is left out on purpose: its one-hop plan is answered by the model's judgement
    over a sentence that only names the person (a guess); measured on a reworded held-out
    world, allowing it turned an abstention into a wrong answer."""
    return " or " in f" {text.lower()} "


_ASKS_A_NAME = re.compile(r"\bnames?\b|\bcalled\b", re.IGNORECASE)


def repeats_a_given_name(answer: str, hop_question: str, question: str) -> bool:
    """Whether ``answer`` is an entity the hop (or, for a question offering no choice, the
    question) already names: the generator repeated its subject instead of answering. A name
    of two words or more counts as repeated inside a longer one too ("Kasper Peter Schmeichel"
    for "the father of Kasper Schmeichel"), unless the question asks for a name ("full
    name", "called")."""
    wanted = normalised(answer)
    if not wanted:
        return False
    words = set(wanted.split())
    texts = [hop_question] if _offers_choice(question) else [hop_question, question]
    for text in texts:
        if _offers_choice(text):
            continue  # "Who is older, A or B?": one of its own names is the answer
        asks_a_name = bool(_ASKS_A_NAME.search(text))
        for entity in question_entities(text):
            given = normalised(entity).split()
            if given == wanted.split() or (
                len(given) >= 2
                and not asks_a_name
                and set(given) <= words
                and not _within_the_given(answer, entity)
            ):
                return True
    return False


def _within_the_given(answer: str, entity: str) -> bool:
    """Whether an answer holding a given name is a part of it or a place in it, not the name
    again: the words it adds are lower-case ("western New York" for "what part of New
    York"), or it ends with the name after a comma ("Teaneck, New Jersey")."""
    given = set(normalised(entity).split())
    added = [word for word in answer.split() if normalised(word) not in given]
    if added and all(word[:1].islower() for word in added):
        return True
    head, comma, tail = answer.rpartition(",")
    return bool(comma and head.strip() and normalised(tail) == normalised(entity))


# ------------------------------------------------------------------------------ resolving


def _ask(
    llm: LLMClient,
    text: str,
    passages: Sequence[Document],
    facts: Sequence[str],
    ruled_out: Sequence[str] = (),
    *,
    yes_no: bool = False,
) -> tuple[str | None, Usage]:
    reply, usage = llm.structured(
        prompts.hop_messages(text, passages, facts, ruled_out, yes_no=yes_no),
        prompts.AnswerReply,
        max_tokens=prompts.HOP_MAX_TOKENS,
    )
    value = reply.answer if reply is not None else None
    # "the Democratic Party's": the name, not the possessive the sentence put it in.
    answer = "" if value is None else POSSESSIVE.sub("", value.strip().rstrip("."))
    if (
        not answer
        or answer.upper().startswith(prompts.UNKNOWN)
        or answer.lower().startswith(prompts.INSUFFICIENT_EVIDENCE)
        or "#" in answer
    ):
        return None, usage
    return answer[:200], usage


def judge_answer(
    answer: str,
    hops: Sequence[Hop],
    index: int,
    question: str,
    docs: Sequence[Document],
    *,
    bridge_named: bool = True,
) -> tuple[Statement | None, str, str | None]:
    """Whether ``answer`` stands for hop ``index``: (the statement, why, an entity of another
    class to extend the hop through). ``bridge_named``: a hop that goes on from an earlier
    answer stands only on a passage that names that answer (off: measured without it)."""
    hop = hops[index]
    text = hop_text(hops, index)
    if not kind_fits(answer, hop["expects"]):
        return None, f"{answer!r} is not a {hop['expects']}", None
    if repeats_a_given_name(answer, text, question) or any(
        normalised(answer) == normalised(v) for v in hop["via"]
    ):
        return None, f"{answer!r} repeats an entity the question names", None
    # A hop going on from an earlier answer ("Who founded #1?") does not give that answer back;
    # a hop of its own (a second description of the same entity: "... founded by an
    # industrialist who became known as ...") may find the same one.
    earlier = {normalised(h["answer"] or "") for h in hops[:index] if h["status"] == "resolved"}
    if (
        normalised(answer) in earlier
        and REFERENCE.search(hop["question"])
        and hop["expects"] not in ("date", "number", "yes/no")
    ):
        return None, f"{answer!r} is an earlier hop's answer", None
    if is_yes_no(answer):
        if hop["expects"] != "yes/no":
            return None, f"{answer!r} does not answer a {hop['expects']} question", None
        # A yes/no stands on a passage about the hop's entity: one that only names it in
        # passing (a crewmate's page) does not describe it.
        names = hop_entities(hops, index)
        found = next((d for d in docs if not names or any(about(d, n) for n in names)), None)
        if found is None:
            return None, "no passage about the hop's entity", None
        return Statement(str(found.get("id", "")), ""), "yes/no over its entity's passages", None
    names = hop_entities(hops, index)
    bridges = [] if hop["via"] or not bridge_named else bridge_answers(hops, index)
    # "What did #1 win a Tony for?": a Tony winner's passage that never names #1 states
    # nothing about #1, so only passages naming an earlier answer the hop goes on from count.
    naming = [doc for doc in docs if names_a_bridge(doc, bridges)] if bridges else docs
    statement = find_statement(answer, names, naming) or _stated_in_its_own(
        answer, text, names, naming
    )
    if statement is None:
        if bridges and find_statement(answer, names, docs) is not None:
            return None, f"{answer!r} is stated in a passage that does not name {bridges[0]}", None
        return None, f"no sentence states {answer!r} about {', '.join(names) or 'it'}", None
    unstated = _shared_but_not_stated(answer, text, names, docs)
    if unstated is not None:
        return None, f"{answer!r} is asked of both; no sentence states it about {unstated}", None
    if repeats_a_given_name(whole_name(answer, statement.sentence), text, question):
        return None, f"{answer!r} is, written whole, an entity the question names", None
    label = label_of(answer, statement.sentence)
    if label and _other_class(label, hop):
        asked = hop["type_noun"] or hop["expects"]
        return statement, f"{answer!r} is a {label}, not a {asked}", answer
    return statement, "stated", None


def _stated_in_its_own(
    answer: str, text: str, names: Sequence[str], docs: Sequence[Document]
) -> Statement | None:
    """A sentence of the answer's own passage that names the hop's entity by the hop's own
    relation while going on about the answer ("He played Jerry Lee Lewis in Walk the Line." in
    Waylon Payne's passage for "Who played Jerry Lee Lewis in Walk the Line?"): the statement
    read the other way round. Only for a name as the answer and a hop that names its entity
    and a relation word ("She works at X" is no answer to "Who founded X?")."""
    relation = _stems(text) - _stems(" ".join(names))
    if not names or not relation or not answer[:1].isupper():
        return None
    own = [doc for doc in docs if about(doc, answer)]
    for name in names:
        found = find_statement(name, [answer], own)
        if found is not None and relation & _stems(found.sentence):
            return found
    return None


def _stems(text: str) -> set[str]:
    """The content words of ``text`` cut to 5 letters ("played" and "plays" alike)."""
    return {word[:5] for word in content_words(text)}


_SHARED = re.compile(r"\bboth\b|\bin common\b|\bshared?\b", re.IGNORECASE)


def _shared_but_not_stated(
    answer: str, text: str, names: Sequence[str], docs: Sequence[Document]
) -> str | None:
    """For a hop that asks what two things share ("... used in both A and B?", "What do A and
    B have in common?"), the first of them with a passage of its own among ``docs`` that no
    sentence states ``answer`` about (None: each does, or it asks nothing shared). One
    passage stating it about one of them is the model answering for that one alone (a
    family of one plant for "the group both plants belong to")."""
    if not _SHARED.search(text):
        return None
    own = [name for name in names if any(about(doc, name) for doc in docs)]
    if len(own) < 2:
        return None
    return next((name for name in own if find_statement(answer, [name], docs) is None), None)


def _other_class(label: str, hop: Hop) -> bool:
    """Whether a sentence's class noun for an answer (``label``) names another class than the
    hop asks for: another class of the same kind (a city for a country), or another kind (a
    company for a person)."""
    found = entity_class(label)
    if found is None:
        return False
    wanted = entity_class(hop["type_noun"]) if hop["type_noun"] else None
    if wanted is not None:
        return found != wanted
    return hop["expects"] in ("person", "place", "organisation", "date", "number") and (
        KIND_OF_CLASS[found] != hop["expects"]
    )


def resolve_hops(
    hops: Sequence[Hop],
    question: str,
    evidence: Sequence[Document],
    llm: LLMClient,
) -> tuple[list[Hop], Usage, list[HopQuestion]]:
    """Resolve the open hops, in order, from ``evidence``; each hop is asked only over passages
    it was not shown before. Returns the hops, the model usage and one record per question
    asked (hop, text, answer, verdict)."""
    hops = [Hop(**hop) for hop in hops]  # type: ignore[typeddict-item]
    usage = NO_USAGE
    log: list[HopQuestion] = []
    while True:
        index = next_open_hop(hops)
        if index is None:
            break
        hop = hops[index]
        docs = passages_for(hops, index, evidence)
        fresh = [d for d in docs if d["id"] not in hop["asked"]]
        if not fresh:
            hop["why"] = "no passage about its entity yet" if not docs else "not stated yet"
            closing_usage, again = _close_or_reopen(hops, index, question, evidence, llm, log)
            usage += closing_usage
            if again:
                continue  # the hop starts again from its source's new answer
            break
        hop["asked"] = [*hop["asked"], *(d["id"] for d in fresh)]
        known = _stated_earlier_answer(hops, index, question, docs)
        if known is not None:
            # Two descriptions of one entity ("Which man who presented the bid was born on
            # October 22, 1930?"): the second is stated of the first's answer; no model call.
            answer, statement = known
            hop.update(
                status="resolved",
                answer=answer,
                passage=statement.passage,
                sentence=statement.sentence,
                why="stated: an earlier hop's answer (no question asked)",
            )
            continue
        asked = asked_question(hops, index)
        answer, call_usage = _ask(
            llm, asked, docs, hop["via_sentences"], yes_no=hop["expects"] == "yes/no"
        )
        usage += call_usage
        entry: HopQuestion = {"hop": index + 1, "question": asked, "answer": answer}
        log.append(entry)
        # A small model may answer with a sentence ("X was born in Drumena."): the one name
        # in it that stands is the answer.
        named = None if answer is None else _name_that_stands(answer, hops, index, question, docs)
        if named is not None:
            answer, (statement, why, through) = named
            entry["answer"] = answer
        else:
            statement, why, through = (
                (None, "the passages about its entity do not state it", None)
                if answer is None
                else judge_answer(answer, hops, index, question, docs)
            )
        entry["verdict"] = why
        if statement is None and through is None:
            # Asked for a place of one class (a country), the entity's own passage may name a
            # place of another (its city): the hop goes on through that place.
            found = _place_to_go_through(hops, index, docs)
            if found is not None:
                through, statement = found
                label = label_of(through, statement.sentence)
                why = f"{why}; its passage names the {label} {through}"
                entry["verdict"] = why
        if through is not None and statement is not None:
            # A hidden hop: go on from the entity the sentence named.
            hop["via"] = [*hop["via"], through]
            hop["via_sentences"] = [*hop["via_sentences"], statement.sentence]
            hop["asked"] = []
            hop["why"] = f"extended through {through} ({why})"
            continue
        if statement is None:
            if answer is not None:
                hop["rejected"] = [*hop["rejected"], Rejection(answer=answer, why=why)]
            hop["why"] = why
            closing_usage, again = _close_or_reopen(hops, index, question, evidence, llm, log)
            usage += closing_usage
            if again:
                continue  # the hop starts again from its source's new answer
            break
        hop.update(
            status="resolved",
            answer=whole_name(answer, statement.sentence),
            passage=statement.passage,
            sentence=statement.sentence,
            why=why,
        )
    return hops, usage, log


def _stated_earlier_answer(
    hops: Sequence[Hop], index: int, question: str, docs: Sequence[Document]
) -> tuple[str, Statement] | None:
    """For a hop of its own (it refers to no earlier hop) asking for a name of the kind an
    earlier hop found, that earlier answer with the sentence stating it about this hop's
    entity, when one stands (:func:`judge_answer`): the question described one entity twice."""
    hop = hops[index]
    if REFERENCE.search(hop["question"]) or hop["expects"] not in _NAME_KINDS:
        return None
    for earlier in hops[:index]:
        if earlier["status"] != "resolved" or earlier["expects"] != hop["expects"]:
            continue
        answer = earlier["answer"] or ""
        statement, _, through = judge_answer(answer, hops, index, question, docs)
        if statement is not None and through is None and statement.sentence:
            return answer, statement
    return None


_NAME_KINDS = ("person", "organisation", "place")


def rejected_answers(hop: Hop) -> list[str]:
    """The answers hop ``hop`` turned down (its ``rejected`` entries, less the why)."""
    return [entry["answer"] for entry in hop["rejected"]]


def _name_that_stands(
    reply: str, hops: Sequence[Hop], index: int, question: str, docs: Sequence[Document]
) -> tuple[str, tuple[Statement | None, str, str | None]] | None:
    """For a reply written as a sentence (four words or more), the one name in it, other than
    the whole reply, that stands for hop ``index`` (:func:`_judge`), with its verdict; None
    when none or several do (a long name given alone is judged as it is)."""
    if len(reply.split()) < 4:
        return None
    standing = []
    names = [n for n in question_entities(f"_ {reply}") if normalised(n) != normalised(reply)]
    for name in dict.fromkeys(names):
        verdict = judge_answer(name, hops, index, question, docs)
        if verdict[0] is not None and verdict[2] is None:
            standing.append((name, verdict))
    return standing[0] if len(standing) == 1 else None


def _close_or_reopen(
    hops: list[Hop],
    index: int,
    question: str,
    evidence: Sequence[Document],
    llm: LLMClient,
    log: list[HopQuestion],
) -> tuple[Usage, bool]:
    """Fail hop ``index`` when its searches are spent, and then reopen the hop it depends on
    (:func:`_reopen_source`, its question logged); whether hop ``index`` starts again."""
    _close_if_spent(hops, index)
    if hops[index]["status"] != "failed":
        return NO_USAGE, False
    usage, reopened = _reopen_source(hops, index, question, evidence, llm)
    if reopened is not None:
        log.append(reopened)
    return usage, reopened is not None and reopened["verdict"] == "stated"


def _reopen_source(
    hops: list[Hop], index: int, question: str, evidence: Sequence[Document], llm: LLMClient
) -> tuple[Usage, HopQuestion | None]:
    """Hop ``index`` failed: the earlier hop whose answer it asks about may have named the
    wrong entity (a cast list names several actresses; a later hop finds nothing about the
    one taken). That hop is asked once more over its own passages with its answer ruled out;
    a new answer that stands replaces it and hop ``index`` starts again. Returns the usage
    and the record of the question asked (None: nothing to reopen)."""
    sources = sorted({int(n) - 1 for n in REFERENCE.findall(hops[index]["question"])})
    source_index = sources[-1] if sources else None
    if source_index is None or not 0 <= source_index < index:
        return NO_USAGE, None
    source = hops[source_index]
    if source["status"] != "resolved" or source.get("reopened"):
        return NO_USAGE, None
    source["reopened"] = True
    old = source["answer"] or ""
    ruled_out = [old, *rejected_answers(source)]
    text = hop_text(hops, source_index)
    docs = passages_for(hops, source_index, evidence)
    answer, usage = _ask(
        llm, text, docs, source["via_sentences"], ruled_out, yes_no=source["expects"] == "yes/no"
    )
    entry: HopQuestion = {"hop": source_index + 1, "question": text, "answer": answer}
    statement, why = None, "the passages state no other answer"
    if answer is not None and normalised(answer) in {normalised(r) for r in ruled_out}:
        why = f"{answer!r} was ruled out"
    elif answer is not None:
        statement, why, through = judge_answer(answer, hops, source_index, question, docs)
        statement = statement if through is None else None
    entry["verdict"] = why
    if statement is None:
        return usage, entry
    failed = hops[index]
    source.update(
        answer=whole_name(answer or "", statement.sentence),
        passage=statement.passage,
        sentence=statement.sentence,
        rejected=[
            *source["rejected"],
            Rejection(answer=old, why=f"hop {index + 1} found nothing about it"),
        ],
        why=f"stated (reopened: hop {index + 1} found nothing about {old})",
    )
    failed.update(status="open", queries=[], asked=[], via=[], via_sentences=[], why="")
    return usage, entry


def _place_to_go_through(
    hops: Sequence[Hop], index: int, docs: Sequence[Document]
) -> tuple[str, Statement] | None:
    """For a hop asking for a place of one class, the one place of another class that a
    sentence of its entity's own passages names ("born in the city of Prynvale" for "In which
    country was X born?"), with that sentence; None when there is none or more than one."""
    hop = hops[index]
    wanted = entity_class(hop["type_noun"]) if hop["type_noun"] else None
    if hop["expects"] != "place" or wanted is None:
        return None
    names = hop_entities(hops, index)
    known = {normalised(v) for v in hop["via"]} | {normalised(n) for n in names}
    found: dict[str, Statement] = {}
    names_by_key: dict[str, str] = {}
    for doc in docs:
        if not any(about(doc, name) for name in names):
            continue
        for sentence in sentences(str(doc.get("text", ""))):
            for noun, name in labelled_names(sentence):
                cls = entity_class(noun)
                if cls is None or cls == wanted or KIND_OF_CLASS[cls] != "place":
                    continue
                if normalised(name) not in known:
                    found.setdefault(normalised(name), Statement(str(doc["id"]), sentence))
                    names_by_key.setdefault(normalised(name), name)
    if len(found) != 1:
        return None
    key, statement = next(iter(found.items()))
    return names_by_key[key], statement


def searches_left(hops: Sequence[Hop], index: int) -> int:
    """Searches hop ``index`` may still take: :data:`SEARCHES_PER_HOP`, plus one per entity it
    was extended through, less those taken. The one hop of a one-hop plan gets no rewritten
    retry: its question was the run's own first search, and the reader answers from what that
    found (one-hop questions stay about as cheap as reading)."""
    hop = hops[index]
    allowed = (SEARCHES_PER_HOP if len(hops) > 1 else 1) + len(hop["via"])
    return allowed - len(hop["queries"])


def hop_to_close(hops: Sequence[Hop]) -> int | None:
    """The next open hop when its searches are all spent (None: there is none): a check with
    no new evidence still has it to close, and the hop its question depends on to reopen."""
    index = next_open_hop(hops) if hops and not chain_failed(hops) else None
    return index if index is not None and searches_left(hops, index) <= 0 else None


def _close_if_spent(hops: Sequence[Hop], index: int) -> None:
    """Fail hop ``index`` when its searches are all spent."""
    hop = hops[index]
    if searches_left(hops, index) <= 0:
        hop["status"] = "failed"
        hop["why"] = f"{hop['why']}; its {len(hop['queries'])} searches are spent"

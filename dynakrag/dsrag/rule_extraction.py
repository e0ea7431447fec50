"""The rule extraction (``dsrag_extraction="rules"``) and the rules' repair of model replies.

The rule path reads a question without a model: EPQD's rule decomposition, the rule graph
extractor and Algorithms 1-2 (:func:`rule_analysis`). It is written around the DS-RAG
benchmark's two templates (a ranking and a comparison of listed people): there it gives one
criterion per person.

The same rules repair a model's analysis reply (:func:`repaired_targets`, called by
:func:`dynakrag.dsrag.extraction.model_analysis`; what each repair does is listed under
``repaired`` in that module's docstring): a question ordering people by age asks each one's
birth date, a sub-question that does not name its own entity is rewritten, in a comparison of
listed entities an item made of a description's name is dropped, and names the reply left out
are added from the rule graph and from the question's lists.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import replace

from dynakrag.dsrag.analysis import (
    AnalysisMethod,
    QuestionAnalysis,
    Target,
    fact_question,
    unique_targets,
)
from dynakrag.dsrag.criteria import CriteriaResult, criteria_for_question
from dynakrag.dsrag.epqd import rule_decompose
from dynakrag.dsrag.question_graph import (
    ATTRIBUTE_PHRASES,
    RuleGraphExtractor,
    name_spans,
    normalize_entity,
)
from dynakrag.llm.client import NO_USAGE, Usage

__all__ = [
    "AGE_FACTS",
    "AGE_ORDER",
    "BIRTH_DATE",
    "repaired_targets",
    "rule_analysis",
    "rule_targets",
]

BIRTH_DATE = ("birth date", "When was {entity} born?")
"""The fact, and its sub-question, that texts state about a person's age."""
AGE_FACTS = frozenset({"age", "ages", "how old", "birth order", "birth year"})
"""Facts of a target that are read from the birth date."""
AGE_ORDER = re.compile(
    r"\b(?:young|old|eld)(?:er|est)\b"
    r"|\bborn\s+(?:(?:the\s+)?(?:first|second|third|fourth|fifth|last)|earlier|later|earliest"
    r"|latest|before|after)\b"
    r"|\b(?:earliest|latest|earlier|later)\s+(?:birth|born)",
    re.I,
)
"""A question that orders people by age ("the youngest", "born second", "the earliest birth
date"): what it needs of each person is the birth date, whatever a reply asks instead."""


def rule_targets(criteria: CriteriaResult, *, list_items_only: bool = True) -> list[Target]:
    """The targets the rule path found: the anchors of the core's branches (a ranking's or
    comparison's list items), asking the core's text; with ``list_items_only=False`` and no
    core, each sub-question's anchor, asking nothing known (``asks=""``). Anchors that are
    question words or whole sentences are skipped."""
    branched = criteria.fallback is None and criteria.core is not None
    if not branched and list_items_only:
        return []
    core_text = ""
    if branched:
        core = criteria.graph.node(criteria.core)  # type: ignore[arg-type]
        core_text = "" if core.is_question_word else core.text
    targets: list[Target] = []
    for criterion in criteria.criteria:
        by_key = {node.key: node for node in criterion.nodes}
        anchor = by_key.get(criterion.anchor)
        if anchor is None or anchor.is_question_word or anchor.text in criteria.sub_questions:
            continue
        others = [
            n.text
            for n in criterion.nodes
            if n.key not in (criterion.core, criterion.anchor) and not n.is_question_word
        ]
        details = tuple(dict.fromkeys(t for t in others if t not in (core_text, anchor.text)))
        question = next(
            (q for q in criteria.sub_questions if anchor.text.casefold() in q.casefold()),
            f"What is the {core_text or 'fact asked'} of {anchor.text}?",
        )
        targets.append(Target(anchor.text, core_text, question, details, source="rules"))
    return unique_targets(targets)


def rule_analysis(
    question: str,
    sub_questions: Sequence[str] | None = None,
    *,
    hops: int | None = None,
    method: AnalysisMethod = "rules",
    usage: Usage = NO_USAGE,
    notes: Sequence[str] = (),
) -> QuestionAnalysis:
    """The rule path: EPQD's rule decomposition (unless sub-questions are given), the rule
    graph extractor and Algorithms 1-2; no model call."""
    text = str(question or "").strip()
    given = tuple(sub_questions or ())
    subs = given or rule_decompose(text).sub_questions
    criteria = criteria_for_question(text, subs, RuleGraphExtractor(), hops)
    targets = rule_targets(criteria, list_items_only=False)
    return QuestionAnalysis(
        text, criteria.sub_questions, criteria, method, tuple(targets), usage, tuple(notes), given
    )


def repaired_targets(
    question: str,
    given: Sequence[str],
    targets: list[Target],
    notes: list[str],
    hops: int | None,
) -> list[Target]:
    """The rules' repair of the targets read from a model's reply (see the module doc), each
    change noted in ``notes``; ``[]`` when no target survives (the caller then falls back to
    the whole rule path)."""
    split = _joined_names_split(question, targets, notes)
    kept = _description_items_dropped(question, _aligned(question, split, notes), notes)
    if not kept:
        return []
    return kept + _left_out(question, given, kept, notes, hops)


def _covers(target: Target, name: str) -> bool:
    key = normalize_entity(name)
    names = [normalize_entity(n) for n in (target.entity, *target.details)]
    return any(key and n and (key in n or n in key) for n in names)


_LIST_SEPARATOR = re.compile(r"\s*(?:,\s*(?:and|or)?|;|and|or|&|as well as|nor)\s*", re.I)
_JOINED = re.compile(r"\s*(?:,\s*(?:and\s+)?|\band\b|&)\s*", re.I)


def _joined_names_split(question: str, targets: list[Target], notes: list[str]) -> list[Target]:
    """One target per name where the reply joined several into one ("Taylor Swift and Chris
    Hemsworth": a ranking of three then holds two). It is split only when every part is a
    name of two or more words that the question writes: one-word parts are one name more
    often than two ("Procter & Gamble", "Tunnels and Trolls", "Simon and Garfunkel")."""
    names = {normalize_entity(span.text) for span in name_spans(question)}
    out: list[Target] = []
    for target in targets:
        parts = [part for part in _JOINED.split(target.entity) if part.strip()]
        if len(parts) < 2 or any(
            normalize_entity(part) not in names or len(part.split()) < 2 for part in parts
        ):
            out.append(target)
            continue
        notes.append(f"{target.entity!r}: {len(parts)} names in one item, split")
        out += [
            replace(target, entity=part, question=fact_question(part, target.asks), details=())
            for part in parts
        ]
    return out


def _aligned(question: str, targets: list[Target], notes: list[str]) -> list[Target]:
    """Targets asking what the question needs of them: the birth date of each person in a
    question that orders people by age (:data:`AGE_ORDER`, when the reply asks the age or
    birth date of one of them), or where a reply asks an age (:data:`AGE_FACTS`); and a
    sub-question that names its own entity and no other target's (a small model sometimes
    copies the whole question, or leaves the name out)."""
    # The cue alone is not enough: a description may say "the eldest of three siblings". It
    # counts when the reply itself asks some person's age or birth date.
    ages = {BIRTH_DATE[0], *AGE_FACTS}
    asks_age = any(normalize_entity(t.asks) in ages for t in targets)
    by_age = len(targets) > 1 and asks_age and AGE_ORDER.search(question) is not None
    names = [normalize_entity(t.entity) for t in targets]
    out = []
    for target, name in zip(targets, names, strict=True):
        asks, sub_question = target.asks, target.question
        if (by_age or normalize_entity(asks) in AGE_FACTS) and asks != BIRTH_DATE[0]:
            notes.append(f"{target.entity!r}: asked for the birth date, not {asks!r}")
            asks, sub_question = BIRTH_DATE[0], BIRTH_DATE[1].format(entity=target.entity)
        text = normalize_entity(sub_question)
        others = [other for other in names if other != name and other and other in text]
        if name not in text or others:
            notes.append(f"{target.entity!r}: sub-question {sub_question!r} rewritten")
            birth = asks == BIRTH_DATE[0]
            sub_question = (
                BIRTH_DATE[1].format(entity=target.entity)
                if birth
                else fact_question(target.entity, asks)
            )
        out.append(replace(target, asks=asks, question=sub_question))
    return unique_targets(out)


def _in_one_list(question: str, entities: Sequence[str]) -> set[str]:
    """``entities`` and every name of ``question`` joined to one of them, directly or through
    such names, by list separators only ("A, B and C")."""
    spans = name_spans(question)
    keys = [normalize_entity(span.text) for span in spans]
    listed = {normalize_entity(e) for e in entities}
    joined = [
        _LIST_SEPARATOR.fullmatch(question[spans[i - 1].end : spans[i].start]) is not None
        for i in range(1, len(spans))
    ]
    grown = True
    while grown:
        grown = False
        for i, linked in enumerate(joined, start=1):
            pair = {keys[i - 1], keys[i]}
            if linked and len(pair & listed) == 1:
                listed |= pair
                grown = True
    return listed


def _description_items_dropped(
    question: str, targets: list[Target], notes: list[str]
) -> list[Target]:
    """Targets a reply made of names from a description (the prompt says such names are
    details): when most targets ask one fact, a question comparing or ranking the entities
    listed in it, a target asking another fact whose name is not in that list is dropped."""
    if len(targets) < 3:
        return targets
    asks, count = Counter(normalize_entity(t.asks) for t in targets).most_common(1)[0]
    if count <= len(targets) - count:
        return targets
    compared = [t.entity for t in targets if normalize_entity(t.asks) == asks]
    listed = _in_one_list(question, compared)
    kept = []
    for target in targets:
        outside = normalize_entity(target.entity) not in listed
        if normalize_entity(target.asks) != asks and outside:
            notes.append(f"{target.entity!r} is not among the entities compared: dropped")
            continue
        kept.append(target)
    return kept


def _list_neighbours(question: str, targets: Sequence[Target]) -> list[str]:
    """Names of ``question`` that follow an entity of the reply in one list ("A, B and C",
    "A or B"): only list separators stand between them and that entity (or such a name).
    Names before it and names after its describing words are left alone: they may be places
    of a description ("born in Wapakoneta, Ohio")."""
    spans = name_spans(question)
    entities = [normalize_entity(t.entity) for t in targets]
    listed = [normalize_entity(span.text) in entities for span in spans]
    found: list[str] = []
    for i in range(1, len(spans)):
        between = question[spans[i - 1].end : spans[i].start]
        if listed[i - 1] and not listed[i] and _LIST_SEPARATOR.fullmatch(between):
            listed[i] = True
            found.append(spans[i].text)
    return found


def _asks_attribute(criteria: CriteriaResult, asks: str) -> bool:
    """Whether the rule graph's core is an attribute: a known attribute phrase ("born date",
    "nationality") or the fact the reply asks."""
    if criteria.fallback is not None or criteria.core is None:
        return False
    core = criteria.graph.node(criteria.core)
    known = {normalize_entity(phrase) for phrase in (*ATTRIBUTE_PHRASES, asks)}
    return not core.is_question_word and normalize_entity(core.text) in known


def _left_out(
    question: str,
    given: Sequence[str],
    targets: Sequence[Target],
    notes: list[str],
    hops: int | None,
) -> list[Target]:
    """The repair of a partial reply: targets for the names the reply left out (see the
    module doc), each noted; they ask what most of the reply's targets ask."""
    source = " ".join([question, *given])
    names = {normalize_entity(span.text) for span in name_spans(source)}
    asks = Counter(t.asks for t in targets).most_common(1)[0][0]
    rules = rule_analysis(question, given, hops=hops).criteria
    # Outside the templates the rules' core is often a name of a description ("Ohio"): their
    # list items count only when the core is an attribute the question asks about.
    trusted = bool(given) or _asks_attribute(rules, asks)
    candidates = [
        replace(candidate, asks=asks)
        for candidate in (rule_targets(rules, list_items_only=not given) if trusted else [])
        if normalize_entity(candidate.entity) in names
    ]
    candidates += [
        Target(name, asks, fact_question(name, asks), source="rules")
        for name in _list_neighbours(question, targets)
    ]
    added: list[Target] = []
    for candidate in candidates:
        if not any(_covers(t, candidate.entity) for t in (*targets, *added)):
            added.append(candidate)
            notes.append(f"added {candidate.entity!r} from the rules (the reply left it out)")
    return added

"""The DS-RAG question analysis: ONE schema-constrained model call per question, rules as repair.

The paper's extraction (:class:`~dynakrag.dsrag.epqd.EPQD`, then
:class:`~dynakrag.dsrag.question_graph.LLMGraphExtractor` on every sub-question) costs one call
for the decomposition plus two per sub-question, and a small model's graphs rarely give one
criterion per person. The rule path gives one per person on the benchmark's two templates only.
This module asks the generator once (:func:`dynakrag.prompts.analysis_messages`, reply
constrained by :data:`dynakrag.prompts.ANALYSIS_SCHEMA`) for the *targets* of a question: each
entity it asks about, the fact asked (``asks``), the names describing it (``details``) and one
sub-question. A ranking or comparison of several people gives one target per person, however
the question is worded ("Which of A, B and C is the youngest?").

Targets become the same structures the rule and paper paths give: one
:class:`~dynakrag.dsrag.question_graph.Extraction` per target, with nodes ``question word ->
asks -> entity -> details`` (keys ordered question word, asks, details, entity, so the entity is
the anchor of the per-sub-question fallback), merged (Step 3; targets asking the same fact share
its node, which becomes the core), then Algorithms 1-2
(:func:`~dynakrag.dsrag.criteria.criteria_for_graph`). When the core's branches are not the
targets' entities (a merge joined two targets through a shared name), the criteria are one per
target instead (``fallback`` = :data:`FALLBACK_PER_TARGET`). Either way there is one criterion
per entity asked about, anchored at that entity: the shape the GS selector was trained on.

How an analysis was obtained (``QuestionAnalysis.method``):

``llm``
    every target of the reply was used as it came.
``repaired``
    the reply was usable but partial: targets whose entity is not in the question (or the
    given sub-questions) were dropped, names describing an entity that are not in the text
    were dropped, a question ordering people by age asks each one's birth date, a sub-question
    that does not name its entity (or names another target's) is rewritten from the entity and
    the fact, in a comparison of listed entities an item made of a description's name is
    dropped, and names the reply left out were added (``Target.source == "rules"``):
    a name that follows an entity of the reply in one list ("A, B and C"); the branches of the
    rule graph's core (a templated ranking's or comparison's list items) when that core is an
    attribute the question asks about (outside the templates the rules' core is often a name
    of a description); with given sub-questions, the anchor of each sub-question's own
    criterion. Every change is a line of ``notes``.
``fallback``
    no usable reply (the request failed, the reply was not the asked JSON, or no target of it
    survived): the whole rule path.
``rules``
    the rule path was chosen (``dsrag_extraction="rules"``, no model, or ``auto`` without a
    usable model).

``dsrag_extraction`` (:func:`uses_model`): ``llm`` always asks the model (rules repair its
replies); ``rules`` never does; ``auto`` asks it when a model is configured and its replies come
back in the schema: it takes the rules when there is no model, when every request to the model
so far failed, or once the model's first :data:`AUTO_GIVE_UP_AFTER` analysis replies were all
unusable (counted per client). ``auto`` also reads the sub-questions the controller already has
(the sufficiency check's, written by the model one entity each) with the rules, unless they
came from an analysis it remembers: in the graph, a second reading of them would cost a call
of about 600 prompt tokens at every compression (:func:`compression_model_calls`).

Analyses are memoised per client (an LRU of :data:`MEMO_SIZE`): asking again about the same
question costs nothing, and when the graph's compression asks with the sub-questions an earlier
analysis of the question produced (``decomposition="epqd"``: the sufficiency check's parts), that
analysis is reused (``reused``). :func:`compression_model_calls` gives the calls DICS compression
makes, for the controller's cost ``c(s, a)``.
"""

from __future__ import annotations

import logging
import re
import threading
import weakref
from collections import Counter, OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from dynakrag import prompts
from dynakrag.configuration import Configuration, DsragExtractionName
from dynakrag.decomposition import REFERENCE
from dynakrag.dsrag.criteria import (
    CriteriaResult,
    criteria_for_graph,
    criteria_for_question,
    per_sub_question_criteria,
)
from dynakrag.dsrag.epqd import rule_decompose
from dynakrag.dsrag.question_graph import (
    ATTRIBUTE_PHRASES,
    Extraction,
    GraphExtraction,
    RuleGraphExtractor,
    merge_extractions,
    name_spans,
    normalize_entity,
    question_word_span,
)
from dynakrag.dsrag.types import QEdge, QNode
from dynakrag.llm.client import NO_USAGE, LLMClient, Usage

__all__ = [
    "AUTO_GIVE_UP_AFTER",
    "FALLBACK_PER_TARGET",
    "QuestionAnalysis",
    "Target",
    "analyse_question",
    "compatible_sub_questions",
    "compression_model_calls",
    "graph_of_targets",
    "model_analysis",
    "rule_analysis",
    "rule_targets",
    "uses_model",
]

logger = logging.getLogger(__name__)

AnalysisMethod = Literal["llm", "repaired", "rules", "fallback"]

AUTO_GIVE_UP_AFTER = 3
"""``auto`` takes the rules once a client's first this-many analysis replies were unusable."""
MEMO_SIZE = 512
"""Analyses remembered per client."""
AUTO_GIVEN = "auto: the controller's own sub-questions are read by the rules (no call)"
FALLBACK_PER_TARGET = "the core's branches are not the entities asked about: one per entity"
DEFAULT_QUESTION_WORD = "What"
"""The question-word node of a target whose sub-question opens with none."""
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


@dataclass(frozen=True)
class Target:
    """One entity a question asks about: what is asked of it, the names describing it, and
    the sub-question that asks it."""

    entity: str
    asks: str
    question: str
    details: tuple[str, ...] = ()
    source: Literal["model", "rules"] = "model"

    def record(self) -> dict[str, Any]:
        """JSON-safe form for traces and benchmark records."""
        return {
            "entity": self.entity,
            "asks": self.asks,
            "question": self.question,
            "details": list(self.details),
            "source": self.source,
        }


@dataclass(frozen=True)
class QuestionAnalysis:
    """Sub-questions, targets and selection criteria of one question, and how they were made."""

    question: str
    sub_questions: tuple[str, ...]
    criteria: CriteriaResult
    method: AnalysisMethod
    targets: tuple[Target, ...] = ()
    usage: Usage = NO_USAGE
    notes: tuple[str, ...] = ()
    given: tuple[str, ...] = field(default=())
    """The sub-questions the caller gave (empty: the analysis wrote its own)."""
    reused: bool = False
    """True when a memoised analysis answered without a model call."""

    def record(self) -> dict[str, Any]:
        """JSON-safe summary for traces and benchmark records."""
        return {
            "method": self.method,
            "targets": [target.record() for target in self.targets],
            "notes": list(self.notes),
            "reused": self.reused,
        }


# ------------------------------------------------------------------------------ the setting


class _Health:
    """How a client's analysis replies went: ``auto`` stops asking a model that never
    answers in the schema."""

    def __init__(self) -> None:
        self.usable = 0
        self.unusable = 0
        self.memo: OrderedDict[tuple[Any, ...], QuestionAnalysis] = OrderedDict()


_CLIENTS: weakref.WeakKeyDictionary[Any, _Health] = weakref.WeakKeyDictionary()
_LOCK = threading.Lock()


def _client(llm: LLMClient) -> Any:
    """The client that makes the calls (wrappers such as the eval's answerless one delegate)."""
    return getattr(llm, "inner", llm)


def _health(llm: LLMClient) -> _Health:
    with _LOCK:
        client = _client(llm)
        if client not in _CLIENTS:
            _CLIENTS[client] = _Health()
        return _CLIENTS[client]


def uses_model(setting: DsragExtractionName, llm: LLMClient | None) -> tuple[bool, str]:
    """Whether the analysis asks ``llm`` under ``setting``, and why (see the module doc)."""
    if setting == "rules":
        return False, "rules asked for"
    if llm is None:
        return False, "no model"
    if setting != "auto":
        return True, "model asked for"
    if bool(getattr(_client(llm), "unreachable", False)):
        return False, "auto: every request to the model failed"
    health = _health(llm)
    if health.usable == 0 and health.unusable >= AUTO_GIVE_UP_AFTER:
        return False, f"auto: the model's first {health.unusable} analysis replies were unusable"
    return True, "auto: the model answers in the schema"


def compression_model_calls(state: Mapping[str, Any], cfg: Configuration) -> float:
    """Model calls ``compress_answer_evidence`` makes in ``state`` (its part of ``c(s, a)``):
    one analysis when DICS compresses with a model extraction; none with the rules, none when
    it reuses the analysis the sufficiency check's EPQD parts came from, and none under
    ``auto`` once the controller has sub-questions (the rules read them)."""
    if cfg.compression != "dics" or cfg.dsrag_extraction == "rules":
        return 0.0
    if state.get("sub_questions") and (
        cfg.decomposition == "epqd" or cfg.dsrag_extraction == "auto"
    ):
        return 0.0
    return 1.0


def compatible_sub_questions(sub_questions: Sequence[Mapping[str, Any]]) -> list[str]:
    """The controller's sub-questions (``State.sub_questions``) as the analysis takes them.

    EPQD parts pass as they are. The default decomposition's parts have their ``#k``
    references resolved where the answer is known (the sufficiency check does that); a part
    still referring to an unknown answer names no entity to select a passage for and is left
    out. Repeats are dropped.
    """
    out: list[str] = []
    for sub in sub_questions or ():
        text = str(sub.get("question") or "").strip() if isinstance(sub, Mapping) else ""
        if text and not REFERENCE.search(text) and text not in out:
            out.append(text)
    return out


# ------------------------------------------------------------------------------ rule path


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
    return _unique(targets)


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


# ------------------------------------------------------------------------------ targets -> graph


def graph_of_targets(targets: Sequence[Target]) -> GraphExtraction:
    """One extraction per target (``question word -> asks -> entity -> details``), merged."""
    extractions = []
    for number, target in enumerate(targets, start=1):
        qword = question_word_span(target.question)
        word = QNode(number, 0, qword.text if qword else DEFAULT_QUESTION_WORD, True)
        asks = QNode(number, 1, target.asks)
        details = [QNode(number, 2 + i, text) for i, text in enumerate(target.details)]
        entity = QNode(number, 2 + len(details), target.entity)
        edges = [
            QEdge(word.key, asks.key, None),
            QEdge(asks.key, entity.key, "of"),
            *(QEdge(entity.key, detail.key, None) for detail in details),
        ]
        method = "llm" if target.source == "model" else "rule"
        extractions.append(
            Extraction(
                number, target.question, (word, asks, *details, entity), tuple(edges), method
            )
        )
    return GraphExtraction(merge_extractions(extractions), tuple(extractions))


def _criteria_of_targets(
    question: str, targets: Sequence[Target], hops: int | None
) -> CriteriaResult:
    subs = tuple(target.question for target in targets)
    built = graph_of_targets(targets)
    result = criteria_for_graph(question, subs, built, hops)
    anchors = Counter(
        normalize_entity(node.text)
        for criterion in result.criteria
        for node in criterion.nodes
        if node.key == criterion.anchor
    )
    if anchors == Counter(normalize_entity(t.entity) for t in targets):
        return result
    criteria = per_sub_question_criteria(built.extractions)
    return replace(result, core=None, criteria=tuple(criteria), fallback=FALLBACK_PER_TARGET)


# ------------------------------------------------------------------------------ model path


def _fact_question(entity: str, asks: str) -> str:
    """The sub-question written for a target whose reply gave none (or an unusable one)."""
    return f"What is the {asks} of {entity}?"


def _clean(value: Any) -> str:
    return " ".join(str(value).split()).strip(' "“”,;:') if isinstance(value, str) else ""


def _mentioned(name: str, source: str) -> bool:
    """Whether ``name`` is written in ``source`` (case, spacing, quotes and ``'s`` ignored)."""
    key = normalize_entity(name)
    return bool(key) and key in " ".join(source.split()).casefold()


def _covers(target: Target, name: str) -> bool:
    key = normalize_entity(name)
    names = [normalize_entity(n) for n in (target.entity, *target.details)]
    return any(key and n and (key in n or n in key) for n in names)


def _unique(targets: Sequence[Target]) -> list[Target]:
    seen: set[tuple[str, str]] = set()
    out = []
    for target in targets:
        key = (normalize_entity(target.entity), normalize_entity(target.asks))
        if key not in seen:
            seen.add(key)
            out.append(target)
    return out


def _targets_of_reply(reply: dict[str, Any] | None, source: str) -> tuple[list[Target], list[str]]:
    """The reply's valid targets and a note for everything dropped (see the module doc)."""
    items = reply.get("sub_questions") if isinstance(reply, dict) else None
    if not isinstance(items, list):
        return [], ['the reply is not {"sub_questions": [...]}']
    notes: list[str] = []
    parsed: list[tuple[str, str, str, tuple[str, ...]]] = []
    for number, item in enumerate(items, start=1):
        if not isinstance(item, dict):
            notes.append(f"item {number} is not an object: dropped")
            continue
        entity = _clean(item.get("entity"))
        if not _mentioned(entity, source):
            notes.append(f"item {number}: entity {entity!r} is not in the question: dropped")
            continue
        raw_details = item.get("details") if isinstance(item.get("details"), list) else []
        details = []
        for detail in map(_clean, raw_details[: prompts.ANALYSIS_MAX_DETAILS]):
            same = normalize_entity(detail) == normalize_entity(entity)
            if detail and not same and _mentioned(detail, source):
                details.append(detail)
            elif detail and not same:
                notes.append(f"item {number}: detail {detail!r} is not in the question: dropped")
        parsed.append(
            (entity, _clean(item.get("asks")), _clean(item.get("question")), tuple(details))
        )
    asked = Counter(asks for _, asks, _, _ in parsed if asks)
    common = asked.most_common(1)[0][0] if asked else ""
    targets = []
    for entity, asks, question, details in parsed:
        if not asks:
            asks = common or "facts"
            notes.append(f"{entity!r}: no fact asked; took {asks!r}")
        question = question or _fact_question(entity, asks)
        details = tuple(
            d for d in dict.fromkeys(details) if normalize_entity(d) != normalize_entity(asks)
        )
        targets.append(Target(entity, asks, question, details))
    unique = _unique(targets)
    if len(unique) < len(targets):
        notes.append(f"{len(targets) - len(unique)} repeated items dropped")
    return unique, notes


_LIST_SEPARATOR = re.compile(r"\s*(?:,\s*(?:and|or)?|;|and|or|&|as well as|nor)\s*", re.I)


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
                else _fact_question(target.entity, asks)
            )
        out.append(replace(target, asks=asks, question=sub_question))
    return _unique(out)


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
        Target(name, asks, _fact_question(name, asks), source="rules")
        for name in _list_neighbours(question, targets)
    ]
    added: list[Target] = []
    for candidate in candidates:
        if not any(_covers(t, candidate.entity) for t in (*targets, *added)):
            added.append(candidate)
            notes.append(f"added {candidate.entity!r} from the rules (the reply left it out)")
    return added


def model_analysis(
    question: str,
    llm: LLMClient,
    sub_questions: Sequence[str] | None = None,
    *,
    hops: int | None = None,
) -> QuestionAnalysis:
    """One schema-constrained call, repaired with the rules (see the module doc); never raises."""
    text = str(question or "").strip()
    given = tuple(sub_questions or ())
    if not text:
        return rule_analysis(text, given, hops=hops, notes=["empty question"])
    try:
        reply, usage = llm.json(
            prompts.analysis_messages(text, given),
            max_tokens=prompts.ANALYSIS_MAX_TOKENS,
            schema=prompts.ANALYSIS_SCHEMA,
        )
    except Exception as exc:  # any backend fault, even one LLMClient re-raises
        logger.warning("DS-RAG question analysis failed: %s", exc)
        reply, usage = None, NO_USAGE
    source = " ".join([text, *given])
    if reply is None:
        targets, notes = [], ["no usable reply (the request failed or was not JSON)"]
    else:
        targets, notes = _targets_of_reply(reply, source)
        targets = _description_items_dropped(text, _aligned(text, targets, notes), notes)
    health = _health(llm)
    with _LOCK:
        if targets:
            health.usable += 1
        else:
            health.unusable += 1
    if not targets:
        reason = "; ".join(notes) or "no target in the reply"
        return rule_analysis(
            text, given, hops=hops, method="fallback", usage=usage, notes=[f"{reason}; rules"]
        )
    targets += _left_out(text, given, targets, notes, hops)
    criteria = _criteria_of_targets(text, targets, hops)
    method: AnalysisMethod = "repaired" if notes else "llm"
    return QuestionAnalysis(
        text, criteria.sub_questions, criteria, method, tuple(targets), usage, tuple(notes), given
    )


# ------------------------------------------------------------------------------ entry point


def analyse_question(
    question: str,
    llm: LLMClient | None,
    setting: DsragExtractionName = "llm",
    *,
    sub_questions: Sequence[str] | None = None,
    hops: int | None = None,
) -> QuestionAnalysis:
    """Targets, sub-questions and selection criteria of ``question`` under ``setting``
    (``dsrag_extraction``), optionally for the ``sub_questions`` the caller already has;
    memoised per client (see the module doc). Never raises."""
    text = str(question or "").strip()
    given = tuple(s for s in (str(q or "").strip() for q in sub_questions or ()) if s)
    model, why = uses_model(setting, llm)
    if not model or llm is None:
        return rule_analysis(text, given, hops=hops, notes=[why])
    health = _health(llm)
    key = (text, given, hops)
    with _LOCK:
        known = health.memo.get(key)
        if known is None and given:
            # The analysis that wrote these sub-questions (decomposition="epqd").
            own = health.memo.get((text, (), hops))
            known = own if own is not None and own.sub_questions == given else None
        if known is not None:
            health.memo.move_to_end((text, known.given, hops))
            return replace(known, usage=NO_USAGE, reused=True)
    if setting == "auto" and given:
        return rule_analysis(text, given, hops=hops, notes=[AUTO_GIVEN])
    analysis = model_analysis(text, llm, given, hops=hops)
    if analysis.method != "fallback":  # a failed request is asked again next time
        with _LOCK:
            health.memo[key] = analysis
            while len(health.memo) > MEMO_SIZE:
                health.memo.popitem(last=False)
    return analysis

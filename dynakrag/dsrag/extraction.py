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
    were dropped (this module), and the rules repaired the rest
    (:func:`~dynakrag.dsrag.rule_extraction.repaired_targets`): a question ordering people by
    age asks each one's birth date, a sub-question that does not name its entity (or names
    another target's) is rewritten from the entity and the fact, in a comparison of listed
    entities an item made of a description's name is dropped, and names the reply left out
    were added (``Target.source == "rules"``): a name that follows an entity of the reply in
    one list ("A, B and C"); the branches of the rule graph's core (a templated ranking's or
    comparison's list items) when that core is an attribute the question asks about (outside
    the templates the rules' core is often a name of a description); with given
    sub-questions, the anchor of each sub-question's own criterion. Every change is a line of
    ``notes``.
``fallback``
    no usable reply (the request failed, the reply was not the asked JSON, or no target of it
    survived): the whole rule path.
``rules``
    the rule path (:mod:`~dynakrag.dsrag.rule_extraction`) was chosen
    (``dsrag_extraction="rules"``, no model, or ``auto`` without a usable model).

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
import threading
import weakref
from collections import Counter, OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from dynakrag import prompts
from dynakrag.configuration import Configuration, DsragExtractionName
from dynakrag.decomposition import REFERENCE
from dynakrag.dsrag.analysis import (
    AnalysisMethod,
    QuestionAnalysis,
    Target,
    fact_question,
    unique_targets,
)
from dynakrag.dsrag.criteria import (
    CriteriaResult,
    criteria_for_graph,
    per_sub_question_criteria,
)
from dynakrag.dsrag.question_graph import (
    Extraction,
    GraphExtraction,
    merge_extractions,
    normalize_entity,
    question_word_span,
)
from dynakrag.dsrag.rule_extraction import repaired_targets, rule_analysis
from dynakrag.dsrag.types import QEdge, QNode
from dynakrag.llm.client import NO_USAGE, LLMClient

__all__ = [
    "AUTO_GIVE_UP_AFTER",
    "FALLBACK_PER_TARGET",
    "analyse_question",
    "compatible_sub_questions",
    "compression_model_calls",
    "graph_of_targets",
    "model_analysis",
    "uses_model",
]

logger = logging.getLogger(__name__)

AUTO_GIVE_UP_AFTER = 3
"""``auto`` takes the rules once a client's first this-many analysis replies were unusable."""
MEMO_SIZE = 512
"""Analyses remembered per client."""
AUTO_GIVEN = "auto: the controller's own sub-questions are read by the rules (no call)"
FALLBACK_PER_TARGET = "the core's branches are not the entities asked about: one per entity"
DEFAULT_QUESTION_WORD = "What"
"""The question-word node of a target whose sub-question opens with none."""


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
    ``auto`` once the controller has sub-questions (the rules read them), and none with a
    chain of hops (one criterion per hop, read by the rules)."""
    if cfg.compression != "dics" or cfg.dsrag_extraction == "rules" or state.get("hops"):
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


def _clean(value: str) -> str:
    return " ".join(value.split()).strip(' "“”,;:')


def _mentioned(name: str, source: str) -> bool:
    """Whether ``name`` is written in ``source`` (case, spacing, quotes and ``'s`` ignored)."""
    key = normalize_entity(name)
    return bool(key) and key in " ".join(source.split()).casefold()


def _targets_of_reply(reply: prompts.AnalysisReply, source: str) -> tuple[list[Target], list[str]]:
    """The reply's valid targets and a note for everything dropped (see the module doc)."""
    notes: list[str] = []
    parsed: list[tuple[str, str, str, tuple[str, ...]]] = []
    for number, item in enumerate(reply.sub_questions, start=1):
        if item is None:
            notes.append(f"item {number} is not an object: dropped")
            continue
        entity = _clean(item.entity)
        if not _mentioned(entity, source):
            notes.append(f"item {number}: entity {entity!r} is not in the question: dropped")
            continue
        details = []
        for detail in map(_clean, item.details[: prompts.ANALYSIS_MAX_DETAILS]):
            same = normalize_entity(detail) == normalize_entity(entity)
            if detail and not same and _mentioned(detail, source):
                details.append(detail)
            elif detail and not same:
                notes.append(f"item {number}: detail {detail!r} is not in the question: dropped")
        parsed.append((entity, _clean(item.asks), _clean(item.question), tuple(details)))
    asked = Counter(asks for _, asks, _, _ in parsed if asks)
    common = asked.most_common(1)[0][0] if asked else ""
    targets = []
    for entity, asks, question, details in parsed:
        if not asks:
            asks = common or "facts"
            notes.append(f"{entity!r}: no fact asked; took {asks!r}")
        question = question or fact_question(entity, asks)
        details = tuple(
            d for d in dict.fromkeys(details) if normalize_entity(d) != normalize_entity(asks)
        )
        targets.append(Target(entity, asks, question, details))
    unique = unique_targets(targets)
    if len(unique) < len(targets):
        notes.append(f"{len(targets) - len(unique)} repeated items dropped")
    return unique, notes


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
        reply, usage = llm.structured(
            prompts.analysis_messages(text, given),
            prompts.AnalysisReply,
            max_tokens=prompts.ANALYSIS_MAX_TOKENS,
        )
    except Exception as exc:  # any backend fault, even one LLMClient re-raises
        logger.warning("DS-RAG question analysis failed: %s", exc)
        reply, usage = None, NO_USAGE
    source = " ".join([text, *given])
    if reply is None:
        targets, notes = [], ["no usable reply (the request failed or was not JSON)"]
    else:
        targets, notes = _targets_of_reply(reply, source)
        targets = repaired_targets(text, given, targets, notes, hops)
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

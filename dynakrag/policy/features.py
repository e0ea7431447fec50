"""State and (state, action) features of the learned controller, in versioned column sets.

Every feature is computed from what the graph state holds at inference time (question,
evidence, frontier statistics, sub-questions, gaps, bridge entities, counters, trace); gold
answers or support never enter. The state's decision fields (``valid_actions``,
``policy_scores``, ``next_action``, ``invalid_reasons``) are not read either, so the features of
a state are the same before and after the controller writes its decision.

One code path, several schemas
    :func:`state_values` computes every state column that any schema uses, by name, in one
    pass; a :class:`FeatureSchema` is an ordered selection of those names (plus the one-hot of
    the candidate action). A policy file records the schema version it was trained with and
    its policy computes that schema's columns, so a policy trained under an older schema keeps
    deciding exactly as it did. Each column's one-line meaning is in :data:`MEANINGS` (written
    into every policy file); ``last_<action>`` / ``act_<action>`` are one-hots of the previous
    / the candidate action.

Version 1 (the first shipped policy)
    Question cues, evidence coverage, sub-questions, the last search's frontier including its
    *raw retriever scores* (``fr_top_score``, ``fr_added_mean_score``, ``fr_margin``), pending
    work, budgets, sufficiency, history.
Version 2: features that transfer between retrievers
    The raw scores are gone: their scale is the retriever's (cosine similarity, BM25, fused
    reciprocal ranks), so a forest trained with one retriever misreads another. In their place
    scale-free signals: ``fr_margin_norm`` (top-1 minus top-2 score over the top score),
    ``fr_added_rank`` (mean search rank of the passages the last search added, over
    ``frontier_depth``), ``ev_rank_mean`` (mean search rank of all evidence),
    ``ev_novelty`` (share of the last added passages' content words new to the evidence),
    ``sub_covered_frac`` (share of sub-questions most of whose content words the evidence
    has), ``sub_last_answered`` (the last sub-question, the chain's end, has an answer) and
    ``bridge_titled`` (share of the bridge entities found so far that title an evidence
    passage: the second hop was fetched).

Version 3 (:data:`FEATURE_SCHEMA_VERSION`): the chain of hops
    Version 2 plus what the state knows about the chain (``sub_question_answering="chain"``;
    all 0 without a plan): ``hops`` (hops planned), ``hops_resolved_frac``, ``hop_failed`` (a
    hop gave up), ``hop_searches_left`` (searches the next open hop may still take),
    ``hop_extended`` (the next hop goes on through another entity) and the kind the next hop
    expects (``hop_next_<kind>``).

Changing what a name means or adding a name to a schema needs a new schema version; old
versions must stay computable as they were.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypedDict, cast

import numpy as np

from dynakrag.actions.bridge_entities import pending_bridge_entities
from dynakrag.actions.chain import next_open_hop, searches_left
from dynakrag.actions.text import content_words, question_names
from dynakrag.configuration import Configuration
from dynakrag.files import json_safe
from dynakrag.state import ACTIONS, Document, FrontierStats, Hop, State, SubQuestion

__all__ = [
    "ACTION_FEATURE_NAMES",
    "CONFIG_FIELDS",
    "FEATURE_NAMES",
    "FEATURE_SCHEMAS",
    "FEATURE_SCHEMA_VERSION",
    "MEANINGS",
    "N_STATE_FEATURES",
    "STATE_FEATURE_NAMES",
    "FeatureInputs",
    "FeatureSchema",
    "InputStep",
    "action_one_hot",
    "feature_config",
    "feature_inputs",
    "feature_schema",
    "featurize",
    "featurize_many",
    "state_features",
    "state_values",
]

FEATURE_SCHEMA_VERSION = 3
"""The schema new policies are trained with (stored in every policy file)."""

_WH_GROUPS: tuple[tuple[str, frozenset[str]], ...] = (
    ("who", frozenset({"who", "whom", "whose"})),
    ("what", frozenset({"what"})),
    ("which", frozenset({"which"})),
    ("where", frozenset({"where"})),
    ("when", frozenset({"when"})),
    ("how", frozenset({"how"})),
)
_AUXILIARIES = frozenset(
    "is are was were do does did can could has have had will would should shall may might".split()
)
_COMPARISON_WORDS = frozenset(
    "earlier later older younger first last before after both same either neither more less "
    "larger smaller longer shorter higher lower bigger than".split()
)
_TOKEN = re.compile(r"[a-z]+")
_HOP_KINDS: tuple[str, ...] = ("person", "organisation", "place", "date", "number", "other")
_CHAIN_NAMES: tuple[str, ...] = (
    "hops",
    "hops_resolved_frac",
    "hop_failed",
    "hop_searches_left",
    "hop_extended",
    *(f"hop_next_{kind}" for kind in _HOP_KINDS),
)

MEANINGS: dict[str, str] = {
    "q_words": "words in the question",
    "q_entities": "capitalised names in the question",
    **{f"q_wh_{name}": f"the first wh-word of the question is {name}" for name, _ in _WH_GROUPS},
    "q_wh_none": "the question has no wh-word",
    "q_yes_no": "the question starts with an auxiliary verb (a yes/no question)",
    "q_or_cue": "the question contains ' or ' (a choice between candidates)",
    "q_comparison_cue": "the question has a comparative word (earlier, older, both, than, ...)",
    "ev_docs": "passages in the evidence",
    "ev_fill": "passages / max_final_docs",
    "ev_entity_coverage": "share of the question's names mentioned in the evidence",
    "ev_entity_titled": "share of the question's names that title an evidence passage",
    "ev_word_coverage": "share of the question's content words found in the evidence",
    "ev_queries": "distinct queries that found evidence",
    "ev_rank_mean": "mean search rank of the evidence passages / frontier_depth",
    "ev_novelty": "share of the last added passages' content words new to the evidence",
    "sub_questions": "sub-questions of the last sufficiency check",
    "sub_answered_frac": "share of the sub-questions answered (0 without any)",
    "sub_covered_frac": "share of sub-questions with at least half their content words in "
    "the evidence",
    "sub_last_answered": "the last sub-question (the end of the chain) has an answer",
    "checked": "sufficiency was checked at least once",
    "new_doc_rate": "passages the last action added / docs_per_action",
    "fr_top_score": "top retriever score of the last search (raw: the retriever's scale)",
    "fr_added_mean_score": "mean retriever score of the passages the last search added (raw)",
    "fr_margin": "top minus second retriever score of the last search (raw)",
    "fr_margin_norm": "top minus second score of the last search over the top score",
    "fr_score_ratio": "mean score of the added passages / top score of the last search",
    "fr_added_rank": "mean search rank of the passages the last search added / frontier_depth",
    "fr_depth_reached": "deepest rank the last search took a passage from / frontier_depth",
    "fr_unseen_left": "unseen candidates left in the last search / frontier_depth",
    "fr_query_exhausted": "the current query has no unseen candidates left",
    "bridge_pending": "bridge entities not expanded yet",
    "bridge_expanded": "bridge entities expanded",
    "bridge_titled": "share of the bridge entities found so far that title an evidence passage",
    "gaps_pending": "recorded gaps not queried yet",
    "gaps_queried": "gaps queried",
    "steps_frac": "steps / max_steps",
    "steps_left": "max_steps - steps",
    "retrieval_frac": "retrieval calls / max_retrieval_calls",
    "retrieval_left": "max_retrieval_calls - retrieval calls",
    "sufficient": "verdict of the last sufficiency check",
    "sufficient_current": "that verdict holds for the current evidence (nothing added since)",
    "ev_since_check": "passages added since the last check (all of them if never checked)",
    "compressed": "the evidence was compressed",
    "rewrites": "query rewrites so far",
    "query_rewritten": "the current query differs from the question",
    "hops": "hops of the chain's plan (0 without a plan)",
    "hops_resolved_frac": "share of the chain's hops resolved",
    "hop_failed": "a hop of the chain gave up (its searches spent)",
    "hop_searches_left": "searches the next open hop may still take",
    "hop_extended": "the next open hop goes on through another entity",
    **{
        f"hop_next_{kind}": "the next open hop expects "
        + (
            "another kind of answer"
            if kind == "other"
            else f"an {kind}"
            if kind[0] in "aeiou"
            else f"a {kind}"
        )
        for kind in _HOP_KINDS
    },
    **{f"last_{action}": f"the previous action was {action}" for action in ACTIONS},
    "last_none": "no action was taken yet",
    **{f"act_{action}": f"the candidate action is {action}" for action in ACTIONS},
}
"""One line per column name of any schema: what it measures."""

_QUESTION_NAMES: tuple[str, ...] = (
    "q_words",
    "q_entities",
    *(f"q_wh_{name}" for name, _ in _WH_GROUPS),
    "q_wh_none",
    "q_yes_no",
    "q_or_cue",
    "q_comparison_cue",
)
_BUDGET_TO_HISTORY: tuple[str, ...] = (
    "bridge_pending",
    "bridge_expanded",
    "gaps_pending",
    "gaps_queried",
    "steps_frac",
    "steps_left",
    "retrieval_frac",
    "retrieval_left",
    "sufficient",
    "sufficient_current",
    "ev_since_check",
    "compressed",
    "rewrites",
    "query_rewritten",
    *(f"last_{action}" for action in ACTIONS),
    "last_none",
)
_EVIDENCE_NAMES: tuple[str, ...] = (
    "ev_docs",
    "ev_fill",
    "ev_entity_coverage",
    "ev_entity_titled",
    "ev_word_coverage",
    "ev_queries",
)
_V1_STATE_NAMES: tuple[str, ...] = (
    *_QUESTION_NAMES,
    *_EVIDENCE_NAMES,
    "sub_questions",
    "sub_answered_frac",
    "checked",
    "new_doc_rate",
    "fr_top_score",
    "fr_added_mean_score",
    "fr_margin",
    "fr_score_ratio",
    "fr_depth_reached",
    "fr_unseen_left",
    "fr_query_exhausted",
    *_BUDGET_TO_HISTORY,
)
_V2_STATE_NAMES: tuple[str, ...] = (
    *_QUESTION_NAMES,
    *_EVIDENCE_NAMES,
    "ev_rank_mean",
    "ev_novelty",
    "sub_questions",
    "sub_answered_frac",
    "sub_covered_frac",
    "sub_last_answered",
    "checked",
    "new_doc_rate",
    "fr_margin_norm",
    "fr_score_ratio",
    "fr_added_rank",
    "fr_depth_reached",
    "fr_unseen_left",
    "fr_query_exhausted",
    "bridge_titled",
    *_BUDGET_TO_HISTORY,
)

ACTION_FEATURE_NAMES: tuple[str, ...] = tuple(f"act_{action}" for action in ACTIONS)
"""One-hot of the candidate action, appended by :func:`featurize` in every schema."""


@dataclass(frozen=True)
class FeatureSchema:
    """An ordered set of state columns (plus the action one-hot): one version of the features."""

    version: int
    state_names: tuple[str, ...]

    @property
    def names(self) -> tuple[str, ...]:
        """Columns of :func:`featurize` (the action-value model's input), in order."""
        return self.state_names + ACTION_FEATURE_NAMES

    @property
    def n_state(self) -> int:
        """Columns of :func:`state_features` (the continuation model's input)."""
        return len(self.state_names)

    def meanings(self) -> dict[str, str]:
        """``{column: one-line meaning}`` in column order."""
        return {name: MEANINGS[name] for name in self.names}


FEATURE_SCHEMAS: dict[int, FeatureSchema] = {
    1: FeatureSchema(1, _V1_STATE_NAMES),
    2: FeatureSchema(2, _V2_STATE_NAMES),
    3: FeatureSchema(3, (*_V2_STATE_NAMES, *_CHAIN_NAMES)),
}
"""Every schema this dynakrag can compute, by version."""

_CURRENT = FEATURE_SCHEMAS[FEATURE_SCHEMA_VERSION]
STATE_FEATURE_NAMES: tuple[str, ...] = _CURRENT.state_names
"""State columns of the current schema."""
FEATURE_NAMES: tuple[str, ...] = _CURRENT.names
"""Columns of :func:`featurize` in the current schema, in order."""
N_STATE_FEATURES = _CURRENT.n_state


def feature_schema(version: int = FEATURE_SCHEMA_VERSION) -> FeatureSchema:
    """The schema of ``version`` (ValueError naming the known ones for any other)."""
    schema = FEATURE_SCHEMAS.get(version) if isinstance(version, int) else None
    if schema is None:
        known = ", ".join(str(v) for v in FEATURE_SCHEMAS)
        raise ValueError(f"unknown feature schema {version!r}; this dynakrag computes {known}")
    return schema


def _question_features(question: str) -> dict[str, float]:
    tokens = _TOKEN.findall(question.lower())
    first_wh = next(
        (i for token in tokens for i, (_, words) in enumerate(_WH_GROUPS) if token in words),
        len(_WH_GROUPS),
    )
    wh_names = [*(f"q_wh_{name}" for name, _ in _WH_GROUPS), "q_wh_none"]
    return {
        "q_words": float(len(question.split())),
        "q_entities": float(len(question_names(question))),
        **{name: float(i == first_wh) for i, name in enumerate(wh_names)},
        "q_yes_no": float(bool(tokens) and tokens[0] in _AUXILIARIES),
        "q_or_cue": float(" or " in f" {question.lower()} "),
        "q_comparison_cue": float(any(token in _COMPARISON_WORDS for token in tokens)),
    }


def _number(value: Any) -> float:
    """A finite float of a state value (0.0 for missing, non-numeric or non-finite)."""
    if isinstance(value, bool):
        return float(value)
    if isinstance(value, int | float) and math.isfinite(float(value)):
        return float(value)
    return 0.0


def _share(part: float, whole: float) -> float:
    return part / whole if whole > 0 else 0.0


def _doc_text(doc: Mapping[str, Any]) -> str:
    return f"{doc.get('title', '')} {doc.get('text', '')}".lower()


def _novelty(evidence: Sequence[Mapping[str, Any]], last: Mapping[str, Any] | None) -> float:
    """Share of the content words of the passages the last action added that no earlier
    evidence passage has (0 when it added none)."""
    added = set(last.get("added") or []) if last is not None else set()
    if not added:
        return 0.0
    new_words: set[str] = set()
    old_words: set[str] = set()
    for doc in evidence:
        (new_words if doc.get("id") in added else old_words).update(content_words(_doc_text(doc)))
    return _share(len(new_words - old_words), len(new_words))


def _sub_coverage(subs: Sequence[Any], evidence_words: set[str]) -> float:
    """Share of sub-questions with at least half of their content words in the evidence."""
    covered = 0
    for sub in subs:
        words = content_words(str(sub.get("question", ""))) if isinstance(sub, Mapping) else set()
        covered += bool(words) and 2 * len(words & evidence_words) >= len(words)
    return _share(covered, len(subs))


def state_values(state: State | Mapping[str, Any], cfg: Configuration) -> dict[str, float]:
    """Every state column of every schema, by name (finite floats)."""
    question = str(state.get("question") or "")
    evidence = list(state.get("evidence") or [])
    n_docs = len(evidence)
    texts = [_doc_text(doc) for doc in evidence]
    joined = " ".join(texts)
    titles = [str(doc.get("title", "")).lower() for doc in evidence]
    names = [name.lower() for name in question_names(question)]
    q_words = content_words(question)
    all_evidence_words = content_words(joined)
    evidence_words = all_evidence_words if q_words else set()
    queries = {doc.get("query") for doc in evidence if doc.get("query")}

    subs = list(state.get("sub_questions") or [])
    answered = sum(1 for sub in subs if isinstance(sub, Mapping) and sub.get("answer"))
    checked_at = int(_number(state.get("evidence_count_at_check", -1)))
    if state.get("evidence_count_at_check") is None:
        checked_at = -1

    frontier: FrontierStats = state.get("frontier") or {}
    top = _number(frontier.get("top_score"))
    added_mean = _number(frontier.get("added_mean_score"))
    depth = max(1, cfg.frontier_depth)
    query = state.get("query") or question
    exhausted = query in (state.get("exhausted_queries") or [])

    steps = _number(state.get("steps"))
    calls = _number(state.get("retrieval_calls"))
    trace = state.get("trace") or []
    last_entry = trace[-1] if trace and isinstance(trace[-1], Mapping) else None
    last = last_entry.get("action") if last_entry is not None else None
    added_ids = set(last_entry.get("added") or []) if last_entry is not None else set()
    added_ranks = [_number(d.get("rank")) for d in evidence if d.get("id") in added_ids]
    all_ranks = [_number(doc.get("rank")) for doc in evidence]
    found = [*(state.get("bridge_entities") or []), *(state.get("expanded_entities") or [])]
    bridges = {str(entity).lower() for entity in found}

    sufficient = bool(state.get("sufficient"))
    values = {
        **_question_features(question),
        "ev_docs": float(n_docs),
        "ev_fill": _share(n_docs, cfg.max_final_docs),
        "ev_entity_coverage": _share(sum(1 for name in names if name in joined), len(names)),
        "ev_entity_titled": _share(
            sum(1 for name in names if any(name in t for t in titles)), len(names)
        ),
        "ev_word_coverage": _share(len(q_words & evidence_words), len(q_words)),
        "ev_queries": float(len(queries)),
        "ev_rank_mean": _share(sum(all_ranks), len(all_ranks)) / depth,
        "ev_novelty": _novelty(evidence, last_entry),
        "sub_questions": float(len(subs)),
        "sub_answered_frac": _share(answered, len(subs)),
        "sub_covered_frac": _sub_coverage(subs, all_evidence_words),
        "sub_last_answered": float(
            bool(subs) and isinstance(subs[-1], Mapping) and bool(subs[-1].get("answer"))
        ),
        "checked": float(checked_at >= 0),
        "new_doc_rate": _share(_number(state.get("last_new_docs")), cfg.docs_per_action),
        "fr_top_score": top,
        "fr_added_mean_score": added_mean,
        "fr_margin": _number(frontier.get("margin")),
        "fr_margin_norm": _share(_number(frontier.get("margin")), top) if top > 0 else 0.0,
        "fr_score_ratio": _share(added_mean, top) if top > 0 else 0.0,
        "fr_added_rank": _share(sum(added_ranks), len(added_ranks)) / depth,
        "fr_depth_reached": _number(frontier.get("depth_reached")) / depth,
        "fr_unseen_left": _number(frontier.get("unseen_left")) / depth,
        "fr_query_exhausted": float(exhausted),
        "bridge_pending": float(len(pending_bridge_entities(state))),  # type: ignore[arg-type]
        "bridge_expanded": float(len(state.get("expanded_entities") or [])),
        "bridge_titled": _share(
            sum(1 for entity in bridges if any(entity in t for t in titles)), len(bridges)
        ),
        "gaps_pending": float(len(state.get("gaps") or [])),
        "gaps_queried": float(len(state.get("queried_gaps") or [])),
        "steps_frac": _share(steps, cfg.max_steps),
        "steps_left": max(0.0, cfg.max_steps - steps),
        "retrieval_frac": _share(calls, cfg.max_retrieval_calls),
        "retrieval_left": max(0.0, cfg.max_retrieval_calls - calls),
        "sufficient": float(sufficient),
        "sufficient_current": float(sufficient and checked_at == n_docs),
        "ev_since_check": (
            float(n_docs - max(0, checked_at)) if checked_at >= 0 else float(n_docs)
        ),
        "compressed": float(bool(state.get("compressed"))),
        "rewrites": _number(state.get("rewrites")),
        "query_rewritten": float(query != question),
        **{f"last_{action}": float(last == action) for action in ACTIONS},
        "last_none": float(last not in ACTIONS),
    }
    values.update(_chain_values(state.get("hops") or []))
    return {k: v if math.isfinite(v) else 0.0 for k, v in values.items()}


def _chain_values(hops: Sequence[Any]) -> dict[str, float]:
    """The chain's columns (all 0 without a plan)."""
    index = next_open_hop(hops) if hops else None
    nxt = hops[index] if index is not None else None
    kind = str(nxt.get("expects")) if nxt is not None else ""
    kind = kind if kind in _HOP_KINDS else ("other" if nxt is not None else "")
    left = searches_left(hops, index) if index is not None else 0
    return {
        "hops": float(len(hops)),
        "hops_resolved_frac": _share(
            sum(1 for hop in hops if hop.get("status") == "resolved"), len(hops)
        ),
        "hop_failed": float(any(hop.get("status") == "failed" for hop in hops)),
        "hop_searches_left": float(max(0, left)),
        "hop_extended": float(nxt is not None and bool(nxt.get("via"))),
        **{f"hop_next_{name}": float(kind == name) for name in _HOP_KINDS},
    }


class InputStep(TypedDict, total=False):
    """One trace step as features read it (:func:`feature_inputs`): its action, the ids of
    the passages it added, its query and a search's own query."""

    action: str
    added: list[str]
    query: str
    search_query: str


class FeatureInputs(TypedDict, total=False):
    """What any feature may read from a state (:func:`feature_inputs`), JSON-ready: every
    observable field of :class:`~dynakrag.state.State`, its evidence and its trace reduced."""

    question: str
    query: str
    frontier: FrontierStats
    sub_questions: list[SubQuestion]
    hops: list[Hop]
    gaps: list[str]
    queried_gaps: list[str]
    exhausted_queries: list[str]
    bridge_entities: list[str]
    expanded_entities: list[str]
    sufficient: bool
    evidence_count_at_check: int
    last_new_docs: int
    compressed: bool
    rewrites: int
    steps: int
    retrieval_calls: int
    llm_calls: int
    prompt_tokens: int
    completion_tokens: int
    evidence: list[Document]
    """Each passage's text and search provenance (:data:`_DOC_FIELDS`), not its ``sources``."""
    trace: list[InputStep]


_INPUT_FIELDS: tuple[str, ...] = tuple(
    key for key in FeatureInputs.__annotations__ if key not in ("evidence", "trace")
)
"""The state's fields :func:`feature_inputs` copies as they are, in this order."""
_DOC_FIELDS: tuple[str, ...] = (
    "id",
    "title",
    "text",
    "score",
    "query",
    "action",
    "step",
    "retriever",
    "rank",
)
_TRACE_FIELDS: tuple[str, ...] = tuple(InputStep.__annotations__)
CONFIG_FIELDS: tuple[str, ...] = (
    "docs_per_action",
    "max_steps",
    "max_retrieval_calls",
    "max_final_docs",
    "frontier_depth",
)
"""The settings features read (stored with training records, so they can be recomputed)."""


def feature_inputs(state: State | Mapping[str, Any]) -> FeatureInputs:
    """A compact JSON-ready copy of what any feature may read from ``state``.

    Training records keep it so that a later schema can recompute its columns from old
    records: every observable field, evidence passages with their text and search
    provenance (not the per-retriever ``sources``), and the trace reduced to each step's
    action, added passages and queries. Decision fields, accounting and the answer are left
    out. ``state_features(feature_inputs(s), cfg)`` equals ``state_features(s, cfg)`` for
    every schema.
    """
    copy: dict[str, object] = {key: state[key] for key in _INPUT_FIELDS if key in state}
    copy["evidence"] = [
        {key: doc[key] for key in _DOC_FIELDS if key in doc}
        for doc in state.get("evidence") or []
        if isinstance(doc, Mapping)
    ]
    copy["trace"] = [
        {key: entry[key] for key in _TRACE_FIELDS if key in entry}
        for entry in state.get("trace") or []
        if isinstance(entry, Mapping)
    ]
    return cast(FeatureInputs, json_safe(copy))


def feature_config(cfg: Configuration) -> dict[str, int]:
    """The :data:`CONFIG_FIELDS` of ``cfg`` (what a record needs to recompute features)."""
    return {name: int(getattr(cfg, name)) for name in CONFIG_FIELDS}


def state_features(
    state: State | Mapping[str, Any], cfg: Configuration, *, version: int = FEATURE_SCHEMA_VERSION
) -> np.ndarray:
    """The state columns of schema ``version`` for ``state`` (float64, finite)."""
    values = state_values(state, cfg)
    return np.asarray([values[name] for name in feature_schema(version).state_names])


def action_one_hot(action: str) -> np.ndarray:
    """The ``ACTION_FEATURE_NAMES`` one-hot of ``action``."""
    if action not in ACTIONS:
        raise ValueError(f"unknown action {action!r}")
    hot = np.zeros(len(ACTIONS), dtype=np.float64)
    hot[ACTIONS.index(action)] = 1.0
    return hot


def featurize(
    state: State | Mapping[str, Any],
    action: str,
    cfg: Configuration,
    *,
    version: int = FEATURE_SCHEMA_VERSION,
) -> np.ndarray:
    """The schema-``version`` columns of (``state``, ``action``)."""
    return np.concatenate([state_features(state, cfg, version=version), action_one_hot(action)])


def featurize_many(
    state: State | Mapping[str, Any],
    actions: Sequence[str],
    cfg: Configuration,
    *,
    version: int = FEATURE_SCHEMA_VERSION,
) -> np.ndarray:
    """One ``featurize`` row per action (the state columns are computed once)."""
    schema = feature_schema(version)
    if not actions:
        return np.zeros((0, len(schema.names)), dtype=np.float64)
    base = state_features(state, cfg, version=version)
    return np.stack([np.concatenate([base, action_one_hot(a)]) for a in actions])

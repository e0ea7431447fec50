"""State and (state, action) features of the learned controller.

Every feature is computed from what the graph state holds at inference time (question,
evidence, frontier statistics, sub-questions, gaps, bridge entities, counters, trace); gold
answers or support never enter. The state's decision fields (``valid_actions``,
``policy_scores``, ``next_action``, ``invalid_reasons``) are not read either, so the features of
a state are the same before and after the controller writes its decision.

``FEATURE_NAMES`` fixes the column order, in groups:

question (constant within a run)
    ``q_words`` words in the question; ``q_entities`` capitalised names
    (:func:`~dynakrag.actions.text.question_names`); ``q_wh_*`` one-hot of the first
    wh-word (who/whom/whose, what, which, where, when, how; ``q_wh_none`` when there is none);
    ``q_yes_no`` the question starts with an auxiliary verb (is/was/did/...);
    ``q_or_cue`` the question contains " or " (a choice between two candidates);
    ``q_comparison_cue`` a comparative word (earlier, older, first, both, same, than, ...).
evidence
    ``ev_docs`` passages; ``ev_fill`` passages / ``max_final_docs``; ``ev_entity_coverage``
    share of question names mentioned in the evidence; ``ev_entity_titled`` share of question
    names that title an evidence passage; ``ev_word_coverage`` share of the question's content
    words found in the evidence; ``ev_queries`` distinct queries that found evidence.
sub-questions
    ``sub_questions`` how many the last sufficiency check used; ``sub_answered_frac`` share of
    them answered (0 with none); ``checked`` whether sufficiency was ever checked.
last action's yield and the retrieval frontier (``state["frontier"]``)
    ``new_doc_rate`` ``last_new_docs / docs_per_action``; ``fr_top_score``,
    ``fr_added_mean_score``, ``fr_margin`` (top minus second score) of the last search;
    ``fr_score_ratio`` added mean / top score; ``fr_depth_reached`` and ``fr_unseen_left``
    divided by ``frontier_depth``; ``fr_query_exhausted`` the current query has no unseen
    candidates left.
pending work
    ``bridge_pending`` unexpanded bridge entities; ``bridge_expanded``; ``gaps_pending``;
    ``gaps_queried``.
budgets
    ``steps_frac`` steps / ``max_steps``; ``steps_left``; ``retrieval_frac`` retrieval calls /
    ``max_retrieval_calls``; ``retrieval_left``.
sufficiency and post-processing
    ``sufficient`` verdict of the last check; ``sufficient_current`` that verdict holds for the
    current evidence (nothing added since); ``ev_since_check`` passages added since the last
    check (all of them if never checked); ``compressed``; ``rewrites``; ``query_rewritten``.
history
    ``last_<action>`` one-hot of the previous action, ``last_none`` before the first.
candidate action (only in :func:`featurize`)
    ``act_<action>`` one-hot of the action being valued.

Change the names, their order or their meaning and ``FEATURE_SCHEMA_VERSION`` must change:
policy files record the version they were trained with and refuse to load under another.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from dynakrag.actions.bridge_entities import pending_bridge_entities
from dynakrag.actions.text import content_words, question_names
from dynakrag.configuration import Configuration
from dynakrag.state import ACTIONS, State

__all__ = [
    "ACTION_FEATURE_NAMES",
    "FEATURE_NAMES",
    "FEATURE_SCHEMA_VERSION",
    "N_STATE_FEATURES",
    "STATE_FEATURE_NAMES",
    "featurize",
    "featurize_many",
    "state_features",
]

FEATURE_SCHEMA_VERSION = 1
"""Version of ``FEATURE_NAMES`` and their definitions (stored in every policy file)."""

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

_QUESTION_NAMES: tuple[str, ...] = (
    "q_words",
    "q_entities",
    *(f"q_wh_{name}" for name, _ in _WH_GROUPS),
    "q_wh_none",
    "q_yes_no",
    "q_or_cue",
    "q_comparison_cue",
)
_STATE_NAMES: tuple[str, ...] = (
    "ev_docs",
    "ev_fill",
    "ev_entity_coverage",
    "ev_entity_titled",
    "ev_word_coverage",
    "ev_queries",
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

STATE_FEATURE_NAMES: tuple[str, ...] = _QUESTION_NAMES + _STATE_NAMES
"""Features of a state alone (the continuation model's input)."""
ACTION_FEATURE_NAMES: tuple[str, ...] = tuple(f"act_{action}" for action in ACTIONS)
"""One-hot of the candidate action, appended by :func:`featurize`."""
FEATURE_NAMES: tuple[str, ...] = STATE_FEATURE_NAMES + ACTION_FEATURE_NAMES
"""Columns of :func:`featurize` (the action-value model's input), in order."""
N_STATE_FEATURES = len(STATE_FEATURE_NAMES)


def _question_features(question: str) -> list[float]:
    tokens = _TOKEN.findall(question.lower())
    wh = [0.0] * (len(_WH_GROUPS) + 1)
    first_wh = next(
        (i for token in tokens for i, (_, words) in enumerate(_WH_GROUPS) if token in words),
        len(_WH_GROUPS),
    )
    wh[first_wh] = 1.0
    return [
        float(len(question.split())),
        float(len(question_names(question))),
        *wh,
        float(bool(tokens) and tokens[0] in _AUXILIARIES),
        float(" or " in f" {question.lower()} "),
        float(any(token in _COMPARISON_WORDS for token in tokens)),
    ]


def _number(value: Any) -> float:
    """A finite float of a state value (0.0 for missing, non-numeric or non-finite)."""
    if isinstance(value, bool):
        return float(value)
    if isinstance(value, int | float) and math.isfinite(float(value)):
        return float(value)
    return 0.0


def _share(part: float, whole: float) -> float:
    return part / whole if whole > 0 else 0.0


def state_features(state: State | Mapping[str, Any], cfg: Configuration) -> np.ndarray:
    """The ``STATE_FEATURE_NAMES`` vector of ``state`` (float64, finite)."""
    question = str(state.get("question") or "")
    evidence = list(state.get("evidence") or [])
    n_docs = len(evidence)
    texts = [f"{doc.get('title', '')} {doc.get('text', '')}".lower() for doc in evidence]
    joined = " ".join(texts)
    titles = [str(doc.get("title", "")).lower() for doc in evidence]
    names = [name.lower() for name in question_names(question)]
    q_words = content_words(question)
    evidence_words = content_words(joined) if q_words else set()
    queries = {doc.get("query") for doc in evidence if doc.get("query")}

    subs = list(state.get("sub_questions") or [])
    answered = sum(1 for sub in subs if isinstance(sub, Mapping) and sub.get("answer"))
    checked_at = int(_number(state.get("evidence_count_at_check", -1)))
    if state.get("evidence_count_at_check") is None:
        checked_at = -1

    frontier = state.get("frontier") or {}
    top = _number(frontier.get("top_score"))
    added_mean = _number(frontier.get("added_mean_score"))
    depth = max(1, cfg.frontier_depth)
    query = state.get("query") or question
    exhausted = query in (state.get("exhausted_queries") or [])

    steps = _number(state.get("steps"))
    calls = _number(state.get("retrieval_calls"))
    trace = state.get("trace") or []
    last = trace[-1].get("action") if trace and isinstance(trace[-1], Mapping) else None
    last_hot = [float(last == action) for action in ACTIONS]
    last_hot.append(float(last not in ACTIONS))

    sufficient = bool(state.get("sufficient"))
    values = [
        *_question_features(question),
        float(n_docs),
        _share(n_docs, cfg.max_final_docs),
        _share(sum(1 for name in names if name in joined), len(names)),
        _share(sum(1 for name in names if any(name in t for t in titles)), len(names)),
        _share(len(q_words & evidence_words), len(q_words)),
        float(len(queries)),
        float(len(subs)),
        _share(answered, len(subs)),
        float(checked_at >= 0),
        _share(_number(state.get("last_new_docs")), cfg.docs_per_action),
        top,
        added_mean,
        _number(frontier.get("margin")),
        _share(added_mean, top) if top > 0 else 0.0,
        _number(frontier.get("depth_reached")) / depth,
        _number(frontier.get("unseen_left")) / depth,
        float(exhausted),
        float(len(pending_bridge_entities(state))),  # type: ignore[arg-type]
        float(len(state.get("expanded_entities") or [])),
        float(len(state.get("gaps") or [])),
        float(len(state.get("queried_gaps") or [])),
        _share(steps, cfg.max_steps),
        max(0.0, cfg.max_steps - steps),
        _share(calls, cfg.max_retrieval_calls),
        max(0.0, cfg.max_retrieval_calls - calls),
        float(sufficient),
        float(sufficient and checked_at == n_docs),
        float(n_docs - max(0, checked_at)) if checked_at >= 0 else float(n_docs),
        float(bool(state.get("compressed"))),
        _number(state.get("rewrites")),
        float(query != question),
        *last_hot,
    ]
    vector = np.asarray(values, dtype=np.float64)
    return np.nan_to_num(vector, nan=0.0, posinf=0.0, neginf=0.0)


def action_one_hot(action: str) -> np.ndarray:
    """The ``ACTION_FEATURE_NAMES`` one-hot of ``action``."""
    if action not in ACTIONS:
        raise ValueError(f"unknown action {action!r}")
    hot = np.zeros(len(ACTIONS), dtype=np.float64)
    hot[ACTIONS.index(action)] = 1.0
    return hot


def featurize(state: State | Mapping[str, Any], action: str, cfg: Configuration) -> np.ndarray:
    """The ``FEATURE_NAMES`` vector of (``state``, ``action``)."""
    return np.concatenate([state_features(state, cfg), action_one_hot(action)])


def featurize_many(
    state: State | Mapping[str, Any], actions: Sequence[str], cfg: Configuration
) -> np.ndarray:
    """One ``featurize`` row per action (the state features are computed once)."""
    base = state_features(state, cfg)
    if not actions:
        return np.zeros((0, len(FEATURE_NAMES)), dtype=np.float64)
    return np.stack([np.concatenate([base, action_one_hot(a)]) for a in actions])

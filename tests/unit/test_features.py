"""Features of the learned controller: fixed layout, finite, computed without gold."""

from __future__ import annotations

import math
import re
from typing import Any

import numpy as np
import pytest

from dynakrag.actions.common import Resources
from dynakrag.configuration import Configuration
from dynakrag.data.demo import demo_passages
from dynakrag.data.demo_corpus import generate_demo_corpus
from dynakrag.graph.replay import decision_update, replay
from dynakrag.llm.client import LLMClient
from dynakrag.policy.features import (
    ACTION_FEATURE_NAMES,
    FEATURE_NAMES,
    FEATURE_SCHEMA_VERSION,
    FEATURE_SCHEMAS,
    N_STATE_FEATURES,
    STATE_FEATURE_NAMES,
    feature_schema,
    featurize,
    featurize_many,
    state_features,
)
from dynakrag.policy.heuristic import HeuristicPolicy
from dynakrag.state import ACTIONS, initial_state
from tests.fakes import KeywordSearcher, demo_chat_model

CFG = Configuration()
GOLD_WORDS = re.compile(r"gold|support|label|answer_text|ground", re.IGNORECASE)
OBSERVABLE = {
    "question",
    "query",
    "evidence",
    "frontier",
    "sub_questions",
    "hops",
    "gaps",
    "queried_gaps",
    "exhausted_queries",
    "bridge_entities",
    "expanded_entities",
    "sufficient",
    "evidence_count_at_check",
    "last_new_docs",
    "compressed",
    "rewrites",
    "trace",
    "steps",
    "retrieval_calls",
}


class RecordingState(dict):
    """A state that remembers which keys were read."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.read: set[str] = set()

    def get(self, key: str, default: Any = None) -> Any:
        self.read.add(key)
        return super().get(key, default)

    def __getitem__(self, key: str) -> Any:
        self.read.add(key)
        return super().__getitem__(key)


def demo_states() -> list[dict[str, Any]]:
    """States along a few heuristic runs on the demo corpus (replayed with the fakes)."""
    corpus = generate_demo_corpus(7)
    answers = {q.question: q.answer for q in corpus.questions}
    states: list[dict[str, Any]] = []
    for q in corpus.questions[::9]:
        resources = Resources(
            KeywordSearcher(demo_passages(corpus)), LLMClient(demo_chat_model(answers))
        )
        actions = ["retrieve_more", "bridge_entity_expand", "sufficiency_check", "rewrite_query"]
        state = dict(initial_state(q.question))
        states.append(state)
        for index in range(1, len(actions) + 1):
            try:
                state = dict(replay(q.question, actions[:index], resources, CFG))
            except ValueError:  # the action is not valid in this run
                break
            states.append(state)
    return states


def test_layout_is_fixed_and_documented() -> None:
    assert FEATURE_NAMES == STATE_FEATURE_NAMES + ACTION_FEATURE_NAMES
    assert len(set(FEATURE_NAMES)) == len(FEATURE_NAMES)
    assert len(STATE_FEATURE_NAMES) == N_STATE_FEATURES
    assert tuple(f"act_{a}" for a in ACTIONS) == ACTION_FEATURE_NAMES
    assert isinstance(FEATURE_SCHEMA_VERSION, int)
    for version, schema in FEATURE_SCHEMAS.items():
        assert schema.version == version and feature_schema(version) is schema
        assert schema.names == schema.state_names + ACTION_FEATURE_NAMES
        assert len(set(schema.names)) == len(schema.names)
        meanings = schema.meanings()  # every column has a one-line meaning
        assert list(meanings) == list(schema.names)
        assert all(text and "\n" not in text for text in meanings.values())
        assert not [n for n in schema.names if GOLD_WORDS.search(n)]
    assert feature_schema(FEATURE_SCHEMA_VERSION).names == FEATURE_NAMES
    with pytest.raises(ValueError, match="unknown feature schema 99"):
        feature_schema(99)


def test_vectors_are_finite_and_have_the_right_length() -> None:
    for state in demo_states():
        vector = state_features(state, CFG)
        assert vector.shape == (N_STATE_FEATURES,) and vector.dtype == np.float64
        assert np.all(np.isfinite(vector))
        for action in ACTIONS:
            row = featurize(state, action, CFG)
            assert row.shape == (len(FEATURE_NAMES),)
            assert np.array_equal(row[:N_STATE_FEATURES], vector)
            assert row[N_STATE_FEATURES:].tolist() == [float(a == action) for a in ACTIONS]
        many = featurize_many(state, list(ACTIONS), CFG)
        assert np.array_equal(many, np.stack([featurize(state, a, CFG) for a in ACTIONS]))


def test_odd_states_still_give_finite_features() -> None:
    odd = {
        "question": "What?",
        "frontier": {"top_score": math.nan, "margin": math.inf, "added_mean_score": "x"},
        "evidence": [{"id": "a"}],
        "steps": None,
        "sub_questions": [{"question": "q", "answer": None}],
        "evidence_count_at_check": None,
    }
    assert np.all(np.isfinite(state_features(odd, CFG)))
    assert np.all(np.isfinite(state_features({"question": ""}, CFG)))
    assert featurize_many({"question": "x"}, [], CFG).shape == (0, len(FEATURE_NAMES))
    with pytest.raises(ValueError):
        featurize({"question": "x"}, "not_an_action", CFG)


def test_features_read_only_observable_fields_never_gold() -> None:
    for state in demo_states():
        recording = RecordingState(state)
        recording["gold_support"] = ["person-x"]
        recording["support"] = ["person-x"]
        recording["answers"] = ["Quarstead"]
        vector = state_features(recording, CFG)
        assert recording.read <= OBSERVABLE, recording.read - OBSERVABLE
        assert np.array_equal(vector, state_features(state, CFG))


def test_the_controller_decision_does_not_change_the_features() -> None:
    state = demo_states()[2]
    decided = {**state, **decision_update(state, "sufficiency_check", CFG, HeuristicPolicy())}
    assert decided["next_action"] == "sufficiency_check"
    assert np.array_equal(state_features(state, CFG), state_features(decided, CFG))


def test_question_cues() -> None:
    def named(question: str) -> dict[str, float]:
        return dict(
            zip(STATE_FEATURE_NAMES, state_features({"question": question}, CFG), strict=True)
        )

    comparison = named("Who was born earlier, Talvor Quenby or Mirela Dovin?")
    assert comparison["q_wh_who"] == 1 and comparison["q_or_cue"] == 1
    assert comparison["q_comparison_cue"] == 1 and comparison["q_entities"] == 2
    assert comparison["q_words"] == 9 and comparison["q_yes_no"] == 0
    yes_no = named("Is Selkthorn Robotics based in Quarstead?")
    assert yes_no["q_yes_no"] == 1 and yes_no["q_wh_none"] == 1 and yes_no["q_or_cue"] == 0
    bridge = named("In which city is the headquarters of the company where Hesian Vaskow works?")
    assert bridge["q_wh_which"] == 1 and bridge["q_entities"] == 1
    assert sum(v for k, v in bridge.items() if k.startswith("q_wh_")) == 1


def test_state_signals_follow_the_run() -> None:
    states = demo_states()
    first = dict(zip(STATE_FEATURE_NAMES, state_features(states[0], CFG), strict=True))
    assert first["ev_docs"] == 0 and first["last_none"] == 1 and first["steps_frac"] == 0
    assert first["retrieval_left"] == CFG.max_retrieval_calls
    after = dict(zip(STATE_FEATURE_NAMES, state_features(states[1], CFG), strict=True))
    assert after["last_retrieve_more"] == 1 and after["last_none"] == 0
    assert after["ev_docs"] == CFG.docs_per_action
    assert after["new_doc_rate"] == 1.0
    assert after["fr_added_rank"] > 0 and after["steps_frac"] == 1 / CFG.max_steps
    assert after["ev_novelty"] == 1.0  # everything the first search added is new
    assert after["ev_since_check"] == CFG.docs_per_action and after["checked"] == 0

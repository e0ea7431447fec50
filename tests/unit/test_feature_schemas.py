"""Versioned feature schemas: v2 does not depend on the retriever's score scale, old policy
files keep computing the schema they were trained with, records keep the feature inputs."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from dynakrag.configuration import Configuration
from dynakrag.files import read_arrays
from dynakrag.policy.features import (
    FEATURE_SCHEMA_VERSION,
    FEATURE_SCHEMAS,
    feature_inputs,
    feature_schema,
    featurize_many,
    state_features,
    state_values,
)
from dynakrag.policy.learned import LearnedPolicy, PolicyFileError
from dynakrag.policy.registry import resolve_policy
from dynakrag.policy.value_model import TreeEnsemble
from dynakrag.state import ACTIONS
from tests.fakes import constant_tree
from tests.unit.test_features import demo_states

CFG = Configuration()
RAW_SCORES = ("fr_top_score", "fr_added_mean_score", "fr_margin")


def named(state: dict[str, Any], version: int = FEATURE_SCHEMA_VERSION) -> dict[str, float]:
    values = state_features(state, CFG, version=version)
    return dict(zip(feature_schema(version).state_names, values, strict=True))


def rescaled(state: dict[str, Any], factor: float) -> dict[str, Any]:
    """``state`` as another retriever would score it: every score times ``factor``."""
    scaled = copy.deepcopy(state)
    frontier = scaled.get("frontier") or {}
    for key in ("top_score", "added_mean_score", "margin"):
        if key in frontier:
            frontier[key] *= factor
    for doc in scaled.get("evidence") or []:
        doc["score"] = doc.get("score", 0.0) * factor
    return scaled


def test_the_current_schema_has_no_raw_retriever_scores() -> None:
    assert FEATURE_SCHEMA_VERSION == 3
    current = feature_schema().state_names
    assert not set(RAW_SCORES) & set(current)
    assert set(RAW_SCORES) <= set(FEATURE_SCHEMAS[1].state_names)
    assert {"fr_margin_norm", "fr_added_rank", "ev_novelty", "sub_covered_frac"} <= set(current)


def test_v2_features_do_not_change_with_the_score_scale_v1_do() -> None:
    states = [s for s in demo_states() if (s.get("frontier") or {}).get("top_score")]
    assert states
    v1_changed = False
    for state in states:
        for factor in (0.01, 37.0):
            other = rescaled(state, factor)
            assert np.allclose(  # equal up to rounding: ratios of scaled scores
                state_features(state, CFG, version=2),
                state_features(other, CFG, version=2),
                rtol=1e-12,
                atol=0.0,
            )
            v1_changed |= not np.allclose(
                state_features(state, CFG, version=1), state_features(other, CFG, version=1)
            )
    assert v1_changed


def test_feature_inputs_recompute_every_schema_after_a_json_round_trip() -> None:
    for state in demo_states():
        stored = json.loads(json.dumps(feature_inputs(state), allow_nan=False))
        assert "valid_actions" not in stored and "accounting" not in stored
        for version in FEATURE_SCHEMAS:
            assert np.array_equal(
                state_features(stored, CFG, version=version),
                state_features(state, CFG, version=version),
            )


def test_v2_columns_mean_what_they_say() -> None:
    doc = {"id": "a", "title": "Alpha", "text": "Alpha river city", "rank": 3, "query": "q"}
    new = {"id": "b", "title": "Beta", "text": "Beta river mountain", "rank": 9, "query": "q"}
    state = {
        "question": "Which river flows through Alpha and the Beta mountain?",
        "evidence": [doc, new],
        "frontier": {"top_score": 4.0, "margin": 1.0, "added_mean_score": 2.0},
        "trace": [
            {"action": "retrieve_more", "added": ["a"]},
            {"action": "gap_query", "added": ["b"]},
        ],
        "sub_questions": [
            {"question": "Which river flows through Alpha?", "answer": "Isar"},
            {"question": "Where is the Gamma delta?", "answer": None},
        ],
        "bridge_entities": ["Delta Town"],
        "expanded_entities": ["Beta"],
    }
    values = named(state)
    # "beta" and "mountain" are new, "river" was already in the evidence.
    assert values["ev_novelty"] == pytest.approx(2 / 3)
    assert values["fr_added_rank"] == pytest.approx(9 / CFG.frontier_depth)
    assert values["ev_rank_mean"] == pytest.approx(6 / CFG.frontier_depth)
    assert values["fr_margin_norm"] == pytest.approx(0.25)
    assert values["fr_score_ratio"] == pytest.approx(0.5)
    assert values["sub_covered_frac"] == pytest.approx(0.5)
    assert values["sub_answered_frac"] == 0.5 and values["sub_last_answered"] == 0.0
    assert values["bridge_titled"] == pytest.approx(0.5)  # Beta titles a passage, Delta not
    assert named({"question": "Who?"})["ev_novelty"] == 0.0


def split_on(n_features: int, column: int, threshold: float) -> TreeEnsemble:
    """0.2 when ``x[column] <= threshold``, else 0.9."""
    return TreeEnsemble(
        n_features=n_features,
        offsets=np.array([0, 3]),
        children_left=np.array([1, -1, -1]),
        children_right=np.array([2, -1, -1]),
        feature=np.array([column, -2, -2]),
        threshold=np.array([threshold, -2.0, -2.0]),
        value=np.array([0.0, 0.2, 0.9]),
    )


@pytest.mark.parametrize("version", sorted(FEATURE_SCHEMAS))
def test_a_policy_file_computes_the_schema_it_was_trained_with(
    version: int, tmp_path: Path
) -> None:
    schema = feature_schema(version)
    # The value forest splits on a column both schemas have, at different positions.
    column = schema.names.index("ev_docs")
    policy = LearnedPolicy(
        split_on(len(schema.names), column, 1.5),
        constant_tree(0.0, schema.n_state),
        feature_version=version,
    )
    path = policy.save(tmp_path / f"v{version}.npz")
    loaded = LearnedPolicy.load(path)
    assert loaded.feature_version == version
    _, meta = read_arrays(path)
    assert meta["feature_schema_version"] == version
    assert meta["feature_names"] == list(schema.names)
    assert meta["feature_meanings"] == schema.meanings()
    state = next(s for s in demo_states() if len(s.get("evidence") or []) > 2)
    values = loaded.raw_values(state, list(ACTIONS), CFG)
    assert set(values.values()) == {0.9}
    rows = featurize_many(state, list(ACTIONS), CFG, version=version)
    assert rows.shape == (len(ACTIONS), len(schema.names))
    # A file whose names do not match its schema version is refused.
    arrays, meta = read_arrays(path)
    other = 1 if version == 2 else 2
    from dynakrag.files import write_arrays

    write_arrays(tmp_path / "bad.npz", arrays, {**meta, "feature_schema_version": other})
    with pytest.raises(PolicyFileError, match=f"schema {other}"):
        LearnedPolicy.load(tmp_path / "bad.npz")


def test_the_shipped_policy_is_the_current_schema_and_keeps_its_columns() -> None:
    # Refitted on the chain collection (session 22): it reads the chain's hop features.
    shipped = resolve_policy("learned")
    assert isinstance(shipped, LearnedPolicy)
    assert shipped.feature_version == FEATURE_SCHEMA_VERSION == 3
    assert shipped.value_model.n_features == len(FEATURE_SCHEMAS[3].names)
    assert shipped.continuation_model.n_features == FEATURE_SCHEMAS[3].n_state


def test_schema_3_describes_the_chain_and_keeps_version_2_as_it_was() -> None:
    from dynakrag.actions.chain import plan_hops

    assert FEATURE_SCHEMAS[3].state_names[: FEATURE_SCHEMAS[2].n_state] == (
        FEATURE_SCHEMAS[2].state_names
    )
    hops = plan_hops(["Who founded Orbis Devices?", "In which country was #1 born?"])
    hops[0].update(status="resolved", answer="Ines Carrow", queries=["q"])
    values = state_values({"question": "In which country was the founder of Orbis born?",
                           "hops": hops}, Configuration())  # fmt: skip
    assert values["hops"] == 2 and values["hops_resolved_frac"] == 0.5
    assert values["hop_next_place"] == 1 and values["hop_searches_left"] == 2
    assert state_values({"question": "x"}, Configuration())["hops"] == 0

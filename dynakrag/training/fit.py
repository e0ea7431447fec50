"""Fit the learned controller (action-value and continuation forests) from collected records.

``fit_policy(records)``:

1. checks every record (schema, feature version and length, a known action, finite numbers,
   never an ``eval`` row), drops exact duplicates and sorts the rest canonically, so the
   result does not depend on record or file order; the SHA-256 of the canonical records is the
   training data hash stored in the policy file;
2. splits the questions (not the rows) into train and held-out parts with the seed, fits both
   forests on the train questions and reports held-out R² per action, overall and for the
   continuation model;
3. refits both forests on all questions (``refit=True``, the default) for the policy returned.

The value forest learns ``label`` from ``features``; the continuation forest learns
``continuation`` from the state part of ``features`` (one row per distinct state). Defaults
are the paper's: 300 trees, ``min_samples_leaf=8``, ``random_state=13``.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from dynakrag.errors import UserInputError
from dynakrag.files import canonical_json_line, records_sha256
from dynakrag.policy.base import ACTION_COSTS
from dynakrag.policy.features import FEATURE_NAMES, FEATURE_SCHEMA_VERSION, N_STATE_FEATURES
from dynakrag.policy.learned import (
    DEFAULT_CONTINUATION_MARGIN,
    DEFAULT_GUARD_PENALTY,
    LearnedPolicy,
)
from dynakrag.policy.value_model import fit_forest
from dynakrag.state import ACTIONS
from dynakrag.training.collect import RECORD_SCHEMA

__all__ = ["PolicyFitReport", "canonical_records", "fit_policy"]


@dataclass
class PolicyFitReport:
    """What a policy fit used and how well the held-out questions are predicted."""

    n_records: int
    n_states: int
    n_questions: int
    n_train_questions: int
    n_holdout_questions: int
    r2_by_action: dict[str, float | None]
    n_holdout_by_action: dict[str, int]
    r2_overall: float | None
    r2_continuation: float | None
    top_features: list[tuple[str, float]]
    training_data_sha256: str
    hyperparameters: dict[str, Any] = field(default_factory=dict)
    seconds: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (``seconds`` left out so the policy file stays reproducible)."""
        data = asdict(self)
        data.pop("seconds")
        data["top_features"] = [[name, value] for name, value in self.top_features]
        return data

    def format(self) -> str:
        """A readable summary for the command line."""

        def r2(value: float | None) -> str:
            return "n/a" if value is None else f"{value:+.3f}"

        lines = [
            f"records: {self.n_records} ({self.n_states} states, {self.n_questions} questions: "
            f"{self.n_train_questions} train, {self.n_holdout_questions} held out)",
            f"training data sha256: {self.training_data_sha256}",
            "held-out R² per action:",
        ]
        for action in ACTIONS:
            n = self.n_holdout_by_action.get(action, 0)
            lines.append(f"  {action:<28} {r2(self.r2_by_action.get(action)):>7}  (n={n})")
        lines.append(f"  {'overall':<28} {r2(self.r2_overall):>7}")
        lines.append(f"  {'continuation model':<28} {r2(self.r2_continuation):>7}")
        lines.append("top feature importances (value model):")
        lines.extend(f"  {name:<28} {value:.4f}" for name, value in self.top_features)
        lines.append(f"fitted in {self.seconds:.1f} s")
        return "\n".join(lines)


def _check(record: Mapping[str, Any], index: int) -> None:
    def bad(reason: str) -> UserInputError:
        return UserInputError(f"training record {index}: {reason}")

    if record.get("schema") != RECORD_SCHEMA:
        raise bad(f"not a {RECORD_SCHEMA} record")
    if record.get("split") == "eval":
        raise bad("it comes from an eval row; eval rows never train a policy")
    if record.get("feature_version") != FEATURE_SCHEMA_VERSION:
        raise bad(
            f"feature version {record.get('feature_version')!r}, this dynakrag computes "
            f"{FEATURE_SCHEMA_VERSION} (collect again)"
        )
    features = record.get("features")
    if not isinstance(features, list) or len(features) != len(FEATURE_NAMES):
        raise bad(f"features must be a list of {len(FEATURE_NAMES)} numbers")
    if record.get("action") not in ACTIONS:
        raise bad(f"unknown action {record.get('action')!r}")
    for key in ("label", "continuation"):
        value = record.get(key)
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise bad(f"{key} is not a number")
        if not math.isfinite(value):
            raise bad(f"{key} is not finite")
    if not all(
        isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)
        for v in features
    ):
        raise bad("features must be finite numbers")


def _question(record: Mapping[str, Any]) -> tuple[str, str]:
    return (str(record.get("dataset", "")), str(record.get("example_id", "")))


def _state_key(record: Mapping[str, Any]) -> tuple[str, str, str]:
    return (*_question(record), json.dumps(record.get("history", [])))


def canonical_records(records: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Checked, de-duplicated records in canonical order (question, state, action, content)."""
    lines: dict[str, dict[str, Any]] = {}
    for index, record in enumerate(records):
        _check(record, index)
        lines.setdefault(canonical_json_line(record), dict(record))
    return [
        lines[line]
        for line in sorted(lines, key=lambda ln: (_state_key(lines[ln]), lines[ln]["action"], ln))
    ]


def _r2(y: np.ndarray, predicted: np.ndarray) -> float | None:
    """R², or None where it is undefined (fewer than two rows, or a constant target)."""
    if len(y) < 2:
        return None
    total = float(np.sum((y - y.mean()) ** 2))
    if total <= 0.0:
        return None
    return 1.0 - float(np.sum((y - predicted) ** 2)) / total


def fit_policy(
    records: Iterable[Mapping[str, Any]],
    *,
    n_estimators: int = 300,
    min_samples_leaf: int = 8,
    random_state: int = 13,
    holdout: float = 0.2,
    progress: bool = True,
    continuation_margin: float = DEFAULT_CONTINUATION_MARGIN,
    guard_penalty: float = DEFAULT_GUARD_PENALTY,
    n_jobs: int | None = None,
    refit: bool = True,
) -> tuple[LearnedPolicy, PolicyFitReport]:
    """Fit a :class:`LearnedPolicy` and report its held-out accuracy (see the module doc)."""
    started = time.perf_counter()
    if not 0.0 <= holdout < 1.0:
        raise UserInputError(f"holdout must be in [0, 1), got {holdout}")
    rows = canonical_records(records)
    if not rows:
        raise UserInputError("no training records")
    digest = records_sha256(rows)

    X = np.asarray([r["features"] for r in rows], dtype=np.float64)
    y = np.asarray([r["label"] for r in rows], dtype=np.float64)
    actions = np.asarray([r["action"] for r in rows])
    questions = [_question(r) for r in rows]
    first_of_state: dict[tuple[str, str, str], int] = {}
    for index, record in enumerate(rows):
        first_of_state.setdefault(_state_key(record), index)
    state_rows = np.asarray(sorted(first_of_state.values()), dtype=np.int64)
    Xs = X[state_rows, :N_STATE_FEATURES]
    ys = np.asarray([rows[i]["continuation"] for i in state_rows], dtype=np.float64)

    distinct = sorted(set(questions))
    order = np.random.default_rng(random_state).permutation(len(distinct))
    n_hold = round(holdout * len(distinct)) if len(distinct) >= 2 else 0
    n_hold = min(max(n_hold, 1 if holdout > 0 and len(distinct) >= 2 else 0), len(distinct) - 1)
    held = {distinct[i] for i in order[:n_hold]}
    in_holdout = np.asarray([q in held for q in questions], dtype=bool)
    state_holdout = in_holdout[state_rows]

    params = {
        "n_estimators": n_estimators,
        "min_samples_leaf": min_samples_leaf,
        "random_state": random_state,
        "n_jobs": n_jobs,
    }

    def fit(mask: np.ndarray, smask: np.ndarray, stage: str) -> tuple[Any, Any, Any]:
        forest, value_model = fit_forest(
            X[mask], y[mask], progress=progress, desc=f"{stage}: value model", **params
        )
        _, continuation_model = fit_forest(
            Xs[smask], ys[smask], progress=progress, desc=f"{stage}: continuation", **params
        )
        return forest, value_model, continuation_model

    r2_by_action: dict[str, float | None] = dict.fromkeys(ACTIONS)
    n_by_action = dict.fromkeys(ACTIONS, 0)
    r2_overall = r2_continuation = None
    fitted = None
    if n_hold:
        fitted = fit(~in_holdout, ~state_holdout, "held-out check")
        _, value_model, continuation_model = fitted
        predicted = value_model.predict(X[in_holdout])
        held_actions, held_y = actions[in_holdout], y[in_holdout]
        for action in ACTIONS:
            mask = held_actions == action
            n_by_action[action] = int(mask.sum())
            r2_by_action[action] = _r2(held_y[mask], predicted[mask])
        r2_overall = _r2(held_y, predicted)
        r2_continuation = _r2(ys[state_holdout], continuation_model.predict(Xs[state_holdout]))
    everything = np.ones(len(rows), dtype=bool)
    if refit or fitted is None:
        fitted = fit(everything, np.ones(len(state_rows), dtype=bool), "final")
    forest, value_model, continuation_model = fitted
    importances = np.asarray(forest.feature_importances_, dtype=np.float64)
    top = sorted(range(len(FEATURE_NAMES)), key=lambda i: (-importances[i], i))[:10]

    hyper = {
        **{k: v for k, v in params.items() if k != "n_jobs"},
        "holdout": holdout,
        "refit": refit,
        "continuation_margin": continuation_margin,
        "guard_penalty": guard_penalty,
    }
    report = PolicyFitReport(
        n_records=len(rows),
        n_states=len(state_rows),
        n_questions=len(distinct),
        n_train_questions=len(distinct) - n_hold,
        n_holdout_questions=n_hold,
        r2_by_action=r2_by_action,
        n_holdout_by_action=n_by_action,
        r2_overall=r2_overall,
        r2_continuation=r2_continuation,
        top_features=[(FEATURE_NAMES[i], round(float(importances[i]), 6)) for i in top],
        training_data_sha256=digest,
        hyperparameters=hyper,
    )
    policy = LearnedPolicy(
        value_model,
        continuation_model,
        continuation_margin=continuation_margin,
        guard_penalty=guard_penalty,
        action_costs=dict(ACTION_COSTS),
        training_data_sha256=digest,
        info={"fit": report.to_dict()},
    )
    report.seconds = time.perf_counter() - started
    return policy, report

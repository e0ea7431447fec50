"""Fit the learned controller (action-value and continuation forests) from collected records.

``fit_policy(records)``:

1. checks every record (schema, a known action, finite labels, never an ``eval`` row, and
   features it can use: see below), drops exact duplicates and sorts the rest canonically, so
   the result does not depend on record or file order; the SHA-256 of the canonical records is
   the training data hash stored in the policy file;
2. computes the features under ``feature_version`` (default the current
   :data:`~dynakrag.policy.features.FEATURE_SCHEMA_VERSION`): from the record's ``state``
   (:func:`~dynakrag.policy.features.feature_inputs`) with its ``budgets``, so records
   collected under an older schema train a newer one without collecting again; a record
   without ``state`` (written before it existed) only has its stored ``features`` and is
   accepted only when they are of ``feature_version``;
3. splits the questions (not the rows) into train and held-out parts with the seed, fits both
   forests on the train questions and reports held-out R² and mean absolute error per action,
   overall and for the continuation model;
4. refits both forests on all questions (``refit=True``, the default) for the policy returned.

The value forest learns ``label`` from the (state, action) features; the continuation forest
learns ``continuation`` from the state features (one row per distinct state). Both fields
hold the targets of whichever label definition the record was collected with
(``label_version``: 1 for the paper's support-recall labels that ``dynakrag collect`` writes
by default, 2 for the answer-F1 labels of ``--labels answer``); the report counts each and
warns when both are pooled. Defaults are the paper's: 300 trees, ``min_samples_leaf=8``,
``random_state=13``.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from dynakrag.configuration import Configuration
from dynakrag.errors import UserInputError
from dynakrag.files import canonical_json_line, records_sha256
from dynakrag.policy.base import ACTION_COSTS
from dynakrag.policy.features import (
    CONFIG_FIELDS,
    FEATURE_SCHEMA_VERSION,
    FeatureSchema,
    action_one_hot,
    feature_schema,
    state_features,
)
from dynakrag.policy.learned import (
    DEFAULT_CONTINUATION_MARGIN,
    DEFAULT_GUARD_PENALTY,
    LearnedPolicy,
)
from dynakrag.policy.value_model import TreeEnsemble, fit_forest
from dynakrag.state import ACTIONS
from dynakrag.training.records import RECORD_SCHEMA

__all__ = [
    "PolicyFitReport",
    "TrainingSet",
    "canonical_records",
    "fit_policy",
    "prediction_errors",
    "training_set",
]


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
    mae_by_action: dict[str, float | None] = field(default_factory=dict)
    mae_overall: float | None = None
    mae_continuation: float | None = None
    feature_version: int = FEATURE_SCHEMA_VERSION
    label_versions: dict[str, int] = field(default_factory=dict)
    """How many records follow each label definition (``label_version``; 1 when absent)."""
    controller_settings: dict[str, Any] | None = None
    """The controller settings (sub-question answering, max steps, max retrieval calls) every
    record was collected at; None when records differ or do not say (the policy is then best
    compared at the settings its user knows it was collected at)."""
    seconds: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (``seconds`` left out so the policy file stays reproducible)."""
        data = asdict(self)
        data.pop("seconds")
        data["top_features"] = [[name, value] for name, value in self.top_features]
        return data

    def format(self) -> str:
        """A readable summary for the command line, with the feature schema."""

        def number(value: float | None, signed: bool = True) -> str:
            if value is None:
                return "n/a"
            return f"{value:+.3f}" if signed else f"{value:.3f}"

        schema = feature_schema(self.feature_version)
        labels = ", ".join(f"v{v}: {n}" for v, n in sorted(self.label_versions.items()))
        lines = [
            f"records: {self.n_records} ({self.n_states} states, {self.n_questions} questions: "
            f"{self.n_train_questions} train, {self.n_holdout_questions} held out)",
            f"label definitions: {labels or 'n/a'} (v1: support recall, the paper's; "
            "v2: answer F1 for the answer actions)",
            f"training data sha256: {self.training_data_sha256}",
            "collected with the controller settings: "
            + (
                ", ".join(f"{k}={v}" for k, v in sorted(self.controller_settings.items()))
                if self.controller_settings
                else "not recorded, or mixed"
            ),
            "held-out R² per action, then mean absolute error:",
        ]
        if len(self.label_versions) > 1:
            lines.insert(
                2,
                "warning: records of both label definitions are pooled: the answer actions' "
                "targets and the continuation mix support recall and answer F1",
            )
        for action in ACTIONS:
            n = self.n_holdout_by_action.get(action, 0)
            r2 = number(self.r2_by_action.get(action))
            mae = number(self.mae_by_action.get(action), signed=False)
            lines.append(f"  {action:<28} {r2:>7}  {mae:>6}  (n={n})")
        lines.append(
            f"  {'overall':<28} {number(self.r2_overall):>7}  "
            f"{number(self.mae_overall, signed=False):>6}"
        )
        lines.append(
            f"  {'continuation model':<28} {number(self.r2_continuation):>7}  "
            f"{number(self.mae_continuation, signed=False):>6}"
        )
        lines.append("top feature importances (value model):")
        lines.extend(f"  {name:<28} {value:.4f}" for name, value in self.top_features)
        lines.append(
            f"feature schema {schema.version} ({schema.n_state} state columns, then the "
            "candidate action's one-hot):"
        )
        lines.extend(
            f"  {name:<28} {meaning}"
            for name, meaning in schema.meanings().items()
            if not name.startswith("act_")
        )
        lines.append(f"fitted in {self.seconds:.1f} s")
        return "\n".join(lines)


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def _check(record: Mapping[str, Any], index: int, schema: FeatureSchema) -> None:
    def bad(reason: str) -> UserInputError:
        return UserInputError(f"training record {index}: {reason}")

    if record.get("schema") != RECORD_SCHEMA:
        raise bad(f"not a {RECORD_SCHEMA} record")
    if record.get("split") == "eval":
        raise bad("it comes from an eval row; eval rows never train a policy")
    if record.get("action") not in ACTIONS:
        raise bad(f"unknown action {record.get('action')!r}")
    for key in ("label", "continuation"):
        value = record.get(key)
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise bad(f"{key} is not a number")
        if not math.isfinite(value):
            raise bad(f"{key} is not finite")
    if "state" in record:
        budgets = record.get("budgets")
        if not isinstance(record["state"], dict) or not isinstance(budgets, dict):
            raise bad("state and budgets must be objects")
        if not all(isinstance(budgets.get(name), int) for name in CONFIG_FIELDS):
            raise bad(f"budgets must give the integers {', '.join(CONFIG_FIELDS)}")
        return
    if record.get("feature_version") != schema.version:
        raise bad(
            f"it has only features of schema {record.get('feature_version')!r} and no state "
            f"to compute schema {schema.version} from (collect again, or train schema "
            f"{record.get('feature_version')!r})"
        )
    features = record.get("features")
    if not isinstance(features, list) or len(features) != len(schema.names):
        raise bad(f"features must be a list of {len(schema.names)} numbers")
    if not all(_number(v) for v in features):
        raise bad("features must be finite numbers")


def _question(record: Mapping[str, Any]) -> tuple[str, str]:
    return (str(record.get("dataset", "")), str(record.get("example_id", "")))


def _state_key(record: Mapping[str, Any]) -> tuple[str, str, str]:
    return (*_question(record), json.dumps(record.get("history", [])))


def canonical_records(
    records: Iterable[Mapping[str, Any]], feature_version: int = FEATURE_SCHEMA_VERSION
) -> list[dict[str, Any]]:
    """Checked, de-duplicated records in canonical order (question, state, action, content)."""
    schema = feature_schema(feature_version)
    lines: dict[str, dict[str, Any]] = {}
    for index, record in enumerate(records):
        _check(record, index, schema)
        lines.setdefault(canonical_json_line(record), dict(record))
    return [
        lines[line]
        for line in sorted(lines, key=lambda ln: (_state_key(lines[ln]), lines[ln]["action"], ln))
    ]


@dataclass
class TrainingSet:
    """Canonical records as the forests' arrays (see :func:`training_set`)."""

    records: list[dict[str, Any]]
    schema: FeatureSchema
    X: np.ndarray
    """One row of (state, action) features per record."""
    y: np.ndarray
    actions: np.ndarray
    questions: list[tuple[str, str]]
    state_rows: np.ndarray
    """Index of the first record of each distinct state (the continuation model's rows)."""
    continuation: np.ndarray

    @property
    def state_X(self) -> np.ndarray:
        return self.X[self.state_rows, : self.schema.n_state]


def training_set(
    records: Iterable[Mapping[str, Any]], feature_version: int = FEATURE_SCHEMA_VERSION
) -> TrainingSet:
    """Check, de-duplicate and order ``records`` and compute their features under
    ``feature_version`` (each distinct state once)."""
    try:
        schema = feature_schema(feature_version)
    except ValueError as exc:
        raise UserInputError(str(exc)) from None
    rows = canonical_records(records, schema.version)
    configs: dict[tuple[int, ...], Configuration] = {}
    by_state: dict[tuple[str, str, str], np.ndarray] = {}
    matrix = []
    for record in rows:
        if "state" in record:
            key = _state_key(record)
            if key not in by_state:
                budgets = tuple(int(record["budgets"][name]) for name in CONFIG_FIELDS)
                if budgets not in configs:  # ConfigurationError (a UserInputError) if invalid
                    values = dict(zip(CONFIG_FIELDS, budgets, strict=True))
                    configs[budgets] = Configuration().merged(values)
                cfg = configs[budgets]
                by_state[key] = state_features(record["state"], cfg, version=schema.version)
            matrix.append(np.concatenate([by_state[key], action_one_hot(record["action"])]))
        else:
            matrix.append(np.asarray(record["features"], dtype=np.float64))
    width = len(schema.names)
    X = np.asarray(matrix, dtype=np.float64).reshape(len(rows), width)
    first_of_state: dict[tuple[str, str, str], int] = {}
    for index, record in enumerate(rows):
        first_of_state.setdefault(_state_key(record), index)
    state_rows = np.asarray(sorted(first_of_state.values()), dtype=np.int64)
    return TrainingSet(
        records=rows,
        schema=schema,
        X=X,
        y=np.asarray([r["label"] for r in rows], dtype=np.float64),
        actions=np.asarray([r["action"] for r in rows]),
        questions=[_question(r) for r in rows],
        state_rows=state_rows,
        continuation=np.asarray([rows[i]["continuation"] for i in state_rows], dtype=np.float64),
    )


def _r2(y: np.ndarray, predicted: np.ndarray) -> float | None:
    """R², or None where it is undefined (fewer than two rows, or a constant target)."""
    if len(y) < 2:
        return None
    total = float(np.sum((y - y.mean()) ** 2))
    if total <= 0.0:
        return None
    return 1.0 - float(np.sum((y - predicted) ** 2)) / total


def _mae(y: np.ndarray, predicted: np.ndarray) -> float | None:
    return float(np.mean(np.abs(y - predicted))) if len(y) else None


def prediction_errors(
    value_model: TreeEnsemble,
    continuation_model: TreeEnsemble,
    data: TrainingSet,
    rows: np.ndarray | None = None,
) -> dict[str, Any]:
    """R² and mean absolute error of both models on ``rows`` (a boolean mask over
    ``data.records``; all by default): per action, overall and for the continuation model."""
    mask = np.ones(len(data.records), dtype=bool) if rows is None else np.asarray(rows, bool)
    predicted = value_model.predict(data.X[mask]) if mask.any() else np.zeros(0)
    y, actions = data.y[mask], data.actions[mask]
    smask = mask[data.state_rows]
    states = data.state_X[smask]
    continued = continuation_model.predict(states) if len(states) else np.zeros(0)
    return {
        "r2_by_action": {a: _r2(y[actions == a], predicted[actions == a]) for a in ACTIONS},
        "mae_by_action": {a: _mae(y[actions == a], predicted[actions == a]) for a in ACTIONS},
        "n_by_action": {a: int(np.sum(actions == a)) for a in ACTIONS},
        "r2_overall": _r2(y, predicted),
        "mae_overall": _mae(y, predicted),
        "r2_continuation": _r2(data.continuation[smask], continued),
        "mae_continuation": _mae(data.continuation[smask], continued),
    }


def shared_controller_settings(records: Sequence[Mapping[str, Any]]) -> dict[str, Any] | None:
    """The controller settings all ``records`` were collected at (their
    ``collection.controller``), or None when one does not say or two differ."""
    shared: dict[str, Any] | None = None
    for record in records:
        settings = (record.get("collection") or {}).get("controller")
        if not isinstance(settings, Mapping) or (shared is not None and settings != shared):
            return None
        shared = dict(settings)
    return shared


def _holdout_questions(
    questions: Sequence[tuple[str, str]], holdout: float, random_state: int
) -> set[tuple[str, str]]:
    distinct = sorted(set(questions))
    order = np.random.default_rng(random_state).permutation(len(distinct))
    n_hold = round(holdout * len(distinct)) if len(distinct) >= 2 else 0
    n_hold = min(max(n_hold, 1 if holdout > 0 and len(distinct) >= 2 else 0), len(distinct) - 1)
    return {distinct[i] for i in order[:n_hold]}


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
    feature_version: int = FEATURE_SCHEMA_VERSION,
) -> tuple[LearnedPolicy, PolicyFitReport]:
    """Fit a :class:`LearnedPolicy` and report its held-out accuracy (see the module doc)."""
    started = time.perf_counter()
    if not 0.0 <= holdout < 1.0:
        raise UserInputError(f"holdout must be in [0, 1), got {holdout}")
    data = training_set(records, feature_version)
    if not data.records:
        raise UserInputError("no training records")
    digest = records_sha256(data.records)
    held = _holdout_questions(data.questions, holdout, random_state)
    in_holdout = np.asarray([q in held for q in data.questions], dtype=bool)
    state_holdout = in_holdout[data.state_rows]

    params = {
        "n_estimators": n_estimators,
        "min_samples_leaf": min_samples_leaf,
        "random_state": random_state,
        "n_jobs": n_jobs,
    }

    def fit(mask: np.ndarray, smask: np.ndarray, stage: str) -> tuple[Any, Any, Any]:
        forest, value_model = fit_forest(
            data.X[mask], data.y[mask], progress=progress, desc=f"{stage}: value model", **params
        )
        _, continuation_model = fit_forest(
            data.state_X[smask],
            data.continuation[smask],
            progress=progress,
            desc=f"{stage}: continuation",
            **params,
        )
        return forest, value_model, continuation_model

    errors: dict[str, Any] = {
        "r2_by_action": dict.fromkeys(ACTIONS),
        "mae_by_action": dict.fromkeys(ACTIONS),
        "n_by_action": dict.fromkeys(ACTIONS, 0),
    }
    fitted = None
    if held:
        fitted = fit(~in_holdout, ~state_holdout, "held-out check")
        errors = prediction_errors(fitted[1], fitted[2], data, in_holdout)
    if refit or fitted is None:
        fitted = fit(
            np.ones(len(data.records), dtype=bool),
            np.ones(len(data.state_rows), dtype=bool),
            "final",
        )
    forest, value_model, continuation_model = fitted
    importances = np.asarray(forest.feature_importances_, dtype=np.float64)
    names = data.schema.names
    top = sorted(range(len(names)), key=lambda i: (-importances[i], i))[:10]
    label_versions: dict[str, int] = {}
    for record in data.records:
        version = str(record.get("label_version", 1))
        label_versions[version] = label_versions.get(version, 0) + 1

    hyper = {
        **{k: v for k, v in params.items() if k != "n_jobs"},
        "holdout": holdout,
        "refit": refit,
        "continuation_margin": continuation_margin,
        "guard_penalty": guard_penalty,
    }
    distinct = len(set(data.questions))
    report = PolicyFitReport(
        n_records=len(data.records),
        n_states=len(data.state_rows),
        n_questions=distinct,
        n_train_questions=distinct - len(held),
        n_holdout_questions=len(held),
        r2_by_action=errors["r2_by_action"],
        n_holdout_by_action=errors["n_by_action"],
        r2_overall=errors.get("r2_overall"),
        r2_continuation=errors.get("r2_continuation"),
        top_features=[(names[i], round(float(importances[i]), 6)) for i in top],
        training_data_sha256=digest,
        hyperparameters=hyper,
        mae_by_action=errors["mae_by_action"],
        mae_overall=errors.get("mae_overall"),
        mae_continuation=errors.get("mae_continuation"),
        feature_version=data.schema.version,
        label_versions=label_versions,
        controller_settings=shared_controller_settings(data.records),
    )
    policy = LearnedPolicy(
        value_model,
        continuation_model,
        continuation_margin=continuation_margin,
        guard_penalty=guard_penalty,
        action_costs=dict(ACTION_COSTS),
        training_data_sha256=digest,
        info={"fit": report.to_dict()},
        feature_version=data.schema.version,
    )
    report.seconds = time.perf_counter() - started
    return policy, report

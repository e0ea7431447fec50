"""The learned DynaKRAG controller: random-forest action values plus a continuation guard.

``value(s, a)`` is v̂(s, a), the action-value forest's prediction on
:func:`~dynakrag.policy.features.featurize` ``(s, a)`` of the training labels
(:mod:`dynakrag.training.collect`): the support-recall gain of an acquisition action and, for
``stop_answer`` / ``compress_answer_evidence`` / ``sufficiency_check``, the F1 of the answer
written right after it (label version 2; the shipped schema-1 policy learned support recall
there instead). A second forest, the continuation model ĉ(s) over the state features,
estimates the gain still available by going on (answer F1; support recall for label version
1). The guard: when ĉ(s) > ``continuation_margin`` and an acquisition action is valid,
``stop_answer`` and ``compress_answer_evidence`` lose ``guard_penalty`` (default 1.0, more than
any label value), so the controller does not stop early.
``ablate_continuation=True`` switches the guard off (the ablation).

One file holds everything (an array archive of :func:`dynakrag.files.write_arrays`; see
:mod:`dynakrag.files` for why loading runs no code): both ensembles, the policy schema version,
the feature schema version the forests were trained with (a policy computes that schema's
columns, so a file trained under an older schema keeps deciding as it did), the feature names
and their meanings, the per-action costs used in ``v - lambda * c``, the hyper-parameters and
the SHA-256 of the training records; after ``dynakrag calibrate``, also the λ calibration
curve and token cost table of :mod:`dynakrag.policy.token_budget` (JSON key ``calibration``;
files without it load as before).
"""

from __future__ import annotations

import copy
import math
import os
import re
from collections.abc import Mapping, Sequence
from functools import lru_cache
from pathlib import Path
from typing import Any

from dynakrag.configuration import Configuration
from dynakrag.files import ModelFileError, json_safe, read_arrays, write_arrays
from dynakrag.policy.base import ACTION_COSTS, Policy, action_cost
from dynakrag.policy.features import (
    FEATURE_SCHEMA_VERSION,
    FEATURE_SCHEMAS,
    feature_schema,
    featurize_many,
    state_features,
)
from dynakrag.policy.token_budget import CalibrationCurve
from dynakrag.policy.value_model import TreeEnsemble
from dynakrag.state import ACQUISITION_ACTIONS, ACTIONS, TERMINAL_ACTIONS, State

__all__ = [
    "FILE_FORMAT",
    "SCHEMA_VERSION",
    "LearnedPolicy",
    "PolicyFileError",
    "load_policy_file",
]

FILE_FORMAT = "dynakrag-policy"
SCHEMA_VERSION = 1
"""Version of the policy file layout (arrays and metadata keys)."""
DEFAULT_CONTINUATION_MARGIN = 0.1
DEFAULT_GUARD_PENALTY = 1.0
_SHA256 = re.compile(r"[0-9a-f]{64}")
_VALUE, _CONTINUATION = "value", "continuation"


class PolicyFileError(ModelFileError):
    """A file given as a policy is not a valid dynakrag policy file."""

    kind = "policy file"


class LearnedPolicy(Policy):
    """argmax over valid actions of v̂(s, a) − λ·c(a), with the continuation guard."""

    name = "learned"

    def __init__(
        self,
        value_model: TreeEnsemble,
        continuation_model: TreeEnsemble,
        *,
        continuation_margin: float = DEFAULT_CONTINUATION_MARGIN,
        guard_penalty: float = DEFAULT_GUARD_PENALTY,
        action_costs: Mapping[str, float] | None = None,
        training_data_sha256: str = "",
        ablate_continuation: bool = False,
        info: Mapping[str, Any] | None = None,
        feature_version: int = FEATURE_SCHEMA_VERSION,
        calibration: CalibrationCurve | None = None,
    ) -> None:
        schema = feature_schema(feature_version)
        if value_model.n_features != len(schema.names):
            raise ValueError(
                f"the value model takes {value_model.n_features} features, "
                f"expected {len(schema.names)} (feature schema {feature_version})"
            )
        if continuation_model.n_features != schema.n_state:
            raise ValueError(
                f"the continuation model takes {continuation_model.n_features} features, "
                f"expected {schema.n_state} (feature schema {feature_version})"
            )
        if not math.isfinite(continuation_margin):
            raise ValueError("continuation_margin must be finite")
        if not (math.isfinite(guard_penalty) and guard_penalty >= 0):
            raise ValueError("guard_penalty must be a finite number >= 0")
        costs = dict(ACTION_COSTS if action_costs is None else action_costs)
        if set(costs) != set(ACTIONS) or not all(
            isinstance(c, int | float) and math.isfinite(c) for c in costs.values()
        ):
            raise ValueError("action_costs must give a finite cost for each of the seven actions")
        self.value_model = value_model
        self.continuation_model = continuation_model
        self.continuation_margin = float(continuation_margin)
        self.guard_penalty = float(guard_penalty)
        self.action_costs = {a: float(costs[a]) for a in ACTIONS}
        self.training_data_sha256 = training_data_sha256
        self.ablate_continuation = bool(ablate_continuation)
        self.info: dict[str, Any] = dict(info or {})
        self.feature_version = schema.version
        """The feature schema the models were trained with, and that this policy computes."""
        self.calibration = calibration
        """λ against tokens and quality on train rows (``dynakrag calibrate``), used by
        ``token_budget``; None when the file has none (see :mod:`dynakrag.policy.token_budget`)."""

    # --- the model ------------------------------------------------------------------------

    def raw_values(
        self, state: State, actions: Sequence[str], cfg: Configuration
    ) -> dict[str, float]:
        """v̂(s, a) for each action, without the guard."""
        if not actions:
            return {}
        rows = featurize_many(state, actions, cfg, version=self.feature_version)
        predicted = self.value_model.predict(rows)
        return {a: float(v) for a, v in zip(actions, predicted, strict=True)}

    def continuation(self, state: State, cfg: Configuration) -> float:
        """ĉ(s): the gain predicted to be still available by going on."""
        features = state_features(state, cfg, version=self.feature_version)
        return float(self.continuation_model.predict(features)[0])

    def guard_active(self, state: State, actions: Sequence[str], cfg: Configuration) -> bool:
        """Whether stopping is down-weighted now."""
        if self.ablate_continuation or not any(a in ACQUISITION_ACTIONS for a in actions):
            return False
        if not any(a in TERMINAL_ACTIONS for a in actions):
            return False
        return self.continuation(state, cfg) > self.continuation_margin

    def value(self, state: State, actions: Sequence[str], cfg: Configuration) -> dict[str, float]:
        """v̂(s, a), with stop_answer / compress_answer_evidence down-weighted by the guard."""
        values = self.raw_values(state, actions, cfg)
        if self.guard_active(state, actions, cfg):
            for action in TERMINAL_ACTIONS & values.keys():
                values[action] -= self.guard_penalty
        return values

    def scores(self, state: State, actions: Sequence[str], cfg: Configuration) -> dict[str, float]:
        """v(s, a) − λ·c(s, a) with the costs stored in the policy file (plus the model calls
        of DICS compression's extraction, :func:`~dynakrag.policy.base.action_cost`)."""
        values = self.value(state, actions, cfg)
        costs = self.action_costs
        return {a: values[a] - cfg.cost_lambda * action_cost(a, state, cfg, costs) for a in actions}

    @property
    def controller_settings(self) -> dict[str, Any] | None:
        """The controller settings its training records were collected at (sub-question
        answering, max steps, max retrieval calls), when the fit recorded one set."""
        fit = self.info.get("fit")
        settings = fit.get("controller_settings") if isinstance(fit, Mapping) else None
        return dict(settings) if isinstance(settings, Mapping) else None

    def with_ablated_continuation(self, ablate: bool = True) -> LearnedPolicy:
        """The same models with the continuation guard switched off (or on)."""
        twin = self._twin()
        twin.ablate_continuation = bool(ablate)
        return twin

    def with_calibration(self, calibration: CalibrationCurve | None) -> LearnedPolicy:
        """The same policy carrying ``calibration`` (what ``dynakrag calibrate`` saves)."""
        twin = self._twin()
        twin.calibration = calibration
        return twin

    def _twin(self) -> LearnedPolicy:
        """A copy sharing the models; its dicts are its own, as a newly built policy's."""
        twin = copy.copy(self)
        twin.action_costs = dict(self.action_costs)
        twin.info = dict(self.info)
        return twin

    # --- files ----------------------------------------------------------------------------

    def metadata(self) -> dict[str, Any]:
        """The JSON metadata stored with the ensembles."""
        return {
            "format": FILE_FORMAT,
            "schema_version": SCHEMA_VERSION,
            "policy": self.name,
            "feature_schema_version": self.feature_version,
            "feature_names": list(feature_schema(self.feature_version).names),
            "state_feature_names": list(feature_schema(self.feature_version).state_names),
            "feature_meanings": feature_schema(self.feature_version).meanings(),
            "actions": list(ACTIONS),
            "action_costs": dict(self.action_costs),
            "continuation_margin": self.continuation_margin,
            "guard_penalty": self.guard_penalty,
            "training_data_sha256": self.training_data_sha256,
            "info": json_safe(self.info),
            **({"calibration": self.calibration.to_json()} if self.calibration else {}),
        }

    def save(self, path: str | os.PathLike[str]) -> Path:
        """Write the policy to one ``.npz`` file (atomically; same policy, same bytes)."""
        arrays = {
            **self.value_model.to_arrays(_VALUE),
            **self.continuation_model.to_arrays(_CONTINUATION),
        }
        return write_arrays(path, arrays, self.metadata())

    @classmethod
    def load(
        cls, path: str | os.PathLike[str], *, ablate_continuation: bool = False
    ) -> LearnedPolicy:
        """Read a policy file; :class:`PolicyFileError` for anything that is not one."""
        try:
            arrays, meta = read_arrays(path)
        except ModelFileError as exc:
            raise PolicyFileError(path, exc.reason) from None

        def refuse(reason: str) -> PolicyFileError:
            return PolicyFileError(path, reason)

        if meta.get("format") != FILE_FORMAT:
            raise refuse(f"its metadata format is {meta.get('format')!r}, not {FILE_FORMAT!r}")
        if meta.get("schema_version") != SCHEMA_VERSION:
            raise refuse(
                f"schema version {meta.get('schema_version')!r}; this dynakrag reads "
                f"version {SCHEMA_VERSION}"
            )
        version = meta.get("feature_schema_version")
        if isinstance(version, bool) or version not in FEATURE_SCHEMAS:
            known = ", ".join(str(v) for v in FEATURE_SCHEMAS)
            raise refuse(
                f"trained with feature schema {version!r}; this dynakrag computes schemas "
                f"{known} (retrain the policy)"
            )
        schema = FEATURE_SCHEMAS[version]
        if meta.get("feature_names") != list(schema.names):
            raise refuse(
                f"its feature names differ from this dynakrag's schema {version} (retrain the "
                "policy)"
            )
        if meta.get("actions") != list(ACTIONS):
            raise refuse("its action list differs from this dynakrag's")
        digest = meta.get("training_data_sha256")
        if not isinstance(digest, str) or not (digest == "" or _SHA256.fullmatch(digest)):
            raise refuse("training_data_sha256 is not a SHA-256 hex digest")
        expected = {f"{p}.{n}" for p in (_VALUE, _CONTINUATION) for n in _ARRAY_NAMES}
        if set(arrays) != expected:
            extra = sorted(set(arrays) ^ expected)
            raise refuse(f"unexpected or missing arrays: {', '.join(extra)}")
        try:
            value_model = TreeEnsemble.from_arrays(arrays, _VALUE, len(schema.names))
            continuation_model = TreeEnsemble.from_arrays(arrays, _CONTINUATION, schema.n_state)
            info = meta.get("info")
            return cls(
                value_model,
                continuation_model,
                continuation_margin=_finite(meta.get("continuation_margin")),
                guard_penalty=_finite(meta.get("guard_penalty")),
                action_costs=_costs(meta.get("action_costs")),
                training_data_sha256=digest,
                ablate_continuation=ablate_continuation,
                info=info if isinstance(info, dict) else {},
                feature_version=version,
                calibration=_calibration(meta.get("calibration")),
            )
        except (ValueError, TypeError) as exc:
            raise refuse(str(exc)) from None


_ARRAY_NAMES = ("offsets", "children_left", "children_right", "feature", "threshold", "value")


def _finite(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise ValueError(f"expected a finite number, got {value!r}")
    return float(value)


def _calibration(value: Any) -> CalibrationCurve | None:
    """The optional calibration curve (absent in files written before ``dynakrag calibrate``)."""
    return None if value is None else CalibrationCurve.from_json(value)


def _costs(value: Any) -> dict[str, float]:
    if not isinstance(value, dict):
        raise ValueError("action_costs is not an object")
    return {str(k): _finite(v) for k, v in value.items()}


def load_policy_file(path: str | os.PathLike[str]) -> LearnedPolicy:
    """The learned policy in ``path`` (what ``resolve_policy`` uses for a file).

    Loaded once per file version (path, modification time, size) and shared: a policy holds
    no per-run state.
    """
    resolved = Path(path).expanduser()
    try:
        info = resolved.stat()
    except OSError as exc:
        raise PolicyFileError(path, f"cannot read it ({exc.strerror or exc})") from None
    try:
        return _load_cached(str(resolved.resolve()), info.st_mtime_ns, info.st_size)
    except PolicyFileError as exc:
        raise PolicyFileError(path, exc.reason) from None


@lru_cache(maxsize=8)
def _load_cached(path: str, mtime_ns: int, size: int) -> LearnedPolicy:
    return LearnedPolicy.load(path)

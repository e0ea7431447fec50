"""Calibrating a learned policy for token budgets: λ against tokens and quality, on train rows.

:func:`calibrate` runs the policy (the ``dynakrag`` method, :func:`dynakrag.eval.runner.evaluate`)
on the first ``limit`` TRAIN questions of each dataset once per λ in ``lambdas``, with no token
budget, and records per λ the mean tokens (prompt + completion), support recall and answer F1
per question, pooled over the datasets. The same runs fit the policy's token cost table
(:func:`dynakrag.policy.token_budget.fit_token_costs`: actual / estimated prompt tokens,
from the estimates each decision recorded in its explanation, and mean completion tokens per
action). The result is a
:class:`~dynakrag.policy.token_budget.CalibrationCurve` that ``dynakrag calibrate`` stores in
the policy file (``LearnedPolicy.with_calibration``), where ``token_budget`` runs read it.

Eval rows are refused: they are for reporting only, and the budget sweep reports on them.
"""

from __future__ import annotations

import hashlib
import json
import statistics
import sys
from collections.abc import Callable, Sequence
from typing import Any

from langchain_core.embeddings import Embeddings
from langchain_core.language_models import BaseChatModel

from dynakrag.configuration import Configuration
from dynakrag.data.datasets import default_setting, require_train_split
from dynakrag.errors import UserInputError
from dynakrag.eval.methods.dynakrag import DynakragMethod
from dynakrag.eval.runner import evaluate
from dynakrag.policy.learned import LearnedPolicy
from dynakrag.policy.token_budget import (
    CalibrationCurve,
    CurvePoint,
    TokenCosts,
    fit_token_costs,
)

__all__ = ["DEFAULT_LAMBDAS", "calibrate", "curve_point", "describe_costs", "policy_digest"]

DEFAULT_LAMBDAS: tuple[float, ...] = (0.0, 0.05, 0.1, 0.2, 0.5, 1.0)
"""λ values measured by default: from the paper's 0 up to a cost weight that outranks the
support-recall values (which lie in [0, 1])."""


def curve_point(cost_lambda: float, records: Sequence[dict[str, Any]]) -> CurvePoint:
    """The means per question of evaluation ``records`` (``evaluate(...)["questions"]``)."""
    if not records:
        raise UserInputError("no questions to calibrate on")
    tokens = [r["prompt_tokens"] + r["completion_tokens"] for r in records]
    f1 = [r["f1"] for r in records if isinstance(r.get("f1"), int | float)]
    return CurvePoint(
        cost_lambda=float(cost_lambda),
        tokens=statistics.fmean(tokens),
        support_recall=statistics.fmean(r["support_recall"] for r in records),
        f1=statistics.fmean(f1) if f1 else None,
        n=len(records),
    )


def calibrate(
    policy: LearnedPolicy,
    datasets: Sequence[str],
    *,
    split: str = "train",
    limit: int | None = None,
    lambdas: Sequence[float] = DEFAULT_LAMBDAS,
    setting: str | None = None,
    retriever: str | None = None,
    cfg: Configuration | None = None,
    chat_model: BaseChatModel | None = None,
    embeddings: Embeddings | None = None,
    cache: bool = True,
    progress: bool = True,
    on_point: Callable[[CurvePoint], None] | None = None,
) -> CalibrationCurve:
    """Measure ``policy`` at each λ on train rows; the curve and cost table (see module doc).

    ``setting`` defaults to each dataset's evaluation default, ``retriever`` to the
    configuration's. ``on_point`` is called with each finished λ (progress lines).
    """
    require_train_split(split, "calibration fits the policy")
    if not datasets:
        raise UserInputError("give at least one dataset to calibrate on")
    values = sorted(set(float(v) for v in lambdas))
    if not values or any(v < 0 for v in values):
        raise UserInputError("lambdas must be numbers >= 0")
    base = cfg or Configuration.from_env()
    retriever = retriever or base.retriever
    points: list[CurvePoint] = []
    traces: list[list[dict[str, Any]]] = []
    llm_identity: str | None = None
    for value in values:
        run_cfg = base.merged({"cost_lambda": value, "token_budget": None})
        records: list[dict[str, Any]] = []
        for dataset in datasets:
            if progress:
                print(f"[calibrate] {dataset}/train λ={value:g}", file=sys.stderr, flush=True)
            result = evaluate(
                dataset,
                "train",
                setting or default_setting(dataset),
                DynakragMethod(policy=policy),
                retriever=retriever,
                limit=limit,
                cfg=run_cfg,
                chat_model=chat_model,
                embeddings=embeddings,
                progress=progress,
                cache=cache,
                report=False,
            )
            llm_identity = result["meta"]["models"].get("llm_identity", llm_identity)
            records += result["questions"]
            traces += [q["details"].get("trace", []) for q in result["questions"]]
        point = curve_point(value, records)
        points.append(point)
        if on_point is not None:
            on_point(point)
    return CalibrationCurve(
        points=tuple(points),
        costs=fit_token_costs(traces),
        data={
            "datasets": list(datasets),
            "split": "train",
            "limit": limit,
            "setting": setting,
            "retriever": retriever,
            "llm_identity": llm_identity,
            "policy_sha256": policy_digest(policy),
        },
    )


def describe_costs(costs: TokenCosts) -> str:
    """One line: the prompt correction and the mean completion tokens per action."""
    completion = ", ".join(f"{a} {v:g}" for a, v in costs.completion.items())
    return (
        f"prompt tokens x{costs.prompt_scale:g} of the estimate; completion tokens per call: "
        f"{completion or 'the completion budgets (too few calls measured)'}"
    )


def policy_digest(policy: LearnedPolicy) -> str:
    """SHA-256 of the policy's models and metadata without its calibration: which policy a
    curve was measured for."""
    meta = policy.with_calibration(None).metadata()
    digest = hashlib.sha256(json.dumps(meta, sort_keys=True, default=str).encode())
    for model in (policy.value_model, policy.continuation_model):
        for array in model.to_arrays("m").values():
            digest.update(array.tobytes())
    return digest.hexdigest()

"""Token budgets: what the next action will cost, when to stop acquiring, and which λ to run.

A user pays for tokens, not for λ. With ``token_budget`` N set, two things keep a question within
N tokens (prompt + completion, as the run's counters add them up):

**The stop rule** (validity rule ``token_budget``, :func:`budget_status`). Before each decision
every action except ``stop_answer`` is priced as *its own tokens plus the final answer after it*:
an acquisition adds up to ``docs_per_action`` passages that the answer prompt will then carry,
``sufficiency_check`` sends its own prompt (and the decomposition on the first check) and may
add checked facts to the answer, and the answer is always still to pay. An action whose price
exceeds what is left of N is blocked; when nothing but the answer fits, the controller answers.
Never blocked: the answer (a run must end), a compression that calls no model (it only shrinks
the answer) and ``retrieve_more`` while the evidence is empty (without passages there is nothing
to answer from), so a budget smaller than one answer over the first ``docs_per_action`` passages
is exceeded by that answer.

*Prices.* The prompt part is computed, not guessed: :func:`estimate` builds the prompt the
action would send (:mod:`dynakrag.prompts`, over the evidence window it would see) and counts
``CHARS_PER_TOKEN`` characters a token, so a corpus with long passages is priced as such. The
run's own counters then correct that count (:func:`run_correction`: actual / estimated prompt
tokens of the model calls this question has made, e.g. a denser tokenizer); an action that
has called the model before is corrected by its own calls, any other never below its own
estimate (a correction under 1 measured on one kind of call does not shrink another's price).
The completion part
cannot be read off the prompt: it comes from the policy's cost table (:class:`TokenCosts`: mean
completion tokens per action, and the prompt correction to start a run with, both measured on
train rows by ``dynakrag calibrate``), else the call's full completion budget. Each decision
records the estimate of the chosen action in its explanation; that is what the run's
correction and the calibration compare with the tokens really spent.

**λ from a calibration curve** (:class:`CalibrationCurve`, :func:`choose_lambda`). A learned
policy file may carry the curve ``dynakrag calibrate`` measured on train rows: for each λ, mean
tokens, support recall and F1 per question. With a budget, the run uses the λ with the best
support recall (then F1, then the smaller λ) among those whose mean tokens fit in N; when none
fits, the cheapest point. Without a curve (the shipped ``default_policy.npz``, the hand-written
policies) the documented fallback is: keep the configured ``cost_lambda`` and rely on the stop
rule alone, and the trace says so.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from dynakrag import prompts
from dynakrag.actions.chain import MAX_HOP_PASSAGES, next_hop_search
from dynakrag.configuration import Configuration
from dynakrag.state import ACQUISITION_ACTIONS, ACTIONS, BudgetRecord, Document, State

__all__ = [
    "BUDGET_RULE",
    "CHARS_PER_TOKEN",
    "BudgetStatus",
    "CalibrationCurve",
    "CurvePoint",
    "TokenCosts",
    "TokenEstimate",
    "budget_status",
    "choose_lambda",
    "estimate",
    "estimated_tokens",
    "fit_token_costs",
    "run_correction",
    "trace_token_records",
]

CHARS_PER_TOKEN = 4.0
"""Characters per token assumed by the estimate: prompt characters / prompt tokens averaged
3.97 (3.35-4.53) over 100 cached prompts of the embedded Qwen2.5 model (chat template
included); the run's own correction adjusts it per question."""
DEFAULT_PASSAGE_CHARS = 500
"""Length assumed for a passage not retrieved yet: the mean length of the evidence so far, but
at least this (mean title + text of the eval paragraphs: HotpotQA 532, 2Wiki 439, MuSiQue 507
characters), because lengths are skewed (2Wiki's median is 261) and a few short passages say
little about the next ones."""
DICS_LLM_TOKENS = 1200
"""DS-RAG compression with model extraction (``compression="dics"``, ``dsrag_extraction="llm"``):
EPQD plus the entity and relation calls, about three short prompts."""
FACT_ANSWER_CHARS = 24
"""Room assumed for each sub-answer a sufficiency check may add to the answer prompt."""
CORRECTION_RANGE = (0.5, 2.0)
"""The prompt correction is kept in this range: a few calls are a small sample."""
MIN_SAMPLES = 3
"""Calibration steps an action needs before its measured completion tokens are used."""
BUDGET_RULE = "token_budget"
"""The validity rule name a budget-blocked action is reported under."""


# --------------------------------------------------------------------------------------------
# Estimating one action's tokens


@dataclass(frozen=True)
class TokenEstimate:
    """An action's own model calls: estimated prompt tokens and the calls' completion budget."""

    prompt: float
    completion_budget: float

    @property
    def total(self) -> float:
        return self.prompt + self.completion_budget

    def to_json(self) -> dict[str, float]:
        return {"prompt": round(self.prompt, 1), "completion_budget": self.completion_budget}


NO_CALL = TokenEstimate(0.0, 0.0)


def _tokens(messages: Sequence[tuple[str, str]]) -> float:
    return sum(len(text) for _, text in messages) / CHARS_PER_TOKEN


def _window(state: State | Mapping[str, Any], cfg: Configuration) -> list[Document]:
    return list(state.get("evidence") or [])[: cfg.max_final_docs]


def _facts(state: State | Mapping[str, Any]) -> list[tuple[str, str]]:
    return [
        (str(sub.get("question", "")), str(sub.get("answer")))
        for sub in state.get("sub_questions") or []
        if isinstance(sub, Mapping) and sub.get("answer")
    ]


def _sub_questions(state: State | Mapping[str, Any]) -> list[str]:
    """The known sub-questions, else a typical two-hop split of the question's length."""
    subs = [str(s.get("question", "")) for s in state.get("sub_questions") or []]
    return subs or [str(state.get("question", ""))] * 2


def _window_after(
    state: State | Mapping[str, Any], action: str, cfg: Configuration
) -> list[Document]:
    """The answer's evidence window after ``action``: an acquisition adds up to
    ``docs_per_action`` passages (within ``max_final_docs``) of the evidence's mean length, at
    least :data:`DEFAULT_PASSAGE_CHARS`."""
    window = _window(state, cfg)
    if action not in ACQUISITION_ACTIONS:
        return window
    room = max(0, cfg.max_final_docs - len(window))
    lengths = [len(str(d.get("title", ""))) + len(str(d.get("text", ""))) for d in window]
    mean = max(DEFAULT_PASSAGE_CHARS, int(sum(lengths) / len(lengths)) if lengths else 0)
    added: list[Document] = [{"title": "", "text": "x" * mean}] * min(cfg.docs_per_action, room)
    return window + added


def answer_estimate(
    state: State | Mapping[str, Any],
    passages: Sequence[prompts.PromptPassage],
    facts: Sequence[tuple[str, str]] | None = None,
) -> TokenEstimate:
    """``stop_answer`` over ``passages`` (no call without passages)."""
    if not passages:
        return NO_CALL
    question = str(state.get("question", ""))
    shown = _facts(state) if facts is None else facts
    messages = prompts.answer_messages(question, passages, shown)
    return TokenEstimate(_tokens(messages), float(prompts.ANSWER_MAX_TOKENS))


def estimate(state: State | Mapping[str, Any], action: str, cfg: Configuration) -> TokenEstimate:
    """The tokens of ``action``'s own model calls in ``state`` (no correction; nothing for the
    actions that only search)."""
    question = str(state.get("question", ""))
    window = _window(state, cfg)
    if action == "stop_answer":
        return answer_estimate(state, window)
    if action == "sufficiency_check":
        prompt, completion = 0.0, 0.0
        rules_only = cfg.decomposition == "epqd" and cfg.dsrag_extraction == "rules"
        if not state.get("sub_questions") and not state.get("hops") and not rules_only:
            prompt += _tokens(prompts.decompose_messages(question))
            completion += prompts.DECOMPOSE_MAX_TOKENS
        if cfg.sub_question_answering == "chain":
            # The chain asks its next hop alone over at most MAX_HOP_PASSAGES of its entity's
            # passages: priced as the joint check, it would be overestimated, and the run's
            # correction would then underestimate the answer after it.
            hop = next_hop_search(state)
            messages = prompts.hop_messages(hop[0] if hop else question, window[:MAX_HOP_PASSAGES])
            return TokenEstimate(prompt + _tokens(messages), completion + prompts.HOP_MAX_TOKENS)
        subs = _sub_questions(state)
        prompt += _tokens(prompts.sufficiency_messages(question, subs, window))
        return TokenEstimate(prompt, completion + prompts.sufficiency_max_tokens(len(subs)))
    if action == "rewrite_query":
        query = str(state.get("query") or question)
        prompt = _tokens(prompts.rewrite_messages(question, query, window))
        return TokenEstimate(prompt, float(prompts.REWRITE_MAX_TOKENS))
    if action == "compress_answer_evidence":
        if cfg.compression == "dics" and cfg.dsrag_extraction == "llm":
            return TokenEstimate(float(DICS_LLM_TOKENS), 0.0)
        return NO_CALL
    if action in ACTIONS:
        return NO_CALL  # retrieve_more, gap_query, bridge_entity_expand: search only
    raise ValueError(f"unknown action {action!r}")


def estimated_tokens(state: State | Mapping[str, Any], action: str, cfg: Configuration) -> float:
    """:func:`estimate`'s total (prompt + full completion budget)."""
    return estimate(state, action, cfg).total


# --------------------------------------------------------------------------------------------
# The policy's cost table and the run's own counters


@dataclass(frozen=True)
class StepTokens:
    """One recorded decision: its action, estimated prompt tokens, and what it really cost."""

    action: str
    estimated_prompt: float
    prompt: int
    completion: int


def trace_token_records(trace: Sequence[Mapping[str, Any]]) -> list[StepTokens]:
    """The steps of ``trace`` whose decision recorded an estimate with a prompt to send
    (``entry["explanation"]["tokens"]["prompt"]`` > 0) and that called the model."""
    records = []
    for entry in trace:
        if not isinstance(entry, Mapping) or not entry.get("llm_calls"):
            continue
        explanation = entry.get("explanation")
        tokens = explanation.get("tokens") if isinstance(explanation, Mapping) else None
        estimated = tokens.get("prompt") if isinstance(tokens, Mapping) else None
        if isinstance(estimated, int | float) and estimated > 0:
            records.append(
                StepTokens(
                    action=str(entry.get("action")),
                    estimated_prompt=float(estimated),
                    prompt=int(entry.get("prompt_tokens", 0)),
                    completion=int(entry.get("completion_tokens", 0)),
                )
            )
    return records


def _clamped(value: float, bounds: tuple[float, float]) -> float:
    return min(bounds[1], max(bounds[0], value))


def _prompt_ratio(records: Sequence[StepTokens]) -> float | None:
    estimated = sum(r.estimated_prompt for r in records)
    return sum(r.prompt for r in records) / estimated if estimated > 0 else None


def run_correction(trace: Sequence[Mapping[str, Any]], prior: float = 1.0) -> float:
    """Actual / estimated prompt tokens of this run's model calls so far (``prior`` before
    any: the policy's measured ratio, or 1.0)."""
    return _correction(trace_token_records(trace), prior)


def _correction(records: Sequence[StepTokens], prior: float) -> float:
    ratio = _prompt_ratio(records)
    return _clamped(prior if ratio is None else ratio, CORRECTION_RANGE)


@dataclass(frozen=True)
class TokenCosts:
    """The policy's token cost table, measured on train rows (:func:`fit_token_costs`)."""

    prompt_scale: float = 1.0
    """Actual / estimated prompt tokens: the run's correction before its first model call."""
    completion: dict[str, float] = field(default_factory=dict)
    """Mean completion tokens of one execution per action (missing: the completion budget)."""

    def __post_init__(self) -> None:
        if not (math.isfinite(self.prompt_scale) and self.prompt_scale > 0):
            raise ValueError("prompt_scale must be a positive number")
        unknown = set(self.completion) - set(ACTIONS)
        if unknown or not all(math.isfinite(v) and v >= 0 for v in self.completion.values()):
            raise ValueError("completion must map actions to numbers >= 0")

    def completion_of(self, action: str, own: TokenEstimate) -> float:
        """Completion tokens to expect from ``action`` (none when it makes no call)."""
        if own.total <= 0:
            return 0.0
        return min(self.completion.get(action, own.completion_budget), own.completion_budget)

    def to_json(self) -> dict[str, Any]:
        return {"prompt_scale": self.prompt_scale, "completion_tokens": dict(self.completion)}

    @classmethod
    def from_json(cls, value: Any) -> TokenCosts:
        """Read :meth:`to_json`'s form; ``ValueError`` for anything else."""
        completion = value.get("completion_tokens") if isinstance(value, Mapping) else None
        if not isinstance(completion, Mapping):
            raise ValueError("token_costs must be an object with completion_tokens")
        return cls(
            prompt_scale=_number(value.get("prompt_scale")),
            completion={str(k): _number(v) for k, v in completion.items()},
        )


def fit_token_costs(traces: Sequence[Sequence[Mapping[str, Any]]]) -> TokenCosts:
    """The cost table of the recorded decisions in ``traces``: the prompt ratio over all model
    calls, and per action seen at least :data:`MIN_SAMPLES` times its mean completion tokens."""
    records = [r for trace in traces for r in trace_token_records(trace)]
    ratio = _prompt_ratio(records)
    completion = {}
    for action in ACTIONS:
        mine = [r.completion for r in records if r.action == action]
        if len(mine) >= MIN_SAMPLES:
            completion[action] = round(sum(mine) / len(mine), 2)
    scale = 1.0 if ratio is None else round(_clamped(ratio, CORRECTION_RANGE), 4)
    return TokenCosts(prompt_scale=scale, completion=completion)


# --------------------------------------------------------------------------------------------
# The stop rule


@dataclass(frozen=True)
class BudgetStatus:
    """Where a run stands against its token budget before a decision."""

    budget: int
    spent: int
    correction: float
    """The prompt correction used (:func:`run_correction`)."""
    price: dict[str, float] = field(default_factory=dict)
    """Per action: its expected tokens plus those of the answer after it."""
    exempt: frozenset[str] = frozenset()
    """Actions never blocked here (see the module doc)."""

    @property
    def remaining(self) -> int:
        return self.budget - self.spent

    @property
    def blocked(self) -> frozenset[str]:
        """Actions the rest of the budget cannot pay for (never ``stop_answer``)."""
        return frozenset(
            a for a, price in self.price.items() if price > self.remaining and a not in self.exempt
        )

    def to_json(self) -> BudgetRecord:
        return {
            "token_budget": self.budget,
            "spent": self.spent,
            "remaining": self.remaining,
            "correction": round(self.correction, 4),
            "price": {a: round(p, 1) for a, p in self.price.items()},
        }


def budget_status(
    state: State | Mapping[str, Any],
    cfg: Configuration,
    costs: TokenCosts | None = None,
) -> BudgetStatus | None:
    """The budget check of ``state`` (None without ``token_budget``); see the module doc."""
    if cfg.token_budget is None:
        return None
    costs = costs or TokenCosts()
    trace = list(state.get("trace") or [])
    records = trace_token_records(trace)  # read once: for the run's and each action's ratio
    correction = _correction(records, costs.prompt_scale)
    spent = int(state.get("prompt_tokens", 0) or 0) + int(state.get("completion_tokens", 0) or 0)

    def expected(action: str, own: TokenEstimate) -> float:
        # A correction below 1 shrinks only the price of the kind of call it was measured on:
        # a chain's check sees fewer passages than priced, the rewrite or the answer after it
        # need not, and pricing them below their own estimate let a run pass its budget.
        ratio = _prompt_ratio([r for r in records if r.action == action])
        scale = max(correction, 1.0) if ratio is None else _clamped(ratio, CORRECTION_RANGE)
        return scale * own.prompt + costs.completion_of(action, own)

    price = {}
    for action in ACTIONS:
        if action == "stop_answer":
            continue
        facts = None
        if action == "sufficiency_check":  # every part answered: one fact line each
            facts = [(sub, "x" * FACT_ANSWER_CHARS) for sub in _sub_questions(state)]
        answer = answer_estimate(state, _window_after(state, action, cfg), facts)
        own = estimate(state, action, cfg)
        price[action] = expected(action, own) + expected("stop_answer", answer)
    exempt = set() if state.get("evidence") else {"retrieve_more"}
    if estimate(state, "compress_answer_evidence", cfg).total == 0:
        exempt.add("compress_answer_evidence")
    return BudgetStatus(
        budget=cfg.token_budget,
        spent=spent,
        correction=correction,
        price=price,
        exempt=frozenset(exempt),
    )


# --------------------------------------------------------------------------------------------
# λ from the calibration curve


@dataclass(frozen=True)
class CurvePoint:
    """One λ measured on train rows: means per question."""

    cost_lambda: float
    tokens: float
    support_recall: float
    f1: float | None
    n: int


@dataclass(frozen=True)
class CalibrationCurve:
    """λ against tokens and quality, measured on train rows (``dynakrag calibrate``),
    plus the token cost table fitted on the same runs."""

    points: tuple[CurvePoint, ...]
    costs: TokenCosts
    data: dict[str, Any] = field(default_factory=dict)
    """What it was measured on (datasets, split, limit, setting, retriever, generator)."""

    VERSION = 1

    def __post_init__(self) -> None:
        if not self.points:
            raise ValueError("a calibration curve needs at least one point")
        for point in self.points:
            numbers = [point.cost_lambda, point.tokens, point.support_recall]
            if point.f1 is not None:
                numbers.append(point.f1)
            if not all(math.isfinite(v) and v >= 0 for v in numbers) or point.n < 1:
                raise ValueError(f"invalid calibration point {point}")

    def pick(self, budget: int) -> tuple[float, str]:
        """The λ for ``budget`` tokens a question and why (see the module doc)."""
        fitting = [p for p in self.points if p.tokens <= budget]
        if not fitting:
            cheapest = min(self.points, key=lambda p: (p.tokens, -p.cost_lambda))
            return cheapest.cost_lambda, (
                f"no calibrated λ keeps the expected tokens within {budget}: the cheapest, "
                f"λ={cheapest.cost_lambda:g} ({cheapest.tokens:.0f} tokens on train rows); "
                "the stop rule enforces the budget"
            )
        best = max(fitting, key=lambda p: (p.support_recall, p.f1 or 0.0, -p.cost_lambda))
        return best.cost_lambda, (
            f"calibrated: λ={best.cost_lambda:g} expects {best.tokens:.0f} tokens within "
            f"{budget} (support recall {best.support_recall:.2f} on train rows)"
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "version": self.VERSION,
            "points": [
                {
                    "cost_lambda": p.cost_lambda,
                    "tokens": p.tokens,
                    "support_recall": p.support_recall,
                    "f1": p.f1,
                    "n": p.n,
                }
                for p in self.points
            ],
            "token_costs": self.costs.to_json(),
            "data": dict(self.data),
        }

    @classmethod
    def from_json(cls, value: Any) -> CalibrationCurve:
        """Read :meth:`to_json`'s form; ``ValueError`` for anything else."""
        if not isinstance(value, Mapping) or value.get("version") != cls.VERSION:
            raise ValueError(f"calibration is not a version-{cls.VERSION} calibration object")
        raw_points = value.get("points")
        if not isinstance(raw_points, list):
            raise ValueError("calibration points must be a list")
        points = []
        for raw in raw_points:
            if not isinstance(raw, Mapping):
                raise ValueError("a calibration point is not an object")
            f1 = raw.get("f1")
            points.append(
                CurvePoint(
                    cost_lambda=_number(raw.get("cost_lambda")),
                    tokens=_number(raw.get("tokens")),
                    support_recall=_number(raw.get("support_recall")),
                    f1=None if f1 is None else _number(f1),
                    n=int(_number(raw.get("n"))),
                )
            )
        data = value.get("data")
        return cls(
            points=tuple(sorted(points, key=lambda p: p.cost_lambda)),
            costs=TokenCosts.from_json(value.get("token_costs")),
            data=dict(data) if isinstance(data, Mapping) else {},
        )


def _number(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise ValueError(f"expected a finite number, got {value!r}")
    return float(value)


def choose_lambda(
    cfg: Configuration, curve: CalibrationCurve | None, policy_name: str
) -> tuple[float, str]:
    """The λ a run uses and why: the configured one without a budget; with a budget, the
    curve's pick, or the documented fallback when the policy has no curve."""
    if cfg.token_budget is None:
        return cfg.cost_lambda, "configured cost_lambda"
    if curve is None:
        return cfg.cost_lambda, (
            f"policy {policy_name!r} has no calibration curve (dynakrag calibrate): the "
            f"configured λ={cfg.cost_lambda:g} is kept and only the stop rule enforces the "
            f"budget of {cfg.token_budget} tokens"
        )
    return curve.pick(cfg.token_budget)

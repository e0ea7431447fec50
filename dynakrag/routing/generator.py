"""Per-query generator selection (DRAG-QPP's post-retrieval step): perplexity picks the tier.

After retrieval, the generator's perplexity decides how much generation compute a question
gets: low perplexity stays on the light tier, high perplexity escalates. The signal is the
context's prompt-log-prob perplexity (``"context"``, the paper's;
:mod:`~dynakrag.routing.prompt_logprobs`) or, without a scorer, the perplexity of the light
tier's own answer (``"answer"``; :mod:`~dynakrag.routing.generator_tiers`); every
:class:`~dynakrag.routing.perplexity.PerplexitySignal` says which
(:mod:`~dynakrag.routing.perplexity`, which also fits the thresholds). Every answer is logged
as a :class:`~dynakrag.routing.decisions.RoutingDecision`.

A backend without log-probs gives a ``None`` signal: the router stays on the light tier and
logs why.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from dynakrag.errors import ConfigurationError, UserInputError
from dynakrag.llm.client import NO_USAGE, Usage
from dynakrag.retrieval.base import Searcher
from dynakrag.routing.decisions import DecisionLog, RoutingDecision, check_tier_names, tier_index
from dynakrag.routing.generator_tiers import GeneratorTier, answer_perplexity, measure_answer
from dynakrag.routing.perplexity import (
    LogprobsUnavailableError,
    PassageLike,
    PerplexitySignal,
    SignalKind,
    fit_perplexity_thresholds,
    perplexity_signal_name,
)
from dynakrag.routing.prompt_logprobs import PromptLogprobScorer, prompt_perplexity
from dynakrag.routing.thresholds import PercentileThresholds

__all__ = [
    "GeneratorRouter",
    "RoutedGeneration",
    "context_perplexity",
    "retrieved_contexts",
]

logger = logging.getLogger(__name__)


def _last_line(text: str) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[-1] if lines else ""


def context_perplexity(
    question: str,
    passages: Sequence[PassageLike],
    *,
    scorer: PromptLogprobScorer | None = None,
    tier: GeneratorTier | None = None,
    strict: bool = False,
) -> PerplexitySignal | None:
    """The post-retrieval perplexity signal, saying which one it measured (``kind``):

    the context's prompt-log-prob perplexity when ``scorer`` is given and its backend returns
    prompt log-probs (``"context"``); otherwise, when ``tier`` is given, the perplexity of the
    answer tokens that tier generates (``"answer"``); ``None`` when neither is available.
    """
    if scorer is None and tier is None:
        raise UserInputError("context_perplexity needs a scorer or a generator tier")
    if scorer is not None:
        signal = prompt_perplexity(
            scorer, passages, question=question, strict=strict and tier is None
        )
        if signal is not None or tier is None:
            return signal
        logger.info("falling back to the answer-token perplexity of tier %r", tier.name)
    assert tier is not None
    return answer_perplexity(tier, question, passages, strict=strict)


def retrieved_contexts(
    questions: Iterable[str], searcher: Searcher, *, k: int = 5
) -> list[tuple[str, list[PassageLike]]]:
    """``(question, top-k passages)`` per question: the input of
    :meth:`GeneratorRouter.fit_thresholds`. Pass **training** questions only."""
    return [(question, [p for p, _ in searcher.search(question, k)]) for question in questions]


@dataclass(frozen=True)
class RoutedGeneration:
    """The routed answer: text, the decision that produced it, the signal and the total usage
    (measurement included)."""

    answer: str | None
    decision: RoutingDecision
    signal: PerplexitySignal | None
    usage: Usage
    raw: str | None = field(default=None, repr=False)


class GeneratorRouter:
    """Chooses a generator tier per question from a post-retrieval perplexity signal.

    ``tiers`` run cheapest first. With a ``scorer`` the signal is the context's prompt
    perplexity (``"context"``); without one it is the perplexity of tier 0's own answer
    (``"answer"``), which is kept when the router stays light. ``thresholds`` must be of the
    same signal. No signal -> tier 0 (logged). ``fixed_tier`` skips measuring (baselines).
    Every answer is recorded in :attr:`log`. Retries and backoff are the tiers' clients'.
    """

    def __init__(
        self,
        tiers: Sequence[GeneratorTier],
        thresholds: PercentileThresholds | None,
        *,
        scorer: PromptLogprobScorer | None = None,
        fixed_tier: int | str | None = None,
        max_log: int = 100_000,
    ) -> None:
        self.tiers: tuple[GeneratorTier, ...] = tuple(tiers)
        check_tier_names([tier.name for tier in self.tiers])
        self.scorer = scorer
        self.signal_kind: SignalKind = "context" if scorer is not None else "answer"
        self.fixed_tier = None if fixed_tier is None else tier_index(self.tier_names, fixed_tier)
        if thresholds is None and self.fixed_tier is None:
            raise ConfigurationError("GeneratorRouter needs thresholds unless a tier is fixed")
        signal = perplexity_signal_name(self.signal_kind)
        if thresholds is not None and thresholds.signal != signal:
            raise ConfigurationError(
                f"thresholds were fitted on {thresholds.signal!r} but this router measures "
                f"{signal!r} ("
                + ("a scorer was given)" if scorer is not None else "no scorer was given)")
            )
        self.thresholds = thresholds
        self.log = DecisionLog(self.tier_names, max_log=max_log)

    @property
    def tier_names(self) -> tuple[str, ...]:
        """Tier names, lightest first."""
        return tuple(tier.name for tier in self.tiers)

    def always(self, tier: int | str) -> GeneratorRouter:
        """The same tiers with ``tier`` (index, negative allowed, or name) for every question."""
        return GeneratorRouter(self.tiers, self.thresholds, scorer=self.scorer, fixed_tier=tier)

    # --- signal and decision --------------------------------------------------------------

    def measure(
        self, question: str, passages: Sequence[PassageLike]
    ) -> tuple[PerplexitySignal | None, str | None, Usage]:
        """``(signal, tier 0's raw reply or None, usage)``: the ``"answer"`` signal comes
        with tier 0's reply (generated with or without log-probs)."""
        if self.scorer is not None:
            signal = prompt_perplexity(self.scorer, passages, question=question)
            return signal, None, signal.usage if signal is not None else NO_USAGE
        return measure_answer(self.tiers[0], question, passages, False)

    def level_of(self, signal: PerplexitySignal | None) -> int | None:
        """The thresholds' difficulty level of a signal (None without signal or thresholds)."""
        if signal is None or self.thresholds is None:
            return None
        return self.thresholds.level(signal.perplexity)

    def tier_for(self, signal: PerplexitySignal | None) -> int:
        """The tier a signal routes to; ``None`` -> 0 (the light tier)."""
        if self.fixed_tier is not None:
            return self.fixed_tier
        level = self.level_of(signal)
        return 0 if level is None else min(level, len(self.tiers) - 1)

    def answer(self, question: str, passages: Sequence[PassageLike]) -> RoutedGeneration:
        """Measure (unless fixed), choose a tier, and answer with it.

        A heavy reply without an answer line falls back to the light answer generated while
        measuring (``"answer"`` signal), else to the reply's last non-empty line. ``answer``
        is ``None`` only when every request failed.
        """
        started = time.perf_counter()
        signal: PerplexitySignal | None = None
        light_raw: str | None = None
        usage = NO_USAGE
        if self.fixed_tier is None:
            signal, light_raw, usage = self.measure(question, passages)
        tier = self.tier_for(signal)
        if self.fixed_tier is not None:
            reason = "fixed tier"
        elif signal is None:
            reason = f"no {self.signal_kind} perplexity signal: staying on the light tier"
            logger.info("%s (question %.80r)", reason, question)
        else:
            reason = f"{signal.kind} perplexity {signal.perplexity:.3g}"
        chosen = self.tiers[tier]
        if tier == 0 and self.fixed_tier is None and self.scorer is None:
            # Tier 0 already answered while measuring (its retries spent if it failed).
            raw: str | None = light_raw
            answer: str | None = None
            if light_raw is not None:
                answer = chosen.parse(light_raw)
                answer = answer if answer is not None else _last_line(light_raw)
        else:
            raw, _, call_usage = chosen.generate(question, passages)
            usage += call_usage
            answer = chosen.parse(raw) if raw is not None else None
            if answer is None and raw is not None:
                # No answer line (cut off mid-reasoning): the light answer when one was
                # generated while measuring, else the reply's last line.
                fallback = signal.answer if signal is not None else None
                answer = fallback if fallback is not None else _last_line(raw)
                logger.info("tier %r reply has no answer line; using %r", chosen.name, answer)
        decision = RoutingDecision(
            router="generator",
            query=question,
            tier=tier,
            tier_name=chosen.name,
            signal=perplexity_signal_name(signal.kind) if signal is not None else None,
            value=signal.perplexity if signal is not None else None,
            level=self.level_of(signal),
            fixed=self.fixed_tier is not None,
            reason=reason,
            seconds=time.perf_counter() - started,
        )
        self.log.record(decision)
        return RoutedGeneration(answer, decision, signal, usage, raw)

    def fit_thresholds(
        self,
        contexts: Iterable[tuple[str, Sequence[PassageLike]]],
        *,
        percentiles: Sequence[float] = (50.0,),
        source: str = "",
    ) -> PercentileThresholds:
        """Measure this router's signal on train ``(question, passages)`` pairs (e.g. from
        :func:`retrieved_contexts`) and fit thresholds; questions without a signal are
        skipped."""
        values: list[float] = []
        missing = 0
        for question, passages in contexts:
            signal, _, _ = self.measure(question, passages)
            if signal is None:
                missing += 1
            else:
                values.append(signal.perplexity)
        if missing:
            logger.warning("%d train question(s) gave no perplexity signal (skipped)", missing)
        if not values:
            raise LogprobsUnavailableError(
                f"no {self.signal_kind} perplexity could be measured on the train questions: "
                "the backend returns no log-probs"
            )
        return fit_perplexity_thresholds(
            values, kind=self.signal_kind, percentiles=percentiles, source=source
        )

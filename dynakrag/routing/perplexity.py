"""The perplexity signals the generator router reads, and their thresholds.

Two signals exist and every :class:`PerplexitySignal` says which one it measured (``kind``):

``"context"`` (the paper's signal)
    Perplexity of the retrieved *context* under the model, from prompt log-probs
    (:mod:`dynakrag.routing.prompt_logprobs`).
``"answer"`` (fallback)
    Perplexity of the *answer tokens* the light tier generates from question + context, from
    chat log-probs (:func:`chat_logprobs`, measured by
    :func:`~dynakrag.routing.generator_tiers.answer_perplexity`).

The thresholds are :class:`~dynakrag.routing.thresholds.PercentileThresholds` of signal
``"<kind>_perplexity"`` (:func:`fit_perplexity_thresholds`, the median by default).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any, Literal

from dynakrag.errors import ConfigurationError, ModelUnavailableError
from dynakrag.llm.client import NO_USAGE, Usage
from dynakrag.prompts import PromptPassage
from dynakrag.routing.thresholds import PercentileThresholds

__all__ = [
    "MIN_LOGPROB",
    "LogprobsUnavailableError",
    "PassageLike",
    "PerplexitySignal",
    "SignalKind",
    "chat_logprobs",
    "fit_perplexity_thresholds",
    "passage_dicts",
    "perplexity_of",
    "perplexity_signal_name",
    "render_context",
]

SignalKind = Literal["context", "answer"]
PassageLike = Mapping[str, Any] | Any
"""A passage as a dict with ``title``/``text``, or any object with those attributes
(:class:`~dynakrag.retrieval.passage.Passage`) or a ``passage`` attribute (a ``Hit``)."""

MIN_LOGPROB = -50.0
"""Log-probs below this (``-inf`` included) are clipped to it, so one token cannot make a
perplexity infinite."""


class LogprobsUnavailableError(ModelUnavailableError):
    """The backend returned no usable log-probs for a perplexity measurement."""


@dataclass(frozen=True)
class PerplexitySignal:
    """One perplexity measurement: ``exp(-mean log p)`` over ``tokens`` tokens.

    ``kind`` says what was measured: ``"context"`` (prompt log-probs of the retrieved context)
    or ``"answer"`` (log-probs of the light tier's generated answer, which is kept in
    ``answer``). ``usage`` is what the measurement cost.
    """

    perplexity: float
    kind: SignalKind
    tokens: int
    mean_logprob: float
    answer: str | None = None
    usage: Usage = NO_USAGE

    def to_dict(self) -> dict[str, Any]:
        """JSON-friendly form (without the usage)."""
        data = asdict(self)
        data.pop("usage")
        return data


def perplexity_of(logprobs: Iterable[float | None]) -> tuple[float, float, int] | None:
    """``(perplexity, mean log-prob, count)`` of token log-probs; ``None`` entries (e.g. the
    first echoed token) are skipped, values clipped at :data:`MIN_LOGPROB`. ``None`` when no
    value is left."""
    values = [
        max(float(v), MIN_LOGPROB) if not math.isnan(float(v)) else MIN_LOGPROB
        for v in logprobs
        if v is not None
    ]
    if not values:
        return None
    mean = sum(values) / len(values)
    return math.exp(-mean), mean, len(values)


def chat_logprobs(message: Any) -> list[float] | None:
    """Token log-probs of a chat reply from ``response_metadata["logprobs"]``.

    Accepts OpenAI's form ``{"content": [{"token", "logprob", ...}, ...]}`` (what
    ``ChatOpenAI`` stores), a bare list of such dicts, or a list of floats. ``None`` when the
    reply carries none.
    """
    metadata = getattr(message, "response_metadata", None) or {}
    raw = metadata.get("logprobs") if isinstance(metadata, Mapping) else None
    if isinstance(raw, Mapping):
        raw = raw.get("content")
    if not isinstance(raw, list) or not raw:
        return None
    values: list[float] = []
    for item in raw:
        value = item.get("logprob") if isinstance(item, Mapping) else item
        if isinstance(value, int | float) and not isinstance(value, bool):
            values.append(float(value))
    return values or None


def render_context(passages: Sequence[PassageLike] | str) -> str:
    """The context text that is scored: ``title\\ntext`` per passage, blank-line separated."""
    if isinstance(passages, str):
        return passages
    blocks = []
    for title, text in (_title_text(p) for p in passages):
        blocks.append(f"{title}\n{text}" if title else text)
    return "\n\n".join(blocks)


def _title_text(passage: PassageLike) -> tuple[str, str]:
    inner = getattr(passage, "passage", None)
    if inner is not None:
        passage = inner
    if isinstance(passage, Mapping):
        return str(passage.get("title", "")), str(passage.get("text", ""))
    return str(getattr(passage, "title", "")), str(getattr(passage, "text", passage))


def passage_dicts(passages: Sequence[PassageLike]) -> list[PromptPassage]:
    """Passages as the ``{"title", "text"}`` dicts the prompts take."""
    return [{"title": title, "text": text} for title, text in map(_title_text, passages)]


def perplexity_signal_name(kind: SignalKind) -> str:
    """The thresholds' signal name of a perplexity kind: ``"context_perplexity"`` or
    ``"answer_perplexity"``."""
    if kind not in ("context", "answer"):
        raise ConfigurationError(f"signal kind must be 'context' or 'answer': {kind!r}")
    return f"{kind}_perplexity"


def fit_perplexity_thresholds(
    perplexities: Iterable[float],
    *,
    kind: SignalKind,
    percentiles: Sequence[float] = (50.0,),
    source: str = "",
) -> PercentileThresholds:
    """Percentiles (the median by default) of train-question perplexities of one ``kind``;
    above a cut point is harder (with the median: ``<= median`` light, ``> median`` heavy)."""
    return PercentileThresholds.fit(
        perplexities,
        signal=perplexity_signal_name(kind),
        harder="higher",
        percentiles=percentiles,
        source=source,
    )

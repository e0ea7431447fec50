"""Per-query generator selection (DRAG-QPP's post-retrieval step): perplexity picks the tier.

After retrieval, the generator's perplexity decides how much generation compute a question
gets: low perplexity stays on the light tier, high perplexity escalates. Two signals exist and
every :class:`PerplexitySignal` says which one it measured (``kind``):

``"context"`` (the paper's signal)
    Perplexity of the retrieved *context* under the model, from prompt log-probs
    (:class:`PromptLogprobScorer`: legacy ``/v1/completions`` with ``echo=True`` and
    ``logprobs``; vLLM, llama.cpp's Python server, ...). The context is scored conditioned on
    ``"Question: <q>\\nPassages:\\n"``; only context tokens count.
``"answer"`` (fallback)
    Perplexity of the *answer tokens* the light tier generates from question + context, from
    chat log-probs (``LLMClient.reply(..., logprobs=True)``: ``response_metadata["logprobs"]``).
    It costs no extra call: when the router stays light, that answer is the answer.

Generator tiers call their model through :class:`~dynakrag.llm.client.LLMClient` (its retries,
health counters and :class:`~dynakrag.errors.ModelUnavailableError`); the thresholds are
:class:`~dynakrag.routing.thresholds.PercentileThresholds` of signal ``"<kind>_perplexity"``
(:func:`fit_perplexity_thresholds`, the median by default) and every answer is logged as a
:class:`~dynakrag.routing.decisions.RoutingDecision`.

Findings for the embedded llama-cpp-python 0.3.36 server (log-probs, of the prompt or of the
answer, need its ``--logits_all``, which dynakrag turns on only with
``embedded_prompt_logprobs``: keeping every prompt token's logits slows every prompt; set it for
either signal before the process's first model call):

* ``/v1/completions`` with ``echo=True, logprobs=N`` returns prompt log-probs, but they are
  shifted by one token unless the prompt starts with the model's BOS token (llama-cpp-python
  pairs token ``i`` with the distribution that *predicts* token ``i + 1``; its BOS stripping
  realigns them). Qwen2.5 does not add a BOS, so :meth:`PromptLogprobScorer.embedded`
  prepends ``<|endoftext|>`` (token 151643, its BOS), which is tokenised as the special token.
* The server sorts the whole 151k vocabulary in Python for every echoed token: about
  0.15 s per scored token on 2 CPU cores, so contexts are cut to ``max_chars``.
* ``max_tokens=0`` means "unlimited" there; the scorer asks for 1 token.
* Chat completions return log-probs only when ``top_logprobs`` is set as well as
  ``logprobs=True`` (``logprobs=True`` alone silently returns none); the client sets both
  (:func:`~dynakrag.llm.client.request_options`).

A backend without log-probs gives a ``None`` signal: the router stays on the light tier and
logs why.
"""

from __future__ import annotations

import logging
import math
import os
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from langchain_core.language_models import BaseChatModel

from dynakrag import prompts
from dynakrag.errors import ConfigurationError, ModelUnavailableError, UserInputError
from dynakrag.llm.answers import parse_reasoned_answer, parse_short_answer
from dynakrag.llm.client import NO_USAGE, LLMClient, Messages, Usage, estimate_tokens, message_text
from dynakrag.prompts import REASONING_ANSWER_SYSTEM, reasoning_messages
from dynakrag.retrieval.base import Searcher
from dynakrag.routing.decisions import DecisionLog, RoutingDecision, check_tier_names, tier_index
from dynakrag.routing.thresholds import PercentileThresholds

if TYPE_CHECKING:
    import httpx

    from dynakrag.configuration import Configuration

__all__ = [
    "EMBEDDED_BOS_TEXT",
    "REASONING_ANSWER_SYSTEM",
    "GeneratorRouter",
    "GeneratorTier",
    "LogprobsUnavailableError",
    "PerplexitySignal",
    "PromptLogprobScorer",
    "RoutedGeneration",
    "answer_perplexity",
    "chat_logprobs",
    "context_perplexity",
    "default_generator_tiers",
    "fit_perplexity_thresholds",
    "light_tier",
    "parse_reasoned_answer",
    "parse_short_answer",
    "perplexity_of",
    "perplexity_signal_name",
    "prompt_perplexity",
    "reasoning_messages",
    "reasoning_tier",
    "render_context",
    "retrieved_contexts",
]

logger = logging.getLogger(__name__)

SignalKind = Literal["context", "answer"]
PassageLike = Mapping[str, Any] | Any
"""A passage as a dict with ``title``/``text``, or any object with those attributes
(:class:`~dynakrag.retrieval.passage.Passage`) or a ``passage`` attribute (a ``Hit``)."""

EMBEDDED_BOS_TEXT = "<|endoftext|>"
"""The BOS token of the embedded Qwen2.5 model, prepended so llama-cpp-python's echoed prompt
log-probs line up with their tokens (see the module docstring)."""

MIN_LOGPROB = -50.0
"""Log-probs below this (``-inf`` included) are clipped to it, so one token cannot make a
perplexity infinite."""


class LogprobsUnavailableError(ModelUnavailableError):
    """The backend returned no usable log-probs for a perplexity measurement."""


# --------------------------------------------------------------------------------------------
# Signals
# --------------------------------------------------------------------------------------------


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


def _passage_dicts(passages: Sequence[PassageLike]) -> list[dict[str, str]]:
    return [{"title": title, "text": text} for title, text in map(_title_text, passages)]


# --------------------------------------------------------------------------------------------
# Context perplexity from prompt log-probs
# --------------------------------------------------------------------------------------------


class PromptLogprobScorer:
    """Prompt log-probs from an OpenAI-compatible legacy ``/completions`` endpoint.

    One request per measurement: ``echo=True, logprobs=1, max_tokens=1, temperature=0``.
    ``bos_text`` is prepended to every prompt (see :data:`EMBEDDED_BOS_TEXT`); ``max_chars``
    caps the scored text (server cost grows with every echoed token). With
    ``verify_alignment`` the first use checks that log-probs are not shifted by one token
    (:meth:`check_alignment`). Thread-safe.
    """

    def __init__(
        self,
        base_url: str,
        model: str,
        *,
        api_key: str | None = None,
        bos_text: str = "",
        max_chars: int = 1200,
        timeout: float = 120.0,
        trust_env: bool = True,
        verify_alignment: bool = False,
        http_client: httpx.Client | None = None,
    ) -> None:
        import httpx

        if max_chars < 1:
            raise ConfigurationError(f"max_chars must be >= 1, got {max_chars!r}")
        self.url = base_url.rstrip("/") + "/completions"
        self.model = model
        self.bos_text = bos_text
        self.max_chars = max_chars
        self._headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._client = http_client or httpx.Client(trust_env=trust_env, timeout=timeout)
        self._verify = verify_alignment
        self._verified = False
        self._misaligned: str | None = None
        self._lock = threading.Lock()

    @classmethod
    def embedded(cls, cfg: Configuration | None = None, **kwargs: Any) -> PromptLogprobScorer:
        """A scorer on the embedded llama.cpp server (started if needed, with the settings of
        ``cfg``, default: the environment's)."""
        from dynakrag.configuration import Configuration
        from dynakrag.llm.embedded import MODEL_ALIAS
        from dynakrag.llm.factory import embedded_server_from_config

        server = embedded_server_from_config(cfg or Configuration.from_env())
        if not server.settings.logits_all:
            raise ConfigurationError(
                "prompt log-probs need an embedded server that keeps every prompt token's "
                "logits: set embedded_prompt_logprobs=true (DYNAKRAG_EMBEDDED_PROMPT_LOGPROBS=1) "
                "before the first model call of the process"
            )
        kwargs.setdefault("bos_text", EMBEDDED_BOS_TEXT)
        kwargs.setdefault("trust_env", False)
        return cls(server.base_url, MODEL_ALIAS, **kwargs)

    @classmethod
    def from_config(cls, cfg: Configuration, **kwargs: Any) -> PromptLogprobScorer | None:
        """The scorer for the configured backend: ``llm_base_url`` (alignment verified on
        first use), else the embedded server; ``None`` for OpenAI itself, whose chat models
        give no prompt log-probs (use the ``"answer"`` signal)."""
        if cfg.llm_base_url:
            kwargs.setdefault("verify_alignment", True)
            kwargs.setdefault("timeout", cfg.llm_timeout_s)
            return cls(
                cfg.llm_base_url,
                cfg.llm_model,
                api_key=os.environ.get("OPENAI_API_KEY") or None,
                **kwargs,
            )
        if os.environ.get("OPENAI_API_KEY"):
            return None
        kwargs.setdefault("timeout", cfg.llm_timeout_s)
        return cls.embedded(cfg, **kwargs)

    def score(self, text: str, *, prefix: str = "") -> tuple[list[float | None], Usage]:
        """``log p(token | bos, prefix, earlier tokens)`` for each token of ``text`` (``None``
        where the server gives none, e.g. the very first token), and the request's usage.

        Raises :class:`LogprobsUnavailableError` when the endpoint returns no log-probs.
        """
        if self._verify and not self._verified:
            self.check_alignment()
        return self._score(text, prefix)

    def _score(self, text: str, prefix: str) -> tuple[list[float | None], Usage]:
        import httpx

        prompt = prefix + text
        body = {
            "model": self.model,
            "prompt": self.bos_text + prompt,
            "max_tokens": 1,  # 0 means "unlimited" on llama-cpp-python
            "temperature": 0,
            "echo": True,
            "logprobs": 1,
        }
        try:
            response = self._client.post(self.url, json=body, headers=self._headers)
            response.raise_for_status()
            data = response.json()
        except (httpx.HTTPError, ValueError) as exc:
            raise LogprobsUnavailableError(
                f"prompt log-prob request to {self.url} failed: {exc}"
            ) from exc
        try:
            choice = data["choices"][0]
            logprobs = choice.get("logprobs") or {}
            values = list(logprobs["token_logprobs"])
            offsets = [int(o) for o in logprobs["text_offset"]]
        except (KeyError, IndexError, TypeError, ValueError) as exc:
            raise LogprobsUnavailableError(
                f"{self.url} returned no prompt log-probs for echo=True, logprobs=1 "
                f"({type(exc).__name__}: {exc}); the backend does not support prompt log-probs"
            ) from None
        if len(values) != len(offsets):
            raise LogprobsUnavailableError(f"{self.url} returned malformed log-probs")
        # Offsets count from the prompt without the BOS text (llama-cpp-python) or with it.
        shift = len(self.bos_text) if self.bos_text and offsets and offsets[0] > 0 else 0
        start, end = len(prefix) + shift, len(prompt) + shift
        picked = [v for v, o in zip(values, offsets, strict=True) if start <= o < end]
        raw_usage = data.get("usage") or {}
        usage = Usage(
            1,
            int(raw_usage.get("prompt_tokens", estimate_tokens(prompt))),
            int(raw_usage.get("completion_tokens", 1)),
        )
        return picked, usage

    def check_alignment(self) -> None:
        """Raise :class:`LogprobsUnavailableError` when echoed log-probs are shifted by a token.

        Scores a counting sequence whose later tokens are near-certain when log-probs are
        aligned (mean log-prob near 0) and near-impossible when shifted (about -10).
        """
        with self._lock:
            if self._verified:
                return
            if self._misaligned is not None:  # a verdict, not a transient fault: not re-asked
                raise LogprobsUnavailableError(self._misaligned)
            values, _ = self._score("1 2 3 4 5 6 7 8 9 10", "")
            tail = [v for v in values if v is not None][-6:]
            mean = sum(tail) / len(tail) if tail else -math.inf
            if mean < -2.0:
                self._misaligned = (
                    f"{self.url} returns prompt log-probs shifted by one token (mean log-prob "
                    f"{mean:.2f} on a counting sequence); set bos_text to the model's BOS token "
                    "text (llama-cpp-python) or use the 'answer' signal"
                )
                raise LogprobsUnavailableError(self._misaligned)
            self._verified = True


def prompt_perplexity(
    scorer: PromptLogprobScorer,
    passages: Sequence[PassageLike] | str,
    *,
    question: str = "",
    strict: bool = False,
) -> PerplexitySignal | None:
    """Perplexity of the context (kind ``"context"``) from prompt log-probs, conditioned on the
    question. The context is cut to ``scorer.max_chars``. ``None`` (logged) when the backend
    gives no log-probs, unless ``strict`` (then :class:`LogprobsUnavailableError`)."""
    context = render_context(passages)[: scorer.max_chars]
    if not context.strip():
        if strict:
            raise UserInputError("cannot measure the perplexity of an empty context")
        logger.warning("no context perplexity: the context is empty")
        return None
    prefix = f"Question: {question}\nPassages:\n" if question else ""
    try:
        values, usage = scorer.score(context, prefix=prefix)
    except LogprobsUnavailableError as exc:
        if strict:
            raise
        logger.warning("no context perplexity: %s", exc)
        return None
    summary = perplexity_of(values)
    if summary is None:
        message = f"{scorer.url} returned no log-prob for any context token"
        if strict:
            raise LogprobsUnavailableError(message)
        logger.warning("no context perplexity: %s", message)
        return None
    ppl, mean, count = summary
    return PerplexitySignal(ppl, "context", count, mean, usage=usage)


# --------------------------------------------------------------------------------------------
# Generator tiers
# --------------------------------------------------------------------------------------------


def _last_line(text: str) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[-1] if lines else ""


MessageBuilder = Callable[[str, Sequence[dict[str, Any]]], Messages]


@dataclass(frozen=True)
class GeneratorTier:
    """One generator setting: the client it calls, its prompt, token budget and answer parser.

    ``max_tokens`` is applied to OpenAI-compatible models (see
    :func:`~dynakrag.llm.client.request_options`); other models are called as configured.
    ``parse`` returns ``None`` when a reply holds no answer (the router then falls back, see
    :meth:`GeneratorRouter.answer`).
    """

    name: str
    llm: LLMClient
    build_messages: MessageBuilder = prompts.answer_messages
    max_tokens: int | None = None
    parse: Callable[[str], str | None] = parse_short_answer

    def messages(self, question: str, passages: Sequence[PassageLike]) -> Messages:
        """This tier's prompt for ``question`` over ``passages``."""
        return self.build_messages(question, _passage_dicts(passages))

    def generate(
        self, question: str, passages: Sequence[PassageLike], *, logprobs: bool = False
    ) -> tuple[str | None, Any | None, Usage]:
        """``(raw reply text, reply message, usage)`` of this tier's prompt; the text and
        message are ``None`` when every attempt failed."""
        reply, usage = self.llm.reply(
            self.messages(question, passages), max_tokens=self.max_tokens, logprobs=logprobs
        )
        return (message_text(reply) if reply is not None else None), reply, usage


def _as_client(llm: LLMClient | BaseChatModel) -> LLMClient:
    return llm if isinstance(llm, LLMClient) else LLMClient(llm)


def light_tier(
    llm: LLMClient | BaseChatModel, *, max_tokens: int = 32, name: str = "light"
) -> GeneratorTier:
    """The cheap setting: answer-only prompt (:func:`dynakrag.prompts.answer_messages`)."""
    return GeneratorTier(
        name, _as_client(llm), prompts.answer_messages, max_tokens, parse_short_answer
    )


def reasoning_tier(
    llm: LLMClient | BaseChatModel, *, max_tokens: int = 384, name: str = "reasoning"
) -> GeneratorTier:
    """The heavy setting: reason first, then answer (:data:`REASONING_ANSWER_SYSTEM`)."""
    return GeneratorTier(
        name, _as_client(llm), reasoning_messages, max_tokens, parse_reasoned_answer
    )


def default_generator_tiers(
    llm: LLMClient | BaseChatModel,
    heavy_llm: LLMClient | BaseChatModel | None = None,
    *,
    light_max_tokens: int = 32,
    heavy_max_tokens: int = 384,
) -> list[GeneratorTier]:
    """``[light, reasoning]``: the heavy tier reasons with ``heavy_llm`` (a larger endpoint)
    when given, else with ``llm`` itself (one client, so its health counters see both)."""
    client = _as_client(llm)
    return [
        light_tier(client, max_tokens=light_max_tokens),
        reasoning_tier(
            _as_client(heavy_llm) if heavy_llm is not None else client, max_tokens=heavy_max_tokens
        ),
    ]


def answer_perplexity(
    tier: GeneratorTier,
    question: str,
    passages: Sequence[PassageLike],
    *,
    strict: bool = False,
) -> PerplexitySignal | None:
    """Perplexity of the answer ``tier`` generates (kind ``"answer"``; the parsed answer is in
    the signal). ``None`` (logged) when no reply or no log-probs came back, unless
    ``strict``."""
    signal, _, _ = _measure_answer(tier, question, passages, strict)
    return signal


def _measure_answer(
    tier: GeneratorTier, question: str, passages: Sequence[PassageLike], strict: bool
) -> tuple[PerplexitySignal | None, str | None, Usage]:
    raw, reply, usage = tier.generate(question, passages, logprobs=True)
    if raw is None:
        if strict:
            raise ModelUnavailableError(f"generator tier {tier.name!r} gave no reply")
        return None, None, usage
    answer = tier.parse(raw)
    values = chat_logprobs(reply)
    summary = perplexity_of(values) if values else None
    if summary is None:
        message = (
            f"generator tier {tier.name!r} returned no log-probs (response_metadata['logprobs'] "
            "is empty: the backend or the chat model does not support logprobs)"
        )
        if strict:
            raise LogprobsUnavailableError(message)
        logger.warning("no answer perplexity: %s", message)
        return None, raw, usage
    ppl, mean, count = summary
    return PerplexitySignal(ppl, "answer", count, mean, answer=answer, usage=usage), raw, usage


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


# --------------------------------------------------------------------------------------------
# Thresholds
# --------------------------------------------------------------------------------------------


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


def retrieved_contexts(
    questions: Iterable[str], searcher: Searcher, *, k: int = 5
) -> list[tuple[str, list[PassageLike]]]:
    """``(question, top-k passages)`` per question: the input of
    :meth:`GeneratorRouter.fit_thresholds`. Pass **training** questions only."""
    return [(question, [p for p, _ in searcher.search(question, k)]) for question in questions]


# --------------------------------------------------------------------------------------------
# Router
# --------------------------------------------------------------------------------------------


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
        return _measure_answer(self.tiers[0], question, passages, False)

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

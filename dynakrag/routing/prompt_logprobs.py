"""Context perplexity from prompt log-probs: the ``"context"`` signal of the generator router.

:class:`PromptLogprobScorer` asks an OpenAI-compatible legacy ``/v1/completions`` endpoint
with ``echo=True`` and ``logprobs`` (vLLM, llama.cpp's Python server, ...);
:func:`prompt_perplexity` scores the retrieved context conditioned on
``"Question: <q>\\nPassages:\\n"``, counting only the context's tokens.

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
"""

from __future__ import annotations

import logging
import math
import os
import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from dynakrag.errors import ConfigurationError, UserInputError
from dynakrag.llm.client import Usage, estimate_tokens
from dynakrag.routing.perplexity import (
    LogprobsUnavailableError,
    PassageLike,
    PerplexitySignal,
    perplexity_of,
    render_context,
)

if TYPE_CHECKING:
    import httpx

    from dynakrag.configuration import Configuration

__all__ = ["EMBEDDED_BOS_TEXT", "PromptLogprobScorer", "prompt_perplexity"]

logger = logging.getLogger(__name__)

EMBEDDED_BOS_TEXT = "<|endoftext|>"
"""The BOS token of the embedded Qwen2.5 model, prepended so llama-cpp-python's echoed prompt
log-probs line up with their tokens (see the module docstring)."""


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
        from dynakrag.llm.factory import embedded_server_from_config
        from dynakrag.llm.server_command import MODEL_ALIAS

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
        give no prompt log-probs, and for a model named in ``llm`` (use the ``"answer"``
        signal)."""
        if cfg.llm:
            return None  # init_chat_model's providers have no common completions endpoint
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

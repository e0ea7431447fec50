"""One small interface over any LangChain chat model: text or JSON replies, retries, accounting.

Every call returns its usage so nodes can account tokens and calls. A reply that cannot be
used (the request kept failing, or the JSON could not be parsed) is returned as ``None`` and
each action documents its fallback for that case.
"""

from __future__ import annotations

import json
import logging
import re
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage

from dynakrag.errors import ModelUnavailableError

logger = logging.getLogger(__name__)

Messages = Sequence[tuple[str, str]]


@dataclass(frozen=True)
class Usage:
    """What one or more LLM requests cost."""

    llm_calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            self.llm_calls + other.llm_calls,
            self.prompt_tokens + other.prompt_tokens,
            self.completion_tokens + other.completion_tokens,
        )


NO_USAGE = Usage()


def estimate_tokens(text: str) -> int:
    """Rough token count (4 characters a token) for models that report no usage."""
    return max(1, len(text) // 4) if text else 0


def parse_json_object(text: str) -> dict[str, Any] | None:
    """The first JSON object in ``text`` (code fences and chatter around it are ignored)."""
    text = text.strip()
    fenced = re.search(r"```(?:json)?\s*(.*?)```", text, flags=re.DOTALL)
    if fenced:
        text = fenced.group(1)
    start = text.find("{")
    while start != -1:
        try:
            value, _ = json.JSONDecoder().raw_decode(text[start:])
        except json.JSONDecodeError:
            start = text.find("{", start + 1)
            continue
        return value if isinstance(value, dict) else None
    return None


class LLMClient:
    """Calls a chat model with bounded retries and exponential backoff."""

    def __init__(
        self,
        model: BaseChatModel | Callable[[], BaseChatModel],
        *,
        max_retries: int = 2,
        backoff_s: float = 0.5,
        json_mode: bool | None = None,
        json_retries: int = 0,
    ) -> None:
        """``model`` may be a factory: expensive backends then start on the first request.

        ``max_retries`` retries a failed request (exception or empty reply) with backoff;
        ``json_retries`` asks again when a reply is not the asked JSON (off by default: at
        temperature 0 the same prompt gives the same reply).
        """
        self._model = model if isinstance(model, BaseChatModel) else None
        self._factory = None if isinstance(model, BaseChatModel) else model
        self._lock = threading.Lock()
        self.max_retries = max_retries
        self.backoff_s = backoff_s
        self.json_retries = json_retries
        # Health counters, so a caller can tell "the model said nothing useful" from "the
        # model could never be reached".
        self.replies = 0
        self.failed_requests = 0
        self.last_error: str | None = None
        self._json_mode = json_mode

    @property
    def model(self) -> BaseChatModel:
        """The chat model, created on first use when a factory was given."""
        with self._lock:
            if self._model is None:
                assert self._factory is not None
                self._model = self._factory()
            return self._model

    @property
    def json_mode(self) -> bool:
        """JSON mode is an OpenAI-compatible server feature; other models get plain prompts."""
        return self._json_mode if self._json_mode is not None else speaks_openai(self.model)

    def text(
        self, messages: Messages, *, max_tokens: int | None = None
    ) -> tuple[str | None, Usage]:
        """The reply text, or None when every attempt failed or the reply was empty.

        ``max_tokens``: this call's completion budget (capped by the model's own setting).
        """
        return self._call(messages, json_reply=False, max_tokens=max_tokens)

    def json(
        self,
        messages: Messages,
        *,
        max_tokens: int | None = None,
        schema: Mapping[str, Any] | None = None,
    ) -> tuple[dict[str, Any] | None, Usage]:
        """The reply as a JSON object, or None when no reply gave one.

        ``schema``: a JSON schema the reply must follow. In JSON mode it is sent as
        ``response_format={"type": "json_object", "schema": ...}``, which llama.cpp turns into
        a grammar (constrained decoding); other models get the prompt alone, so callers still
        validate the reply.
        """
        usage = NO_USAGE
        for _ in range(1 + self.json_retries):
            text, attempt_usage = self._call(
                messages, json_reply=True, max_tokens=max_tokens, schema=schema
            )
            usage += attempt_usage
            if text is None:
                return None, usage
            parsed = parse_json_object(text)
            if parsed is not None:
                return parsed, usage
            logger.warning("LLM reply is not the asked JSON: %.200r", text)
        return None, usage

    def reply(
        self, messages: Messages, *, max_tokens: int | None = None, logprobs: bool = False
    ) -> tuple[Any | None, Usage]:
        """The whole reply message, or None when every attempt failed or the reply was empty.

        For callers that need more than the text: the message's ``response_metadata`` holds
        e.g. the token log-probs asked for with ``logprobs`` (:func:`message_text` gives its
        text). ``max_tokens`` and ``logprobs`` are request options of OpenAI-compatible
        servers (:func:`request_options`); other chat models are called as configured.
        """
        options = request_options(self.model, max_tokens=max_tokens, logprobs=logprobs)
        runnable = self.model.bind(**options) if options else self.model
        return self._invoke(runnable, messages)

    def _call(
        self,
        messages: Messages,
        *,
        json_reply: bool,
        max_tokens: int | None = None,
        schema: Mapping[str, Any] | None = None,
    ) -> tuple[str | None, Usage]:
        options = request_options(self.model, max_tokens=max_tokens)
        if json_reply and self.json_mode:
            options["response_format"] = {"type": "json_object"}
            if schema is not None:
                options["response_format"]["schema"] = dict(schema)
        runnable: Any = self.model.bind(**options) if options else self.model
        reply, usage = self._invoke(runnable, messages)
        return (message_text(reply).strip() if reply is not None else None), usage

    def _invoke(self, runnable: Any, messages: Messages) -> tuple[Any | None, Usage]:
        """Invoke with bounded retries; the first non-empty reply message, or None."""
        usage = NO_USAGE
        prompt_text = "\n".join(content for _, content in messages)
        for attempt in range(self.max_retries + 1):
            try:
                reply = runnable.invoke(list(messages))
            except ModelUnavailableError:
                raise  # the backend gave up for good (e.g. the embedded server died twice)
            except Exception as exc:  # any backend fault: timeout, refused, 429, 5xx
                usage += Usage(1, estimate_tokens(prompt_text), 0)
                self.failed_requests += 1
                self.last_error = f"{type(exc).__name__}: {exc}"
                logger.warning("LLM request failed (attempt %d): %s", attempt + 1, exc)
                if type(exc).__name__ in REPEATED_FAILURES:
                    break
                if attempt < self.max_retries:
                    time.sleep(self.backoff_s * (2**attempt))
                continue
            text = message_text(reply)
            usage += _usage_of(reply, prompt_text, text)
            self.replies += 1
            if text.strip():
                return reply, usage
            logger.warning("LLM returned an empty completion (attempt %d)", attempt + 1)
        return None, usage

    @property
    def unreachable(self) -> bool:
        """True when every request so far failed (and there was at least one)."""
        return self.failed_requests > 0 and self.replies == 0


REPEATED_FAILURES = frozenset({"LengthFinishReasonError"})
"""Failures a retry repeats: a reply cut at its completion budget (the openai client refuses to
parse it) comes back the same from a deterministic model, so it is not asked again."""


def message_text(reply: Any) -> str:
    """The text of a reply message (content parts joined), unstripped."""
    content = getattr(reply, "content", reply)
    if isinstance(content, list):
        return "".join(part if isinstance(part, str) else part.get("text", "") for part in content)
    return str(content)


def _usage_of(reply: Any, prompt_text: str, text: str) -> Usage:
    metadata = getattr(reply, "usage_metadata", None) if isinstance(reply, AIMessage) else None
    if metadata:
        return Usage(1, int(metadata.get("input_tokens", 0)), int(metadata.get("output_tokens", 0)))
    return Usage(1, estimate_tokens(prompt_text), estimate_tokens(text))


def request_options(
    model: BaseChatModel, *, max_tokens: int | None = None, logprobs: bool = False
) -> dict[str, Any]:
    """What to ``bind`` on ``model`` for a token budget and token log-probs.

    Only OpenAI-compatible models (``ChatOpenAI``) get options: ``max_tokens`` goes in
    ``extra_body`` (llama.cpp, vLLM and OpenAI all honour it, where some ignore
    ``max_completion_tokens``), merged over the model's own ``extra_body``; ``logprobs`` sets
    ``top_logprobs`` too (llama-cpp-python returns chat log-probs only then). Other models get
    ``{}``: they are called as they are configured.
    """
    # A wrapper such as the disk cache passes bound options through to the model it wraps.
    target = getattr(model, "inner", model)
    if not speaks_openai(target):
        return {}
    options: dict[str, Any] = {}
    if max_tokens is not None:
        extra_body = getattr(target, "extra_body", None) or {}
        # A call's budget never exceeds the model's configured one (llm_max_tokens).
        ceiling = extra_body.get("max_tokens")
        budget = min(max_tokens, ceiling) if isinstance(ceiling, int) else max_tokens
        options["extra_body"] = {**extra_body, "max_tokens": budget}
    if logprobs:
        options.update(logprobs=True, top_logprobs=1)
    return options


def speaks_openai(model: BaseChatModel) -> bool:
    """Whether ``model`` is an OpenAI-compatible client (JSON mode and request options work)."""
    try:
        from langchain_openai import ChatOpenAI
    except ImportError:  # pragma: no cover - langchain-openai is a dependency
        return False
    return isinstance(model, ChatOpenAI)

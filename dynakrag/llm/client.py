"""One small interface over any LangChain chat model: text or JSON replies, retries, accounting.

A JSON reply is read into its pydantic model (:meth:`LLMClient.structured` with a model of
:mod:`dynakrag.prompts.replies`), so callers read fields, never keys of a dict.

Every call returns its usage so nodes can account tokens and calls. A reply that cannot be
used (the request kept failing, or the JSON could not be parsed) is returned as ``None`` and
each action documents its fallback for that case.

A reply cut at its completion budget (the openai client raises ``LengthFinishReasonError``
for a JSON reply that hit ``max_tokens``) is not asked again at the same budget, where a
deterministic model would cut it again: it is asked once more with twice the budget (within
the model's own ``max_tokens``), and if that is cut too (or there is no room), a JSON reply is
repaired from its cut text (:func:`repair_cut_json`: the complete items before the cut). Only
a reply that none of this saves counts as a failed request.
"""

from __future__ import annotations

import json
import logging
import re
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage
from pydantic import ValidationError
from tenacity import (
    RetryCallState,
    Retrying,
    retry_if_exception,
    retry_if_result,
    stop_after_attempt,
)

from dynakrag.errors import ModelUnavailableError
from dynakrag.files import JsonObject
from dynakrag.prompts.replies import Reply

logger = logging.getLogger(__name__)

Messages = Sequence[tuple[str, str]]
R = TypeVar("R", bound=Reply)


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


def parse_json_object(text: str) -> JsonObject | None:
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
    ) -> tuple[JsonObject | None, Usage]:
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

    def structured(
        self, messages: Messages, reply: type[R], *, max_tokens: int | None = None
    ) -> tuple[R | None, Usage]:
        """The reply validated into ``reply`` (one of :mod:`dynakrag.prompts.replies`), or None
        when no reply was JSON of its shape: a reply of the wrong shape takes the caller's
        fallback for an unparseable one. ``reply``'s schema is sent when it is
        ``constrained`` (:meth:`json`)."""
        schema = reply.reply_schema() if reply.constrained else None
        raw, usage = self.json(messages, max_tokens=max_tokens, schema=schema)
        if raw is None:
            return None, usage
        try:
            return reply.model_validate(raw), usage
        except ValidationError as exc:
            logger.warning("LLM reply is not a %s: %.200r", reply.__name__, raw)
            logger.debug("%s", exc)
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
        try:
            return self._invoke(runnable, messages)
        except _CutShort as cut:  # a plain-text reply never is; counted as failed if it were
            self._count_failure(cut.error, 0)
            return None, cut.usage

    def _call(
        self,
        messages: Messages,
        *,
        json_reply: bool,
        max_tokens: int | None = None,
        schema: Mapping[str, Any] | None = None,
    ) -> tuple[str | None, Usage]:
        """The reply text of one request (the single path of :meth:`text` and :meth:`json`);
        a reply cut at its budget is asked again with more room, or repaired (module doc)."""
        try:
            return self._ask(messages, json_reply=json_reply, max_tokens=max_tokens, schema=schema)
        except _CutShort as cut:
            first_cut = cut
        usage = first_cut.usage
        last_cut = first_cut
        larger = self._retry_budget(max_tokens)
        if larger is not None:
            logger.info("LLM reply cut at its token budget: asking again with %d tokens", larger)
            try:
                text, more = self._ask(
                    messages, json_reply=json_reply, max_tokens=larger, schema=schema
                )
                return text, usage + more
            except _CutShort as again:
                last_cut, usage = again, usage + again.usage
        repaired = repair_cut_json(last_cut.partial) if json_reply else None
        if repaired is not None:
            logger.warning("LLM JSON reply cut at its token budget: kept its complete items")
            return json.dumps(repaired, ensure_ascii=False), usage
        self._count_failure(last_cut.error, 0)
        return None, usage

    def _ask(
        self,
        messages: Messages,
        *,
        json_reply: bool,
        max_tokens: int | None,
        schema: Mapping[str, Any] | None,
    ) -> tuple[str | None, Usage]:
        options = request_options(self.model, max_tokens=max_tokens)
        if json_reply and self.json_mode:
            options["response_format"] = {"type": "json_object"}
            if schema is not None:
                options["response_format"]["schema"] = dict(schema)
        runnable: Any = self.model.bind(**options) if options else self.model
        reply, usage = self._invoke(runnable, messages)
        return (message_text(reply).strip() if reply is not None else None), usage

    def _retry_budget(self, max_tokens: int | None) -> int | None:
        """The budget to ask a cut reply again with: twice the one it was cut at, within the
        model's own ``max_tokens``; None when there is no more room (or no budget known)."""
        target = getattr(self.model, "inner", self.model)
        extra_body = (getattr(target, "extra_body", None) or {}) if speaks_openai(target) else {}
        ceiling = extra_body.get("max_tokens")
        ceiling = ceiling if isinstance(ceiling, int) else None
        asked = max_tokens if max_tokens is not None else ceiling
        if asked is None:
            return None
        if ceiling is not None:
            asked = min(asked, ceiling)
        larger = 2 * asked if ceiling is None else min(2 * asked, ceiling)
        return larger if larger > asked else None

    def _count_failure(self, exc: BaseException, attempt: int) -> None:
        self.failed_requests += 1
        self.last_error = f"{type(exc).__name__}: {exc}"
        logger.warning("LLM request failed (attempt %d): %s", attempt + 1, exc)

    def _invoke(self, runnable: Any, messages: Messages) -> tuple[Any | None, Usage]:
        """Invoke with bounded retries; the first non-empty reply message, or None. A reply cut
        at its budget raises :class:`_CutShort` at once (asking again would cut it again)."""
        usage = NO_USAGE
        prompt_text = "\n".join(content for _, content in messages)
        attempts = 0

        def attempt() -> Any | None:
            """One request: the reply message, None when it is empty; a backend fault is
            counted (usage and health) and raised for the retryer."""
            nonlocal usage, attempts
            attempts += 1
            try:
                reply = runnable.invoke(list(messages))
            except ModelUnavailableError:
                raise  # the backend gave up for good (e.g. the embedded server died twice)
            except Exception as exc:  # any backend fault: timeout, refused, 429, 5xx
                if type(exc).__name__ in CUT_SHORT_ERRORS:
                    raise _CutShort(exc, usage + _cut_usage(exc, prompt_text)) from exc
                usage += Usage(1, estimate_tokens(prompt_text), 0)
                self._count_failure(exc, attempts - 1)
                raise
            text = message_text(reply)
            usage += _usage_of(reply, prompt_text, text)
            self.replies += 1
            if text.strip():
                return reply
            logger.warning("LLM returned an empty completion (attempt %d)", attempts)
            return None

        retrying = Retrying(
            stop=stop_after_attempt(self.max_retries + 1),
            # A fault or an empty reply is asked again; a lost backend, a cut reply or the
            # user's Ctrl-C (not an Exception: tenacity would otherwise retry it) is not.
            retry=retry_if_exception(_worth_asking_again)
            | retry_if_result(lambda reply: reply is None),
            wait=self._backoff,
            sleep=_pause,
            retry_error_callback=lambda state: None,  # every attempt failed: no reply
        )
        return retrying(attempt), usage

    def _backoff(self, state: RetryCallState) -> float:
        """Seconds before the next attempt: ``backoff_s`` doubled per attempt made before the
        one that failed (0.5, 1.0, ... s), none after an empty reply."""
        failed = state.outcome is not None and state.outcome.failed
        return self.backoff_s * (2 ** (state.attempt_number - 1)) if failed else 0.0

    @property
    def unreachable(self) -> bool:
        """True when every request so far failed (and there was at least one)."""
        return self.failed_requests > 0 and self.replies == 0


class ClientWrapper(LLMClient):
    """An :class:`LLMClient` around ``inner``, whose model, settings and health it reads
    through (no ``LLMClient.__init__``). A subclass overrides the calls it changes; the others
    run :class:`LLMClient`'s code over :meth:`_call`, which asks ``inner``."""

    def __init__(self, inner: LLMClient) -> None:
        self.inner = inner

    @property
    def model(self) -> BaseChatModel:
        return self.inner.model

    @property
    def json_mode(self) -> bool:
        return self.inner.json_mode

    @property
    def json_retries(self) -> int:  # type: ignore[override]
        return self.inner.json_retries

    @property
    def failed_requests(self) -> int:  # type: ignore[override]
        return self.inner.failed_requests

    @property
    def replies(self) -> int:  # type: ignore[override]
        return self.inner.replies

    @property
    def last_error(self) -> str | None:  # type: ignore[override]
        return self.inner.last_error

    def reply(
        self, messages: Messages, *, max_tokens: int | None = None, logprobs: bool = False
    ) -> tuple[Any | None, Usage]:
        return self.inner.reply(messages, max_tokens=max_tokens, logprobs=logprobs)

    def _call(self, messages: Messages, **options: Any) -> tuple[str | None, Usage]:
        return self.inner._call(messages, **options)


def _pause(seconds: float) -> None:
    """The retryer's sleep: none at all for no wait (an empty reply is asked again at once)."""
    if seconds > 0:
        time.sleep(seconds)  # looked up per call, so a test can replace time.sleep


CUT_SHORT_ERRORS = frozenset({"LengthFinishReasonError"})
"""Failures that mean "the reply was cut at its completion budget" (the openai client refuses to
parse it): a deterministic model would cut it again at the same budget, so it is asked again
only with more room, else repaired (:meth:`LLMClient._call`)."""


class _CutShort(Exception):
    """A reply cut at its completion budget, with what the attempts so far cost (raised and
    caught inside :class:`LLMClient`)."""

    def __init__(self, error: BaseException, usage: Usage) -> None:
        super().__init__(str(error))
        self.error = error
        self.usage = usage
        self.partial = _cut_text(error)


def _worth_asking_again(error: BaseException) -> bool:
    """A backend fault that another attempt may not meet."""
    return isinstance(error, Exception) and not isinstance(
        error, (ModelUnavailableError, _CutShort)
    )


def _cut_text(error: BaseException) -> str:
    """The text a cut reply got to (``LengthFinishReasonError.completion``), or ""."""
    choices = getattr(getattr(error, "completion", None), "choices", None) or []
    message = getattr(choices[0], "message", None) if choices else None
    content = getattr(message, "content", None)
    return content if isinstance(content, str) else ""


def _cut_usage(error: BaseException, prompt_text: str) -> Usage:
    """What a cut reply cost: the completion's reported usage, else an estimate."""
    usage = getattr(getattr(error, "completion", None), "usage", None)
    prompt = getattr(usage, "prompt_tokens", None)
    completion = getattr(usage, "completion_tokens", None)
    if isinstance(prompt, int) and isinstance(completion, int):
        return Usage(1, prompt, completion)
    return Usage(1, estimate_tokens(prompt_text), estimate_tokens(_cut_text(error)))


def repair_cut_json(text: str | None) -> JsonObject | None:
    """The JSON object a reply cut mid-way was writing, from its complete items: the text up to
    the last complete value (a string, number or bracketed value ended, or a comma after one),
    with the brackets still open closed; None when no complete prefix is a JSON object.

    ``{"sub_questions": ["Who made X?", "Where was he bo`` gives
    ``{"sub_questions": ["Who made X?"]}``: an item the cut broke is dropped, never guessed.
    """
    start = (text or "").find("{")
    if start < 0:
        return None
    body = (text or "")[start:]
    closers: list[str] = []
    cuts: list[tuple[int, str]] = []  # (end of a complete prefix, the brackets to close it)
    in_string = escaped = False
    for index, char in enumerate(body):
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
                cuts.append((index + 1, "".join(reversed(closers))))
            continue
        if char == '"':
            in_string = True
        elif char in "[{":
            closers.append("]" if char == "[" else "}")
        elif char in "]}":
            if not closers:
                break
            closers.pop()
            if not closers:
                break  # the object is complete: nothing was cut
            cuts.append((index + 1, "".join(reversed(closers))))
        elif char == ",":
            cuts.append((index, "".join(reversed(closers))))
    for end, closing in reversed(cuts):
        try:
            value = json.loads(body[:end] + closing)
        except json.JSONDecodeError:
            continue
        if isinstance(value, dict):
            return value
    return None


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

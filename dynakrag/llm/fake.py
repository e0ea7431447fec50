"""A deterministic chat model driven by a function: for tests and offline examples."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult

Responder = Callable[[list[BaseMessage]], str]


class ScriptedChatModel(BaseChatModel):
    """Replies with ``respond(messages)``; an exception raised there surfaces as a model fault."""

    respond: Responder

    @property
    def _llm_type(self) -> str:
        return "scripted"

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        text = self.respond(messages)
        prompt_chars = sum(len(str(m.content)) for m in messages)
        usage = {
            "input_tokens": prompt_chars // 4,
            "output_tokens": len(text) // 4,
            "total_tokens": prompt_chars // 4 + len(text) // 4,
        }
        message = AIMessage(content=text, usage_metadata=usage)
        return ChatResult(generations=[ChatGeneration(message=message)])

"""Create the chat model a configuration asks for.

Order: an OpenAI-compatible endpoint in ``llm_base_url`` (OpenAI, vLLM, Ollama, llama.cpp);
else OpenAI itself when ``OPENAI_API_KEY`` is set; else the embedded local model.
"""

from __future__ import annotations

import os

from langchain_core.language_models import BaseChatModel

from dynakrag.configuration import Configuration
from dynakrag.llm.client import LLMClient


def describe_backend(cfg: Configuration) -> str:
    """A one-line description of the backend ``chat_model_from_config`` would use."""
    if cfg.llm_base_url:
        return f"{cfg.llm_model} at {cfg.llm_base_url}"
    if os.environ.get("OPENAI_API_KEY"):
        return f"OpenAI {cfg.llm_model}"
    return "embedded Qwen2.5-Coder-1.5B-Instruct (llama.cpp, offline)"


def chat_model_from_config(cfg: Configuration) -> BaseChatModel:
    """The configured chat model, at temperature 0.

    Its own request retries are off: ``LLMClient`` retries with a bounded backoff (the OpenAI
    client would honour a server's Retry-After of up to a minute per retry).
    """
    from langchain_openai import ChatOpenAI

    if cfg.llm_base_url or os.environ.get("OPENAI_API_KEY"):
        return ChatOpenAI(
            base_url=cfg.llm_base_url,
            api_key=os.environ.get("OPENAI_API_KEY") or "not-needed",
            model=cfg.llm_model,
            temperature=0,
            timeout=cfg.llm_timeout_s,
            max_retries=0,
            # Servers such as llama.cpp ignore max_completion_tokens; max_tokens works everywhere.
            extra_body={"max_tokens": cfg.llm_max_tokens},
        )
    from dynakrag.llm.embedded import embedded_chat_model

    return embedded_chat_model(
        cfg.cache_dir,
        max_tokens=cfg.llm_max_tokens,
        timeout=cfg.llm_timeout_s,
        max_retries=0,
    )


def llm_client_from_config(cfg: Configuration) -> LLMClient:
    """An LLMClient over the configured chat model, created on the first request (so the
    embedded server starts only when a model is needed)."""
    return LLMClient(lambda: chat_model_from_config(cfg), max_retries=cfg.llm_max_retries)

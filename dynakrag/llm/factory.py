"""The one place that turns a configuration into a language model: chat model, disk cache,
:class:`~dynakrag.llm.client.LLMClient` and the description a run records.

Order: an OpenAI-compatible endpoint in ``llm_base_url`` (OpenAI, vLLM, Ollama, llama.cpp);
else OpenAI itself when ``OPENAI_API_KEY`` is set; else the embedded local model. Every caller
(the graph, the CLI, evaluation, collection, benchmarks) gets its client from
:func:`llm_client_from_config`, optionally over its own chat model and through the SQLite
disk cache (:class:`~dynakrag.llm.cache.SQLiteLLMCache`).
"""

from __future__ import annotations

import os
from typing import Any

from langchain_core.caches import BaseCache
from langchain_core.language_models import BaseChatModel

from dynakrag.configuration import Configuration
from dynakrag.llm.cache import CachedChatModel, model_identity
from dynakrag.llm.client import LLMClient, speaks_openai

__all__ = [
    "chat_model_from_config",
    "config_identity",
    "describe_backend",
    "embedded_server_from_config",
    "embedded_server_settings",
    "llm_client_from_config",
    "llm_description",
    "uses_embedded",
]


def uses_embedded(cfg: Configuration) -> bool:
    """Whether ``cfg`` selects the embedded local model (no endpoint, no OpenAI key)."""
    return not cfg.llm_base_url and not os.environ.get("OPENAI_API_KEY")


def describe_backend(cfg: Configuration) -> str:
    """A one-line description of the backend ``chat_model_from_config`` would use."""
    if cfg.llm_base_url:
        return f"{cfg.llm_model} at {cfg.llm_base_url}"
    if os.environ.get("OPENAI_API_KEY"):
        return f"OpenAI {cfg.llm_model}"
    from dynakrag.llm.embedded_models import embedded_model

    return f"embedded {embedded_model(cfg.embedded_model).title} (llama.cpp, offline)"


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
        **embedded_server_settings(cfg),
    )


def embedded_server_settings(cfg: Configuration) -> dict[str, Any]:
    """The embedded server's settings in ``cfg``. Every caller passes them: the first caller in
    a process starts (or joins) the server with its settings, so one that left them out would
    give the whole process a server without the prompt cache, threads or model configured."""
    from dynakrag.llm.server_settings import ServerSettings

    return {"settings": ServerSettings.from_configuration(cfg), "spec": cfg.embedded_model}


def embedded_server_from_config(cfg: Configuration) -> Any:
    """The process's embedded server (started or joined) with ``cfg``'s settings."""
    from dynakrag.llm.embedded import get_embedded_server

    return get_embedded_server(cfg.cache_dir, **embedded_server_settings(cfg))


def config_identity(cfg: Configuration) -> str:
    """A stable identity of the configured backend (not its port or API key): the disk cache's
    key prefix and what a run records as ``llm_identity``."""
    params = f"temperature=0|max_tokens={cfg.llm_max_tokens}"
    if uses_embedded(cfg):
        from dynakrag.llm.embedded_models import embedded_model

        model = embedded_model(cfg.embedded_model)
        return f"embedded:{model.filename}:sha256={model.sha256}|{params}"
    endpoint = cfg.llm_base_url or "https://api.openai.com/v1"
    return f"openai-compatible:{cfg.llm_model}@{endpoint}|{params}"


def llm_description(cfg: Configuration, chat_model: BaseChatModel | None = None) -> dict[str, str]:
    """What a run records about its generator: ``llm`` (readable) and ``llm_identity``
    (stable, as the disk cache keys it), for ``chat_model`` or else the configured backend."""
    if chat_model is not None:
        return {"llm": type(chat_model).__name__, "llm_identity": model_identity(chat_model)}
    return {"llm": describe_backend(cfg), "llm_identity": config_identity(cfg)}


def llm_client_from_config(
    cfg: Configuration,
    *,
    chat_model: BaseChatModel | None = None,
    cache: BaseCache | None = None,
) -> LLMClient:
    """The LLMClient of a run, with ``cfg``'s retries.

    It calls ``chat_model`` when given, else the configured chat model, created on the first
    request (so the embedded server starts only when a model is needed). With ``cache`` (a
    :class:`~dynakrag.llm.cache.SQLiteLLMCache`), replies are read from and written to it,
    keyed by :func:`llm_description`'s identity.
    """
    identity = llm_description(cfg, chat_model)["llm_identity"]

    def cached(inner: BaseChatModel) -> BaseChatModel:
        if cache is None:
            return inner
        return CachedChatModel(inner=inner, disk_cache=cache, identity=identity)

    if chat_model is not None:
        # Behind the cache wrapper the client cannot see the model's kind: say it.
        return LLMClient(
            cached(chat_model),
            max_retries=cfg.llm_max_retries,
            json_mode=speaks_openai(chat_model),
        )
    # Every configured backend is ChatOpenAI (JSON mode); without a cache the client sees it.
    return LLMClient(
        lambda: cached(chat_model_from_config(cfg)),
        max_retries=cfg.llm_max_retries,
        json_mode=True if cache is not None else None,
    )

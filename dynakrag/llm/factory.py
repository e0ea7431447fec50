"""The one place that turns a configuration into a language model: chat model, disk cache,
:class:`~dynakrag.llm.client.LLMClient` and the description a run records.

Order: a provider's model named in ``llm`` (``"provider:model"``, built by LangChain's
``init_chat_model``); else an OpenAI-compatible endpoint in ``llm_base_url`` (OpenAI, vLLM,
Ollama, llama.cpp); else OpenAI itself when ``OPENAI_API_KEY`` is set; else the embedded local
model. Every caller (the graph, the CLI, evaluation, collection, benchmarks) gets its client
from :func:`llm_client_from_config`, optionally over its own chat model and through the SQLite
disk cache (:class:`~dynakrag.llm.cache.SQLiteLLMCache`).
"""

from __future__ import annotations

import os
from typing import Any

from langchain_core.caches import BaseCache
from langchain_core.language_models import BaseChatModel

from dynakrag.configuration import Configuration
from dynakrag.errors import ConfigurationError
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
    "provider_chat_model",
    "uses_embedded",
]


def uses_embedded(cfg: Configuration) -> bool:
    """Whether ``cfg`` selects the embedded local model (no named model, no endpoint, no
    OpenAI key)."""
    return not cfg.llm and not cfg.llm_base_url and not os.environ.get("OPENAI_API_KEY")


def describe_backend(cfg: Configuration) -> str:
    """A one-line description of the backend ``chat_model_from_config`` would use."""
    if cfg.llm:
        at = f" at {cfg.llm_base_url}" if cfg.llm_base_url else ""
        return f"{cfg.llm}{at} (init_chat_model)"
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
    if cfg.llm:
        return provider_chat_model(cfg)
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


def provider_chat_model(cfg: Configuration) -> BaseChatModel:
    """``cfg.llm`` (``"provider:model"``) as LangChain's ``init_chat_model`` builds it, at
    temperature 0, with ``llm_max_tokens``, ``llm_timeout_s`` and its own retries off (as
    :func:`chat_model_from_config`'s); ``llm_base_url``, when set, is its ``base_url``.

    Building it loads nothing and sends nothing, so a provider that does not exist, a missing
    integration package or missing credentials raise here, as one ConfigurationError line.
    """
    from langchain.chat_models import init_chat_model

    if not cfg.llm:
        raise ConfigurationError("no 'llm' is set (expected 'provider:model')")
    provider, _, model = cfg.llm.partition(":")
    options: dict[str, Any] = {"temperature": 0, "timeout": cfg.llm_timeout_s, "max_retries": 0}
    if cfg.llm_base_url:
        options["base_url"] = cfg.llm_base_url
    if provider.lower() == "openai":
        # As the llm_base_url path: llama.cpp and vLLM ignore max_completion_tokens, and
        # request_options reads this ceiling from extra_body.
        options["extra_body"] = {"max_tokens": cfg.llm_max_tokens}
    else:
        options["max_tokens"] = cfg.llm_max_tokens  # a standard parameter of chat models
    try:
        chat_model = init_chat_model(model, model_provider=provider, **options)
    except Exception as exc:  # unknown provider, package not installed, no API key ...
        reason = " ".join(str(exc).split()) or type(exc).__name__
        raise ConfigurationError(f"cannot build the chat model llm={cfg.llm!r}: {reason}") from None
    if not isinstance(chat_model, BaseChatModel):  # a configurable model: not asked for
        raise ConfigurationError(f"'llm'={cfg.llm!r} is not a chat model")
    return chat_model


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
    if cfg.llm:
        at = f"@{cfg.llm_base_url}" if cfg.llm_base_url else ""
        return f"chat-model:{cfg.llm}{at}|{params}"
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
    if cfg.llm:
        # Built now: it loads nothing, and a bad name fails before a run starts.
        model = provider_chat_model(cfg)
        return LLMClient(
            cached(model), max_retries=cfg.llm_max_retries, json_mode=speaks_openai(model)
        )
    # The other backends are ChatOpenAI (JSON mode); without a cache the client sees it.
    return LLMClient(
        lambda: cached(chat_model_from_config(cfg)),
        max_retries=cfg.llm_max_retries,
        json_mode=True if cache is not None else None,
    )

"""The embedded offline generator as a LangChain chat model: a Qwen2.5-Coder GGUF served by
llama.cpp.

The pieces, one module each: :mod:`dynakrag.llm.embedded_models` (which generators ship as PyPI
packages), :mod:`dynakrag.llm.model_assembly` (joining a model's parts once into the cache,
SHA-256 checked), :mod:`dynakrag.llm.server_command` (the ``llama_cpp.server`` command line),
:mod:`dynakrag.llm.server_process` (:class:`EmbeddedServer`, one server on a free local port) and
:mod:`dynakrag.llm.shared_server` (:class:`SharedServer`, one server per machine under leases).
Here :func:`get_embedded_server` keeps the process's server of each model, and
:func:`embedded_chat_model` returns a ``ChatOpenAI`` pointed at it, so the embedded model uses
the same code path as OpenAI, vLLM or Ollama.
"""

from __future__ import annotations

import atexit
import os
import threading
from pathlib import Path
from typing import Any

import openai
from langchain_openai import ChatOpenAI
from pydantic import PrivateAttr

from dynakrag.errors import ModelUnavailableError
from dynakrag.llm.embedded_models import EmbeddedModel, embedded_model
from dynakrag.llm.model_assembly import part_packages_installed
from dynakrag.llm.server_command import MODEL_ALIAS, missing_server_modules
from dynakrag.llm.server_process import EmbeddedServer
from dynakrag.llm.server_settings import ServerSettings
from dynakrag.llm.shared_server import SharedServer

_singleton: dict[str, SharedServer | EmbeddedServer] | None = None
"""The process's server of each embedded model, by name."""
_singleton_lock = threading.Lock()


def _stop_singleton() -> None:
    for server in list((_singleton or {}).values()):
        server.stop()


def _new_server(cache_dir: Path | None, **settings: Any) -> SharedServer | EmbeddedServer:
    """The machine-wide shared server; a private one with ``DYNAKRAG_SHARED_SERVER=0``."""
    if os.environ.get("DYNAKRAG_SHARED_SERVER", "1").strip().lower() in {"0", "false", "no"}:
        return EmbeddedServer(cache_dir, **settings)
    return SharedServer(cache_dir, **settings)


def get_embedded_server(
    cache_dir: Path | None = None,
    *,
    settings: ServerSettings | None = None,
    spec: EmbeddedModel | str | None = None,
) -> SharedServer | EmbeddedServer:
    """The process's handle on the server of embedded model ``spec`` (default: the 1.5B
    model), started or joined on first use.

    By default every dynakrag process on the machine shares one server per model (see
    :class:`SharedServer`); the lease ends at exit. The first caller's ``cache_dir`` wins. A
    dead server is restarted once. ``settings`` (default: the environment's configuration) are
    the server's (see :class:`ServerSettings`); a running shared server is reused only when it
    has the same ones.
    """
    global _singleton
    spec = embedded_model(spec)
    with _singleton_lock:
        if _singleton is None:
            _singleton = {}
            atexit.register(_stop_singleton)
        server = _singleton.get(spec.name)
        if server is None:
            server = _singleton[spec.name] = _new_server(
                cache_dir,
                settings=settings or ServerSettings.from_configuration(),
                spec=spec,
            )
    return server.ensure_running()


class _EmbeddedChatOpenAI(ChatOpenAI):
    """ChatOpenAI bound to an EmbeddedServer it may restart once if the server died."""

    _server: SharedServer | EmbeddedServer | None = PrivateAttr(default=None)

    def _generate(self, messages: Any, stop: Any = None, run_manager: Any = None, **kw: Any) -> Any:
        try:
            return super()._generate(messages, stop=stop, run_manager=run_manager, **kw)
        except openai.APIConnectionError:
            server = self._server
            if server is None or server.is_alive():
                raise  # a network fault with a live server: the caller's retries handle it
            server.ensure_running()  # restarts once; raises ModelUnavailableError after that
            if server.base_url != self.openai_api_base:
                raise ModelUnavailableError(
                    f"the embedded model server restarted on another address ({server.base_url})"
                ) from None
            return super()._generate(messages, stop=stop, run_manager=run_manager, **kw)


def embedded_chat_model(
    cache_dir: Path | None = None,
    max_tokens: int = 256,
    timeout: float = 120.0,
    max_retries: int = 2,
    **server_settings: Any,
) -> ChatOpenAI:
    """A ``ChatOpenAI`` talking to the embedded server (started if needed; ``server_settings``
    go to :func:`get_embedded_server`, ``spec=`` among them choosing the model).

    A request that finds the server dead restarts it once; a second death raises
    :class:`ModelUnavailableError`.

    ``max_tokens`` goes through ``extra_body``: llama.cpp ignores ``max_completion_tokens``.
    """
    import httpx

    server = get_embedded_server(cache_dir, **server_settings)
    extra: dict[str, Any] = {"max_tokens": max_tokens}
    model = _EmbeddedChatOpenAI(
        base_url=server.base_url,
        api_key="local",
        model=MODEL_ALIAS,
        temperature=0,
        extra_body=extra,
        timeout=timeout,
        max_retries=max_retries,
        # trust_env=False: a proxy from the environment must not intercept 127.0.0.1.
        http_client=httpx.Client(trust_env=False, timeout=timeout),
        http_async_client=httpx.AsyncClient(trust_env=False, timeout=timeout),
    )
    model._server = server
    return model


def embedded_available(spec: EmbeddedModel | str | None = None) -> bool:
    """True when llama.cpp's server and all part packages of ``spec`` (default: the 1.5B
    model) are installed (cheap, no hashing)."""
    if missing_server_modules():
        return False
    return part_packages_installed(embedded_model(spec))

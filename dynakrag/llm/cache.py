"""A persistent LLM reply cache: SQLite under ``cache_dir``, so a rerun is cheap and reproducible.

Two pieces:

* :class:`SQLiteLLMCache` is a LangChain ``BaseCache`` (usable with ``set_llm_cache`` or a chat
  model's ``cache=`` field). Entries are keyed by ``sha256(llm_string + prompt)``; hits and
  misses are counted. It is thread-safe (one connection behind a lock, WAL journal) and
  several processes may share the file.
* :class:`CachedChatModel` wraps any chat model and caches through it under a *stable* key:
  ``identity`` (the model, e.g. the embedded GGUF's SHA-256 or ``model@endpoint``) plus the
  generation parameters of each call (``stop``, bound kwargs such as ``response_format``) as
  the ``llm_string``, and the full message list as the ``prompt``. LangChain's own
  ``llm_string`` is not used: for ``ChatOpenAI`` it includes the base URL, and the embedded
  server listens on a fresh port every run.

A cached reply keeps its ``usage_metadata``, so token accounting of a rerun is identical to the
first run. Empty replies are not stored (the LLM client treats them as failures and retries).
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from langchain_core.caches import RETURN_VAL_TYPE, BaseCache
from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult, Generation
from pydantic import ConfigDict, Field

CACHE_FILENAME = "llm-cache.sqlite"
SCHEMA_VERSION = 1

__all__ = [
    "CACHE_FILENAME",
    "CachedChatModel",
    "SQLiteLLMCache",
    "default_cache_path",
    "model_identity",
]


def default_cache_path(cache_dir: str | Path) -> Path:
    """``<cache_dir>/llm-cache.sqlite``."""
    return Path(cache_dir).expanduser() / CACHE_FILENAME


def _key(prompt: str, llm_string: str) -> str:
    return hashlib.sha256(f"{llm_string}\x1f{prompt}".encode()).hexdigest()


def _encode(generations: Sequence[Generation]) -> str:
    """Plain JSON for generations (no pickles, no LangChain ``loads`` of stored objects)."""
    out: list[dict[str, Any]] = []
    for gen in generations:
        item: dict[str, Any] = {"text": gen.text, "generation_info": gen.generation_info}
        if isinstance(gen, ChatGeneration):
            message = gen.message
            item["message"] = {
                "content": message.content,
                "additional_kwargs": message.additional_kwargs,
                "response_metadata": message.response_metadata,
                "usage_metadata": getattr(message, "usage_metadata", None),
            }
        out.append(item)
    return json.dumps(out, ensure_ascii=False, default=str)


def _decode(payload: str) -> list[Generation]:
    generations: list[Generation] = []
    for item in json.loads(payload):
        message = item.get("message")
        if message is None:
            generations.append(
                Generation(text=item["text"], generation_info=item.get("generation_info"))
            )
            continue
        ai = AIMessage(
            content=message["content"],
            additional_kwargs=message.get("additional_kwargs") or {},
            response_metadata=message.get("response_metadata") or {},
            usage_metadata=message.get("usage_metadata"),
        )
        generations.append(ChatGeneration(message=ai, generation_info=item.get("generation_info")))
    return generations


class SQLiteLLMCache(BaseCache):
    """LangChain ``BaseCache`` persisted in one SQLite file; counts hits and misses."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path).expanduser()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._conn = sqlite3.connect(str(self.path), timeout=30.0, check_same_thread=False)
        with self._lock, self._conn:
            self._conn.execute("PRAGMA journal_mode=WAL")
            self._conn.execute(
                "CREATE TABLE IF NOT EXISTS llm_cache ("
                " key TEXT PRIMARY KEY, llm_string TEXT NOT NULL, prompt TEXT NOT NULL,"
                " value TEXT NOT NULL, created REAL NOT NULL, schema INTEGER NOT NULL)"
            )
        self.hits = 0
        self.misses = 0
        self.writes = 0

    @classmethod
    def in_dir(cls, cache_dir: str | Path) -> SQLiteLLMCache:
        """The cache file ``<cache_dir>/llm-cache.sqlite``."""
        return cls(default_cache_path(cache_dir))

    # --- BaseCache -----------------------------------------------------------------------------

    def lookup(self, prompt: str, llm_string: str) -> RETURN_VAL_TYPE | None:
        """The stored generations for ``(prompt, llm_string)``, or None (counted as a miss)."""
        with self._lock:
            row = self._conn.execute(
                "SELECT value FROM llm_cache WHERE key = ? AND schema = ?",
                (_key(prompt, llm_string), SCHEMA_VERSION),
            ).fetchone()
            if row is None:
                self.misses += 1
                return None
            try:
                value = _decode(row[0])
            except (ValueError, KeyError, TypeError):  # a damaged row is a miss, then replaced
                self.misses += 1
                return None
            self.hits += 1
            return value

    def update(self, prompt: str, llm_string: str, return_val: RETURN_VAL_TYPE) -> None:
        """Store (or replace) the generations of ``(prompt, llm_string)``."""
        payload = _encode(return_val)
        with self._lock, self._conn:
            self._conn.execute(
                "INSERT OR REPLACE INTO llm_cache VALUES (?, ?, ?, ?, ?, ?)",
                (
                    _key(prompt, llm_string),
                    llm_string,
                    prompt,
                    payload,
                    time.time(),
                    SCHEMA_VERSION,
                ),
            )
            self.writes += 1

    def clear(self, **kwargs: Any) -> None:
        """Drop every entry."""
        with self._lock, self._conn:
            self._conn.execute("DELETE FROM llm_cache")

    # --- bookkeeping ---------------------------------------------------------------------------

    def __len__(self) -> int:
        with self._lock:
            return int(self._conn.execute("SELECT COUNT(*) FROM llm_cache").fetchone()[0])

    def stats(self) -> dict[str, Any]:
        """``{"path", "hits", "misses", "writes"}`` since this object was created."""
        with self._lock:
            return {
                "path": str(self.path),
                "hits": self.hits,
                "misses": self.misses,
                "writes": self.writes,
            }

    def close(self) -> None:
        """Close the connection (the object is unusable afterwards)."""
        with self._lock:
            self._conn.close()


def _jsonable(value: Any) -> Any:
    return json.loads(json.dumps(value, sort_keys=True, default=repr))


def model_identity(model: BaseChatModel) -> str:
    """A stable description of a chat model: class plus its identifying parameters.

    For ``ChatOpenAI`` that is the model name, temperature and extra body (e.g. max_tokens), not
    the endpoint; pass an explicit ``identity`` to :class:`CachedChatModel` when two endpoints
    serve different models under one name.
    """
    try:
        params = dict(model._identifying_params)
    except Exception:  # a model without identifying params is identified by its class
        params = {}
    params.pop("stream", None)
    body = json.dumps(_jsonable(params), sort_keys=True)
    return f"{type(model).__module__}.{type(model).__qualname__}{body}"


def _messages_key(messages: Sequence[BaseMessage]) -> str:
    return json.dumps(
        [[m.type, _jsonable(m.content)] for m in messages], ensure_ascii=False, sort_keys=True
    )


class CachedChatModel(BaseChatModel):
    """A chat model that answers from a :class:`SQLiteLLMCache` before asking ``inner``.

    The key is ``identity`` + per-call parameters (``stop`` and bound kwargs) + every message.
    ``identity`` defaults to :func:`model_identity` of ``inner``.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    inner: BaseChatModel
    disk_cache: Any = Field(exclude=True)
    """The :class:`SQLiteLLMCache` (any ``BaseCache`` works)."""
    identity: str = ""
    cache: Any = False  # LangChain's own caching of this wrapper stays off

    def model_post_init(self, context: Any) -> None:
        if not self.identity:
            object.__setattr__(self, "identity", model_identity(self.inner))

    @property
    def _llm_type(self) -> str:
        return f"cached-{getattr(self.inner, '_llm_type', 'chat')}"

    @property
    def _identifying_params(self) -> dict[str, Any]:
        return {"identity": self.identity}

    def llm_string(self, stop: list[str] | None = None, **kwargs: Any) -> str:
        """The cache's ``llm_string`` for a call with these parameters."""
        params = json.dumps(_jsonable({"stop": stop, **kwargs}), sort_keys=True)
        return f"{self.identity}---{params}"

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        prompt = _messages_key(messages)
        llm_string = self.llm_string(stop, **kwargs)
        cached = self.disk_cache.lookup(prompt, llm_string)
        if cached:
            return ChatResult(generations=list(cached))
        reply = self.inner.invoke(messages, stop=stop, **kwargs)
        message = reply if isinstance(reply, AIMessage) else AIMessage(content=str(reply))
        result = ChatResult(generations=[ChatGeneration(message=message)])
        text = message.content if isinstance(message.content, str) else str(message.content)
        if text.strip():
            self.disk_cache.update(prompt, llm_string, result.generations)
        return result

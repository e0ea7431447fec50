"""The embedded llama.cpp server's settings: one object, built from :class:`Configuration`.

Every server of the embedded model (private or shared) is started from a
:class:`ServerSettings`; :func:`dynakrag.llm.factory.embedded_server_settings` builds it from the
configuration, and a caller that passes none gets the environment's configuration, so a server
never runs with defaults of its own that differ from the configured ones.
"""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass
from typing import Any, Literal

from dynakrag.configuration import Configuration

__all__ = ["KV_CACHE_TYPES", "ServerSettings", "kv_cache_ggml_type"]

KvCacheType = Literal["f16", "q8_0"]
KV_CACHE_TYPES: dict[str, int] = {"f16": 1, "q8_0": 8}
"""KV-cache element types and their ggml type ids (``enum ggml_type``)."""


def kv_cache_ggml_type(name: str) -> int:
    """The ggml type id of a KV-cache element type name."""
    try:
        return KV_CACHE_TYPES[name]
    except KeyError:
        raise ValueError(
            f"unknown KV-cache type {name!r}; one of {sorted(KV_CACHE_TYPES)}"
        ) from None


def _default_threads() -> int:
    try:
        cpus = len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        cpus = os.cpu_count() or 1
    return max(1, min(2, cpus))


def _configured_default(field: str) -> Any:
    """The :class:`Configuration` default of ``field``: one source for both."""
    return Configuration.model_fields[field].default


@dataclass(frozen=True)
class ServerSettings:
    """How the embedded model server runs. Each default is the matching ``embedded_*`` field's
    default in :class:`Configuration`."""

    n_ctx: int = 4096
    n_threads: int | None = _configured_default("embedded_threads")
    """None: the CPUs available, at most 2."""
    n_batch: int = _configured_default("embedded_batch_size")
    n_ubatch: int = _configured_default("embedded_ubatch_size")
    prompt_cache_mb: int = _configured_default("embedded_prompt_cache_mb")
    flash_attn: bool = _configured_default("embedded_flash_attn")
    kv_cache_type: KvCacheType = _configured_default("embedded_kv_cache_type")  # noqa: RUF009
    cpu_variant: str = _configured_default("embedded_cpu_variant")
    """The llama.cpp CPU backend (:mod:`dynakrag.llm.cpu_backends`): ``auto`` picks the best
    one this CPU can run."""
    logits_all: bool = _configured_default("embedded_prompt_logprobs")
    """Keep the logits of every prompt token (prompt log-probs, ``echo=True``): llama-cpp-python's
    server does by default, which computes and copies a vocabulary-sized row per prompt token."""

    @classmethod
    def from_configuration(cls, cfg: Configuration | None = None) -> ServerSettings:
        """The settings ``cfg`` (default: the environment's configuration) asks for."""
        cfg = cfg or Configuration.from_env()
        return cls(
            n_threads=cfg.embedded_threads,
            n_batch=cfg.embedded_batch_size,
            n_ubatch=min(cfg.embedded_ubatch_size, cfg.embedded_batch_size),
            prompt_cache_mb=cfg.embedded_prompt_cache_mb,
            flash_attn=cfg.embedded_flash_attn,
            kv_cache_type=cfg.embedded_kv_cache_type,
            cpu_variant=cfg.embedded_cpu_variant,
            logits_all=cfg.embedded_prompt_logprobs,
        )

    @property
    def threads(self) -> int:
        return self.n_threads or _default_threads()

    def identity(self) -> str:
        """What tells two servers' settings apart (a shared server is reused only on a match)."""
        values = asdict(self) | {"n_threads": self.threads}
        return ":".join(f"{key}={value}" for key, value in values.items())

    def server_arguments(self) -> list[str]:
        """``llama_cpp.server`` options for these settings (model, host and port excluded)."""
        kv_type = str(kv_cache_ggml_type(self.kv_cache_type))
        cache = (
            [
                "--cache",
                "true",
                "--cache_type",
                "ram",
                "--cache_size",
                str(self.prompt_cache_mb << 20),
            ]
            if self.prompt_cache_mb > 0
            else []
        )
        return [
            "--n_ctx",
            str(self.n_ctx),
            "--n_threads",
            str(self.threads),
            "--n_threads_batch",
            str(self.threads),
            "--n_batch",
            str(self.n_batch),
            "--n_ubatch",
            str(min(self.n_ubatch, self.n_batch)),
            "--flash_attn",
            str(self.flash_attn).lower(),
            "--type_k",
            kv_type,
            "--type_v",
            kv_type,
            "--logits_all",
            str(self.logits_all).lower(),
            *cache,
        ]

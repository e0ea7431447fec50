"""The generator the commands answer and collect with: built in one place, checked after a run."""

from __future__ import annotations

from typing import Any

from dynakrag.configuration import Configuration
from dynakrag.errors import ModelUnavailableError


def make_llm(cfg: Configuration, *, disk_cache: bool = False) -> Any:
    """The configured generator as an LLMClient (the model itself loads on first use);
    ``disk_cache`` reads and writes replies in ``<cache_dir>/llm-cache.sqlite``, so a rerun
    (a resumed collection, a rebuild of the shipped policy) replays them instead of asking."""
    from dynakrag.llm.factory import llm_client_from_config

    if not disk_cache:
        return llm_client_from_config(cfg)
    from dynakrag.llm.cache import SQLiteLLMCache

    return llm_client_from_config(cfg, cache=SQLiteLLMCache.in_dir(cfg.cache_dir))


def check_model_reached(llm: Any) -> None:
    """A run whose every model request failed is a failure, not an 'insufficient evidence'."""
    if llm.unreachable:
        raise ModelUnavailableError(f"the language model could not be reached ({llm.last_error})")

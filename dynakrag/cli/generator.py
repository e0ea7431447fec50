"""The generator the commands answer and collect with: built in one place, checked after a run."""

from __future__ import annotations

from typing import Any

from dynakrag.configuration import Configuration
from dynakrag.errors import ModelUnavailableError


def make_llm(cfg: Configuration) -> Any:
    """The configured generator as an LLMClient (the model itself loads on first use)."""
    from dynakrag.llm.factory import llm_client_from_config

    return llm_client_from_config(cfg)


def check_model_reached(llm: Any) -> None:
    """A run whose every model request failed is a failure, not an 'insufficient evidence'."""
    if llm.unreachable:
        raise ModelUnavailableError(f"the language model could not be reached ({llm.last_error})")

"""What every action node shares: its resources, the update it returns, the evidence it reads."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, cast

from dynakrag.configuration import Configuration
from dynakrag.llm.client import NO_USAGE, LLMClient, Usage
from dynakrag.retrieval.base import Searcher
from dynakrag.state import Document, State, StateUpdate, TraceDetails, TraceEntry


@dataclass
class Resources:
    """What the action nodes call out to: bound once when the graph is built."""

    searcher: Searcher
    llm: LLMClient


def action_update(
    state: State,
    action: str,
    *,
    usage: Usage = NO_USAGE,
    retrieval_calls: int = 0,
    added: list[Document] | None = None,
    counts_as_step: bool = True,
    details: TraceDetails | None = None,
    **changes: Any,
) -> StateUpdate:
    """The partial state update of one action: its changes plus trace and accounting."""
    added = added or []
    entry: TraceEntry = {
        "step": len(state.get("trace", [])) + 1,
        "action": action,
        "valid_actions": list(state.get("valid_actions", [])),
        "scores": dict(state.get("policy_scores", {})),
        "explanation": dict(state.get("explanation") or {}),
        "query": state.get("query", state["question"]),
        "added": [doc["id"] for doc in added],
        "retrieval_calls": retrieval_calls,
        "llm_calls": usage.llm_calls,
        "prompt_tokens": usage.prompt_tokens,
        "completion_tokens": usage.completion_tokens,
    }
    entry.update(details or {})  # each action's own keys
    update: StateUpdate = {
        "trace": [entry],
        "steps": 1 if counts_as_step else 0,
        "retrieval_calls": retrieval_calls,
        "llm_calls": usage.llm_calls,
        "prompt_tokens": usage.prompt_tokens,
        "completion_tokens": usage.completion_tokens,
        "accounting": {
            action: {
                "calls": 1,
                "retrieval_calls": retrieval_calls,
                "llm_calls": usage.llm_calls,
                "prompt_tokens": usage.prompt_tokens,
                "completion_tokens": usage.completion_tokens,
            }
        },
        "last_new_docs": len(added),
    }
    update.update(cast(StateUpdate, changes))  # the action's own fields
    return update


def evidence_window(state: State, cfg: Configuration) -> list[Document]:
    """The passages a prompt sees: the first ``max_final_docs`` in acquisition order."""
    return list(state.get("evidence", []))[: cfg.max_final_docs]

"""rewrite_query: reformulate the query from the evidence (few-shot), then search with it."""

from __future__ import annotations

from dynakrag import prompts
from dynakrag.actions.chain import next_hop_entities, next_hop_search
from dynakrag.actions.common import Resources, evidence_window
from dynakrag.actions.frontier import acquisition_update
from dynakrag.configuration import Configuration
from dynakrag.state import State, StateUpdate


def rewrite_query(state: State, resources: Resources, cfg: Configuration) -> StateUpdate:
    """Ask the generator for a better query; on no usable reply, fall back to question + gap.

    With a chain of hops the query rewritten is the next open hop's (its question with the
    answers found so far, or its last search).
    """
    question = state["question"]
    current = state.get("query") or question
    hop = next_hop_search(state)
    if hop is not None:
        question, current = hop
    evidence = evidence_window(state, cfg)
    reply, usage = resources.llm.text(
        prompts.rewrite_messages(question, current, evidence),
        max_tokens=prompts.REWRITE_MAX_TOKENS,
    )
    new_query = _first_line(reply) if reply else ""
    fallback = not new_query or new_query.lower() == current.lower()
    if fallback:
        # Documented fallback: widen the query with the first recorded gap or bridge entity.
        extra = (state.get("gaps") or state.get("bridge_entities") or [""])[0]
        new_query = f"{question} {extra}".strip()
    return acquisition_update(
        state,
        resources,
        cfg,
        "rewrite_query",
        new_query,
        usage=usage,
        details={"rewritten_query": new_query, "fallback": fallback},
        names=next_hop_entities(state),
        query=new_query,
        rewrites=state.get("rewrites", 0) + 1,
    )


def _first_line(text: str) -> str:
    line = text.strip().splitlines()[0] if text.strip() else ""
    for prefix in ("New query:", "Query:"):
        if line.lower().startswith(prefix.lower()):
            line = line[len(prefix) :]
    return line.strip().strip('"').strip()[:300]

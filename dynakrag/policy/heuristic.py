"""The default hand-written policy, used until a learned policy is configured.

Its preferences, highest first: answer once the sufficiency check found every sub-question
answered (compressing first when there is much evidence); check sufficiency after new evidence;
query a recorded gap; expand a detected bridge entity; page deeper into the frontier; rewrite
the query as a last resort.
"""

from __future__ import annotations

from collections.abc import Sequence

from dynakrag.actions.bridge_entities import pending_bridge_entities
from dynakrag.actions.chain import (
    chain_complete,
    chain_failed,
    next_open_hop,
    searches_left,
)
from dynakrag.configuration import Configuration
from dynakrag.policy.base import Policy
from dynakrag.state import State


class HeuristicPolicy(Policy):
    """Fixed priorities conditioned on the observable state."""

    name = "heuristic"

    def value(self, state: State, actions: Sequence[str], cfg: Configuration) -> dict[str, float]:
        if state.get("hops"):
            values = _chain_values(state, cfg)
            return {action: values[action] for action in actions}
        evidence = len(state.get("evidence", []))
        checked = state.get("evidence_count_at_check", -1)
        ready = bool(state.get("sufficient")) and checked == evidence
        values = {
            "retrieve_more": 1.0 if evidence == 0 else 0.35,
            "sufficiency_check": 0.8 if evidence > checked else 0.0,
            # A gap that only restates the question is a weaker query than a bridge entity.
            "gap_query": 0.7 if _specific_gap(state) else 0.4,
            "bridge_entity_expand": 0.6 if state.get("last_new_docs", 0) > 0 else 0.5,
            "rewrite_query": 0.3 if state.get("last_new_docs", 1) == 0 else 0.2,
            "stop_answer": 0.9 if ready else 0.1,
            # Compress first when the answer is near and the evidence is larger than one hop.
            "compress_answer_evidence": (0.95 if ready else 0.15)
            if evidence > cfg.docs_per_action
            else 0.05,
        }
        return {action: values[action] for action in actions}


def _chain_values(state: State, cfg: Configuration) -> dict[str, float]:
    """With a chain of hops: check new evidence, search the next hop (its query, the entity it
    goes on through, then one rewritten retry), close a hop whose searches are spent, and
    answer only once the chain is complete or cannot go on; never stop while a hop can still
    be searched."""
    hops = state["hops"]
    evidence = len(state.get("evidence", []))
    new_evidence = evidence > state.get("evidence_count_at_check", -1)
    index = next_open_hop(hops)
    searchable = index is not None and not chain_failed(hops)
    spent = searchable and searches_left(hops, index) <= 0
    through = searchable and bool(hops[index]["via"]) and bool(pending_bridge_entities(state))
    done = chain_complete(hops) or not searchable
    return {
        "retrieve_more": 0.1,
        # A hop whose searches are spent is closed by a check (which may reopen the hop it
        # depends on) before the run answers.
        "sufficiency_check": 0.8 if new_evidence or spent else 0.0,
        "gap_query": 0.7 if state.get("gaps") else 0.2,
        "bridge_entity_expand": 0.75 if through else 0.15,
        "rewrite_query": 0.6 if searchable and not spent and hops[index]["queries"] else 0.05,
        "stop_answer": 0.9 if done else 0.02,
        "compress_answer_evidence": (0.95 if done else 0.03)
        if evidence > cfg.docs_per_action
        else 0.01,
    }


def _specific_gap(state: State) -> bool:
    gaps = state.get("gaps", [])
    return bool(gaps) and gaps[0].strip().lower() != state["question"].strip().lower()

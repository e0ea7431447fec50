"""retrieve_more: page deeper into the frontier of the current query."""

from __future__ import annotations

from dynakrag.actions.common import Resources
from dynakrag.actions.frontier import acquisition_update
from dynakrag.configuration import Configuration
from dynakrag.state import State, StateUpdate


def retrieve_more(state: State, resources: Resources, cfg: Configuration) -> StateUpdate:
    """Add the next best unseen passages for the current query."""
    query = state.get("query") or state["question"]
    return acquisition_update(state, resources, cfg, "retrieve_more", query)

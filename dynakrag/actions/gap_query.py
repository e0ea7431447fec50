"""gap_query: search for the recorded missing information."""

from __future__ import annotations

from dynakrag.actions.chain import next_hop_entities
from dynakrag.actions.common import Resources
from dynakrag.actions.frontier import acquisition_update
from dynakrag.actions.gaps import take_gap
from dynakrag.configuration import Configuration
from dynakrag.state import State, StateUpdate


def gap_query(state: State, resources: Resources, cfg: Configuration) -> StateUpdate:
    """Query the oldest pending gap and mark it as queried."""
    gap, gaps, queried_gaps = take_gap(state)
    return acquisition_update(
        state,
        resources,
        cfg,
        "gap_query",
        gap,
        names=next_hop_entities(state),
        gaps=gaps,
        queried_gaps=queried_gaps,
    )

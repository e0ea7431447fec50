"""bridge_entity_expand: retrieve around an entity the evidence revealed."""

from __future__ import annotations

from dynakrag.actions.bridge_entities import pending_bridge_entities
from dynakrag.actions.common import Resources
from dynakrag.actions.frontier import acquisition_update
from dynakrag.configuration import Configuration
from dynakrag.state import State, StateUpdate


def bridge_entity_expand(state: State, resources: Resources, cfg: Configuration) -> StateUpdate:
    """Search for the first unexpanded bridge entity."""
    entity = pending_bridge_entities(state)[0]
    return acquisition_update(
        state,
        resources,
        cfg,
        "bridge_entity_expand",
        entity,
        details={"entity": entity},
        # With a chain the entity's own passages come first (look-alike names are others).
        names=[entity] if state.get("hops") else (),
        expanded_entities=[*state.get("expanded_entities", []), entity],
    )

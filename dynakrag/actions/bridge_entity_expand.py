"""bridge_entity_expand: retrieve around an entity the evidence revealed."""

from __future__ import annotations

from typing import Any

from dynakrag.actions.common import Resources, acquisition_update
from dynakrag.configuration import Configuration
from dynakrag.state import State


def pending_bridge_entities(state: State) -> list[str]:
    """Detected bridge entities that have not been expanded yet."""
    expanded = {entity.lower() for entity in state.get("expanded_entities", [])}
    return [e for e in state.get("bridge_entities", []) if e.lower() not in expanded]


def bridge_entity_expand(state: State, resources: Resources, cfg: Configuration) -> dict[str, Any]:
    """Search for the first unexpanded bridge entity."""
    entity = pending_bridge_entities(state)[0]
    return acquisition_update(
        state,
        resources,
        cfg,
        "bridge_entity_expand",
        entity,
        details={"entity": entity},
        expanded_entities=[*state.get("expanded_entities", []), entity],
    )

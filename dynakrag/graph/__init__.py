"""The DynaKRAG state machine: wiring, validity layer, controller, branches through checkpoints."""

from dynakrag.graph.builder import build_graph
from dynakrag.state import ACTIONS, InputState, State

__all__ = ["ACTIONS", "InputState", "State", "build_graph"]

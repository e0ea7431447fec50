"""The DynaKRAG state machine: state, wiring and the controller's router."""

from dynakrag.graph.builder import build_graph
from dynakrag.graph.state import ACTIONS, InputState, State

__all__ = ["ACTIONS", "InputState", "State", "build_graph"]

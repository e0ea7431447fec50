"""dynakrag: learned control of multi-hop retrieval-augmented QA, built on LangGraph."""

from __future__ import annotations

from typing import Any

from dynakrag.configuration import Configuration, RunSettings
from dynakrag.errors import (
    ConfigurationError,
    CorpusError,
    DynakragError,
    ModelUnavailableError,
    UserInputError,
)
from dynakrag.graph.builder import build_graph
from dynakrag.graph.nodes import validate_question
from dynakrag.state import ACTIONS, State

__version__ = "0.1.0"


def ask(question: str, graph: Any = None, **configurable: Any) -> State:
    """Answer ``question`` with ``graph`` (default: a new graph over the demo corpus): the
    run's final state.

    Keyword arguments override Configuration fields for this run. Raises UserInputError for an
    unusable question.
    """
    cfg = Configuration.from_env(**configurable)
    validate_question(question, cfg)
    graph = graph or build_graph(configuration=cfg)
    return graph.invoke({"question": question}, {"configurable": configurable})


__all__ = [
    "ACTIONS",
    "Configuration",
    "ConfigurationError",
    "CorpusError",
    "DynakragError",
    "ModelUnavailableError",
    "RunSettings",
    "UserInputError",
    "__version__",
    "ask",
    "build_graph",
]

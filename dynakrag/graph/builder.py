"""Wire the DynaKRAG state machine: prepare -> controller -> one action node -> controller ...

``compress_answer_evidence`` always leads to ``stop_answer``, and ``stop_answer`` ends the run.
"""

from __future__ import annotations

import threading
import unicodedata
from collections.abc import Callable
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.runnables import RunnableConfig
from langgraph.graph import END, START, StateGraph
from langgraph.graph.state import CompiledStateGraph
from langgraph.types import Overwrite

from dynakrag.actions.bridge_entity_expand import bridge_entity_expand
from dynakrag.actions.common import Resources
from dynakrag.actions.compress_answer_evidence import compress_answer_evidence
from dynakrag.actions.gap_query import gap_query
from dynakrag.actions.retrieve_more import retrieve_more
from dynakrag.actions.rewrite_query import rewrite_query
from dynakrag.actions.stop_answer import stop_answer
from dynakrag.actions.sufficiency_check import sufficiency_check
from dynakrag.configuration import Configuration
from dynakrag.errors import UserInputError
from dynakrag.graph.controller import decide, route
from dynakrag.llm.client import LLMClient
from dynakrag.policy.base import Policy
from dynakrag.policy.registry import resolve_policy
from dynakrag.retrieval.base import Searcher
from dynakrag.retrieval.provenance import search_with_provenance
from dynakrag.state import (
    ACQUISITION_ACTIONS,
    ACTIONS,
    ADDITIVE_FIELDS,
    InputState,
    State,
    initial_state,
)

ActionFn = Callable[[State, Resources, Configuration], dict[str, Any]]

ACTION_FUNCTIONS: dict[str, ActionFn] = {
    "retrieve_more": retrieve_more,
    "gap_query": gap_query,
    "bridge_entity_expand": bridge_entity_expand,
    "rewrite_query": rewrite_query,
    "sufficiency_check": sufficiency_check,
    "stop_answer": stop_answer,
    "compress_answer_evidence": compress_answer_evidence,
}

# Enough super-steps for the largest max_steps the configuration allows.
RECURSION_LIMIT = 2 * (32 + 3) + 4


# Joiners are format characters that words and emoji need (Persian, Indic scripts, 👩‍🔬).
_KEPT_FORMAT_CHARS = frozenset("\n\t\u200c\u200d")


def validate_question(question: object, cfg: Configuration) -> str:
    """The question with control characters removed; UserInputError when unusable."""
    if not isinstance(question, str):
        raise UserInputError("the question must be a string")
    cleaned = "".join(
        ch if ch in _KEPT_FORMAT_CHARS or unicodedata.category(ch)[0] != "C" else " "
        for ch in question
    )
    cleaned = " ".join(cleaned.split())
    if not cleaned:
        raise UserInputError("the question is empty")
    if len(cleaned) > cfg.max_question_chars:
        raise UserInputError(
            f"the question has {len(cleaned)} characters; the limit is {cfg.max_question_chars} "
            "(setting max_question_chars)"
        )
    return cleaned


class _Lazy:
    """Builds an expensive dependency (a model server, an index) on first use, once."""

    def __init__(self, factory: Callable[[], Any]) -> None:
        self._factory = factory
        self._value: Any = None
        self._lock = threading.Lock()

    def get(self) -> Any:
        with self._lock:
            if self._value is None:
                self._value = self._factory()
            return self._value


class LazySearcher:
    """A Searcher whose index is loaded on the first search."""

    def __init__(self, factory: Callable[[], Searcher]) -> None:
        self._lazy = _Lazy(factory)

    def search(self, query: str, k: int) -> list[Any]:
        return self._lazy.get().search(query, k)

    def search_with_provenance(self, query: str, k: int) -> Any:
        return search_with_provenance(self._lazy.get(), query, k)


def build_graph(
    searcher: Searcher | None = None,
    chat_model: BaseChatModel | None = None,
    *,
    policy: Policy | str | None = None,
    configuration: Configuration | None = None,
    checkpointer: Any = None,
    llm: LLMClient | None = None,
) -> CompiledStateGraph:
    """Compile the DynaKRAG graph.

    Args:
        searcher: what the acquisition actions search; default: the demo corpus index.
        chat_model: any LangChain chat model; default: from the configuration (a configured
            OpenAI-compatible endpoint, else the embedded local model).
        policy: a Policy, or a policy name; default: the configuration's ``policy``.
        configuration: base settings; each run can override them in ``config["configurable"]``.
        checkpointer: e.g. a ``SqliteSaver`` to log every step for later retraining.
        llm: an LLMClient to use as is (overrides ``chat_model``).
    """
    base = configuration or Configuration.from_env()
    if llm is None:
        if chat_model is not None:
            llm = LLMClient(chat_model, max_retries=base.llm_max_retries)
        else:
            from dynakrag.llm.factory import llm_client_from_config

            llm = llm_client_from_config(base)
    if searcher is None:
        from dynakrag.data.demo import demo_searcher

        searcher = LazySearcher(lambda: demo_searcher(base))
    resources = Resources(searcher=searcher, llm=llm)
    fixed_policy = resolve_policy(policy) if policy is not None else None
    # Resolve the configured policy now so a bad name fails before any index or model loads.
    policies: dict[str, Policy] = {} if fixed_policy else {base.policy: resolve_policy(base.policy)}

    def run_configuration(config: RunnableConfig) -> Configuration:
        return base.merged((config or {}).get("configurable"))

    def prepare(state: InputState, config: RunnableConfig) -> dict[str, Any]:
        """Validate the question and initialise the state."""
        cfg = run_configuration(config)
        question = validate_question(state.get("question"), cfg)
        update: dict[str, Any] = dict(initial_state(question))
        # A new question on the same thread starts with a fresh budget and history: bypass the
        # reducers that would otherwise add to the previous run's counters.
        for name in ADDITIVE_FIELDS:
            update[name] = Overwrite(update[name])
        return update

    def controller(state: State, config: RunnableConfig) -> dict[str, Any]:
        """Validity layer, then policy: pick the next action."""
        cfg = run_configuration(config)
        chosen = fixed_policy
        if chosen is None:
            chosen = policies.get(cfg.policy) or policies.setdefault(
                cfg.policy, resolve_policy(cfg.policy)
            )
        return decide(state, chosen, cfg)

    def make_node(name: str, fn: ActionFn) -> Callable[[State, RunnableConfig], dict[str, Any]]:
        def node(state: State, config: RunnableConfig) -> dict[str, Any]:
            return fn(state, resources, run_configuration(config))

        node.__name__ = name
        node.__doc__ = fn.__doc__
        return node

    builder = StateGraph(State, input_schema=InputState)
    builder.add_node("prepare", prepare)
    builder.add_node("controller", controller)
    for name in ACTIONS:
        builder.add_node(name, make_node(name, ACTION_FUNCTIONS[name]))
    builder.add_edge(START, "prepare")
    builder.add_edge("prepare", "controller")
    builder.add_conditional_edges("controller", route, {name: name for name in ACTIONS})
    for name in ACQUISITION_ACTIONS | {"sufficiency_check"}:
        builder.add_edge(name, "controller")
    builder.add_edge("compress_answer_evidence", "stop_answer")
    builder.add_edge("stop_answer", END)
    graph = builder.compile(checkpointer=checkpointer, name="dynakrag")
    return graph.with_config(recursion_limit=RECURSION_LIMIT)

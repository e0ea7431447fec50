"""Wire the DynaKRAG state machine: prepare -> controller -> one action node -> controller ...

The nodes and the edges between them come from :mod:`dynakrag.graph.nodes`
(``compress_answer_evidence`` always leads to ``stop_answer``, and ``stop_answer`` ends the run).
The controller routes by returning ``Command(goto=action)``; its return type names the actions
it may go to, so the edges are in the graph's types. Per-run settings are the graph's context
(:class:`~dynakrag.configuration.RunSettings`, the ``context_schema``).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.runnables import RunnableConfig
from langgraph.graph import END, START, StateGraph
from langgraph.graph.state import CompiledStateGraph
from langgraph.runtime import Runtime
from langgraph.types import Command, Overwrite

from dynakrag.actions.common import Resources
from dynakrag.configuration import Configuration, RunSettings
from dynakrag.graph.controller import decide
from dynakrag.graph.nodes import (
    ACTION_FUNCTIONS,
    ENDS_RUN,
    FIXED_EDGES,
    RETURNS_TO_CONTROLLER,
    ActionName,
    prepared_state,
    run_action,
    validate_question,
)
from dynakrag.llm.client import LLMClient
from dynakrag.policy.base import Policy
from dynakrag.policy.registry import resolve_policy
from dynakrag.retrieval.base import Searcher
from dynakrag.retrieval.provenance import search_with_provenance
from dynakrag.state import (
    ACTIONS,
    ADDITIVE_FIELDS,
    InputState,
    State,
    StateUpdate,
)

__all__ = ["RECURSION_LIMIT", "LazySearcher", "build_graph", "validate_question"]
# validate_question lives in dynakrag.graph.nodes; it is re-exported for the CLI's imports.


def _largest_max_steps() -> int:
    """The upper bound (``le``) of :attr:`Configuration.max_steps`."""
    for constraint in Configuration.model_fields["max_steps"].metadata:
        bound = getattr(constraint, "le", None)
        if bound is not None:
            return int(bound)
    raise RuntimeError("Configuration.max_steps has no upper bound to size the recursion limit")


# Enough super-steps for the largest max_steps the configuration allows: a controller step and
# an action per control step, plus room for the checks, compression and answer around them.
RECURSION_LIMIT = 2 * (_largest_max_steps() + 3) + 4


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
        configuration: base settings; each run can override the per-run ones in its
            ``context`` (:class:`~dynakrag.configuration.RunSettings`) or, as before, in
            ``config["configurable"]`` (a build-time field there: ConfigurationError).
        checkpointer: e.g. a ``SqliteSaver`` to log every step for later retraining.
        llm: an LLMClient to use as is (overrides ``chat_model``).
    """
    base = configuration or Configuration.from_env()
    if llm is None:
        from dynakrag.llm.factory import llm_client_from_config

        llm = llm_client_from_config(base, chat_model=chat_model)
    if searcher is None:
        from dynakrag.data.demo import demo_searcher

        searcher = LazySearcher(lambda: demo_searcher(base))
    resources = Resources(searcher=searcher, llm=llm)
    fixed_policy = resolve_policy(policy) if policy is not None else None
    # Resolve the configured policy now so a bad name fails before any index or model loads.
    policies: dict[str, Policy] = {} if fixed_policy else {base.policy: resolve_policy(base.policy)}

    def run_configuration(
        runtime: Runtime[RunSettings] | None, config: RunnableConfig | None
    ) -> Configuration:
        context = runtime.context if runtime is not None else None
        return base.for_run((config or {}).get("configurable"), context)

    def prepare(
        state: InputState, runtime: Runtime[RunSettings], config: RunnableConfig
    ) -> dict[str, Any]:
        """Validate the question and initialise the state."""
        cfg = run_configuration(runtime, config)
        update: dict[str, Any] = dict(prepared_state(state.get("question"), cfg))
        # A new question on the same thread starts with a fresh budget and history: bypass the
        # reducers that would otherwise add to the previous run's counters.
        for name in ADDITIVE_FIELDS:
            update[name] = Overwrite(update[name])
        return update

    def controller(
        state: State, runtime: Runtime[RunSettings], config: RunnableConfig
    ) -> Command[ActionName]:
        """Validity layer, then policy: go to the chosen action, recording why."""
        cfg = run_configuration(runtime, config)
        chosen = fixed_policy
        if chosen is None:
            chosen = policies.get(cfg.policy) or policies.setdefault(
                cfg.policy, resolve_policy(cfg.policy)
            )
        decision = decide(state, chosen, cfg)
        return Command(goto=decision["next_action"], update=decision)

    def make_node(
        name: str,
    ) -> Callable[[State, Runtime[RunSettings], RunnableConfig], StateUpdate]:
        def node(
            state: State, runtime: Runtime[RunSettings], config: RunnableConfig
        ) -> StateUpdate:
            return run_action(name, state, resources, run_configuration(runtime, config))

        node.__name__ = name
        node.__doc__ = ACTION_FUNCTIONS[name].__doc__
        return node

    builder = StateGraph(State, context_schema=RunSettings, input_schema=InputState)
    builder.add_node("prepare", prepare)
    builder.add_node("controller", controller)
    for name in ACTIONS:
        builder.add_node(name, make_node(name))
    builder.add_edge(START, "prepare")
    builder.add_edge("prepare", "controller")
    for name in RETURNS_TO_CONTROLLER:
        builder.add_edge(name, "controller")
    for name, successor in FIXED_EDGES.items():
        builder.add_edge(name, successor)
    for name in ENDS_RUN:
        builder.add_edge(name, END)
    graph = builder.compile(checkpointer=checkpointer, name="dynakrag")
    return graph.with_config(recursion_limit=RECURSION_LIMIT)

"""Run any action from any state through the compiled graph itself, for collection and replay.

The compiled graph runs ``prepare -> controller -> action -> controller -> ...``; collection
needs to branch (try every valid action from one state) and ``dynakrag replay`` asks what the
controller would have reached with another choice. Both go through LangGraph's checkpoints
(:class:`Branches`, one in-memory checkpointed thread per question):

* a state is a checkpoint: the states :class:`Branches` returns carry theirs, and any other
  state (a logged one) is first written with ``update_state(values, as_node=...)`` as the
  output of the node that produced it (its last action, or ``prepare``), so the graph's own
  edges say what runs next;
* the controller's choice of an action is ``update_state(Command(goto=action, update=decision),
  as_node="controller")``, the decision computed by the graph's own
  :func:`dynakrag.graph.controller.decide` with the action forced (:func:`decision_update`);
* the action then runs by ``invoke`` from that checkpoint, up to the next controller step
  (interrupt), so LangGraph's reducers merge its update; an action a fixed edge forces
  (``stop_answer`` right after ``compress_answer_evidence``) runs with no decision in between.

Replaying the actions of a finished run with the same policy, searcher and model gives the
graph's final state exactly. Inputs are never mutated.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Mapping, Sequence

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command, Overwrite

from dynakrag.actions.common import Resources
from dynakrag.configuration import Configuration
from dynakrag.graph.builder import build_graph
from dynakrag.graph.controller import decide
from dynakrag.graph.nodes import FIXED_EDGES, fixed_successor, prepared_state
from dynakrag.graph.validity import actions_left, invalid_reasons
from dynakrag.policy.base import Policy
from dynakrag.state import ACTIONS, ADDITIVE_FIELDS, Decision, State

__all__ = ["Branches", "decision_update", "initial_state", "replay", "step", "what_if"]


def initial_state(question: str, cfg: Configuration) -> State:
    """The state after the graph's ``prepare`` node (the question validated and cleaned)."""
    return prepared_state(question, cfg)


class _Forced(Policy):
    """Scores like ``inner`` (zeros without one) but always chooses ``action``; withholds
    what ``inner`` withholds, and ``withheld``."""

    def __init__(
        self, inner: Policy | None, action: str, withheld: frozenset[str] = frozenset()
    ) -> None:
        self.inner = inner
        self.action = action
        self.name = inner.name if inner is not None else "replay"
        self.withheld = withheld | (inner.withheld if inner is not None else frozenset())

    def value(self, state: State, actions: Sequence[str], cfg: Configuration) -> dict[str, float]:
        if self.inner is None:
            return {a: 0.0 for a in actions}
        return self.inner.value(state, actions, cfg)

    def scores(self, state: State, actions: Sequence[str], cfg: Configuration) -> dict[str, float]:
        if self.inner is None:
            return {a: 0.0 for a in actions}
        return self.inner.scores(state, actions, cfg)

    def pick(
        self, state: State, actions: Sequence[str], scores: Mapping[str, float], cfg: Configuration
    ) -> str:
        return self.action


def decision_update(
    state: State,
    action: str,
    cfg: Configuration,
    policy: Policy | None = None,
    withheld: frozenset[str] = frozenset(),
) -> Decision:
    """What the controller writes when it chooses ``action`` (ValueError if it is not valid).

    ``policy`` only provides the recorded ``policy_scores`` (zeros without one); A(s) is that
    of a policy withholding ``withheld`` (and what ``policy`` withholds).
    """
    forced = _Forced(policy, action, withheld)
    reasons = invalid_reasons(state, cfg, withheld=forced.withheld)
    valid = actions_left(state, reasons)
    if action not in valid:
        why = f"blocked by {reasons[action]}; " if action in reasons else ""
        raise ValueError(f"action {action!r} is not valid here ({why}valid: {valid})")
    return decide(state, forced, cfg)


_PAUSES = ("controller", *FIXED_EDGES.values())
"""Nodes a branch stops before: the next decision, or the action a fixed edge forces."""


class Branches:
    """One question's states as checkpoints of an in-memory LangGraph thread, and any valid
    action run from any of them (see the module docstring).

    ``policy`` only provides the recorded ``policy_scores`` of the forced decisions (zeros
    without one); the graph's controller never chooses here. ``withheld``: actions the
    branches' policy never takes (an ablation; see :attr:`Policy.withheld`).
    """

    def __init__(
        self,
        resources: Resources,
        cfg: Configuration,
        *,
        policy: Policy | None = None,
        withheld: Iterable[str] = (),
    ) -> None:
        self.cfg = cfg
        self.policy = policy
        self.withheld = frozenset(withheld)
        self.graph = build_graph(
            resources.searcher,
            llm=resources.llm,
            # Never asked: every decision here is forced (decision_update).
            policy=policy or _Forced(None, "stop_answer"),
            configuration=cfg,
            checkpointer=InMemorySaver(),
        )
        self._threads = itertools.count()
        # id(state) -> (state, its checkpoint); the state is kept so its id stays its own.
        self._checkpoints: dict[int, tuple[State, RunnableConfig]] = {}

    def start(self, question: str) -> State:
        """The state after ``prepare`` (UserInputError for an unusable question)."""
        thread = self._new_thread()
        self.graph.invoke({"question": question}, thread, interrupt_before=["controller"])
        return self._latest(thread)

    def step(self, state: State, action: str) -> State:
        """The state after the controller chooses ``action`` in ``state`` and its node runs
        (ValueError when the action is unknown or not valid there)."""
        if action not in ACTIONS:
            raise ValueError(f"unknown action {action!r}")
        at = self._checkpoint(state)
        forced = fixed_successor(state)
        if forced is None:
            decision = decision_update(state, action, self.cfg, self.policy, self.withheld)
            at = self.graph.update_state(
                at, Command(goto=action, update=decision), as_node="controller"
            )
        elif action != forced:
            previous = state["trace"][-1]["action"]
            raise ValueError(f"only {forced} may follow {previous}")
        self.graph.invoke(None, at, interrupt_before=list(_PAUSES))
        return self._latest(at)

    def finish(self, state: State) -> State:
        """The final state of the run from ``state`` on, the graph's controller choosing with
        the policy the branches were made with."""
        at = self._checkpoint(state)
        self.graph.invoke(None, at)
        return self._latest(at)

    def _new_thread(self) -> RunnableConfig:
        return {"configurable": {"thread_id": f"branch-{next(self._threads)}"}}

    def _latest(self, config: RunnableConfig) -> State:
        """The newest checkpoint of ``config``'s thread (the one just written), remembered."""
        thread = {"configurable": {"thread_id": config["configurable"]["thread_id"]}}
        snapshot = self.graph.get_state(thread)
        state: State = snapshot.values
        self._checkpoints[id(state)] = (state, snapshot.config)
        return state

    def _checkpoint(self, state: State) -> RunnableConfig:
        """The checkpoint of ``state``: its own, or ``state`` written on a new thread as the
        output of the node that produced it."""
        known = self._checkpoints.get(id(state))
        if known is not None and known[0] is state:
            return known[1]
        trace = state.get("trace") or []
        writer = trace[-1].get("action", "prepare") if trace else "prepare"
        values = {
            key: Overwrite(value) if key in ADDITIVE_FIELDS else value
            for key, value in state.items()
        }
        return self.graph.update_state(self._new_thread(), values, as_node=writer)


def step(
    state: State,
    action: str,
    resources: Resources,
    cfg: Configuration,
    *,
    policy: Policy | None = None,
    withheld: Iterable[str] = (),
) -> State:
    """The state after the controller chooses ``action`` and its node runs (one
    :class:`Branches` step)."""
    return Branches(resources, cfg, policy=policy, withheld=withheld).step(state, action)


def replay(
    question: str,
    actions: Sequence[str],
    resources: Resources,
    cfg: Configuration,
    *,
    policy: Policy | None = None,
) -> State:
    """The state after running ``actions`` in order from the initial state of ``question``."""
    branches = Branches(resources, cfg, policy=policy)
    state = branches.start(question)
    for action in actions:
        state = branches.step(state, action)
    return state


def what_if(
    state: State, action: str, resources: Resources, cfg: Configuration, policy: Policy
) -> State:
    """The final state of a run had the controller chosen ``action`` in ``state`` (a logged
    decision point) and ``policy`` chosen from there on (``dynakrag replay``)."""
    branches = Branches(resources, cfg, policy=policy)
    return branches.finish(branches.step(state, action))

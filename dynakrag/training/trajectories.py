"""Log DynaKRAG runs to SQLite with LangGraph's ``SqliteSaver`` and read them back as transitions.

Logging: pass ``open_trajectory_log(path)`` as the ``checkpointer`` of ``build_graph`` and give
every run a ``thread_id``::

    graph = build_graph(checkpointer=open_trajectory_log("runs.sqlite"))
    graph.invoke({"question": q}, {"configurable": {"thread_id": "q1"}})

One thread per question keeps each trajectory apart; a later run on the same thread starts
afresh (``prepare`` resets the history and the counters) but shares the thread's checkpoint
history. LangGraph stores one checkpoint per super-step (``prepare``, ``controller``, each action
node) in the file; its tables belong to ``langgraph-checkpoint-sqlite`` and are read here only
through the public checkpointer and ``get_state_history`` APIs.

Reading: ``read_transitions(path)`` returns one ``Transition`` per action node that completed,
recovered from the checkpoint history of each thread (oldest first):

* ``thread_id``: the run's thread (``config["configurable"]["thread_id"]``).
* ``step``: LangGraph's super-step number (``metadata["step"]``) of the checkpoint where the
  action was about to run; increasing within a thread (also across several runs on it).
* ``state``: the graph state (``StateSnapshot.values``) just before the action ran, i.e. after
  the controller chose it: what the controller conditioned on plus its decision
  (``valid_actions``, ``invalid_reasons``, ``policy_scores``, ``next_action == action``).
  ``stop_answer`` after ``compress_answer_evidence`` follows a fixed edge with no controller
  step between: the graph records that decision with the compression node's update
  (:data:`dynakrag.graph.nodes.FIXED_EDGES`; ``valid_actions == ["stop_answer"]``, empty
  ``policy_scores``).
* ``action``: one of the seven names in ``dynakrag.state.ACTIONS``.
* ``next_state``: the state at the next decision point, i.e. just before the following action
  ran (after the next controller step), or the final state when the run ended there. So
  ``transitions[i].next_state == transitions[i + 1].state`` within one run, and a transition's
  reward can be read from the differences (``trace``, ``evidence``, counters, ``answer``).

An action that started but never completed (an error, an interrupted run) yields no transition.
The dicts are deep copies owned by the caller.
"""

from __future__ import annotations

import copy
import sqlite3
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from langchain_core.messages import BaseMessage
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.types import StateSnapshot

from dynakrag.state import ACTIONS

__all__ = ["Transition", "list_threads", "open_trajectory_log", "read_transitions"]

_ACTIONS = frozenset(ACTIONS)


@dataclass(frozen=True)
class Transition:
    """One (state, action, next_state) step of a logged run."""

    thread_id: str
    step: int
    state: dict[str, Any]
    action: str
    next_state: dict[str, Any]


def open_trajectory_log(path: str | Path) -> SqliteSaver:
    """A ``SqliteSaver`` over ``path`` (created if missing), in WAL mode, usable from any thread.

    The caller owns the connection: ``saver.conn.close()`` when done.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    # The saver serialises access with its own lock, so sharing the connection is safe.
    conn = sqlite3.connect(str(path), check_same_thread=False)
    try:
        conn.execute("PRAGMA journal_mode=WAL")
        saver = SqliteSaver(conn)
        saver.setup()
    except BaseException:
        conn.close()
        raise
    return saver


def list_threads(path: str | Path) -> list[str]:
    """The thread ids logged in ``path``, in the order their first checkpoint was written."""
    saver = _open_existing(path)
    try:
        return _threads(saver)
    finally:
        saver.conn.close()


def read_transitions(path: str | Path, thread_id: str | None = None) -> list[Transition]:
    """The transitions logged in ``path``: of ``thread_id``, or of every thread (thread by thread).

    Each thread's transitions are ordered by step. See the module docstring for the schema.
    """
    saver = _open_existing(path)
    try:
        graph = _history_reader(saver)
        threads = [thread_id] if thread_id is not None else _threads(saver)
        transitions: list[Transition] = []
        for thread in threads:
            history = graph.get_state_history({"configurable": {"thread_id": thread}})
            transitions.extend(_thread_transitions(thread, history))
        return transitions
    finally:
        saver.conn.close()


def _open_existing(path: str | Path) -> SqliteSaver:
    if not Path(path).is_file():
        raise FileNotFoundError(f"no trajectory log at {path}")
    return open_trajectory_log(path)


def _threads(saver: SqliteSaver) -> list[str]:
    first_seen: dict[str, str] = {}
    for item in saver.list(None):
        configurable = item.config["configurable"]
        if configurable.get("checkpoint_ns", ""):
            continue  # subgraph checkpoints belong to their parent's thread
        thread = str(configurable["thread_id"])
        checkpoint_id = str(configurable["checkpoint_id"])
        if thread not in first_seen or checkpoint_id < first_seen[thread]:
            first_seen[thread] = checkpoint_id
    # Checkpoint ids are time-ordered (uuid6), so they order the threads by creation.
    return sorted(first_seen, key=lambda thread: (first_seen[thread], thread))


def _history_reader(saver: SqliteSaver) -> Any:
    """The DynaKRAG graph topology attached to ``saver``; it only reads, never runs a node."""
    from dynakrag.configuration import Configuration
    from dynakrag.graph.builder import build_graph
    from dynakrag.llm.fake import ScriptedChatModel

    def refuse(messages: list[BaseMessage]) -> str:
        raise RuntimeError("the trajectory reader never calls a model")

    return build_graph(
        _NoSearcher(),
        ScriptedChatModel(respond=refuse),
        configuration=Configuration(),
        checkpointer=saver,
    )


class _NoSearcher:
    def search(self, query: str, k: int) -> list[Any]:
        raise RuntimeError("the trajectory reader never searches")


def _checkpoint_id(snapshot: StateSnapshot) -> str:
    return str(snapshot.config["configurable"]["checkpoint_id"])


def _parent_id(snapshot: StateSnapshot) -> str | None:
    if not snapshot.parent_config:
        return None
    return snapshot.parent_config["configurable"].get("checkpoint_id")


def _pending_action(snapshot: StateSnapshot) -> str | None:
    """The action node this checkpoint is about to run, if it is a decision point."""
    if len(snapshot.next) == 1 and snapshot.next[0] in _ACTIONS:
        return snapshot.next[0]
    return None


def _thread_transitions(thread: str, history: Iterable[StateSnapshot]) -> list[Transition]:
    """Pair every decision checkpoint with the next decision (or final) checkpoint below it."""
    snapshots = sorted(history, key=_checkpoint_id)  # oldest first
    children: dict[str, StateSnapshot] = {}
    for snapshot in snapshots:
        parent = _parent_id(snapshot)
        # A child written by the graph loop continues the run; an "input" child starts a new
        # one, and "update"/"fork" children are edits. The first loop child is the run's path.
        if parent is not None and (snapshot.metadata or {}).get("source") == "loop":
            children.setdefault(parent, snapshot)

    transitions: list[Transition] = []
    for snapshot in snapshots:
        action = _pending_action(snapshot)
        if action is None:
            continue
        current = children.get(_checkpoint_id(snapshot))
        if current is None:
            continue  # the action never completed
        while current.next and _pending_action(current) is None:
            child = children.get(_checkpoint_id(current))
            if child is None:
                break  # the run stopped before the next decision: keep the last state seen
            current = child
        transitions.append(
            Transition(
                thread_id=thread,
                step=int((snapshot.metadata or {}).get("step", -1)),
                state=copy.deepcopy(dict(snapshot.values)),
                action=action,
                next_state=copy.deepcopy(dict(current.values)),
            )
        )
    transitions.sort(key=lambda t: t.step)
    return transitions

"""Trajectory logs: DynaKRAG runs checkpointed by LangGraph, read back as transitions, plus the
labelled training records computed from them, in one SQLite file or one PostgreSQL database.

A log *target* is a SQLite file path or a ``postgresql://user@host:port/db`` URL
(:func:`dynakrag.postgres.connections.is_postgres_url`); every function here accepts either.

Logging: pass ``open_trajectory_log(target)`` as the ``checkpointer`` of ``build_graph`` and
give every run its own thread; :func:`run_config` makes that config (a fresh run id unless one
is given) and tags the run::

    with trajectory_log("runs.sqlite") as saver:
        graph = build_graph(checkpointer=saver)
        graph.invoke({"question": q}, run_config(command="ask"))

(Opening a log and tagging a run live in :mod:`dynakrag.graph.runlog`, below evaluation, and
are re-exported here.) The run id is the thread id (``dynakrag ask --log ... --json`` prints
it as ``run_id``). One thread per question keeps each trajectory apart; a later run on the
same thread starts afresh (``prepare`` resets the history and the counters) but shares the
thread's checkpoint history.
LangGraph stores one checkpoint per super-step (``prepare``, ``controller``, each action node);
its tables belong to ``langgraph-checkpoint-sqlite`` / ``langgraph-checkpoint-postgres`` and are
read here only through the public checkpointer and ``get_state_history`` APIs. Run tags are
flat ``dynakrag_*`` scalars in the run config's metadata, because LangGraph copies exactly
those (str, int, float, bool values) into every checkpoint's metadata.

Reading: ``read_transitions(target)`` returns one ``Transition`` per action node that completed,
recovered from the checkpoint history of each thread (oldest first):

* ``thread_id``: the run's thread (``config["configurable"]["thread_id"]``): its run id.
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
* ``run``: the run's tags without the prefix (``{"command": "eval", "split": "eval", ...}``;
  empty for a run logged without them).

A run's path follows the checkpoints the graph loop wrote; checkpoints written by
``update_state`` (how :mod:`dynakrag.training.export` copies a server's threads) count too, and
of several children of one checkpoint the first written is the run's path (a later one is an
edit). An action that started but never completed (an error, an interrupted run) yields no
transition. The dicts are deep copies owned by the caller.

Records: ``write_log_records(target, records)`` stores labelled training records (the JSON
objects of :mod:`dynakrag.training.collect`) in the table ``dynakrag_records`` of the same
database, one transaction a call, so ``dynakrag collect --log`` and its workers write there and
``dynakrag train --log`` finds everything in one place; ``read_log_records`` and
``logged_questions`` read them back. A question already in the log is not written again.
"""

from __future__ import annotations

import contextlib
import copy
import json
import sqlite3
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from langchain_core.messages import BaseMessage
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.types import StateSnapshot

from dynakrag.errors import UserInputError
from dynakrag.files import canonical_json_line, loads_json
from dynakrag.graph.runlog import (
    RUN_TAG_PREFIX,
    LogTarget,
    close_trajectory_log,
    describe_log,
    new_run_id,
    open_trajectory_log,
    run_config,
    run_tags,
    trajectory_log,
)
from dynakrag.postgres.connections import connect, is_postgres_url, retrying
from dynakrag.state import ACTIONS, State

Result = TypeVar("Result")

__all__ = [
    "RUN_TAG_PREFIX",
    "LogTarget",
    "Transition",
    "close_trajectory_log",
    "describe_log",
    "list_threads",
    "log_exists",
    "logged_questions",
    "new_run_id",
    "open_trajectory_log",
    "read_log_records",
    "read_transitions",
    "run_config",
    "tee_records_into_log",
    "trajectory_log",
    "write_log_records",
]

RECORDS_TABLE = "dynakrag_records"
_ACTIONS = frozenset(ACTIONS)
_LOOP_SOURCES = frozenset({"loop", "update", "fork"})
"""Checkpoint sources that continue a run (an ``input`` checkpoint starts a new one)."""


@dataclass(frozen=True)
class Transition:
    """One (state, action, next_state) step of a logged run."""

    thread_id: str
    step: int
    state: State
    action: str
    next_state: State
    run: dict[str, Any] = field(default_factory=dict)


# --------------------------------------------------------------------------------------------
# Reading runs back


def log_exists(target: LogTarget) -> bool:
    """Whether there is a log to read at ``target`` (a database URL always counts)."""
    return is_postgres_url(target) or Path(target).is_file()


def list_threads(target: LogTarget) -> list[str]:
    """The thread (run) ids logged in ``target``, in the order their first checkpoint was
    written."""
    with _existing(target) as saver:
        return _threads(saver)


def read_transitions(target: LogTarget, thread_id: str | None = None) -> list[Transition]:
    """The transitions logged in ``target``: of ``thread_id``, or of every thread (thread by
    thread). Each thread's transitions are ordered by step. See the module docstring."""
    with _existing(target) as saver:
        graph = history_reader(saver)
        threads = [thread_id] if thread_id is not None else _threads(saver)
        transitions: list[Transition] = []
        for thread in threads:
            history = graph.get_state_history({"configurable": {"thread_id": thread}})
            transitions.extend(_thread_transitions(thread, history))
        return transitions


@contextlib.contextmanager
def _existing(target: LogTarget) -> Iterator[BaseCheckpointSaver]:
    if not log_exists(target):
        raise FileNotFoundError(f"no trajectory log at {target}")
    with trajectory_log(target) as saver:
        yield saver


def _threads(saver: BaseCheckpointSaver) -> list[str]:
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


def history_reader(saver: BaseCheckpointSaver) -> Any:
    """The DynaKRAG graph topology attached to ``saver``, to read (or, for an export, write
    with ``update_state``) its checkpoints; it never runs a node."""
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
        # A child written by the graph loop (or copied in by update_state) continues the run;
        # an "input" child starts a new one. The first such child is the run's path.
        if parent is not None and (snapshot.metadata or {}).get("source") in _LOOP_SOURCES:
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
                run=run_tags(snapshot.metadata),
            )
        )
    transitions.sort(key=lambda t: t.step)
    return transitions


# --------------------------------------------------------------------------------------------
# Labelled records in the same database

_SQLITE_TABLE = f"""
CREATE TABLE IF NOT EXISTS {RECORDS_TABLE} (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    dataset TEXT NOT NULL,
    example_id TEXT NOT NULL,
    record TEXT NOT NULL
)"""
_POSTGRES_TABLE = f"""
CREATE TABLE IF NOT EXISTS {RECORDS_TABLE} (
    id BIGSERIAL PRIMARY KEY,
    dataset TEXT NOT NULL,
    example_id TEXT NOT NULL,
    record TEXT NOT NULL
)"""
_RECORDS_SETUP_LOCK = 0x64796E7265637264  # "dynrecrd": the advisory lock key of the records set-up
_INDEX = (
    f"CREATE INDEX IF NOT EXISTS {RECORDS_TABLE}_question ON {RECORDS_TABLE} (dataset, example_id)"
)


@contextlib.contextmanager
def _records_db(target: LogTarget, *, create: bool) -> Iterator[tuple[Any, str]]:
    """(connection with the records table, parameter placeholder) for ``target``."""
    if is_postgres_url(target):
        with contextlib.closing(connect(str(target))) as conn:
            if create:
                # Two first writers at once would race through CREATE TABLE IF NOT EXISTS
                # (a unique violation on its row type): they take turns.
                with conn.transaction():
                    conn.execute("SELECT pg_advisory_xact_lock(%s)", (_RECORDS_SETUP_LOCK,))
                    conn.execute(_POSTGRES_TABLE)
                    conn.execute(_INDEX)
            yield conn, "%s"
        return
    path = Path(target)
    if create:
        path.parent.mkdir(parents=True, exist_ok=True)
    elif not path.is_file():
        raise FileNotFoundError(f"no trajectory log at {target}")
    # Concurrent writers (workers) wait for each other's transactions instead of failing.
    conn = sqlite3.connect(str(path), timeout=60.0, isolation_level=None)
    try:
        conn.execute("PRAGMA journal_mode=WAL")
        if create:
            conn.execute(_SQLITE_TABLE)
            conn.execute(_INDEX)
        yield conn, "?"
    except sqlite3.DatabaseError as exc:
        raise UserInputError(f"{path} is not a trajectory log (SQLite): {exc}") from None
    finally:
        conn.close()


def _select(target: LogTarget, query: str) -> list[Any]:
    """The rows of ``query`` on the records table (none when the log has no such table)."""
    with _records_db(target, create=False) as (conn, ph):
        if not _has_records_table(conn, ph):
            return []
        return conn.execute(query).fetchall()


def _has_records_table(conn: Any, placeholder: str) -> bool:
    if placeholder == "?":
        row = conn.execute(
            "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (RECORDS_TABLE,)
        ).fetchone()
    else:
        row = conn.execute("SELECT to_regclass(%s) AS name", (RECORDS_TABLE,)).fetchone()
        row = row if row and row["name"] else None
    return row is not None


def write_log_records(target: LogTarget, records: Iterable[Mapping[str, Any]]) -> int:
    """Append labelled ``records`` to the log's records table in ONE transaction (all or
    none: call it once per finished question); the number written.

    Idempotent per question: records of a question the log already holds are not written
    again (0 for them), so a question redone after a crash, a worker whose task Dask reran,
    or a write retried after its acknowledgement was lost adds no duplicates. Writers of the
    same question are serialised (SQLite's write lock; a PostgreSQL advisory lock on the
    question)."""
    rows = [(*_question_of(r), canonical_json_line(r)) for r in records]
    if not rows:
        return 0
    return _retried_on_postgres(
        target, lambda: _insert_new_questions(target, rows), what="writing records to"
    )


def _retried_on_postgres(
    target: LogTarget, operation: Callable[[], Result], *, what: str
) -> Result:
    """``operation()``; on a PostgreSQL log, redone after a restart or a dropped connection
    (every records statement is idempotent: see :func:`write_log_records`)."""
    if is_postgres_url(target):
        return retrying(operation, what=f"{what} {describe_log(target)}")
    return operation()


def _insert_new_questions(target: LogTarget, rows: list[tuple[str, str, str]]) -> int:
    """``rows`` (dataset, example_id, record text) of the questions not yet in the log, in
    one transaction; how many were written."""
    questions = sorted({(dataset, example_id) for dataset, example_id, _ in rows})
    with _records_db(target, create=True) as (conn, ph):
        values = ", ".join([ph] * 3)
        sql = f"INSERT INTO {RECORDS_TABLE} (dataset, example_id, record) VALUES ({values})"
        exists = f"SELECT 1 FROM {RECORDS_TABLE} WHERE dataset = {ph} AND example_id = {ph} LIMIT 1"
        if ph == "?":
            conn.execute("BEGIN IMMEDIATE")
            try:
                logged = {q for q in questions if conn.execute(exists, q).fetchone()}
                fresh = [row for row in rows if row[:2] not in logged]
                conn.executemany(sql, fresh)
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")
        else:
            lock = "SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))"
            with conn.transaction(), conn.cursor() as cursor:
                for question in questions:  # sorted: two writers never wait for each other
                    cursor.execute(lock, (json.dumps(question),))
                logged = {q for q in questions if cursor.execute(exists, q).fetchone()}
                fresh = [row for row in rows if row[:2] not in logged]
                cursor.executemany(sql, fresh)
    return len(fresh)


def read_log_records(target: LogTarget) -> list[dict[str, Any]]:
    """The labelled records stored in the log, in the order they were written (none if the
    log has no records table)."""
    rows = _retried_on_postgres(
        target,
        lambda: _select(target, f"SELECT id, record FROM {RECORDS_TABLE} ORDER BY id"),
        what="reading records from",
    )
    records: list[dict[str, Any]] = []
    for row in rows:
        row_id, text = (row["id"], row["record"]) if isinstance(row, Mapping) else row
        try:
            record = loads_json(text)
        except ValueError as exc:
            raise UserInputError(
                f"{describe_log(target)}: record {row_id} is not valid JSON ({exc})"
            ) from None
        if not isinstance(record, dict):
            raise UserInputError(f"{describe_log(target)}: record {row_id} is not a JSON object")
        records.append(record)
    return records


def logged_questions(target: LogTarget) -> set[tuple[str, str]]:
    """``(dataset, example_id)`` of every question with records in the log (to resume a
    collection without redoing finished questions)."""
    if not log_exists(target):
        return set()
    rows = _retried_on_postgres(
        target,
        lambda: _select(target, f"SELECT DISTINCT dataset, example_id FROM {RECORDS_TABLE}"),
        what="reading logged questions from",
    )
    return {
        (row["dataset"], row["example_id"]) if isinstance(row, Mapping) else (row[0], row[1])
        for row in rows
    }


def tee_records_into_log(
    records: Iterable[Mapping[str, Any]], target: LogTarget
) -> Iterator[Mapping[str, Any]]:
    """Pass ``records`` on while writing them into the log, each question's records in one
    transaction (collection yields question by question), so an interrupted collection leaves
    only whole questions in the log. A question is written before its last record is passed on
    when the records say how many it has (``question_records``), else when the next question
    starts."""
    pending: list[Mapping[str, Any]] = []
    for record in records:
        if pending and _question_of(record) != _question_of(pending[-1]):
            write_log_records(target, pending)
            pending = []
        pending.append(record)
        if record.get("question_records") == len(pending):
            write_log_records(target, pending)
            pending = []
        yield record
    write_log_records(target, pending)


def _question_of(record: Mapping[str, Any]) -> tuple[str, str]:
    return (str(record.get("dataset", "")), str(record.get("example_id", "")))

"""Copy runs made on a LangGraph server (the dev server behind Studio) into a trajectory log.

``export_threads(client, target)`` reads each thread's checkpoint history through
``langgraph_sdk``'s sync client (``threads.search``, ``threads.get_history``) and writes it into
the log (:mod:`dynakrag.training.trajectories`) as checkpoints of a thread with the same id, so
``read_transitions``, ``dynakrag train --log`` and everything else read exported runs exactly
like runs logged by ``dynakrag ask --log``.

How: the server's checkpoints form a tree (parent links, oldest first by id). Each checkpoint
written by one of the graph's nodes (its parent's ``next`` names the node) is replayed into the
local log with ``update_state(values, as_node=node)`` on the local copy of its parent, so
LangGraph itself recomputes what runs next (the controller's ``Command``, the fixed edges)
and the local history has the same decision points, states and branching. Values of reduced
fields are written whole (``Overwrite``), not added. Input checkpoints and the step that only
starts the graph carry no node output and are folded into their parent. Re-exporting a thread
replaces its local copy, so an export can be repeated as a server thread grows.
"""

from __future__ import annotations

import typing
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from langgraph.types import Command, Overwrite

from dynakrag.errors import DynakragError, UserInputError
from dynakrag.state import ACTIONS, ADDITIVE_FIELDS, State
from dynakrag.training.trajectories import LogTarget, history_reader, trajectory_log

__all__ = ["ExportSummary", "ServerUnavailableError", "export_from_server", "export_threads"]

PAGE_SIZE = 100
"""Threads and checkpoints fetched per request."""
_NODES = frozenset({"prepare", "controller", *ACTIONS})
_STATE_KEYS = frozenset(typing.get_type_hints(State))


@dataclass
class ExportSummary:
    """What an export copied."""

    threads: list[str] = field(default_factory=list)
    checkpoints: int = 0
    empty: list[str] = field(default_factory=list)
    """Threads with no node output (never run, or only an input): nothing was written."""

    def format(self, target: str) -> str:
        """One line for the command line."""
        line = f"Exported {_count(len(self.threads), 'thread')} ({self.checkpoints} checkpoints)"
        line += f" to {target}"
        if self.empty:
            line += f"; {_count(len(self.empty), 'thread')} without graph steps skipped"
        return line


def _count(number: int, noun: str) -> str:
    return f"{number} {noun}{'' if number == 1 else 's'}"


def export_from_server(
    url: str,
    target: LogTarget,
    *,
    thread_ids: Sequence[str] | None = None,
    api_key: str | None = None,
) -> ExportSummary:
    """:func:`export_threads` from the LangGraph server at ``url`` (``langgraph_sdk``);
    :class:`ServerUnavailableError` when the server cannot be reached or refuses a request."""
    try:
        import httpx
        from langgraph_sdk import get_sync_client
    except ImportError:
        raise UserInputError(
            "exporting needs langgraph-sdk: pip install 'dynakrag[studio]'"
        ) from None
    client = get_sync_client(url=url, api_key=api_key)
    try:
        return export_threads(client, target, thread_ids=thread_ids)
    except httpx.HTTPError as exc:
        raise ServerUnavailableError(
            f"cannot read threads from {url}: {type(exc).__name__}: {exc}"
        ) from None


class ServerUnavailableError(DynakragError):
    """The LangGraph server could not be reached or refused a request."""


def export_threads(
    client: Any, target: LogTarget, *, thread_ids: Sequence[str] | None = None
) -> ExportSummary:
    """Copy ``thread_ids`` (default: every thread on the server) into the log at ``target``.

    ``client`` is a ``langgraph_sdk`` sync client, or anything with its
    ``threads.search(limit=, offset=)`` and ``threads.get_history(thread_id, limit=, before=)``.
    """
    summary = ExportSummary()
    ids = list(thread_ids) if thread_ids is not None else list(_server_threads(client))
    with trajectory_log(target) as saver:
        graph = history_reader(saver)
        for thread in ids:
            states = _history(client, thread)
            saver.delete_thread(thread)  # a repeated export replaces the local copy
            written = _write_thread(graph, thread, states)
            if written:
                summary.threads.append(thread)
                summary.checkpoints += written
            else:
                summary.empty.append(thread)
    return summary


def _server_threads(client: Any) -> Iterator[str]:
    offset = 0
    while True:
        page = client.threads.search(limit=PAGE_SIZE, offset=offset)
        for thread in page:
            yield str(thread["thread_id"])
        if len(page) < PAGE_SIZE:
            return
        offset += len(page)


def _history(client: Any, thread: str) -> list[Mapping[str, Any]]:
    """Every checkpoint of ``thread`` on the server, oldest first."""
    states: list[Mapping[str, Any]] = []
    before: Any = None
    while True:
        page = client.threads.get_history(thread, limit=PAGE_SIZE, before=before)
        states.extend(page)
        if len(page) < PAGE_SIZE:
            break
        before = page[-1]["checkpoint"]  # newest first: continue below the oldest seen
    unique = {_checkpoint_id(state): state for state in states}
    return [unique[key] for key in sorted(unique)]


def _checkpoint_id(state: Mapping[str, Any]) -> str:
    return str((state.get("checkpoint") or {}).get("checkpoint_id") or "")


def _parent_id(state: Mapping[str, Any]) -> str | None:
    parent = state.get("parent_checkpoint") or {}
    return parent.get("checkpoint_id")


def _writer(parent: Mapping[str, Any] | None) -> str | None:
    """The graph node whose output a child of ``parent`` holds (None: no node ran)."""
    if parent is None:
        return None
    following = list(parent.get("next") or [])
    if len(following) == 1 and following[0] in _NODES:
        return following[0]
    return None


def _local_values(values: Mapping[str, Any]) -> dict[str, Any]:
    """A server state as a whole-state update: reduced fields overwritten, not added to."""
    return {
        key: Overwrite(value) if key in ADDITIVE_FIELDS else value
        for key, value in values.items()
        if key in _STATE_KEYS
    }


def _write_thread(graph: Any, thread: str, states: Iterable[Mapping[str, Any]]) -> int:
    """Replay one server thread's checkpoints into the local log; the number written."""
    by_id = {_checkpoint_id(state): state for state in states}
    local: dict[str, str | None] = {}  # server checkpoint id -> local checkpoint id
    written = 0
    for checkpoint_id, state in by_id.items():
        parent_id = _parent_id(state)
        parent = by_id.get(parent_id) if parent_id else None
        local_parent = local.get(parent_id) if parent_id else None
        writer = _writer(parent)
        values = state.get("values")
        if writer is None or not isinstance(values, Mapping):
            local[checkpoint_id] = local_parent  # no node output: fold into the parent
            continue
        configurable: dict[str, Any] = {"thread_id": thread, "checkpoint_ns": ""}
        if local_parent is not None:
            configurable["checkpoint_id"] = local_parent
        update: Any = _local_values(values)
        if writer == "controller":
            # The controller routes by Command: the copy names where it went, as the run did.
            update = Command(goto=values["next_action"], update=update)
        config = graph.update_state({"configurable": configurable}, update, as_node=writer)
        local[checkpoint_id] = config["configurable"]["checkpoint_id"]
        written += 1
    return written

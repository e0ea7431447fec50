"""Where a run's checkpoints go: a trajectory log (a SQLite file or a PostgreSQL database),
and the config that gives a run its id and tags.

This sits with the graph, below evaluation and training, because every layer that runs the
graph can log it (``ask``/``demo``, the evaluation's ``dynakrag`` method, Python callers);
:mod:`dynakrag.training.trajectories` reads the logs back and documents their contents.

* :func:`open_trajectory_log` gives the checkpointer for ``build_graph(checkpointer=...)``.
* :func:`run_config` gives a run's ``RunnableConfig``: its thread is the run id, and its tags
  go into the config's metadata as flat ``dynakrag_<name>`` scalars, because LangGraph copies
  exactly such values (str, int, float, bool) into the metadata of every checkpoint it writes.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import uuid
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.sqlite import SqliteSaver

from dynakrag.errors import UserInputError
from dynakrag.postgres.checkpoints import postgres_saver
from dynakrag.postgres.connections import is_postgres_url, redact

__all__ = [
    "RUN_TAG_PREFIX",
    "LogTarget",
    "close_trajectory_log",
    "describe_log",
    "new_run_id",
    "open_trajectory_log",
    "run_config",
    "run_tags",
    "trajectory_log",
]

LogTarget = str | os.PathLike[str]
"""A SQLite file path or a ``postgresql://`` URL."""
RUN_TAG_PREFIX = "dynakrag_"
"""Prefix of the run tags in a run config's metadata (and so in every checkpoint's)."""


def describe_log(target: LogTarget) -> str:
    """``target`` for messages (a URL without its password)."""
    return redact(target) if is_postgres_url(target) else str(target)


def open_trajectory_log(target: LogTarget) -> BaseCheckpointSaver:
    """A checkpointer over ``target``: a ``SqliteSaver`` (file created if missing, WAL mode,
    usable from any thread) or a ``PostgresSaver`` over a connection pool (tables set up).

    The caller closes it with :func:`close_trajectory_log` (or ``saver.conn.close()``), or
    uses :func:`trajectory_log`.
    """
    if is_postgres_url(target):
        return postgres_saver(str(target))
    path = Path(target)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        # The saver serialises access with its own lock, so sharing the connection is safe.
        conn = sqlite3.connect(str(path), check_same_thread=False)
    except (OSError, sqlite3.Error) as exc:
        raise UserInputError(f"cannot open the trajectory log {path}: {exc}") from None
    try:
        conn.execute("PRAGMA journal_mode=WAL")
        saver = SqliteSaver(conn)
        saver.setup()
    except sqlite3.OperationalError as exc:  # a folder, a read-only place
        conn.close()
        raise UserInputError(f"cannot open the trajectory log {path}: {exc}") from None
    except sqlite3.DatabaseError as exc:
        conn.close()
        raise UserInputError(f"{path} is not a trajectory log (SQLite): {exc}") from None
    except BaseException:
        conn.close()
        raise
    return saver


def close_trajectory_log(saver: Any) -> None:
    """Close what :func:`open_trajectory_log` opened (the SQLite connection or the pool)."""
    saver.conn.close()


@contextlib.contextmanager
def trajectory_log(target: LogTarget) -> Iterator[BaseCheckpointSaver]:
    """:func:`open_trajectory_log` for a ``with`` block, closed at its end."""
    saver = open_trajectory_log(target)
    try:
        yield saver
    finally:
        close_trajectory_log(saver)


def new_run_id() -> str:
    """A fresh run id (a UUID, as LangGraph servers name their threads)."""
    return str(uuid.uuid4())


def run_config(run_id: str | None = None, **tags: str | int | float | bool | None) -> dict:
    """The ``RunnableConfig`` of one logged run: thread ``run_id`` (a fresh one by default) and
    the ``tags`` as ``dynakrag_<name>`` metadata (None values left out), e.g.
    ``run_config(command="eval", dataset="hotpotqa", split="eval")``."""
    metadata: dict[str, Any] = {}
    for name, value in tags.items():
        if value is None:
            continue
        if not isinstance(value, str | int | float | bool):
            raise TypeError(f"run tag {name} must be a str, int, float or bool")
        metadata[f"{RUN_TAG_PREFIX}{name}"] = value
    return {"configurable": {"thread_id": run_id or new_run_id()}, "metadata": metadata}


def run_tags(metadata: Mapping[str, Any] | None) -> dict[str, Any]:
    """The run tags in a checkpoint's metadata, without their prefix."""
    return {
        key.removeprefix(RUN_TAG_PREFIX): value
        for key, value in (metadata or {}).items()
        if key.startswith(RUN_TAG_PREFIX)
    }

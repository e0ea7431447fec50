"""Where a run's checkpoints go: a trajectory log (a SQLite file or a PostgreSQL database),
and the config that gives a run its id and tags.

This sits with the graph, below evaluation and training, because every layer that runs the
graph can log it (``ask``/``demo``, the evaluation's ``dynakrag`` method, Python callers);
:mod:`dynakrag.training.trajectories` reads the logs back and documents their contents.

* :func:`open_trajectory_log` gives the checkpointer for ``build_graph(checkpointer=...)``.
  A SQLite log that cannot be written mid-run (a full disk, a read-only file) gives a
  :class:`LogWriteError`, one line naming the file and why, instead of SQLite's bare error.
* :func:`run_config` gives a run's ``RunnableConfig``: its thread is the run id, and its tags
  go into the config's metadata as flat ``dynakrag_<name>`` scalars, because LangGraph copies
  exactly such values (str, int, float, bool) into the metadata of every checkpoint it writes.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import threading
import uuid
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    BaseCheckpointSaver,
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
)
from langgraph.checkpoint.sqlite import SqliteSaver

from dynakrag.errors import DynakragError, UserInputError
from dynakrag.postgres.checkpoints import postgres_saver
from dynakrag.postgres.connections import is_postgres_url, redact

__all__ = [
    "RUN_TAG_PREFIX",
    "LogTarget",
    "LogWriteError",
    "close_trajectory_log",
    "describe_log",
    "log_write_error",
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


class LogWriteError(DynakragError):
    """A trajectory log could not be written mid-run (a full disk, a read-only file or
    folder). The runs written before stay readable; this run's steps are logged up to the
    failure."""


def _sqlite_reason(exc: sqlite3.Error) -> str:
    """Why SQLite could not write, for a user: its error class in words, then its message."""
    name = getattr(exc, "sqlite_errorname", "") or ""
    if name.startswith("SQLITE_FULL"):
        return f"the disk is full ({exc})"
    if name.startswith("SQLITE_READONLY"):
        return f"the file or its folder is read-only ({exc})"
    if name.startswith("SQLITE_IOERR"):  # EFBIG (a file-size limit) and EIO land here
        return f"a write failed: a full disk, a file-size limit or a failing device ({exc})"
    return str(exc)


class _SqliteLog(SqliteSaver):
    """A ``SqliteSaver`` whose failed writes are a :class:`LogWriteError` naming the file:
    raised (LangGraph re-raises it when the run ends), or with ``defer_write_errors`` kept as
    ``write_error`` while nothing more is written, so that the run still reaches its answer
    and the log stays a clean prefix of it."""

    def __init__(self, conn: sqlite3.Connection, path: Path, *, defer_write_errors: bool) -> None:
        super().__init__(conn)
        self.path = path
        self.defer_write_errors = defer_write_errors
        self.write_error: LogWriteError | None = None
        self._error_lock = threading.Lock()  # writes come from LangGraph's background threads

    def _failed(self, exc: sqlite3.Error) -> None:
        error = LogWriteError(
            f"cannot write the trajectory log {self.path}: {_sqlite_reason(exc)}; the runs "
            "logged before stay readable, this run is logged only up to the failure"
        )
        if not self.defer_write_errors:
            raise error from exc
        with self._error_lock:
            self.write_error = self.write_error or error

    def put(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        if self.write_error is None:
            try:
                return super().put(config, checkpoint, metadata, new_versions)
            except sqlite3.Error as exc:
                self._failed(exc)
        # Not written: the config SqliteSaver.put would have returned, for the run to go on.
        configurable = config["configurable"]
        return {
            "configurable": {
                "thread_id": configurable["thread_id"],
                "checkpoint_ns": configurable.get("checkpoint_ns", ""),
                "checkpoint_id": checkpoint["id"],
            }
        }

    def put_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        if self.write_error is not None:
            return
        try:
            super().put_writes(config, writes, task_id, task_path)
        except sqlite3.Error as exc:
            self._failed(exc)


def log_write_error(saver: Any) -> LogWriteError | None:
    """The write failure a saver opened with ``defer_write_errors`` kept (None: none, or a
    PostgreSQL log, whose writes are retried and fail by raising)."""
    return getattr(saver, "write_error", None)


def describe_log(target: LogTarget) -> str:
    """``target`` for messages (a URL without its password)."""
    return redact(target) if is_postgres_url(target) else str(target)


def open_trajectory_log(
    target: LogTarget, *, defer_write_errors: bool = False
) -> BaseCheckpointSaver:
    """A checkpointer over ``target``: a ``SqliteSaver`` (file created if missing, WAL mode,
    usable from any thread) or a ``PostgresSaver`` over a connection pool (tables set up).

    A SQLite write that fails (a full disk, a read-only file) is a :class:`LogWriteError`,
    which LangGraph raises when the run ends, without its final state. With
    ``defer_write_errors`` it is kept instead (:func:`log_write_error`) and nothing more is
    written, for a caller that shows the run's answer and then raises it (``dynakrag ask``).

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
        saver = _SqliteLog(conn, path, defer_write_errors=defer_write_errors)
        saver.setup()
    except sqlite3.OperationalError as exc:  # a folder, a read-only place, a full disk
        conn.close()
        raise UserInputError(
            f"cannot open the trajectory log {path}: {_sqlite_reason(exc)}"
        ) from None
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
def trajectory_log(
    target: LogTarget, *, defer_write_errors: bool = False
) -> Iterator[BaseCheckpointSaver]:
    """:func:`open_trajectory_log` for a ``with`` block, closed at its end."""
    saver = open_trajectory_log(target, defer_write_errors=defer_write_errors)
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

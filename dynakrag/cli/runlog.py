"""The ``--log`` option of the commands that run the graph: every step into a trajectory log.

A log is a SQLite file or a ``postgresql://`` URL (:mod:`dynakrag.graph.runlog`); each run is
one thread whose id is the run id, and ``dynakrag train --log`` learns from the log.

A log that cannot be opened fails the command before any model is loaded (exit 2). One that
stops taking writes mid-run (a full disk, a read-only file) does not cost the user the answer
they waited for: the run goes on unlogged from there, ``ask`` and ``demo`` print its answer,
then the one-line :class:`~dynakrag.graph.runlog.LogWriteError` (which log, and why), and exit
1, because the log they asked for is incomplete (:func:`raise_log_write_error`).
"""

from __future__ import annotations

import argparse
import contextlib
from collections.abc import Iterator
from typing import Any

LOG_HELP = (
    "log every step to this trajectory log, a SQLite file or postgresql://user@host:port/db "
    "(for dynakrag train --log)"
)


def add_log_option(parser: argparse.ArgumentParser, description: str = LOG_HELP) -> None:
    """Add ``--log FILE|URL`` to ``parser``."""
    parser.add_argument("--log", metavar="FILE|URL", help=description)


@contextlib.contextmanager
def logged_run(target: str | None, **tags: Any) -> Iterator[tuple[Any, dict[str, Any]]]:
    """``(checkpointer, config)`` of one run: the log's checkpointer (None without ``target``)
    and a config with a fresh run id (``config["configurable"]["thread_id"]``) and ``tags``.
    Open it before loading models, so a bad target fails first. A write that fails mid-run
    is kept for :func:`raise_log_write_error`, after the answer is shown."""
    from dynakrag.graph.runlog import run_config, trajectory_log

    config = run_config(**tags)
    if target is None:
        yield None, config
        return
    with trajectory_log(target, defer_write_errors=True) as saver:
        yield saver, config


def run_id(config: dict[str, Any]) -> str:
    """The run id of a config from :func:`logged_run`."""
    return str(config["configurable"]["thread_id"])


def raise_log_write_error(checkpointer: Any) -> None:
    """Raise the write failure the :func:`logged_run` log kept, if any (after the answer)."""
    from dynakrag.graph.runlog import log_write_error

    error = log_write_error(checkpointer)
    if error is not None:
        raise error

"""``dynakrag export``: copy the runs of a LangGraph server (Studio's dev server) into a log.

``dynakrag export --server URL --log LOG [--thread ID ...]`` reads every thread (or the ones
named) through ``langgraph_sdk`` and writes their checkpoints into the trajectory log ``LOG``
(a SQLite file or a ``postgresql://`` URL), the format ``ask --log`` writes and
``train --log`` reads (:mod:`dynakrag.training.export`). Thread ids are kept as run ids.
"""

from __future__ import annotations

import argparse
from typing import Any

from dynakrag.cli.arguments import EXIT_OK


def add_parser(subparsers: Any) -> None:
    """Add the ``export`` command to ``subparsers`` (from ``add_subparsers``)."""
    parser = subparsers.add_parser(
        "export", help="copy a LangGraph server's threads into a trajectory log"
    )
    parser.add_argument(
        "--server", required=True, help="the server's URL, e.g. http://127.0.0.1:2024"
    )
    parser.add_argument(
        "--log", required=True, help="trajectory log to write: a SQLite file or postgresql://..."
    )
    parser.add_argument(
        "--thread", action="append", dest="threads", help="only this thread (repeatable)"
    )
    parser.set_defaults(handler=run_export)


def run_export(args: argparse.Namespace) -> int:
    """Export the server's threads and say how many were written (exit 1 when the server
    cannot be reached)."""
    from dynakrag.training.export import export_from_server
    from dynakrag.training.trajectories import describe_log

    summary = export_from_server(args.server, args.log, thread_ids=args.threads)
    print(summary.format(describe_log(args.log)))
    return EXIT_OK

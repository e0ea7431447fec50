"""``dynakrag pack-records``: collected records as they ship beside a policy.

``dynakrag pack-records RECORDS... --out FILE.jsonl.gz`` writes the finished questions of
collection records files (:func:`~dynakrag.training.records.pack_records`): without the data's
text (no ``state``, no ``answer``: the stored features stay, so they train a policy of their
feature schema), each line once, sorted, gzip-compressed with no name or time, so the same
records give the same bytes. ``make default-policy`` ships its records this way; the packed
file is a ``--resume-from`` point and a ``train --trajectories`` input like any other.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from dynakrag.cli.arguments import EXIT_OK


def add_parser(subparsers: Any) -> None:
    """Add the ``pack-records`` command to ``subparsers`` (from ``add_subparsers``)."""
    parser = subparsers.add_parser(
        "pack-records",
        help="collected records without the data's text, sorted and gzipped, to ship",
    )
    parser.add_argument(
        "records", type=Path, nargs="+", help="records files from collect (.gz too)"
    )
    parser.add_argument("--out", type=Path, required=True, help="the packed file (.jsonl.gz)")
    parser.set_defaults(handler=run_pack)


def run_pack(args: argparse.Namespace) -> int:
    from dynakrag.training.records import pack_records

    records, questions = pack_records(args.records, args.out)
    print(
        f"Packed {records} records of {questions} finished questions into {args.out}",
        file=sys.stderr,
    )
    return EXIT_OK

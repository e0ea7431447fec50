"""The entry point of the ``dynakrag`` console script.

Exit codes: 0 with an answer, 2 with one line for a user error (empty question, missing or
unreadable corpus or index, bad option), 1 with one line when a model cannot be reached.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
import traceback
from collections.abc import Sequence

from dynakrag.cli.arguments import EXIT_FAILURE, EXIT_INTERRUPTED, EXIT_USAGE
from dynakrag.cli.parser import build_parser
from dynakrag.errors import DynakragError, UserInputError


def main(argv: Sequence[str] | None = None) -> int:
    """Parse ``argv``, run the command's handler and return its exit code."""
    logging.basicConfig(
        level=logging.DEBUG if os.environ.get("DYNAKRAG_DEBUG") else logging.ERROR,
        format="dynakrag: %(levelname)s: %(message)s",
    )
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(AttributeError, ValueError):  # not a TextIOWrapper
            stream.reconfigure(errors="replace")  # type: ignore[union-attr]
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # --help, --version and usage errors: return the code
        return int(exc.code or 0)
    try:
        return args.handler(args)
    except UserInputError as exc:
        _fail(str(exc))
        return EXIT_USAGE
    except DynakragError as exc:
        _fail(str(exc))
        return EXIT_FAILURE
    except KeyboardInterrupt:
        _fail("interrupted")
        return EXIT_INTERRUPTED
    except Exception as exc:  # keep the CLI to one line; the trace is one variable away
        if os.environ.get("DYNAKRAG_DEBUG"):
            traceback.print_exc()
        _fail(f"unexpected error: {type(exc).__name__}: {exc} (set DYNAKRAG_DEBUG=1 for details)")
        return EXIT_FAILURE


def _fail(message: str) -> None:
    print(f"dynakrag: error: {' '.join(message.split())}", file=sys.stderr)

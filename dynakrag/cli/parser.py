"""The ``dynakrag`` argument parser: every command module adds its own sub-command.

Each command module has ``add_parser(subparsers)``, which adds the command's options and sets
``handler`` (a function of the parsed arguments returning the exit code) as a default.
"""

from __future__ import annotations

import argparse

from dynakrag.cli import (
    ask,
    calibrate,
    collect,
    demo,
    export,
    index,
    pack,
    replay,
    selector,
    train,
)
from dynakrag.cli import eval as eval_command  # plain `eval` would shadow the builtin
from dynakrag.cli.arguments import Parser

DESCRIPTION = "The ``dynakrag`` command line."

# The order of ``dynakrag --help``.
COMMANDS = (
    demo,
    ask,
    index,
    eval_command,
    collect,
    pack,
    train,
    calibrate,
    export,
    replay,
    selector,
)


def build_parser() -> argparse.ArgumentParser:
    """The parser of every command; ``parse_args`` gives a namespace with ``handler``."""
    parser = Parser(prog="dynakrag", description=DESCRIPTION)
    parser.add_argument("--version", action="version", version=_version())
    subparsers = parser.add_subparsers(dest="command", required=True, parser_class=Parser)
    for command in COMMANDS:
        command.add_parser(subparsers)
    return parser


def _version() -> str:
    from dynakrag import __version__

    return f"dynakrag {__version__}"

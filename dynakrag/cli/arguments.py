"""Argument types and the parser class shared by every ``dynakrag`` command."""

from __future__ import annotations

import argparse
from typing import NoReturn

EXIT_OK, EXIT_FAILURE, EXIT_USAGE = 0, 1, 2


class Parser(argparse.ArgumentParser):
    """argparse that reports a usage error in one line (exit 2)."""

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message} (see --help)\n")


def positive_int(text: str) -> int:
    """argparse type: an integer >= 1."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    return value

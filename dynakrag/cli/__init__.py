"""The ``dynakrag`` command line: one module per command, argument types in one place."""

from dynakrag.cli.main import main

__all__ = ["main"]

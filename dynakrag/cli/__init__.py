"""The ``dynakrag`` command line: one module per command, argument types in one place.

``main`` (:mod:`dynakrag.cli.main`) is the console script; :mod:`dynakrag.cli.parser` wires each
command module's ``add_parser``.
"""

from dynakrag.cli.main import main

__all__ = ["main"]

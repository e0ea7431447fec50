"""Fixtures of the tests of logged runs and retraining."""

from __future__ import annotations

from tests.unit.retrain.support import world

__all__ = ["world"]  # the corpus of the user's own world, with the fake model (support.py)

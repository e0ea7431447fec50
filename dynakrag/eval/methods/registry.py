"""The evaluation methods by name: the one list ``--method`` chooses from.

A new baseline is one new :class:`~dynakrag.eval.methods.base.Method` subclass in its own
module, listed here.
"""

from __future__ import annotations

from typing import Any

from dynakrag.errors import UserInputError
from dynakrag.eval.methods.base import Method
from dynakrag.eval.methods.decompose import DecomposeMethod
from dynakrag.eval.methods.dsrag import (
    DsragMethod,
    EPQDRerankOriginalQMethod,
    EPQDRerankSubQMethod,
    NonQDRerankMethod,
)
from dynakrag.eval.methods.dynakrag import DynakragMethod
from dynakrag.eval.methods.ircot import IRCoTMethod
from dynakrag.eval.methods.naive import NaiveMethod

__all__ = ["METHODS", "get_method"]

METHODS: dict[str, type[Method]] = {
    cls.name: cls
    for cls in (
        NaiveMethod,
        IRCoTMethod,
        DecomposeMethod,
        DynakragMethod,
        # DS-RAG (Kwon et al. 2025) and its paper's baselines.
        DsragMethod,
        NonQDRerankMethod,
        EPQDRerankSubQMethod,
        EPQDRerankOriginalQMethod,
    )
}
"""Methods by name (each class's ``name``), in the order ``--help`` lists them."""


def get_method(name: str | Method, **options: Any) -> Method:
    """A method by name (``options`` go to its constructor; None values are left out)."""
    if isinstance(name, Method):
        return name
    cls = METHODS.get(name)
    if cls is None:
        raise UserInputError(f"unknown method {name!r}; choose one of {', '.join(METHODS)}")
    kwargs = {key: value for key, value in options.items() if value is not None}
    try:
        return cls(**kwargs)
    except TypeError as exc:
        raise UserInputError(f"method {name!r}: {exc}") from None

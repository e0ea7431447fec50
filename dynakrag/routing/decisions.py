"""What a router decided, and the log both routers keep of it.

A router has tiers (named, cheapest first), measures a signal of the query, turns it into a
difficulty level with :class:`~dynakrag.routing.thresholds.PercentileThresholds` and runs tier
``min(level, tiers - 1)``, or a fixed tier (the always-cheapest / always-heaviest baselines).
:class:`RoutingDecision` records one such choice for either router; :class:`DecisionLog`
keeps them (thread-safe, bounded) and counts tiers.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any, Literal

from dynakrag.errors import ConfigurationError

__all__ = ["DecisionLog", "RouterKind", "RoutingDecision", "check_tier_names", "tier_index"]

RouterKind = Literal["retriever", "generator"]


@dataclass(frozen=True)
class RoutingDecision:
    """One routing decision.

    ``router`` says which router made it; ``query`` is what was routed (the search query or the
    question). ``signal``/``value`` are the measured signal and its value (``None`` when nothing
    was measured: a fixed tier, or a backend without log-probs), ``level`` the difficulty level
    the thresholds gave it. ``fixed`` marks a fixed-tier baseline; ``reason`` says in words why
    this tier ran; ``seconds`` is the latency of the routed call (the tier's search, or the
    measurement plus the answer); ``sub_queries`` are the parts a decomposing tier searched.
    """

    router: RouterKind
    query: str
    tier: int
    tier_name: str
    signal: str | None = None
    value: float | None = None
    level: int | None = None
    fixed: bool = False
    reason: str = ""
    seconds: float = 0.0
    sub_queries: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        """JSON-friendly form."""
        data = asdict(self)
        data["sub_queries"] = list(self.sub_queries)
        return data


def check_tier_names(names: Sequence[str]) -> None:
    """Raise :class:`ConfigurationError` unless ``names`` are unique non-empty strings."""
    if not names:
        raise ConfigurationError("a router needs at least one tier")
    if len(set(names)) != len(names) or not all(isinstance(n, str) and n for n in names):
        raise ConfigurationError(f"tier names must be unique non-empty strings, got {list(names)}")


def tier_index(names: Sequence[str], tier: int | str) -> int:
    """The index of ``tier`` among ``names``: a name, or an index (negative counts from the
    end); :class:`ConfigurationError` when there is no such tier."""
    if isinstance(tier, str):
        if tier not in names:
            raise ConfigurationError(f"unknown tier {tier!r}; tiers: {list(names)}")
        return list(names).index(tier)
    if isinstance(tier, bool) or not isinstance(tier, int):
        raise ConfigurationError(f"tier must be an index or a name, got {tier!r}")
    if not -len(names) <= tier < len(names):
        raise ConfigurationError(f"tier {tier} out of range for {len(names)} tiers")
    return tier % len(names)


class DecisionLog:
    """The decisions of one router, oldest first (the ``max_log`` most recent are kept).

    Thread-safe; :attr:`last` is the calling thread's latest decision, so concurrent searches
    or answers each see their own.
    """

    def __init__(self, tier_names: Sequence[str], *, max_log: int = 100_000) -> None:
        self.tier_names = tuple(tier_names)
        self.max_log = max_log
        self._decisions: list[RoutingDecision] = []
        self._lock = threading.Lock()
        self._local = threading.local()

    def record(self, decision: RoutingDecision) -> None:
        """Append ``decision`` (and make it the calling thread's :attr:`last`)."""
        self._local.last = decision
        with self._lock:
            self._decisions.append(decision)
            if len(self._decisions) > self.max_log:
                del self._decisions[: len(self._decisions) - self.max_log]

    @property
    def last(self) -> RoutingDecision | None:
        """The latest decision made in the calling thread (None before the first)."""
        return getattr(self._local, "last", None)

    @property
    def decisions(self) -> tuple[RoutingDecision, ...]:
        """Every logged decision, oldest first."""
        with self._lock:
            return tuple(self._decisions)

    def tier_counts(self) -> dict[str, int]:
        """How many logged decisions chose each tier (every tier listed, cheapest first)."""
        counts = Counter(decision.tier_name for decision in self.decisions)
        return {name: counts.get(name, 0) for name in self.tier_names}

    def clear(self) -> None:
        """Forget every decision (the :attr:`last` of every thread too)."""
        with self._lock:
            self._decisions.clear()
        self._local = threading.local()

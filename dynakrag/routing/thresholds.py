"""Percentile thresholds: the cut points that turn a difficulty signal into a tier.

DRAG-QPP routes on two signals, and both are cut the same way: measure the signal on training
questions, take percentiles of the values, and count how many cut points a new value lies on
the "harder" side of. That count is the query's difficulty level (0 = easiest), and level ``L``
runs tier ``min(L, tiers - 1)``.

``avg_idf`` (retriever routing, :mod:`dynakrag.routing.retriever`)
    Cut at the 25th/50th/75th percentiles; a *lower* average IDF (commoner words) is harder.
``context_perplexity`` / ``answer_perplexity`` (generator routing,
:mod:`dynakrag.routing.generator`)
    Cut at the median by default; a *higher* perplexity is harder.

:class:`PercentileThresholds` holds the cut points with what they were fitted on and is saved
as JSON (format :data:`THRESHOLDS_FORMAT`).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np

from dynakrag.errors import ConfigurationError, UserInputError
from dynakrag.files import read_json, write_json

__all__ = ["THRESHOLDS_FORMAT", "Harder", "PercentileThresholds"]

THRESHOLDS_FORMAT = "dynakrag.percentile_thresholds/1"

Harder = Literal["higher", "lower"]
"""Which side of a cut point is the harder one: ``"higher"`` values (perplexity) or
``"lower"`` ones (average IDF)."""


@dataclass(frozen=True)
class PercentileThresholds:
    """Ascending cut points of one signal, the percentiles they sit at, and their provenance.

    ``signal`` names what was measured (``"avg_idf"``, ``"context_perplexity"``, ...);
    ``harder`` says which direction is harder; ``n`` and ``source`` say what the percentiles
    were taken over; ``details`` holds signal-specific facts about the fit (for ``avg_idf``:
    ``corpus_size``, ``vocabulary_size``, ``oov_rate``).
    """

    signal: str
    values: tuple[float, ...]
    percentiles: tuple[float, ...]
    harder: Harder
    n: int = 0
    source: str = ""
    details: Mapping[str, float] = field(default_factory=dict)

    def __post_init__(self) -> None:
        try:
            values = tuple(float(v) for v in self.values)
            percentiles = tuple(float(p) for p in self.percentiles)
        except (TypeError, ValueError) as exc:
            raise ConfigurationError(f"thresholds must be numbers: {exc}") from None
        object.__setattr__(self, "values", values)
        object.__setattr__(self, "percentiles", percentiles)
        object.__setattr__(self, "details", dict(self.details))
        if not isinstance(self.signal, str) or not self.signal:
            raise ConfigurationError(f"a threshold signal needs a name, got {self.signal!r}")
        if not values or not all(math.isfinite(v) for v in values):
            raise ConfigurationError(f"{self.signal} thresholds must be finite numbers: {values}")
        if list(values) != sorted(values):
            raise ConfigurationError(f"{self.signal} thresholds must be ascending: {values}")
        if len(percentiles) != len(values):
            raise ConfigurationError(
                f"{self.signal}: {len(values)} thresholds but {len(percentiles)} percentiles"
            )
        if self.harder not in ("higher", "lower"):
            raise ConfigurationError(f"harder must be 'higher' or 'lower', got {self.harder!r}")

    @classmethod
    def fit(
        cls,
        values: Iterable[float],
        *,
        signal: str,
        harder: Harder,
        percentiles: Sequence[float],
        source: str = "",
        details: Mapping[str, float] | None = None,
    ) -> PercentileThresholds:
        """The ``percentiles`` (numpy's linear interpolation) of training ``values``."""
        measured = np.asarray([float(v) for v in values], dtype=np.float64)
        if measured.size == 0:
            raise UserInputError(f"cannot fit {signal} thresholds on zero measurements")
        points = sorted(float(p) for p in percentiles)
        if not points or not all(0.0 <= p <= 100.0 for p in points):
            raise UserInputError(f"percentiles must lie in [0, 100], got {list(percentiles)}")
        cuts = tuple(float(np.percentile(measured, p)) for p in points)
        return cls(signal, cuts, tuple(points), harder, int(measured.size), source, details or {})

    def level(self, value: float) -> int:
        """How many cut points ``value`` lies on the harder side of (0 = easiest).

        A value equal to a cut point counts as the easier side: with ``harder="higher"`` a
        perplexity at the median stays light; with ``harder="lower"`` an avg IDF at p75 is
        level 0.
        """
        if self.harder == "higher":
            return sum(value > cut for cut in self.values)
        return sum(value < cut for cut in self.values)

    @property
    def levels(self) -> int:
        """How many difficulty levels the cut points define (one more than there are cuts)."""
        return len(self.values) + 1

    def at(self, percentile: float) -> float:
        """The cut point fitted at ``percentile`` (e.g. ``at(75)``)."""
        try:
            return self.values[self.percentiles.index(float(percentile))]
        except ValueError:
            raise ConfigurationError(
                f"no {self.signal} threshold at percentile {percentile}; have {self.percentiles}"
            ) from None

    # --- persistence ----------------------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        """JSON-friendly form (with a ``format`` tag)."""
        return {
            "format": THRESHOLDS_FORMAT,
            "signal": self.signal,
            "values": list(self.values),
            "percentiles": list(self.percentiles),
            "harder": self.harder,
            "n": self.n,
            "source": self.source,
            "details": dict(self.details),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> PercentileThresholds:
        """Inverse of :meth:`to_dict`; raises :class:`ConfigurationError` on a bad dict."""
        if not isinstance(data, Mapping) or data.get("format") != THRESHOLDS_FORMAT:
            raise ConfigurationError(f"not a thresholds object ({THRESHOLDS_FORMAT})")
        try:
            return cls(
                signal=str(data["signal"]),
                values=tuple(data["values"]),
                percentiles=tuple(data["percentiles"]),
                harder=data["harder"],
                n=int(data.get("n", 0)),
                source=str(data.get("source", "")),
                details={str(k): float(v) for k, v in dict(data.get("details") or {}).items()},
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise ConfigurationError(f"invalid thresholds: {exc}") from exc

    def save(self, path: str | Path) -> Path:
        """Write the thresholds as JSON (atomically)."""
        return write_json(Path(path).expanduser(), self.to_dict())

    @classmethod
    def load(cls, path: str | Path) -> PercentileThresholds:
        """Read thresholds written by :meth:`save`."""
        source = Path(path).expanduser()
        try:
            data = read_json(source, max_bytes=1 << 20)
        except (OSError, ValueError) as exc:
            raise ConfigurationError(f"cannot read thresholds from {source}: {exc}") from exc
        return cls.from_dict(data)

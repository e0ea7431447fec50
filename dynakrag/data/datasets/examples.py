"""The one schema every dataset's rows become: :class:`QAExample`."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from dynakrag.errors import UserInputError
from dynakrag.retrieval.passage import Passage


class FrozenMeta(Mapping[str, Any]):
    """A read-only mapping (unlike ``MappingProxyType`` it pickles and deep-copies)."""

    __slots__ = ("_data",)

    def __init__(self, data: Mapping[str, Any] | Iterable[tuple[str, Any]] = ()) -> None:
        self._data: dict[str, Any] = dict(data)

    def __getitem__(self, key: str) -> Any:
        return self._data[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)

    def __repr__(self) -> str:
        return f"FrozenMeta({self._data!r})"


@dataclass(frozen=True)
class QAExample:
    """One question with its gold answers and gold evidence.

    ``support`` holds gold passage ids; ``passages`` the question's own candidate paragraphs
    (the distractor setting; empty for DS-RAG, which retrieves over :func:`dsrag_corpus`).
    ``row`` is the 0-based row in the source file ``meta["source"]`` (relative to
    :func:`data_dir`). ``meta`` is read-only; keys depend on the dataset (``type``, ``level``,
    ``hops``, ``supporting_facts``, ``decomposition``, ``gold_groups``, ...).
    """

    id: str
    question: str
    answers: tuple[str, ...]
    support: tuple[str, ...]
    passages: tuple[Passage, ...] = field(repr=False)
    dataset: str
    row: int
    split: str
    meta: Mapping[str, Any] = field(default_factory=FrozenMeta, compare=False, repr=False)

    def __post_init__(self) -> None:
        if not isinstance(self.meta, FrozenMeta):
            object.__setattr__(self, "meta", FrozenMeta(self.meta))

    @property
    def gold_sets(self) -> tuple[frozenset[str], ...]:
        """One set of interchangeable passage ids per gold item (pass this to the metrics).

        DS-RAG: one group per ``gt_doc`` sentence (every chunk holding a copy of it); other
        datasets: one singleton per ``support`` id.
        """
        groups = self.meta.get("gold_groups")
        if groups is not None:
            return tuple(frozenset(group) for group in groups)
        return tuple(frozenset((pid,)) for pid in self.support)


def require_train_split(split: str, purpose: str) -> None:
    """Refuse any split but ``train`` for ``purpose`` (what fits on the rows, e.g.
    "calibration fits the policy"): eval rows are for reporting only."""
    if split != "train":
        raise UserInputError(
            f"{purpose}: only --split train may be used (eval rows are for reporting only)"
        )

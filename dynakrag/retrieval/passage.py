"""The unit of retrieval: one passage of a corpus, and the ``passages.jsonl`` file of an index."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from dynakrag.errors import CorpusError


@dataclass(frozen=True)
class Passage:
    """One retrievable passage.

    ``parent_id`` names the source document a chunk was cut from (``None`` when the passage is
    a whole document, e.g. a jsonl row), so callers can group or de-duplicate chunks.
    """

    id: str
    title: str
    text: str
    parent_id: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-serialisable form (the on-disk format of ``passages.jsonl``)."""
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Passage:
        """Inverse of :meth:`to_dict`; raises ``KeyError``/``TypeError`` on a malformed dict."""
        parent = data.get("parent_id")
        fields = (data["id"], data.get("title", ""), data["text"])
        if not all(isinstance(value, str) for value in fields) or not (
            parent is None or isinstance(parent, str)
        ):
            raise TypeError("passage fields id, title, text, parent_id must be strings")
        return cls(id=fields[0], title=fields[1], text=fields[2], parent_id=parent)


class IndexedPassages:
    """The passages of an index, in index order (``_passages``, set by the index)."""

    _passages: tuple[Passage, ...]

    def __len__(self) -> int:
        return len(self._passages)

    @property
    def passages(self) -> tuple[Passage, ...]:
        """The indexed passages, in index order."""
        return self._passages


def passages_jsonl(passages: Sequence[Passage]) -> bytes:
    """The ``passages.jsonl`` bytes of an index: one sorted-key JSON object a line, UTF-8."""
    lines = [json.dumps(p.to_dict(), ensure_ascii=False, sort_keys=True) for p in passages]
    return ("\n".join(lines) + "\n").encode("utf-8")


def read_passages_jsonl(path: Path) -> list[Passage]:
    """The passages of an index's ``passages.jsonl`` (:class:`CorpusError` naming the file and
    line when it cannot be read or a line is not a passage)."""
    passages: list[Passage] = []
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise CorpusError(f"cannot read {path}: {exc}") from exc
    for lineno, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            passages.append(Passage.from_dict(json.loads(line)))
        except (
            json.JSONDecodeError,
            KeyError,
            TypeError,
            AttributeError,
            RecursionError,
        ) as exc:
            raise CorpusError(f"malformed passage in {path} line {lineno}: {exc}") from exc
    return passages

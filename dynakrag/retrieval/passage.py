"""The unit of retrieval: one passage of a corpus."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any


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

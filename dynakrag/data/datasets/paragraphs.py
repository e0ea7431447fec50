"""Wikipedia paragraphs as passages with content-addressed ids, and gold passages by title."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from typing import Any

from dynakrag.data.datasets.rows import string_field
from dynakrag.retrieval.passage import Passage


def _norm_space(text: str) -> str:
    return " ".join(text.split())


def passage_id(title: str, text: str) -> str:
    """Content-addressed id ``"{title}#{sha1(title + "\\n" + text)[:10]}"``."""
    digest = hashlib.sha1(f"{title}\n{text}".encode()).hexdigest()[:10]
    return f"{title}#{digest}"


def paragraph_passage(title: Any, body: Any, name: str) -> Passage:
    """A passage from a title and either a text or a list of sentences."""
    title = string_field(title, f"{name} title")
    if isinstance(body, list):
        text = " ".join(string_field(sentence, f"{name} sentence") for sentence in body)
    else:
        text = string_field(body, f"{name} text")
    text = _norm_space(text)
    return Passage(id=passage_id(title, text), title=title, text=text)


def unique_passages(passages: Iterable[Passage]) -> tuple[Passage, ...]:
    """Drop repeated passages (same id) within one question, keeping the first."""
    seen: dict[str, Passage] = {}
    for passage in passages:
        seen.setdefault(passage.id, passage)
    return tuple(seen.values())


def gold_by_title(passages: Sequence[Passage], titles: Sequence[str]) -> tuple[str, ...]:
    """Ids of the passages whose title is one of ``titles`` (each title must be there)."""
    by_title: dict[str, list[str]] = {}
    for passage in passages:
        by_title.setdefault(passage.title, []).append(passage.id)
    gold: list[str] = []
    for title in dict.fromkeys(titles):
        if title not in by_title:
            raise ValueError(f"supporting title {title!r} is not among the context titles")
        gold.extend(by_title[title])
    return tuple(dict.fromkeys(gold))

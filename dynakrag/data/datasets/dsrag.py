"""DS-RAG: its chunked corpus and its questions, whose gold is every chunk holding a ``gt_doc``
sentence (see :mod:`dynakrag.data.datasets` for the rule)."""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from dataclasses import dataclass, field
from functools import lru_cache
from itertools import pairwise
from pathlib import Path
from typing import Any

from dynakrag.data.datasets.examples import QAExample
from dynakrag.data.datasets.location import FileStamp, data_dir, file_stamp, require_file
from dynakrag.data.datasets.rows import (
    ROW_ERRORS,
    list_field,
    malformed_row,
    raw_rows,
    string_field,
)
from dynakrag.data.datasets.text_splitter import split_spans
from dynakrag.errors import CorpusError
from dynakrag.retrieval.passage import Passage

DSRAG_CORPUS_FILE = "dsrag/corpus/multisourceqa.txt"


@dataclass(frozen=True)
class _DsragIndex:
    text: str
    spans: tuple[tuple[int, int], ...]
    passages: tuple[Passage, ...]
    starts: tuple[int, ...]
    ends: tuple[int, ...]
    gold_cache: dict[str, tuple[str, ...]] = field(compare=False, repr=False)


def _dsrag_index(root: Path) -> _DsragIndex:
    return _dsrag_index_cached(str(root), file_stamp(root / DSRAG_CORPUS_FILE))


@lru_cache(maxsize=4)
def _dsrag_index_cached(root_str: str, stamp: FileStamp) -> _DsragIndex:
    path = require_file(Path(root_str), DSRAG_CORPUS_FILE)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise CorpusError(f"cannot read the DS-RAG corpus {path}: {exc}") from exc
    spans = tuple(split_spans(text))
    if not spans:
        raise CorpusError(f"the DS-RAG corpus is empty: {path}")
    parent = Path(DSRAG_CORPUS_FILE).name
    passages = tuple(
        Passage(id=f"multisourceqa-{n:05d}", title="", text=text[a:b], parent_id=parent)
        for n, (a, b) in enumerate(spans)
    )
    starts, ends = tuple(a for a, _ in spans), tuple(b for _, b in spans)
    if any(a > b for a, b in pairwise(starts)) or any(a > b for a, b in pairwise(ends)):
        raise AssertionError("chunk offsets must be non-decreasing")  # split_spans guarantees it
    return _DsragIndex(
        text=text,
        spans=spans,
        passages=passages,
        starts=starts,
        ends=ends,
        gold_cache={},
    )


def _chunks_for_occurrence(index: _DsragIndex, start: int, end: int) -> list[int]:
    # Chunks are ordered with non-decreasing starts and ends: the ones holding [start, end)
    # whole form one index range.
    lo, hi = bisect_left(index.ends, end), bisect_right(index.starts, start)
    if lo < hi:
        return list(range(lo, hi))
    best, best_overlap = -1, 0
    for n in range(bisect_right(index.ends, start), bisect_left(index.starts, end)):
        overlap = min(index.ends[n], end) - max(index.starts[n], start)
        if overlap > best_overlap:
            best, best_overlap = n, overlap
    return [best] if best >= 0 else []


def _dsrag_gold_group(index: _DsragIndex, sentence: str) -> tuple[str, ...]:
    """Chunk ids of every corpus occurrence of ``sentence`` (see the package doc), memoised."""
    cached = index.gold_cache.get(sentence)
    if cached is None:
        chunks: set[int] = set()
        position = index.text.find(sentence)
        while position != -1:
            chunks.update(_chunks_for_occurrence(index, position, position + len(sentence)))
            position = index.text.find(sentence, position + 1)
        cached = tuple(index.passages[n].id for n in sorted(chunks))
        index.gold_cache[sentence] = cached
    return cached


def parse_dsrag_file(path: Path, dataset: str, source: str) -> tuple[QAExample | None, ...]:
    """Every question of one DS-RAG file, its gold chunks found in the corpus beside it."""
    corpus = _dsrag_index(path.parents[2])  # <data>/dsrag/<kind>/<file>.json
    out: list[QAExample | None] = []
    for index, row in enumerate(raw_rows(path)):
        try:
            if not isinstance(row, dict):
                raise TypeError(f"expected a JSON object, got {type(row).__name__}")
            sentences = [
                string_field(s, "gt_doc").strip()
                for s in list_field(row["gt_doc"], "gt_doc")
                if s.strip()
            ]
            if not sentences:
                raise ValueError("gt_doc is empty")
            groups = []
            for sentence in sentences:
                group = _dsrag_gold_group(corpus, sentence)
                if not group:
                    raise ValueError(f"gt_doc sentence {sentence!r} is not in the corpus")
                groups.append(group)
            combination = row["combination"]
            if not isinstance(combination, dict):
                raise TypeError("field 'combination' must be an object")
            meta: dict[str, Any] = {
                "source": source,
                "attribute": string_field(combination["D"], "combination.D"),
                "people": tuple(
                    string_field(c, "C_values") for c in list_field(combination["C_values"], "C")
                ),
                "used_categories": tuple(
                    str(c) for c in list_field(combination.get("used_categories", []), "categories")
                ),
                "gt_doc": tuple(sentences),
                "gold_groups": tuple(groups),
                "hops": len(sentences),
            }
            if isinstance(combination.get("compare"), str):
                meta["compare"] = combination["compare"]
            support = tuple(dict.fromkeys(pid for group in groups for pid in group))
            out.append(
                QAExample(
                    id=f"{path.stem}-{index}",
                    question=string_field(row["question"], "question"),
                    answers=(string_field(row["gt_ans"], "gt_ans"),),
                    support=support,
                    passages=(),
                    dataset=dataset,
                    row=index,
                    split="",
                    meta=meta,
                )
            )
        except ROW_ERRORS as exc:
            raise malformed_row(exc, index, path) from exc
    return tuple(out)


def dsrag_corpus() -> list[Passage]:
    """The whole DS-RAG corpus ``multisourceqa.txt``, chunked 250/50 (ids
    ``multisourceqa-NNNNN``, ``parent_id="multisourceqa.txt"``, empty titles)."""
    return list(_dsrag_index(data_dir()).passages)

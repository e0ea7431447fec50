"""Files of the Wikipedia datasets (HotpotQA, 2WikiMultihopQA, MuSiQue): each row parsed by the
layout its keys show, since files of one dataset differ in layout."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from dynakrag.data.datasets.examples import QAExample
from dynakrag.data.datasets.hotpotqa import parse_explorer_row, parse_standard_row
from dynakrag.data.datasets.ircot import parse_ircot_row
from dynakrag.data.datasets.musique import parse_musique_row
from dynakrag.data.datasets.rows import ROW_ERRORS, malformed_row, raw_rows

# A parsed row before a split is assigned; None marks a row to skip.
_Parser = Callable[[dict[str, Any], int, str], "QAExample | None"]


def _row_parser(row: dict[str, Any], dataset: str) -> _Parser:
    """Pick the layout of one row from its keys (files of one dataset differ in layout)."""
    if dataset.startswith("dsrag"):
        raise AssertionError("DS-RAG rows are parsed by parse_dsrag_file")
    if dataset == "musique" or "paragraphs" in row:
        return parse_musique_row
    if "contexts" in row:
        return parse_ircot_row
    if "title_a" in row:
        return parse_explorer_row
    return parse_standard_row


def parse_wikipedia_file(path: Path, dataset: str, source: str) -> tuple[QAExample | None, ...]:
    """Every row of one file as a QAExample with ``split=""`` (None for skipped rows)."""
    out: list[QAExample | None] = []
    for index, row in enumerate(raw_rows(path)):
        if row is None:  # a blank line of a JSON Lines file
            out.append(None)
            continue
        try:
            if not isinstance(row, dict):
                raise TypeError(f"expected a JSON object, got {type(row).__name__}")
            example = _row_parser(row, dataset)(row, index, dataset)
        except ROW_ERRORS as exc:
            raise malformed_row(exc, index, path) from exc
        if example is not None:
            example = replace(example, meta={**example.meta, "source": source})
        out.append(example)
    return tuple(out)

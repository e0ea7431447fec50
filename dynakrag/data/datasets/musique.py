"""MuSiQue's row layout: paragraphs told apart by content, the question's decomposition kept."""

from __future__ import annotations

from typing import Any

from dynakrag.data.datasets.examples import QAExample
from dynakrag.data.datasets.paragraphs import paragraph_passage, unique_passages
from dynakrag.data.datasets.rows import list_field, string_field
from dynakrag.retrieval.passage import Passage


def parse_musique_row(row: dict[str, Any], index: int, dataset: str) -> QAExample:
    """MuSiQue: ``paragraphs`` = [{idx, title, paragraph_text, is_supporting}]; titles can
    repeat, so paragraphs are told apart by content (their ``idx`` is kept in ``meta``)."""
    passages: list[Passage] = []
    by_idx: dict[int, str] = {}
    support: list[str] = []
    for para in list_field(row["paragraphs"], "paragraphs"):
        passage = paragraph_passage(para["title"], para["paragraph_text"], "paragraphs")
        idx = para["idx"]
        if not isinstance(idx, int) or idx in by_idx:
            raise ValueError(f"paragraph idx {idx!r} is not a unique integer")
        by_idx[idx] = passage.id
        passages.append(passage)
        if para.get("is_supporting") is True:
            support.append(passage.id)
    if not support:
        raise ValueError("row has no supporting paragraph")
    steps = []
    for step in list_field(row.get("question_decomposition", []), "question_decomposition"):
        support_idx = step.get("paragraph_support_idx")
        steps.append(
            (
                string_field(step["question"], "decomposition question"),
                string_field(step["answer"], "decomposition answer"),
                by_idx.get(support_idx) if isinstance(support_idx, int) else None,
            )
        )
    aliases = [
        string_field(a, "answer_aliases")
        for a in list_field(row.get("answer_aliases", []), "aliases")
    ]
    return QAExample(
        id=string_field(row["id"], "id"),
        question=string_field(row["question"], "question"),
        answers=tuple(dict.fromkeys([string_field(row["answer"], "answer"), *aliases])),
        support=tuple(dict.fromkeys(support)),
        passages=unique_passages(passages),
        dataset=dataset,
        row=index,
        split="",
        meta={
            "hops": len(steps),
            "decomposition": tuple(steps),
            "answerable": bool(row.get("answerable", True)),
            "paragraph_idx": tuple(by_idx.items()),
        },
    )

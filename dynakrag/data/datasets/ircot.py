"""IRCoT's processed row layout (its HotpotQA dev sample)."""

from __future__ import annotations

from typing import Any

from dynakrag.data.datasets.examples import QAExample
from dynakrag.data.datasets.paragraphs import paragraph_passage, unique_passages
from dynakrag.data.datasets.rows import list_field, string_field
from dynakrag.retrieval.passage import Passage


def parse_ircot_row(row: dict[str, Any], index: int, dataset: str) -> QAExample:
    """IRCoT processed layout: ``contexts`` = [{title, paragraph_text, is_supporting}]."""
    passages: list[Passage] = []
    support: list[str] = []
    for ctx in list_field(row["contexts"], "contexts"):
        passage = paragraph_passage(ctx["title"], ctx["paragraph_text"], "contexts")
        passages.append(passage)
        if ctx.get("is_supporting") is True:
            support.append(passage.id)
    answers = [
        string_field(span, "answers_objects span")
        for obj in list_field(row["answers_objects"], "answers_objects")
        for span in list_field(obj["spans"], "spans")
    ]
    if not answers or not support:
        raise ValueError("row has no answer span or no supporting context")
    return QAExample(
        id=string_field(row["question_id"], "question_id"),
        question=string_field(row["question_text"], "question_text"),
        answers=tuple(dict.fromkeys(answers)),
        support=tuple(dict.fromkeys(support)),
        passages=unique_passages(passages),
        dataset=dataset,
        row=index,
        split="",
        meta={},
    )

"""HotpotQA's row layouts: the standard one (2WikiMultihopQA uses it too) and the explorer
sample's."""

from __future__ import annotations

from typing import Any

from dynakrag.data.datasets.examples import QAExample
from dynakrag.data.datasets.paragraphs import gold_by_title, paragraph_passage, unique_passages
from dynakrag.data.datasets.rows import list_field, string_field


def parse_standard_row(row: dict[str, Any], index: int, dataset: str) -> QAExample | None:
    """HotpotQA/2Wiki standard layout: ``context`` = [[title, [sentences]]], ``supporting_facts``
    = [[title, sentence id]]."""
    context = row.get("context")
    if dataset == "2wiki" and not context:
        return None  # splits.json: 2Wiki rows without paragraphs are unusable
    passages = unique_passages(
        paragraph_passage(t, s, "context") for t, s in list_field(context, "context")
    )
    facts = tuple(
        (string_field(title, "supporting_facts title"), int(sentence))
        for title, sentence in list_field(row["supporting_facts"], "supporting_facts")
    )
    meta: dict[str, Any] = {"supporting_facts": facts}
    for key in ("type", "level"):
        if isinstance(row.get(key), str):
            meta[key] = row[key]
    if isinstance(row.get("evidences"), list):
        meta["evidences"] = tuple(tuple(str(part) for part in ev) for ev in row["evidences"])
    return QAExample(
        id=string_field(row["_id"], "_id"),
        question=string_field(row["question"], "question"),
        answers=(string_field(row["answer"], "answer"),),
        support=gold_by_title(passages, [title for title, _ in facts]),
        passages=passages,
        dataset=dataset,
        row=index,
        split="",
        meta=meta,
    )


def parse_explorer_row(row: dict[str, Any], index: int, dataset: str) -> QAExample:
    """HotpotQA explorer sample: ``title_a``/``para_a``, ``title_b``/``para_b`` (the gold
    paragraphs), ``distractors`` = [[title, [sentences], score]]."""
    gold = [
        paragraph_passage(row["title_a"], list_field(row["para_a"], "para_a"), "para_a"),
        paragraph_passage(row["title_b"], list_field(row["para_b"], "para_b"), "para_b"),
    ]
    distractors = [
        paragraph_passage(entry[0], list_field(entry[1], "distractors"), "distractors")
        for entry in list_field(row["distractors"], "distractors")
    ]
    passages = unique_passages(sorted([*gold, *distractors], key=lambda p: (p.title, p.id)))
    facts_a, facts_b = list_field(row["supporting_facts"], "supporting_facts")
    facts = tuple((gold[0].title, int(i)) for i in facts_a) + tuple(
        (gold[1].title, int(i)) for i in facts_b
    )
    return QAExample(
        id=string_field(row["_id"], "_id"),
        question=string_field(row["question"], "question"),
        answers=(string_field(row["answer"], "answer"),),
        support=tuple(dict.fromkeys(p.id for p in gold)),
        passages=passages,
        dataset=dataset,
        row=index,
        split="",
        meta={"supporting_facts": facts},
    )

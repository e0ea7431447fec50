"""dynakrag collect's store: the --out file and log a collection resumes through."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from dynakrag.training.collection_store import CollectionStore
from dynakrag.training.records import question_groups

SETTINGS = {"seed": 13}


def records(name: str, n: int, *, counted: bool = True) -> list[dict[str, Any]]:
    extra = {"question_records": n} if counted else {}
    return [
        {"schema": "dynakrag-transition/1", "dataset": "d", "example_id": name, "action":
         "stop_answer", "label": 0.5, "continuation": 0.5, "collection": SETTINGS, **extra}
        for _ in range(n)
    ]  # fmt: skip


def test_question_groups_end_at_the_count_or_at_the_next_question() -> None:
    stream = [*records("a", 2), *records("b", 1, counted=False), *records("c", 1)]
    assert [len(group) for group in question_groups(stream)] == [2, 1, 1]


def test_a_question_is_done_once_all_its_records_are_written(tmp_path: Path) -> None:
    out = tmp_path / "records.jsonl"
    store = CollectionStore(out, None, SETTINGS)
    store.add("d:a", records("a", 2))
    with out.open("a") as file:  # a kill cut "b" short: one record of two
        file.write(out.read_text().splitlines()[0].replace('"a"', '"b"') + "\n")
    again = CollectionStore(out, None, SETTINGS)
    assert set(again.done) == {"d:a"} and len(out.read_text().splitlines()) == 2
    assert set(CollectionStore(out, None, SETTINGS, restart=True).done) == set()
    assert out.read_text() == ""

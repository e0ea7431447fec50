"""benchmarks/hop_judge.py without a model or data: a gold hop's answer over its gold passage
stands or is turned down with the judge's reason, and other names of the passage are counted."""

from __future__ import annotations

from types import SimpleNamespace

from dynakrag.retrieval.passage import Passage
from tests.benchmark_scripts import benchmark_module


def test_gold_answers_stand_and_other_names_of_the_passage_are_counted() -> None:
    passage = Passage(
        "b",
        "Ambelstead",
        "Ambelstead is a town in Vardonia. Its mayor is Tom Reyl. Ada Voss was born there.",
    )
    example = SimpleNamespace(
        id="q",
        passages=[passage],
        support=("b",),
        meta={"evidences": (("Ambelstead", "mayor", "Tom Reyl"), ("Ambelstead", "mayor", "Ilsa"))},
    )
    with benchmark_module("hop_judge") as bench:
        hops = bench.HOPS_OF["2wiki"](example)
        assert bench.hop_question(hops[0]) == "What is the mayor of Ambelstead?"
        rows = [bench.judged(hop, "Who is the mayor of Ambelstead?", passage) for hop in hops]
        summary = bench.summarise(rows)
    assert rows[0]["accepted"] and not rows[1]["accepted"]  # "Ilsa" is in no sentence
    assert rows[1]["reason"] == "no sentence states '…' about Ambelstead"
    assert rows[0]["others"] >= 2  # Vardonia, Ada Voss, ... (names, not the answer)
    assert summary["gold_accepted"] == 0.5 and summary["reasons"][0][1] == 1

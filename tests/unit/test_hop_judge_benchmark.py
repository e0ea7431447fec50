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


def test_a_later_hop_is_judged_with_its_bridge_resolved_and_names_elsewhere_counted() -> None:
    gold = Passage("g", "Tom Reyl", "Tom Reyl is a painter. Reyl won the Orlen Prize for Dusk.")
    elsewhere = Passage("x", "Ilsa Brand", "Ilsa Brand won the Orlen Prize for Night Harbour.")
    example = SimpleNamespace(
        id="q",
        passages=[gold, elsewhere],
        support=("g",),
        meta={
            "decomposition": (
                ("Who is the mayor of Ambelstead?", "Tom Reyl", "m"),
                ("What did #1 win the Orlen Prize for?", "Dusk", "g"),
            )
        },
    )
    with benchmark_module("hop_judge") as bench:
        hop = bench.HOPS_OF["musique"](example)[1]
        assert hop.bridges == ("Tom Reyl",)
        hops, index = bench.planned(hop)
        assert index == 1 and hops[1]["question"] == "What did #1 win the Orlen Prize for?"
        question = "What did the mayor of Ambelstead win the Orlen Prize for?"
        rows = {
            named: bench.judged(hop, question, gold, named, [elsewhere]) for named in (True, False)
        }
    assert rows[True]["accepted"] and rows[False]["accepted"]
    assert rows[True]["goes_on"] and rows[True]["elsewhere"] >= 1
    # Ilsa Brand's passage never names Tom Reyl: its prize-winning work stands only without
    # the rule.
    assert rows[True]["elsewhere_accepted"] == 0 < rows[False]["elsewhere_accepted"]

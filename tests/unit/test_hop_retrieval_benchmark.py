"""benchmarks/hop_retrieval.py without a model or data: gold hops are read from MuSiQue's
decomposition and 2Wiki's evidence triples, and a hop counts as found as the chain would add
its passage (candidates naming its entity first)."""

from __future__ import annotations

from types import SimpleNamespace

from dynakrag.retrieval.lexical import BM25Index
from dynakrag.retrieval.passage import Passage
from tests.benchmark_scripts import benchmark_module


def test_musique_hops_write_earlier_answers_into_later_queries() -> None:
    example = SimpleNamespace(
        id="q1",
        meta={
            "decomposition": (
                ("Van Hook Township >> located in", "Mountrail County", "p1"),
                ("#1 >> capital", "Stanley", "p2"),
            )
        },
    )
    with benchmark_module("hop_retrieval") as bench:
        hops = bench.musique_hops(example)
    assert [(h.query, h.entity, h.passage) for h in hops] == [
        ("Van Hook Township located in", "Van Hook Township", "p1"),
        ("Mountrail County capital", "Mountrail County", "p2"),
    ]


def test_a_hop_is_found_when_the_chain_would_add_its_passage() -> None:
    passages = [
        Passage("a", "Ambelwyn", "Ambelwyn is a town. Its mayor is Ada Voss."),
        Passage("b", "Ambelstead", "Ambelstead is a town. Its mayor is Tom Reyl."),
        Passage("c", "Mayors", "A mayor of a town: mayor mayor mayor Ambelstead."),
    ]
    example = SimpleNamespace(
        id="q2",
        passages=passages,
        support=("b",),
        meta={"evidences": (("Ambelstead", "mayor", "Tom Reyl"), ("Nowhere", "x", "y"))},
    )
    with benchmark_module("hop_retrieval") as bench:
        hops = bench.wiki_hops(example)
        assert [h.passage for h in hops] == ["b"]  # a subject with no paragraph is no hop
        rows = bench.hop_ranks(BM25Index.build(passages), hops, take=1)
        summary = bench.summarise(rows)
    assert rows[0]["named_first"] and rows[0]["frontier"]
    assert summary["hops"] == 1 and summary["named_first"] == 1.0

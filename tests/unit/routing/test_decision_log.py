"""The routing decision: one record and one log for both routers (the retriever's and the
generator's), bounded and kept per thread."""

from __future__ import annotations

from dynakrag.routing.decisions import DecisionLog, RoutingDecision
from dynakrag.routing.generator import GeneratorRouter
from dynakrag.routing.generator_tiers import default_generator_tiers
from dynakrag.routing.retriever import RetrieverTiers, fit_idf_thresholds
from tests.unit.routing.support import FLUENT, QUERIES, median, reader


def test_both_routers_log_the_same_decision_record(tiers: RetrieverTiers) -> None:
    searcher = tiers.routed(fit_idf_thresholds(QUERIES, tiers.bm25))
    searcher.search("Oslo Norway", 2)
    router = GeneratorRouter(default_generator_tiers(reader()), median(2.0))
    router.answer("Capital of Norway?", FLUENT)
    retrieved, generated = searcher.log.last, router.log.last
    assert isinstance(retrieved, RoutingDecision) and isinstance(generated, RoutingDecision)
    assert (retrieved.router, generated.router) == ("retriever", "generator")
    assert set(retrieved.to_dict()) == set(generated.to_dict())


def test_decision_log_is_bounded_and_per_thread() -> None:
    import threading

    log = DecisionLog(("a", "b"), max_log=2)
    for i, name in enumerate(["a", "b", "b"]):
        log.record(RoutingDecision("retriever", f"q{i}", "ab".index(name), name))
    assert [d.query for d in log.decisions] == ["q1", "q2"]
    assert log.tier_counts() == {"a": 0, "b": 2}
    seen: list[RoutingDecision | None] = []
    other = threading.Thread(target=lambda: seen.append(log.last))
    other.start()
    other.join()
    assert seen == [None]  # another thread's latest decision is its own
    assert log.last is not None and log.last.query == "q2"

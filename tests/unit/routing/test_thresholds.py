"""Percentile thresholds: query difficulty as the average IDF of a query's terms, the
thresholds fitted on it (hand-computed percentiles, levels at the boundaries, validation,
JSON, out-of-vocabulary terms, another corpus, the benchmark's train rows), and the
perplexity thresholds of the generator router. Fast: a hand-made corpus."""

from __future__ import annotations

import json
import logging
import math
from pathlib import Path

import pytest

from dynakrag.errors import ConfigurationError, UserInputError
from dynakrag.retrieval.lexical import BM25Index
from dynakrag.routing.perplexity import fit_perplexity_thresholds
from dynakrag.routing.retriever import QueryDifficulty, RoutedSearcher, fit_idf_thresholds
from dynakrag.routing.thresholds import PercentileThresholds
from tests.benchmark_scripts import benchmark_module
from tests.unit.routing.support import CORPUS, idf_thresholds, median


class TableDifficulty(QueryDifficulty):
    """A difficulty with hand-set values (for hand-computed percentiles)."""

    def __init__(self, bm25: BM25Index, table: dict[str, float]) -> None:
        super().__init__(bm25)
        self.table = table

    def average_idf(self, query: str) -> float:
        return self.table[query]


def test_avg_idf_is_higher_for_rare_term_queries(bm25: BM25Index) -> None:
    difficulty = QueryDifficulty(bm25)
    rare = difficulty("Zanzibar Quokka")
    common = difficulty("city river")
    assert rare > common > 0.0
    assert difficulty("the of and") == 0.0  # stopwords only: no index term
    assert math.isclose(difficulty("Zanzibar"), bm25.idf("zanzibar"))
    assert [t for t, _ in difficulty.term_idfs("Zanzibar city Zanzibar")] == ["zanzibar", "city"]


def test_thresholds_are_the_hand_computed_percentiles(bm25: BM25Index) -> None:
    # Four values: numpy's linear percentiles are 1 + 3q/100 -> 1.75, 2.5, 3.25.
    table = {"a": 4.0, "b": 1.0, "c": 3.0, "d": 2.0}
    th = fit_idf_thresholds(list(table), TableDifficulty(bm25, table), source="hand")
    assert th.values == (1.75, 2.5, 3.25) and th.percentiles == (25.0, 50.0, 75.0)
    assert (th.at(75), th.at(50), th.at(25)) == (3.25, 2.5, 1.75)
    assert th.signal == "avg_idf" and th.harder == "lower" and th.levels == 4
    assert th.n == 4 and th.source == "hand"
    assert th.details["corpus_size"] == len(CORPUS)
    assert th.details["vocabulary_size"] == bm25.vocabulary_size

    # Five real queries: the percentiles are exactly the 2nd, 3rd, 4th smallest avg IDF.
    queries = ["city", "city river", "capital river", "Oslo Norway", "Zanzibar Quokka"]
    values = sorted(bm25.average_idf(q) for q in queries)
    th5 = fit_idf_thresholds(queries, bm25)
    assert th5.values == pytest.approx(values[1:4])


def test_threshold_levels_at_the_boundaries() -> None:
    th = idf_thresholds(p25=1.0, p50=2.0, p75=3.0)
    assert [th.level(v) for v in (5.0, 3.0, 2.9, 2.0, 1.5, 1.0, 0.99, 0.0)] == [
        0,
        0,
        1,
        1,
        2,
        2,
        3,
        3,
    ]


def test_threshold_fit_is_deterministic_and_validated(bm25: BM25Index) -> None:
    queries = [f"{a} {b}" for a in ("Oslo", "city", "river", "Lima") for b in ("Peru", "city")]
    one = fit_idf_thresholds(queries, bm25, max_queries=4, seed=3)
    assert one == fit_idf_thresholds(queries, bm25, max_queries=4, seed=3)
    assert one.n == 4
    with pytest.raises(UserInputError):
        fit_idf_thresholds([], bm25)
    with pytest.raises(UserInputError):
        fit_idf_thresholds(queries, bm25, max_queries=0)
    with pytest.raises(ConfigurationError):
        idf_thresholds(p25=0.5, p50=2.0, p75=1.0)
    with pytest.raises(ConfigurationError):
        idf_thresholds(p25=0.5, p50=2.0, p75=math.nan)


def test_thresholds_json_round_trip(tmp_path: Path, bm25: BM25Index) -> None:
    th = fit_idf_thresholds(["Oslo", "city", "river Tiber", "Gent canals"], bm25, source="x/train")
    path = th.save(tmp_path / "sub" / "idf.json")
    data = json.loads(path.read_text())
    assert data["format"] == "dynakrag.percentile_thresholds/1"
    assert data["signal"] == "avg_idf" and data["details"]["corpus_size"] == len(CORPUS)
    assert PercentileThresholds.load(path) == th
    path.write_text("{not json")
    with pytest.raises(ConfigurationError):
        PercentileThresholds.load(path)
    with pytest.raises(ConfigurationError):
        PercentileThresholds.from_dict({**data, "format": "other"})
    with pytest.raises(ConfigurationError):
        PercentileThresholds.from_dict({**data, "values": [1, "x", 2]})
    with pytest.raises(ConfigurationError):
        PercentileThresholds.load(tmp_path / "missing.json")


def test_oov_rate_is_recorded_and_warned(bm25: BM25Index, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="dynakrag.routing.retriever"):
        known = fit_idf_thresholds(["Oslo city", "Lima river"], bm25)
    assert known.details["oov_rate"] == 0.0 and caplog.text == ""
    with caplog.at_level(logging.WARNING, logger="dynakrag.routing.retriever"):
        unseen = fit_idf_thresholds(["Oslo Xanadu", "Lima Atlantis"], bm25)
    assert unseen.details["oov_rate"] == 0.5
    assert "absent from the corpus" in caplog.text


def test_benchmark_fits_idf_thresholds_on_train_rows_only(monkeypatch: pytest.MonkeyPatch) -> None:
    from dynakrag.data.datasets import QAExample

    asked: list[str] = []

    def fake_load(dataset: str, split: str, limit: int | None = None) -> list[QAExample]:
        asked.append(split)
        rows = [("Oslo Norway", CORPUS[2]), ("Lima Peru", CORPUS[3]), ("city", CORPUS[0])]
        return [
            QAExample(f"q{i}", q, ("a",), (p.id,), (p,), dataset, i, split)
            for i, (q, p) in enumerate(rows)
        ]

    with benchmark_module("routing") as benchmark:
        monkeypatch.setattr(benchmark, "load_examples", fake_load)
        own = benchmark.train_idf_thresholds("toy", limit=3, seed=13)
    # Indexed on the train rows' own paragraphs: every question term is in that corpus.
    assert own.source == "toy/train" and own.n == 3
    assert own.details["corpus_size"] == 3 and own.details["oov_rate"] == 0.0
    assert asked == ["train"]


def test_thresholds_warn_on_another_corpus(
    bm25: BM25Index, caplog: pytest.LogCaptureFixture
) -> None:
    th = fit_idf_thresholds(["Oslo", "city"], bm25)
    other = BM25Index.build(CORPUS[:3])
    with caplog.at_level(logging.WARNING, logger="dynakrag.routing.retriever"):
        RoutedSearcher([("bm25", other)], th, other)
    assert "fitted on a corpus of 8 passages" in caplog.text
    with pytest.raises(ConfigurationError, match="needs 'avg_idf' thresholds"):
        RoutedSearcher([("bm25", bm25)], median(2.0), bm25)


def test_perplexity_thresholds_fit_tiers_and_json(tmp_path: Path) -> None:
    th = fit_perplexity_thresholds([1.0, 2.0, 3.0, 4.0], kind="context")
    assert th.values == (2.5,) and th.percentiles == (50.0,)
    assert th.signal == "context_perplexity" and th.harder == "higher"
    assert [th.level(v) for v in (1.0, 2.5, 2.6)] == [0, 0, 1]
    three = fit_perplexity_thresholds([1.0, 2.0, 3.0, 4.0], kind="answer", percentiles=(75, 25))
    assert three.values == (1.75, 3.25) and [three.level(v) for v in (1, 2, 4)] == [0, 1, 2]
    assert PercentileThresholds.load(th.save(tmp_path / "ppl.json")) == th
    with pytest.raises(UserInputError):
        fit_perplexity_thresholds([], kind="answer")
    with pytest.raises(UserInputError):
        fit_perplexity_thresholds([1.0], kind="answer", percentiles=(150,))
    with pytest.raises(ConfigurationError):
        PercentileThresholds("answer_perplexity", (3.0, 1.0), (25.0, 75.0), "higher")
    with pytest.raises(ConfigurationError):
        fit_perplexity_thresholds([1.0], kind="other")  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError):
        PercentileThresholds("answer_perplexity", (1.0,), (50.0,), "sideways")  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError):
        PercentileThresholds("answer_perplexity", (1.0, 2.0), (50.0,), "higher")
    with pytest.raises(ConfigurationError):
        PercentileThresholds.from_dict({"format": "x"})
    with pytest.raises(ConfigurationError):
        th.at(90)

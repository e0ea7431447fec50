"""``benchmarks/dsrag.py`` end to end on a few eval rows with the scripted stand-in generator,
BM25 and a tiny GS selector over hashed bag-of-words vectors (seconds; no model loads)."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest

from dynakrag.data.datasets import load_examples
from tests.benchmark_scripts import benchmark_module
from tests.fakes import HashedWords, tiny_selector_file
from tests.markers import needs_data

DIM = 32


pytestmark = needs_data


@pytest.fixture(scope="module")
def benchmark() -> Iterator[ModuleType]:
    with benchmark_module("dsrag") as module:
        yield module


@pytest.fixture(scope="module")
def selector_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An untrained GS selector (it scores as anchor-text cosine) over :class:`HashedWords`."""
    return tiny_selector_file(tmp_path_factory.mktemp("gs"), DIM, mlp_hidden=8)


@pytest.fixture(autouse=True)
def _isolated(isolated_env: None, no_models: None, monkeypatch: pytest.MonkeyPatch) -> None:
    from dynakrag.dsrag.text_encoder import TextEncoder

    # The selector file names its encoder; the fake stands in for MiniLM when it is loaded,
    # and for the rerankers' encoder.
    monkeypatch.setattr(
        "dynakrag.retrieval.embeddings.default_embeddings", lambda **_: HashedWords(DIM)
    )
    monkeypatch.setattr(
        "dynakrag.eval.methods.dsrag._rerank_encoder", lambda: TextEncoder(HashedWords(DIM))
    )


def test_smoke_all_tables_with_the_rule_extraction(
    benchmark: ModuleType,
    selector_file: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    out = tmp_path / "results"
    argv = ["--datasets", "dsrag-ranking", "--limit", "2", "--qd-limit", "2",
            "--retriever", "bm25", "--extraction", "rules", "--fake-llm",
            "--selector", str(selector_file), "--quiet", "--out-dir", str(out),
            "--name", "smoke"]  # fmt: skip
    assert benchmark.main(argv) == 0
    printed = capsys.readouterr().out
    for text in ("Table 7", "Table 8", "Table 9", "0.8315", "3.95", "48.67", "567,754,752",
                 "174,729,216", "DS-RAG", "the bar"):  # fmt: skip
        assert text in printed, text
    assert (out / "smoke.md").read_text(encoding="utf-8").strip() in printed

    data = json.loads((out / "smoke.json").read_text(encoding="utf-8"))
    assert data["meta"]["extraction"] == "rules" and data["meta"]["fake_llm"] is True

    # Table 8: the four methods, each on the same two questions.
    rows = data["table8"]["rows"]
    assert [r["method"] for r in rows] == [
        "nonqd-rerank",
        "epqd-rerank-subq",
        "epqd-rerank-origq",
        "dsrag",
    ]
    by = {r["method"]: r for r in rows}
    people = [len(ex.meta["people"]) for ex in load_examples("dsrag-ranking", "eval", 2)]
    for row in rows:
        assert row["n"] == 2 and row["dataset"] == "dsrag-ranking"
        for key in ("context_precision", "context_recall", "context_f1", "anls"):
            assert 0.0 <= row[key] <= 1.0, key
        assert row["paper_context_f1"] > 0 and row["llm_cache"] == {"enabled": False}
    assert by["nonqd-rerank"]["anc"] == 4 and by["nonqd-rerank"]["retrieval_calls"] == 1
    assert by["epqd-rerank-origq"]["anc"] == 4
    dsrag = by["dsrag"]
    # One chunk per criterion, one criterion per person on these rule-built graphs.
    assert dsrag["anc"] == pytest.approx(np.mean(people))
    assert dsrag["criteria_equal_people"] == 1.0 and dsrag["dics_modes"] == {"criteria": 2}
    assert dsrag["decompositions"] == {"rules": 2}
    assert isinstance(dsrag["meets_bar"], bool)
    # The same searches, and one more for each entity whose value the selection does not state.
    assert by["epqd-rerank-subq"]["retrieval_calls"] <= dsrag["retrieval_calls"]
    assert dsrag["retrieval_calls"] <= by["epqd-rerank-subq"]["retrieval_calls"] + max(people)
    runs = data["table8"]["runs"]
    assert len(runs) == 4 and all(Path(run["file"]).is_file() for run in runs)
    first = json.loads(Path(runs[-1]["file"]).read_text(encoding="utf-8"))
    assert first["meta"]["method"] == "dsrag" and len(first["questions"]) == 2

    # Table 7: both experiments, three decompositions each.
    table7 = data["table7"]
    assert {(r["experiment"], r["method"]) for r in table7["rows"]} == {
        (e, m) for e in ("exp1", "exp2") for m in ("langchain", "epqd", "epqd-rules")
    }
    for row in table7["rows"]:
        assert row["n"] == 2 and 0.0 <= row["ear"] <= 100.0 and 0.0 <= row["eor"] <= 100.0
    assert "rule extractor" in table7["entity_step"]
    epqd = [r for r in table7["rows"] if r["method"] == "epqd"]
    assert all(r["decompositions"] == {"llm": 2} for r in epqd)  # the stand-in answered
    for record in table7["records"]:
        assert "who" not in {e.casefold() for e in record["entities"]}  # question words out

    # Table 9: the tiny selector's own parameters; a fake encoder has no torch parameters.
    table9 = data["table9"]
    counts = table9["counts"]
    assert counts["trainable"] == counts["graph_encoder"] + counts["projection"] > 0
    assert counts["text_encoder"] is None and table9["with_text_encoder"] is None
    assert table9["encoder"] == "test-hashed-words"


def test_smoke_with_the_llm_extraction(
    benchmark: ModuleType, selector_file: Path, tmp_path: Path
) -> None:
    argv = ["--parts", "table7", "table8", "--datasets", "dsrag-comparison", "--limit", "1",
            "--qd-limit", "1", "--methods", "dsrag", "--retriever", "bm25", "--extraction",
            "llm", "--no-answer", "--fake-llm", "--selector", str(selector_file), "--quiet",
            "--out-dir", str(tmp_path)]  # fmt: skip
    assert benchmark.main(argv) == 0
    data = json.loads((tmp_path / "dsrag.json").read_text(encoding="utf-8"))
    assert set(data) == {"meta", "table7", "table8"}
    (row,) = data["table8"]["rows"]
    assert row["anls"] is None and row["decompositions"] == {"llm": 1}
    # One question analysis gives the sub-questions and the criteria (no answer asked).
    assert row["llm_calls"] == 1
    assert row["criteria_equal_people"] == 1.0
    assert "LLM entity prompt" in data["table7"]["entity_step"]


def test_bridge_rule_matches_the_labelled_train_rows(benchmark: ModuleType) -> None:
    labelled = [ex for ex in load_examples("hotpotqa", "train") if ex.meta.get("type")]
    hidden = [
        (ex.meta["type"], dataclasses.replace(ex, meta={"source": ex.meta["source"]}))
        for ex in labelled
    ]
    guessed = [(kind, benchmark.is_bridge(ex)) for kind, ex in hidden]
    # The rule never takes a comparison question for a bridge question.
    assert not any(kind == "comparison" and bridge for kind, bridge in guessed)
    bridges = [bridge for kind, bridge in guessed if kind == "bridge"]
    assert sum(bridges) / len(bridges) > 0.85
    assert all(benchmark.is_bridge(ex) for ex in benchmark.qd_questions("exp1", 5))
    assert all(len(ex.meta["people"]) == 3 for ex in benchmark.qd_questions("exp2", 4))


def test_a_missing_selector_is_a_clear_message(
    benchmark: ModuleType, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["--selector", str(tmp_path / "none.npz"), "--fake-llm", "--out-dir", str(tmp_path)]
    assert benchmark.main(argv) == 2
    assert "no selector file" in capsys.readouterr().err
    assert not list(tmp_path.glob("*.json"))

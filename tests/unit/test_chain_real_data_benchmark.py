"""benchmarks/chain_real_data.py on hand-made run files: per-hop groups, intervals, the table."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.benchmark_scripts import benchmark_module


def _run(path: Path, f1s: list[float], ids: list[str]) -> None:
    questions = [
        {
            "id": qid,
            "f1": f1,
            "em": float(f1 == 1.0),
            "support_recall": 0.5,
            "llm_calls": 2,
            "retrieval_calls": 1,
            "prompt_tokens": 900,
            "latency_s": 3.0,
            "abstained": f1 == 0.0,
        }
        for qid, f1 in zip(ids, f1s, strict=True)
    ]
    path.write_text(json.dumps({"meta": {"git_commit": "abc1234def"}, "questions": questions}))


def test_rows_per_method_and_hop_count_with_intervals(tmp_path: Path) -> None:
    ids = ["2hop__1", "2hop__2", "3hop1__3", "4hop2__4"]
    _run(tmp_path / "musique-naive.json", [0.0, 1.0, 0.0, 0.0], ids)
    _run(tmp_path / "musique-chain.json", [1.0, 1.0, 1.0, 0.0], ids)
    with benchmark_module("chain_real_data") as bench:
        assert bench.main(["--runs-dir", str(tmp_path), "--out-dir", str(tmp_path)]) == 0
        low, high = bench.bootstrap_interval([1.0] * 5)
    assert low == high == 1.0
    rows = json.loads((tmp_path / "chain-real-data.json").read_text())["rows"]
    by = {(row["method"], row["group"]): row for row in rows}
    assert by[("chain", "all")]["f1"] == pytest.approx(0.75)
    assert by[("chain", "2-hop")]["n"] == 2 and by[("naive", "2-hop")]["f1"] == 0.5
    assert by[("chain", "4-hop")]["f1"] == 0.0 and by[("chain", "all")]["abstain_rate"] == 0.25
    assert by[("chain", "all")]["f1_low"] <= 0.75 <= by[("chain", "all")]["f1_high"]
    assert ("before", "all") not in by  # a missing run is reported, not invented
    table = (tmp_path / "chain-real-data.md").read_text()
    assert "graph, chain, incomplete_chain=abstain" in table
    assert (tmp_path / "chain-real-data.png").is_file()


def test_methods_are_compared_question_by_question(tmp_path: Path) -> None:
    ids = ["a", "b", "c", "d"]
    _run(tmp_path / "hotpotqa-before.json", [0.0, 1.0, 0.5, 0.0], ids)
    # The same questions, in another order, one of them missing: pairs go by id.
    _run(tmp_path / "hotpotqa-chain-read.json", [1.0, 1.0, 0.5], ["c", "a", "b"])
    with benchmark_module("chain_real_data") as bench:
        assert bench.main(["--runs-dir", str(tmp_path), "--out-dir", str(tmp_path)]) == 0
    paired = json.loads((tmp_path / "chain-real-data.json").read_text())["paired"]
    assert [(p["dataset"], p["first"], p["second"], p["n"]) for p in paired] == [
        ("hotpotqa", "chain-read", "before", 3)
    ]
    # c: 1.0 - 0.5, a: 1.0 - 0.0, b: 0.5 - 1.0
    assert paired[0]["difference"] == pytest.approx((0.5 + 1.0 - 0.5) / 3)
    assert paired[0]["low"] <= paired[0]["difference"] <= paired[0]["high"]
    assert "chain-read - before" in (tmp_path / "chain-real-data.md").read_text()


def test_stored_copies_keep_ids_and_metrics_and_resume_as_eval_records(tmp_path: Path) -> None:
    from dynakrag.eval.records import check_eval_record

    record = {
        "id": "2hop__1", "question": "Who founded the firm Ada works for?", "prediction": "Ilsa",
        "gold_answers": ["Ilsa Marr"], "gold_support": ["a#1"], "gold_sets": [["a#1"]],
        "evidence": [{"id": "a#1", "title": "Ada", "text": "Ada works at Orbis."}],
        "actions": ["retrieve_more"], "retrieval_calls": 1, "llm_calls": 2, "prompt_tokens": 9,
        "completion_tokens": 1, "latency_s": 1.0, "support_recall": 1.0, "context_precision": 1.0,
        "context_recall": 1.0, "context_f1": 1.0, "num_chunks": 1, "em": 0.0, "f1": 0.5,
        "anls": 0.5, "abstained": False, "abstain_reason": "", "answer_citations": ["a#1"],
        "details": {"trace": [{"step": 1}], "hops": [{"question": "Q", "sentence": "Ada works."}]},
    }  # fmt: skip
    runs = tmp_path / "runs"
    runs.mkdir()
    (runs / "musique-chain.json").write_text(json.dumps({"meta": {}, "questions": [record]}))
    journal = '{"schema": "x"}\n' + json.dumps({"key": "k", "value": record}) + "\n{cut"
    (runs / "musique-naive.json.partial.jsonl").write_text(journal)
    with benchmark_module("chain_real_data") as bench:
        stored = bench.store_runs(runs, tmp_path / "store")
    assert len(stored) == 2
    kept = json.loads(stored[0].read_text())["questions"][0]
    assert kept["question"] == "" and kept["evidence"] == [{"id": "a#1", "title": "", "text": ""}]
    assert kept["f1"] == 0.5 and "trace" not in kept["details"]
    assert kept["details"]["hops"] == [{"question": "Q"}]
    lines = stored[1].read_text().splitlines()
    assert len(lines) == 2  # the header and the whole line; the cut line is dropped
    check_eval_record(json.loads(lines[1])["value"])

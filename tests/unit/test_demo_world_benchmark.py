"""benchmarks/demo_world.py end to end with the scripted reader: variants, worlds, rewordings,
journals that keep each run's trace, and the failure causes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.benchmark_scripts import benchmark_module


def test_demo_world_runs_variants_over_worlds_and_journals_the_chain(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DYNAKRAG_RETRIEVER", "bm25")  # no embedding model for a smoke run
    chain = "chain:sub_question_answering=chain,max_steps=16,max_retrieval_calls=10"
    argv = [
        *("--fake-llm", "--quiet", "--limit", "2", "--out-dir", str(tmp_path), "--name", "t"),
        *("--variants", chain, "naive:method=naive", "--world-seeds", "7", "11", "--reworded"),
    ]
    with benchmark_module("demo_world") as demo_world:
        demo_world.main(argv)
    result = json.loads((tmp_path / "t.json").read_text())
    assert result["world_seeds"] == [7, 11] and result["questions"] == 4
    groups = {(row["variant"], row["group"]) for row in result["rows"]}
    assert {("chain", "all"), ("naive", "all"), ("chain", "world-11")} <= groups
    records = [json.loads(line) for line in (tmp_path / "t-runs" / "chain-w11.jsonl").open()]
    assert len(records) == 2
    for record in records:
        assert record["chain"] and record["plan"] and record["searches"]
        assert "where" not in record["question"] or "works?" not in record["question"]
    markdown = (tmp_path / "t.md").read_text()
    assert "| chain | all | 4 |" in markdown

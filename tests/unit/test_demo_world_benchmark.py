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


def test_per_template_samples_every_template_and_extends_in_order() -> None:
    from dynakrag.data.demo_corpus import generate_demo_corpus

    questions = list(generate_demo_corpus(7).questions)
    with benchmark_module("demo_world") as demo_world:
        two = demo_world.per_template(questions, 2)
        three = demo_world.per_template(questions, 3)
        assert demo_world.per_template(questions, None) == questions
    templates = {q.id.rsplit("-", 1)[0] for q in questions}
    assert len(two) == 2 * len(templates) and {q.id.rsplit("-", 1)[0] for q in two} == templates
    assert {q.kind for q in two} == {q.kind for q in questions}
    assert set(two) < set(three)  # a larger N keeps the journalled questions

"""benchmarks/one_hop_cost.py with the scripted reader: the folder of package READMEs is read
like a user's own docs, and the chain answers a one-hop question with at most two LLM calls."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.benchmark_scripts import benchmark_module


def test_one_hop_questions_cost_the_chain_two_calls(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DYNAKRAG_RETRIEVER", "bm25")  # no embedding model for a smoke run
    with benchmark_module("one_hop_cost") as one_hop:
        one_hop.main(["--fake-llm", "--quiet", "--limit", "3", "--out-dir", str(tmp_path)])
    result = json.loads((tmp_path / "one-hop-cost.json").read_text())
    assert result["passages"] >= len(result["packages"]) >= 5
    rows = {row["variant"]: row for row in result["rows"]}
    assert rows["naive"]["max_llm_calls"] == 1 and rows["naive"]["time_vs_naive"] == 1.0
    assert rows["graph (chain)"]["max_llm_calls"] <= 2
    assert rows["graph (chain)"]["em"] == 1.0
    assert "time vs naive" in (tmp_path / "one-hop-cost.md").read_text()

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
    assert "graph, chain (hop by hop)" in table and (tmp_path / "chain-real-data.png").is_file()

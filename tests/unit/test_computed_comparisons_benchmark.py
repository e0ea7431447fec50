"""benchmarks/computed_comparisons.py on hand-made records: how an answer was made, the
demo-world rows and the table."""

from __future__ import annotations

import json
from pathlib import Path

from tests.benchmark_scripts import benchmark_module


def _record(abstained: bool, stop_calls: int, em: float) -> dict:
    accounting = {"stop_answer": {"llm_calls": stop_calls}}
    return {"abstained": abstained, "em": em, "details": {"accounting": accounting}}


def test_an_answer_with_no_model_call_at_the_end_is_the_chains_own() -> None:
    with benchmark_module("computed_comparisons") as bench:
        assert bench.how_answered(_record(False, 0, 1.0)) == "computed"
        assert bench.how_answered(_record(False, 1, 1.0)) == "reader"
        assert bench.how_answered(_record(True, 0, 0.0)) == "abstained"


def test_demo_world_comparisons_are_counted_per_variant_and_seed(tmp_path: Path) -> None:
    dates = [{"status": "resolved", "expects": "date"}] * 2
    rows = [
        {"kind": "comparison", "world_seed": 404, "em": 1.0, "chain": dates},
        {
            "kind": "comparison",
            "world_seed": 404,
            "em": 0.0,
            "chain": [*dates[:1], {"status": "failed", "expects": "date"}],
        },
        {"kind": "bridge", "world_seed": 404, "em": 1.0, "chain": []},
    ]
    (tmp_path / "chain-w404.jsonl").write_text("\n".join(json.dumps(r) for r in rows))
    naive = [{"kind": "comparison", "world_seed": 404, "em": 0.0}]
    (tmp_path / "naive-w404.jsonl").write_text(json.dumps(naive[0]))
    with benchmark_module("computed_comparisons") as bench:
        found = bench.demo_rows([tmp_path])
        text = bench.markdown([], found)
    chain = next(r for r in found if r["variant"] == "chain")
    assert (chain["n"], chain["em"], chain["computed"]) == (2, 0.5, (1, 1.0))
    assert next(r for r in found if r["variant"] == "naive")["computed"] is None
    assert "| demo world 404 | chain | 2 | 0.500 | 1, 1.000 |" in text

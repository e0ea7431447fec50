"""benchmarks/abstention.py: the set is built from train rows and the demo corpus only, the
table reports abstention on and off per method, and a rerun resumes from its journals."""

from __future__ import annotations

import json
from pathlib import Path

from dynakrag.data.datasets import load_examples
from tests.benchmark_scripts import benchmark_module
from tests.markers import needs_data


@needs_data
def test_the_set_uses_train_rows_and_removes_the_gold_paragraphs() -> None:
    with benchmark_module("abstention") as bench:
        items, corpora = bench.build_set(["hotpotqa"], 3)
    eval_questions = {ex.question for ex in load_examples("hotpotqa", "eval")}
    assert not eval_questions & {item.question for item in items}
    pool_ids = {p.id for p in corpora["hotpotqa"]}
    removed = [item for item in items if item.kind == "removed_support"]
    answerable = [item for item in items if item.kind == "answerable"]
    assert removed and all(not set(item.removed) & pool_ids for item in removed)
    unanswerable = [item for item in items if not item.answerable]
    assert len(answerable) == len(unanswerable) + (3 - len(removed))
    assert {"absent_entity", "malformed"} <= {item.kind for item in items}


@needs_data
def test_smoke_run_reports_on_and_off_and_resumes(tmp_path: Path) -> None:
    argv = ["--parts", "set", "--fake-llm", "--retriever", "bm25", "--limit", "2", "--quiet",
            "--out-dir", str(tmp_path)]  # fmt: skip
    with benchmark_module("abstention") as bench:
        assert bench.main(argv) == 0
        result = json.loads((tmp_path / "abstention.json").read_text(encoding="utf-8"))
        rows = {(row["method"], row["abstain"]): row for row in result["set"]["rows"]}
        assert set(rows) == {(m, s) for m in ("naive", "dynakrag") for s in ("off", "on")}
        for method in ("naive", "dynakrag"):
            # The scripted reader invents a name for every unanswerable question: only the
            # grounding check withholds it.
            assert rows[(method, "on")]["recall"] == 1.0
            assert rows[(method, "on")]["recall"] > rows[(method, "off")]["recall"]
            assert rows[(method, "on")]["answerable_f1"] == rows[(method, "off")]["answerable_f1"]
        assert "| naive | on |" in (tmp_path / "abstention.md").read_text(encoding="utf-8")
        journals = sorted((tmp_path / "abstention-runs").glob("*.jsonl"))
        sizes = [len(p.read_text(encoding="utf-8").splitlines()) for p in journals]
        assert bench.main(argv) == 0  # everything journalled: nothing recomputed
        assert [len(p.read_text(encoding="utf-8").splitlines()) for p in journals] == sizes

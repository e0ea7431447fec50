"""``benchmarks/rewordings.py`` on the DS-RAG train rows, and ``benchmarks/dics_compression.py``
end to end on a few rows with the scripted stand-in, BM25 and a tiny GS selector over hashed
bag-of-words vectors (no model loads), including resuming after a kill."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

from dynakrag.data.datasets import load_examples
from tests.benchmark_scripts import benchmark_module
from tests.fakes import HashedWords, tiny_selector_file
from tests.markers import needs_data

DIM = 32
pytestmark = needs_data


@pytest.fixture(scope="module")
def rewordings() -> Iterator[ModuleType]:
    with benchmark_module("rewordings") as module:
        yield module


@pytest.fixture(scope="module")
def benchmark() -> Iterator[ModuleType]:
    with benchmark_module("dics_compression") as module:
        yield module


@pytest.fixture(scope="module")
def selector_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tiny_selector_file(tmp_path_factory.mktemp("gs"), DIM, mlp_hidden=8)


@pytest.fixture
def isolated(isolated_env: None, no_models: None, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(
        "dynakrag.retrieval.embeddings.default_embeddings", lambda **_: HashedWords(DIM)
    )


# --- rewordings ------------------------------------------------------------------------------


@pytest.mark.parametrize("dataset", ["dsrag-ranking", "dsrag-comparison"])
def test_rewordings_ask_the_same_things_in_other_words(
    rewordings: ModuleType, dataset: str
) -> None:
    originals, reworded = rewordings.reworded_examples(dataset, "train", limit=200)
    assert len(originals) == len(reworded) == 200
    phrases, modes = Counter(), Counter()
    for original, new in zip(originals, reworded, strict=True):
        assert original.split == new.split == "train"
        assert new.question != original.question and new.id == f"{original.id}-reworded"
        # Not the templates any more ...
        assert not rewordings.RANKING.match(new.question)
        assert not rewordings.COMPARISON.match(new.question)
        assert "born date" not in new.question and "Is nationality of" not in new.question
        # ... but the same people, answer and gold chunks.
        assert all(person in new.question for person in original.meta["people"])
        assert new.answers == original.answers and new.gold_sets == original.gold_sets
        assert new.meta["original_question"] == original.question
        phrases[new.meta["rewording"]["phrase"]] += 1
        modes[new.meta["rewording"]["description"]] += 1
    # Every phrasing (four per kind of question; comparisons: same and different) and every
    # placement of the description.
    assert len(phrases) == (4 if dataset == "dsrag-ranking" else 8) and len(modes) == 4
    # Seeded: the same rewording again, another one with another seed.
    again = rewordings.reworded_examples(dataset, "train", limit=20)[1]
    assert [e.question for e in again] == [e.question for e in reworded[:20]]
    other = rewordings.reworded_examples(dataset, "train", limit=20, seed=7)[1]
    assert [e.question for e in other] != [e.question for e in reworded[:20]]


def test_ranking_rewordings_keep_the_rank(rewordings: ModuleType) -> None:
    expected = {1: ("oldest", "first", "earliest"), 3: ("youngest", "last", "latest")}
    seen = Counter()
    for example in load_examples("dsrag-ranking", "train", 60):
        template = rewordings.parse_template(example)
        new = rewordings.reword(example)
        words = expected.get(template.rank, ("second",))
        assert any(word in new.question for word in words), (template.rank, new.question)
        seen[template.rank] += 1
    assert set(seen) == {1, 2, 3}


def test_a_question_outside_the_templates_is_refused(rewordings: ModuleType) -> None:
    import dataclasses

    example = load_examples("dsrag-comparison", "train", 1)[0]
    with pytest.raises(ValueError, match="not a templated"):
        rewordings.reword(dataclasses.replace(example, question="Who is older?"))


# --- the benchmark ---------------------------------------------------------------------------


def test_dsrag_part_templated_and_reworded_and_resumable(
    benchmark: ModuleType,
    selector_file: Path,
    tmp_path: Path,
    isolated: None,
    capsys: pytest.CaptureFixture[str],
) -> None:
    out = tmp_path / "results"
    argv = ["--parts", "dsrag", "--limit", "2", "--retriever", "bm25", "--fake-llm",
            "--extraction", "llm", "--selector", str(selector_file), "--quiet",
            "--out-dir", str(out), "--name", "smoke"]  # fmt: skip
    assert benchmark.main(argv) == 0
    printed = capsys.readouterr()
    assert "Train rows (development)" in printed.out and "EVAL" not in printed.out
    data = json.loads((out / "smoke.json").read_text(encoding="utf-8"))
    assert data["meta"]["split"] == "train" and data["meta"]["final_measurement"] is False
    rows = data["rows"]
    assert [(r["dataset"], r["variant"]) for r in rows] == [
        (d, f) for d in ("dsrag-ranking", "dsrag-comparison") for f in ("templated", "reworded")
    ]
    for row in rows:
        assert row["n"] == 2 and row["part"] == "dsrag"
        for key in ("context_precision", "context_recall", "context_f1", "answer_quality"):
            assert 0.0 <= row[key] <= 1.0, key
        # One analysis; the answer is computed from the passages' values (no model call).
        assert row["anc"] > 0 and row["llm_calls"] == 1
        assert sum(row["extractions"].values()) == 2
    metric = {r["dataset"]: r["answer_metric"] for r in rows}
    assert metric == {"dsrag-ranking": "anls", "dsrag-comparison": "em"}
    verdicts = {v["dataset"]: v for v in data["verdicts"]["dsrag"]}
    assert set(verdicts) == {"dsrag-ranking", "dsrag-comparison"}
    for verdict in verdicts.values():
        assert isinstance(verdict["reworded_drop"]["meets"], bool)
        assert verdict["context_bar"]["bar_chunks"] in (3.95, 3.01)
    assert "reworded drop" in (out / "smoke.md").read_text(encoding="utf-8")

    # Resuming: a rerun runs nothing; a torn last line is dropped and that question rerun.
    files = sorted((out / "smoke-runs").glob("*.jsonl"))
    assert len(files) == 4 and all(len(f.read_text().splitlines()) == 2 for f in files)
    before = [f.read_text() for f in files]
    assert benchmark.main(argv) == 0
    assert "2 of 2 done before, 0 to run" in capsys.readouterr().err
    assert [f.read_text() for f in files] == before
    lines = files[0].read_text().splitlines()
    files[0].write_text(lines[0] + "\n" + lines[1][: len(lines[1]) // 2])
    assert benchmark.main(argv) == 0
    assert "torn last line" in capsys.readouterr().err
    assert [json.loads(line)["key"] for line in files[0].read_text().splitlines()] == [
        json.loads(line)["key"] for line in lines
    ]
    # More rows: only the new ones run, into the same files.
    assert benchmark.main([*argv[:2], "--limit", "3", *argv[4:]]) == 0
    assert all(len(f.read_text().splitlines()) == 3 for f in files)
    # Another setting starts its own files.
    assert benchmark.main([*argv, "--no-answer"]) == 0
    assert len(list((out / "smoke-runs").glob("*.jsonl"))) == 8


def test_graph_part_compares_the_compressions(
    benchmark: ModuleType,
    selector_file: Path,
    tmp_path: Path,
    isolated: None,
    joint_env: None,
    capsys: pytest.CaptureFixture[str],
) -> None:
    # The joint check (joint_env): DICS draws its criteria from its sub-questions, one
    # extraction a question (a chain's hops are criteria of their own, with no extraction).
    argv = ["--parts", "graph", "--graph-datasets", "hotpotqa", "--limit", "2",
            "--compressions", "dics", "heuristic", "passthrough", "--retriever", "bm25",
            "--policy", "fixed", "--fake-llm", "--selector", str(selector_file), "--quiet",
            "--split", "eval", "--out-dir", str(tmp_path)]  # fmt: skip
    assert benchmark.main(argv) == 0
    captured = capsys.readouterr()
    assert "EVAL ROWS" in captured.err and "EVAL ROWS" in captured.out
    data = json.loads((tmp_path / "dics-compression-eval.json").read_text(encoding="utf-8"))
    assert data["meta"]["final_measurement"] is True
    rows = {r["variant"]: r for r in data["rows"]}
    assert set(rows) == {"dics", "heuristic", "passthrough"}
    for row in rows.values():
        assert row["n"] == 2 and row["dataset"] == "hotpotqa" and row["answer_metric"] == "f1"
        assert row["prompt_tokens"] > 0 and row["anc"] >= 0
    # The fixed schedule compresses every question; only dics records an extraction.
    assert all(row["compressed"] == 2 for row in rows.values())
    assert sum(rows["dics"]["extractions"].values()) == 2
    assert not rows["passthrough"]["extractions"]
    assert rows["passthrough"]["anc"] >= rows["dics"]["anc"]
    (verdict,) = data["verdicts"]["graph"]
    assert verdict["dataset"] == "hotpotqa" and isinstance(verdict["meets"], bool)
    record = json.loads(
        next(tmp_path.glob("dics-compression-eval-runs/graph-hotpotqa-dics-*.jsonl"))
        .read_text()
        .splitlines()[0]
    )
    assert "trace" not in record["details"] and "actions" in record["details"]


def test_a_missing_selector_is_a_clear_message(
    benchmark: ModuleType, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["--selector", str(tmp_path / "none.npz"), "--fake-llm", "--out-dir", str(tmp_path)]
    assert benchmark.main(argv) == 2
    assert "no selector file" in capsys.readouterr().err

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


# --- the kept part ---------------------------------------------------------------------------


def test_kept_part_runs_the_graph_once_and_compresses_its_evidence_each_way(
    benchmark: ModuleType,
    selector_file: Path,
    tmp_path: Path,
    isolated: None,
    capsys: pytest.CaptureFixture[str],
) -> None:
    from dynakrag import prompts
    from dynakrag.llm.fake import ScriptedChatModel

    examples = load_examples("hotpotqa", "train", 3)
    inner = benchmark.fake_chat_model(examples)
    tasks: list[str | None] = []

    def respond(messages: list) -> str:
        tasks.append(prompts.task_of(messages))
        return inner.respond(messages)

    model = ScriptedChatModel(respond=respond)
    out = tmp_path / "results"
    argv = ["--parts", "kept", "--graph-datasets", "hotpotqa", "--limit", "2",
            "--compressions", "dics", "heuristic", "passthrough", "--retriever", "bm25",
            "--selector", str(selector_file), "--no-cache", "--quiet",
            "--out-dir", str(out), "--name", "kept", "--fake-llm"]  # fmt: skip
    # --fake-llm: the scripted stand-in, here wrapped to see every prompt the model gets.
    assert benchmark.main(argv, chat_model=model) == 0
    printed = capsys.readouterr()
    assert "plan: kept hotpotqa dics+heuristic+passthrough: 0 of 2 done, 2 to run" in printed.err
    assert "What each compression keeps" in printed.out
    (journal,) = (out / "kept-runs").glob("kept-hotpotqa-dics+heuristic+passthrough-*.jsonl")
    records = [json.loads(line) for line in journal.read_text().splitlines()]
    assert [r["key"] for r in records] == [e.id for e in examples[:2]]

    # The graph ran once per question and stopped before compressing or answering: the model
    # saw no answer prompt, and every call it got is one of the graph's or a compression's.
    assert prompts.ANSWER not in tasks
    calls = sum(
        r["graph"]["llm_calls"] + sum(c["llm_calls"] for c in r["compressions"].values())
        for r in records
    )
    assert len(tasks) == calls > 0
    compressed = 0
    for record in records:
        assert record["held_back"] in ("compress_answer_evidence", "stop_answer")
        actions = record["graph"]["actions"]
        assert "compress_answer_evidence" not in actions and "stop_answer" not in actions
        before, by = record["before"], record["compressions"]
        ids = [doc["id"] for doc in before["evidence"]]
        assert set(by) == {"dics", "heuristic", "passthrough"}
        assert 0 < before["passages"] == len(ids) <= 12  # max_final_docs: none drops nothing
        # None keeps every passage; the lexical compression keeps some of them, never more.
        assert by["passthrough"]["kept"] == ids
        assert by["passthrough"]["support_recall"] == before["support_recall"]
        assert by["passthrough"]["tokens"] == before["tokens"] > 0
        assert set(by["heuristic"]["kept"]) <= set(ids)
        assert by["heuristic"]["passages"] <= by["passthrough"]["passages"]
        assert by["heuristic"]["support_recall"] <= before["support_recall"]
        assert by["heuristic"]["llm_calls"] == by["passthrough"]["llm_calls"] == 0
        for side in by.values():
            assert side["applied"] == (record["held_back"] == "compress_answer_evidence")
            assert side["passages"] == len(side["kept"])
        if record["held_back"] == "compress_answer_evidence":
            compressed += 1
            assert by["heuristic"]["passages"] < before["passages"]
            assert by["heuristic"]["tokens"] < before["tokens"]
            assert by["dics"]["details"]["dics_mode"]
        else:  # no compression: all three keep what the reader would read
            assert by["dics"]["kept"] == by["heuristic"]["kept"] == ids
    assert compressed >= 1

    data = json.loads((out / "kept.json").read_text(encoding="utf-8"))
    rows = {r["compression"]: r for r in data["kept"]}
    assert data["rows"] == [] and set(rows) == {"dics", "heuristic", "passthrough"}
    for row in rows.values():
        assert row["n"] == 2 and row["dataset"] == "hotpotqa" and row["compressed"] == compressed
        assert row["support_per_1k_tokens"] == pytest.approx(
            row["sr_after"] / row["tokens_after"] * 1000
        )
    none, lexical = rows["passthrough"], rows["heuristic"]
    assert none["sr_after"] == none["sr_before"] and none["tokens_after"] == none["tokens_before"]
    assert lexical["passages_after"] < none["passages_after"]
    assert lexical["tokens_after"] < none["tokens_after"]
    (verdict,) = data["verdicts"]["kept"]
    assert verdict["meets"] == (
        verdict["sr_at_least_lexical"]
        and verdict["sr_within_tolerance_of_before"]
        and verdict["tokens_at_most_lexical"]
    )

    # Resuming: a rerun calls no model and leaves the journal as it was; a larger --limit runs
    # only the new row into the same file, with the plan's ETA from the rows done.
    before_text, tasks[:] = journal.read_text(), []
    assert benchmark.main(argv, chat_model=model) == 0
    assert "2 of 2 done before, 0 to run" in capsys.readouterr().err
    assert tasks == [] and journal.read_text() == before_text
    assert benchmark.main([*argv[:4], "--limit", "3", *argv[6:]], chat_model=model) == 0
    err = capsys.readouterr().err
    assert "2 of 3 done, 1 to run; ETA" in err and "s/q x 1 =" in err
    lines = journal.read_text().splitlines()
    assert len(lines) == 3 and "\n".join(lines[:2]) + "\n" == before_text
    assert json.loads(lines[2])["key"] == examples[2].id and tasks
    # Another set of compressions is another file.
    assert benchmark.main([*argv[:7], "heuristic", *argv[10:]], chat_model=model) == 0
    assert len(list((out / "kept-runs").glob("*.jsonl"))) == 2


def test_kept_verdict_is_the_issues_rule(benchmark: ModuleType) -> None:
    def rows(dics_sr: float, before: float, dics_tokens: float) -> list[dict]:
        common = {"dataset": "hotpotqa", "n": 200, "sr_before": before}
        return [
            {**common, "compression": "dics", "sr_after": dics_sr, "tokens_after": dics_tokens},
            {**common, "compression": "heuristic", "sr_after": 0.80, "tokens_after": 500.0},
        ]

    (meets,) = benchmark.kept_verdicts(rows(0.81, 0.83, 450.0))
    assert meets["meets"] is True
    (loses_support,) = benchmark.kept_verdicts(rows(0.81, 0.84, 450.0))  # 0.81 < 0.84 - 0.02
    assert loses_support["meets"] is False and not loses_support["sr_within_tolerance_of_before"]
    (below_lexical,) = benchmark.kept_verdicts(rows(0.79, 0.80, 450.0))
    assert below_lexical["meets"] is False and not below_lexical["sr_at_least_lexical"]
    (dearer,) = benchmark.kept_verdicts(rows(0.81, 0.82, 501.0))
    assert dearer["meets"] is False and not dearer["tokens_at_most_lexical"]
    assert benchmark.kept_verdicts(rows(0.81, 0.82, 450.0)[1:]) == []  # no dics row

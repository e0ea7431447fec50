"""Benchmark loaders against the real data (skipped when absent) and synthetic data folders.

The real data lives outside the repository: ``$DYNAKRAG_DATA_DIR``, else
``<repo>/../shared/data``. Tests that need it skip with a message saying where they looked.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from dynakrag.data.datasets import (
    DATA_DIR_ENV,
    DATASETS,
    DataMissingError,
    QAExample,
    data_dir,
    dsrag_corpus,
    load_examples,
    open_corpus,
    split_spans,
    split_text,
)
from dynakrag.errors import CorpusError, UserInputError
from dynakrag.eval.metrics import context_precision, context_recall

# Expected sizes. HotpotQA eval: IRCoT rows 250..500 (250) + the explorer sample (100), less
# one explorer question that is also IRCoT eval row 287 (kept once) = 349. HotpotQA train:
# IRCoT rows 0..250 less row 247 (an explorer eval question) = 249, + MIGRES 200 less 15 eval
# questions less 4 already in IRCoT train = 181, + HippoRAG 100 = 530. 2Wiki eval: rows
# 100..200 of which 36 have no context = 64.
EXPECTED = {
    ("hotpotqa", "train"): 530,
    ("hotpotqa", "eval"): 349,
    ("2wiki", "train"): 100,
    ("2wiki", "eval"): 64,
    ("musique", "train"): 200,
    ("musique", "eval"): 100,
    ("dsrag-ranking", "train"): 3000,
    ("dsrag-ranking", "eval"): 500,
    ("dsrag-comparison", "train"): 3000,
    ("dsrag-comparison", "eval"): 500,
}
IRCOT = "hotpotqa/ircot_dev500/dev_subsampled.jsonl"
EXPLORER = "hotpotqa/official_dev_sample100/camera_ready_nd8_dev_sample100.json"


def _real_data_dir() -> Path:
    try:
        root = data_dir()
    except DataMissingError as exc:
        pytest.skip(f"benchmark data absent ({exc}); set {DATA_DIR_ENV} to the data folder")
    if not (root / "splits.json").is_file():
        pytest.skip(f"benchmark data absent: no splits.json in {root}; set {DATA_DIR_ENV}")
    return root


@pytest.fixture(scope="module")
def real_data() -> Path:
    return _real_data_dir()


def _write_json(path: Path, value: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(value), encoding="utf-8")


def _standard_row(qid: str) -> dict[str, Any]:
    return {
        "_id": qid,
        "question": "Which?",
        "answer": "A",
        "type": "bridge",
        "level": "hard",
        "supporting_facts": [["Alpha", 0], ["Beta", 1]],
        "context": [
            ["Alpha", ["Alpha is a letter.", " It comes first."]],
            ["Beta", ["Beta is a letter.", " It comes second."]],
            ["Gamma", ["Gamma is third."]],
        ],
    }


# ---------------------------------------------------------------------------- real data


@pytest.mark.parametrize(("dataset", "split"), sorted(EXPECTED))
def test_counts(real_data: Path, dataset: str, split: str) -> None:
    examples = load_examples(dataset, split)  # type: ignore[arg-type]
    assert len(examples) == EXPECTED[dataset, split]
    assert len({e.id for e in examples}) == len(examples)
    assert all(e.dataset == dataset and e.split == split for e in examples)
    assert all(e.question and e.answers and e.support for e in examples)


def test_hotpotqa_eval_composition(real_data: Path) -> None:
    examples = load_examples("hotpotqa", "eval")
    by_source = Counter(e.meta["source"] for e in examples)
    assert by_source == {IRCOT: 250, EXPLORER: 99}
    assert sorted(e.row for e in examples if e.meta["source"] == IRCOT) == list(range(250, 500))
    # the explorer question left out is the one already taken from IRCoT's eval rows
    explorer_rows = {e.row for e in examples if e.meta["source"] == EXPLORER}
    missing = json.loads((real_data / EXPLORER).read_text(encoding="utf-8"))[
        min(set(range(100)) - explorer_rows)
    ]["_id"]
    assert missing in {e.id for e in examples if e.meta["source"] == IRCOT}


def test_rows_respect_splits_json(real_data: Path) -> None:
    spec = json.loads((real_data / "splits.json").read_text(encoding="utf-8"))["files"]
    for dataset in DATASETS:
        eval_ids = {e.id for e in load_examples(dataset, "eval")}
        for split in ("train", "eval"):
            for example in load_examples(dataset, split):  # type: ignore[arg-type]
                ranges = spec[example.meta["source"]][split]
                assert ranges == "all" or any(a <= example.row < b for a, b in ranges)
                if split == "train":
                    assert example.id not in eval_ids, f"{dataset}: eval question in train"


def test_gold_in_candidates_and_corpus(real_data: Path) -> None:
    for dataset in ("hotpotqa", "2wiki", "musique"):
        for split in ("train", "eval"):
            for example in load_examples(dataset, split):  # type: ignore[arg-type]
                ids = [p.id for p in example.passages]
                assert len(ids) == len(set(ids))
                assert set(example.support) <= set(ids), example.id
    chunk_ids = {p.id for p in dsrag_corpus()}
    for dataset in ("dsrag-ranking", "dsrag-comparison"):
        for example in load_examples(dataset, "eval"):
            assert example.passages == ()
            assert set(example.support) <= chunk_ids
            # one gold group per gt_doc sentence (2-4 people), each a set of chunks holding it
            assert len(example.gold_sets) == len(example.meta["gt_doc"]) in (2, 3, 4)
            assert set().union(*example.gold_sets) == set(example.support)


def test_dsrag_gold_chunks_contain_their_sentence(real_data: Path) -> None:
    text = {p.id: p.text for p in dsrag_corpus()}
    example = load_examples("dsrag-ranking", "eval", limit=1)[0]
    for sentence, group in zip(example.meta["gt_doc"], example.gold_sets, strict=True):
        assert group == {pid for pid, chunk in text.items() if sentence in chunk}
    # retrieving one copy of every gold sentence gives perfect precision and recall
    context = [min(group) for group in example.gold_sets]
    assert context_precision(context, example.gold_sets) == 1.0
    assert context_recall(context, example.gold_sets) == 1.0


def test_dsrag_corpus_chunking(real_data: Path) -> None:
    corpus = dsrag_corpus()
    assert len(corpus) == 11592  # LangChain RecursiveCharacterTextSplitter(250, 50) agrees
    assert all(0 < len(p.text) <= 250 for p in corpus)
    assert corpus[0].text.startswith("Neil Armstrong's nationality is American.")
    assert corpus[0].id == "multisourceqa-00000"
    assert corpus[0].parent_id == "multisourceqa.txt"


def test_open_corpus(real_data: Path) -> None:
    examples = load_examples("hotpotqa", "eval")
    pool = open_corpus(examples)
    ids = [p.id for p in pool]
    assert len(ids) == len(set(ids)) == 3331  # 3,402 paragraphs, repeats pooled
    assert {s for e in examples for s in e.support} <= set(ids)
    musique = open_corpus(load_examples("musique", "eval"))
    assert len(musique) == 1623
    assert len(open_corpus(load_examples("dsrag-ranking", "eval", limit=3))) == 11592


def test_meta_is_read_only_and_fields(real_data: Path) -> None:
    example = load_examples("musique", "eval", limit=1)[0]
    assert isinstance(example, QAExample)
    assert example.meta["hops"] == len(example.meta["decomposition"]) == len(example.support)
    with pytest.raises(TypeError):
        example.meta["hops"] = 9  # type: ignore[index]
    wiki = load_examples("2wiki", "eval", limit=1)[0]
    assert wiki.meta["type"] in {"comparison", "bridge_comparison", "compositional", "inference"}
    assert load_examples("hotpotqa", "train", limit=5) == load_examples("hotpotqa", "train")[:5]


# ---------------------------------------------------------------------------- no real data


def test_empty_data_dir_raises_data_missing(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv(DATA_DIR_ENV, str(tmp_path))
    with pytest.raises(DataMissingError) as info:
        load_examples("hotpotqa", "eval")
    assert str(tmp_path) in str(info.value) and "splits.json" in str(info.value)
    assert isinstance(info.value, CorpusError)
    monkeypatch.setenv(DATA_DIR_ENV, str(tmp_path / "nowhere"))
    with pytest.raises(DataMissingError, match="nowhere"):
        data_dir()


def test_listed_file_missing(tmp_path: Path, monkeypatch) -> None:
    _write_json(tmp_path / "splits.json", {"files": {"musique/x.json": {"train": "all"}}})
    monkeypatch.setenv(DATA_DIR_ENV, str(tmp_path))
    with pytest.raises(DataMissingError, match=r"musique/x\.json"):
        load_examples("musique", "train")


def test_bad_arguments(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv(DATA_DIR_ENV, str(tmp_path))
    with pytest.raises(UserInputError, match="unknown dataset"):
        load_examples("squad", "train")  # type: ignore[arg-type]
    with pytest.raises(UserInputError, match="split"):
        load_examples("hotpotqa", "test")  # type: ignore[arg-type]
    with pytest.raises(UserInputError, match="limit"):
        load_examples("hotpotqa", "train", limit=-1)


def test_malformed_jsonl_row_names_file_and_row(tmp_path: Path, monkeypatch) -> None:
    bad = tmp_path / "hotpotqa" / "tmp" / "bad.jsonl"
    bad.parent.mkdir(parents=True)
    row = _standard_row("q0")
    bad.write_text(json.dumps(row) + "\n" + json.dumps(_standard_row("q1")), encoding="utf-8")
    _write_json(tmp_path / "splits.json", {"files": {"hotpotqa/tmp/bad.jsonl": {"train": "all"}}})
    monkeypatch.setenv(DATA_DIR_ENV, str(tmp_path))
    assert [e.id for e in load_examples("hotpotqa", "train")] == ["q0", "q1"]
    # an edited file is re-read (the caches are keyed by modification time and size)
    broken = {key: value for key, value in _standard_row("q1").items() if key != "context"}
    bad.write_text(json.dumps(row) + "\n" + json.dumps(broken) + "\n", encoding="utf-8")
    with pytest.raises(CorpusError) as info:
        load_examples("hotpotqa", "train")
    assert str(bad) in str(info.value) and "row 1" in str(info.value)
    bad.write_text(json.dumps(row) + "\n{not json\n", encoding="utf-8")
    with pytest.raises(CorpusError, match=r"row 1 of .*bad\.jsonl.*invalid JSON"):
        load_examples("hotpotqa", "train")


def test_malformed_json_list_row(tmp_path: Path, monkeypatch) -> None:
    rows = [
        {
            "id": "2hop__1_2",
            "question": "Q?",
            "answer": "A",
            "answer_aliases": [],
            "answerable": True,
            "question_decomposition": [],
            "paragraphs": [
                {"idx": 0, "title": "T", "paragraph_text": "x", "is_supporting": True},
                {"idx": 1, "title": "T", "paragraph_text": "y", "is_supporting": False},
            ],
        },
        {"id": "2hop__3_4", "question": "Q?", "answer": "A", "paragraphs": "oops"},
    ]
    _write_json(tmp_path / "musique" / "m.json", rows)
    _write_json(tmp_path / "splits.json", {"files": {"musique/m.json": {"train": [[0, 1]]}}})
    monkeypatch.setenv(DATA_DIR_ENV, str(tmp_path))
    with pytest.raises(CorpusError, match=r"malformed row 1 of .*m\.json.*paragraphs"):
        load_examples("musique", "train")


def test_synthetic_layouts_and_split_rules(tmp_path: Path, monkeypatch) -> None:
    # file A (eval rows 1..2) and file B (train) share question "q1": it stays out of train.
    standard = [_standard_row("q0"), _standard_row("q1")]
    (tmp_path / "hotpotqa").mkdir()
    (tmp_path / "hotpotqa" / "a.json").write_text(
        "\n".join(json.dumps(r) for r in standard), encoding="utf-8"
    )
    explorer = {
        "_id": "q1",
        "question": "Which?",
        "answer": "A",
        "title_a": "Zeta",
        "para_a": ["Zeta is last."],
        "title_b": "Alpha",
        "para_b": ["Alpha is a letter.", " It comes first."],
        "supporting_facts": [[0], [1]],
        "distractors": [["Mu", ["Mu is middle."], 1.5]],
    }
    _write_json(tmp_path / "hotpotqa" / "b.json", [explorer, {**explorer, "_id": "q2"}])
    _write_json(
        tmp_path / "splits.json",
        {
            "files": {
                "hotpotqa/a.json": {"train": [[0, 1]], "eval": [[1, 2]]},
                "hotpotqa/b.json": {"train": "all", "eval": []},
            }
        },
    )
    monkeypatch.setenv(DATA_DIR_ENV, str(tmp_path))
    train = load_examples("hotpotqa", "train")
    evaluation = load_examples("hotpotqa", "eval")
    assert [e.id for e in train] == ["q0", "q2"] and [e.id for e in evaluation] == ["q1"]
    q0, q2 = train
    assert [p.title for p in q0.passages] == ["Alpha", "Beta", "Gamma"]
    assert q0.passages[0].text == "Alpha is a letter. It comes first."
    assert q0.meta["supporting_facts"] == (("Alpha", 0), ("Beta", 1))
    # explorer layout: gold = title_a/title_b, candidates sorted by title (no position leak)
    assert [p.title for p in q2.passages] == ["Alpha", "Mu", "Zeta"]
    assert {p.title for p in q2.passages if p.id in q2.support} == {"Alpha", "Zeta"}
    # the same paragraph gets the same id in both layouts, so pools de-duplicate it
    assert q0.passages[0].id == q2.passages[0].id
    assert [p.title for p in open_corpus(train)] == ["Alpha", "Beta", "Gamma", "Mu", "Zeta"]
    assert q0.gold_sets == tuple(frozenset((s,)) for s in q0.support)


# ---------------------------------------------------------------------------- DS-RAG chunks


def test_splitter_hand_cases() -> None:
    # pieces "one"," two"," three"," four"," five"," six"," seven" (3,4,6,5,5,4,6 chars),
    # size 10 / overlap 4: "one two"(7) + " three" > 10 -> emit, pop "one" (left 4 <= 4);
    # " two three"(10) + " four" > 10 -> emit, pop both; "four five"; "six seven".
    assert split_text("one two three four five six seven", 10, 4) == [
        "one two",
        "two three",
        "four five",
        "six seven",
    ]
    # "\n\n" splits paragraphs first; the 21-char second paragraph is split by "\n", then " "
    assert split_text("para one.\n\npara two is longer\nline three", 12, 3) == [
        "para one.",
        "para two is",
        "is longer",
        "line three",
    ]
    # no separator left: single characters, windows of 5 sharing 2
    assert split_text("abcdefghijklmnop", 5, 2) == ["abcde", "defgh", "ghijk", "jklmn", "mnop"]
    assert split_text("  lead  and   trail  ", 8, 0) == ["lead", "and", "trail"]
    text = "one two three four five six seven"
    assert [text[a:b] for a, b in split_spans(text, 10, 4)] == split_text(text, 10, 4)
    with pytest.raises(UserInputError):
        split_text("x", 10, 10)


def _dsrag_folder(tmp_path: Path, corpus: str, questions: list[dict[str, Any]]) -> None:
    (tmp_path / "dsrag" / "corpus").mkdir(parents=True)
    (tmp_path / "dsrag" / "corpus" / "multisourceqa.txt").write_text(corpus, encoding="utf-8")
    _write_json(tmp_path / "dsrag" / "rankingqa" / "rankingqa_test.json", questions)
    _write_json(
        tmp_path / "splits.json",
        {"files": {"dsrag/rankingqa/rankingqa_test.json": {"train": [], "eval": "all"}}},
    )


def _question(*gold: str) -> dict[str, Any]:
    return {
        "combination": {"D": "born date", "C_values": ["A", "B"], "used_categories": []},
        "question": "Who was born first?",
        "gt_ans": "A",
        "gt_doc": list(gold),
    }


def test_dsrag_gold_mapping_rule(tmp_path: Path, monkeypatch) -> None:
    short = "Ann was born in 1901."  # appears twice: both copies are gold
    # 281 characters: longer than any chunk (250), so no chunk can hold it whole
    long = "Bob was born in 1902 in a small town by the sea, " + "far away " * 25 + "indeed."
    filler = " ".join(f"w{i:03d}" for i in range(60))
    corpus = f"{short} {filler} {long} {filler} {short}"
    _dsrag_folder(tmp_path, corpus, [_question(short, long)])
    monkeypatch.setenv(DATA_DIR_ENV, str(tmp_path))
    (example,) = load_examples("dsrag-ranking", "eval")
    spans = split_spans(corpus)
    ids = [f"multisourceqa-{n:05d}" for n in range(len(spans))]

    def expected(sentence: str) -> set[str]:
        # brute force: chunks holding an occurrence whole, else the largest overlap
        found: set[str] = set()
        start = corpus.find(sentence)
        while start != -1:
            end = start + len(sentence)
            whole = {ids[n] for n, (a, b) in enumerate(spans) if a <= start and end <= b}
            overlaps = [(min(b, end) - max(a, start), -n) for n, (a, b) in enumerate(spans)]
            found |= whole or {ids[-max(overlaps)[1]]}
            start = corpus.find(sentence, start + 1)
        return found

    short_gold, long_gold = example.gold_sets
    assert short_gold == expected(short) and len(short_gold) == 2  # two copies, two chunks
    # the long sentence sits whole in no chunk: the chunk with the largest overlap is gold
    assert not any(a <= corpus.find(long) and corpus.find(long) + len(long) <= b for a, b in spans)
    assert long_gold == expected(long) and len(long_gold) == 1
    assert example.id == "rankingqa_test-0" and example.meta["people"] == ("A", "B")
    assert [p.id for p in dsrag_corpus()] == ids


def test_dsrag_sentence_absent_from_corpus(tmp_path: Path, monkeypatch) -> None:
    questions = [_question("Ann was born in 1901."), _question("Nobody said this.")]
    _dsrag_folder(tmp_path, "Ann was born in 1901.", questions)
    monkeypatch.setenv(DATA_DIR_ENV, str(tmp_path))
    with pytest.raises(CorpusError, match=r"row 1 of .*rankingqa_test\.json.*not in the corpus"):
        load_examples("dsrag-ranking", "eval")

"""Tests of the synthetic multi-hop demo corpus."""

from __future__ import annotations

import json
import time
from collections import Counter
from pathlib import Path

import pytest

from dynakrag.data.demo_corpus import (
    DemoCorpus,
    demo_question,
    generate_demo_corpus,
    write_demo_corpus,
)
from dynakrag.data.demo_questions import DEMO_QUESTION_ID, DemoQuestion
from dynakrag.errors import UserInputError

SEEDS = (0, 1, 7, 42, 1234)


@pytest.fixture(scope="module")
def corpus() -> DemoCorpus:
    """The default demo corpus."""
    return generate_demo_corpus()


def _corpora() -> list[DemoCorpus]:
    """Corpora for several seeds and sizes."""
    out = [generate_demo_corpus(seed) for seed in SEEDS]
    out.append(generate_demo_corpus(3, n_companies=2, n_distractors=0))
    out.append(generate_demo_corpus(5, n_companies=40, n_distractors=200))
    return out


@pytest.fixture(scope="module")
def corpora() -> list[DemoCorpus]:
    """Corpora for several seeds and sizes."""
    return _corpora()


def test_same_seed_same_corpus() -> None:
    assert generate_demo_corpus(11) == generate_demo_corpus(11)


def test_different_seed_different_corpus() -> None:
    a, b = generate_demo_corpus(1), generate_demo_corpus(2)
    assert a.seed == 1 and b.seed == 2
    assert a.passages != b.passages
    assert a.questions != b.questions


def test_default_size(corpus: DemoCorpus) -> None:
    assert 60 <= len(corpus.passages) <= 100
    assert corpus.seed == 7


def test_generation_is_fast() -> None:
    start = time.perf_counter()
    generate_demo_corpus(99)
    assert time.perf_counter() - start < 1.0  # typically ~10 ms; loose bound for slow CI


def test_passage_shape_and_unique_ids(corpora: list[DemoCorpus]) -> None:
    for c in corpora:
        ids = [p["id"] for p in c.passages]
        assert len(ids) == len(set(ids))
        titles = [p["title"] for p in c.passages]
        assert len(titles) == len(set(titles))
        for p in c.passages:
            assert set(p) == {"id", "title", "text"}
            assert p["id"] == p["id"].lower() and " " not in p["id"]
            assert p["title"] in p["text"]
        qids = [q.id for q in c.questions]
        assert len(qids) == len(set(qids))


def test_passage_word_counts(corpora: list[DemoCorpus]) -> None:
    for c in corpora:
        for p in c.passages:
            assert 40 <= len(p["text"].split()) <= 90, p


def test_support_ids_exist(corpora: list[DemoCorpus]) -> None:
    for c in corpora:
        ids = {p["id"] for p in c.passages}
        for q in c.questions:
            assert q.support and set(q.support) <= ids, q
            assert len(set(q.support)) == len(q.support)


def test_answer_in_last_support_doc_only_after_hops(corpora: list[DemoCorpus]) -> None:
    for c in corpora:
        by_id = {p["id"]: p for p in c.passages}
        for q in c.questions:
            assert q.answer
            assert q.answer in by_id[q.support[-1]]["text"], q
            assert q.answer not in by_id[q.support[0]]["text"], q


def test_question_does_not_name_bridge_entities(corpora: list[DemoCorpus]) -> None:
    for c in corpora:
        by_id = {p["id"]: p for p in c.passages}
        for q in c.questions:
            if q.kind != "bridge":
                continue
            assert q.hops >= 2
            for doc_id in q.support[1:]:
                assert by_id[doc_id]["title"] not in q.question, (q, doc_id)
            assert q.answer not in q.question


def test_bridge_chain_links_each_hop(corpora: list[DemoCorpus]) -> None:
    """Each support doc names the entity of the next one, so the chain is followable."""
    for c in corpora:
        by_id = {p["id"]: p for p in c.passages}
        for q in c.questions:
            if q.kind != "bridge":
                continue
            for here, there in zip(q.support, q.support[1:], strict=False):
                assert by_id[there]["title"] in by_id[here]["text"], (q, here, there)


def test_comparison_questions(corpora: list[DemoCorpus]) -> None:
    for c in corpora:
        by_id = {p["id"]: p for p in c.passages}
        for q in (q for q in c.questions if q.kind == "comparison"):
            a, b = (by_id[d]["title"] for d in q.support)
            assert a in q.question and b in q.question
            assert q.answer == b


def test_hops_and_kinds(corpora: list[DemoCorpus]) -> None:
    for c in corpora:
        for q in c.questions:
            assert isinstance(q, DemoQuestion)
            assert 2 <= q.hops <= 4
            assert q.kind in {"bridge", "comparison"}
            if q.kind == "bridge":
                assert len(q.support) == q.hops
        assert {q.hops for q in c.questions} == {2, 3, 4}
        assert set(Counter(q.kind for q in c.questions)) == {"bridge", "comparison"}


def test_demo_question(corpora: list[DemoCorpus]) -> None:
    for c in corpora:
        q = demo_question(c)
        assert q.id == DEMO_QUESTION_ID
        assert q.kind == "bridge" and q.hops == 2
        assert "headquarters" in q.question


def test_write_demo_corpus_round_trips(corpus: DemoCorpus, tmp_path: Path) -> None:
    corpus_path, questions_path = write_demo_corpus(corpus, tmp_path / "demo")
    assert corpus_path.name == "corpus.jsonl" and questions_path.name == "questions.jsonl"
    passages = [json.loads(line) for line in corpus_path.read_text("utf-8").splitlines()]
    assert tuple(passages) == corpus.passages
    questions = [json.loads(line) for line in questions_path.read_text("utf-8").splitlines()]
    rebuilt = tuple(
        DemoQuestion(**{**record, "support": tuple(record["support"])}) for record in questions
    )
    assert rebuilt == corpus.questions


@pytest.mark.parametrize("kwargs", [{"n_companies": 1}, {"n_companies": 41}, {"n_distractors": -1}])
def test_bad_sizes_rejected(kwargs: dict[str, int]) -> None:
    with pytest.raises(UserInputError):
        generate_demo_corpus(**kwargs)

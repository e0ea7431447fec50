"""A pgvector collection in a real PostgreSQL (tests/postgres_server.py) holds what the FAISS
index holds and ranks a query's passages the same way; the CLI builds and asks it."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from dynakrag import cli
from dynakrag.cli import ask as ask_command
from dynakrag.data.demo import demo_passages
from dynakrag.data.demo_corpus import generate_demo_corpus
from dynakrag.errors import CorpusError, UserInputError
from dynakrag.llm.client import LLMClient
from dynakrag.retrieval.dense import DenseIndex
from dynakrag.retrieval.hybrid import HybridRetriever
from dynakrag.retrieval.passage import Passage
from dynakrag.retrieval.pgvector import PgVectorIndex, collection_url, split_collection_url
from dynakrag.retrieval.provenance import search_with_provenance
from dynakrag.routing.factory import build_searcher, open_index
from tests.fakes import HashedWords, demo_chat_model

CORPUS = generate_demo_corpus(7)
PASSAGES = [
    *demo_passages(CORPUS),
    Passage(id="chunk-1", title="", text="A chunk cut from a longer page.", parent_id="page-1"),
]
QUERIES = [q.question for q in CORPUS.questions[:25]]


def same_top_k(
    expected: Sequence[tuple[Passage, float]], got: Sequence[tuple[Passage, float]], k: int
) -> None:
    """The same passages at the same scores, best first. Passages whose scores tie may come
    in either order, and where a tie straddles rank ``k`` either member may be cut."""
    assert len(got) == len(expected) == k
    for (_, want), (_, have) in zip(expected, got, strict=True):
        assert have == pytest.approx(want, abs=1e-5)
    cut = expected[-1][1]
    above = {p.id for p, s in expected if s > cut + 1e-5}
    assert above == {p.id for p, s in got if s > cut + 1e-5}


@pytest.fixture
def collection(postgres_url: str) -> PgVectorIndex:
    index = PgVectorIndex.build(PASSAGES, HashedWords(), postgres_url, "demo", progress=False)
    yield index
    index.close()


def test_collection_urls_round_trip() -> None:
    url = collection_url("postgresql://u@h:5/db?sslmode=disable", "demo_2")
    assert split_collection_url(url) == ("postgresql://u@h:5/db?sslmode=disable", "demo_2")
    with pytest.raises(UserInputError, match="collection=NAME"):
        split_collection_url("postgresql://u@h:5/db")
    with pytest.raises(UserInputError, match="invalid collection name"):
        split_collection_url('postgresql://h/db?collection=x";drop table y;--')


@pytest.mark.postgres
def test_collection_holds_the_passages_of_the_faiss_index(
    collection: PgVectorIndex, postgres_url: str
) -> None:
    opened = PgVectorIndex.open(collection.url, HashedWords())
    try:
        assert opened.passages == DenseIndex.build(PASSAGES, HashedWords()).passages
        assert len(opened) == len(PASSAGES) and opened.dimension == 64
        assert opened.embedding_model_name == HashedWords.model_name
    finally:
        opened.close()


@pytest.mark.postgres
def test_same_top_10_as_faiss(collection: PgVectorIndex) -> None:
    faiss_index = DenseIndex.build(PASSAGES, HashedWords(), progress=False)
    opened = PgVectorIndex.open(collection.url, HashedWords())
    try:
        for query in QUERIES:
            same_top_k(faiss_index.search(query, 10), opened.search(query, 10), 10)
    finally:
        opened.close()


@pytest.mark.postgres
def test_hybrid_fuses_the_collection_with_bm25(collection: PgVectorIndex) -> None:
    searcher = build_searcher("hybrid", collection.passages, dense=collection)
    assert isinstance(searcher, HybridRetriever)
    hits, _ = search_with_provenance(searcher, QUERIES[0], 5)
    assert len(hits) == 5
    sources = {name for hit in hits for name, _, _ in hit.sources}
    assert sources == {"dense", "bm25"}
    reference = build_searcher(
        "hybrid", PASSAGES, dense=DenseIndex.build(PASSAGES, HashedWords(), progress=False)
    )
    assert {p.id for p, _ in searcher.search(QUERIES[0], 5)} == {
        p.id for p, _ in reference.search(QUERIES[0], 5)
    }


@pytest.mark.postgres
def test_opening_checks_the_collection_and_the_model(
    collection: PgVectorIndex, postgres_url: str
) -> None:
    with pytest.raises(CorpusError, match="no pgvector collection 'other'"):
        open_index(collection_url(postgres_url, "other"), HashedWords())

    class OtherModel(HashedWords):
        model_name = "another-model"

    with pytest.raises(CorpusError, match="another-model"):
        open_index(collection.url, OtherModel())


@pytest.mark.postgres
def test_a_rebuild_that_fails_leaves_no_openable_collection(
    collection: PgVectorIndex, postgres_url: str
) -> None:
    class Broken(HashedWords):
        def embed_documents(self, texts: list[str]) -> list[list[float]]:
            raise RuntimeError("embedding server went away")

    with pytest.raises(RuntimeError):
        PgVectorIndex.build(PASSAGES, Broken(), postgres_url, "demo", progress=False)
    with pytest.raises(CorpusError, match="no pgvector collection"):
        PgVectorIndex.open(collection.url, HashedWords())


@pytest.mark.postgres
def test_cli_builds_a_collection_and_ask_answers_from_it(
    tmp_path: Path,
    postgres_url: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setattr("dynakrag.retrieval.embeddings.default_embeddings", HashedWords)
    monkeypatch.delenv("DYNAKRAG_RETRIEVER", raising=False)
    corpus_file = tmp_path / "corpus.jsonl"
    corpus_file.write_text("".join(json.dumps(p.to_dict()) + "\n" for p in PASSAGES))
    build = ["index", "build", "--corpus", str(corpus_file), "--store", postgres_url]
    assert cli.main([*build, "--collection", "notes"]) == 0
    url = collection_url(postgres_url, "notes")
    assert url in capsys.readouterr().out
    assert cli.main([*build[:-2], "--out", str(tmp_path / "faiss")]) == 0

    question = CORPUS.questions[0]
    searchers: list[Any] = []
    real = ask_command._searcher_for

    def spy(*args: Any) -> Any:
        searchers.append(real(*args))
        return searchers[-1]

    monkeypatch.setattr(ask_command, "_searcher_for", spy)
    llm = demo_chat_model({question.question: question.answer})
    monkeypatch.setattr(ask_command, "make_llm", lambda cfg: LLMClient(llm))
    finals = []
    for index in (url, str(tmp_path / "faiss")):
        capsys.readouterr()
        assert cli.main(["ask", question.question, "--index", index, "--json"]) == 0
        finals.append(json.loads(capsys.readouterr().out))
    pgvector, faiss_index = searchers
    assert isinstance(pgvector, PgVectorIndex) and isinstance(faiss_index, DenseIndex)
    for query in QUERIES:
        same_top_k(faiss_index.search(query, 10), pgvector.search(query, 10), 10)
    assert finals[0]["answer"] == finals[1]["answer"]
    assert [d["id"] for d in finals[0]["evidence"]] == [d["id"] for d in finals[1]["evidence"]]
    assert finals[0]["evidence"][0]["retriever"] == "pgvector"
    pgvector.close()


def test_store_needs_a_collection(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["index", "build", "--corpus", "c.jsonl", "--store", "postgresql://h/db"]
    assert cli.main(argv) == 2
    assert "--collection" in capsys.readouterr().err

"""One searcher factory: every retriever by name, ``routed`` included, reachable from the
configuration, the graph, ``ask --corpus`` and ``eval --retriever``. Fake embeddings and fake
chat models only: no model is loaded."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, get_args

import pytest

from dynakrag import cli
from dynakrag.cli import ask as ask_command
from dynakrag.cli.parser import build_parser
from dynakrag.configuration import Configuration
from dynakrag.data.datasets import QAExample
from dynakrag.data.demo import demo_passages
from dynakrag.data.demo_corpus import DemoCorpus, generate_demo_corpus
from dynakrag.errors import ConfigurationError, UserInputError
from dynakrag.graph.builder import build_graph
from dynakrag.llm.client import LLMClient
from dynakrag.retrieval.dense import DenseIndex
from dynakrag.retrieval.hybrid import HybridRetriever
from dynakrag.retrieval.lexical import BM25Index
from dynakrag.retrieval.passage import Passage
from dynakrag.routing.factory import RETRIEVERS, build_searcher, needs_embeddings, pool_index_dir
from dynakrag.routing.retriever import (
    TIER_NAMES,
    RoutedSearcher,
    fit_idf_thresholds,
    passage_queries,
)
from tests.fakes import HashedWords, demo_chat_model

CORPUS = [
    Passage("zan", "Zanzibar", "Zanzibar is a city on an island with a river."),
    Passage("oslo", "Oslo", "Oslo is a city and the capital of Norway, on a river."),
    Passage("lima", "Lima", "Lima is a city and the capital of Peru, by a river."),
    Passage("rome", "Rome", "Rome is an old city on the river Tiber."),
    Passage("bern", "Bern", "Bern is a small city, the federal seat of Switzerland."),
]


@pytest.fixture(autouse=True)
def _no_models_no_settings(no_models: None, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in list(os.environ):
        if name.startswith("DYNAKRAG_"):
            monkeypatch.delenv(name)


@pytest.fixture(scope="module")
def corpus() -> DemoCorpus:
    return generate_demo_corpus(7)


def test_every_retriever_is_built_by_name() -> None:
    embeddings = HashedWords()
    kinds = {"dense": DenseIndex, "bm25": BM25Index, "hybrid": HybridRetriever}
    kinds["routed"] = RoutedSearcher
    assert set(kinds) == set(RETRIEVERS)
    for name in RETRIEVERS:
        searcher = build_searcher(name, CORPUS, embeddings=embeddings)
        assert isinstance(searcher, kinds[name]), name
        assert searcher.search("capital of Norway", 2)[0][0].id == "oslo", name
    assert [n for n in RETRIEVERS if needs_embeddings(n)] == ["dense", "hybrid", "routed"]
    with pytest.raises(UserInputError, match="unknown retriever 'splade'"):
        build_searcher("splade", CORPUS)


def test_bm25_needs_no_embedding_model() -> None:
    # The no_models fixture fails any attempt to load MiniLM.
    assert isinstance(build_searcher("bm25", CORPUS), BM25Index)


def test_routed_thresholds_come_from_the_corpus_or_the_given_questions() -> None:
    embeddings = HashedWords()
    routed = build_searcher("routed", CORPUS, embeddings=embeddings)
    assert isinstance(routed, RoutedSearcher) and routed.tier_names == TIER_NAMES
    bm25 = routed.difficulty.bm25
    on_corpus = routed.thresholds
    assert on_corpus is not None and on_corpus.source == "corpus first sentences"
    assert on_corpus.n == len(CORPUS) and on_corpus.details["corpus_size"] == len(CORPUS)
    expected = fit_idf_thresholds(passage_queries(CORPUS), bm25, source=on_corpus.source)
    assert on_corpus == expected

    questions = ["Which city is the capital of Peru?", "What river runs through Rome?"]
    asked = build_searcher("routed", CORPUS, embeddings=embeddings, train_questions=questions)
    assert isinstance(asked, RoutedSearcher) and asked.thresholds is not None
    assert asked.thresholds.source == "train questions" and asked.thresholds.n == 2
    assert asked.thresholds.values == fit_idf_thresholds(questions, bm25).values

    given = build_searcher("routed", CORPUS, embeddings=embeddings, thresholds=on_corpus)
    assert isinstance(given, RoutedSearcher) and given.thresholds is on_corpus


def test_a_dense_index_dir_is_saved_then_loaded(tmp_path: Path) -> None:
    embeddings = HashedWords()
    build_searcher("routed", CORPUS, embeddings=embeddings, index_dir=tmp_path / "idx")
    assert embeddings.calls == len(CORPUS)
    again = build_searcher("hybrid", CORPUS, embeddings=embeddings, index_dir=tmp_path / "idx")
    assert embeddings.calls == len(CORPUS)  # loaded, not embedded again
    assert again.search("Oslo", 1)[0][0].id == "oslo"


def test_configuration_retriever_defaults_to_dense_and_is_validated() -> None:
    assert Configuration().retriever == "dense"
    assert get_args(Configuration.model_fields["retriever"].annotation) == RETRIEVERS
    assert Configuration.from_env(retriever="routed").retriever == "routed"
    with pytest.raises(ConfigurationError, match="retriever"):
        Configuration.from_env(retriever="splade")


def test_the_graph_runs_over_a_routed_searcher(corpus: DemoCorpus) -> None:
    cfg = Configuration(retriever="routed")
    searcher = build_searcher(cfg.retriever, demo_passages(corpus), embeddings=HashedWords())
    assert isinstance(searcher, RoutedSearcher)
    q = corpus.questions[0]
    answers = {q.question: q.answer}
    graph = build_graph(searcher, configuration=cfg, llm=LLMClient(demo_chat_model(answers)))
    final = graph.invoke({"question": q.question})
    assert final["retrieval_calls"] >= 1 and final["evidence"]
    # The run ends with an answer, or (abstention on) no answer with its reason.
    assert final["answer"].strip() or final["abstain_reason"]
    decisions = searcher.log.decisions
    assert len(decisions) == final["retrieval_calls"]
    assert decisions[0].query == q.question and decisions[0].router == "retriever"
    # Provenance names the tier each document came from.
    assert {doc["retriever"] for doc in final["evidence"]} <= {
        f"routed:{tier}" for tier in TIER_NAMES
    }


def test_eval_and_collect_accept_the_routed_retriever() -> None:
    parser = build_parser()
    eval_args = ["eval", "--dataset", "hotpotqa", "--method", "naive", "--out", "run.json"]
    assert parser.parse_args([*eval_args, "--retriever", "routed"]).retriever == "routed"
    # No flag: the configuration's retriever ("dense" unless DYNAKRAG_RETRIEVER says otherwise).
    assert parser.parse_args(eval_args).retriever is None
    collect = parser.parse_args(
        ["collect", "--dataset", "demo", "--out", "x.jsonl", "--retriever", "routed"]
    )
    assert collect.retriever == "routed"


def test_ask_over_a_corpus_uses_the_configured_retriever(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    corpus_file = tmp_path / "corpus.jsonl"
    corpus_file.write_text(
        "".join(json.dumps({"id": p.id, "title": p.title, "text": p.text}) + "\n" for p in CORPUS)
    )
    monkeypatch.setenv("DYNAKRAG_RETRIEVER", "routed")
    monkeypatch.setattr("dynakrag.retrieval.embeddings.default_embeddings", HashedWords)
    built: list[Any] = []
    real = ask_command._searcher_for

    def spy(*args: Any) -> Any:
        built.append(real(*args))
        return built[-1]

    monkeypatch.setattr(ask_command, "_searcher_for", spy)
    monkeypatch.setattr(ask_command, "make_llm", lambda cfg: LLMClient(demo_chat_model({})))
    argv = ["ask", "What is the capital of Norway?", "--corpus", str(corpus_file)]
    assert cli.main(argv) == 0
    assert isinstance(built[0], RoutedSearcher) and built[0].log.decisions
    out = capsys.readouterr().out
    assert "Answer:" in out or "No answer:" in out


def test_a_collections_pool_index_is_kept_and_loaded_by_the_next_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from dynakrag.retrieval import embeddings as embeddings_module
    from dynakrag.training.searchers import collection_searcher_factory

    embeddings = HashedWords()
    monkeypatch.setattr(embeddings_module, "default_embeddings", lambda: embeddings)
    example = QAExample(
        id="q",
        question="",
        answers=(),
        support=(),
        passages=(),
        dataset="t",
        row=0,
        split="train",
    )
    first = collection_searcher_factory("dense", CORPUS, index_root=tmp_path)(example)
    assert embeddings.calls == len(CORPUS)
    assert [p.name for p in (tmp_path / "eval-indexes").iterdir()] == [
        pool_index_dir(tmp_path, "collect", CORPUS, embeddings).name
    ]
    again = collection_searcher_factory("dense", CORPUS, index_root=tmp_path)(example)
    assert embeddings.calls == len(CORPUS)  # the next run loads the pool, embeds nothing
    assert again.search("Oslo", 1)[0][0].id == first.search("Oslo", 1)[0][0].id == "oslo"
    other = [*CORPUS[:-1]]  # another pool: another index
    collection_searcher_factory("dense", other, index_root=tmp_path)(example)
    assert embeddings.calls == 2 * len(CORPUS) - 1

"""The DS-RAG evaluation methods and graph options, end to end with deterministic fakes.

No model loads: the reader is a :class:`ScriptedChatModel`, retrieval is keyword overlap
(``tests.fakes.KeywordSearcher``) or BM25, and the GS selector is a small untrained model over
hashed bag-of-words vectors, saved to a file and named by ``Configuration(selector=...)`` as a
user would. Untrained, the GS model scores exactly as the cosine of a criterion's anchor text
and a chunk (zero gates, zero-initialised projection), so which chunk each criterion takes is
predictable.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from langchain_core.messages import BaseMessage

from dynakrag import prompts
from dynakrag.configuration import Configuration
from dynakrag.data.datasets import QAExample
from dynakrag.dsrag.epqd import rule_decompose
from dynakrag.dsrag.text_encoder import TextEncoder
from dynakrag.eval import runner
from dynakrag.eval.methods import METHODS, Method, MethodResult, get_method
from dynakrag.eval.methods import dsrag as dsrag_methods
from dynakrag.eval.methods.base import method_configuration
from dynakrag.eval.methods.dsrag import (
    ORIGINAL_QUESTION_K,
    RERANK_TOP_K,
    SUB_QUESTION_K,
    DsragMethod,
    EPQDRerankOriginalQMethod,
    EPQDRerankSubQMethod,
    NonQDRerankMethod,
)
from dynakrag.llm.client import LLMClient
from dynakrag.llm.fake import ScriptedChatModel
from dynakrag.retrieval.passage import Passage
from tests.fakes import (
    HashedWords,
    KeywordSearcher,
    ScriptedPolicy,
    passages_in,
    prompt_kind,
    tiny_selector_file,
)
from tests.joint import JOINT

DIM = 64
METHOD_NAMES = ("dsrag", "nonqd-rerank", "epqd-rerank-subq", "epqd-rerank-origq")

TWO_PEOPLE = (
    "Who has the earliest birth date for Taylor Swift or Neil Armstrong, who grew up in Wapakoneta?"
)
THREE_PEOPLE = "Who has the earliest birth date for Taylor Swift, Rihanna or Neil Armstrong?"
ANSWER = "Neil Armstrong"

CORPUS = [
    Passage("swift-born", "", "Taylor Swift's birth date is December 13, 1989."),
    Passage("swift-music", "", "Taylor Swift is an American singer and songwriter."),
    Passage("armstrong-born", "", "Neil Armstrong's birth date is August 5, 1930."),
    Passage("armstrong-home", "", "Neil Armstrong grew up in Wapakoneta, Ohio."),
    Passage("armstrong-moon", "", "Neil Armstrong walked on the moon in 1969."),
    Passage("rihanna-born", "", "Rihanna's birth date is February 20, 1988."),
    Passage("rihanna-home", "", "Rihanna grew up in Barbados."),
    Passage("wapakoneta", "", "Wapakoneta is a city in Ohio with an early fair."),
    Passage("dates", "", "The earliest birth date has the lowest year."),
    Passage("moon", "", "The moon has no weather."),
]


class EmptySearcher:
    """A retriever that finds nothing (an empty candidate set)."""

    def search(self, query: str, k: int) -> list[tuple[Passage, float]]:
        return []


@pytest.fixture(scope="module")
def selector_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny GS selector file over :class:`HashedWords` (untrained: anchor-text cosine)."""
    return tiny_selector_file(tmp_path_factory.mktemp("gs"), DIM)


@pytest.fixture(autouse=True)
def _no_real_models(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every encoder is the hashed-words fake; loading MiniLM or the LLM fails the test."""

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("a real model was about to load")

    monkeypatch.setattr("dynakrag.retrieval.embeddings._load_minilm", refuse)
    monkeypatch.setattr("dynakrag.llm.factory.chat_model_from_config", refuse)
    # GraphSelector.load builds its encoder from default_embeddings(): the selector file's
    # encoder name must match, so the fake stands in for MiniLM there.
    monkeypatch.setattr(
        "dynakrag.retrieval.embeddings.default_embeddings", lambda **_: HashedWords(DIM)
    )
    monkeypatch.setattr(dsrag_methods, "_rerank_encoder", lambda: TextEncoder(HashedWords(DIM)))


def config(selector_path: Path, **overrides: Any) -> Configuration:
    values: dict[str, Any] = {"dsrag_extraction": "rules", "selector": str(selector_path)}
    return Configuration(**{**values, **overrides})


Responder = Callable[[list[BaseMessage]], str]


def reader(log: list[str] | None = None) -> Responder:
    """Answers the final-answer prompt (the answer only when a passage states Armstrong's
    birth year); any other prompt is unexpected under ``dsrag_extraction="rules"``."""

    def respond(messages: list[BaseMessage]) -> str:
        system, last = prompt_kind(messages), str(messages[-1].content)
        if log is not None:
            log.append(system)
        if system == prompts.ANSWER:
            return ANSWER if "1930" in passages_in(last) else prompts.INSUFFICIENT_EVIDENCE
        raise AssertionError(f"unexpected prompt: {system[:60]}")

    return respond


def llm_of(respond: Responder) -> LLMClient:
    return LLMClient(ScriptedChatModel(respond=respond), max_retries=0)


def run(
    method: Method,
    selector_path: Path,
    question: str = TWO_PEOPLE,
    searcher: Any = None,
    respond: Responder | None = None,
    **cfg: Any,
) -> MethodResult:
    return method.run(
        question,
        searcher if searcher is not None else KeywordSearcher(CORPUS),
        llm_of(respond or reader()),
        config(selector_path, **cfg),
    )


def check_accounting(result: MethodResult) -> None:
    for counter in ("retrieval_calls", "llm_calls", "prompt_tokens", "completion_tokens"):
        value = getattr(result, counter)
        assert isinstance(value, int) and value >= 0, counter
    ids = [doc["id"] for doc in result.evidence]
    assert len(ids) == len(set(ids)), "a chunk is in the context twice"


def mentions(evidence: Sequence[dict[str, str]], name: str) -> bool:
    return any(name in doc["text"] for doc in evidence)


# --- the four methods -----------------------------------------------------------------------


def test_the_four_methods_are_registered() -> None:
    assert {name: METHODS[name] for name in METHOD_NAMES} == {
        "dsrag": DsragMethod,
        "nonqd-rerank": NonQDRerankMethod,
        "epqd-rerank-subq": EPQDRerankSubQMethod,
        "epqd-rerank-origq": EPQDRerankOriginalQMethod,
    }


def test_importing_the_dsrag_methods_first_registers_them() -> None:
    # The registry lists the DS-RAG methods; importing their module first used to fail with a
    # circular ImportError (when they registered themselves in METHODS).
    code = (
        "import dynakrag.eval.methods.dsrag\n"
        "from dynakrag.eval.methods import METHODS, get_method\n"
        "print(sorted(METHODS), get_method('dsrag').name)"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert all(f"'{name}'" in done.stdout for name in METHOD_NAMES)


def test_dsrag_keeps_one_chunk_per_criterion(selector_path: Path) -> None:
    result = run(DsragMethod(), selector_path)
    details = result.details
    subs = rule_decompose(TWO_PEOPLE).sub_questions
    assert details["sub_questions"] == list(subs) and details["decomposition"] == "rules"
    # Two people: two criteria (birth date -> Taylor Swift, birth date -> Neil Armstrong ...).
    assert details["core"] == "birth date" and details["criteria_fallback"] is None
    assert len(details["criteria"]) == 2 and details["dics_mode"] == "criteria"
    assert len(result.evidence) == 2
    assert mentions(result.evidence, "Taylor Swift") and mentions(result.evidence, "Armstrong")
    assert details["candidates"] >= len(result.evidence)
    # One retrieval per sub-question; the ranking is answered from the birth dates the
    # passages state, in code: no model call.
    assert result.retrieval_calls == len(subs) == 3
    assert result.llm_calls == 0 and result.actions == [
        "epqd",
        "retrieve_per_sub_question",
        "dics",
        "answer_from_values",
    ]
    assert result.prediction == ANSWER
    check_accounting(result)


def test_dsrag_context_grows_with_the_number_of_people(selector_path: Path) -> None:
    result = run(DsragMethod(), selector_path, THREE_PEOPLE)
    assert len(result.details["criteria"]) == 3 and len(result.evidence) == 3
    for name in ("Taylor Swift", "Rihanna", "Armstrong"):
        assert mentions(result.evidence, name), name
    assert result.retrieval_calls == len(rule_decompose(THREE_PEOPLE).sub_questions)


def test_nonqd_rerank_keeps_four_of_seven(selector_path: Path) -> None:
    searcher = KeywordSearcher(CORPUS)
    result = run(NonQDRerankMethod(), selector_path, searcher=searcher)
    assert searcher.calls == [(TWO_PEOPLE, ORIGINAL_QUESTION_K)]
    assert result.details["candidates"] == ORIGINAL_QUESTION_K
    assert len(result.evidence) == RERANK_TOP_K == 4
    assert result.retrieval_calls == 1 and result.llm_calls == 1
    check_accounting(result)


def test_epqd_rerank_subq_keeps_one_chunk_per_sub_question(selector_path: Path) -> None:
    searcher = KeywordSearcher(CORPUS)
    result = run(EPQDRerankSubQMethod(), selector_path, searcher=searcher)
    subs = result.details["sub_questions"]
    assert [query for query, _ in searcher.calls] == subs
    assert all(k == SUB_QUESTION_K for _, k in searcher.calls)
    assert result.retrieval_calls == len(subs) == 3
    # One chunk a sub-question; a chunk chosen twice counts once.
    assert 1 <= len(result.evidence) <= len(subs)
    check_accounting(result)


def test_epqd_rerank_origq_keeps_the_top_four_of_the_pool(selector_path: Path) -> None:
    result = run(EPQDRerankOriginalQMethod(), selector_path)
    subs = result.details["sub_questions"]
    assert result.retrieval_calls == len(subs) == 3
    assert result.details["candidates"] >= RERANK_TOP_K
    assert len(result.evidence) == RERANK_TOP_K
    check_accounting(result)


@pytest.mark.parametrize("name", METHOD_NAMES)
def test_no_answer_makes_no_model_call(name: str, selector_path: Path) -> None:
    result = run(METHODS[name](no_answer=True), selector_path)
    assert result.prediction == "" and "answer" not in result.actions
    assert result.llm_calls == result.prompt_tokens == result.completion_tokens == 0
    assert result.evidence
    check_accounting(result)


def test_dsrag_answers_a_ranking_from_the_values_with_their_passages(selector_path: Path) -> None:
    result = run(DsragMethod(), selector_path, THREE_PEOPLE)
    assert result.prediction == ANSWER and result.llm_calls == 0
    record = result.details["value_answer"]
    assert record["status"] == "answered" and record["chosen"] == [ANSWER]
    assert {(v["entity"], v["passage"], v["parsed"]) for v in record["values"]} == {
        ("Taylor Swift", "swift-born", "1989-12-13"),
        ("Rihanna", "rihanna-born", "1988-02-20"),
        ("Neil Armstrong", "armstrong-born", "1930-08-05"),
    }
    assert sorted(result.answer_citations) == ["armstrong-born", "rihanna-born", "swift-born"]
    assert record["ordered"] == ["Neil Armstrong", "Rihanna", "Taylor Swift"]


def test_dsrag_answers_a_comparison_of_nationalities(selector_path: Path) -> None:
    corpus = [
        *CORPUS,
        Passage("swift-nation", "", "Taylor Swift's nationality is American."),
        Passage("rihanna-nation", "", "Rihanna's nationality is Barbadian."),
    ]
    for cue, answer in (("the same", "no"), ("different", "yes")):
        question = f"Is nationality of Taylor Swift and Rihanna {cue}?"
        result = run(DsragMethod(), selector_path, question, searcher=KeywordSearcher(corpus))
        assert result.prediction == answer, cue
        values = result.details["value_answer"]["values"]
        assert [(v["value"], v["passage"]) for v in values] == [
            ("American", "swift-nation"),
            ("Barbadian", "rihanna-nation"),
        ]


def test_an_entity_missing_from_the_corpus_gets_an_answer_that_says_so(
    selector_path: Path,
) -> None:
    question = "Who has the earliest birth date for Taylor Swift, Beyonce or Neil Armstrong?"
    searcher = KeywordSearcher(CORPUS)
    result = run(DsragMethod(), selector_path, question, searcher=searcher)
    assert result.prediction == (
        "Cannot answer: no selected passage states the birth date of Beyonce"
    )
    assert result.llm_calls == 0 and result.details["value_answer"]["missing"] == ["Beyonce"]
    # One more search looked for the missing fact before the answer gave up, with the word a
    # sentence states it by ("was born on": a term search for "birth date" misses it).
    assert searcher.calls[-1] == ("Beyonce birth date born", dsrag_methods.FACT_SEARCH_K)
    check_accounting(result)


def test_a_ranking_without_rankable_values_says_what_is_missing(selector_path: Path) -> None:
    corpus = [p for p in CORPUS if not p.id.endswith("-born")]
    result = run(DsragMethod(), selector_path, THREE_PEOPLE, searcher=KeywordSearcher(corpus))
    assert result.prediction.startswith("Cannot answer: no selected passage states the birth")
    assert set(result.details["value_answer"]["missing"]) == {
        "Taylor Swift",
        "Rihanna",
        "Neil Armstrong",
    }
    assert result.llm_calls == 0
    check_accounting(result)


# --- bad input never raises ------------------------------------------------------------------


@pytest.mark.parametrize("name", METHOD_NAMES)
def test_an_empty_candidate_set_never_raises(name: str, selector_path: Path) -> None:
    result = run(METHODS[name](), selector_path, searcher=EmptySearcher())
    assert result.evidence == []
    assert result.prediction == prompts.INSUFFICIENT_EVIDENCE  # no passages: no model call
    assert result.llm_calls == 0
    expected_calls = 1 if name == "nonqd-rerank" else 3
    assert result.retrieval_calls == expected_calls
    if name == "dsrag":
        assert result.details["dics_mode"] == "empty"
    check_accounting(result)


@pytest.mark.parametrize("name", METHOD_NAMES)
def test_an_empty_question_never_raises(name: str, selector_path: Path) -> None:
    result = run(METHODS[name](), selector_path, question="")
    check_accounting(result)


def test_replies_that_are_not_json_fall_back_to_the_rules(selector_path: Path) -> None:
    seen: list[str] = []
    answer = reader()

    def chatty(messages: list[BaseMessage]) -> str:
        system = prompt_kind(messages)
        seen.append(system)
        if system == prompts.ANSWER:
            return answer(messages)
        return "Sure! Here are the sub-questions you asked for, in prose."

    result = run(DsragMethod(), selector_path, respond=chatty, dsrag_extraction="llm")
    details = result.details
    # The one question analysis was asked once and fell back to the whole rule path.
    assert details["decomposition"] == "fallback"
    assert details["sub_questions"] == list(rule_decompose(TWO_PEOPLE).sub_questions)
    assert seen.count(prompts.ANALYSIS_SYSTEM) == 1
    assert prompts.EPQD_SYSTEM not in seen and prompts.DSRAG_ENTITY_SYSTEM not in seen
    assert len(details["criteria"]) == 2 and len(result.evidence) == 2
    # The failed request is still accounted; the answer is computed from the values.
    assert result.llm_calls == 1 and result.prediction == ANSWER
    check_accounting(result)


def test_a_failing_model_never_raises(selector_path: Path) -> None:
    def broken(messages: list[BaseMessage]) -> str:
        raise ConnectionError("model down")

    for name in METHOD_NAMES:
        result = run(METHODS[name](), selector_path, respond=broken, dsrag_extraction="llm")
        # DS-RAG computes the ranking from the passages' values: it needs no model.
        expected = ANSWER if name == "dsrag" else prompts.INSUFFICIENT_EVIDENCE
        assert result.prediction == expected, name
        assert result.evidence, name
        check_accounting(result)


# --- through evaluate() ---------------------------------------------------------------------


def _example(row: int, question: str, gold: Sequence[Sequence[str]]) -> QAExample:
    return QAExample(
        id=f"q{row}",
        question=question,
        answers=(ANSWER,),
        support=tuple(pid for group in gold for pid in group),
        passages=(),
        dataset="dsrag-ranking",
        row=row,
        split="eval",
        meta={"people": (), "gold_groups": tuple(tuple(group) for group in gold)},
    )


EXAMPLES = [
    _example(0, TWO_PEOPLE, [["swift-born"], ["armstrong-born"], ["armstrong-home"]]),
    _example(1, THREE_PEOPLE, [["swift-born"], ["rihanna-born"], ["armstrong-born"]]),
]


def evaluate_examples(
    monkeypatch: pytest.MonkeyPatch, name: str, selector_path: Path, tmp_path: Path, **kwargs: Any
) -> dict[str, Any]:
    """``runner.evaluate`` of method ``name`` on EXAMPLES over CORPUS (open setting)."""
    monkeypatch.setattr(runner, "load_examples", lambda dataset, split: list(EXAMPLES))
    monkeypatch.setattr(runner, "open_corpus", lambda pool: list(CORPUS))
    return runner.evaluate(
        "dsrag-ranking",
        "eval",
        "open",
        name,
        cfg=config(selector_path, cache_dir=tmp_path),
        chat_model=ScriptedChatModel(respond=reader()),
        progress=False,
        **kwargs,
    )


@pytest.mark.parametrize("name", METHOD_NAMES)
def test_evaluate_records_context_metrics(
    name: str, selector_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The two questions above, retrieving from CORPUS with BM25 in the open setting.
    result = evaluate_examples(monkeypatch, name, selector_path, tmp_path, retriever="bm25")
    records = result["questions"]
    assert [r["id"] for r in records] == [0, 1]
    for record in records:
        for key in ("context_precision", "context_recall", "context_f1", "anls"):
            assert 0.0 <= record[key] <= 1.0, key
        assert record["num_chunks"] == len(record["evidence"])
        assert record["retrieval_calls"] >= 1 and record["llm_calls"] >= 0
    sub_counts = [len(rule_decompose(ex.question).sub_questions) for ex in EXAMPLES]
    if name == "dsrag":
        assert [r["num_chunks"] for r in records] == [2, 3]  # one chunk per person
    elif name == "nonqd-rerank":
        assert all(r["num_chunks"] == 4 and r["retrieval_calls"] == 1 for r in records)
    elif name == "epqd-rerank-subq":
        assert all(r["num_chunks"] <= n for r, n in zip(records, sub_counts, strict=True))
    else:
        assert all(r["num_chunks"] == 4 for r in records)
    if name != "nonqd-rerank":
        assert [r["retrieval_calls"] for r in records] == sub_counts
    summary = result["summary"]
    assert summary["n"] == 2
    assert summary["anc"] == pytest.approx(np.mean([r["num_chunks"] for r in records]))
    assert result["meta"]["configuration"]["dsrag_extraction"] == "rules"
    assert result["meta"]["llm_cache"]["enabled"]


def test_dsrag_methods_search_with_bm25_unless_the_user_picks_a_retriever(
    selector_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("DYNAKRAG_RETRIEVER", raising=False)
    method = get_method("dsrag")
    assert method_configuration(method, Configuration()).retriever == "bm25"
    # A choice made in code, in the environment, or kept through merged() is honoured.
    assert method_configuration(method, Configuration(retriever="dense")).retriever == "dense"
    monkeypatch.setenv("DYNAKRAG_RETRIEVER", "hybrid")
    chosen = Configuration.from_env().merged({"seed": 3})
    assert method_configuration(method, chosen).retriever == "hybrid"
    # Methods without a retriever of their own keep the configuration's default.
    assert method_configuration(get_method("naive"), Configuration()).retriever == "dense"

    monkeypatch.delenv("DYNAKRAG_RETRIEVER")
    result = evaluate_examples(monkeypatch, "dsrag", selector_path, tmp_path)
    assert result["meta"]["retriever"] == "bm25"


# --- the graph: compression="dics", decomposition="epqd" ---------------------------------------


def graph_responder(checked: list[list[str]]) -> Responder:
    """The reader, plus a sufficiency check that records its sub-questions and knows nothing."""
    answer = reader()

    def respond(messages: list[BaseMessage]) -> str:
        system, last = prompt_kind(messages), str(messages[-1].content)
        if system == prompts.SUFFICIENCY:
            lines = re.findall(r"^\d+\. (.*)$", last, flags=re.MULTILINE)
            checked.append(lines)
            return json.dumps({"answers": [prompts.UNKNOWN] * len(lines)})
        if system == prompts.DECOMPOSE:
            raise AssertionError("decomposition='epqd' must not use the default decomposition")
        return answer(messages)

    return respond


def test_graph_with_dics_compression_and_epqd_decomposition(selector_path: Path) -> None:
    from dynakrag import build_graph

    checked: list[list[str]] = []
    # The joint check: it asks EPQD's parts in one call (a chain asks them hop by hop and DICS
    # takes its hops as the criteria).
    cfg = config(
        selector_path, compression="dics", decomposition="epqd", docs_per_action=8, **JOINT
    )
    graph = build_graph(
        KeywordSearcher(CORPUS),
        ScriptedChatModel(respond=graph_responder(checked)),
        policy=ScriptedPolicy(),
        configuration=cfg,
    )
    final = graph.invoke({"question": TWO_PEOPLE})
    actions = [entry["action"] for entry in final["trace"]]
    assert actions == list(ScriptedPolicy.order)

    # sufficiency_check asked about the EPQD sub-questions (rule path: no model call).
    subs = list(rule_decompose(TWO_PEOPLE).sub_questions)
    assert checked == [subs]
    assert [sub["question"] for sub in final["sub_questions"]] == subs

    # compress_answer_evidence kept one passage per criterion and recorded the criteria.
    entry = final["trace"][actions.index("compress_answer_evidence")]
    assert entry["dics_mode"] == "criteria" and entry["criteria_fallback"] is None
    assert len(entry["criteria"]) == 2 and all("birth date" in c for c in entry["criteria"])
    assert len(final["evidence"]) == 2 == len(entry["kept"])
    assert entry["dropped"] > 0
    assert mentions(final["evidence"], "Taylor Swift") and mentions(final["evidence"], "Armstrong")
    assert entry["llm_calls"] == 0  # rules: the criteria cost no model call
    assert final["trace"][-1]["action"] == "stop_answer"
    assert final["answer"] or final["abstain_reason"]  # abstention on: a reasoned no-answer


def test_graph_dics_without_sub_questions_runs_epqd_itself(selector_path: Path) -> None:
    from dynakrag import build_graph

    class RetrieveThenCompress(ScriptedPolicy):
        order = ("retrieve_more", "compress_answer_evidence", "stop_answer")

    # Joint answering: with a chain, the run would have to check before it compresses, and the
    # check's decomposition would hand DICS its sub-questions.
    cfg = config(selector_path, compression="dics", docs_per_action=8,
                 sub_question_answering="joint")  # fmt: skip
    graph = build_graph(
        KeywordSearcher(CORPUS),
        ScriptedChatModel(respond=reader()),
        policy=RetrieveThenCompress(),
        configuration=cfg,
    )
    final = graph.invoke({"question": THREE_PEOPLE})
    entry = next(e for e in final["trace"] if e["action"] == "compress_answer_evidence")
    assert len(entry["criteria"]) == 3 and len(final["evidence"]) == 3


def test_dics_compression_of_empty_evidence_never_raises(selector_path: Path) -> None:
    # The validity layer never offers compression without evidence; the action copes anyway.
    from dynakrag.actions.common import Resources
    from dynakrag.actions.compress_answer_evidence import compress_answer_evidence

    resources = Resources(searcher=EmptySearcher(), llm=llm_of(reader()))
    state: Any = {"question": TWO_PEOPLE, "evidence": [], "trace": []}
    update = compress_answer_evidence(state, resources, config(selector_path, compression="dics"))
    entry = update["trace"][0]
    assert update["evidence"] == [] and entry["dics_mode"] == "empty"
    assert len(entry["criteria"]) == 2
    assert "next_action" not in update  # the fixed edge to stop_answer is the graph's record

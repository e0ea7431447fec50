"""DICS as the graph's compression step: criteria from the controller's sub-questions, one
passage per criterion, the passages of verified sub-answers, the trace, and the model calls.

No model loads: the generator is a :class:`ScriptedChatModel`, retrieval is keyword overlap,
and the GS selector is an untrained model over hashed bag-of-words vectors (it scores as the
cosine of a criterion's anchor text and a passage).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import BaseMessage

from dynakrag import build_graph, prompts
from dynakrag.configuration import Configuration
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
from tests.joint import joint_configuration

DIM = 64
QUESTION = "Who is older, Taylor Swift or Neil Armstrong?"
SUBS = ["When was Taylor Swift born?", "When was Neil Armstrong born?"]
CORPUS = [
    Passage("swift-born", "", "Taylor Swift's birth date is December 13, 1989."),
    Passage("swift-music", "", "Taylor Swift is an American singer and songwriter."),
    Passage("armstrong-born", "", "Neil Armstrong's birth date is August 5, 1930."),
    Passage("armstrong-moon", "", "Neil Armstrong walked on the moon in 1969."),
    Passage("older", "", "Who is older is a question of birth dates."),
]


@pytest.fixture(scope="module")
def selector_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tiny_selector_file(tmp_path_factory.mktemp("gs"), DIM)


@pytest.fixture(autouse=True)
def _no_real_models(no_models: None, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(
        "dynakrag.retrieval.embeddings.default_embeddings", lambda **_: HashedWords(DIM)
    )


class Model:
    """Decomposes into SUBS, knows Swift's birth date only, analyses as the rules would not
    (one target per person), answers when Armstrong's birth year is in the passages."""

    def __init__(self) -> None:
        self.seen: list[str] = []

    def __call__(self, messages: list[BaseMessage]) -> str:
        kind, last = prompt_kind(messages), str(messages[-1].content)
        self.seen.append(kind)
        if kind == prompts.DECOMPOSE:
            return json.dumps({"sub_questions": SUBS})
        if kind == prompts.SUFFICIENCY:
            count = len(re.findall(r"^\d+\. ", last, flags=re.MULTILINE))
            return json.dumps({"answers": ["December 13, 1989"] + [prompts.UNKNOWN] * (count - 1)})
        if kind == prompts.ANALYSIS_SYSTEM:
            items = [
                {"entity": name, "asks": "birth date", "details": [], "question": sub}
                for name, sub in zip(("Taylor Swift", "Neil Armstrong"), SUBS, strict=True)
            ]
            return json.dumps({"sub_questions": items})
        if kind == prompts.ANSWER:
            return "Neil Armstrong" if "1930" in passages_in(last) else "insufficient evidence"
        raise AssertionError(f"unexpected prompt: {kind[:60]}")


def run(selector_path: Path, model: Model, **settings: Any) -> dict[str, Any]:
    # The joint check: DICS reads its sub-questions (a chain's hops are criteria of their own).
    cfg = joint_configuration(
        selector=str(selector_path), compression="dics", docs_per_action=5, **settings
    )
    graph = build_graph(
        KeywordSearcher(CORPUS),
        ScriptedChatModel(respond=model),
        policy=ScriptedPolicy(),
        configuration=cfg,
    )
    return graph.invoke({"question": QUESTION})


def compress_entry(final: dict[str, Any]) -> dict[str, Any]:
    return next(e for e in final["trace"] if e["action"] == "compress_answer_evidence")


def test_dics_compression_selects_per_criterion_and_records_why(selector_path: Path) -> None:
    model = Model()
    final = run(selector_path, model, dsrag_extraction="llm")
    entry = compress_entry(final)
    # The criteria come from the sufficiency check's sub-questions, by one analysis call.
    assert model.seen.count(prompts.ANALYSIS_SYSTEM) == 1
    assert entry["llm_calls"] == 1 and entry["prompt_tokens"] > 0
    assert entry["extraction"]["method"] == "llm"
    assert [t["entity"] for t in entry["extraction"]["targets"]] == [
        "Taylor Swift",
        "Neil Armstrong",
    ]
    assert entry["dics_mode"] == "criteria" and len(entry["criteria"]) == 2
    # Which criterion chose which passage: one distinct passage each, anchored at a person.
    choices = entry["dics_choices"]
    assert [c["anchor"] for c in choices] == ["Taylor Swift", "Neil Armstrong"]
    assert len({c["passage"] for c in choices}) == 2
    assert all(c["passage"] in entry["kept"] for c in choices)
    assert all(c["criterion"] in entry["criteria"] for c in choices)
    # The verified sub-answer's passage is kept too.
    assert entry["answer_passages"] == [
        {"sub_question": SUBS[0], "answer": "December 13, 1989", "passage": "swift-born"}
    ]
    kept = {doc["id"] for doc in final["evidence"]}
    assert "swift-born" in kept and kept == set(entry["kept"])
    assert kept == {c["passage"] for c in choices} | {"swift-born"}
    # Evidence order is kept (acquisition order), and something was dropped.
    acquired = next(e for e in final["trace"] if e["action"] == "retrieve_more")["added"]
    assert [d["id"] for d in final["evidence"]] == sorted(kept, key=acquired.index)
    assert entry["dropped"] == len(acquired) - len(kept) > 0
    assert final["accounting"]["compress_answer_evidence"]["llm_calls"] == 1


def test_rules_compress_without_a_model_call(selector_path: Path) -> None:
    model = Model()
    final = run(selector_path, model, dsrag_extraction="rules")
    entry = compress_entry(final)
    assert prompts.ANALYSIS_SYSTEM not in model.seen and entry["llm_calls"] == 0
    assert entry["extraction"]["method"] == "rules"
    assert len(entry["dics_choices"]) == len(entry["criteria"]) >= 1


def test_auto_reads_the_sufficiency_checks_sub_questions_without_a_call(
    selector_path: Path,
) -> None:
    model = Model()
    final = run(selector_path, model, dsrag_extraction="auto")
    entry = compress_entry(final)
    assert prompts.ANALYSIS_SYSTEM not in model.seen and entry["llm_calls"] == 0
    assert entry["extraction"]["method"] == "rules"
    # The rules read the model's one-person sub-questions: one criterion per person.
    assert [c["anchor"] for c in entry["dics_choices"]] == ["Taylor Swift", "Neil Armstrong"]


def test_epqd_parts_reuse_the_analysis_they_came_from(selector_path: Path) -> None:
    model = Model()
    final = run(selector_path, model, dsrag_extraction="llm", decomposition="epqd")
    # sufficiency_check took the analysis's sub-questions (one per person) ...
    assert [s["question"] for s in final["sub_questions"]] == SUBS
    assert prompts.DECOMPOSE not in model.seen
    # ... and compression reused that analysis: one analysis call in the whole run.
    assert model.seen.count(prompts.ANALYSIS_SYSTEM) == 1
    entry = compress_entry(final)
    assert entry["llm_calls"] == 0 and entry["extraction"]["reused"] is True
    assert len(entry["criteria"]) == 2


def test_an_unusable_analysis_falls_back_to_the_rules_in_the_graph(selector_path: Path) -> None:
    class Chatty(Model):
        def __call__(self, messages: list[BaseMessage]) -> str:
            if prompt_kind(messages) == prompts.ANALYSIS_SYSTEM:
                self.seen.append(prompts.ANALYSIS_SYSTEM)
                return "I would rather not."
            return super().__call__(messages)

    final = run(selector_path, Chatty(), dsrag_extraction="llm")
    entry = compress_entry(final)
    assert entry["extraction"]["method"] == "fallback" and entry["llm_calls"] == 1
    assert entry["kept"] and (final["answer"] or final["abstained"])


def test_the_dsrag_method_reads_the_question_in_one_call(selector_path: Path) -> None:
    from dynakrag.eval.methods.dsrag import DsragMethod
    from dynakrag.llm.client import LLMClient

    model = Model()
    searcher = KeywordSearcher(CORPUS)
    cfg = Configuration(selector=str(selector_path), dsrag_extraction="llm")
    llm = LLMClient(ScriptedChatModel(respond=model), max_retries=0)
    result = DsragMethod().run(QUESTION, searcher, llm, cfg)
    details = result.details
    # One analysis gives the sub-questions (one per person) and the criteria; the answer is
    # computed from the birth dates the passages state.
    assert model.seen == [prompts.ANALYSIS_SYSTEM] and result.llm_calls == 1
    assert result.prediction == "Neil Armstrong"
    assert details["decomposition"] == "llm" and details["sub_questions"] == SUBS
    assert [query for query, _ in searcher.calls] == SUBS and result.retrieval_calls == 2
    assert details["core"] == "birth date" and details["criteria_fallback"] is None
    assert [c["anchor"] for c in details["dics_choices"]] == ["Taylor Swift", "Neil Armstrong"]
    # (The untrained selector scores by the anchor's text alone: which of a person's passages
    # it takes is not under test here, that it takes one per person is.)
    assert [doc["id"] for doc in result.evidence] == [c["passage"] for c in details["dics_choices"]]

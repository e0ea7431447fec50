"""Runs logged with SqliteSaver can be reopened and read back as (state, action, next_state)."""

from __future__ import annotations

import itertools
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from dynakrag import build_graph
from dynakrag.data.demo import demo_passages
from dynakrag.data.demo_corpus import DemoCorpus, generate_demo_corpus
from dynakrag.state import ACTIONS
from dynakrag.training import (
    Transition,
    list_threads,
    open_trajectory_log,
    read_transitions,
)
from tests.fakes import KeywordSearcher, demo_chat_model
from tests.joint import joint_configuration


@pytest.fixture(scope="module")
def corpus() -> DemoCorpus:
    return generate_demo_corpus(7)


def _run(corpus: DemoCorpus, log: Path, runs: dict[str, str]) -> dict[str, dict[str, Any]]:
    """Answer ``{thread_id: question}`` with the fakes, logging to ``log``; the final states."""
    answers = {q.question: q.answer for q in corpus.questions}
    saver = open_trajectory_log(log)
    try:
        graph = build_graph(
            KeywordSearcher(demo_passages(corpus)),
            demo_chat_model(answers),
            configuration=joint_configuration(),  # the scripted reader answers the joint check
            checkpointer=saver,
        )
        return {
            thread: graph.invoke({"question": question}, {"configurable": {"thread_id": thread}})
            for thread, question in runs.items()
        }
    finally:
        saver.conn.close()


def test_open_trajectory_log_uses_wal(tmp_path: Path) -> None:
    saver = open_trajectory_log(tmp_path / "sub" / "log.sqlite")
    try:
        mode = saver.conn.execute("PRAGMA journal_mode").fetchone()[0]
        assert mode.lower() == "wal"
    finally:
        saver.conn.close()


def test_transitions_follow_the_trace(tmp_path: Path, corpus: DemoCorpus) -> None:
    log = tmp_path / "log.sqlite"
    question = corpus.questions[0]
    final = _run(corpus, log, {"q1": question.question})["q1"]
    assert final["answer"] == question.answer

    transitions = read_transitions(log, "q1")
    assert all(isinstance(t, Transition) for t in transitions)
    assert [t.action for t in transitions] == [e["action"] for e in final["trace"]]
    assert {t.action for t in transitions} <= set(ACTIONS)
    assert [t.step for t in transitions] == sorted(t.step for t in transitions)
    previous = [None, *(t.action for t in transitions)]
    for t, before in zip(transitions, previous, strict=False):
        assert t.thread_id == "q1"
        if before != "compress_answer_evidence":  # a fixed edge, no controller step, follows it
            assert t.state["next_action"] == t.action
            assert t.action in t.state["valid_actions"]
        assert len(t.next_state.get("trace", [])) >= len(t.state.get("trace", []))
    for before, after in itertools.pairwise(transitions):
        assert before.next_state == after.state
    assert transitions[-1].action == "stop_answer"
    assert transitions[-1].next_state["answer"] == question.answer


def test_threads_are_listed_separately(tmp_path: Path, corpus: DemoCorpus) -> None:
    log = tmp_path / "log.sqlite"
    first, second = corpus.questions[0], corpus.questions[1]
    finals = _run(corpus, log, {"q1": first.question, "q2": second.question})

    assert list_threads(log) == ["q1", "q2"]
    everything = read_transitions(log)
    for thread in ("q1", "q2"):
        own = read_transitions(log, thread)
        assert own
        assert {t.thread_id for t in own} == {thread}
        assert [t.action for t in own] == [e["action"] for e in finals[thread]["trace"]]
        assert [t for t in everything if t.thread_id == thread] == own
    assert len(everything) == len(finals["q1"]["trace"]) + len(finals["q2"]["trace"])
    assert read_transitions(log, "nobody") == []


def test_runs_in_threads_share_one_log(tmp_path: Path, corpus: DemoCorpus) -> None:
    """One saver serves graph runs from several threads at once (check_same_thread=False)."""
    log = tmp_path / "log.sqlite"
    questions = corpus.questions[:4]
    answers = {q.question: q.answer for q in corpus.questions}
    saver = open_trajectory_log(log)
    try:
        graph = build_graph(
            KeywordSearcher(demo_passages(corpus)), demo_chat_model(answers), checkpointer=saver
        )
        with ThreadPoolExecutor(max_workers=4) as pool:
            finals = list(
                pool.map(
                    lambda q: graph.invoke(
                        {"question": q.question}, {"configurable": {"thread_id": q.id}}
                    ),
                    questions,
                )
            )
    finally:
        saver.conn.close()
    assert sorted(list_threads(log)) == sorted(q.id for q in questions)
    for q, final in zip(questions, finals, strict=True):
        actions = [t.action for t in read_transitions(log, q.id)]
        assert actions == [e["action"] for e in final["trace"]]


class _FailingSearcher(KeywordSearcher):
    """Fails from the second search on, as a crashed retriever would."""

    def search(self, query: str, k: int) -> list[Any]:
        if self.calls:
            raise RuntimeError("retriever down")
        return super().search(query, k)


def test_an_action_that_failed_is_not_a_transition(tmp_path: Path, corpus: DemoCorpus) -> None:
    log = tmp_path / "log.sqlite"
    question = corpus.questions[3]  # needs more than one retrieval
    answers = {q.question: q.answer for q in corpus.questions}
    saver = open_trajectory_log(log)
    try:
        graph = build_graph(
            _FailingSearcher(demo_passages(corpus)), demo_chat_model(answers), checkpointer=saver
        )
        config = {"configurable": {"thread_id": "broken"}}
        with pytest.raises(RuntimeError, match="retriever down"):
            graph.invoke({"question": question.question}, config)
        completed = [e["action"] for e in graph.get_state(config).values.get("trace", [])]
    finally:
        saver.conn.close()
    transitions = read_transitions(log, "broken")
    assert [t.action for t in transitions] == completed
    assert completed


def test_missing_log_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        read_transitions(tmp_path / "absent.sqlite")
    assert not (tmp_path / "absent.sqlite").exists()

"""``dynakrag replay``: a logged run's decision forced to another action, run on by the graph
itself from a checkpoint, beside the logged run."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from dynakrag import build_graph
from dynakrag.actions.common import Resources
from dynakrag.cli import replay as replay_command
from dynakrag.cli.main import main
from dynakrag.configuration import Configuration
from dynakrag.data.demo import demo_passages
from dynakrag.data.demo_corpus import generate_demo_corpus
from dynakrag.graph.replay import Branches, what_if
from dynakrag.llm.client import LLMClient
from dynakrag.policy.heuristic import HeuristicPolicy
from dynakrag.training import read_transitions, trajectory_log
from tests.fakes import KeywordSearcher, demo_chat_model

CORPUS = generate_demo_corpus(7)
QUESTION = next(q for q in CORPUS.questions if q.id == "q-hq-00")


def searcher() -> KeywordSearcher:
    return KeywordSearcher(demo_passages(CORPUS))


def chat_model() -> Any:
    return demo_chat_model({q.question: q.answer for q in CORPUS.questions})


@pytest.fixture
def logged(tmp_path: Path) -> Path:
    log = tmp_path / "runs.sqlite"
    with trajectory_log(log) as saver:
        # The heuristic: the what-if runs below go on with it, so the logged run must too.
        graph = build_graph(searcher(), chat_model(), checkpointer=saver, policy="heuristic")
        graph.invoke({"question": QUESTION.question}, {"configurable": {"thread_id": "run-1"}})
    return log


def resources() -> Resources:
    return Resources(searcher=searcher(), llm=LLMClient(chat_model()))


def actions(state: dict[str, Any]) -> list[str]:
    return [entry["action"] for entry in state["trace"]]


def test_the_logged_choice_replays_the_logged_run(logged: Path) -> None:
    transitions = read_transitions(logged, "run-1")
    logged_final = transitions[-1].next_state
    again = what_if(
        transitions[1].state, transitions[1].action, resources(), Configuration(), HeuristicPolicy()
    )
    assert actions(again) == actions(logged_final)
    assert again["answer"] == logged_final["answer"]


def test_another_choice_changes_the_run_from_that_step(logged: Path) -> None:
    transitions = read_transitions(logged, "run-1")
    decision = transitions[1]
    other = next(a for a in decision.state["valid_actions"] if a != decision.action)
    final = what_if(decision.state, other, resources(), Configuration(), HeuristicPolicy())
    assert actions(final)[:2] == [transitions[0].action, other]
    assert final["answer"] or final["abstained"]


def test_branches_refuse_an_invalid_action() -> None:
    branches = Branches(resources(), Configuration())
    start = branches.start(QUESTION.question)
    with pytest.raises(ValueError, match="not valid"):
        branches.step(start, "gap_query")


def test_replay_command_prints_both_traces(
    logged: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr("dynakrag.cli.generator.make_llm", lambda cfg: LLMClient(chat_model()))
    monkeypatch.setattr(
        "dynakrag.cli.searcher.searcher_from_flags", lambda *args, **kwargs: searcher()
    )
    argv = ["replay", "run-1", "--step", "1", "--action", "stop_answer", "--log", str(logged)]
    assert main(argv) != 0  # only retrieve_more is valid before any evidence
    assert "step 1: action 'stop_answer' is not valid" in capsys.readouterr().err
    argv[3] = "2"  # a chain reads its new evidence before it may answer
    assert main(argv) != 0
    assert "blocked by chain_reads_new_evidence_first" in capsys.readouterr().err
    argv[5] = "rewrite_query"
    assert main(argv) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].split() == ["step", "logged", "what", "if"]
    assert out[1].split() == ["1", "retrieve_more", "retrieve_more"]
    second = out[2].split()
    assert second[-2:] == ["rewrite_query", "*"] and second[1] != "rewrite_query"
    # One row per step of the longer run (the what-if one may go on past the logged end).
    assert len(out) >= 2 + len(actions(read_transitions(logged, "run-1")[-1].next_state))
    assert len("compress_answer_evidence") < replay_command.COLUMN


def test_replay_command_checks_the_step(logged: Path) -> None:
    argv = ["replay", "run-1", "--step", "99", "--action", "stop_answer", "--log", str(logged)]
    assert main(argv) != 0

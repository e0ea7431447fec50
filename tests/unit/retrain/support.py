"""A user's own small world for the tests of logged runs and retraining (not the demo
world): its corpus and questions, the fake model answering them, the ``world`` fixture
(exported by this folder's conftest.py, imported by tests/unit/test_trajectory_logs_postgres.py),
and the helpers that run the CLI, write gold files and log runs."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from dynakrag import build_graph, cli
from dynakrag.cli import ask as ask_command
from dynakrag.cli import collect as collect_command
from dynakrag.cli import train as train_command
from dynakrag.configuration import Configuration
from dynakrag.llm.client import LLMClient
from dynakrag.policy.base import Policy
from dynakrag.retrieval.corpus import load_corpus
from dynakrag.routing.factory import build_searcher
from dynakrag.training import open_trajectory_log, run_config
from tests.fakes import demo_chat_model
from tests.joint import JOINT_ENV, joint_configuration

# A user's own small world: who works where, and where each company is based. Every question
# needs two hops (the person, then the company), and the company passages share no word with
# the questions, so one retrieval never finds the second hop.
PEOPLE = (
    ("Ana Ruiz", "Brightwave Labs", "Tolleno"),
    ("Omar Feld", "Quillmark Foods", "Harrowgate"),
    ("Lena Sato", "Vantor Aerospace", "Merriden"),
    ("Piet Dekker", "Solbright Energy", "Caldreth"),
    ("Ines Varga", "Hollow Pine Press", "Estmoor"),
    ("Tomas Reyes", "Crestline Motors", "Wendale"),
    ("Mira Holt", "Bluefen Textiles", "Norbury"),
    ("Karl Uhde", "Redkite Games", "Ashcombe"),
)


def _ids(person: str, company: str) -> tuple[str, str]:
    return f"person-{person.split()[0].lower()}", f"org-{company.split()[0].lower()}"


def question_of(person: str) -> str:
    return f"Which town hosts the employer of {person}?"


QUESTIONS = {question_of(person): city for person, _, city in PEOPLE}
SUPPORT = {question_of(p): list(_ids(p, c)) for p, c, _ in PEOPLE}


def write_corpus(path: Path) -> Path:
    rows = []
    for person, company, city in PEOPLE:
        person_id, company_id = _ids(person, company)
        rows.append({"id": person_id, "title": person, "text": f"{person} works for {company}."})
        rows.append({"id": company_id, "title": company, "text": f"{company} sits in {city}."})
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return path


def fake_llm() -> LLMClient:
    return LLMClient(demo_chat_model(QUESTIONS))


@pytest.fixture
def world(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, isolated_env: None, no_models: None):
    """The corpus file, with the commands' generator replaced by the fake and BM25 retrieval;
    the joint check at the paper's budget (``tests.joint``), whose prompt the fake answers, and
    the heuristic, whose steps there these tests know (the shipped forest learned the chain)."""
    monkeypatch.setenv("DYNAKRAG_RETRIEVER", "bm25")
    monkeypatch.setenv("DYNAKRAG_POLICY", "heuristic")
    for name, value in JOINT_ENV.items():
        monkeypatch.setenv(name, value)
    for module in (ask_command, train_command, collect_command):
        monkeypatch.setattr(module, "make_llm", lambda cfg, **options: fake_llm())
    return write_corpus(tmp_path / "my.jsonl")


def run_cli(argv: Sequence[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = cli.main([str(a) for a in argv])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def write_gold(path: Path, rows: Sequence[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return path


class StopEarly(Policy):
    """Answers as soon as answering is valid: one retrieval, then stop (too early here)."""

    name = "stop-early"

    def value(self, state: Any, actions: Sequence[str], cfg: Configuration) -> dict[str, float]:
        return {a: 1.0 if a == "stop_answer" else 0.0 for a in actions}


def log_runs(log: Path, corpus: Path, people: Sequence[tuple[str, str, str]], policy: Any) -> None:
    searcher = build_searcher("bm25", load_corpus(corpus))
    saver = open_trajectory_log(log)
    try:
        graph = build_graph(
            searcher,
            configuration=joint_configuration(),
            policy=policy,
            llm=fake_llm(),
            checkpointer=saver,
        )
        for person, _, _ in people:
            graph.invoke({"question": question_of(person)}, run_config(command="test"))
    finally:
        saver.conn.close()

"""Retraining from logged runs (issue: one command from logs to a policy), on a corpus of the
user's own (not the demo world), with the fake model: ask --log, gold files, train --log
(--branch, --base), the records table, eval runs that never train, and export from a server."""

from __future__ import annotations

import contextlib
import gzip
import json
import os
import pickle
import sqlite3
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from dynakrag import build_graph, cli
from dynakrag.cli import ask as ask_command
from dynakrag.cli import collect as collect_command
from dynakrag.cli import train as train_command
from dynakrag.configuration import Configuration
from dynakrag.errors import UserInputError
from dynakrag.eval.methods.dynakrag import DynakragMethod
from dynakrag.graph.controller import decide
from dynakrag.graph.replay import initial_state
from dynakrag.llm.client import LLMClient
from dynakrag.policy.base import Policy
from dynakrag.policy.learned import load_policy_file
from dynakrag.retrieval.corpus import load_corpus
from dynakrag.routing.factory import build_searcher
from dynakrag.state import ACQUISITION_ACTIONS
from dynakrag.training import (
    open_trajectory_log,
    read_log_records,
    read_transitions,
    run_config,
    write_log_records,
)
from dynakrag.training import retrain as retrain_module
from dynakrag.training.gold import GoldBook, answer_support, question_key, read_gold
from dynakrag.training.logged_runs import records_from_transitions
from dynakrag.training.trajectories import (
    list_threads,
    logged_questions,
    tee_records_into_log,
)
from tests.fakes import demo_chat_model
from tests.markers import needs_data

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
    """The corpus file, with the commands' generator replaced by the fake and BM25 retrieval."""
    monkeypatch.setenv("DYNAKRAG_RETRIEVER", "bm25")
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
        graph = build_graph(searcher, policy=policy, llm=fake_llm(), checkpointer=saver)
        for person, _, _ in people:
            graph.invoke({"question": question_of(person)}, run_config(command="test"))
    finally:
        saver.conn.close()


# --------------------------------------------------------------------------------------------
# Gold files


def test_gold_rows_match_by_normalised_question_or_run_id(tmp_path: Path) -> None:
    path = write_gold(
        tmp_path / "gold.jsonl",
        [
            {
                "question": "Where is  ACME based?",
                "answers": ["Paris"],
                "support": ["a", ["b", "c"]],
            },
            {"run_id": "run-7", "answers": "Oslo"},
        ],
    )
    book = read_gold(path)
    row = book.match(None, "where is acme based")
    assert row is not None and row.answers == ("Paris",) and row.has_support
    assert row.support == (frozenset({"a"}), frozenset({"b", "c"}))
    by_run = book.match("run-7", "something else")
    assert by_run is not None and by_run.answers == ("Oslo",) and not by_run.has_support
    assert book.match("run-8", "Where is ACME based, then?") is None
    assert question_key("Where is  ACME based?") == question_key("where is acme based")


@pytest.mark.parametrize(
    ("row", "message"),
    [
        ({"answers": ["x"]}, "question"),
        ({"question": "q"}, "answers"),
        ({"question": "q", "answers": [""]}, "answers"),
        ({"question": "q", "answers": ["x"], "support": "doc-1"}, "support"),
        ({"question": 3, "answers": ["x"]}, "question"),
    ],
)
def test_bad_gold_rows_name_the_row(tmp_path: Path, row: dict[str, Any], message: str) -> None:
    path = write_gold(tmp_path / "gold.jsonl", [{"question": "ok?", "answers": ["y"]}, row])
    with pytest.raises(UserInputError, match=rf"row 2: .*{message}"):
        read_gold(path)


def test_conflicting_gold_for_one_question_is_refused(tmp_path: Path) -> None:
    path = write_gold(
        tmp_path / "gold.jsonl",
        [{"question": "Q?", "answers": ["a"]}, {"question": "q", "answers": ["b"]}],
    )
    with pytest.raises(UserInputError, match="lines 1 and 2"):
        read_gold(path)


def test_answer_support_finds_passages_stating_an_answer() -> None:
    passages = [
        {"id": "x", "text": "The Beatles came from Liverpool."},
        {"id": "y", "text": "Liverpoolish is not a word."},
        {"id": "z", "text": "Nothing here."},
    ]
    assert answer_support(["liverpool"], passages) == (frozenset({"x"}),)
    assert answer_support(["Manchester"], passages) == ()


# --------------------------------------------------------------------------------------------
# Logging from the command line


def test_ask_logs_the_run_and_json_prints_its_id(
    world: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    log = tmp_path / "runs.sqlite"
    question = question_of("Ana Ruiz")
    code, out, err = run_cli(["ask", question, "--corpus", world, "--log", log, "--json"], capsys)
    assert code == 0, err
    final = json.loads(out)
    run_id = final["run_id"]
    transitions = read_transitions(log, run_id)
    assert [t.action for t in transitions] == [e["action"] for e in final["trace"]]
    assert all(t.run == {"command": "ask"} for t in transitions)
    assert transitions[-1].next_state["answer"] == final["answer"] == "Tolleno"

    code, out, err = run_cli(["ask", question, "--corpus", world, "--log", log], capsys)
    assert code == 0, err
    assert "Answer: Tolleno" in out
    second = out.strip().splitlines()[-1]
    assert second.startswith("Logged run ") and str(log) in second
    assert len(list_threads(log)) == 2


def test_demo_logs_its_run(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    isolated_env: None,
    no_models: None,
) -> None:
    from dynakrag.cli import demo as demo_command
    from dynakrag.data.demo import demo_passages
    from dynakrag.data.demo_corpus import demo_question, generate_demo_corpus
    from tests.fakes import KeywordSearcher

    corpus = generate_demo_corpus(7)
    answers = {q.question: q.answer for q in corpus.questions}
    monkeypatch.setattr(
        "dynakrag.data.demo.demo_searcher",
        lambda cfg, **options: KeywordSearcher(demo_passages(corpus)),
    )
    monkeypatch.setattr(
        demo_command, "make_llm", lambda cfg, **options: LLMClient(demo_chat_model(answers))
    )
    log = tmp_path / "demo.sqlite"
    code, out, err = run_cli(["demo", "--log", log], capsys)
    assert code == 0, err
    run_id = out.strip().splitlines()[-1].split()[2]
    transitions = read_transitions(log, run_id)
    assert transitions and all(t.run == {"command": "demo"} for t in transitions)
    assert transitions[0].state["question"] == demo_question(corpus).question


def test_a_log_that_is_not_a_database_exits_2(
    world: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "notes.txt"
    bad.write_text("not a database " * 100)
    code, _, err = run_cli(["ask", "Where?", "--corpus", world, "--log", bad], capsys)
    assert code == 2
    assert "trajectory log" in err and len(err.strip().splitlines()) == 1


def _pages(log: Path) -> int:
    with contextlib.closing(sqlite3.connect(log)) as conn:
        return int(conn.execute("PRAGMA page_count").fetchone()[0])


@pytest.mark.parametrize(("fault", "as_json"), [("disk full", True), ("read-only", False)], ids=str)
def test_a_log_that_stops_taking_writes_keeps_the_answer_and_exits_1(
    fault: str,
    as_json: bool,
    world: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The log opens, then refuses writes mid-run with SQLite's own errors (no small disk, no
    root needed): room for half a run ("database or disk is full"), or read-only from the
    start ("attempt to write a readonly database"). The answer is printed, then one line
    saying which log could not be written and why, exit 1; what was logged stays readable."""
    from dynakrag.graph import runlog

    question = question_of("Ana Ruiz")
    reference = tmp_path / "reference.sqlite"
    assert run_cli(["ask", question, "--corpus", world, "--log", reference], capsys)[0] == 0
    empty = tmp_path / "empty.sqlite"
    runlog.close_trajectory_log(runlog.open_trajectory_log(empty))
    run_pages = _pages(reference) - _pages(empty)
    opened = runlog.open_trajectory_log

    def limited(target: Any, **options: Any) -> Any:
        saver = opened(target, **options)
        if fault == "disk full":
            pages = saver.conn.execute("PRAGMA page_count").fetchone()[0]
            saver.conn.execute(f"PRAGMA max_page_count = {pages + run_pages // 2}")
        else:
            saver.conn.execute("PRAGMA query_only = ON")
        return saver

    monkeypatch.setattr(runlog, "open_trajectory_log", limited)
    log = tmp_path / "runs.sqlite"
    argv = ["ask", question, "--corpus", world, "--log", log]
    code, out, err = run_cli([*argv, "--json"] if as_json else argv, capsys)
    assert code == 1
    assert err.splitlines() == [err.strip()], err
    assert err.startswith(f"dynakrag: error: cannot write the trajectory log {log}: "), err
    reason = "the disk is full" if fault == "disk full" else "is read-only"
    assert reason in err and "unexpected" not in err
    if as_json:
        final = json.loads(out)
        assert final["answer"] == "Tolleno"
        logged = [t.action for t in read_transitions(log, final["run_id"])]
        actions = [entry["action"] for entry in final["trace"]]
        assert 0 < len(logged) < len(actions) and logged == actions[: len(logged)]
    else:
        assert out.strip().splitlines()[-1] == "Answer: Tolleno"  # no "Logged run ..." line
        assert list_threads(log) == []


def test_eval_method_logs_tagged_runs_that_never_train(world: Path, tmp_path: Path) -> None:
    log = tmp_path / "eval.sqlite"
    searcher = build_searcher("bm25", load_corpus(world))
    method = DynakragMethod(log=str(log), log_tags={"dataset": "mine", "split": "eval"})
    method = pickle.loads(pickle.dumps(method))  # as a worker process receives it
    try:
        results = [
            method.run(q, searcher, fake_llm(), Configuration()) for q in list(QUESTIONS)[:2]
        ]
    finally:
        method.close()
    transitions = read_transitions(log)
    assert {t.thread_id for t in transitions} == {r.details["run_id"] for r in results}
    assert all(
        t.run == {"command": "eval", "dataset": "mine", "split": "eval"} for t in transitions
    )
    gold = GoldBook.from_support(SUPPORT)
    assert records_from_transitions(transitions, gold) == []  # eval rows never train
    labels = retrain_module.label_log(log, gold, Configuration())
    assert len(labels.eval_runs) == 2 and labels.records == []


# --------------------------------------------------------------------------------------------
# The flow: ask --log, a gold file, train --log, ask --policy


def test_logged_runs_to_a_policy_that_ask_uses(
    world: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    log = tmp_path / "runs.sqlite"
    people = PEOPLE[:6]
    for person, _, _ in people:
        code, _, err = run_cli(
            ["ask", question_of(person), "--corpus", world, "--log", log, "--quiet"], capsys
        )
        assert code == 0, err
    gold_rows: list[dict[str, Any]] = [
        {"question": question_of(p), "answers": [city], "support": SUPPORT[question_of(p)]}
        for p, _, city in people[:4]
    ]
    # answers only (weaker), with the question typed differently
    gold_rows += [
        {"question": question_of(p).upper().rstrip("?"), "answers": [c]} for p, _, c in people[4:]
    ]
    gold = write_gold(tmp_path / "gold.jsonl", gold_rows)
    policy_path = tmp_path / "my.npz"
    fit = ["--n-estimators", "20", "--min-samples-leaf", "1"]
    code, out, err = run_cli(
        ["train", "--log", log, "--gold", gold, "--corpus", world, "--out", policy_path, *fit],
        capsys,
    )
    assert code == 0, err
    assert "4 runs by support, 2 by answers only (weaker labels), 0 without gold" in out
    assert "held-out R² per action" in out
    assert "decisions of the new policy on the logged states:" in out
    assert f"Saved the policy to {policy_path}" in out
    policy = load_policy_file(policy_path)

    question = question_of(PEOPLE[7][0])  # not logged
    code, out, err = run_cli(
        ["ask", question, "--corpus", world, "--policy", policy_path, "--json"], capsys
    )
    assert code == 0, err
    first = json.loads(out)["trace"][0]
    cfg = Configuration.from_env()
    expected = decide(initial_state(question, cfg), policy, cfg)["policy_scores"]
    assert first["scores"] == expected  # the trained file made the decisions


def test_gold_ids_of_another_corpus_are_refused(
    world: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    log = tmp_path / "runs.sqlite"
    log_runs(log, world, PEOPLE[:1], "heuristic")
    gold = write_gold(
        tmp_path / "gold.jsonl",
        [{"question": question_of("Ana Ruiz"), "answers": ["Tolleno"], "support": ["doc-1"]}],
    )
    code, _, err = run_cli(
        ["train", "--log", log, "--gold", gold, "--corpus", world, "--out", tmp_path / "p.npz"],
        capsys,
    )
    assert code == 2 and "none of the support ids" in err


def test_retrained_policy_moves_toward_what_the_gold_implies(
    world: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Runs that answered after one retrieval (half the support, wrong answers); with gold and
    counterfactual branches the new policy fetches the second hop on those same states."""
    log = tmp_path / "runs.sqlite"
    log_runs(log, world, PEOPLE, StopEarly())
    logged = [t for t in read_transitions(log) if t.action == "stop_answer"]
    assert len(logged) == len(PEOPLE)
    assert all(t.next_state["answer"] not in QUESTIONS.values() for t in logged)
    gold = write_gold(
        tmp_path / "gold.jsonl",
        [
            {"question": q, "answers": [city], "support": SUPPORT[q]}
            for q, city in QUESTIONS.items()
        ],
    )
    policy_path = tmp_path / "p.npz"
    fit = ["--n-estimators", "25", "--min-samples-leaf", "1", "--holdout", "0"]
    argv = ["train", "--log", log, "--gold", gold, "--corpus", world, *fit]
    code, out, err = run_cli([*argv, "--branch", "--out", policy_path], capsys)
    assert code == 0, err
    assert "stop_answer -> " in out

    policy = load_policy_file(policy_path)
    cfg = Configuration.from_env()
    gold_book = read_gold(gold)
    records = records_from_transitions(
        read_transitions(log),
        gold_book,
        cfg,
        branch=_resources(world),
    )
    for transition in logged:
        choice = decide(transition.state, policy, cfg)["next_action"]
        assert choice != "stop_answer"
        assert choice in ACQUISITION_ACTIONS
        labels = {
            r["action"]: r["label"]
            for r in records
            if r["example_id"] == transition.thread_id and r["step"] == 1
        }
        # the direction the gold implies: the new choice was labelled above stopping
        assert labels[choice] > labels["stop_answer"]

    # Without the branches the log labels only what the runs did: no alternative at those states.
    unbranched = records_from_transitions(read_transitions(log), gold_book, cfg)
    assert {(r["step"], r["action"]) for r in unbranched} == {
        (0, "retrieve_more"),
        (1, "stop_answer"),
    }
    assert all(r["chosen"] for r in unbranched)
    assert any(not r["chosen"] and r["label"] > 0 for r in records)


def _resources(corpus: Path) -> Any:
    from dynakrag.actions.common import Resources

    return Resources(build_searcher("bm25", load_corpus(corpus)), fake_llm())


def test_answer_only_gold_labels_by_the_answer(world: Path, tmp_path: Path) -> None:
    log = tmp_path / "runs.sqlite"
    log_runs(log, world, PEOPLE[:2], "heuristic")
    book = read_gold(
        write_gold(
            tmp_path / "gold.jsonl",
            [{"question": question_of(p), "answers": [c]} for p, _, c in PEOPLE[:2]],
        )
    )
    records = records_from_transitions(read_transitions(log), book)
    assert records
    for record in records:
        # support is "a passage stating the answer": 0 before the second hop, 1 after
        assert record["sr_before"] in (0.0, 1.0) and record["sr_after"] in (0.0, 1.0)
    fetched = [r for r in records if r["action"] in ACQUISITION_ACTIONS and r["label"] == 1.0]
    assert fetched, "the hop that fetched the answer passage earns the label"
    answered = [r for r in records if r["action"] in {"stop_answer", "compress_answer_evidence"}]
    assert answered and all(r["label"] == 1.0 and r["label_version"] == 2 for r in answered)


# --------------------------------------------------------------------------------------------
# --base


def test_base_default_without_shipped_records_fails_clearly(
    world: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(retrain_module, "DEFAULT_POLICY_RECORDS", tmp_path / "absent.jsonl.gz")
    log = tmp_path / "runs.sqlite"
    log_runs(log, world, PEOPLE[:1], "heuristic")
    code, _, err = run_cli(
        ["train", "--log", log, "--base", "default", "--out", tmp_path / "p.npz"], capsys
    )
    assert code == 2
    assert "make default-policy" in err and len(err.strip().splitlines()) == 1


def test_base_records_are_pooled(
    world: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    log = tmp_path / "runs.sqlite"
    log_runs(log, world, PEOPLE[:3], "heuristic")
    gold = write_gold(
        tmp_path / "gold.jsonl",
        [
            {"question": q, "answers": [c], "support": SUPPORT[q]}
            for q, c in list(QUESTIONS.items())[:3]
        ],
    )
    mine = records_from_transitions(read_transitions(log), read_gold(gold))
    base = [{**r, "dataset": "base", "example_id": f"b{i}"} for i, r in enumerate(mine * 2)]
    shipped = tmp_path / "default_policy.records.jsonl.gz"
    shipped.write_bytes(gzip.compress("".join(json.dumps(r) + "\n" for r in base).encode()))
    monkeypatch.setattr(retrain_module, "DEFAULT_POLICY_RECORDS", shipped)
    code, _, err = run_cli(
        ["train", "--trajectories", shipped, "--out", tmp_path / "b.npz", "--n-estimators", "5"],
        capsys,
    )
    assert code == 0, err  # a records file reads gzip-compressed as well
    argv = ["train", "--log", log, "--gold", gold, "--base", "default", "--n-estimators", "5"]
    code, out, err = run_cli([*argv, "--out", tmp_path / "p.npz"], capsys)
    assert code == 0, err
    assert f"pooled with {len(base)} base records (default)" in out
    assert f"records: {len(mine) + len(base)} " in out
    assert "differs from the shipped learned policy on" in out


# --------------------------------------------------------------------------------------------
# collect --log: the records table, resumable, and train from the log alone


def test_collect_into_a_log_then_train_from_it_alone(
    world: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from tests.unit.test_collect_and_train import llm as demo_llm

    monkeypatch.setattr(collect_command, "make_llm", lambda cfg, **options: demo_llm())
    log = tmp_path / "collect.sqlite"
    argv = ["collect", "--dataset", "demo", "--limit", "2", "--rollouts", "1", "--log", log]
    code, out, err = run_cli(argv, capsys)
    assert code == 0, err
    stored = read_log_records(log)
    assert stored and {r["example_id"] for r in stored} == {e for _, e in logged_questions(log)}
    assert len(logged_questions(log)) == 2
    code, out, err = run_cli([*argv[:4], "3", *argv[5:]], capsys)  # one more question
    assert code == 0, err
    assert "from 1 questions" in out  # the two finished ones were skipped
    assert len(logged_questions(log)) == 3
    code, out, err = run_cli(
        ["train", "--log", log, "--out", tmp_path / "p.npz", "--n-estimators", "5"], capsys
    )
    assert code == 0, err
    assert f"{len(read_log_records(log))} stored records" in out


def test_records_are_written_whole_or_not_at_all(tmp_path: Path) -> None:
    log = tmp_path / "r.sqlite"
    assert write_log_records(log, [{"dataset": "d", "example_id": "1", "x": 1}]) == 1
    with pytest.raises(TypeError):
        write_log_records(
            log, [{"dataset": "d", "example_id": "2", "x": 2}, {"dataset": "d", "x": object()}]
        )
    assert read_log_records(log) == [{"dataset": "d", "example_id": "1", "x": 1}]
    assert logged_questions(log) == {("d", "1")}
    assert logged_questions(tmp_path / "absent.sqlite") == set()


def test_collected_questions_reach_the_log_whole(tmp_path: Path) -> None:
    log = tmp_path / "r.sqlite"

    def question(name: str, n: int, counted: bool) -> list[dict[str, Any]]:
        extra = {"question_records": n} if counted else {}
        return [{"dataset": "d", "example_id": name, "i": i, **extra} for i in range(n)]

    stream = tee_records_into_log([*question("a", 2, True), *question("b", 3, False)], log)
    seen_in_log = []
    for _ in stream:
        seen_in_log.append(len(read_log_records(log)) if log.exists() else 0)
    # "a" says it has 2 records: in the log as its last one passes; "b" does not: at the end
    assert seen_in_log == [0, 2, 2, 2, 2]
    assert len(read_log_records(log)) == 5
    assert logged_questions(log) == {("d", "a"), ("d", "b")}


def test_train_needs_something_to_learn_from(
    world: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    log = tmp_path / "runs.sqlite"
    log_runs(log, world, PEOPLE[:1], "heuristic")
    cases = [
        (["train", "--out", tmp_path / "p.npz"], "--log"),
        (["train", "--log", log, "--out", tmp_path / "p.npz"], "--gold"),
        (["train", "--log", log, "--branch", "--out", tmp_path / "p.npz"], "needs --gold"),
        (
            ["train", "--log", tmp_path / "none.sqlite", "--out", tmp_path / "p.npz"],
            "no trajectory",
        ),
    ]
    for argv, message in cases:
        code, _, err = run_cli(argv, capsys)
        assert code == 2 and message in err, (argv, err)
    assert not os.path.exists(tmp_path / "none.sqlite")


@needs_data
def test_eval_log_of_eval_rows_never_trains(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("DYNAKRAG_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(
        "dynakrag.llm.factory.chat_model_from_config", lambda cfg: demo_chat_model({})
    )
    log = tmp_path / "eval.sqlite"
    argv = ["eval", "--dataset", "hotpotqa", "--setting", "distractor", "--method", "dynakrag"]
    argv += ["--policy", "fixed", "--retriever", "bm25", "--limit", "2", "--quiet"]
    code, _, err = run_cli([*argv, "--log", log, "--out", tmp_path / "e.json"], capsys)
    assert code == 0, err
    transitions = read_transitions(log)
    assert len({t.thread_id for t in transitions}) == 2
    assert {(t.run["dataset"], t.run["split"]) for t in transitions} == {("hotpotqa", "eval")}
    result = json.loads((tmp_path / "e.json").read_text())
    assert str(log) in json.dumps(result["meta"])  # the run says where it logged
    gold = write_gold(
        tmp_path / "gold.jsonl",
        [{"question": t.state["question"], "answers": ["x"]} for t in transitions],
    )
    code, _, err = run_cli(["train", "--log", log, "--gold", gold, "--out", tmp_path / "p"], capsys)
    assert code == 2 and "no training records" in err
    naive = ["eval", "--dataset", "hotpotqa", "--method", "naive", "--out", tmp_path / "n.json"]
    code, _, err = run_cli([*naive, "--log", log], capsys)
    assert code == 2 and "--log applies to --method dynakrag only" in err

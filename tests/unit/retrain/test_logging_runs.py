"""Logging runs for retraining, on a corpus of the user's own with the fake model: ask --log
and demo --log, a log that is no database or stops taking writes, eval runs tagged so that
they never train, and collect --log's records table (whole questions, resumable, enough to
train from alone)."""

from __future__ import annotations

import contextlib
import json
import os
import pickle
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from dynakrag.cli import collect as collect_command
from dynakrag.eval.methods.dynakrag import DynakragMethod
from dynakrag.llm.client import LLMClient
from dynakrag.retrieval.corpus import load_corpus
from dynakrag.routing.factory import build_searcher
from dynakrag.training import read_log_records, read_transitions, write_log_records
from dynakrag.training import retrain as retrain_module
from dynakrag.training.gold import GoldBook
from dynakrag.training.logged_runs import records_from_transitions
from dynakrag.training.trajectories import list_threads, logged_questions, tee_records_into_log
from tests.fakes import demo_chat_model
from tests.joint import joint_configuration
from tests.markers import needs_data
from tests.unit.retrain.support import (
    PEOPLE,
    QUESTIONS,
    SUPPORT,
    fake_llm,
    log_runs,
    question_of,
    run_cli,
    write_gold,
)

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
            method.run(q, searcher, fake_llm(), joint_configuration()) for q in list(QUESTIONS)[:2]
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
    labels = retrain_module.label_log(log, gold, joint_configuration())
    assert len(labels.eval_runs) == 2 and labels.records == []


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

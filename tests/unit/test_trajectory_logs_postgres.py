"""Trajectory logs in PostgreSQL: the same commands and readers as with a SQLite file, on a real
server (tests/postgres_server.py): ask --log URL, the records table, collect --log URL, and
train --log URL from the database alone."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dynakrag.training import read_log_records, read_transitions, write_log_records
from dynakrag.training.trajectories import list_threads, logged_questions
from tests.unit.retrain.support import (
    PEOPLE,
    QUESTIONS,
    SUPPORT,
    question_of,
    run_cli,
    write_gold,
)
from tests.unit.retrain.support import world as world  # the fixture, re-exported

pytestmark = pytest.mark.postgres


def test_ask_logs_into_postgres_and_train_reads_it(
    postgres_url: str, world: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run_ids = []
    for person, _, _ in PEOPLE[:3]:
        argv = ["ask", question_of(person), "--corpus", world, "--log", postgres_url, "--json"]
        code, out, err = run_cli(argv, capsys)
        assert code == 0, err
        final = json.loads(out)
        run_ids.append(final["run_id"])
        logged = read_transitions(postgres_url, final["run_id"])
        assert [t.action for t in logged] == [e["action"] for e in final["trace"]]
    assert list_threads(postgres_url) == run_ids  # in the order they were written
    gold = write_gold(
        tmp_path / "gold.jsonl",
        [{"question": q, "answers": [a], "support": SUPPORT[q]} for q, a in QUESTIONS.items()],
    )
    argv = ["train", "--log", postgres_url, "--gold", gold, "--n-estimators", "5"]
    code, out, err = run_cli([*argv, "--out", tmp_path / "p.npz"], capsys)
    assert code == 0, err
    assert "3 runs by support" in out and "127.0.0.1" in out


def test_records_table_in_postgres(postgres_url: str) -> None:
    assert read_log_records(postgres_url) == []
    assert logged_questions(postgres_url) == set()
    first = [{"dataset": "d", "example_id": "1", "n": i} for i in range(3)]
    assert write_log_records(postgres_url, first) == 3
    with pytest.raises(TypeError):  # one bad record: nothing of the batch is written
        write_log_records(postgres_url, [{"dataset": "d", "example_id": "2"}, {"x": object()}])
    assert read_log_records(postgres_url) == first
    assert logged_questions(postgres_url) == {("d", "1")}


def test_collect_into_postgres_then_train_from_it_alone(
    postgres_url: str,
    world: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from dynakrag.cli import collect as collect_command
    from tests.unit.test_collect_and_train import llm as demo_llm

    monkeypatch.setattr(collect_command, "make_llm", lambda cfg, **options: demo_llm())
    argv = ["collect", "--dataset", "demo", "--limit", "2", "--rollouts", "1"]
    code, _, err = run_cli([*argv, "--log", postgres_url], capsys)
    assert code == 0, err
    assert len(logged_questions(postgres_url)) == 2
    code, out, err = run_cli(
        ["train", "--log", postgres_url, "--out", tmp_path / "p.npz", "--n-estimators", "5"],
        capsys,
    )
    assert code == 0, err
    assert f"{len(read_log_records(postgres_url))} stored records" in out


def test_export_into_postgres(postgres_url: str) -> None:
    from dynakrag.training.export import export_threads
    from tests.unit.test_export import CORPUS, FakeServer, plain, read_transitions_of

    server = FakeServer()
    server.run("studio-1", CORPUS.questions[3].question)
    summary = export_threads(server, postgres_url)
    assert summary.threads == ["studio-1"]
    exported = read_transitions(postgres_url, "studio-1")
    original = read_transitions_of(server, "studio-1")
    assert [plain(t.state) for t in exported] == [plain(t.state) for t in original]
    assert [t.action for t in exported] == [t.action for t in original]

"""Faults at scale in the database: a real PostgreSQL (the project's
:class:`~dynakrag.postgres.local_server.LocalPostgres`, a server of this module's own: the
tests restart it) is restarted, loses its connections or holds a lock past
``statement_timeout`` while ``dynakrag ask --log`` checkpoints runs and ``dynakrag collect
--log`` writes records, also through PgBouncer in transaction mode (where installed); no
server-side prepared statement is left for such a pooler to lose; two users on one server
never see each other's runs. Nothing is lost or written twice. The model is a fake
OpenAI-compatible server on loopback.

Each test reports a row of RELIABILITY.md's "Faults at scale" table; fast (CI runs them).
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from dynakrag import cli
from dynakrag.postgres.connections import connect
from dynakrag.postgres.local_server import LocalPostgres
from dynakrag.training.trajectories import read_log_records, write_log_records
from tests.reliability.scale_faults import (
    DEMO,
    FAULT_MARKS,
    QUESTIONS,
    FaultRow,
    Injector,
    PgBouncer,
    Report,
    ask_runs,
    collect_argv,
    compare_records,
    count,
    lock_table,
    reference_records,
    terminate_backends,
    write_demo_corpus,
)
from tests.threads import errors_in_threads

pytestmark = FAULT_MARKS


CHECKPOINTS = "SELECT count(*) FROM checkpoints"
LOGGED = "SELECT count(DISTINCT example_id) FROM dynakrag_records"


def _faults(server: LocalPostgres, name: str) -> dict[str, Callable[[], None]]:
    admin = server.url_of("postgres")

    def drop_connections() -> None:
        for _ in range(3):
            terminate_backends(admin, name)
            time.sleep(0.2)

    return {"restart": server.restart, "connections dropped": drop_connections}


# --------------------------------------------------------------------------------------------
# The database


@pytest.mark.parametrize("fault", ["restart", "connections dropped"])
def test_ask_log_survives_database_faults(
    fault: str, server, database, fake_model, tmp_path: Path, capsys, fault_row: Report
) -> None:
    name, url = database
    corpus = write_demo_corpus(tmp_path / "demo.jsonl")
    injector = Injector(lambda: count(url, CHECKPOINTS), 4, _faults(server, name)[fault])
    injector.start()
    try:
        outcome = ask_runs(url, corpus, [e.question for e in DEMO[:QUESTIONS]], capsys)
    finally:
        injector.finish()
    assert injector.fired.is_set(), "the fault never fired"
    fault_row(
        FaultRow(
            f"PostgreSQL {fault}",
            "ask --log",
            outcome.tried,
            outcome.finished,
            outcome.tried - outcome.finished,
            outcome.lost_steps,
            outcome.duplicate_steps,
            injector.recovery_s,
            "records = logged steps of each run",
        )
    )
    assert outcome.errors == []
    assert (outcome.finished, outcome.lost_steps, outcome.duplicate_steps) == (QUESTIONS, 0, 0)


@pytest.mark.parametrize("fault", ["restart", "connections dropped"])
def test_collect_log_survives_database_faults(
    fault: str, server, database, fake_model, tmp_path: Path, fault_row: Report
) -> None:
    name, url = database
    expected = reference_records(tmp_path, QUESTIONS)
    injector = Injector(lambda: count(url, LOGGED), 1, _faults(server, name)[fault])
    injector.start()
    try:
        code = cli.main(collect_argv(QUESTIONS, "--log", url))
    finally:
        injector.finish()
    assert injector.fired.is_set(), "the fault never fired"
    check = compare_records(read_log_records(url), expected)
    fault_row(
        FaultRow(
            f"PostgreSQL {fault}",
            "collect --log",
            1,
            int(code == 0),
            check.questions_lost,
            check.records_lost,
            check.duplicates,
            injector.recovery_s,
        )
    )
    assert code == 0
    assert (check.questions_lost, check.records_lost, check.duplicates) == (0, 0, 0)


def test_statement_timeout_is_retried(
    server, database, fake_model, tmp_path: Path, capsys, fault_row: Report
) -> None:
    """Statements blocked by a lock past ``statement_timeout`` (250 ms) are cancelled by the
    server and retried until the lock goes (1.5 s)."""
    name, url = database
    corpus = write_demo_corpus(tmp_path / "demo.jsonl")
    questions = [e.question for e in DEMO[:QUESTIONS]]
    ask_runs(url, corpus, questions[:1], capsys)  # the tables exist before the timeout is set
    write_log_records(url, [{"dataset": "warm-up", "example_id": "0"}])
    with contextlib.closing(connect(url)) as conn:
        conn.execute(f"ALTER DATABASE {name} SET statement_timeout = '250ms'")
    holders: list[threading.Thread] = []

    def lock_both() -> None:
        holders.append(lock_table(url, "checkpoints", 1.5))
        holders.append(lock_table(url, "dynakrag_records", 1.5))

    expected = reference_records(tmp_path, QUESTIONS)
    injector = Injector(lambda: count(url, CHECKPOINTS), 12, lock_both)
    injector.start()
    try:
        outcome = ask_runs(url, corpus, questions[1:], capsys)
        code = cli.main(collect_argv(QUESTIONS, "--log", url))
    finally:
        injector.finish()
        for holder in holders:
            holder.join()
    assert injector.fired.is_set(), "the fault never fired"
    logged = [r for r in read_log_records(url) if r.get("dataset") != "warm-up"]
    check = compare_records(logged, expected)
    runs, finished = outcome.tried + 1, outcome.finished + int(code == 0)
    fault_row(
        FaultRow(
            "statement timeout (250 ms, table locked 1.5 s)",
            "ask --log + collect --log",
            runs,
            finished,
            runs - finished + check.questions_lost,
            outcome.lost_steps + check.records_lost,
            outcome.duplicate_steps + check.duplicates,
            injector.recovery_s,
        )
    )
    assert outcome.errors == [] and code == 0
    assert (outcome.lost_steps, outcome.duplicate_steps) == (0, 0)
    assert (check.questions_lost, check.records_lost, check.duplicates) == (0, 0, 0)


@pytest.mark.skipif(PgBouncer.binary() is None, reason="no pgbouncer (apt-get install pgbouncer)")
def test_transaction_pooler_with_dropped_connections(
    server, database, fake_model, tmp_path: Path, capsys, fault_row: Report
) -> None:
    """Through PgBouncer in transaction mode (2 server connections shared by every client:
    a prepared statement would be missing on the next one), with the server's sessions cut
    mid-run."""
    name, _ = database
    corpus = write_demo_corpus(tmp_path / "demo.jsonl")
    expected = reference_records(tmp_path, QUESTIONS)
    with PgBouncer(server.port, name) as pooler:
        url = pooler.url
        injector = Injector(
            lambda: count(url, CHECKPOINTS), 4, _faults(server, name)["connections dropped"]
        )
        injector.start()
        try:
            outcome = ask_runs(url, corpus, [e.question for e in DEMO[:QUESTIONS]], capsys)
            code = cli.main(collect_argv(QUESTIONS, "--log", url))
        finally:
            injector.finish()
        check = compare_records(read_log_records(url), expected)
    runs, finished = outcome.tried + 1, outcome.finished + int(code == 0)
    fault_row(
        FaultRow(
            "PgBouncer 1.18 transaction pooling + connections dropped",
            "ask --log + collect --log",
            runs,
            finished,
            runs - finished + check.questions_lost,
            outcome.lost_steps + check.records_lost,
            outcome.duplicate_steps + check.duplicates,
            injector.recovery_s,
        )
    )
    assert outcome.errors == [] and code == 0
    assert (outcome.lost_steps, outcome.duplicate_steps) == (0, 0)
    assert (check.questions_lost, check.records_lost, check.duplicates) == (0, 0, 0)


def test_no_server_side_prepared_statements(database, fault_row: Report) -> None:
    """What a transaction-mode pooler needs, checked where none is installed: runs logged
    through the checkpoint saver (one pooled connection, so every statement shares it) and
    statements repeated on a plain connection leave no prepared statement on the server."""
    from dynakrag.data.demo import demo_passages
    from dynakrag.data.demo_corpus import generate_demo_corpus
    from dynakrag.graph.builder import build_graph
    from dynakrag.graph.runlog import run_config
    from dynakrag.postgres.checkpoints import postgres_saver
    from tests.fakes import KeywordSearcher, demo_chat_model

    _, url = database
    corpus = generate_demo_corpus(7)
    prepared = "SELECT count(*) AS n FROM pg_prepared_statements"
    saver = postgres_saver(url, max_size=1)
    try:
        answers = {q.question: q.answer for q in corpus.questions}
        graph = build_graph(
            KeywordSearcher(demo_passages(corpus)), demo_chat_model(answers), checkpointer=saver
        )
        for question in corpus.questions[:2]:
            graph.invoke({"question": question.question}, run_config(command="ask"))
        with saver.conn.connection() as conn:
            left_by_saver = conn.execute(prepared).fetchone()["n"]
    finally:
        saver.conn.close()
    write_log_records(url, [{"dataset": "demo", "example_id": "q"}])
    with contextlib.closing(connect(url)) as conn:
        for _ in range(10):  # psycopg prepares a statement run prepare_threshold times
            conn.execute("SELECT 1 FROM dynakrag_records WHERE example_id = %s", ("q",))
        left_by_connection = conn.execute(prepared).fetchone()["n"]
    fault_row(
        FaultRow(
            "transaction pooling without a pooler: server-side prepared statements",
            "ask (saver) + repeated statements",
            2,
            2,
            0,
            0,
            0,
            None,
            f"{left_by_saver + left_by_connection} prepared statements left on the server",
        )
    )
    assert (left_by_saver, left_by_connection) == (0, 0)


# --------------------------------------------------------------------------------------------
# Two users on one server


def test_two_users_runs_do_not_cross(server, database, fault_row: Report) -> None:
    """Two users at once on one database, each with a corpus (collection) of their own: every
    checkpoint of a user's runs holds only that user's passages, every record sits under that
    user's dataset."""
    from dynakrag.data.demo import demo_passages
    from dynakrag.data.demo_corpus import generate_demo_corpus
    from dynakrag.graph.builder import build_graph
    from dynakrag.graph.runlog import run_config, trajectory_log
    from dynakrag.training.trajectories import list_threads, read_transitions
    from tests.fakes import KeywordSearcher, demo_chat_model

    _, url = database
    corpora = {"alice": generate_demo_corpus(7), "bob": generate_demo_corpus(11)}
    threads: dict[str, list[str]] = {user: [] for user in corpora}
    errors: list[BaseException] = []

    def work(user: str) -> None:
        try:
            corpus = corpora[user]
            answers = {q.question: q.answer for q in corpus.questions}
            with trajectory_log(url) as saver:
                graph = build_graph(
                    KeywordSearcher(demo_passages(corpus)),
                    demo_chat_model(answers),
                    checkpointer=saver,
                )
                for question in corpus.questions[:QUESTIONS]:
                    config = run_config(command="ask", user=user)
                    final = graph.invoke({"question": question.question}, config)
                    threads[user].append(config["configurable"]["thread_id"])
                    records = [
                        {"dataset": user, "example_id": question.id, "answer": final["answer"]}
                    ]
                    write_log_records(url, records)
        except BaseException as exc:
            errors.append(exc)

    workers = [threading.Thread(target=work, args=(user,)) for user in corpora]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    assert errors == []
    texts = {user: {p.text for p in demo_passages(c)} for user, c in corpora.items()}
    crossed = 0
    for user, ids in threads.items():
        for thread in ids:
            for step in read_transitions(url, thread):
                assert step.run.get("user") == user
                evidence = {d["text"] for d in step.next_state.get("evidence", [])}
                crossed += len(evidence - texts[user])
    records = read_log_records(url)
    crossed += sum(
        1
        for r in records
        if r["example_id"] not in {q.id for q in corpora[r["dataset"]].questions[:QUESTIONS]}
    )
    assert set(list_threads(url)) == set(threads["alice"]) | set(threads["bob"])
    fault_row(
        FaultRow(
            "two users, one server, different collections",
            "ask --log (concurrent)",
            2 * QUESTIONS,
            len(threads["alice"]) + len(threads["bob"]),
            0,
            2 * QUESTIONS - len(records),
            0,
            None,
            f"{crossed} items crossed",
        )
    )
    assert crossed == 0
    assert len(records) == 2 * QUESTIONS


def test_first_writers_at_once_create_the_records_table_once(server) -> None:
    """Writers that start together on a fresh database take turns creating the records table:
    CREATE TABLE IF NOT EXISTS alone races (a unique violation on the table's row type)."""
    for round_ in range(5):
        url = server.create_database(f"first_writers_{round_}")
        start = threading.Barrier(4)

        def write(i: int, url: str = url, start: threading.Barrier = start) -> None:
            start.wait()
            write_log_records(url, [{"dataset": "d", "example_id": str(i)}])

        errors = errors_in_threads(write, [(i,) for i in range(4)])
        assert errors == []
        assert len(read_log_records(url)) == 4

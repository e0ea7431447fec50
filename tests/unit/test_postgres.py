"""dynakrag.postgres: URL recognition, one-line connection errors, and LangGraph checkpoints in
a real PostgreSQL server (tests/postgres_server.py)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import pytest

from dynakrag import build_graph
from dynakrag.data.demo import demo_passages
from dynakrag.data.demo_corpus import generate_demo_corpus
from dynakrag.errors import DatabaseUnavailableError, UserInputError
from dynakrag.postgres.checkpoints import postgres_saver
from dynakrag.postgres.connections import connect, connection_pool, is_postgres_url, redact
from dynakrag.postgres.local_server import LocalPostgres
from tests.fakes import KeywordSearcher, demo_chat_model
from tests.joint import joint_configuration


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("postgresql://u@h:5432/db", True),
        ("postgres://h/db", True),
        ("POSTGRESQL://h/db", True),
        ("runs.sqlite", False),
        ("postgresql.sqlite", False),
        ("mysql://h/db", False),
        (Path("postgresql://h/db"), False),
        (None, False),
    ],
)
def test_is_postgres_url(text: object, expected: bool) -> None:
    assert is_postgres_url(text) is expected


def test_redact_hides_only_the_password() -> None:
    assert redact("postgresql://ann:s3cret@db.example:5432/runs") == (
        "postgresql://ann:***@db.example:5432/runs"
    )
    assert redact("postgresql://ann@db/runs") == "postgresql://ann@db/runs"


def test_connect_refuses_a_file_path() -> None:
    with pytest.raises(UserInputError, match="not a PostgreSQL URL"):
        connect("runs.sqlite")


def test_unreachable_server_is_one_line_without_the_password() -> None:
    import socket

    with socket.socket() as probe:  # a loopback port nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with pytest.raises(DatabaseUnavailableError) as caught:
        connection_pool(f"postgresql://ann:s3cret@127.0.0.1:{port}/runs")
    message = str(caught.value)
    assert "s3cret" not in message and "***" in message
    assert "cannot connect to PostgreSQL" in message


@pytest.mark.postgres
def test_connections_use_the_pooler_safe_settings(postgres_url: str) -> None:
    conn = connect(postgres_url)
    try:
        assert conn.autocommit is True
        assert conn.prepare_threshold is None or conn.prepare_threshold == 0
        row = conn.execute("SELECT extversion FROM pg_extension WHERE extname = 'vector'")
        assert row.fetchone() is not None  # dicts, with the extension the fixture promises
    finally:
        conn.close()


@pytest.mark.postgres
def test_graph_checkpoints_survive_in_postgres(postgres_url: str) -> None:
    corpus = generate_demo_corpus(7)
    question = corpus.questions[0]
    saver = postgres_saver(postgres_url)
    try:
        graph = build_graph(
            KeywordSearcher(demo_passages(corpus)),
            demo_chat_model({question.question: question.answer}),
            configuration=joint_configuration(),  # the scripted reader answers the joint check
            checkpointer=saver,
        )
        final = graph.invoke({"question": question.question}, {"configurable": {"thread_id": "q"}})
    finally:
        saver.conn.close()
    assert final["answer"] == question.answer

    reopened = postgres_saver(postgres_url)  # a second process would see the same
    try:
        graph = build_graph(KeywordSearcher([]), demo_chat_model({}), checkpointer=reopened)
        history = list(graph.get_state_history({"configurable": {"thread_id": "q"}}))
    finally:
        reopened.conn.close()
    assert history[0].values["answer"] == question.answer
    # Full history, not only the last state: one checkpoint per super-step.
    assert len(history) > len(final["trace"])


@dataclass
class Payload:
    """A type outside LangGraph's allow-list of revivable types."""

    value: int


@pytest.mark.postgres
def test_checkpoints_revive_no_arbitrary_type(postgres_url: str) -> None:
    """The saver's serializer is strict: a stored object of a type outside LangGraph's
    allow-list is not rebuilt by importing its module, whatever LANGGRAPH_STRICT_MSGPACK says."""
    from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

    permissive = JsonPlusSerializer(allowed_msgpack_modules=True)
    stored = permissive.dumps_typed(Payload(3))
    assert permissive.loads_typed(stored) == Payload(3)  # what a lax reader would rebuild
    saver = postgres_saver(postgres_url)
    try:
        revived = saver.serde.loads_typed(stored)
    finally:
        saver.conn.close()
    assert not isinstance(revived, Payload)


@pytest.mark.postgres
def test_local_server_creates_databases_with_vector(postgres_server: LocalPostgres) -> None:
    url = postgres_server.create_database("another_one")
    assert url.endswith("/another_one")
    with pytest.raises(UserInputError):
        postgres_server.create_database('x"; DROP DATABASE postgres; --')
    conn = connect(url)
    try:
        assert conn.execute("SELECT '[1,2]'::vector <-> '[1,3]'::vector AS d").fetchone() == {
            "d": 1.0
        }
    finally:
        conn.close()


@pytest.mark.postgres
def test_savers_opened_together_set_the_schema_up_once(postgres_url: str) -> None:
    """Workers starting at once: no migration runs twice, none waits for ever (the saver's
    CREATE INDEX CONCURRENTLY against sessions blocked on a lock would)."""
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(4) as pool:
        savers = list(pool.map(lambda _: postgres_saver(postgres_url), range(4)))
    for saver in savers:
        saver.conn.close()
    conn = connect(postgres_url)
    try:
        rows = conn.execute("SELECT v, count(*) AS n FROM checkpoint_migrations GROUP BY v")
        counts = [row["n"] for row in rows.fetchall()]
    finally:
        conn.close()
    assert counts and set(counts) == {1}


@pytest.mark.postgres
@pytest.mark.skipif(os.geteuid() != 0, reason="only root runs the server as another account")
def test_server_starts_when_the_wheel_sits_under_a_private_folder(
    postgres_server: LocalPostgres, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A virtual environment under /root (0700): ``nobody`` cannot reach the wheel's binaries,
    so a copy in the temporary folder runs instead."""
    monkeypatch.setattr("dynakrag.postgres.local_server._reachable_by_others", lambda path: False)
    with LocalPostgres() as server:
        conn = connect(server.url)
        try:
            assert conn.execute("SELECT 1 AS one").fetchone() == {"one": 1}
        finally:
            conn.close()

"""Faults at scale: the database, a worker, the model server or the disk fails mid-run, and
nothing is lost or written twice.

A real PostgreSQL (the project's :class:`~dynakrag.postgres.local_server.LocalPostgres`, a server
of this module's own: the tests restart it) takes the checkpoints of ``dynakrag ask --log`` and the
records of ``dynakrag collect --log``; the model is a fake OpenAI-compatible server on
loopback, or, for the embedded server, the stdlib stand-in of the supervisor tests; the Dask
clusters are real (a scheduler and two workers, processes of their own that the tests kill, or
the local cluster ``eval --workers 2`` starts itself). Orphans: a killed process that started a
PostgreSQL server or ``langgraph dev`` leaves neither running.
Each test adds one row to RELIABILITY.md's "Faults at scale" table (runs tried and finished,
questions and records lost, duplicate records, recovery time). All are fast (seconds each:
CI runs them).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from dynakrag import cli
from dynakrag.data.datasets import data_dir
from dynakrag.postgres.connections import connect
from dynakrag.postgres.local_server import LocalPostgres, embedded_postgres_available
from dynakrag.training.trajectories import read_log_records, write_log_records
from tests.fakes import FAKE_MODEL_SERVER, demo_responder
from tests.markers import needs_data
from tests.reliability.scale_faults import (
    DEMO,
    QUESTIONS,
    DaskCluster,
    FaultRow,
    Injector,
    PgBouncer,
    ask_runs,
    collect_argv,
    compare_records,
    count,
    journalled_questions,
    local_dask_workers,
    lock_table,
    logged,
    reference_records,
    terminate_backends,
    write_demo_corpus,
)
from tests.reliability.support import (
    LANGGRAPH,
    REPO_ROOT,
    FakeOpenAI,
    clean_env,
    no_proxy,
    serving,
)

pytestmark = [
    pytest.mark.faults,
    pytest.mark.postgres,
    pytest.mark.skipif(not embedded_postgres_available(), reason="needs dynakrag[postgres]"),
]

Report = Callable[[FaultRow], None]


def _has_dask() -> bool:
    import importlib.util

    return importlib.util.find_spec("distributed") is not None


CHECKPOINTS = "SELECT count(*) FROM checkpoints"
LOGGED = "SELECT count(DISTINCT example_id) FROM dynakrag_records"


@pytest.fixture
def fault_row(record_property: Callable[[str, object], None]) -> Report:
    def report(row: FaultRow) -> None:
        record_property("scale_fault", row.json())

    return report


@pytest.fixture(scope="module")
def server() -> Iterator[LocalPostgres]:
    """A server of this module's own (restarted by the tests); throwaway durability."""
    with LocalPostgres(settings={"fsync": "off", "synchronous_commit": "off"}) as local:
        yield local


_databases = iter(range(1, 10_000))


@pytest.fixture
def database(server: LocalPostgres) -> tuple[str, str]:
    name = f"faults_{next(_databases)}"
    return name, server.create_database(name)


@pytest.fixture
def fake_model(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeOpenAI]:
    """A fake model answering the demo questions; ``ask``/``collect`` reach it over loopback,
    retrieve with BM25 and cache nowhere shared."""
    answers = {e.question: e.answers[0] for e in DEMO}
    with serving(FakeOpenAI(demo_responder(answers))) as fake:
        monkeypatch.setenv("DYNAKRAG_LLM_BASE_URL", fake.base_url)
        monkeypatch.setenv("DYNAKRAG_CACHE_DIR", str(tmp_path / "cache"))
        monkeypatch.setenv("DYNAKRAG_RETRIEVER", "bm25")
        monkeypatch.setenv("OPENAI_API_KEY", "test")
        monkeypatch.setenv("NO_PROXY", no_proxy())
        yield fake


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


# --------------------------------------------------------------------------------------------
# The embedded model server killed mid-generation


def _wait_for(condition: Callable[[], bool], timeout: float = 60.0) -> bool:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def _pid_gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    try:  # an unreaped child of ours counts as gone
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return True


def test_model_server_killed_mid_generation(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fault_row: Report
) -> None:
    """The shared server is SIGKILLed while it generates: the request is retried on a
    restarted server (same address) and answered; killed again, the next request fails with
    one clear error instead of hanging."""
    from dynakrag.errors import ModelUnavailableError
    from dynakrag.llm import embedded
    from dynakrag.llm.shared_server import SharedServer

    script = tmp_path / "fake_model_server.py"
    script.write_text(FAKE_MODEL_SERVER, encoding="utf-8")
    launches, hold, generating = tmp_path / "launches", tmp_path / "hold", tmp_path / "generating"
    files = [launches, tmp_path / "requests", "", hold, generating]  # no BUSY file

    def factory(port: int) -> list[str]:
        return [sys.executable, str(script), str(port), "0", *map(str, files)]

    servers: list[Any] = []

    def new_server(cache_dir: Any, **_: Any) -> Any:
        servers.append(SharedServer(tmp_path, identity="fake", command_factory=factory, idle_s=0.5))
        return servers[-1]

    monkeypatch.setattr(embedded, "_singleton", None)
    monkeypatch.setattr(embedded, "_new_server", new_server)
    try:
        model = embedded.embedded_chat_model(tmp_path, max_retries=1, timeout=60)
        hold.touch()
        replies: list[Any] = []
        asking = threading.Thread(target=lambda: replies.append(model.invoke("question?")))
        asking.start()
        assert _wait_for(generating.exists), "the request never reached the server"
        first = int(launches.read_text().split()[0])
        killed_at = time.monotonic()
        os.kill(first, signal.SIGKILL)
        hold.unlink()
        asking.join(timeout=120)
        recovery = time.monotonic() - killed_at
        answered = bool(replies) and replies[0].content == "alive"
        pids = [int(p) for p in launches.read_text().split()]
        os.kill(pids[-1], signal.SIGKILL)  # a second death: past the restart budget
        assert _wait_for(lambda: _pid_gone(pids[-1]))
        with pytest.raises(ModelUnavailableError) as error:
            model.invoke("another question?")
        message = " ".join(str(error.value).split())  # how the CLI prints it: one line
    finally:
        for server in servers:
            server.shutdown()
    fault_row(
        FaultRow(
            "embedded model server SIGKILLed mid-generation",
            "chat request (ask)",
            2,
            int(answered),
            0,
            0,
            0,
            recovery,
            f"restarted once ({len(pids)} launches); second death: {message[:60]}...",
        )
    )
    assert answered and len(pids) == 2
    assert message.startswith("the embedded model server died again")


# --------------------------------------------------------------------------------------------
# The log disk full


@contextlib.contextmanager
def small_disk(folder: Path, size_kb: int) -> Iterator[str]:
    """``folder`` on a ``size_kb`` tmpfs (root), else this process limited to files of
    ``size_kb`` (RLIMIT_FSIZE); yields which."""
    import resource

    folder.mkdir(parents=True, exist_ok=True)
    mounted = (
        subprocess.run(
            ["mount", "-t", "tmpfs", "-o", f"size={size_kb}k", "tmpfs", str(folder)],
            capture_output=True,
            check=False,
        ).returncode
        == 0
        if os.geteuid() == 0
        else False
    )
    if mounted:
        try:
            yield "tmpfs"
        finally:
            subprocess.run(["umount", "-l", str(folder)], check=False)
        return
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    resource.setrlimit(resource.RLIMIT_FSIZE, (size_kb * 1024, hard))
    try:
        yield "RLIMIT_FSIZE"
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))


DISK_KB = 1536
"""The log disk: room for a few dozen logged runs and an evaluation's journal."""


def test_log_disk_full(fake_model, tmp_path: Path, capsys, fault_row: Report) -> None:
    """``ask --log`` into a SQLite log on a full disk, and an eval journal on it: the run the
    disk filled under still prints its answer, then a one-line error naming the log and why
    (exit 1); what was written before stays readable."""
    from dynakrag.training.trajectories import list_threads, read_transitions
    from dynakrag.workers import Journal, JournalWriteError

    corpus = write_demo_corpus(tmp_path / "demo.jsonl")
    disk = tmp_path / "disk"
    questions = [e.question for e in DEMO]
    finished, error, journal_error, kept, answered = 0, "", "", 0, False
    with small_disk(disk, DISK_KB) as how:
        log = disk / "runs.sqlite"
        journal = Journal(disk / "eval.json.partial.jsonl", {"run": 1})
        for number in range(100):  # questions an evaluation finished before the disk filled
            journal.add(f"q{number}", {"answer": "x" * 256})
        for number in range(150):
            argv = ["ask", questions[number % len(questions)], "--corpus", str(corpus)]
            code = cli.main([*argv, "--log", str(log), "--quiet"])
            captured = capsys.readouterr()
            if code != 0:
                error = captured.err.strip()
                last = (captured.out.strip().splitlines() or [""])[-1]
                answered = last.startswith(("Answer:", "No answer:"))
                break
            finished += 1
        try:
            for number in range(100, 10_000):
                journal.add(f"q{number}", {"answer": "x" * 256})
        except JournalWriteError as exc:
            journal_error = str(exc)
        finally:
            journal.close()
        kept = len(Journal(disk / "eval.json.partial.jsonl", {"run": 1}).done)
        with contextlib.closing(sqlite3.connect(str(log))) as conn:
            integrity = conn.execute("PRAGMA integrity_check").fetchone()[0]
        readable = sum(1 for thread in list_threads(log) if read_transitions(log, thread))
    fault_row(
        FaultRow(
            f"log disk full ({how}, {DISK_KB} KiB)",
            "ask --log FILE.sqlite + eval journal",
            finished + 1,
            finished + int(answered),
            int(not answered),
            0,
            0,
            None,
            f"{'answer printed, then ' if answered else ''}error: cannot write the log: "
            f"{error.partition(f'{log}: ')[2].split(';')[0][:60]}; "
            f"{readable} runs and {kept} journal lines readable",
        )
    )
    assert error.startswith("dynakrag: error: cannot write the trajectory log "), error
    assert "\n" not in error and answered
    assert "full" in error or "space" in error.lower() or "large" in error.lower()
    assert integrity == "ok" and readable >= finished > 0, (error, log.stat().st_size)
    assert journal_error and "\n" not in journal_error and kept >= 100


# --------------------------------------------------------------------------------------------
# Orphans

OWNER = textwrap.dedent(
    """
    import sys, time
    from dynakrag.postgres.local_server import LocalPostgres
    server = LocalPostgres(settings={"fsync": "off"})
    server.start()
    print(server.server_pid, flush=True)
    time.sleep(600)
    """
)


def test_killed_owner_leaves_no_postgres(tmp_path: Path, fault_row: Report) -> None:
    """A process that started a LocalPostgres is SIGKILLed (no clean-up of its own runs): its
    watchdog stops the server and removes the data folder."""
    gone, recovery = _child_gone_with_owner([OWNER], signal.SIGKILL, timeout=90)
    fault_row(
        FaultRow(
            "process owning a LocalPostgres SIGKILLed",
            "orphan clean-up",
            1,
            int(gone),
            0,
            0,
            0,
            recovery,
            "server gone (watchdog); model servers: supervisor leases",
        )
    )
    assert gone, "the killed owner's PostgreSQL outlived it"


def _child_gone_with_owner(
    script: list[str], sig: signal.Signals, *, timeout: float, log: Path | None = None
) -> tuple[bool, float]:
    """Run ``python -c script...`` (it prints the pid of the server it owns), send it ``sig``;
    whether the server is gone within ``timeout`` seconds, and how long that took. A server
    found orphaned is killed, not left running."""
    owner = subprocess.Popen(
        [sys.executable, "-c", *script],
        cwd=REPO_ROOT,
        env=clean_env(),
        stdout=subprocess.PIPE,
        text=True,
    )
    pid = None
    try:
        assert owner.stdout is not None
        line = owner.stdout.readline()
        assert line.strip().isdigit(), log.read_text(errors="replace")[-2000:] if log else line
        pid = int(line)
        assert not _pid_gone(pid)
        killed_at = time.monotonic()
        owner.send_signal(sig)
        owner.wait(timeout=30)
        gone = _wait_for(lambda: _pid_gone(pid), timeout=timeout)
        return gone, time.monotonic() - killed_at
    finally:
        if owner.poll() is None:
            owner.kill()
        if pid is not None and not _pid_gone(pid):
            os.kill(pid, signal.SIGKILL)


DEV_SERVER_OWNER = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    from tests.reliability.support import clean_env, dev_server
    env = clean_env(DYNAKRAG_CACHE_DIR=sys.argv[2], OPENAI_API_KEY="dummy",
                    DYNAKRAG_LLM_BASE_URL="http://127.0.0.1:9/v1")
    with dev_server(env, Path(sys.argv[1])) as server:
        print(server.process.pid, flush=True)
        time.sleep(600)
    """
)


@pytest.mark.skipif(not LANGGRAPH.exists(), reason="needs the langgraph CLI (dynakrag[studio])")
def test_terminated_test_leaves_no_dev_server(tmp_path: Path, fault_row: Report) -> None:
    """A test process serving ``langgraph dev`` (the studio fixtures' launcher) is SIGTERMed,
    as CI does to a job it cancels: Python runs no ``finally`` then, and the server, in a
    session of its own, would be orphaned; the kernel kills it with its parent."""
    log = tmp_path / "dev.log"
    gone, recovery = _child_gone_with_owner(
        [DEV_SERVER_OWNER, str(log), str(tmp_path)], signal.SIGTERM, timeout=10, log=log
    )
    fault_row(
        FaultRow(
            "test process serving langgraph dev SIGTERMed",
            "orphan clean-up",
            1,
            int(gone),
            0,
            0,
            0,
            recovery,
            "dev server gone with its parent (PR_SET_PDEATHSIG)",
        )
    )
    assert gone, "langgraph dev outlived the test process that started it"


# --------------------------------------------------------------------------------------------
# Dask: a worker killed, the scheduler lost, the run resumed

DASK_QUESTIONS = 6
"""Questions of a Dask run: two workers are both mid-question when the fault fires."""
needs_dask = pytest.mark.skipif(not _has_dask(), reason="needs dynakrag[scale]")
DATA_DIR = data_dir(must_exist=False)
"""The benchmark samples, found before the fixtures clear ``DYNAKRAG_*`` settings."""


@contextlib.contextmanager
def slow_fake_model(
    answers: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[tuple[FakeOpenAI, dict[str, str]]]:
    """A fake model knowing ``answers`` and taking 20 ms a reply (a question then lasts long
    enough for a fault to land in it), for this process (and the workers it starts) and,
    through the returned environment, the workers of a :class:`DaskCluster`."""
    reader = demo_responder(answers)

    def respond(messages: list[Any]) -> str:
        time.sleep(0.02)
        return reader(messages)

    with serving(FakeOpenAI(respond)) as fake:
        settings = {"DYNAKRAG_LLM_BASE_URL": fake.base_url, "OPENAI_API_KEY": "test"}
        for name, value in {**settings, "NO_PROXY": no_proxy()}.items():
            monkeypatch.setenv(name, value)
        monkeypatch.setenv("DYNAKRAG_CACHE_DIR", str(tmp_path / "cache"))
        # The workers' own cache: no reply of the reference run to replay.
        yield fake, clean_env(**settings, DYNAKRAG_CACHE_DIR=str(tmp_path / "worker-cache"))


@pytest.fixture
def slow_model(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, str]]:
    """:func:`slow_fake_model` answering the demo questions."""
    answers = {e.question: e.answers[0] for e in DEMO}
    with slow_fake_model(answers, tmp_path, monkeypatch) as (_, env):
        yield env


@needs_dask
def test_collect_survives_a_killed_worker(
    database, slow_model: dict[str, str], tmp_path: Path, capsys, fault_row: Report
) -> None:
    """One of two Dask workers SIGKILLed while both run a question (``collect --scheduler
    --log``): Dask reruns its question on the other worker; the run finishes."""
    _, url = database
    expected = reference_records(tmp_path, DASK_QUESTIONS)
    with DaskCluster(2, slow_model) as cluster:
        victim = cluster.worker_processes[0]
        injector = Injector(lambda: logged(url), 1, victim.kill)
        injector.start()
        try:
            code = cli.main(
                collect_argv(DASK_QUESTIONS, "--scheduler", cluster.address, "--log", url)
            )
        finally:
            injector.finish()
        survivors = sum(process.poll() is None for process in cluster.worker_processes)
    error = capsys.readouterr().err.strip()
    assert injector.fired.is_set(), "the fault never fired"
    check = compare_records(read_log_records(url), expected)
    fault_row(
        FaultRow(
            "Dask worker SIGKILLed mid-question (1 of 2)",
            "collect --scheduler --log",
            1,
            int(code == 0),
            check.questions_lost,
            check.records_lost,
            check.duplicates,
            injector.recovery_s,
            f"killed at {injector.progress_at_fault}/{DASK_QUESTIONS} questions logged; "
            "its question rerun on the other worker",
        )
    )
    assert code == 0, error
    assert survivors == 1 and injector.progress_at_fault < DASK_QUESTIONS
    assert (check.questions_lost, check.records_lost, check.duplicates) == (0, 0, 0)


@needs_dask
@needs_data
def test_eval_on_workers_survives_a_killed_worker(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys, fault_row: Report
) -> None:
    """``eval --workers 2`` (the command's own local cluster, a nanny per worker): one worker
    process SIGKILLed while both run a question. Dask reruns its question (the nanny restarts
    the worker); every question is answered once, in the results and in the journal, with the
    records of a single-process run."""
    from collections import Counter

    from dynakrag.data.datasets import load_examples
    from dynakrag.workers import Journal, journal_path

    monkeypatch.setenv("DYNAKRAG_DATA_DIR", str(DATA_DIR))
    examples = load_examples("hotpotqa", "eval", DASK_QUESTIONS)
    argv = ["eval", "--dataset", "hotpotqa", "--split", "eval", "--setting", "distractor"]
    argv += ["--method", "dynakrag", "--retriever", "bm25", "--limit", str(DASK_QUESTIONS)]
    argv += ["--no-cache", "--quiet"]  # no reply replayed: the killed question runs again
    journalled: list[str] = []
    remove = Journal.remove

    def keep_lines(journal: Journal) -> None:  # the journal's lines, before the run drops it
        journalled.extend(journal.path.read_text(encoding="utf-8").splitlines()[1:])
        remove(journal)

    monkeypatch.setattr(Journal, "remove", keep_lines)
    out = tmp_path / "run.json"
    answers = {e.question: e.answers[0] for e in examples}
    with slow_fake_model(answers, tmp_path, monkeypatch) as (fake, _):
        assert cli.main([*argv, "--out", str(tmp_path / "reference.json")]) == 0
        journalled.clear()
        reference_requests = fake.requests
        killed: list[int] = []

        def kill_a_worker() -> None:
            killed.append(local_dask_workers()[0])
            os.kill(killed[0], signal.SIGKILL)

        injector = Injector(lambda: journalled_questions(journal_path(out)), 1, kill_a_worker)
        capsys.readouterr()
        injector.start()
        try:
            code = cli.main([*argv, "--workers", "2", "--out", str(out)])
        finally:
            injector.finish()
        rerun_requests = fake.requests - 2 * reference_requests  # the killed question's
    error = capsys.readouterr().err.strip()
    assert injector.fired.is_set() and killed, "the fault never fired"
    expected = json.loads((tmp_path / "reference.json").read_text())["questions"]
    results = json.loads(out.read_text())["questions"] if code == 0 else []
    asked = [e.id for e in examples]
    answered = Counter(r["id"] for r in results)
    keys = Counter(json.loads(line)["key"].rsplit(":", 1)[1] for line in journalled)
    lost = len(set(asked) - set(answered)) + len(set(asked) - set(keys))
    duplicates = sum(n - 1 for n in answered.values()) + sum(n - 1 for n in keys.values())
    same = [_without_latency(r) for r in results] == [_without_latency(r) for r in expected]
    fault_row(
        FaultRow(
            "Dask worker SIGKILLed mid-question (1 of 2, nanny)",
            "eval --workers 2",
            1,
            int(code == 0),
            lost,
            0 if same else len(expected),
            duplicates,
            injector.recovery_s,
            f"killed at {injector.progress_at_fault}/{DASK_QUESTIONS} questions journalled, "
            f"{rerun_requests} model requests redone; results "
            f"{'equal' if same else 'unequal'} to one process's, journal checked too",
        )
    )
    assert code == 0, error
    assert injector.progress_at_fault < DASK_QUESTIONS
    assert rerun_requests > 0, "the killed worker was not mid-question"
    assert (lost, duplicates) == (0, 0), (answered, keys)
    assert same


def _without_latency(record: dict[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in record.items() if key != "latency_s"}


@needs_dask
def test_collect_resumes_after_the_scheduler_is_lost(
    database, slow_model: dict[str, str], tmp_path: Path, capsys, fault_row: Report
) -> None:
    """The Dask scheduler SIGKILLed mid-run (``collect --scheduler --log``): the run ends with
    one line; rerun on a restarted cluster, it does the questions not yet logged and nothing
    twice."""
    _, url = database
    expected = reference_records(tmp_path, DASK_QUESTIONS)
    with DaskCluster(2, slow_model) as cluster:
        argv = collect_argv(DASK_QUESTIONS, "--scheduler", cluster.address, "--log", url)
        injector = Injector(lambda: logged(url), 1, cluster.kill_scheduler)
        capsys.readouterr()  # the reference run's progress
        injector.start()
        try:
            first = cli.main(argv)
        finally:
            injector.finish()
        error = capsys.readouterr().err.strip().splitlines()[-1]
    assert injector.fired.is_set() and injector.fired_at is not None, "the fault never fired"
    before = read_log_records(url)
    with DaskCluster(1, slow_model, port=cluster.port) as restarted:  # the same address
        progress = Injector(lambda: logged(url), len({r["example_id"] for r in before}), _nothing)
        progress.start()
        try:
            second = cli.main(argv)
        finally:
            progress.finish()
        assert restarted.address == cluster.address
    after = read_log_records(url)
    check = compare_records(after, expected)
    resumed_at = progress.fired_at or time.monotonic()
    recovery = resumed_at - injector.fired_at + (progress.recovery_s or 0.0)
    fault_row(
        FaultRow(
            "Dask scheduler SIGKILLed mid-run, the run resumed",
            "collect --scheduler --log, rerun",
            2,
            int(first == 0) + int(second == 0),
            check.questions_lost,
            check.records_lost,
            check.duplicates,
            recovery,
            f"lost at {injector.progress_at_fault}/{DASK_QUESTIONS} questions logged; first "
            f"run: {error[:60]}...; recovery includes restarting the cluster",
        )
    )
    assert injector.progress_at_fault < DASK_QUESTIONS
    assert first == 1 and "\n" not in error
    assert error.startswith("dynakrag: error: lost the Dask cluster at "), error
    assert second == 0
    assert (check.questions_lost, check.records_lost, check.duplicates) == (0, 0, 0)
    assert after[: len(before)] == before  # what was logged before the loss, untouched


def _nothing() -> None:
    """A fault that is none: an :class:`Injector` that only times the progress after it."""

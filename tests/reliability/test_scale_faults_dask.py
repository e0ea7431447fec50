"""Faults at scale on Dask: real clusters (a scheduler and two workers, processes of their own
that the tests kill, or the local cluster ``eval --workers 2`` starts itself), with a fake
model on loopback slow enough for a fault to land mid-question: a worker SIGKILLed, the
scheduler lost and the run resumed; every question is done once, no record lost or
written twice.

Each test reports a row of RELIABILITY.md's "Faults at scale" table; fast (CI runs them).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from dynakrag import cli
from dynakrag.data.datasets import data_dir
from dynakrag.training.trajectories import read_log_records
from tests.fakes import demo_responder
from tests.markers import needs_data
from tests.reliability.scale_faults import (
    DEMO,
    FAULT_MARKS,
    DaskCluster,
    FaultRow,
    Injector,
    Report,
    collect_argv,
    compare_records,
    journalled_questions,
    logged,
    reference_records,
    worker_mid_request,
)
from tests.reliability.support import FakeOpenAI, clean_env, no_proxy, serving

pytestmark = FAULT_MARKS


def _has_dask() -> bool:
    import importlib.util

    return importlib.util.find_spec("distributed") is not None


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

        def kill_a_worker() -> None:  # one waiting on a reply: surely mid-question
            killed.append(worker_mid_request(fake.open_requests))
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

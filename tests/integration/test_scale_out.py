"""Beyond one machine: questions fanned out over Dask workers give the records a single process
gives, into files or a shared PostgreSQL log; a run killed mid-way resumes without redoing or
losing finished questions; ``train --log postgresql://...`` trains from what workers logged.

The generator is a fake OpenAI-compatible server in this process (the worker processes reach it
over loopback), retrieval BM25: no model is loaded. The Dask clusters are real (2 worker
processes), and so is the PostgreSQL server (tests/postgres_server.py).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from dynakrag import cli
from dynakrag.data.datasets import load_examples
from dynakrag.files import canonical_json_line, read_jsonl, write_jsonl
from dynakrag.training.collect import training_world_examples
from dynakrag.training.trajectories import logged_questions, read_log_records
from dynakrag.workers import journal_path
from tests.fakes import demo_responder
from tests.markers import needs_data
from tests.reliability.support import FakeOpenAI, clean_env, no_proxy, serving

REPO = Path(__file__).resolve().parents[2]
DEMO = training_world_examples()[:4]


@pytest.fixture
def fake_model(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """A fake model server answering demo and HotpotQA train questions; the environment
    (inherited by Dask's worker processes) points the generator at it."""
    answers = {e.question: e.answers[0] for e in training_world_examples()[:6]} | {
        q.question: q.answers[0] for q in _hotpot_train()
    }
    with serving(FakeOpenAI(demo_responder(answers))) as server:
        for name in list(os.environ):
            if name.startswith("DYNAKRAG_") and name != "DYNAKRAG_DATA_DIR":
                monkeypatch.delenv(name)
        monkeypatch.setenv("DYNAKRAG_LLM_BASE_URL", server.base_url)
        monkeypatch.setenv("DYNAKRAG_CACHE_DIR", str(tmp_path / "cache"))
        monkeypatch.setenv("OPENAI_API_KEY", "test")
        monkeypatch.setenv("NO_PROXY", no_proxy())
        yield server


def _hotpot_train() -> list[Any]:
    try:
        return load_examples("hotpotqa", "train", 8)
    except Exception:
        return []


def canonical(records: list[Mapping[str, Any]]) -> list[str]:
    """Records as sorted canonical JSON lines: equal means the same records, order aside."""
    return sorted(canonical_json_line(r) for r in records)


def collect_argv(dataset: str, limit: int, *extra: str) -> list[str]:
    return ["collect", "--dataset", dataset, "--limit", str(limit), "--retriever", "bm25", *extra]


def test_workers_write_the_records_of_one_process_and_resume(
    fake_model: Any, tmp_path: Path
) -> None:
    reference = tmp_path / "reference.jsonl"
    assert cli.main(collect_argv("demo", 4, "--out", str(reference))) == 0
    # A first run that died after finishing the first question (its records marked, so that a
    # recomputation would show) and while writing the second one.
    first = [dict(r, label=42.0) for r in read_jsonl(reference) if r["example_id"] == DEMO[0].id]
    cut = next(r for r in read_jsonl(reference) if r["example_id"] == DEMO[1].id)
    out = tmp_path / "out.jsonl"
    write_jsonl(first, out)
    with out.open("a") as file:
        file.write(json.dumps(cut) + "\n" + json.dumps(cut)[:40])
    assert cli.main(collect_argv("demo", 4, "--out", str(out), "--workers", "2")) == 0
    records = read_jsonl(out)
    assert [r["label"] for r in records if r["example_id"] == DEMO[0].id] == [42.0] * len(first)
    others = [r for r in read_jsonl(reference) if r["example_id"] != DEMO[0].id]
    assert canonical([r for r in records if r["example_id"] != DEMO[0].id]) == canonical(others)


@needs_data
@pytest.mark.postgres
def test_collect_on_two_workers_into_postgres_then_train(
    fake_model: Any, tmp_path: Path, postgres_url: str
) -> None:
    """The issue's scenario: 8 HotpotQA train questions on 2 Dask workers into one Postgres
    database, then ``train --log`` from it with no other input."""
    reference = tmp_path / "reference.jsonl"
    assert cli.main(collect_argv("hotpotqa", 8, "--out", str(reference))) == 0
    argv = collect_argv("hotpotqa", 8, "--split", "train", "--workers", "2", "--log")
    assert cli.main([*argv, postgres_url]) == 0
    logged = read_log_records(postgres_url)
    assert canonical(logged) == canonical(read_jsonl(reference))
    assert {q for _, q in logged_questions(postgres_url)} == {e.id for e in _hotpot_train()}

    policy = tmp_path / "policy.npz"
    train = ["train", "--log", postgres_url, "--out", str(policy), "--n-estimators", "5"]
    assert cli.main(train) == 0
    from dynakrag.policy.learned import LearnedPolicy

    assert isinstance(LearnedPolicy.load(policy), LearnedPolicy)


@pytest.mark.postgres
def test_a_killed_collection_resumes_without_losing_or_redoing_questions(
    fake_model: Any, tmp_path: Path, postgres_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    examples = training_world_examples()[:6]
    answers = {e.question: e.answers[0] for e in examples}
    reader = demo_responder(answers)

    def respond(messages: list[Any]) -> str:
        time.sleep(0.05)  # questions take a while, so the kill lands mid-run
        return reader(messages)

    with serving(FakeOpenAI(respond)) as server:
        monkeypatch.setenv("DYNAKRAG_LLM_BASE_URL", server.base_url)  # the same model for all
        reference = tmp_path / "reference.jsonl"
        assert cli.main(collect_argv("demo", 6, "--out", str(reference))) == 0
        expected = read_jsonl(reference)
        env = clean_env(
            DYNAKRAG_LLM_BASE_URL=server.base_url,
            DYNAKRAG_CACHE_DIR=str(tmp_path / "fresh-cache"),  # no replies to replay
            OPENAI_API_KEY="test",
        )
        argv = [sys.executable, "-m", "dynakrag.cli", *collect_argv("demo", 6)]
        argv += ["--workers", "2", "--log", postgres_url]
        with (tmp_path / "stderr.txt").open("w") as stderr:
            process = subprocess.Popen(
                argv, cwd=REPO, env=env, start_new_session=True, stderr=stderr
            )
            try:
                deadline = time.monotonic() + 240
                while len(logged_questions(postgres_url)) < 2 and process.poll() is None:
                    assert time.monotonic() < deadline, "no question finished"
                    time.sleep(0.2)
            finally:
                os.killpg(process.pid, signal.SIGKILL)  # the driver and its workers, at once
                process.wait()
        before = read_log_records(postgres_url)
        finished = {r["example_id"] for r in before}
        stderr_text = (tmp_path / "stderr.txt").read_text()
        assert 2 <= len(finished) < 6, f"the kill should land mid-run: {stderr_text[-2000:]}"
        # Whole questions only: each finished question has every one of its records.
        for question in finished:
            logged = [r for r in before if r["example_id"] == question]
            assert canonical(logged) == canonical(
                [r for r in expected if r["example_id"] == question]
            )

        rerun = collect_argv("demo", 6, "--workers", "2", "--log", postgres_url)
        assert cli.main(rerun) == 0
    after = read_log_records(postgres_url)
    assert canonical(after) == canonical(expected)  # nothing lost, nothing twice
    assert after[: len(before)] == before  # the rows logged before the kill, untouched


@needs_data
def test_eval_on_an_existing_cluster_matches_one_process(tmp_path: Path) -> None:
    """``evaluate(..., scheduler=ADDRESS)`` (``eval --scheduler``) on a cluster started apart."""
    import distributed

    from dynakrag.eval.runner import evaluate
    from dynakrag.llm.fake import ScriptedChatModel

    examples = load_examples("hotpotqa", "eval", 6)
    model = ScriptedChatModel(respond=demo_responder({e.question: e.answers[0] for e in examples}))
    options: dict[str, Any] = {"retriever": "bm25", "limit": 6, "chat_model": model}
    options |= {"cache": False, "progress": False, "report": False}
    serial = evaluate("hotpotqa", "eval", "distractor", "dynakrag", **options)
    with distributed.LocalCluster(
        n_workers=2, threads_per_worker=1, dashboard_address=None, host="127.0.0.1"
    ) as cluster:
        out = tmp_path / "run.json"
        parallel = evaluate(
            "hotpotqa",
            "eval",
            "distractor",
            "dynakrag",
            scheduler=cluster.scheduler_address,
            out=out,
            **options,
        )
    assert [_without_time(q) for q in parallel["questions"]] == [
        _without_time(q) for q in serial["questions"]
    ]
    assert json.loads(out.read_text())["summary"]["n"] == 6
    assert not journal_path(out).exists()


def _without_time(record: Mapping[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in record.items() if key != "latency_s"}

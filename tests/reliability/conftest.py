"""Fixtures of the reliability tests: a clean environment, the report recorder, and one
``langgraph dev`` server (with a fake OpenAI-compatible model on loopback) shared by the
server tests, started as tests/integration/test_studio.py starts it (``support.dev_server``);
for the faults-at-scale tests, a PostgreSQL server, their databases and a fake model answering
the demo questions.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from dynakrag.postgres.local_server import LocalPostgres
from tests.fakes import demo_responder
from tests.reliability.scale_faults import DEMO, FaultRow, Report
from tests.reliability.support import (
    LANGGRAPH,
    FakeOpenAI,
    clean_env,
    demo_corpus,
    dev_server,
    no_proxy,
    serving,
    tagged_responder,
)

Recorder = Callable[[str, int, str], None]


@pytest.fixture(autouse=True)
def _no_dynakrag_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """Settings from the caller's environment never leak into these tests."""
    for name in list(os.environ):
        if name.startswith("DYNAKRAG_"):
            monkeypatch.delenv(name)


@pytest.fixture
def reliability(record_property: Callable[[str, object], None]) -> Recorder:
    """``reliability(what, tried, held)`` adds one row to RELIABILITY.md (via junitxml)."""

    def record(what: str, tried: int, held: str) -> None:
        record_property("reliability", json.dumps({"what": what, "tried": tried, "held": held}))

    return record


@dataclass
class Studio:
    url: str
    fake: FakeOpenAI


@pytest.fixture(scope="session")
def studio(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Studio]:
    """``langgraph dev`` on a free loopback port (:func:`dev_server`: it dies with this
    process); its generator is a fake OpenAI server whose final answers name the question they
    answer (``tagged_responder``)."""
    pytest.importorskip("langgraph_sdk", reason="needs dynakrag[studio]")
    if not LANGGRAPH.exists():
        pytest.skip("needs the langgraph CLI (dynakrag[studio])")
    tmp = tmp_path_factory.mktemp("studio")
    with serving(FakeOpenAI(tagged_responder(demo_corpus()))) as fake:
        env = clean_env(
            DYNAKRAG_CACHE_DIR=str(tmp / "cache"),
            DYNAKRAG_LLM_BASE_URL=fake.base_url,
            DYNAKRAG_LLM_MAX_RETRIES="0",
            # The fake's answers name their question, which no passage states: with abstention
            # on they would all become no-answers, and these tests check whose answer comes back.
            DYNAKRAG_ABSTAIN="0",
            OPENAI_API_KEY="dummy",
        )
        proxy_settings = pytest.MonkeyPatch()
        proxy_settings.setenv("NO_PROXY", no_proxy())
        proxy_settings.setenv("no_proxy", no_proxy())
        try:
            with dev_server(env, tmp / "langgraph-dev.log") as server:
                yield Studio(url=server.url, fake=fake)
        finally:
            proxy_settings.undo()


# --------------------------------------------------------------------------------------------
# The faults-at-scale tests (test_scale_faults_*.py): a PostgreSQL server, a database a test,
# a fake model for ask/collect, and the row each test reports


@pytest.fixture
def fault_row(record_property: Callable[[str, object], None]) -> Report:
    def report(row: FaultRow) -> None:
        record_property("scale_fault", row.json())

    return report


@pytest.fixture(scope="module")
def server() -> Iterator[LocalPostgres]:
    """A server of each test module's own (restarted by the tests); throwaway durability."""
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

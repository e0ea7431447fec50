"""Fixtures shared by the test folders."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.postgres_server import postgres_server, postgres_url

__all__ = ["postgres_server", "postgres_url"]  # fixtures for every test folder


@pytest.fixture
def no_models(monkeypatch: pytest.MonkeyPatch) -> None:
    """Fail loudly if a test would load the embedding model or the generator."""

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("a model was about to load")

    monkeypatch.setattr("dynakrag.retrieval.embeddings._load_minilm", refuse)
    monkeypatch.setattr("dynakrag.llm.factory.chat_model_from_config", refuse)


@pytest.fixture
def isolated_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """No ``DYNAKRAG_*`` setting from the caller's shell (the data folder excepted), and a
    private cache folder."""
    for name in list(os.environ):
        if name.startswith("DYNAKRAG_") and name != "DYNAKRAG_DATA_DIR":
            monkeypatch.delenv(name)
    monkeypatch.setenv("DYNAKRAG_CACHE_DIR", str(tmp_path / "cache"))


@pytest.fixture
def joint_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """The joint check at the paper's budget (``tests.joint.JOINT``) through ``DYNAKRAG_*``
    variables, for tests of it that go through the CLI or ``Configuration.from_env``."""
    from tests.joint import JOINT_ENV

    for name, value in JOINT_ENV.items():
        monkeypatch.setenv(name, value)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Leave no model server behind: end this session's leases on the embedded servers it
    started, then wait (bounded) for their supervisors to stop them; a server another process
    still leases is theirs and stays. PostgreSQL servers stop with their fixtures, and a
    killed session's ones with their watchdogs (dynakrag.postgres.local_server.LocalPostgres)."""
    import time

    from dynakrag.llm import embedded

    for server in list((embedded._singleton or {}).values()):
        started_here = getattr(server, "started_here", True)
        pid = server.pid
        server.stop()
        if not started_here or pid is None:
            continue
        deadline = time.monotonic() + getattr(server, "idle_s", 0) + 10
        while server.is_alive() and time.monotonic() < deadline:
            time.sleep(0.2)

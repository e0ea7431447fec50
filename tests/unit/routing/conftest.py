"""Fixtures of the routing tests: the BM25 index and the retriever tiers of the city corpus
(built once a module)."""

from __future__ import annotations

import pytest
from langchain_core.embeddings import DeterministicFakeEmbedding

from dynakrag.retrieval.lexical import BM25Index
from dynakrag.routing.retriever import RetrieverTiers, build_tiers
from tests.unit.routing.support import CORPUS


@pytest.fixture(scope="module")
def bm25() -> BM25Index:
    return BM25Index.build(CORPUS)


@pytest.fixture(scope="module")
def tiers() -> RetrieverTiers:
    return build_tiers(CORPUS, DeterministicFakeEmbedding(size=16))

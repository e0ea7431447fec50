"""The GS selector's frozen text encoder.

Every node text of a criterion graph and every chunk is embedded by the project's embedding
model (all-MiniLM-L6-v2, 384-d, from :mod:`dynakrag.retrieval.embeddings`; the paper uses
text-embedding-3-large, 3072-d). Each distinct text is embedded once per :class:`TextEncoder`
(memoised).
"""

from __future__ import annotations

import threading
from collections.abc import Sequence

import numpy as np
from langchain_core.embeddings import Embeddings
from torch import nn

from dynakrag.errors import ModelUnavailableError
from dynakrag.retrieval.dense import model_name_of

__all__ = ["TextEncoder", "text_encoder_parameters"]


class TextEncoder:
    """The frozen text encoder: unit-length float32 vectors, each distinct text embedded once.

    Passages and node texts both go through ``embed_documents`` (MiniLM is symmetric). The
    memo is cleared when it holds ``max_cached`` texts, so a long-running service stays small.
    """

    def __init__(self, embeddings: Embeddings, *, max_cached: int = 200_000) -> None:
        self.embeddings = embeddings
        self.max_cached = max_cached
        self._memo: dict[str, np.ndarray] = {}
        self._lock = threading.Lock()

    @property
    def name(self) -> str:
        return model_name_of(self.embeddings)

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        """``[len(texts), dim]`` float32, L2-normalised (a zero vector stays zero)."""
        texts = list(texts)
        with self._lock:
            known = {t: self._memo[t] for t in set(texts) if t in self._memo}
        missing = [t for t in dict.fromkeys(texts) if t not in known]
        if missing:
            vectors = np.asarray(self.embeddings.embed_documents(missing), dtype=np.float32)
            if vectors.ndim != 2 or vectors.shape[0] != len(missing):
                raise ModelUnavailableError(
                    f"embedding model {self.name} returned shape {vectors.shape} for "
                    f"{len(missing)} texts"
                )
            norms = np.linalg.norm(vectors, axis=1, keepdims=True)
            norms[norms == 0.0] = 1.0
            fresh = dict(zip(missing, vectors / norms, strict=True))
            known.update(fresh)
            with self._lock:
                if len(self._memo) + len(fresh) > self.max_cached:
                    self._memo.clear()
                self._memo.update(fresh)
        if not texts:
            return np.zeros((0, 0), dtype=np.float32)
        return np.stack([known[t] for t in texts])


def text_encoder_parameters(embeddings: Embeddings) -> int | None:
    """Parameters of the frozen encoder's model (None when it is not a torch model)."""
    from dynakrag.retrieval.embeddings import MiniLMEmbeddings, _load_minilm

    model = _load_minilm(embeddings.device) if isinstance(embeddings, MiniLMEmbeddings) else None
    if model is None:
        model = getattr(embeddings, "model", None)
    if not isinstance(model, nn.Module):
        return None
    return sum(p.numel() for p in model.parameters())

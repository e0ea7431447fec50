"""The searcher a command reads from, for the ``--index`` / ``--corpus`` flags ``ask`` and
``train --branch`` share."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from dynakrag.configuration import Configuration


def searcher_from_flags(
    index: str | Path | None, corpus: str | Path | None, cfg: Configuration, progress: bool
) -> Any:
    """``index`` (the saved dense index or pgvector collection; the configured retriever over its
    passages, so ``hybrid`` fuses it with BM25), else ``corpus`` (the configured retriever over
    it), else the demo corpus."""
    if index is not None:
        from dynakrag.retrieval.embeddings import default_embeddings
        from dynakrag.routing.factory import build_searcher, open_index

        opened = open_index(index, default_embeddings())
        return build_searcher(cfg.retriever, opened.passages, dense=opened, seed=cfg.seed)
    if corpus is not None:
        from dynakrag.retrieval.corpus import load_corpus
        from dynakrag.routing.factory import build_searcher

        passages = load_corpus(corpus)
        return build_searcher(cfg.retriever, passages, progress=progress, seed=cfg.seed)
    from dynakrag.data.demo import demo_searcher

    return demo_searcher(cfg, progress=progress)

"""Retrieval: passages, corpus loading, embeddings and the dense index."""

from dynakrag.retrieval.corpus import chunk_text, load_corpus
from dynakrag.retrieval.dense import DenseIndex, model_name_of
from dynakrag.retrieval.embeddings import (
    MINILM_DIMENSION,
    MINILM_MODEL_NAME,
    MiniLMEmbeddings,
    default_embeddings,
)
from dynakrag.retrieval.passage import Passage

__all__ = [
    "MINILM_DIMENSION",
    "MINILM_MODEL_NAME",
    "DenseIndex",
    "MiniLMEmbeddings",
    "Passage",
    "chunk_text",
    "default_embeddings",
    "load_corpus",
    "model_name_of",
]

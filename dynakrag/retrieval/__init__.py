"""Retrieval: passages, corpus loading, embeddings, dense / lexical / hybrid indexes, parent-
document and multi-vector views, provenance, and LangChain adapters."""

from dynakrag.retrieval.base import Searcher
from dynakrag.retrieval.corpus import chunk_text, load_corpus
from dynakrag.retrieval.dense import DenseIndex, model_name_of
from dynakrag.retrieval.embeddings import (
    MINILM_DIMENSION,
    MINILM_MODEL_NAME,
    MiniLMEmbeddings,
    default_embeddings,
)
from dynakrag.retrieval.hybrid import HybridRetriever, reciprocal_rank_fusion
from dynakrag.retrieval.langchain import (
    LangChainSearcher,
    SearcherRetriever,
    document_to_passage,
    hit_to_document,
)
from dynakrag.retrieval.lexical import BM25Index, tokenize
from dynakrag.retrieval.passage import Passage
from dynakrag.retrieval.provenance import Hit, ProvenanceMixin, search_with_provenance
from dynakrag.retrieval.views import (
    DEFAULT_VIEWS,
    MultiVectorRetriever,
    ParentDocumentRetriever,
    build_views,
    chunked_body,
    first_sentence,
    split_into_children,
)

__all__ = [
    "DEFAULT_VIEWS",
    "MINILM_DIMENSION",
    "MINILM_MODEL_NAME",
    "BM25Index",
    "DenseIndex",
    "Hit",
    "HybridRetriever",
    "LangChainSearcher",
    "MiniLMEmbeddings",
    "MultiVectorRetriever",
    "ParentDocumentRetriever",
    "Passage",
    "ProvenanceMixin",
    "Searcher",
    "SearcherRetriever",
    "build_views",
    "chunk_text",
    "chunked_body",
    "default_embeddings",
    "document_to_passage",
    "first_sentence",
    "hit_to_document",
    "load_corpus",
    "model_name_of",
    "reciprocal_rank_fusion",
    "search_with_provenance",
    "split_into_children",
    "tokenize",
]

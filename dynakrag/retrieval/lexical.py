"""Lexical retrieval: BM25 (Lucene variant) over ``title + text`` with ``bm25s``.

Tokenisation is deliberately simple and stemming-free: lower-case, runs of two or more word
characters (scikit-learn's default pattern, which ``bm25s`` also uses), English stopwords
removed (``bm25s``'s NLTK list). Entity names and numbers, the anchors of multi-hop questions,
survive unchanged.
"""

from __future__ import annotations

import logging
import math
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import bm25s
import numpy as np
from bm25s.stopwords import STOPWORDS_EN

from dynakrag.errors import CorpusError, UserInputError
from dynakrag.files import read_json, sha256_file, write_bytes_atomic, write_json
from dynakrag.retrieval.passage import IndexedPassages, Passage, passages_jsonl, read_passages_jsonl
from dynakrag.retrieval.provenance import ProvenanceMixin, check_k

FORMAT_VERSION = 1
TOKENIZER = "lower|(?u)\\b\\w\\w+\\b|stopwords=bm25s-en|no-stemming"
"""Recorded in the manifest: an index is only queried with the tokenisation it was built with."""

MANIFEST_FILE = "bm25.manifest.json"
PASSAGES_FILE = "bm25.passages.jsonl"
# bm25s's own (pickle-free) files, renamed so a BM25 and a dense index can share a folder.
_BM25S_FILES: dict[str, str] = {
    "data_name": "bm25.data.npy",
    "indices_name": "bm25.indices.npy",
    "indptr_name": "bm25.indptr.npy",
    "vocab_name": "bm25.vocab.json",
    "params_name": "bm25.params.json",
}

_TOKEN = re.compile(r"(?u)\b\w\w+\b")
_STOPWORDS: frozenset[str] = frozenset(STOPWORDS_EN)

# bm25s logs at INFO for routine events (e.g. empty queries); keep library users' logs clean.
logging.getLogger("bm25s").setLevel(logging.WARNING)


def tokenize(text: str) -> list[str]:
    """The index terms of ``text``, in order (duplicates kept)."""
    return [t for t in _TOKEN.findall(text.lower()) if t not in _STOPWORDS]


def _document_text(passage: Passage) -> str:
    # Same choice as the dense index: the title is part of what makes a passage findable.
    return f"{passage.title}\n{passage.text}" if passage.title else passage.text


class BM25Index(IndexedPassages, ProvenanceMixin):
    """Passages plus a ``bm25s`` BM25 index (Lucene scoring, ``k1``/``b`` configurable)."""

    name = "bm25"

    def __init__(self, model: bm25s.BM25, passages: Sequence[Passage]) -> None:
        self._model = model
        self._passages: tuple[Passage, ...] = tuple(passages)
        num_docs = int(model.scores["num_docs"])
        if num_docs != len(self._passages):
            raise CorpusError(
                f"BM25 index holds {num_docs} documents but {len(self._passages)} passages "
                "were given"
            )
        self._vocab: dict[str, int] = dict(model.vocab_dict)
        indptr = np.asarray(model.scores["indptr"])
        if indptr.ndim != 1 or len(indptr) != len(self._vocab) + 1:
            raise CorpusError(
                f"BM25 index is inconsistent: {len(self._vocab)} terms but an indptr of "
                f"shape {indptr.shape}"
            )
        # Each stored (document, term) entry is one document containing the term, so the
        # column lengths of the CSC score matrix are the document frequencies.
        self._df = np.diff(indptr).astype(np.int64)
        self._n = len(self._passages)

    # --- construction -------------------------------------------------------------------------

    @classmethod
    def build(
        cls,
        passages: Sequence[Passage],
        *,
        k1: float = 1.5,
        b: float = 0.75,
        progress: bool = False,
    ) -> BM25Index:
        """Tokenise and index ``passages`` (ids must be unique)."""
        if not passages:
            raise CorpusError("cannot build a BM25 index from an empty list of passages")
        seen: set[str] = set()
        for passage in passages:
            if passage.id in seen:
                raise CorpusError(f"duplicate passage id {passage.id!r}")
            seen.add(passage.id)
        corpus_tokens = [tokenize(_document_text(p)) for p in passages]
        if not any(corpus_tokens):
            raise CorpusError(
                "cannot build a BM25 index: no passage contains an indexable word "
                "(all text is stopwords, punctuation or single characters)"
            )
        model = bm25s.BM25(k1=k1, b=b, method="lucene", backend="numpy", csc_backend="numpy")
        model.index(corpus_tokens, create_empty_token=False, show_progress=progress)
        return cls(model, passages)

    # --- querying -----------------------------------------------------------------------------

    @property
    def vocabulary_size(self) -> int:
        """Number of distinct indexed terms."""
        return len(self._vocab)

    def search(self, query: str, k: int) -> list[tuple[Passage, float]]:
        """The ``k`` best passages for ``query`` (BM25, best first; ties in index order).

        Only passages sharing at least one term with the query are returned, so a query with
        no known term gives ``[]``; ``k`` is clipped to what matches. A repeated query word
        counts once.
        """
        check_k(k)
        term_ids = [self._vocab[t] for t in dict.fromkeys(tokenize(query)) if t in self._vocab]
        if not term_ids:
            return []
        scores = np.asarray(self._model.get_scores_from_ids(term_ids), dtype=np.float64)
        matching = np.flatnonzero(scores > 0.0)
        if len(matching) > k:
            # Keep the k best (and anything tied with the k-th) before the full sort.
            kth = np.partition(scores[matching], len(matching) - k)[len(matching) - k]
            matching = matching[scores[matching] >= kth]
        # lexsort: the last key is primary -> highest score first, then index order.
        order = matching[np.lexsort((matching, -scores[matching]))][:k]
        return [(self._passages[int(i)], float(scores[i])) for i in order]

    def document_frequency(self, term: str) -> int:
        """How many passages contain ``term`` (one word, normalised like the index)."""
        token = self._single_token(term)
        if token is None or token not in self._vocab:
            return 0
        return int(self._df[self._vocab[token]])

    def idf(self, term: str) -> float:
        """Lucene BM25 idf of one word: ``ln(1 + (N - df + 0.5) / (df + 0.5))``.

        A word absent from the corpus gets the largest value (``df = 0``): it is as rare as a
        word can be. A stopword, or a "word" with no indexable characters, gets ``0.0``.
        """
        token = self._single_token(term)
        if token is None:
            return 0.0
        return self._idf_of_token(token)

    def average_idf(self, query: str) -> float:
        """Mean :meth:`idf` over the query's index terms (each distinct term once); ``0.0``
        when the query has none. High: specific (rare words, e.g. entity names); low: vague.
        """
        tokens = list(dict.fromkeys(tokenize(query)))
        if not tokens:
            return 0.0
        return sum(self._idf_of_token(t) for t in tokens) / len(tokens)

    def _idf_of_token(self, token: str) -> float:
        df = int(self._df[self._vocab[token]]) if token in self._vocab else 0
        return math.log(1.0 + (self._n - df + 0.5) / (df + 0.5))

    @staticmethod
    def _single_token(term: str) -> str | None:
        tokens = tokenize(term)
        if len(tokens) > 1:
            raise UserInputError(
                f"idf takes a single word, got {term!r} ({len(tokens)} terms): "
                "use average_idf for a phrase or query"
            )
        return tokens[0] if tokens else None

    # --- persistence --------------------------------------------------------------------------

    def save(self, directory: str | Path) -> Path:
        """Write the index into ``directory`` (pickle-free: ``.npy`` arrays and JSON).

        Files are prefixed ``bm25.`` so a dense index can live in the same folder; the
        manifest (``bm25.manifest.json``, with SHA-256 of every file) is written last.
        """
        root = Path(directory).expanduser()
        root.mkdir(parents=True, exist_ok=True)
        # A save over an older index invalidates it first: a crash mid-save leaves "no index",
        # never a manifest describing files that were half replaced.
        (root / MANIFEST_FILE).unlink(missing_ok=True)
        write_bytes_atomic(root / PASSAGES_FILE, passages_jsonl(self._passages))
        self._model.save(root, corpus=None, allow_pickle=False, show_progress=False, **_BM25S_FILES)
        files = [PASSAGES_FILE, *_BM25S_FILES.values()]
        manifest: dict[str, Any] = {
            "format_version": FORMAT_VERSION,
            "kind": "bm25",
            "tokenizer": TOKENIZER,
            "method": "lucene",
            "k1": float(self._model.k1),
            "b": float(self._model.b),
            "count": len(self._passages),
            "vocabulary_size": len(self._vocab),
            "sha256": {name: sha256_file(root / name) for name in files},
        }
        write_json(root / MANIFEST_FILE, manifest)
        return root

    @classmethod
    def load(cls, directory: str | Path) -> BM25Index:
        """Load an index written by :meth:`save`; any missing, modified or inconsistent file
        raises :class:`CorpusError` (files are hash-checked before they are parsed)."""
        root = Path(directory).expanduser()
        if not root.is_dir():
            raise CorpusError(f"no BM25 index at {root} (directory missing)")
        if not (root / MANIFEST_FILE).is_file():
            raise CorpusError(f"no BM25 index at {root} (missing {MANIFEST_FILE})")
        try:
            manifest = read_json(root / MANIFEST_FILE)
        except (OSError, ValueError) as exc:
            raise CorpusError(f"cannot read {root / MANIFEST_FILE}: {exc}") from exc
        if not isinstance(manifest, dict) or manifest.get("kind") != "bm25":
            raise CorpusError(f"{root / MANIFEST_FILE} is not a BM25 index manifest")
        version = manifest.get("format_version")
        if version != FORMAT_VERSION:
            raise CorpusError(
                f"BM25 index at {root} has format_version {version!r}; this dynakrag reads "
                f"version {FORMAT_VERSION}: rebuild the index"
            )
        if manifest.get("tokenizer") != TOKENIZER:
            raise CorpusError(
                f"BM25 index at {root} was built with tokenizer {manifest.get('tokenizer')!r}, "
                f"this dynakrag uses {TOKENIZER!r}: rebuild the index"
            )
        hashes = manifest.get("sha256")
        expected_files = [PASSAGES_FILE, *_BM25S_FILES.values()]
        if not isinstance(hashes, dict) or sorted(hashes) != sorted(expected_files):
            raise CorpusError(f"{root / MANIFEST_FILE} is incomplete or invalid (file hashes)")
        for name in expected_files:
            path = root / name
            if not path.is_file():
                raise CorpusError(f"BM25 index at {root} is incomplete: missing {name}")
            if sha256_file(path) != hashes[name]:
                raise CorpusError(f"{path} is corrupt (does not match its manifest hash)")

        passages = read_passages_jsonl(root / PASSAGES_FILE)
        if len(passages) != manifest.get("count"):
            raise CorpusError(
                f"BM25 index at {root}: manifest count {manifest.get('count')!r} but "
                f"{len(passages)} passages stored"
            )
        try:
            model = bm25s.BM25.load(
                root, load_corpus=False, mmap=False, allow_pickle=False, **_BM25S_FILES
            )
        except Exception as exc:  # bm25s/numpy raise assorted types on unreadable files
            raise CorpusError(f"BM25 index at {root} is unreadable: {exc}") from exc
        if len(model.vocab_dict) != manifest.get("vocabulary_size"):
            raise CorpusError(
                f"BM25 index at {root}: {len(model.vocab_dict)} terms stored, manifest says "
                f"{manifest.get('vocabulary_size')!r}"
            )
        return cls(model, passages)

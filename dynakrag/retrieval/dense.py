"""Dense retrieval: a FAISS inner-product flat index over L2-normalised passage embeddings."""

from __future__ import annotations

import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import faiss
import numpy as np
from langchain_core.embeddings import Embeddings

from dynakrag.errors import CorpusError, UserInputError
from dynakrag.files import read_json, sha256_file, write_bytes_atomic, write_json
from dynakrag.progress import progress_bar
from dynakrag.retrieval.passage import IndexedPassages, Passage, passages_jsonl, read_passages_jsonl
from dynakrag.retrieval.provenance import ProvenanceMixin

FORMAT_VERSION = 1
INDEX_FILE = "index.faiss"
PASSAGES_FILE = "passages.jsonl"
MANIFEST_FILE = "manifest.json"

# On small CPU boxes a flat single-query search is faster single-threaded: OpenMP thread
# start-up costs more than the scan it parallelises (measured on 2 cores, see MODELS.md).
faiss.omp_set_num_threads(1)


def model_name_of(embeddings: Embeddings) -> str:
    """The name recorded in a manifest to make sure an index is queried with its own model."""
    return str(getattr(embeddings, "model_name", type(embeddings).__name__))


def _normalise(vectors: np.ndarray) -> np.ndarray:
    """Row-wise L2 normalisation, so inner product equals cosine similarity."""
    vectors = np.ascontiguousarray(vectors, dtype=np.float32)
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    # A zero vector stays zero (scores 0 against everything) instead of becoming NaN.
    norms[norms == 0.0] = 1.0
    return vectors / norms


def embedded_batches(
    passages: Sequence[Passage],
    embeddings: Embeddings,
    *,
    index_kind: str,
    batch_size: int = 32,
    progress: bool = True,
) -> Iterator[tuple[int, Sequence[Passage], np.ndarray]]:
    """``(start, batch, vectors)`` for each batch of ``passages``: the L2-normalised
    embeddings of ``title\ntext``, one row per passage, of one dimension throughout (progress
    bar on stderr unless ``progress=False``).

    What a dense index of any backend (FAISS, pgvector) stores, so they rank alike. The
    arguments are checked now, before the caller prepares its store (``index_kind`` names
    it in the errors); the embedding model runs as the batches are taken.
    """
    if not passages:
        raise CorpusError(f"cannot build {index_kind} from an empty list of passages")
    if batch_size < 1:
        raise UserInputError(f"batch_size must be >= 1, got {batch_size}")
    seen: set[str] = set()
    for passage in passages:
        if passage.id in seen:
            raise CorpusError(f"duplicate passage id {passage.id!r}")
        seen.add(passage.id)
    return _embedded_batches(passages, embeddings, batch_size, progress)


def _embedded_batches(
    passages: Sequence[Passage], embeddings: Embeddings, batch_size: int, progress: bool
) -> Iterator[tuple[int, Sequence[Passage], np.ndarray]]:
    dimension: int | None = None
    with progress_bar(
        total=len(passages),
        desc="embedding passages",
        unit="passage",
        file=sys.stderr,
        disable=not progress,
    ) as bar:
        for start in range(0, len(passages), batch_size):
            batch = passages[start : start + batch_size]
            # The title is part of what makes a passage findable (e.g. entity pages).
            texts = [f"{p.title}\n{p.text}" if p.title else p.text for p in batch]
            vectors = _normalise(np.asarray(embeddings.embed_documents(texts)))
            if vectors.ndim != 2 or vectors.shape[0] != len(batch):
                raise CorpusError(
                    f"embedding model returned {vectors.shape} for a batch of {len(batch)}"
                )
            if dimension is None:
                dimension = int(vectors.shape[1])
            elif vectors.shape[1] != dimension:
                raise CorpusError(
                    f"embedding dimension changed mid-build: {vectors.shape[1]} != {dimension}"
                )
            yield start, batch, vectors
            bar.update(len(batch))


class DenseIndex(IndexedPassages, ProvenanceMixin):
    """Passages plus their embeddings in a FAISS ``IndexFlatIP`` (exact cosine search)."""

    name = "dense"

    def __init__(
        self,
        index: faiss.Index,
        passages: Sequence[Passage],
        embeddings: Embeddings,
        embedding_model_name: str | None = None,
    ) -> None:
        if index.ntotal != len(passages):
            raise CorpusError(
                f"index holds {index.ntotal} vectors but {len(passages)} passages were given"
            )
        self._index = index
        self._passages: tuple[Passage, ...] = tuple(passages)
        self._embeddings = embeddings
        self.embedding_model_name = embedding_model_name or model_name_of(embeddings)

    # --- construction -------------------------------------------------------------------------

    @classmethod
    def build(
        cls,
        passages: Sequence[Passage],
        embeddings: Embeddings,
        *,
        batch_size: int = 32,
        progress: bool = True,
    ) -> DenseIndex:
        """Embed ``passages`` in batches (progress bar on stderr unless ``progress=False``)."""
        index: faiss.Index | None = None
        for _, _, vectors in embedded_batches(
            passages,
            embeddings,
            index_kind="a dense index",
            batch_size=batch_size,
            progress=progress,
        ):
            if index is None:
                index = faiss.IndexFlatIP(int(vectors.shape[1]))
            index.add(vectors)
        assert index is not None  # passages is non-empty
        return cls(index, passages, embeddings)

    # --- querying -----------------------------------------------------------------------------

    @property
    def dimension(self) -> int:
        """Embedding dimension of the index."""
        return int(self._index.d)

    def search(self, query: str, k: int) -> list[tuple[Passage, float]]:
        """The ``k`` passages most similar to ``query`` (cosine, best first; k clipped to size)."""
        return self.search_many([query], k)[0]

    def search_many(self, queries: Sequence[str], k: int) -> list[list[tuple[Passage, float]]]:
        """:meth:`search` for several queries with one FAISS call."""
        if k < 1:
            raise UserInputError(f"k must be >= 1, got {k}")
        if not queries:
            return []
        vectors = _normalise(np.asarray([self._embeddings.embed_query(q) for q in queries]))
        if vectors.shape[1] != self._index.d:
            # FAISS would abort the process on a dimension mismatch; fail politely instead.
            raise CorpusError(
                f"query embedding has dimension {vectors.shape[1]} but the index has "
                f"{self._index.d}: it was built with a different embedding model"
            )
        scores, ids = self._index.search(vectors, min(k, len(self._passages)))
        return [
            [
                (self._passages[int(i)], float(s))
                for i, s in zip(row_ids, row_scores, strict=True)
                if i >= 0  # FAISS pads missing results with -1
            ]
            for row_ids, row_scores in zip(ids, scores, strict=True)
        ]

    # --- persistence --------------------------------------------------------------------------

    def save(self, directory: str | Path) -> Path:
        """Write ``index.faiss``, ``passages.jsonl`` and ``manifest.json`` into ``directory``."""
        root = Path(directory).expanduser()
        root.mkdir(parents=True, exist_ok=True)
        write_bytes_atomic(root / PASSAGES_FILE, passages_jsonl(self._passages))
        # serialize_index + our own write (not faiss.write_index) keeps the atomic rename.
        write_bytes_atomic(root / INDEX_FILE, faiss.serialize_index(self._index).tobytes())
        manifest: dict[str, Any] = {
            "format_version": FORMAT_VERSION,
            "embedding_model": self.embedding_model_name,
            "dimension": self.dimension,
            "count": len(self._passages),
            "metric": "inner_product",
            "passages_sha256": sha256_file(root / PASSAGES_FILE),
            "index_sha256": sha256_file(root / INDEX_FILE),
        }
        # The manifest is written last: its presence marks a complete index.
        write_json(root / MANIFEST_FILE, manifest)
        return root

    @classmethod
    def load(cls, directory: str | Path, embeddings: Embeddings) -> DenseIndex:
        """Load an index written by :meth:`save`, validating every file against the manifest."""
        root = Path(directory).expanduser()
        missing = [
            n for n in (MANIFEST_FILE, PASSAGES_FILE, INDEX_FILE) if not (root / n).is_file()
        ]
        if not root.is_dir() or missing:
            detail = "directory missing" if not root.is_dir() else f"missing {', '.join(missing)}"
            raise CorpusError(f"no index at {root} ({detail})")

        manifest = cls._read_manifest(root)
        version = manifest.get("format_version")
        if version != FORMAT_VERSION:
            raise CorpusError(
                f"index at {root} has format_version {version!r}; this dynakrag reads "
                f"version {FORMAT_VERSION}: rebuild the index"
            )
        try:
            count = int(manifest["count"])
            dimension = int(manifest["dimension"])
            model = str(manifest["embedding_model"])
            passages_hash = str(manifest["passages_sha256"])
            index_hash = str(manifest["index_sha256"])
        except (KeyError, TypeError, ValueError) as exc:
            raise CorpusError(f"{root / MANIFEST_FILE} is incomplete or invalid: {exc}") from exc

        wanted = model_name_of(embeddings)
        if model != wanted:
            raise CorpusError(
                f"index at {root} was built with embedding model {model!r} but {wanted!r} "
                "was given: rebuild the index or pass the same model"
            )
        if sha256_file(root / PASSAGES_FILE) != passages_hash:
            raise CorpusError(f"{root / PASSAGES_FILE} does not match its manifest hash (modified)")
        passages = read_passages_jsonl(root / PASSAGES_FILE)
        if len(passages) != count:
            raise CorpusError(
                f"index at {root}: manifest count {count} but {len(passages)} passages stored"
            )
        # Hash before deserialising: FAISS should never parse bytes we know are damaged.
        if sha256_file(root / INDEX_FILE) != index_hash:
            raise CorpusError(f"{root / INDEX_FILE} is corrupt (does not match its manifest hash)")
        try:
            raw = np.frombuffer((root / INDEX_FILE).read_bytes(), dtype=np.uint8)
            index = faiss.deserialize_index(raw)
        except (RuntimeError, OSError) as exc:
            first_line = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
            raise CorpusError(f"{root / INDEX_FILE} is corrupt: {first_line}") from exc
        if index.ntotal != count:
            raise CorpusError(
                f"{root / INDEX_FILE} holds {index.ntotal} vectors, manifest says {count}"
            )
        if index.d != dimension:
            raise CorpusError(
                f"{root / INDEX_FILE} has dimension {index.d}, manifest says {dimension}"
            )
        return cls(index, passages, embeddings, embedding_model_name=model)

    @staticmethod
    def _read_manifest(root: Path) -> dict[str, Any]:
        try:
            manifest = read_json(root / MANIFEST_FILE)
        except (OSError, ValueError) as exc:
            raise CorpusError(f"cannot read {root / MANIFEST_FILE}: {exc}") from exc
        if not isinstance(manifest, dict):
            raise CorpusError(f"{root / MANIFEST_FILE} is not a JSON object")
        return manifest

"""Dense retrieval from a pgvector collection in PostgreSQL, through LangChain's
``PGVectorStore``: the FAISS index's twin for a corpus several services or workers share.

A collection is one table (``langchain-postgres``'s layout: ``PGEngine.init_vectorstore_table``)
holding each passage's id, text, title, parent id and position in the corpus, and its
embedding, with an HNSW index for cosine distance; plus one row in ``dynakrag_collections``
(the manifest: embedding model, dimension, count), written last, so a half-built collection
is never opened. The embeddings are the ones :class:`~dynakrag.retrieval.dense.DenseIndex`
stores (``title\\ntext`` embedded, L2-normalised), so the two rank a query's passages the same
way; scores are cosine similarities (``1 - cosine distance``), as FAISS's inner products over
normalised vectors are.

Addressed as ``postgresql://user@host:port/db?collection=NAME`` (:func:`collection_url`,
:func:`split_collection_url`); NAME is a plain SQL identifier (letters, digits, underscore).
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Sequence
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from langchain_core.embeddings import Embeddings

from dynakrag.errors import CorpusError, UserInputError
from dynakrag.postgres.connections import (
    CONNECT_TIMEOUT_S,
    PREPARE_THRESHOLD,
    connect,
    is_postgres_url,
    redact,
)
from dynakrag.retrieval.dense import _normalise, embedded_batches, model_name_of
from dynakrag.retrieval.passage import Passage
from dynakrag.retrieval.provenance import ProvenanceMixin, check_k

__all__ = [
    "MANIFEST_TABLE",
    "PgVectorIndex",
    "collection_url",
    "split_collection_url",
]

MANIFEST_TABLE = "dynakrag_collections"
"""One row per complete collection: name, embedding model, dimension, passage count."""
_COLLECTION = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,62}$")
_METADATA_COLUMNS = ("title", "parent_id", "position")
HNSW_EF_SEARCH = 100
"""Candidates HNSW keeps while searching (pgvector's default is 40); above the ``k`` any
dynakrag search asks for (at most ``frontier_depth`` = 30), so top-k results are exact on
collections of the sizes dynakrag indexes."""


def _check_collection(name: str) -> str:
    if not _COLLECTION.match(name or ""):
        raise UserInputError(
            f"invalid collection name {name!r}: use letters, digits and underscores, starting "
            "with a letter or underscore (at most 63 characters)"
        )
    return name


def split_collection_url(url: str) -> tuple[str, str]:
    """``(database URL, collection)`` from ``postgresql://...?collection=NAME``; the other
    query parameters (``sslmode``, ...) stay in the database URL."""
    if not is_postgres_url(url):
        raise UserInputError(f"not a PostgreSQL URL: {url!r}")
    parts = urlsplit(url)
    query = parse_qsl(parts.query, keep_blank_values=True)
    names = [value for key, value in query if key == "collection"]
    if len(names) != 1:
        raise UserInputError(
            f"{redact(url)} names no collection: add ?collection=NAME (the name given to "
            "'dynakrag index build --collection')"
        )
    rest = urlencode([(key, value) for key, value in query if key != "collection"])
    return urlunsplit(parts._replace(query=rest)), _check_collection(names[0])


def collection_url(database_url: str, collection: str) -> str:
    """The URL that names ``collection`` in ``database_url`` (inverse of
    :func:`split_collection_url`)."""
    parts = urlsplit(database_url)
    query = [*parse_qsl(parts.query, keep_blank_values=True)]
    query.append(("collection", _check_collection(collection)))
    return urlunsplit(parts._replace(query=urlencode(query)))


def _engine(database_url: str) -> Any:
    """A ``PGEngine`` over psycopg 3 (async) with dynakrag's connection settings."""
    try:
        from langchain_postgres import PGEngine
    except ImportError:
        raise UserInputError(
            "pgvector collections need the postgres extra: pip install 'dynakrag[postgres]'"
        ) from None
    connect(database_url).close()  # one-line error for an unreachable server, before SQLAlchemy
    rest = database_url.split("://", 1)[1]
    return PGEngine.from_connection_string(
        f"postgresql+psycopg://{rest}",
        # No server-side prepared statements: they break behind transaction-mode poolers.
        connect_args={"prepare_threshold": PREPARE_THRESHOLD, "connect_timeout": CONNECT_TIMEOUT_S},
        pool_size=2,
        max_overflow=2,
    )


class PgVectorIndex(ProvenanceMixin):
    """A pgvector collection searched through ``PGVectorStore`` (cosine, HNSW).

    Build one with :meth:`build` (``dynakrag index build --store URL --collection NAME``) and
    open it with :meth:`open` (``--index URL?collection=NAME``). ``passages`` lists the
    collection in corpus order (read once, on first use), so BM25 can be built over the same
    passages for hybrid retrieval. ``close()`` releases the connections.
    """

    name = "pgvector"

    def __init__(
        self,
        store: Any,
        engine: Any,
        *,
        database_url: str,
        collection: str,
        embedding_model_name: str,
        dimension: int,
        count: int,
    ) -> None:
        self._store = store
        self._engine = engine
        self.database_url = database_url
        self.collection = collection
        self.embedding_model_name = embedding_model_name
        self.dimension = dimension
        self._count = count
        self._passages: tuple[Passage, ...] | None = None

    # --- construction -------------------------------------------------------------------------

    @classmethod
    def build(
        cls,
        passages: Sequence[Passage],
        embeddings: Embeddings,
        database_url: str,
        collection: str,
        *,
        batch_size: int = 32,
        progress: bool = True,
    ) -> PgVectorIndex:
        """Embed ``passages`` into a new ``collection`` (replacing one of that name).

        The passages, ids and embeddings are the ones :meth:`DenseIndex.build` would store.
        """
        from langchain_postgres import Column
        from langchain_postgres.v2.indexes import HNSWIndex

        _check_collection(collection)
        batches = embedded_batches(
            passages,
            embeddings,
            index_kind="a pgvector collection",
            batch_size=batch_size,
            progress=progress,
        )
        engine = _engine(database_url)
        try:
            _forget_manifest(database_url, collection)  # not openable until complete again
            store: Any = None
            dimension = 0
            for start, batch, vectors in batches:
                if store is None:
                    dimension = int(vectors.shape[1])
                    engine.init_vectorstore_table(
                        collection,
                        dimension,
                        id_column=Column("id", "TEXT", nullable=False),
                        content_column="text",
                        metadata_columns=[
                            Column("title", "TEXT"),
                            Column("parent_id", "TEXT"),
                            Column("position", "INTEGER", nullable=False),
                        ],
                        overwrite_existing=True,
                    )
                    store = cls._store(engine, embeddings, collection)
                store.add_embeddings(
                    texts=[p.text for p in batch],
                    embeddings=vectors.tolist(),
                    metadatas=[
                        {"title": p.title, "parent_id": p.parent_id, "position": start + i}
                        for i, p in enumerate(batch)
                    ],
                    ids=[p.id for p in batch],
                )
            store.apply_vector_index(HNSWIndex(name=f"{collection}_hnsw"))
            model = model_name_of(embeddings)
            _write_manifest(database_url, collection, model, dimension, len(passages))
        except BaseException:
            _dispose(engine)
            raise
        index = cls(
            store,
            engine,
            database_url=database_url,
            collection=collection,
            embedding_model_name=model,
            dimension=dimension,
            count=len(passages),
        )
        index._passages = tuple(passages)
        return index

    @classmethod
    def open(cls, url: str, embeddings: Embeddings) -> PgVectorIndex:
        """Open the collection named by ``url`` (``...?collection=NAME``), checking that it is
        complete and was built with the same embedding model."""
        database_url, collection = split_collection_url(url)
        manifest = _read_manifest(database_url, collection)
        if manifest is None:
            raise CorpusError(
                f"no pgvector collection {collection!r} in {redact(database_url)} (build it "
                "with 'dynakrag index build --store URL --collection NAME')"
            )
        wanted = model_name_of(embeddings)
        if manifest["embedding_model"] != wanted:
            raise CorpusError(
                f"collection {collection!r} was built with embedding model "
                f"{manifest['embedding_model']!r} but {wanted!r} was given: rebuild it or "
                "pass the same model"
            )
        engine = _engine(database_url)
        try:
            store = cls._store(engine, embeddings, collection)
        except BaseException:
            _dispose(engine)
            raise
        return cls(
            store,
            engine,
            database_url=database_url,
            collection=collection,
            embedding_model_name=str(manifest["embedding_model"]),
            dimension=int(manifest["dimension"]),
            count=int(manifest["count"]),
        )

    @staticmethod
    def _store(engine: Any, embeddings: Embeddings, collection: str) -> Any:
        from langchain_postgres import PGVectorStore
        from langchain_postgres.v2.indexes import HNSWQueryOptions

        return PGVectorStore.create_sync(
            engine,
            embeddings,
            collection,
            id_column="id",
            content_column="text",
            metadata_columns=list(_METADATA_COLUMNS),
            metadata_json_column=None,
            index_query_options=HNSWQueryOptions(ef_search=HNSW_EF_SEARCH),
        )

    # --- querying -----------------------------------------------------------------------------

    def __len__(self) -> int:
        return self._count

    @property
    def url(self) -> str:
        """The ``--index`` URL of this collection."""
        return collection_url(self.database_url, self.collection)

    @property
    def passages(self) -> tuple[Passage, ...]:
        """The collection's passages in corpus order (read from the database once)."""
        if self._passages is None:
            rows = self._store.get(include=["metadatas", "documents"])
            ordered = sorted(
                zip(rows["ids"], rows["documents"], rows["metadatas"], strict=True),
                key=lambda row: int(row[2]["position"]),
            )
            self._passages = tuple(
                Passage(
                    id=str(pid),
                    title=str(meta.get("title") or ""),
                    text=str(text),
                    parent_id=meta.get("parent_id"),
                )
                for pid, text, meta in ordered
            )
        return self._passages

    def search(self, query: str, k: int) -> list[tuple[Passage, float]]:
        """The ``k`` passages most similar to ``query`` (cosine similarity, best first)."""
        check_k(k)
        vector = _normalise([self._store.embeddings.embed_query(query)])[0]
        if vector.shape[0] != self.dimension:
            raise CorpusError(
                f"query embedding has dimension {vector.shape[0]} but collection "
                f"{self.collection!r} has {self.dimension}: it was built with another model"
            )
        pairs = self._store.similarity_search_with_score_by_vector(vector.tolist(), k=k)
        return [
            (
                Passage(
                    id=str(document.id),
                    title=str(document.metadata.get("title") or ""),
                    text=document.page_content,
                    parent_id=document.metadata.get("parent_id"),
                ),
                1.0 - float(distance),
            )
            for document, distance in pairs
        ]

    def close(self) -> None:
        """Release the collection's database connections."""
        _dispose(self._engine)


def _dispose(engine: Any) -> None:
    with contextlib.suppress(Exception):
        engine._run_as_sync(engine.close())


# --- the manifest table -------------------------------------------------------------------------


def _ensure_manifest_table(conn: Any) -> None:
    conn.execute(
        f"CREATE TABLE IF NOT EXISTS {MANIFEST_TABLE} ("
        " name TEXT PRIMARY KEY, embedding_model TEXT NOT NULL, dimension INTEGER NOT NULL,"
        " count INTEGER NOT NULL, metric TEXT NOT NULL, built_at TIMESTAMPTZ DEFAULT now())"
    )


def _forget_manifest(database_url: str, collection: str) -> None:
    with contextlib.closing(connect(database_url)) as conn:
        _ensure_manifest_table(conn)
        conn.execute(f"DELETE FROM {MANIFEST_TABLE} WHERE name = %s", (collection,))


def _write_manifest(
    database_url: str, collection: str, model: str, dimension: int, count: int
) -> None:
    with contextlib.closing(connect(database_url)) as conn:
        _ensure_manifest_table(conn)
        conn.execute(
            f"INSERT INTO {MANIFEST_TABLE} (name, embedding_model, dimension, count, metric)"
            " VALUES (%s, %s, %s, %s, 'cosine')",
            (collection, model, dimension, count),
        )


def _read_manifest(database_url: str, collection: str) -> dict[str, Any] | None:
    with contextlib.closing(connect(database_url)) as conn:
        exists = conn.execute("SELECT to_regclass(%s) AS t", (MANIFEST_TABLE,)).fetchone()
        if not exists or exists["t"] is None:
            return None
        return conn.execute(
            f"SELECT * FROM {MANIFEST_TABLE} WHERE name = %s", (collection,)
        ).fetchone()

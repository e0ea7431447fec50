"""``dynakrag index build``: embed a corpus into a dense index, a FAISS folder on disk
(``--out DIR``) or a pgvector collection in PostgreSQL (``--store URL --collection NAME``).

Both hold the same passages, ids, metadata and embeddings; ``ask``, ``eval`` and ``collect``
search either with ``--index DIR`` or ``--index 'postgresql://...?collection=NAME'``.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from dynakrag.cli.arguments import EXIT_OK, Parser
from dynakrag.errors import UserInputError


def add_parser(subparsers: Any) -> None:
    """Add the ``index`` command and its ``build`` sub-command to ``subparsers``."""
    index = subparsers.add_parser("index", help="manage dense indexes")
    commands = index.add_subparsers(dest="index_command", required=True, parser_class=Parser)
    build = commands.add_parser(
        "build", help="embed a corpus into a FAISS index or a pgvector collection"
    )
    build.add_argument("--corpus", type=Path, required=True, help="JSONL file or folder")
    target = build.add_mutually_exclusive_group(required=True)
    target.add_argument("--out", type=Path, help="directory to write a FAISS index to")
    target.add_argument(
        "--store",
        metavar="URL",
        help="PostgreSQL database (postgresql://user@host:port/db) to write a pgvector "
        "collection to (needs --collection)",
    )
    build.add_argument(
        "--collection",
        help="--store only: the collection's name (letters, digits, underscores); an existing "
        "one of that name is replaced",
    )
    build.set_defaults(handler=run_index_build)


def run_index_build(args: argparse.Namespace) -> int:
    """Embed a corpus and save the index (or collection)."""
    from dynakrag.retrieval.corpus import load_corpus
    from dynakrag.retrieval.embeddings import default_embeddings

    if args.store is not None and not args.collection:
        raise UserInputError("--store needs --collection NAME")
    if args.store is None and args.collection:
        raise UserInputError("--collection applies to --store only")
    passages = load_corpus(args.corpus)
    if args.store is not None:
        from dynakrag.postgres.connections import is_postgres_url, redact
        from dynakrag.retrieval.pgvector import PgVectorIndex

        if not is_postgres_url(args.store):
            raise UserInputError(f"--store expects a postgresql:// URL, got {args.store!r}")
        collection = PgVectorIndex.build(
            passages, default_embeddings(), args.store, args.collection
        )
        collection.close()
        print(f"Indexed {len(passages)} passages into {redact(collection.url)}")
        return EXIT_OK
    from dynakrag.retrieval.dense import DenseIndex

    index = DenseIndex.build(passages, default_embeddings())
    try:
        directory = index.save(args.out)
    except OSError as exc:
        raise UserInputError(f"cannot write the index to {args.out}: {exc.strerror}") from None
    print(f"Indexed {len(passages)} passages into {directory}")
    return EXIT_OK

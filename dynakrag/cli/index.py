"""``dynakrag index build``: embed a corpus into a dense (FAISS) index saved on disk."""

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
    build = commands.add_parser("build", help="embed a corpus into a FAISS index")
    build.add_argument("--corpus", type=Path, required=True, help="JSONL file or folder")
    build.add_argument("--out", type=Path, required=True, help="directory to write the index to")
    build.set_defaults(handler=run_index_build)


def run_index_build(args: argparse.Namespace) -> int:
    """Embed a corpus and save the index."""
    from dynakrag.retrieval.corpus import load_corpus
    from dynakrag.retrieval.dense import DenseIndex
    from dynakrag.retrieval.embeddings import default_embeddings

    passages = load_corpus(args.corpus)
    index = DenseIndex.build(passages, default_embeddings())
    try:
        directory = index.save(args.out)
    except OSError as exc:
        raise UserInputError(f"cannot write the index to {args.out}: {exc.strerror}") from None
    print(f"Indexed {len(passages)} passages into {directory}")
    return EXIT_OK

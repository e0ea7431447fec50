"""``dynakrag ask``: answer one question from a corpus, a saved index or the demo corpus."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from dynakrag.cli.arguments import EXIT_OK, add_run_options, run_configuration
from dynakrag.cli.generator import check_model_reached, make_llm
from dynakrag.cli.output import stream_run, to_json
from dynakrag.configuration import Configuration


def add_parser(subparsers: Any) -> None:
    """Add the ``ask`` command to ``subparsers`` (from ``add_subparsers``)."""
    parser = subparsers.add_parser("ask", help="answer a question")
    parser.add_argument("question", help="the question (quote it)")
    source = parser.add_mutually_exclusive_group()
    source.add_argument(
        "--corpus", type=Path, help="JSONL of {id,title,text} or a folder of .txt/.md"
    )
    source.add_argument("--index", type=Path, help="a directory made by 'dynakrag index build'")
    parser.add_argument("--json", action="store_true", help="print the final state as JSON")
    add_run_options(parser)
    parser.set_defaults(handler=run_ask)


def run_ask(args: argparse.Namespace) -> int:
    """Answer one question from a corpus, an index, or the demo corpus."""
    from dynakrag.graph.builder import build_graph, validate_question

    cfg = run_configuration(args)
    question = validate_question(args.question, cfg)
    searcher = _searcher_for(args, cfg)
    llm = make_llm(cfg)
    graph = build_graph(searcher, configuration=cfg, llm=llm)
    if args.json:
        final = stream_run(graph, question, out=None)
        check_model_reached(llm)
        print(to_json(final))
        return EXIT_OK
    final = stream_run(graph, question, out=None if args.quiet else sys.stdout)
    check_model_reached(llm)
    print(f"Answer: {final.get('answer', '')}")
    return EXIT_OK


def _searcher_for(args: argparse.Namespace, cfg: Configuration) -> Any:
    """The searcher ``ask`` reads from: ``--index`` (the saved dense index), else ``--corpus``
    (the configured retriever over it), else the demo corpus."""
    if args.index is not None:
        from dynakrag.retrieval.dense import DenseIndex
        from dynakrag.retrieval.embeddings import default_embeddings

        return DenseIndex.load(args.index, default_embeddings())
    if args.corpus is not None:
        from dynakrag.retrieval.corpus import load_corpus
        from dynakrag.routing.factory import build_searcher

        passages = load_corpus(args.corpus)
        return build_searcher(cfg.retriever, passages, progress=not args.json, seed=cfg.seed)
    from dynakrag.data.demo import demo_searcher

    return demo_searcher(cfg, progress=not args.json)

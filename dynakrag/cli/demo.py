"""``dynakrag demo``: answer a multi-hop question on the generated demo corpus, step by step."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from dynakrag.cli.arguments import EXIT_OK, add_run_options, run_configuration
from dynakrag.cli.generator import check_model_reached, make_llm
from dynakrag.cli.output import answer_line, stream_run
from dynakrag.cli.runlog import logged_run, raise_log_write_error, run_id
from dynakrag.graph.runlog import describe_log


def add_parser(subparsers: Any) -> None:
    """Add the ``demo`` command to ``subparsers`` (from ``add_subparsers``)."""
    parser = subparsers.add_parser("demo", help="answer a multi-hop question on the demo corpus")
    parser.add_argument("--question", help="ask this instead of the default demo question")
    add_run_options(parser)
    parser.set_defaults(handler=run_demo)


def run_demo(args: argparse.Namespace) -> int:
    """Build (once) the demo index and answer the demo question, step by step (with ``--log``,
    as ``ask``: an answer the log could not take in full is printed, then the error, exit 1)."""
    from dynakrag.data.demo import DEMO_SEED, demo_searcher
    from dynakrag.data.demo_corpus import demo_question, generate_demo_corpus
    from dynakrag.graph.builder import build_graph, validate_question
    from dynakrag.llm.factory import describe_backend

    cfg = run_configuration(args)
    llm = make_llm(cfg)  # before any output: a --llm that cannot be built fails here
    corpus = generate_demo_corpus(DEMO_SEED)
    gold = demo_question(corpus)
    question = validate_question(args.question or gold.question, cfg)
    out = sys.stdout
    if not args.quiet:
        print(
            f"Demo corpus: {len(corpus.passages)} generated passages (seed {DEMO_SEED})", file=out
        )
        print(f"Generator: {describe_backend(cfg)}", file=out)
        print(f"Question: {question}", file=out)
    with logged_run(args.log, command="demo") as (checkpointer, config):
        graph = build_graph(
            demo_searcher(cfg), configuration=cfg, llm=llm, checkpointer=checkpointer
        )
        final = stream_run(graph, question, None if args.quiet else out, config)
    check_model_reached(llm)
    if not args.quiet and not args.question:
        found = {doc["id"] for doc in final.get("evidence", [])}
        hits = sum(1 for doc_id in gold.support if doc_id in found)
        print(
            f"Gold support found: {hits}/{len(gold.support)}; gold answer: {gold.answer}", file=out
        )
    print(answer_line(final), file=out, flush=True)
    raise_log_write_error(checkpointer)
    if args.log and not args.quiet:
        print(f"Logged run {run_id(config)} to {describe_log(args.log)}", file=out)
    return EXIT_OK

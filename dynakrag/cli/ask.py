"""``dynakrag ask``: answer one question from a corpus, a saved index or the demo corpus."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from dynakrag.cli.arguments import EXIT_OK, add_run_options, run_configuration
from dynakrag.cli.generator import check_model_reached, make_llm
from dynakrag.cli.output import answer_line, explanation_lines, stream_run, to_json
from dynakrag.cli.runlog import logged_run, raise_log_write_error, run_id
from dynakrag.configuration import Configuration
from dynakrag.graph.runlog import describe_log


def add_parser(subparsers: Any) -> None:
    """Add the ``ask`` command to ``subparsers`` (from ``add_subparsers``)."""
    parser = subparsers.add_parser("ask", help="answer a question")
    parser.add_argument("question", help="the question (quote it)")
    source = parser.add_mutually_exclusive_group()
    source.add_argument(
        "--corpus", type=Path, help="JSONL of {id,title,text} or a folder of .txt/.md"
    )
    source.add_argument(
        "--index",
        metavar="DIR|URL",
        help="made by 'dynakrag index build': a FAISS index directory or a pgvector "
        "collection, postgresql://user@host:port/db?collection=NAME",
    )
    parser.add_argument(
        "--json",
        action="store_true",
        help="print the final state as JSON (with 'abstained', 'abstain_reason' and "
        "'answer_citations')",
    )
    parser.add_argument(
        "--explain",
        action="store_true",
        help="after each step, say why: the chosen action over the runner-up with the features "
        "that drove it (learned policy), the continuation guard, the rule that blocked each "
        "other action, the token budget and lambda (each trace entry's 'explanation' holds the "
        "data; with --json the readable lines are added as 'explanations')",
    )
    add_run_options(parser)
    parser.set_defaults(handler=run_ask)


def run_ask(args: argparse.Namespace) -> int:
    """Answer one question from a corpus, an index, or the demo corpus; prints
    ``No answer: <reason>`` instead of ``Answer: ...`` when the run abstained (exit code 0).

    With ``--log``, a log that stops taking writes mid-run (a full disk) still lets the answer
    (or the JSON) be printed; then its :class:`~dynakrag.graph.runlog.LogWriteError` ends the
    command (exit 1)."""
    from dynakrag.graph.builder import build_graph, validate_question

    cfg = run_configuration(args)
    question = validate_question(args.question, cfg)
    llm = make_llm(cfg)  # before the log and the index: a --llm that cannot be built fails here
    with logged_run(args.log, command="ask") as (checkpointer, config):
        searcher = _searcher_for(args, cfg)
        graph = build_graph(searcher, configuration=cfg, llm=llm, checkpointer=checkpointer)
        out = None if args.json or args.quiet else sys.stdout
        final = stream_run(graph, question, out, config, explain=args.explain)
    check_model_reached(llm)
    if args.json:
        final = {**final, "run_id": run_id(config)}
        if args.explain:
            final["explanations"] = explanation_lines(final.get("trace", []))
        print(to_json(final), flush=True)
        raise_log_write_error(checkpointer)
        return EXIT_OK
    print(answer_line(final), flush=True)
    raise_log_write_error(checkpointer)
    if args.log and not args.quiet:
        print(f"Logged run {run_id(config)} to {describe_log(args.log)}")
    return EXIT_OK


def _searcher_for(args: argparse.Namespace, cfg: Configuration) -> Any:
    """The searcher ``ask`` reads from (:func:`~dynakrag.cli.searcher.searcher_from_flags`)."""
    from dynakrag.cli.searcher import searcher_from_flags

    return searcher_from_flags(args.index, args.corpus, cfg, progress=not args.json)

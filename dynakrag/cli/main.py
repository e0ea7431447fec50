"""The ``dynakrag`` command line.

Exit codes: 0 with an answer, 2 with one line for a user error (empty question, missing or
unreadable corpus or index, bad option), 1 with one line when a model cannot be reached.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import sys
import traceback
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TextIO

from dynakrag.cli.arguments import EXIT_FAILURE, EXIT_OK, EXIT_USAGE, Parser, positive_int
from dynakrag.configuration import Configuration
from dynakrag.errors import DynakragError, ModelUnavailableError, UserInputError


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(prog="dynakrag", description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--version", action="version", version=_version())
    commands = parser.add_subparsers(dest="command", required=True, parser_class=Parser)

    demo = commands.add_parser("demo", help="answer a multi-hop question on the demo corpus")
    demo.add_argument("--question", help="ask this instead of the default demo question")
    _add_run_options(demo)

    ask = commands.add_parser("ask", help="answer a question")
    ask.add_argument("question", help="the question (quote it)")
    source = ask.add_mutually_exclusive_group()
    source.add_argument(
        "--corpus", type=Path, help="JSONL of {id,title,text} or a folder of .txt/.md"
    )
    source.add_argument("--index", type=Path, help="a directory made by 'dynakrag index build'")
    ask.add_argument("--json", action="store_true", help="print the final state as JSON")
    _add_run_options(ask)

    index = commands.add_parser("index", help="manage dense indexes")
    index_commands = index.add_subparsers(dest="index_command", required=True, parser_class=Parser)
    build = index_commands.add_parser("build", help="embed a corpus into a FAISS index")
    build.add_argument("--corpus", type=Path, required=True, help="JSONL file or folder")
    build.add_argument("--out", type=Path, required=True, help="directory to write the index to")

    from dynakrag.cli.eval import add_eval_parser
    from dynakrag.cli.selector import add_selector_parser
    from dynakrag.cli.train import add_train_parsers

    add_eval_parser(commands)
    add_train_parsers(commands)
    add_selector_parser(commands)
    return parser


def _add_run_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--max-steps", type=positive_int, help="control steps before answering")
    parser.add_argument(
        "--policy",
        help="heuristic (default), learned (the shipped trained policy), uniform, fixed or a "
        "trained policy file (.npz)",
    )
    parser.add_argument("--quiet", action="store_true", help="print only the answer")


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the console script."""
    logging.basicConfig(
        level=logging.DEBUG if os.environ.get("DYNAKRAG_DEBUG") else logging.ERROR,
        format="dynakrag: %(levelname)s: %(message)s",
    )
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(AttributeError, ValueError):  # not a TextIOWrapper
            stream.reconfigure(errors="replace")  # type: ignore[union-attr]
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # --help, --version and usage errors: return the code
        return int(exc.code or 0)
    handlers: dict[str, Callable[[argparse.Namespace], int]] = {
        "demo": run_demo,
        "ask": run_ask,
        "index": run_index_build,
    }
    from dynakrag.cli.eval import run_eval
    from dynakrag.cli.selector import SELECTOR_HANDLERS
    from dynakrag.cli.train import TRAIN_HANDLERS

    handlers["eval"] = run_eval
    handlers.update(TRAIN_HANDLERS)
    handlers.update(SELECTOR_HANDLERS)
    try:
        return handlers[args.command](args)
    except UserInputError as exc:
        _fail(str(exc))
        return EXIT_USAGE
    except DynakragError as exc:
        _fail(str(exc))
        return EXIT_FAILURE
    except KeyboardInterrupt:
        _fail("interrupted")
        return 130
    except Exception as exc:  # keep the CLI to one line; the trace is one variable away
        if os.environ.get("DYNAKRAG_DEBUG"):
            traceback.print_exc()
        _fail(f"unexpected error: {type(exc).__name__}: {exc} (set DYNAKRAG_DEBUG=1 for details)")
        return EXIT_FAILURE


def _fail(message: str) -> None:
    print(f"dynakrag: error: {' '.join(message.split())}", file=sys.stderr)


def _configuration(args: argparse.Namespace) -> Configuration:
    """Settings from the environment and flags; the policy is checked before anything loads."""
    from dynakrag.policy.registry import resolve_policy

    cfg = Configuration.from_env(max_steps=args.max_steps, policy=args.policy)
    resolve_policy(cfg.policy)
    return cfg


def run_demo(args: argparse.Namespace) -> int:
    """Build (once) the demo index and answer the demo question, step by step."""
    from dynakrag.data.demo import DEMO_SEED, demo_searcher
    from dynakrag.data.demo_corpus import demo_question, generate_demo_corpus
    from dynakrag.graph.builder import build_graph, validate_question
    from dynakrag.llm.factory import describe_backend, llm_client_from_config

    cfg = _configuration(args)
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
    llm = llm_client_from_config(cfg)
    graph = build_graph(demo_searcher(cfg), configuration=cfg, llm=llm)
    final = stream_run(graph, question, out=None if args.quiet else out)
    _check_model_reached(llm)
    if not args.quiet and not args.question:
        found = {doc["id"] for doc in final.get("evidence", [])}
        hits = sum(1 for doc_id in gold.support if doc_id in found)
        print(
            f"Gold support found: {hits}/{len(gold.support)}; gold answer: {gold.answer}", file=out
        )
    print(f"Answer: {final.get('answer', '')}", file=out)
    return EXIT_OK


def run_ask(args: argparse.Namespace) -> int:
    """Answer one question from a corpus, an index, or the demo corpus."""
    from dynakrag.graph.builder import build_graph, validate_question
    from dynakrag.llm.factory import llm_client_from_config

    cfg = _configuration(args)
    question = validate_question(args.question, cfg)
    searcher = _searcher_for(args, cfg)
    llm = llm_client_from_config(cfg)
    graph = build_graph(searcher, configuration=cfg, llm=llm)
    if args.json:
        final = stream_run(graph, question, out=None)
        _check_model_reached(llm)
        print(json.dumps(_jsonable(final), ensure_ascii=False, indent=2))
        return EXIT_OK
    final = stream_run(graph, question, out=None if args.quiet else sys.stdout)
    _check_model_reached(llm)
    print(f"Answer: {final.get('answer', '')}")
    return EXIT_OK


def _check_model_reached(llm: Any) -> None:
    """A run whose every model request failed is a failure, not an 'insufficient evidence'."""
    if llm.unreachable:
        raise ModelUnavailableError(f"the language model could not be reached ({llm.last_error})")


def _searcher_for(args: argparse.Namespace, cfg: Configuration) -> Any:
    from dynakrag.retrieval.dense import DenseIndex
    from dynakrag.retrieval.embeddings import default_embeddings

    if args.index is not None:
        return DenseIndex.load(args.index, default_embeddings())
    if args.corpus is not None:
        from dynakrag.retrieval.corpus import load_corpus

        passages = load_corpus(args.corpus)
        return DenseIndex.build(passages, default_embeddings(), progress=not args.json)
    from dynakrag.data.demo import demo_searcher

    return demo_searcher(cfg, progress=not args.json)


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


def stream_run(graph: Any, question: str, out: TextIO | None) -> dict[str, Any]:
    """Run the graph, printing each action as it completes; return the final state."""
    final: dict[str, Any] = {}
    for mode, chunk in graph.stream({"question": question}, stream_mode=["updates", "values"]):
        if mode == "values":
            final = chunk
            continue
        for node, update in chunk.items():
            if node == "prepare" or out is None:
                continue  # prepare resets the trace; only action nodes add steps
            for entry in (update or {}).get("trace", []):
                print(format_step(entry), file=out, flush=True)
    return final


def format_step(entry: dict[str, Any]) -> str:
    """One printed line per action: the action, the valid set, the scores, what was added."""
    scores = ", ".join(f"{a}={s:.2f}" for a, s in entry.get("scores", {}).items())
    if not scores:  # a fixed edge (after compression): nothing was scored
        scores = ", ".join(entry.get("valid_actions", []))
    line = f"[{entry['step']}] {entry['action']}  valid: {{{scores}}}"
    if entry.get("search_query"):
        line += f"\n    query: {entry['search_query']}"
    if entry.get("added"):
        line += f"\n    added: {', '.join(entry['added'])}"
    if entry["action"] == "sufficiency_check":
        verdict = "sufficient" if entry.get("sufficient") else f"gaps: {entry.get('gaps')}"
        line += f"\n    {verdict}"
    return line


def _jsonable(state: dict[str, Any]) -> dict[str, Any]:
    return json.loads(json.dumps(state, default=str))


def _version() -> str:
    from dynakrag import __version__

    return f"dynakrag {__version__}"


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())

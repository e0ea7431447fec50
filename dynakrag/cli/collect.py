"""``dynakrag collect``: labelled trajectories from exploration rollouts on training questions.

``dynakrag collect --dataset D --split train --out FILE.jsonl [--limit N] [--setting
distractor|open] [--retriever dense|bm25|hybrid|routed] [--seed S] [--epsilon E]
[--rollouts R] [--workers N | --scheduler ADDRESS]`` runs exploration rollouts with
branching on the training questions of D and writes labelled records
(:mod:`dynakrag.training.collect`). ``--split eval`` is refused (exit 2): collection is
training, and eval rows are for reporting only. ``--dataset demo`` uses the generated demo
corpus. The generator is the configured one (``DYNAKRAG_LLM_BASE_URL`` or the
embedded model). With ``--workers`` / ``--scheduler`` the questions run on Dask workers
(:mod:`dynakrag.training.workers`): the same records, appended to ``--out`` as each question
finishes and resumed as below; with ``--log`` each worker writes its questions into the log.

In one process, records are appended to ``--out`` question by question, and a rerun of the
same command resumes it: the questions it finished are skipped, a question a kill cut short
is dropped and run again (:func:`~dynakrag.training.collect.resume_collection`); records of
other settings in ``--out`` are refused, and ``--restart`` starts it afresh. The progress
line shows the questions done and the time left. The model's replies go through the disk
cache (``<cache_dir>/llm-cache.sqlite``; ``--no-cache`` to bypass it), so repeating a
collection (``make default-policy``) costs little. In the open setting every question
searches the pooled passages of all the selected questions, finished or not, so a resumed
collection searches the same corpus.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from dynakrag.cli.arguments import EXIT_OK, add_worker_options, fraction, positive_int
from dynakrag.cli.generator import check_model_reached, make_llm
from dynakrag.cli.runlog import add_log_option
from dynakrag.configuration import Configuration
from dynakrag.data.datasets import DATASETS, QAExample, load_examples, open_corpus
from dynakrag.errors import UserInputError
from dynakrag.progress import progress_bar
from dynakrag.retrieval.passage import Passage
from dynakrag.routing.factory import RETRIEVERS


def add_parser(subparsers: Any) -> None:
    """Add the ``collect`` command to ``subparsers`` (from ``add_subparsers``)."""
    parser = subparsers.add_parser(
        "collect", help="collect labelled trajectories on training questions"
    )
    parser.add_argument(
        "--dataset", required=True, choices=[*DATASETS, "demo"], help="benchmark, or 'demo'"
    )
    parser.add_argument(
        "--split", default="train", choices=["train", "eval"], help="only 'train' is allowed"
    )
    parser.add_argument("--out", type=Path, help="JSONL file to write (and/or --log)")
    parser.add_argument("--limit", type=positive_int, help="use the first N questions")
    parser.add_argument(
        "--setting",
        default="distractor",
        choices=["distractor", "open"],
        help="search each question's own passages (distractor) or the pooled ones (open)",
    )
    parser.add_argument(
        "--retriever",
        choices=RETRIEVERS,
        help="default: the configuration's (DYNAKRAG_RETRIEVER, else dense)",
    )
    parser.add_argument("--seed", type=int, default=13, help="exploration seed")
    parser.add_argument(
        "--epsilon", type=fraction, default=0.3, help="chance of a random valid action"
    )
    parser.add_argument("--rollouts", type=positive_int, default=2, help="rollouts a question")
    parser.add_argument(
        "--no-branch", action="store_true", help="label only the actions the rollouts take"
    )
    parser.add_argument(
        "--restart", action="store_true", help="replace --out instead of resuming it"
    )
    parser.add_argument("--no-cache", action="store_true", help="do not use the LLM disk cache")
    add_worker_options(parser)
    add_log_option(
        parser,
        "also write the records into this trajectory log (SQLite file or postgresql://...), "
        "one transaction per question, for 'dynakrag train --log'; a rerun skips the "
        "questions already there",
    )
    parser.set_defaults(handler=run_collect)


def run_collect(args: argparse.Namespace) -> int:
    """Roll out on the training questions and write the labelled records."""
    from dynakrag.training.collect import (
        collect,
        collection_searcher_factory,
        demo_examples,
        resume_collection,
    )

    if args.split != "train":
        raise UserInputError(
            "collection is training: only --split train may be collected (eval rows are "
            "for reporting only)"
        )
    if args.out is None and args.log is None:
        raise UserInputError("say where the records go: --out FILE.jsonl, --log LOG, or both")
    cfg = Configuration.from_env(seed=args.seed, retriever=args.retriever)
    if args.dataset == "demo":
        examples = demo_examples()[: args.limit] if args.limit else demo_examples()
    else:
        examples = load_examples(args.dataset, "train", args.limit)
    if not examples:
        raise UserInputError(f"no training questions in {args.dataset}")
    # The pool of all selected questions, also when resuming: the same corpus every time.
    corpus = open_corpus(examples) if args.setting == "open" else None
    if args.log is not None:
        from dynakrag.training.trajectories import logged_questions

        done = logged_questions(args.log)  # also checks the log before any model loads
        examples = [e for e in examples if (e.dataset, e.id) not in done]
    settings = _collection_settings(args, cfg, corpus)
    finished: set[tuple[str, str]] = set()
    if args.out is not None and not args.restart:
        finished = resume_collection(args.out, settings)
    todo = [e for e in examples if (e.dataset, e.id) not in finished]
    if finished:
        print(f"Resuming {args.out}: {len(examples) - len(todo)} questions already collected")
    if args.workers or args.scheduler:
        return _collect_on_workers(args, cfg, examples, todo, settings, corpus)
    searcher_factory = collection_searcher_factory(cfg.retriever, corpus)
    bar = progress_bar(
        todo,
        total=len(examples),
        initial=len(examples) - len(todo),
        desc="collecting",
        unit="question",
        file=sys.stderr,
    )
    llm = make_llm(cfg, disk_cache=not args.no_cache)
    records = collect(
        bar,
        searcher_factory,
        llm,
        cfg,
        epsilon=args.epsilon,
        seed=args.seed,
        branch=not args.no_branch,
        progress=False,
        rollouts=args.rollouts,
        collection=settings,
    )
    written = _write_records(args, records, append=not args.restart)
    check_model_reached(llm)  # every request failed: nothing was collected, say why
    return written


def _collection_settings(
    args: argparse.Namespace, cfg: Configuration, corpus: Sequence[Passage] | None
) -> dict[str, Any]:
    """What makes two collections' records the same kind (copied into every record, and
    checked when a collection resumes)."""
    from dynakrag.llm.factory import config_identity
    from dynakrag.training.workers import corpus_digest

    return {
        "seed": args.seed,
        "epsilon": args.epsilon,
        "rollouts": args.rollouts,
        "branch": not args.no_branch,
        "setting": args.setting,
        "retriever": cfg.retriever,
        "corpus": corpus_digest(corpus) if corpus is not None else None,
        "llm": config_identity(cfg),
    }


def _collect_on_workers(
    args: argparse.Namespace,
    cfg: Configuration,
    examples: list[QAExample],
    todo: list[QAExample],
    settings: dict[str, Any],
    corpus: Sequence[Passage] | None,
) -> int:
    """Collect ``todo`` (the ``examples`` a resumed ``--out`` has not finished) on Dask
    workers, each question's records written as it finishes."""
    from dynakrag.training.workers import CollectJob, collect_on_workers, corpus_digest
    from dynakrag.workers import dask_client

    job = CollectJob(
        cfg=cfg,
        epsilon=args.epsilon,
        seed=args.seed,
        branch=not args.no_branch,
        rollouts=args.rollouts,
        corpus_id=corpus_digest(corpus) if corpus is not None else None,
        collection=settings,
        disk_cache=not args.no_cache,
        log=args.log,  # each worker writes its finished questions there
    )

    def records() -> Any:
        with dask_client(args.workers, args.scheduler) as client:
            done = len(examples) - len(todo)
            for _, question in collect_on_workers(todo, job, client, corpus=corpus, finished=done):
                yield from question

    return _write_records(args, records(), logged=True, append=not args.restart)


def _write_records(
    args: argparse.Namespace, records: Any, *, logged: bool = False, append: bool = False
) -> int:
    """Write the records to ``--out`` (after its lines when ``append``) and/or ``--log``
    (unless the workers ``logged`` them already)."""
    from dynakrag.files import write_jsonl
    from dynakrag.training.trajectories import describe_log, tee_records_into_log

    questions: set[str] = set()

    def counted(stream: Any) -> Any:
        for record in stream:
            questions.add(record["example_id"])
            yield record

    stream = counted(records)
    if args.log is not None and not logged:
        stream = tee_records_into_log(stream, args.log)
    if args.out is None:
        count = sum(1 for _ in stream)
    else:
        try:
            count = write_jsonl(stream, args.out, append=append)
        except OSError as exc:
            raise UserInputError(f"cannot write {args.out}: {exc.strerror or exc}") from None
    places = [str(p) for p in (args.out,) if p is not None]
    places += [describe_log(args.log)] if args.log is not None else []
    print(f"Wrote {count} records from {len(questions)} questions to {' and '.join(places)}")
    return EXIT_OK

"""``dynakrag collect``: labelled trajectories from exploration rollouts on training questions.

``dynakrag collect --dataset D --split train --out FILE.jsonl [--sample K | --limit N]
[--labels recall|answer|visited-answer] [--no-memo] [--rollouts R] [--resume-from FILE...]
[--setting distractor|open] [--retriever dense|bm25|hybrid|routed] [--seed S] [--epsilon E]
[--workers N | --scheduler ADDRESS]`` runs exploration rollouts with branching on the
training questions of D and writes labelled records (:mod:`dynakrag.training.collect`; their
format: :mod:`dynakrag.training.records`). ``--split eval`` is refused (exit 2): collection is
training, and eval rows are for reporting only. ``--dataset demo`` uses the generated demo
corpus. The generator is the configured one (``DYNAKRAG_LLM_BASE_URL`` or the embedded
model). With ``--workers`` / ``--scheduler`` the questions run on Dask workers
(:mod:`dynakrag.training.workers`): the same records, appended to ``--out`` as each question
finishes and resumed as below; with ``--log`` each worker writes its questions into the log.

The defaults are the cheap ones (docs/collection.md measures each): the paper's support-recall
labels (``--labels recall``: no answer is written inside a branch), each distinct model
request of a question asked once (``--no-memo`` asks every time), one rollout a question.
``--sample K`` takes K questions stratified by question type and hop count, as a prefix of one
fixed order (:mod:`dynakrag.training.sampling`), so a larger K adds questions to a smaller
one; ``--limit N`` takes the first N in file order. In the open setting every question
searches one pool of the passages of ALL the dataset's train questions, whatever ``--sample``
or ``--limit`` selects, so a sample extends to a larger one over the same corpus (its digest
is one of the collection's settings).

In one process, records are appended to ``--out`` question by question, and a rerun of the
same command resumes it: the questions it finished are skipped, a question a kill cut short
is dropped and run again (:func:`~dynakrag.training.records.resume_collection`); records of
other settings in ``--out`` are refused, and ``--restart`` starts it afresh. ``--resume-from``
names records files (``.gz`` too) of the same settings, such as the sorted, gzipped records
shipped with the policy: their finished questions of the selection are copied into ``--out``
(and ``--log``) as they are and not collected again (:func:`~dynakrag.training.records.
carry_over`). Every question prints a progress line on stderr (seconds per question so far,
ETA); the end prints what the collection cost and any question left out, with the reason.
The model's replies go through the disk cache (``<cache_dir>/llm-cache.sqlite``;
``--no-cache`` to bypass it), so repeating a collection (``make default-policy``) costs little.
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
from dynakrag.retrieval.passage import Passage
from dynakrag.routing.factory import RETRIEVERS
from dynakrag.training.labelling import LABELS


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
    selection = parser.add_mutually_exclusive_group()
    selection.add_argument("--limit", type=positive_int, help="use the first N questions")
    selection.add_argument(
        "--sample",
        type=positive_int,
        metavar="K",
        help="use K questions stratified by question type and hop count (a larger K keeps "
        "the questions of a smaller one)",
    )
    parser.add_argument(
        "--labels",
        choices=LABELS,
        default=LABELS[0],
        help="recall: the paper's support-recall labels, no answers (default); answer: the "
        "answer F1 after every answer branch; visited-answer: one answer per visited state",
    )
    parser.add_argument(
        "--no-memo",
        action="store_true",
        help="ask the model every request, also one a question already asked (to measure)",
    )
    parser.add_argument(
        "--resume-from",
        type=Path,
        nargs="+",
        default=[],
        metavar="FILE",
        help="records files (.gz too) of the same settings whose finished questions are "
        "copied into --out instead of collected again (e.g. the shipped policy's records)",
    )
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
    parser.add_argument("--rollouts", type=positive_int, default=1, help="rollouts a question")
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
    from dynakrag.training.collect import collect
    from dynakrag.training.collection_report import CollectionReport
    from dynakrag.training.records import resume_collection
    from dynakrag.training.searchers import collection_searcher_factory

    if args.split != "train":
        raise UserInputError(
            "collection is training: only --split train may be collected (eval rows are "
            "for reporting only)"
        )
    if args.out is None and args.log is None:
        raise UserInputError("say where the records go: --out FILE.jsonl, --log LOG, or both")
    cfg = Configuration.from_env(seed=args.seed, retriever=args.retriever)
    pool, examples = select_questions(
        args.dataset, sample=args.sample, limit=args.limit, seed=args.seed
    )
    # One pool of every train question, whatever is selected or resumed: the same corpus.
    corpus = open_corpus(pool) if args.setting == "open" else None
    if args.log is not None:
        from dynakrag.training.trajectories import logged_questions

        done = logged_questions(args.log)  # also checks the log before any model loads
        examples = [e for e in examples if (e.dataset, e.id) not in done]
    settings = _collection_settings(args, cfg, corpus)
    finished: set[tuple[str, str]] = set()
    if args.out is not None:
        if args.restart:
            _start_afresh(args.out)
        else:
            finished = resume_collection(args.out, settings)
    finished |= _carry_over(args, settings, examples, finished)
    todo = [e for e in examples if (e.dataset, e.id) not in finished]
    if finished:
        print(f"Resuming {args.out}: {len(examples) - len(todo)} questions already collected")
    if args.workers or args.scheduler:
        return _collect_on_workers(args, cfg, examples, todo, settings, corpus)
    searcher_factory = collection_searcher_factory(cfg.retriever, corpus)
    report = CollectionReport(
        total=len(todo), done_before=len(examples) - len(todo), stream=sys.stderr
    )
    llm = make_llm(cfg, disk_cache=not args.no_cache)
    records = collect(
        todo,
        searcher_factory,
        llm,
        cfg,
        epsilon=args.epsilon,
        seed=args.seed,
        branch=not args.no_branch,
        progress=False,
        rollouts=args.rollouts,
        collection=settings,
        labels=args.labels,
        memo=not args.no_memo,
        report=report,
    )
    written = _write_records(args, records)
    print(report.summary())
    check_model_reached(llm)  # every request failed: nothing was collected, say why
    return written


def select_questions(
    dataset: str, *, sample: int | None = None, limit: int | None = None, seed: int = 13
) -> tuple[list[QAExample], list[QAExample]]:
    """``(every train question of dataset, the selected ones)``: a stratified ``sample``
    (:func:`~dynakrag.training.sampling.stratified_sample`), the first ``limit``, or all."""
    from dynakrag.training.collect import demo_examples
    from dynakrag.training.sampling import stratified_sample

    pool = demo_examples() if dataset == "demo" else load_examples(dataset, "train")
    if not pool:
        raise UserInputError(f"no training questions in {dataset}")
    if sample is not None:
        return pool, stratified_sample(pool, sample, seed)
    return pool, pool[:limit] if limit else list(pool)


def _start_afresh(out: Path) -> None:
    """``--restart``: empty ``--out`` (what is carried over and collected is appended)."""
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_bytes(b"")
    except OSError as exc:
        raise UserInputError(f"cannot write {out}: {exc.strerror or exc}") from None


def _carry_over(
    args: argparse.Namespace,
    settings: dict[str, Any],
    examples: list[QAExample],
    finished: set[tuple[str, str]],
) -> set[tuple[str, str]]:
    """Copy the finished questions of ``--resume-from`` (selected, not ``finished`` yet, same
    settings) into ``--out`` and ``--log``; the questions copied."""
    if not args.resume_from:
        return set()
    from dynakrag.training.records import carry_over

    wanted = {(e.dataset, e.id) for e in examples}
    carried = carry_over(args.resume_from, settings, wanted, finished)
    print(carried.describe())
    if not carried.lines:
        return set()
    if args.out is not None:
        try:
            args.out.parent.mkdir(parents=True, exist_ok=True)
            with args.out.open("a", encoding="utf-8") as handle:
                handle.writelines(line + "\n" for line in carried.lines)
        except OSError as exc:
            raise UserInputError(f"cannot write {args.out}: {exc.strerror or exc}") from None
    if args.log is not None:
        import json

        from dynakrag.training.trajectories import tee_records_into_log

        for _ in tee_records_into_log((json.loads(line) for line in carried.lines), args.log):
            pass
    return carried.questions


def _collection_settings(
    args: argparse.Namespace, cfg: Configuration, corpus: Sequence[Passage] | None
) -> dict[str, Any]:
    """What makes two collections' records the same kind (copied into every record, and
    checked when a collection resumes)."""
    from dynakrag.llm.factory import config_identity
    from dynakrag.training.workers import corpus_digest

    settings: dict[str, Any] = {
        "seed": args.seed,
        "epsilon": args.epsilon,
        "rollouts": args.rollouts,
        "branch": not args.no_branch,
        "setting": args.setting,
        "retriever": cfg.retriever,
        "corpus": corpus_digest(corpus) if corpus is not None else None,
        "llm": config_identity(cfg),
    }
    if args.labels != "answer":  # the answer labels' records, older than the choice, lack it
        settings["labels"] = args.labels
    return settings


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
        labels=args.labels,
        memo=not args.no_memo,
    )

    def records() -> Any:
        with dask_client(args.workers, args.scheduler) as client:
            done = len(examples) - len(todo)
            for _, question in collect_on_workers(todo, job, client, corpus=corpus, finished=done):
                yield from question

    return _write_records(args, records(), logged=True)


def _write_records(args: argparse.Namespace, records: Any, *, logged: bool = False) -> int:
    """Append the records to ``--out`` and/or write them to ``--log`` (unless the workers
    ``logged`` them already)."""
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
            count = write_jsonl(stream, args.out, append=True)
        except OSError as exc:
            raise UserInputError(f"cannot write {args.out}: {exc.strerror or exc}") from None
    places = [str(p) for p in (args.out,) if p is not None]
    places += [describe_log(args.log)] if args.log is not None else []
    print(f"Wrote {count} records from {len(questions)} questions to {' and '.join(places)}")
    return EXIT_OK

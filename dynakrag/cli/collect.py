"""``dynakrag collect``: labelled trajectories from exploration rollouts on training questions.

``dynakrag collect --dataset D --split train --out FILE.jsonl [--sample K | --limit N]
[--labels recall|answer|visited-answer] [--no-memo] [--rollouts R] [--resume-from FILE...]
[--setting distractor|open] [--retriever dense|bm25|hybrid|routed] [--seed S] [--epsilon E]
[--workers N | --scheduler ADDRESS]`` runs exploration rollouts with branching on the
training questions of D and writes labelled records (:mod:`dynakrag.training.collect`; their
format: :mod:`dynakrag.training.records`). ``--split eval`` is refused (exit 2): collection is
training, and eval rows are for reporting only. ``--dataset demo`` uses the generated demo
worlds of the training seeds (:data:`~dynakrag.data.demo.TRAINING_WORLD_SEEDS`; never the
shipped world or the held-out ones the benchmarks measure on), each question searching its own
world with ``--setting distractor``. The generator is the configured one
(``DYNAKRAG_LLM_BASE_URL`` or the embedded model). With ``--workers`` / ``--scheduler`` the
questions run on Dask workers (:mod:`dynakrag.training.workers`): the same records, appended
to ``--out`` as each question finishes and resumed as below; with ``--log`` each worker
writes its questions into the log.

The defaults are the cheap ones (docs/collection.md measures each): the paper's support-recall
labels (``--labels recall``: no answer is written inside a branch), each distinct model
request of a question asked once (``--no-memo`` asks every time), one rollout a question.
``--sample K`` takes K questions stratified by question type and hop count, as a prefix of one
fixed order (:mod:`dynakrag.training.sampling`), so a larger K adds questions to a smaller
one; ``--limit N`` takes the first N in file order. In the open setting every question
searches one pool of the passages of ALL the dataset's train questions, whatever ``--sample``
or ``--limit`` selects, so a sample extends to a larger one over the same corpus (its digest
is one of the collection's settings).

In one process and on workers, a collection runs through the executor every run shares
(:func:`~dynakrag.workers.resumed`, with ``--out`` and ``--log`` as its store:
:class:`~dynakrag.training.collection_store.CollectionStore`). Records are appended to ``--out``
question by question, each question whole, and a rerun of the same command resumes it: the
questions it finished are skipped, a question a kill cut short is dropped and run again
(:func:`~dynakrag.training.records.resume_collection`); records of other settings in
``--out`` are refused, and ``--restart`` starts it afresh. ``--resume-from`` names records
files (``.gz`` too) of the same settings, such as the sorted, gzipped records
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
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dynakrag.cli.arguments import EXIT_OK, add_worker_options, fraction, positive_int
from dynakrag.cli.generator import check_model_reached, make_llm
from dynakrag.cli.runlog import add_log_option
from dynakrag.configuration import Configuration
from dynakrag.data.datasets import (
    DATASETS,
    QAExample,
    load_examples,
    open_corpus,
    require_train_split,
)
from dynakrag.errors import UserInputError
from dynakrag.retrieval.passage import Passage
from dynakrag.routing.factory import RETRIEVERS
from dynakrag.training.labelling import LABELS

if TYPE_CHECKING:
    from dynakrag.training.collection_report import CollectionReport
    from dynakrag.training.collection_store import CollectionStore
    from dynakrag.training.records import TransitionFields
    from dynakrag.training.workers import CollectJob


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
    from dynakrag.training.collection_report import CollectionReport
    from dynakrag.training.collection_store import CollectionStore, collected_key
    from dynakrag.workers import resumed

    require_train_split(args.split, "collection is training")
    if args.out is None and args.log is None:
        raise UserInputError("say where the records go: --out FILE.jsonl, --log LOG, or both")
    cfg = Configuration.from_env(seed=args.seed, retriever=args.retriever)
    pool, examples = select_questions(
        args.dataset, sample=args.sample, limit=args.limit, seed=args.seed
    )
    # One pool of every train question, whatever is selected or resumed: the same corpus.
    corpus = open_corpus(pool) if args.setting == "open" else None
    settings = _collection_settings(args, cfg, corpus)
    on_workers = bool(args.workers or args.scheduler)
    store = CollectionStore(
        args.out, args.log, settings, restart=args.restart, log_written=on_workers
    )
    examples = [e for e in examples if (e.dataset, e.id) not in store.logged]
    store.carried(_carry_over(args, settings, examples, store.finished))
    todo = [e for e in examples if collected_key(e) not in store.done]
    if store.finished:
        print(f"Resuming {args.out}: {len(examples) - len(todo)} questions already collected")
    job = _collect_job(args, cfg, settings)
    if on_workers:
        run = _collect_on_workers(args, job, len(examples) - len(todo), corpus)
        for _ in resumed(examples, collected_key, run, store):
            pass
        return _wrote(store)
    report = CollectionReport(
        total=len(todo), done_before=len(examples) - len(todo), stream=sys.stderr
    )
    llm = make_llm(cfg, disk_cache=not args.no_cache)
    run = _collect_here(job, llm, corpus, report)
    for _ in resumed(examples, collected_key, run, store):
        pass
    _wrote(store)
    print(report.summary())
    check_model_reached(llm)  # every request failed: nothing was collected, say why
    return EXIT_OK


def select_questions(
    dataset: str, *, sample: int | None = None, limit: int | None = None, seed: int = 13
) -> tuple[list[QAExample], list[QAExample]]:
    """``(every train question of dataset, the selected ones)``: a stratified ``sample``
    (:func:`~dynakrag.training.sampling.stratified_sample`), the first ``limit``, or all."""
    from dynakrag.training.collect import training_world_examples
    from dynakrag.training.sampling import stratified_sample

    pool = training_world_examples() if dataset == "demo" else load_examples(dataset, "train")
    if not pool:
        raise UserInputError(f"no training questions in {dataset}")
    if sample is not None:
        return pool, stratified_sample(pool, sample, seed)
    return pool, pool[:limit] if limit else list(pool)


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
        # The controller's own settings: records of the joint check at the paper's budget
        # describe other decisions than the chain's.
        "controller": {
            "sub_question_answering": cfg.sub_question_answering,
            "max_steps": cfg.max_steps,
            "max_retrieval_calls": cfg.max_retrieval_calls,
        },
    }
    if args.labels != "answer":  # the answer labels' records, older than the choice, lack it
        settings["labels"] = args.labels
    return settings


def _collect_here(
    job: CollectJob, llm: Any, corpus: Sequence[Passage] | None, report: CollectionReport
) -> Callable[[list[QAExample]], Iterator[tuple[QAExample, list[TransitionFields]]]]:
    """What collects the questions left to do in this process, question by question."""
    from dynakrag.training.collect import collect
    from dynakrag.training.collection_store import collected_questions
    from dynakrag.training.searchers import collection_searcher_factory

    searcher_factory = collection_searcher_factory(
        job.cfg.retriever, corpus, index_root=Path(job.cfg.cache_dir)
    )

    def run(todo: list[QAExample]) -> Iterator[tuple[QAExample, list[TransitionFields]]]:
        options = job.collect_options()
        records = collect(
            todo, searcher_factory, llm, job.cfg, progress=False, report=report, **options
        )
        return collected_questions(todo, records)

    return run


def _collect_on_workers(
    args: argparse.Namespace, job: CollectJob, done: int, corpus: Sequence[Passage] | None
) -> Callable[[list[QAExample]], Iterator[tuple[QAExample, list[TransitionFields]]]]:
    """What collects the questions left to do on Dask workers (``done``: those finished
    before), each question's records handed back as it finishes."""
    from dynakrag.training.workers import collect_on_workers
    from dynakrag.workers import dask_client

    def run(todo: list[QAExample]) -> Iterator[tuple[QAExample, list[TransitionFields]]]:
        with dask_client(args.workers, args.scheduler) as client:
            yield from collect_on_workers(todo, job, client, corpus=corpus, finished=done)

    return run


def _collect_job(
    args: argparse.Namespace, cfg: Configuration, settings: dict[str, Any]
) -> CollectJob:
    """The options of this collection, as one process and every worker run them."""
    from dynakrag.training.workers import CollectJob

    return CollectJob(
        cfg=cfg,
        epsilon=args.epsilon,
        seed=args.seed,
        branch=not args.no_branch,
        rollouts=args.rollouts,
        corpus_id=settings["corpus"],  # the open setting's pooled corpus, named once
        collection=settings,
        disk_cache=not args.no_cache,
        log=args.log,  # on workers, each writes its finished questions there
        labels=args.labels,
        memo=not args.no_memo,
    )


def _wrote(store: CollectionStore) -> int:
    """Say what the collection wrote, and where."""
    print(f"Wrote {store.records} records from {store.questions} questions to {store.describe()}")
    return EXIT_OK

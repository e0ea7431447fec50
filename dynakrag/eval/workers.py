"""Evaluation on Dask workers: ``dynakrag eval --workers N`` or ``--scheduler ADDRESS``.

Each question is one task. A worker builds what :func:`~dynakrag.eval.runner.evaluate` builds
once per run (the embeddings memo, the open-setting searcher, the generator client with the
LLM disk cache) once per worker, then answers whole questions with the runner's own
per-question function (:func:`~dynakrag.eval.runner.answer_question`, handed over in the
:class:`EvalJob`: this module sits below the runner), so each question's record is the one a
single-process run writes (its ``latency_s`` aside); :func:`evaluate_on_workers` returns them in
the questions' order. The method travels to the workers with the task (a ``dynakrag`` method
with a trajectory log opens its own connection there).

Resuming: the run goes through :func:`~dynakrag.workers.resumed` with ``evaluate``'s
:class:`~dynakrag.workers.Journal` (beside ``out``), as a single-process run does: finished
questions are journalled as they arrive and skipped by a rerun; a worker that dies
loses only the question it was on, which Dask runs again on another worker.
"""

from __future__ import annotations

import contextlib
import random
import sys
import uuid
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

from langchain_core.embeddings import Embeddings
from langchain_core.language_models import BaseChatModel

from dynakrag.configuration import Configuration
from dynakrag.data.datasets import QAExample
from dynakrag.eval.methods import Method
from dynakrag.eval.records import EvalRecord
from dynakrag.progress import progress_bar
from dynakrag.retrieval.passage import Passage
from dynakrag.workers import (
    Journal,
    fan_out,
    in_order,
    release_on_workers,
    resumed,
    worker_cached,
)

__all__ = [
    "EvalJob",
    "eval_question",
    "evaluate_on_workers",
    "question_key",
    "questions_bar",
    "run_questions",
]


@dataclass(frozen=True)
class EvalJob:
    """What every question of one evaluation shares; each worker builds its resources from
    it once. ``index_dir``: where the open-setting dense index is cached (the driver builds
    it there first, so workers on the same machine load it)."""

    method: Method
    cfg: Configuration
    retriever: str
    seed: int
    answer: Callable[..., tuple[EvalRecord, float]]
    """The runner's per-question function (:func:`dynakrag.eval.runner.answer_question`)."""
    memoise: Callable[[Embeddings], Embeddings]
    """The runner's embeddings memo (:class:`dynakrag.eval.runner.MemoEmbeddings`)."""
    no_answer: bool = False
    cache: bool = True
    chat_model: BaseChatModel | None = None
    embeddings: Embeddings | None = None
    index_dir: Path | None = None
    run_id: str = field(default_factory=lambda: uuid.uuid4().hex)


class _Resources:
    """One worker's share of an evaluation (see the module docstring)."""

    def __init__(self, job: EvalJob, corpus: Sequence[Passage] | None) -> None:
        from dynakrag.llm.cache import SQLiteLLMCache
        from dynakrag.llm.factory import llm_client_from_config
        from dynakrag.routing.factory import build_searcher, needs_embeddings

        random.seed(job.seed)
        # Every task brings its own copy of the method: keep the first, so a method with a
        # trajectory log opens one connection per worker, not one per question.
        self.method = job.method
        self.memo: Embeddings | None = None
        if needs_embeddings(job.retriever):
            embeddings = job.embeddings
            if embeddings is None:
                from dynakrag.retrieval.embeddings import default_embeddings

                embeddings = default_embeddings(batch_size=job.cfg.embedding_batch_size)
            self.memo = job.memoise(embeddings)
        self.open_searcher = None
        if corpus is not None:
            index_dir = job.index_dir if job.index_dir and job.index_dir.is_dir() else None
            self.open_searcher = build_searcher(
                job.retriever, corpus, embeddings=self.memo, index_dir=index_dir, seed=job.seed
            )
        self.llm_cache = SQLiteLLMCache.in_dir(job.cfg.cache_dir) if job.cache else None
        self.llm = llm_client_from_config(job.cfg, chat_model=job.chat_model, cache=self.llm_cache)

    def close(self) -> None:
        """Close the method's log connection and the LLM cache file (the run is over)."""
        close = getattr(self.method, "close", None)
        if callable(close):
            close()
        if self.llm_cache is not None:
            self.llm_cache.close()

    def cache_counts(self) -> tuple[int, int]:
        if self.llm_cache is None:
            return 0, 0
        stats = self.llm_cache.stats()
        return int(stats.get("hits", 0)), int(stats.get("misses", 0))


def eval_question(
    example: QAExample, job: EvalJob, corpus: Sequence[Passage] | None = None
) -> tuple[EvalRecord, dict[str, int]]:
    """One question's record on whichever worker runs it (a Dask task), and its LLM cache
    hits and misses (``{"hits", "misses"}``: counted, not journalled)."""
    resources: _Resources = worker_cached((job.run_id, "eval"), lambda: _Resources(job, corpus))
    hits, misses = resources.cache_counts()
    record, _ = job.answer(
        resources.method,
        example,
        resources.open_searcher,
        resources.llm,
        job.cfg,
        retriever=job.retriever,
        memo=resources.memo,
        seed=job.seed,
        no_answer=job.no_answer,
    )
    after_hits, after_misses = resources.cache_counts()
    return record, {"hits": after_hits - hits, "misses": after_misses - misses}


def evaluate_on_workers(
    examples: Sequence[QAExample],
    job: EvalJob,
    client: Any,
    *,
    corpus: Sequence[Passage] | None = None,
    journal: Journal | None = None,
    progress: bool = True,
    desc: str = "eval",
) -> tuple[list[EvalRecord], dict[str, int]]:
    """The records of ``examples`` in their order, run on ``client``'s workers, and the LLM
    cache hits and misses of the questions run now (not those read from ``journal``)."""
    shared = client.scatter(list(corpus), broadcast=True) if corpus is not None else None
    counts = {"hits": 0, "misses": 0}

    def answered(todo: list[QAExample]) -> Iterator[tuple[QAExample, EvalRecord]]:
        keys = [question_key(example) for example in todo]
        for example, (record, cache) in fan_out(
            client, eval_question, todo, job, shared, keys=keys
        ):
            for name in counts:
                counts[name] += cache[name]
            yield example, record

    with contextlib.ExitStack() as cleanup:
        cleanup.callback(release_on_workers, client, job.run_id)
        records = run_questions(examples, answered, journal, desc=desc, progress=progress)
    return records, counts


def run_questions(
    examples: Sequence[QAExample],
    answered: Callable[[list[QAExample]], Iterable[tuple[QAExample, EvalRecord]]],
    journal: Journal | None,
    *,
    desc: str,
    progress: bool,
) -> list[EvalRecord]:
    """The records of ``examples`` in their order: the journal's, and ``answered``'s for the
    rest (in this process or on workers), journalled as each finishes
    (:func:`~dynakrag.workers.resumed`)."""
    done: dict[str, EvalRecord] = dict(journal.done) if journal is not None else {}
    bar = partial(questions_bar, desc=desc, progress=progress)
    for example, record in resumed(examples, question_key, answered, journal, bar=bar):
        done[question_key(example)] = record
    return in_order(examples, question_key, done)


def questions_bar(total: int, done: int, desc: str, progress: bool) -> Any:
    """The progress bar of a run over ``total`` questions, ``done`` of them already journalled."""
    return progress_bar(
        total=total, initial=done, desc=desc, unit="q", file=sys.stderr, disable=not progress
    )


def question_key(example: QAExample) -> str:
    """A question's key in a run's journal (dataset, split and id)."""
    return f"{example.dataset}:{example.split}:{example.id}"

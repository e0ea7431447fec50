"""Collection on Dask workers: ``dynakrag collect --workers N`` or ``--scheduler ADDRESS``.

Each question is one task. A worker builds its searcher and model client once (from the
:class:`CollectJob` every task carries) and runs whole questions with
:func:`~dynakrag.training.collect.collect`, seeded per (seed, question, rollout) exactly as a
single process is, so the records are the ones a single-process run writes for the same
questions and seeds; only the order in which questions finish differs.

Resuming: :func:`collect_on_workers` hands each question's records back as soon as it
finishes, and ``dynakrag collect`` appends them to ``--out`` at once (a rerun resumes that file
as it resumes a single-process collection); with a trajectory log (``--log``, SQLite or
PostgreSQL) each worker writes every question it finishes into the log in one transaction, and
a rerun skips the questions there. A worker that dies mid-question loses only that question,
which Dask runs again on another worker.
"""

from __future__ import annotations

import contextlib
import hashlib
import sys
import uuid
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dynakrag.configuration import Configuration
from dynakrag.data.datasets import QAExample
from dynakrag.progress import progress_bar
from dynakrag.retrieval.passage import Passage
from dynakrag.training.records import TransitionFields
from dynakrag.workers import fan_out, release_on_workers, worker_cached

__all__ = ["CollectJob", "collect_on_workers", "collect_question"]


@dataclass(frozen=True)
class CollectJob:
    """What every question of one collection shares (the options of ``dynakrag collect``).

    ``corpus_id``: in the open setting, a digest of the pooled corpus every question searches
    (sent to the workers once); ``None`` in the distractor setting, where each question
    searches its own passages. ``collection``: the settings copied into every record (see
    :func:`~dynakrag.training.collect.collect`). ``disk_cache``: answer through the LLM disk
    cache under ``cfg.cache_dir``.
    """

    cfg: Configuration
    epsilon: float = 0.3
    seed: int = 13
    branch: bool = True
    rollouts: int = 2
    corpus_id: str | None = None
    collection: Mapping[str, Any] | None = None
    disk_cache: bool = False
    log: str | None = None
    """A trajectory log (SQLite file or ``postgresql://`` URL) every worker writes each
    finished question's records into, in one transaction."""
    run_id: str = field(default_factory=lambda: uuid.uuid4().hex)
    labels: str = "recall"
    """The label definitions (:data:`~dynakrag.training.labelling.LABELS`)."""
    memo: bool = True
    """Ask each distinct request of a question once (:class:`~dynakrag.training.reply_memo.
    RequestMemo`)."""

    def collect_options(self) -> dict[str, Any]:
        """The keyword options of :func:`~dynakrag.training.collect.collect` this job sets
        (the same in one process and on every worker)."""
        return {
            "epsilon": self.epsilon,
            "seed": self.seed,
            "branch": self.branch,
            "rollouts": self.rollouts,
            "collection": self.collection,
            "labels": self.labels,
            "memo": self.memo,
        }


def corpus_digest(passages: Sequence[Passage]) -> str:
    """A short digest of a corpus's passage ids, naming it across processes."""
    digest = hashlib.sha256()
    for passage in passages:
        digest.update(passage.id.encode() + b"\n")
    return digest.hexdigest()[:16]


def collect_question(
    example: QAExample, job: CollectJob, corpus: Sequence[Passage] | None = None
) -> list[TransitionFields]:
    """The labelled records of one question, on whichever worker runs it (a Dask task)."""
    from dynakrag.training.collect import collect
    from dynakrag.training.searchers import collection_searcher_factory

    factory = worker_cached(  # as ``dynakrag collect`` builds it in one process
        (job.run_id, "searchers"),
        lambda: collection_searcher_factory(
            job.cfg.retriever, corpus, index_root=Path(job.cfg.cache_dir)
        ),
    )
    llm = worker_cached((job.run_id, "llm"), lambda: _llm(job))
    records = list(
        collect([example], factory, llm, job.cfg, progress=False, **job.collect_options())
    )
    if job.log is not None:
        _write_question(job.log, records)
    return records


def _write_question(log: str, records: list[TransitionFields]) -> None:
    """One question's records into the log, in one transaction (the whole question or
    nothing). Workers finishing their first questions together may race to create the
    records table (PostgreSQL's ``CREATE TABLE IF NOT EXISTS`` is not safe against a
    concurrent twin): the loser tries again, the table then being there."""
    from tenacity import Retrying, retry_if_exception, stop_after_attempt

    from dynakrag.training.trajectories import write_log_records

    # Three tries, at once (the winner's table is there by then); any other error, or the
    # third lost race, is raised as it is.
    retrying = Retrying(
        retry=retry_if_exception(_lost_creation_race), stop=stop_after_attempt(3), reraise=True
    )
    retrying(write_log_records, log, records)


def _lost_creation_race(exc: BaseException) -> bool:
    try:
        from psycopg import errors
    except ImportError:
        return False
    return isinstance(exc, errors.UniqueViolation | errors.DuplicateTable | errors.DuplicateObject)


def _llm(job: CollectJob) -> Any:
    from dynakrag.llm.factory import llm_client_from_config

    if not job.disk_cache:
        return llm_client_from_config(job.cfg)
    from dynakrag.llm.cache import SQLiteLLMCache

    return llm_client_from_config(job.cfg, cache=SQLiteLLMCache.in_dir(job.cfg.cache_dir))


def collect_on_workers(
    examples: Sequence[QAExample],
    job: CollectJob,
    client: Any,
    *,
    corpus: Sequence[Passage] | None = None,
    finished: int = 0,
    progress: bool = True,
) -> Iterator[tuple[QAExample, list[TransitionFields]]]:
    """``(question, its records)`` for each of ``examples``, run as tasks on ``client``'s
    workers, as they finish. ``finished``: questions of the collection done before (for the
    progress bar)."""
    shared = client.scatter(list(corpus), broadcast=True) if corpus is not None else None
    bar = progress_bar(
        total=finished + len(examples),
        initial=finished,
        desc="collecting",
        unit="question",
        file=sys.stderr,
        disable=not progress,
    )
    with bar, contextlib.ExitStack() as cleanup:
        cleanup.callback(release_on_workers, client, job.run_id)
        keys = [example.id for example in examples]
        for example, records in fan_out(client, collect_question, examples, job, shared, keys=keys):
            yield example, records
            bar.update(1)

"""Run one method over a benchmark split and score it: :func:`evaluate`.

Settings
    ``distractor``: each question retrieves from its own candidate paragraphs
    (``QAExample.passages``; a small index is built per question, and for dense retrieval the
    passage embeddings are memoised in memory across questions, so a paragraph shared by
    several questions is embedded once). ``open``: one index over :func:`open_corpus` of *every*
    example of the split (not only the first ``limit``; DS-RAG: the chunked corpus). A dense
    open index is stored under ``<cache_dir>/eval-indexes`` keyed by the embedding model and
    the passage ids, so a rerun loads it instead of embedding again. Searchers are built by
    :func:`dynakrag.routing.factory.build_searcher`; a ``routed`` searcher fits its avg-IDF
    thresholds on the corpus it searches (each question's own paragraphs in the distractor
    setting), never on the evaluation questions.

Generator
    ``chat_model`` if given, else the configured backend (an OpenAI-compatible endpoint or the
    embedded model), from :func:`dynakrag.llm.factory.llm_client_from_config`. Unless
    ``cache=False`` every call goes through the SQLite cache
    ``<cache_dir>/llm-cache.sqlite``: a rerun replays the same replies (and token counts) without
    calling the model; hits and misses are reported in ``meta["llm_cache"]``.

Output (also written to ``out`` as JSON, with ``<out>.md`` and ``<out>.png`` beside it)
    ``meta``: what ran (method and its options, data, retriever, models, git commit,
    configuration, cache statistics, timings). ``summary``: per-question averages of
    ``support_recall``, ``em``, ``f1``, ``context_precision``, ``context_recall``,
    ``context_f1``, ``anc`` (mean number of evidence passages), ``anls``, ``retrieval_calls``,
    ``llm_calls``, ``prompt_tokens``, ``completion_tokens``, ``latency_s``, ``abstain_rate``
    (share of questions the method gave no answer to, setting ``abstain``; an abstention's
    prediction is ``""`` and scores as that empty answer; answer metrics and the rate are
    None with ``no_answer``), plus ``n`` and ``sr_per_retrieval_call``: mean support recall
    divided by mean retrieval calls (a ratio of the two means, not a mean of per-question
    ratios, so questions with zero calls are well defined; None when no retrieval was made).
    ``questions``: one record per question. ``latency_s`` is the wall time of ``Method.run``;
    building indexes is not in it (``meta["index_build_s"]``). In the run the records and the
    summary are typed (:class:`~dynakrag.eval.records.EvalRecord`,
    :class:`~dynakrag.eval.records.EvalSummary`); the output holds their JSON form.

Gold evidence is ``QAExample.gold_sets`` (DS-RAG: one group of interchangeable chunks per gold
sentence); methods never see it, except a gold-aware upper bound (``Method.needs_gold``: the
``oracle`` policy of the ``dynakrag`` method), which gets it as ``run(..., gold=...)`` and is
marked ``meta["gold_aware"]``.
"""

from __future__ import annotations

import dataclasses
import random
import subprocess
import threading
import time
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from langchain_core.embeddings import Embeddings
from langchain_core.language_models import BaseChatModel

from dynakrag.configuration import Configuration
from dynakrag.data.datasets import QAExample, load_examples, open_corpus
from dynakrag.errors import UserInputError
from dynakrag.eval import metrics
from dynakrag.eval.methods import Method, MethodResult, get_method
from dynakrag.eval.methods.base import method_configuration
from dynakrag.eval.records import (
    EvalRecord,
    EvalResult,
    EvalSummary,
    EvidenceItem,
    check_eval_record,
)
from dynakrag.eval.workers import run_questions
from dynakrag.files import write_json
from dynakrag.llm.cache import SQLiteLLMCache
from dynakrag.llm.factory import llm_client_from_config, llm_description
from dynakrag.retrieval.base import Searcher
from dynakrag.retrieval.passage import Passage
from dynakrag.routing.factory import RETRIEVERS, build_searcher, needs_embeddings, pool_index_dir
from dynakrag.workers import Journal, journal_path

__all__ = [
    "DERIVED_KEYS",
    "SETTINGS",
    "SUMMARY_KEYS",
    "MemoEmbeddings",
    "evaluate",
    "git_commit",
    "open_index_dir",
    "question_record",
    "summarize_records",
]

SETTINGS: tuple[str, ...] = ("distractor", "open", "gold")
"""distractor: each question's own paragraphs; open: the split's pooled corpus; gold: each
question's gold paragraphs only (an upper bound for reading, for evaluation only: it is told
which paragraphs are the support)."""
DERIVED_KEYS: tuple[str, ...] = ("sr_per_retrieval_call",)
"""Summary entries computed from the means (see the module docstring)."""
SUMMARY_KEYS: tuple[str, ...] = tuple(
    key for key in EvalSummary.model_fields if key not in (*DERIVED_KEYS, "n")
)
"""The summary's per-question means, in :class:`~dynakrag.eval.records.EvalSummary`'s order."""
ANSWER_KEYS: frozenset[str] = frozenset({"em", "f1", "anls"})
_REPO_ROOT = Path(__file__).resolve().parents[2]


# --------------------------------------------------------------------------------------------
# Retrieval
# --------------------------------------------------------------------------------------------


class MemoEmbeddings(Embeddings):
    """Memoises another ``Embeddings`` by text (documents and queries apart), thread-safely.

    Passage ids are content-addressed (title + text), and the dense index embeds
    ``title\\ntext``, so memoising by text is memoising by passage id.
    """

    def __init__(self, inner: Embeddings) -> None:
        self.inner = inner
        self.model_name = str(getattr(inner, "model_name", type(inner).__name__))
        self._documents: dict[str, list[float]] = {}
        self._queries: dict[str, list[float]] = {}
        self._lock = threading.Lock()
        self.embedded = 0
        """Documents actually sent to ``inner``."""

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        with self._lock:
            missing = list(dict.fromkeys(t for t in texts if t not in self._documents))
        if missing:
            vectors = self.inner.embed_documents(missing)
            with self._lock:
                self._documents.update(zip(missing, vectors, strict=True))
                self.embedded += len(missing)
        with self._lock:
            return [self._documents[t] for t in texts]

    def embed_query(self, text: str) -> list[float]:
        with self._lock:
            cached = self._queries.get(text)
        if cached is None:
            cached = self.inner.embed_query(text)
            with self._lock:
                self._queries[text] = cached
        return cached


def open_index_dir(
    cfg: Configuration,
    dataset: str,
    split: str,
    passages: Sequence[Passage],
    embeddings: Embeddings,
) -> Path:
    """Where the dense open index of ``passages`` is stored (:func:`pool_index_dir` under the
    configuration's cache folder)."""
    return pool_index_dir(Path(cfg.cache_dir), f"{dataset}-{split}", passages, embeddings)


# --------------------------------------------------------------------------------------------
# Scoring
# --------------------------------------------------------------------------------------------


def question_record(
    example: QAExample, result: MethodResult, latency_s: float, *, no_answer: bool = False
) -> EvalRecord:
    """One question's output record: what the method did, the gold data and its metrics.
    Every field is set, so its JSON form (:meth:`~dynakrag.eval.records.EvalRecord.to_json`)
    has every key."""
    evidence_ids = [doc["id"] for doc in result.evidence]
    gold = example.gold_sets
    context = metrics.context_metrics(evidence_ids, gold)
    answers = (
        dict.fromkeys(ANSWER_KEYS)
        if no_answer
        else metrics.answer_metrics(result.prediction, example.answers)
    )
    return EvalRecord(
        id=example.row if example.dataset.startswith("dsrag") else example.id,
        question=example.question,
        prediction=result.prediction,
        gold_answers=list(example.answers),
        gold_support=list(example.support),
        gold_sets=[sorted(group) for group in gold],
        evidence=[
            EvidenceItem(id=doc["id"], title=doc.get("title", ""), text=doc.get("text", ""))
            for doc in result.evidence
        ],
        actions=list(result.actions),
        retrieval_calls=result.retrieval_calls,
        llm_calls=result.llm_calls,
        prompt_tokens=result.prompt_tokens,
        completion_tokens=result.completion_tokens,
        latency_s=round(latency_s, 4),
        support_recall=metrics.support_recall(evidence_ids, gold),
        context_precision=context["precision"],
        context_recall=context["recall"],
        context_f1=context["f1"],
        num_chunks=len(evidence_ids),
        em=answers["em"],
        f1=answers["f1"],
        anls=answers["anls"],
        # An abstention is scored as the empty answer it is (its prediction is "").
        abstained=None if no_answer else result.abstained,
        abstain_reason="" if no_answer else result.abstain_reason,
        answer_citations=list(result.answer_citations),
        details=result.details,
    )


def summarize_records(records: Sequence[EvalRecord]) -> EvalSummary:
    """Per-question averages of :data:`SUMMARY_KEYS` (``anc`` = mean ``num_chunks``,
    ``abstain_rate`` = mean ``abstained``); a key
    with no numeric value (answer metrics under ``no_answer``) is None. Adds ``n`` and
    ``sr_per_retrieval_call`` = mean SR / mean retrieval calls (None without retrievals)."""
    means: dict[str, float | None] = {}
    sources = {"anc": "num_chunks", "abstain_rate": "abstained"}
    for key in SUMMARY_KEYS:
        source = sources.get(key, key)
        values = [v for r in records if isinstance(v := getattr(r, source), int | float)]
        means[key] = sum(values) / len(values) if values else None
    recall, calls = means["support_recall"], means["retrieval_calls"]
    return EvalSummary(
        **means,
        sr_per_retrieval_call=recall / calls if recall is not None and calls else None,
        n=len(records),
    )


def _git(*args: str) -> str | None:
    """Output of ``git args`` in the repository dynakrag runs from; None when unavailable."""
    try:
        done = subprocess.run(
            ["git", *args],
            cwd=_REPO_ROOT,
            capture_output=True,
            text=True,
            timeout=10,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout if done.returncode == 0 else None


def git_commit() -> str | None:
    """``git rev-parse HEAD`` of the repository dynakrag runs from; None when unavailable."""
    commit = (_git("rev-parse", "HEAD") or "").strip()
    return commit or None


def _git_dirty() -> bool | None:
    status = _git("status", "--porcelain", "--untracked-files=no")
    return None if status is None else bool(status.strip())


# --------------------------------------------------------------------------------------------
# The run
# --------------------------------------------------------------------------------------------


def evaluate(
    dataset: str,
    split: str = "eval",
    setting: str = "distractor",
    method: str | Method = "naive",
    retriever: str | None = None,
    limit: int | None = None,
    seed: int | None = None,
    no_answer: bool = False,
    out: str | Path | None = None,
    cfg: Configuration | None = None,
    chat_model: BaseChatModel | None = None,
    embeddings: Embeddings | None = None,
    progress: bool = True,
    *,
    method_options: dict[str, Any] | None = None,
    cache: bool = True,
    report: bool = True,
    workers: int | None = None,
    scheduler: str | None = None,
    question_ids: Sequence[str] | None = None,
) -> EvalResult:
    """Run ``method`` on the first ``limit`` questions of ``dataset``/``split`` and score it:
    the result (see the module docstring) as it is written to ``out``, in its JSON form.

    ``question_ids`` keeps only those questions (in the split's order; an unknown id is an
    error); the open setting still searches the whole split's pooled corpus.

    ``retriever`` (default: the method's own where ``cfg`` sets none, see
    :func:`~dynakrag.eval.methods.base.method_configuration`, else the configuration's).
    ``seed`` (default: the configuration's) seeds Python's and NumPy's generators and sets the
    configuration's ``seed``. ``out``: write the result there as JSON, plus ``<out>.md`` and
    ``<out>.png`` when ``report``. ``workers`` (a local Dask cluster of that many processes) or
    ``scheduler`` (an existing cluster's address) answer the questions on Dask workers
    (:mod:`dynakrag.eval.workers`): the same records, resumable through a journal beside
    ``out``. Raises :class:`UserInputError` (or a subclass such as
    :class:`~dynakrag.data.datasets.DataMissingError`) for unusable arguments or data.
    """
    if setting not in SETTINGS:
        raise UserInputError(f"unknown setting {setting!r}; choose one of {', '.join(SETTINGS)}")
    base = cfg or Configuration.from_env()
    runner = get_method(method, no_answer=no_answer, **(method_options or {}))
    retriever = retriever or method_configuration(runner, base).retriever
    if retriever not in RETRIEVERS:
        raise UserInputError(
            f"unknown retriever {retriever!r}; choose one of {', '.join(RETRIEVERS)}"
        )
    seed = base.seed if seed is None else seed
    cfg = base.merged({"seed": seed, "retriever": retriever})
    runner.no_answer = no_answer
    out_path = Path(out).expanduser() if out is not None else None
    if out_path is not None:
        _check_writable(out_path)

    random.seed(seed)
    try:
        import numpy as np

        np.random.seed(seed % 2**32)
    except ImportError:  # pragma: no cover - numpy is a dependency
        pass

    started = time.perf_counter()
    pool = load_examples(dataset, split)  # type: ignore[arg-type]
    chosen = pool
    if question_ids is not None:
        wanted = set(question_ids)
        pool_ids = {example.id for example in pool}
        unknown = sorted(wanted - pool_ids)
        if unknown:
            raise UserInputError(
                f"{len(unknown)} question id(s) not in {dataset}/{split}, e.g. {unknown[0]!r}"
            )
        chosen = [example for example in pool if example.id in wanted]
    examples = chosen if limit is None else chosen[:limit]
    if setting == "gold":
        examples = [
            dataclasses.replace(ex, passages=tuple(p for p in ex.passages if p.id in ex.support))
            for ex in examples
        ]
    if setting in ("distractor", "gold"):
        empty = [ex for ex in examples if not ex.passages]
        if empty:
            raise UserInputError(
                f"dataset {dataset!r} has no per-question paragraphs for the distractor setting "
                f"(question {empty[0].id!r}); use --setting open"
            )

    embedded = needs_embeddings(retriever)
    memo: MemoEmbeddings | None = None
    if embedded:
        if embeddings is None:
            from dynakrag.retrieval.embeddings import default_embeddings

            embeddings = default_embeddings(batch_size=cfg.embedding_batch_size)
        memo = MemoEmbeddings(embeddings)

    index_s = 0.0
    open_searcher: Searcher | None = None
    corpus_size: int | None = None
    corpus: list[Passage] = []
    index_dir: Path | None = None
    if setting == "open":
        corpus = open_corpus(pool)
        corpus_size = len(corpus)
        tick = time.perf_counter()
        index_dir = (
            open_index_dir(cfg, dataset, split, corpus, embeddings)
            if embedded and embeddings is not None
            else None
        )
        open_searcher = build_searcher(
            retriever, corpus, embeddings=memo, progress=progress, index_dir=index_dir, seed=seed
        )
        index_s += time.perf_counter() - tick

    llm_cache = SQLiteLLMCache.in_dir(cfg.cache_dir) if cache else None
    journal: Journal | None = None  # a journal that cannot be read leaves none to close
    try:
        llm = llm_client_from_config(cfg, chat_model=chat_model, cache=llm_cache)
        models: dict[str, Any] = dict(llm_description(cfg, chat_model))
        if embedded:
            from dynakrag.retrieval.dense import model_name_of

            models["embeddings"] = model_name_of(embeddings)  # type: ignore[arg-type]
        else:
            models["embeddings"] = None
        records: list[EvalRecord] = []
        desc = f"{runner.name} {dataset}/{split} {setting} {retriever}"
        cache_stats: dict[str, Any] = {"enabled": False}
        journal = (
            Journal(
                journal_path(out_path),
                _journal_settings(
                    runner, cfg, examples, retriever=retriever, seed=seed, no_answer=no_answer
                ),
                load=check_eval_record,
                dump=EvalRecord.to_json,
            )
            if out_path is not None
            else None
        )
        if workers is None and scheduler is None:
            build_seconds: list[float] = []

            def answered(todo: list[QAExample]) -> Iterator[tuple[QAExample, EvalRecord]]:
                for example in todo:
                    record, build_s = answer_question(
                        runner,
                        example,
                        open_searcher,
                        llm,
                        cfg,
                        retriever=retriever,
                        memo=memo,
                        seed=seed,
                        no_answer=no_answer,
                    )
                    build_seconds.append(build_s)
                    yield example, record

            records = run_questions(examples, answered, journal, desc=desc, progress=progress)
            index_s += sum(build_seconds)
            if llm_cache is not None:
                cache_stats = {"enabled": True, **llm_cache.stats()}
        else:
            records, counts = _evaluate_on_workers(
                examples,
                runner,
                cfg,
                (workers, scheduler),
                retriever=retriever,
                seed=seed,
                no_answer=no_answer,
                cache=cache,
                chat_model=chat_model,
                embeddings=embeddings,
                corpus=corpus if setting == "open" else None,
                index_dir=index_dir if setting == "open" else None,
                journal=journal,
                progress=progress,
                desc=desc,
            )
            if llm_cache is not None:
                cache_stats = {"enabled": True, **llm_cache.stats(), **counts}
    finally:
        if llm_cache is not None:
            llm_cache.close()
        if journal is not None:
            journal.close()

    meta = {
        "method": runner.name,
        "method_options": runner.options(),
        "dataset": dataset,
        "split": split,
        "setting": setting,
        "retriever": retriever,
        "limit": limit,
        "seed": seed,
        "no_answer": no_answer,
        "gold_aware": runner.needs_gold,
        "n_questions": len(records),
        "corpus_size": corpus_size,
        "models": models,
        "git_commit": git_commit(),
        "git_dirty": _git_dirty(),
        "dynakrag_version": _version(),
        "configuration": cfg.model_dump(mode="json"),
        "llm_cache": cache_stats,
        "embedded_passages": memo.embedded if memo is not None else None,
        "index_build_s": round(index_s, 3),
        "total_s": round(time.perf_counter() - started, 3),
        "finished_at": datetime.now(UTC).isoformat(timespec="seconds"),
    }
    output = EvalResult(
        meta=meta,
        summary=summarize_records(records).to_json(),
        questions=[record.to_json() for record in records],
    )
    if out_path is not None:
        _write_json(out_path, output)
        if journal is not None:
            journal.remove()  # the run's output is written: nothing is left to resume
        if report:
            from dynakrag.eval.report import write_report

            write_report(output, out_path)
    return output


def answer_question(
    runner: Method,
    example: QAExample,
    open_searcher: Searcher | None,
    llm: Any,
    cfg: Configuration,
    *,
    retriever: str,
    memo: Embeddings | None,
    seed: int,
    no_answer: bool,
) -> tuple[EvalRecord, float]:
    """One question's record (:func:`question_record`) and the seconds spent building its
    searcher: the open-setting one, else one over the question's own passages."""
    searcher, build_s = open_searcher, 0.0
    if searcher is None:
        tick = time.perf_counter()
        searcher = build_searcher(retriever, example.passages, embeddings=memo, seed=seed)
        build_s = time.perf_counter() - tick
    # Only a gold-aware upper bound (the oracle) is handed the gold; see needs_gold.
    gold: dict[str, Any] = {"gold": example.gold_sets} if runner.needs_gold else {}
    tick = time.perf_counter()
    result = runner.run(example.question, searcher, llm, cfg, **gold)
    latency = time.perf_counter() - tick
    return question_record(example, result, latency, no_answer=no_answer), build_s


def _journal_settings(
    runner: Method,
    cfg: Configuration,
    examples: Sequence[QAExample],
    **options: Any,
) -> dict[str, Any]:
    """What a journal must match to be resumed: the method, its settings and the questions."""
    return {
        "kind": "eval",
        "method": runner.name,
        "method_options": runner.options(),
        "questions": [example.id for example in examples],
        "configuration": cfg.model_dump(mode="json"),
        **options,
    }


def _evaluate_on_workers(
    examples: Sequence[QAExample],
    runner: Method,
    cfg: Configuration,
    cluster: tuple[int | None, str | None],
    *,
    journal: Journal | None,
    progress: bool,
    desc: str,
    corpus: Sequence[Passage] | None,
    **job: Any,
) -> tuple[list[EvalRecord], dict[str, int]]:
    """The question records, answered on Dask workers (``cluster``: ``(workers, scheduler)``);
    finished questions go to ``journal`` as they arrive, so a rerun resumes."""
    from dynakrag.eval.workers import EvalJob, evaluate_on_workers
    from dynakrag.workers import dask_client

    plan = EvalJob(method=runner, cfg=cfg, answer=answer_question, memoise=MemoEmbeddings, **job)
    with dask_client(*cluster) as client:
        return evaluate_on_workers(
            examples,
            plan,
            client,
            corpus=corpus,
            journal=journal,
            progress=progress,
            desc=desc,
        )


def _version() -> str:
    from dynakrag import __version__

    return __version__


def _check_writable(path: Path) -> None:
    if path.is_dir():
        raise UserInputError(f"--out {path} is a directory; give a file name such as run.json")
    if path.suffix.lower() in (".md", ".png"):
        raise UserInputError(f"--out {path}: the report files take that name; use run.json")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UserInputError(f"cannot create {path.parent}: {exc.strerror or exc}") from None


def _write_json(path: Path, data: EvalResult) -> None:
    try:
        write_json(path, data, ensure_ascii=False, default=str)
    except OSError as exc:
        raise UserInputError(f"cannot write {path}: {exc.strerror or exc}") from None

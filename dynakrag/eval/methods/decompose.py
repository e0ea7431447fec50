"""The ``decompose`` method: DecomposeRAG, sub-questions answered in order with chaining.

Decompose into sub-questions (``#k`` refers to sub-answer k; the prompt and parser of
:func:`dynakrag.decomposition.decompose`), then answer them in dependency order with answer
chaining (:func:`~dynakrag.decomposition.resolve_references`): retrieve ``docs_per_action``
passages per resolved sub-question, answer it from those passages, validate the answer
structurally with :func:`~dynakrag.actions.sufficiency_check.is_grounded` (no extra model
call); a rejected answer is retried once with an alternative query (the sub-question plus the
question, paging past the passages already seen) while retrieval budget is left, then kept as
a best-effort "unverified" answer for chaining. Sub-questions whose references are resolved
(first of all those without references) run in parallel on a thread pool; repeated
sub-questions are answered once (in-run cache). Retrieval calls are capped by
``max_retrieval_calls``, allotted in sub-question order so runs are deterministic. The final
answer sees all evidence plus the validated sub-answers.
"""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from dynakrag import prompts
from dynakrag.actions.sufficiency_check import is_grounded
from dynakrag.configuration import Configuration
from dynakrag.decomposition import REFERENCE, decompose, resolve_references
from dynakrag.eval.methods.base import (
    Evidence,
    Method,
    MethodResult,
    Tally,
    final_answer,
    merge_evidence,
    retrieve,
)
from dynakrag.llm.client import LLMClient
from dynakrag.retrieval.base import Searcher


@dataclass
class _SubResult:
    question: str
    """The sub-question with known answers substituted."""
    queries: list[str]
    passages: list[Evidence]
    answer: str | None
    """The best-effort answer (None: UNKNOWN or unusable)."""
    verified: bool
    actions: list[str] = field(default_factory=list)


def _query_for(sub_question: str, question: str) -> str:
    """A search query for a sub-question; unresolved ``#k`` give way to the main question."""
    if not REFERENCE.search(sub_question):
        return sub_question
    stripped = " ".join(REFERENCE.sub(" ", sub_question).split())
    return f"{stripped} {question}".strip()


def _alternative_query(sub_question: str, question: str) -> str:
    """The retry query: the sub-question's query widened with the main question."""
    base = _query_for(sub_question, question)
    return base if question in base else f"{base} {question}"


@dataclass(frozen=True)
class _Job:
    """One attempt at one sub-question."""

    index: int
    sub_question: str
    query: str
    may_retrieve: bool
    context: list[Evidence]
    """The evidence of earlier waves: read when no retrieval budget is left."""
    previous: _SubResult | None = None


@dataclass
class _Run:
    """What the attempts of one question share."""

    question: str
    searcher: Searcher
    llm: LLMClient
    cfg: Configuration
    tally: Tally
    memo: dict[tuple[str, str], _SubResult] = field(default_factory=dict)
    memo_lock: threading.Lock = field(default_factory=threading.Lock)


class DecomposeMethod(Method):
    """DecomposeRAG: sequential sub-question answering with chaining and validation."""

    name = "decompose"

    def __init__(self, *, no_answer: bool = False, max_workers: int = 4, retries: int = 1) -> None:
        super().__init__(no_answer=no_answer)
        self.max_workers = max(1, max_workers)
        self.retries = max(0, retries)

    def options(self) -> dict[str, Any]:
        return {**super().options(), "max_workers": self.max_workers, "retries": self.retries}

    def run(
        self, question: str, searcher: Searcher, llm: LLMClient, cfg: Configuration
    ) -> MethodResult:
        run = _Run(question, searcher, llm, cfg, Tally())
        actions = ["decompose"]
        subs, usage = decompose(question, llm)
        run.tally.add(usage)
        n = len(subs)
        # Sub-question i waits for the earlier sub-questions it references.
        deps = [
            {int(k) - 1 for k in REFERENCE.findall(text) if 0 <= int(k) - 1 < i}
            for i, text in enumerate(subs)
        ]
        answers: list[str | None] = [None] * n
        results: dict[int, _SubResult] = {}
        budget = cfg.max_retrieval_calls
        waves: list[list[int]] = []
        with ThreadPoolExecutor(max_workers=self.max_workers) as pool:
            while len(results) < n:
                ready = [i for i in range(n) if i not in results and deps[i] <= results.keys()]
                waves.append(ready)
                context = merge_evidence(*(results[i].passages for i in sorted(results)))
                # First attempts; retrieval budget is allotted in sub-question order.
                jobs = []
                for i in ready:
                    text = resolve_references(subs[i], answers)
                    jobs.append(_Job(i, text, _query_for(text, question), budget > 0, context))
                    budget -= int(budget > 0)
                current = self._map(pool, run, jobs)
                # Retries of rejected answers while retrieval budget is left, in order.
                for _ in range(self.retries):
                    retry = [job for job in jobs if not current[job.index].verified][:budget]
                    if not retry:
                        break
                    budget -= len(retry)
                    jobs = [
                        _Job(
                            job.index,
                            job.sub_question,
                            _alternative_query(job.sub_question, question),
                            True,
                            context,
                            previous=current[job.index],
                        )
                        for job in retry
                    ]
                    current.update(self._map(pool, run, jobs))
                for i in ready:
                    results[i] = current[i]
                    answers[i] = current[i].answer
        final = [results[i] for i in range(n)]
        for result in final:
            actions += result.actions
        evidence = merge_evidence(*(r.passages for r in final))[: cfg.max_final_docs]
        facts = [(r.question, r.answer) for r in final if r.verified and r.answer]
        prediction = final_answer(self, question, evidence, llm, run.tally, actions, facts)
        return run.tally.result(
            prediction,
            evidence,
            actions,
            sub_questions=[
                {
                    "question": r.question,
                    "answer": r.answer,
                    "verified": r.verified,
                    "queries": r.queries,
                    "passages": [doc["id"] for doc in r.passages],
                }
                for r in final
            ],
            waves=waves,
        )

    def _map(self, pool: ThreadPoolExecutor, run: _Run, jobs: list[_Job]) -> dict[int, _SubResult]:
        """Attempts of one wave, by sub-question index: on the pool when there are several."""
        if len(jobs) <= 1:
            outcomes = [self._attempt(run, job) for job in jobs]
        else:
            outcomes = list(pool.map(lambda job: self._attempt(run, job), jobs))
        return {job.index: outcome for job, outcome in zip(jobs, outcomes, strict=True)}

    @staticmethod
    def _attempt(run: _Run, job: _Job) -> _SubResult:
        """Retrieve for one sub-question, answer it from its passages, validate the answer."""
        cfg, previous = run.cfg, job.previous
        key = (job.sub_question, job.query if job.may_retrieve else "")
        if previous is None:
            with run.memo_lock:
                if key in run.memo:
                    return run.memo[key]  # a repeated sub-question: no new calls
        actions: list[str] = []
        passages = list(previous.passages) if previous else []
        retrievals = 0
        if job.may_retrieve:
            seen = {doc["id"] for doc in passages}
            passages += retrieve(
                run.searcher, job.query, cfg.docs_per_action, cfg.frontier_depth, seen
            )
            retrievals = 1
            actions.append("retry" if previous is not None else "retrieve")
        # Documented fallback: with no retrieval budget left, answer from the evidence so far.
        reading = (passages or job.context)[: cfg.max_final_docs]
        reply, usage = run.llm.structured(
            prompts.sufficiency_messages(run.question, [job.sub_question], reading),
            prompts.AnswersReply,
            max_tokens=prompts.sufficiency_max_tokens(1),
        )
        run.tally.add(usage, retrievals)
        actions += ["answer_sub", "validate"]
        first = reply.answer(0) if reply is not None else None
        value = "" if first is None else first.strip()
        unknown = not value or value.upper().startswith(prompts.UNKNOWN) or "#" in value
        verified = not unknown and is_grounded(value, job.sub_question, reading)
        answer = None if unknown else value[:200]
        if previous is not None and answer is None:
            answer = previous.answer  # keep the first best-effort answer
        result = _SubResult(
            question=job.sub_question,
            queries=[*(previous.queries if previous else []), *([job.query] * retrievals)],
            passages=passages,
            answer=answer,
            verified=verified,
            actions=[*(previous.actions if previous else []), *actions],
        )
        if previous is None:
            with run.memo_lock:
                run.memo.setdefault(key, result)
        return result

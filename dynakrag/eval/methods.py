"""The methods an evaluation compares, behind one small interface.

A method answers one question with a searcher and an :class:`~dynakrag.llm.client.LLMClient`
and reports what it did: ``Method.run(question, searcher, llm, cfg) -> MethodResult``. A new
baseline is one new subclass registered in :data:`METHODS`. Methods never see gold data; the
one exception is a gold-aware upper bound (``Method.needs_gold``), whose ``run`` also gets
``gold=`` from the runner.

``naive``
    One retrieval of the top ``k`` passages (default 5) for the question, then the answer.
``ircot``
    IRCoT's fixed interleaving (Trivedi et al. 2023): retrieve with the question, write one
    reasoning sentence from the evidence, retrieve with that sentence, ... until
    ``max_retrieval_calls`` retrievals were made or a sentence says "answer is"; then answer.
    Every retrieval adds ``docs_per_action`` unseen passages.
``decompose``
    DecomposeRAG: decompose into sub-questions (``#k`` refers to sub-answer k; the prompt and
    parser of :func:`dynakrag.actions.sufficiency_check.decompose`), then answer them in
    dependency order with answer chaining (:func:`~dynakrag.actions.sufficiency_check.
    resolve_references`): retrieve ``docs_per_action`` passages per resolved sub-question,
    answer it from those passages, validate the answer structurally with
    :func:`~dynakrag.actions.sufficiency_check.is_grounded` (no extra model call); a rejected
    answer is retried once with an alternative query (the sub-question plus the question,
    paging past the passages already seen) while retrieval budget is left, then kept as a
    best-effort "unverified" answer for chaining. Sub-questions whose references are resolved
    (first of all those without references) run in parallel on a thread pool; repeated
    sub-questions are answered once (in-run cache). Retrieval calls are capped by
    ``max_retrieval_calls``, allotted in sub-question order so runs are deterministic. The
    final answer sees all evidence plus the validated sub-answers.
``dynakrag``
    The DynaKRAG graph with the configured (or given) policy; evidence, trace and accounting
    come from the final state. ``policy`` is any policy name or file (``heuristic``,
    ``uniform``, ``fixed``, a trained ``.npz``) or ``"oracle"``: the gold-aware upper bound
    (:class:`~dynakrag.eval.oracle.OraclePolicy`), built per question from the gold the
    runner passes (``needs_gold``) and refused without it. ``ablate`` switches parts off
    (:data:`ABLATIONS`): ``sufficiency`` (``sufficiency_check`` taken out of the valid set the
    policy ranks), ``compression`` (``compress_answer_evidence`` passes the evidence through:
    ``compression="passthrough"``), ``continuation`` (the learned policy's continuation guard
    off; needs a learned policy).

``no_answer``
    Every method can skip its final answer step (retrieval and control metrics only). The
    baselines simply do not make the call. The graph has no switch for it, so ``dynakrag``
    runs with :class:`AnswerlessLLM`, an LLMClient that declines the final-answer prompt
    (system prompt :data:`dynakrag.prompts.ANSWER_SYSTEM`) without calling the model or
    counting a call; ``stop_answer`` then takes its documented fallback, which the method
    discards (the prediction is ``""``).
"""

from __future__ import annotations

import re
import threading
from abc import ABC, abstractmethod
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, ClassVar

from dynakrag import prompts
from dynakrag.actions.sufficiency_check import decompose, is_grounded, resolve_references
from dynakrag.configuration import Configuration
from dynakrag.errors import UserInputError
from dynakrag.llm.client import NO_USAGE, LLMClient, Messages, Usage
from dynakrag.policy.base import Policy
from dynakrag.retrieval.base import Searcher

__all__ = [
    "ABLATIONS",
    "METHODS",
    "ORACLE",
    "AnswerlessLLM",
    "DecomposeMethod",
    "DynakragMethod",
    "IRCoTMethod",
    "Method",
    "MethodResult",
    "NaiveMethod",
    "get_method",
    "is_answer_prompt",
]

Evidence = dict[str, str]


@dataclass
class MethodResult:
    """What one method did for one question."""

    prediction: str
    evidence: list[Evidence]
    """The passages given to the final answer, ``{id, title, text}``, in order."""
    actions: list[str]
    retrieval_calls: int = 0
    llm_calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    details: dict[str, Any] = field(default_factory=dict)
    """Method-specific extras (sub-questions, reasoning, the graph trace)."""


class Method(ABC):
    """One way of answering a question from a searcher and an LLM."""

    name: ClassVar[str] = "method"

    def __init__(self, *, no_answer: bool = False) -> None:
        self.no_answer = no_answer

    @property
    def needs_gold(self) -> bool:
        """Whether ``run`` takes ``gold=`` (gold-aware upper bounds only, never a real method).

        The runner then passes ``gold=example.gold_sets``; every other method never sees gold.
        """
        return False

    @abstractmethod
    def run(
        self, question: str, searcher: Searcher, llm: LLMClient, cfg: Configuration
    ) -> MethodResult:
        """Answer ``question``; never sees gold data."""

    def options(self) -> dict[str, Any]:
        """The method's settings, recorded in the run metadata."""
        return {"no_answer": self.no_answer}


# --------------------------------------------------------------------------------------------
# Shared pieces
# --------------------------------------------------------------------------------------------


class _Tally:
    """Thread-safe usage and retrieval counters of one run."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.usage = NO_USAGE
        self.retrieval_calls = 0

    def add(self, usage: Usage = NO_USAGE, retrievals: int = 0) -> None:
        with self._lock:
            self.usage += usage
            self.retrieval_calls += retrievals

    def result(
        self, prediction: str, evidence: list[Evidence], actions: list[str], **details: Any
    ) -> MethodResult:
        return MethodResult(
            prediction=prediction,
            evidence=evidence,
            actions=actions,
            retrieval_calls=self.retrieval_calls,
            llm_calls=self.usage.llm_calls,
            prompt_tokens=self.usage.prompt_tokens,
            completion_tokens=self.usage.completion_tokens,
            details=details,
        )


def retrieve(
    searcher: Searcher,
    query: str,
    count: int,
    depth: int,
    exclude: set[str] | frozenset[str] = frozenset(),
) -> list[Evidence]:
    """The best ``count`` passages for ``query`` not in ``exclude`` (looking ``depth`` deep)."""
    out: list[Evidence] = []
    for passage, _score in searcher.search(query, max(depth, count)):
        if passage.id in exclude or any(doc["id"] == passage.id for doc in out):
            continue
        out.append({"id": passage.id, "title": passage.title, "text": passage.text})
        if len(out) == count:
            break
    return out


def merge_evidence(*groups: Sequence[Evidence]) -> list[Evidence]:
    """Concatenate passage lists, keeping the first occurrence of each id."""
    seen: set[str] = set()
    merged: list[Evidence] = []
    for group in groups:
        for doc in group:
            if doc["id"] not in seen:
                seen.add(doc["id"])
                merged.append(doc)
    return merged


def clean_answer(reply: str | None) -> str:
    """The first line of a reply without an ``Answer:`` prefix; unusable -> insufficient."""
    line = reply.strip().splitlines()[0].strip() if reply and reply.strip() else ""
    if line.lower().startswith("answer:"):
        line = line[len("answer:") :].strip()
    return line.strip('"').strip() or prompts.INSUFFICIENT_EVIDENCE


def is_answer_prompt(messages: Messages) -> bool:
    """Whether ``messages`` is the final-answer prompt (:func:`prompts.answer_messages`)."""
    return bool(messages) and messages[0] == ("system", prompts.ANSWER_SYSTEM)


def final_answer(
    method: Method,
    question: str,
    evidence: list[Evidence],
    llm: LLMClient,
    tally: _Tally,
    actions: list[str],
    facts: Sequence[tuple[str, str]] = (),
) -> str:
    """The shared reader: ``answer_messages`` over the evidence ("" when ``no_answer``)."""
    if method.no_answer:
        return ""
    actions.append("answer")
    if not evidence:
        return prompts.INSUFFICIENT_EVIDENCE  # as stop_answer: no passages, no model call
    reply, usage = llm.text(prompts.answer_messages(question, evidence, facts))
    tally.add(usage)
    return clean_answer(reply)


# --------------------------------------------------------------------------------------------
# naive
# --------------------------------------------------------------------------------------------


class NaiveMethod(Method):
    """Retrieve the top ``k`` passages for the question once, then answer."""

    name = "naive"

    def __init__(self, *, no_answer: bool = False, k: int = 5) -> None:
        super().__init__(no_answer=no_answer)
        if k < 1:
            raise UserInputError(f"k must be >= 1, got {k}")
        self.k = k

    def options(self) -> dict[str, Any]:
        return {**super().options(), "k": self.k}

    def run(
        self, question: str, searcher: Searcher, llm: LLMClient, cfg: Configuration
    ) -> MethodResult:
        tally = _Tally()
        evidence = retrieve(searcher, question, self.k, self.k)
        tally.add(retrievals=1)
        actions = ["retrieve"]
        prediction = final_answer(self, question, evidence, llm, tally, actions)
        return tally.result(prediction, evidence, actions)


# --------------------------------------------------------------------------------------------
# ircot
# --------------------------------------------------------------------------------------------


def _first_sentence(reply: str | None) -> str:
    text = " ".join((reply or "").split())
    for prefix in ("Next sentence:", "Reasoning:"):
        if text.lower().startswith(prefix.lower()):
            text = text[len(prefix) :].strip()
    return text[:300]


class IRCoTMethod(Method):
    """Interleave retrieval with chain-of-thought sentences (fixed schedule), then answer."""

    name = "ircot"

    def run(
        self, question: str, searcher: Searcher, llm: LLMClient, cfg: Configuration
    ) -> MethodResult:
        tally = _Tally()
        evidence: list[Evidence] = []
        thoughts: list[str] = []
        queries: list[str] = []
        actions: list[str] = []
        query = question
        for call in range(cfg.max_retrieval_calls):
            queries.append(query)
            seen = {doc["id"] for doc in evidence}
            evidence += retrieve(searcher, query, cfg.docs_per_action, cfg.frontier_depth, seen)
            tally.add(retrievals=1)
            actions.append("retrieve")
            if call == cfg.max_retrieval_calls - 1:
                break  # a sentence after the last retrieval could not be used for searching
            reply, usage = llm.text(
                prompts.ircot_reason_messages(question, evidence[: cfg.max_final_docs], thoughts)
            )
            tally.add(usage)
            actions.append("reason")
            sentence = _first_sentence(reply)
            if sentence:
                thoughts.append(sentence)
            if prompts.IRCOT_ANSWER_MARKER in sentence.lower():
                break
            # Documented fallback: no usable sentence pages deeper into the question's ranking.
            query = sentence or question
        window = evidence[: cfg.max_final_docs]
        prediction = final_answer(self, question, window, llm, tally, actions)
        return tally.result(prediction, window, actions, reasoning=thoughts, queries=queries)


# --------------------------------------------------------------------------------------------
# decompose (DecomposeRAG)
# --------------------------------------------------------------------------------------------

_REFERENCE = re.compile(r"#(\d+)")


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
    if not _REFERENCE.search(sub_question):
        return sub_question
    stripped = " ".join(_REFERENCE.sub(" ", sub_question).split())
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
    tally: _Tally
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
        run = _Run(question, searcher, llm, cfg, _Tally())
        actions = ["decompose"]
        subs, usage = decompose(question, llm)
        run.tally.add(usage)
        n = len(subs)
        # Sub-question i waits for the earlier sub-questions it references.
        deps = [
            {int(k) - 1 for k in _REFERENCE.findall(text) if 0 <= int(k) - 1 < i}
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
        reply, usage = run.llm.json(
            prompts.sufficiency_messages(run.question, [job.sub_question], reading)
        )
        run.tally.add(usage, retrievals)
        actions += ["answer_sub", "validate"]
        raw = reply.get("answers") if reply else None
        value = str(raw[0]).strip() if isinstance(raw, list) and raw and raw[0] is not None else ""
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


# --------------------------------------------------------------------------------------------
# dynakrag
# --------------------------------------------------------------------------------------------


class AnswerlessLLM(LLMClient):
    """Delegates to ``inner`` but declines the final-answer prompt: ``(None, NO_USAGE)``.

    No model call is made or counted for it; ``declined`` counts how often it was asked.
    """

    def __init__(self, inner: LLMClient) -> None:  # no super().__init__: everything delegates
        self.inner = inner
        self.declined = 0
        self._declined_lock = threading.Lock()

    @property
    def model(self) -> Any:
        return self.inner.model

    @property
    def json_mode(self) -> bool:
        return self.inner.json_mode

    def text(self, messages: Messages) -> tuple[str | None, Usage]:
        if is_answer_prompt(messages):
            with self._declined_lock:
                self.declined += 1
            return None, NO_USAGE
        return self.inner.text(messages)

    def json(self, messages: Messages) -> tuple[dict[str, Any] | None, Usage]:
        return self.inner.json(messages)


ORACLE = "oracle"
ABLATIONS: dict[str, str] = {
    "sufficiency": "sufficiency_check removed from the valid set the policy ranks",
    "compression": "compress_answer_evidence passes the evidence through (no compression)",
    "continuation": "the learned policy's continuation guard switched off",
}
"""The ``dynakrag`` method's ablations, by name."""


class DynakragMethod(Method):
    """The DynaKRAG graph (policy: ``policy`` if given, else the configuration's).

    ``ablate``: names from :data:`ABLATIONS`; ``oracle_horizon``: look-ahead of the oracle.
    """

    name = "dynakrag"

    def __init__(
        self,
        *,
        no_answer: bool = False,
        policy: Policy | str | None = None,
        ablate: Sequence[str] = (),
        oracle_horizon: int = 2,
    ) -> None:
        super().__init__(no_answer=no_answer)
        self.policy = policy
        self.ablate = tuple(dict.fromkeys(ablate))
        self.oracle_horizon = oracle_horizon
        unknown = [name for name in self.ablate if name not in ABLATIONS]
        if unknown:
            raise UserInputError(
                f"unknown ablation {unknown[0]!r}; choose from {', '.join(ABLATIONS)}"
            )
        if oracle_horizon < 1:
            raise UserInputError(f"oracle_horizon must be >= 1, got {oracle_horizon}")
        if policy is not None:
            self._check_policy(policy)  # a bad policy fails before any data or model loads

    @property
    def needs_gold(self) -> bool:
        return self.policy == ORACLE

    def options(self) -> dict[str, Any]:
        policy = (
            self.policy
            if self.policy is None or isinstance(self.policy, str)
            else (self.policy.name)
        )
        options: dict[str, Any] = {**super().options(), "policy": policy}
        if self.ablate:
            options["ablate"] = list(self.ablate)
        if self.policy == ORACLE:
            options["oracle_horizon"] = self.oracle_horizon
        return options

    def _check_policy(self, spec: Policy | str) -> Policy | None:
        """The resolved policy (None for the oracle); UserInputError for unusable settings."""
        from dynakrag.policy.learned import LearnedPolicy
        from dynakrag.policy.registry import resolve_policy

        resolved = None if spec == ORACLE else resolve_policy(spec)
        if "continuation" in self.ablate and not isinstance(resolved, LearnedPolicy):
            raise UserInputError(
                "the continuation ablation needs a learned policy (a trained .npz file), "
                f"not {spec if isinstance(spec, str) else spec.name!r}"
            )
        return resolved

    def configured(self, cfg: Configuration) -> Configuration:
        """The run's configuration under the ablations."""
        if "compression" in self.ablate:
            return cfg.merged({"compression": "passthrough"})
        return cfg

    def make_policy(
        self,
        cfg: Configuration,
        searcher: Searcher,
        llm: LLMClient,
        gold: Sequence[Any] | None = None,
    ) -> Policy:
        """The policy of one question, with the ablations applied."""
        from dynakrag.actions.common import Resources
        from dynakrag.eval.oracle import OraclePolicy
        from dynakrag.policy.ablation import WithoutActions
        from dynakrag.policy.learned import LearnedPolicy

        spec = self.policy if self.policy is not None else cfg.policy
        removed = {"sufficiency_check"} if "sufficiency" in self.ablate else set()
        if spec == ORACLE:
            if not gold:
                raise UserInputError(
                    "the oracle policy needs the question's gold support (evaluation only)"
                )
            return OraclePolicy(
                gold, Resources(searcher, llm), horizon=self.oracle_horizon, without=removed
            )
        policy = self._check_policy(spec)
        assert policy is not None
        if "continuation" in self.ablate and isinstance(policy, LearnedPolicy):
            policy = policy.with_ablated_continuation()
        return WithoutActions(policy, removed) if removed else policy

    def run(
        self,
        question: str,
        searcher: Searcher,
        llm: LLMClient,
        cfg: Configuration,
        *,
        gold: Sequence[Any] | None = None,
    ) -> MethodResult:
        """Answer ``question``; ``gold`` is read by the oracle policy only."""
        from dynakrag.eval.oracle import OraclePolicy
        from dynakrag.graph.builder import build_graph

        cfg = self.configured(cfg)
        client: LLMClient = AnswerlessLLM(llm) if self.no_answer else llm
        policy = self.make_policy(cfg, searcher, client, gold)
        graph = build_graph(searcher, policy=policy, configuration=cfg, llm=client)
        final = graph.invoke({"question": question})
        trace = list(final.get("trace", []))
        evidence = [
            {"id": doc["id"], "title": doc.get("title", ""), "text": doc.get("text", "")}
            for doc in final.get("evidence", [])
        ]
        details: dict[str, Any] = {
            "sub_questions": list(final.get("sub_questions", [])),
            "accounting": dict(final.get("accounting", {})),
            "trace": [_compact_step(entry) for entry in trace],
        }
        if isinstance(policy, OraclePolicy):
            details["oracle"] = policy.stats()  # look-ahead cost, outside the accounting
        return MethodResult(
            prediction="" if self.no_answer else str(final.get("answer", "")),
            evidence=evidence,
            actions=[entry["action"] for entry in trace],
            retrieval_calls=int(final.get("retrieval_calls", 0)),
            llm_calls=int(final.get("llm_calls", 0)),
            prompt_tokens=int(final.get("prompt_tokens", 0)),
            completion_tokens=int(final.get("completion_tokens", 0)),
            details=details,
        )


def _compact_step(entry: dict[str, Any]) -> dict[str, Any]:
    """A trace entry without the per-step score table (kept: action, valid set, query, added)."""
    return {key: value for key, value in entry.items() if key != "scores"}


# --------------------------------------------------------------------------------------------
# Registry
# --------------------------------------------------------------------------------------------

METHODS: dict[str, type[Method]] = {
    NaiveMethod.name: NaiveMethod,
    IRCoTMethod.name: IRCoTMethod,
    DecomposeMethod.name: DecomposeMethod,
    DynakragMethod.name: DynakragMethod,
}
"""Methods by name: a new baseline is one more entry (its class's ``name``)."""

# DS-RAG and its paper baselines register themselves in METHODS when imported (last: that
# module builds on the classes above).
from dynakrag.eval import dsrag_methods  # noqa: E402, F401


def get_method(name: str | Method, **options: Any) -> Method:
    """A method by name (``options`` go to its constructor; None values are left out)."""
    if isinstance(name, Method):
        return name
    cls = METHODS.get(name)
    if cls is None:
        raise UserInputError(f"unknown method {name!r}; choose one of {', '.join(METHODS)}")
    kwargs = {key: value for key, value in options.items() if value is not None}
    try:
        return cls(**kwargs)
    except TypeError as exc:
        raise UserInputError(f"method {name!r}: {exc}") from None

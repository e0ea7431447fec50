"""What every evaluation method shares: the interface, its result, the usage tally, retrieval
helpers and the final reader.

A method answers one question with a searcher and an :class:`~dynakrag.llm.client.LLMClient`
and reports what it did: ``Method.run(question, searcher, llm, cfg) -> MethodResult``. Methods
never see gold data; the one exception is a gold-aware upper bound (``Method.needs_gold``),
whose ``run`` also gets ``gold=`` from the runner. Every method can skip its final answer step
(``no_answer``: retrieval and control metrics only); :func:`final_answer` then makes no call.
"""

from __future__ import annotations

import threading
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, TypedDict

from dynakrag import prompts
from dynakrag.actions.grounding import AbstentionVerdict, abstention_before_answer, check_answer
from dynakrag.configuration import Configuration, RetrieverName
from dynakrag.llm.answers import parse_final_answer
from dynakrag.llm.client import NO_USAGE, LLMClient, Messages, Usage
from dynakrag.retrieval.base import Searcher


class Evidence(TypedDict):
    """One passage a baseline read: its id, title and text (a
    :class:`~dynakrag.prompts.PromptPassage`, so the prompts take it as it is)."""

    id: str
    title: str
    text: str


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
    abstained: bool = False
    """The method gave no answer because the evidence does not support one (``prediction``
    is then empty; setting ``abstain``)."""
    abstain_reason: str = ""
    answer_citations: list[str] = field(default_factory=list)
    """Ids of the evidence passages the answer rests on."""


class Method(ABC):
    """One way of answering a question from a searcher and an LLM."""

    name: ClassVar[str] = "method"
    default_retriever: ClassVar[RetrieverName | None] = None
    """The retriever the method runs with when the user chose none (no ``--retriever``, no
    ``DYNAKRAG_RETRIEVER``); None: the configuration's default. See :func:`method_configuration`."""

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


def method_configuration(method: Method, cfg: Configuration) -> Configuration:
    """``cfg`` with the method's :attr:`~Method.default_retriever` where the user set no
    retriever (neither a flag nor the environment put ``retriever`` in ``cfg``'s set fields)."""
    if method.default_retriever is None or "retriever" in cfg.model_fields_set:
        return cfg
    return cfg.merged({"retriever": method.default_retriever})


class Tally:
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
        self,
        prediction: str,
        evidence: list[Evidence],
        actions: list[str],
        verdict: AbstentionVerdict | None = None,
        **details: Any,
    ) -> MethodResult:
        """The method's result; ``verdict``: the grounding check's (:func:`grounded_answer`)."""
        return MethodResult(
            prediction=prediction,
            evidence=evidence,
            actions=actions,
            retrieval_calls=self.retrieval_calls,
            llm_calls=self.usage.llm_calls,
            prompt_tokens=self.usage.prompt_tokens,
            completion_tokens=self.usage.completion_tokens,
            details=details,
            abstained=verdict.abstained if verdict is not None else False,
            abstain_reason=verdict.reason if verdict is not None else "",
            answer_citations=list(verdict.citations) if verdict is not None else [],
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
    """The reply's answer as ``stop_answer`` reads it (:func:`parse_final_answer`); an
    unusable reply gives "insufficient evidence"."""
    return parse_final_answer(reply) or prompts.INSUFFICIENT_EVIDENCE


def is_answer_prompt(messages: Messages) -> bool:
    """Whether ``messages`` is the final-answer prompt (:func:`prompts.answer_messages`)."""
    return prompts.task_of(messages) == prompts.ANSWER


def final_answer(
    method: Method,
    question: str,
    evidence: list[Evidence],
    llm: LLMClient,
    tally: Tally,
    actions: list[str],
    facts: Sequence[tuple[str, str]] = (),
) -> str:
    """The shared reader: ``answer_messages`` over the evidence ("" when ``no_answer``)."""
    if method.no_answer:
        return ""
    actions.append("answer")
    if not evidence:
        return prompts.INSUFFICIENT_EVIDENCE  # as stop_answer: no passages, no model call
    reply, usage = llm.text(
        prompts.answer_messages(question, evidence, facts), max_tokens=prompts.ANSWER_MAX_TOKENS
    )
    tally.add(usage)
    return clean_answer(reply)


def grounded_answer(
    method: Method,
    question: str,
    evidence: list[Evidence],
    llm: LLMClient,
    tally: Tally,
    actions: list[str],
    cfg: Configuration,
) -> tuple[str, AbstentionVerdict | None]:
    """:func:`final_answer` under the graph's abstention rules (setting ``abstain``): the same
    checks as ``stop_answer`` (:mod:`dynakrag.actions.grounding`) before the answer (no call
    when they abstain) and on it, so a baseline and the graph abstain alike. The prediction
    is ``""`` when it abstains; the verdict is None with ``abstain`` off or ``no_answer``."""
    if method.no_answer or not cfg.abstain:
        return final_answer(method, question, evidence, llm, tally, actions), None
    early = abstention_before_answer(question, evidence)
    if early is not None:
        return "", early
    answer = final_answer(method, question, evidence, llm, tally, actions)
    verdict = check_answer(question, answer, evidence, llm=llm)
    tally.add(verdict.usage)
    return ("" if verdict.abstained else answer), verdict

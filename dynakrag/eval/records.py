"""An evaluation's typed records: one question's :class:`EvalRecord` and a run's
:class:`EvalSummary`, from the producer to the file.

:func:`dynakrag.eval.runner.question_record` builds one :class:`EvalRecord` per question; the
runner, its Dask workers (:mod:`dynakrag.eval.workers`) and
:func:`~dynakrag.eval.runner.summarize_records` pass that model on, and it becomes JSON only
where it is written: the journal beside ``--out`` (``<out>.partial.jsonl``, a line as each
question finishes) and the result's ``"questions"`` (:meth:`EvalRecord.to_json`). A resumed
run reads the journal's lines back through :func:`check_eval_record`, so a line that is JSON
but not such a record fails with one line naming the file and the line instead of surfacing
later as a ``KeyError`` in the summary.

The written form is unchanged from the plain dicts the runner wrote before the model carried
the record: the same keys in the same order with the same values (a record read back is
written back as it was read, keys it lacked left out), so committed results and journals
still read and resume.
"""

from __future__ import annotations

from typing import Any, TypedDict

from pydantic import BaseModel, ConfigDict

__all__ = ["EvalRecord", "EvalResult", "EvalSummary", "EvidenceItem", "check_eval_record"]


class EvidenceItem(BaseModel):
    """One passage of a question's final evidence."""

    model_config = ConfigDict(extra="allow")

    id: str
    title: str = ""
    text: str = ""


class EvalRecord(BaseModel):
    """One question's record: what the method did, the gold data and its metrics.

    Keys it does not know are kept (``extra="allow"``); the abstention keys, which journals
    written before abstention lack, are optional. A metric is None where it was not measured
    (the answer metrics of a ``no_answer`` run). The fields' order is the written keys' order.
    """

    # NaN and infinities stay numbers in the JSON form, as json.dumps writes them.
    model_config = ConfigDict(extra="allow", ser_json_inf_nan="constants")

    id: str | int
    """The example's id (its row number for the DS-RAG datasets)."""
    question: str
    prediction: str
    gold_answers: list[str]
    gold_support: list[str]
    gold_sets: list[list[str]]
    evidence: list[EvidenceItem]
    actions: list[str]
    retrieval_calls: int
    llm_calls: int
    prompt_tokens: int
    completion_tokens: int
    latency_s: float
    support_recall: float | None
    context_precision: float | None
    context_recall: float | None
    context_f1: float | None
    num_chunks: int
    em: float | None
    f1: float | None
    anls: float | None
    abstained: bool | None = None
    abstain_reason: str = ""
    answer_citations: list[str] = []
    details: dict[str, Any]
    """Method-specific extras (sub-questions, reasoning, the graph's trace), written as they
    are (a value JSON has no form for by its ``str``)."""

    def to_json(self) -> dict[str, Any]:
        """The record as it is written (a journal line's value, an entry of the result's
        ``"questions"``): the fields set, in order, then unknown keys read back."""
        return self.model_dump(mode="json", exclude_unset=True, fallback=str)


class EvalSummary(BaseModel):
    """A run's per-question means (:func:`~dynakrag.eval.runner.summarize_records`), the
    result's ``"summary"``. A mean is None where no question has a number for it (the answer
    metrics and ``abstain_rate`` of a ``no_answer`` run)."""

    model_config = ConfigDict(ser_json_inf_nan="constants")

    support_recall: float | None
    em: float | None
    f1: float | None
    context_precision: float | None
    context_recall: float | None
    context_f1: float | None
    anc: float | None
    """Mean ``num_chunks``."""
    anls: float | None
    retrieval_calls: float | None
    llm_calls: float | None
    prompt_tokens: float | None
    completion_tokens: float | None
    latency_s: float | None
    abstain_rate: float | None
    """Mean ``abstained``: the share of questions given no answer."""
    sr_per_retrieval_call: float | None
    """Mean support recall / mean retrieval calls (None without retrievals)."""
    n: int
    """How many questions."""

    def to_json(self) -> dict[str, Any]:
        """The summary as it is written (the result's ``"summary"``)."""
        return self.model_dump(mode="json")


class EvalResult(TypedDict):
    """A run's result as :func:`~dynakrag.eval.runner.evaluate` returns it and writes it to
    ``--out``, in its JSON form (the reports and the comparison table read it so)."""

    meta: dict[str, Any]
    """The method and its options, the data, settings, models, versions and timings."""
    summary: dict[str, Any]
    """:meth:`EvalSummary.to_json`."""
    questions: list[dict[str, Any]]
    """:meth:`EvalRecord.to_json` of each question, in the split's order."""


def check_eval_record(record: Any) -> EvalRecord:
    """``record`` (a journal line's value, a result's question) read as an
    :class:`EvalRecord`; ``ValueError`` (pydantic's ``ValidationError``) saying what is
    wrong."""
    return EvalRecord.model_validate(record)

"""The eval question record's model: what the runner writes validates, a bad record is named,
and the written form is byte for byte the one the runner wrote as plain dicts.

``tests/data/eval_records_v1.jsonl`` was written by the runner before the records were typed
(``question_record`` returned a dict; one line a case below, as ``json.dumps(...,
ensure_ascii=False, default=str)`` writes a journal line, then the summary of the three):
the typed records must write the very same bytes, and read back from them.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from dynakrag.data.datasets.examples import QAExample
from dynakrag.errors import one_line
from dynakrag.eval.methods.base import MethodResult
from dynakrag.eval.records import EvalRecord, EvalSummary, check_eval_record
from dynakrag.eval.runner import DERIVED_KEYS, SUMMARY_KEYS, question_record, summarize_records

BEFORE = Path(__file__).parents[1] / "data" / "eval_records_v1.jsonl"

HOTPOT = QAExample(
    id="q1",
    question="Where was Ada born?",
    answers=("Marsk",),
    support=("ada", "bel"),
    passages=(),
    dataset="hotpotqa",
    row=0,
    split="eval",
)
DSRAG = QAExample(
    id="dsrag-ranking-7",
    question="Which city is larger, Zürich or Genève?",
    answers=("Zürich",),
    support=("c#2", "c#9"),
    passages=(),
    dataset="dsrag-ranking",
    row=7,
    split="eval",
    meta={"gold_groups": [["c#9", "c#2"], ["c#4"]]},
)
ANSWERED = MethodResult(
    prediction="Marsk",
    evidence=[
        {"id": "ada", "title": "Ada", "text": "Ada was born in Marsk."},
        {"id": "cal", "text": "Cal was not."},
    ],
    actions=["retrieve", "answer"],
    retrieval_calls=1,
    llm_calls=1,
    prompt_tokens=40,
    completion_tokens=2,
    details={"reasoning": ["Ada: Marsk"], "queries": ("Ada born",), "scores": {"ada": 0.5}},
)
ABSTAINED = MethodResult(
    prediction="",
    evidence=[{"id": "c#2", "title": "Zürich", "text": "Zürich has 420,000 people."}],
    actions=["epqd", "retrieve_per_sub_question", "dics"],
    retrieval_calls=3,
    llm_calls=4,
    prompt_tokens=1234,
    completion_tokens=56,
    details={"sub_questions": ["How large is Zürich?"], "core": None, "candidates": 12},
    abstained=True,
    abstain_reason="The evidence names no population of Genève.",
    answer_citations=["c#2"],
)
CASES: dict[str, tuple[QAExample, MethodResult, float, bool]] = {
    "answered": (HOTPOT, ANSWERED, 0.25, False),
    "no_answer": (HOTPOT, ANSWERED, 1.234567, True),
    "abstained_dsrag": (DSRAG, ABSTAINED, 12.3456789, False),
}


def line(value: Any) -> str:
    """``value`` as a journal line writes it."""
    return json.dumps(value, ensure_ascii=False, default=str)


def before() -> dict[str, str]:
    """The old runner's lines by case."""
    lines = BEFORE.read_text(encoding="utf-8").splitlines()
    return {json.loads(text)["case"]: text for text in lines}


def records() -> dict[str, EvalRecord]:
    return {
        name: question_record(example, result, latency, no_answer=no_answer)
        for name, (example, result, latency, no_answer) in CASES.items()
    }


@pytest.mark.parametrize("case", list(CASES))
def test_a_record_writes_the_bytes_the_dict_runner_wrote(case: str) -> None:
    record = records()[case]
    assert line({"case": case, "record": record.to_json()}) == before()[case]


@pytest.mark.parametrize("case", list(CASES))
def test_a_written_record_reads_back_and_writes_the_same_bytes(case: str) -> None:
    written = json.loads(before()[case])["record"]
    read = check_eval_record(written)
    assert read.to_json() == records()[case].to_json()
    assert line(read.to_json()) == line(written)
    indented = json.dumps(written, ensure_ascii=False, indent=2, default=str)  # --out's form
    assert json.dumps(read.to_json(), ensure_ascii=False, indent=2, default=str) == indented


def test_the_summary_writes_the_bytes_the_dict_runner_wrote() -> None:
    summary = summarize_records(list(records().values()))
    assert line({"case": "summary", "summary": summary.to_json()}) == before()["summary"]
    assert tuple(EvalSummary.model_fields) == (*SUMMARY_KEYS, *DERIVED_KEYS, "n")


def test_a_record_read_back_keeps_what_it_lacked_and_what_it_added() -> None:
    """An older journal's record (no abstention keys, evidence without titles) and a key the
    model does not know: written back exactly as read, not filled with defaults."""
    old = json.loads(before()["answered"])["record"]
    for key in ("abstained", "abstain_reason", "answer_citations"):
        del old[key]
    old["evidence"] = [{"id": "ada"}]
    old["note"] = "kept"
    read = check_eval_record(old)
    assert read.abstained is None and read.evidence[0].title == ""
    assert line(read.to_json()) == line(old)


def test_values_json_has_no_form_for_are_written_as_json_dumps_wrote_them() -> None:
    """NaN and infinities as JSON's constants, any other value by its ``str`` (the runner
    wrote with ``default=str``)."""
    old = json.loads(before()["answered"])["record"]
    details = {"score": float("inf"), "kind": object, "missing": float("nan")}
    record = check_eval_record({**old, "latency_s": float("nan"), "details": details})
    assert line(record.to_json()) == line({**old, "latency_s": float("nan"), "details": details})
    assert '"latency_s": NaN' in line(record.to_json())


@pytest.mark.parametrize("no_answer", [False, True])
def test_what_the_runner_writes_reads_back_as_an_eval_record(no_answer: bool) -> None:
    record = question_record(HOTPOT, ANSWERED, 0.25, no_answer=no_answer)
    read = check_eval_record(json.loads(line(record.to_json())))  # as a journal line gives it
    assert read.id == "q1" and read.evidence[0].id == "ada"
    assert list(EvalRecord.model_fields) == list(record.to_json())  # every key, in order
    assert (read.em is None) == no_answer


def test_a_bad_record_reads_as_one_line_naming_the_fields() -> None:
    record = question_record(HOTPOT, ANSWERED, 0.25).to_json()
    del record["prediction"]
    record["llm_calls"] = "many"
    with pytest.raises(ValidationError) as refused:
        check_eval_record(record)
    assert one_line(refused.value) == (
        "prediction: Field required; llm_calls: Input should be a valid integer, unable to "
        "parse string as an integer"
    )


def test_unknown_keys_are_kept_and_older_journals_lack_the_abstention_keys() -> None:
    record = question_record(HOTPOT, ANSWERED, 0.25).to_json()
    for key in ("abstained", "abstain_reason", "answer_citations"):
        del record[key]
    read = check_eval_record({**record, "note": "kept"})
    assert read.abstained is None and read.model_extra == {"note": "kept"}

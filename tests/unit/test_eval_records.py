"""The eval question record's model: what the runner writes validates, a bad record is named."""

from __future__ import annotations

import json

import pytest
from pydantic import ValidationError

from dynakrag.data.datasets.examples import QAExample
from dynakrag.errors import one_line
from dynakrag.eval.methods.base import MethodResult
from dynakrag.eval.records import EvalRecord, check_eval_record
from dynakrag.eval.runner import question_record

EXAMPLE = QAExample(
    id="q1",
    question="Where was Ada born?",
    answers=("Marsk",),
    support=("ada",),
    passages=(),
    dataset="hotpotqa",
    row=0,
    split="eval",
)
RESULT = MethodResult(
    prediction="Marsk",
    evidence=[{"id": "ada", "title": "Ada", "text": "Ada was born in Marsk."}],
    actions=["retrieve", "answer"],
    retrieval_calls=1,
    llm_calls=1,
    prompt_tokens=40,
    completion_tokens=2,
)


@pytest.mark.parametrize("no_answer", [False, True])
def test_what_the_runner_writes_reads_back_as_an_eval_record(no_answer: bool) -> None:
    record = question_record(EXAMPLE, RESULT, 0.25, no_answer=no_answer)
    read = check_eval_record(json.loads(json.dumps(record)))  # as a journal line gives it back
    assert read.id == "q1" and read.evidence[0].id == "ada"
    assert set(EvalRecord.model_fields) == set(record)  # the model names every written key
    assert (read.em is None) == no_answer


def test_a_bad_record_reads_as_one_line_naming_the_fields() -> None:
    record = question_record(EXAMPLE, RESULT, 0.25)
    del record["prediction"]
    record["llm_calls"] = "many"
    with pytest.raises(ValidationError) as refused:
        check_eval_record(record)
    assert one_line(refused.value) == (
        "prediction: Field required; llm_calls: Input should be a valid integer, unable to "
        "parse string as an integer"
    )


def test_unknown_keys_are_kept_and_older_journals_lack_the_abstention_keys() -> None:
    record = question_record(EXAMPLE, RESULT, 0.25)
    for key in ("abstained", "abstain_reason", "answer_citations"):
        del record[key]
    read = check_eval_record({**record, "note": "kept"})
    assert read.abstained is None and read.model_extra == {"note": "kept"}

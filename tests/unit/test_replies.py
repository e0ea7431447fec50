"""The reply models (dynakrag.prompts.replies): the schema sent and how leniently replies read."""

from __future__ import annotations

import json
from typing import Any

import pytest
from langchain_core.language_models.fake_chat_models import FakeListChatModel

from dynakrag import prompts
from dynakrag.llm.client import LLMClient

# The analysis schema as it was written by hand before the models: the disk LLM cache keys a
# request on it, so the text made from the model must stay exactly this.
HAND_WRITTEN_ANALYSIS_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "sub_questions": {
            "type": "array",
            "minItems": 1,
            "maxItems": 12,
            "items": {
                "type": "object",
                "properties": {
                    "entity": {"type": "string"},
                    "asks": {"type": "string"},
                    "details": {"type": "array", "items": {"type": "string"}, "maxItems": 6},
                    "question": {"type": "string"},
                },
                "required": ["entity", "asks", "details", "question"],
                "additionalProperties": False,
            },
        }
    },
    "required": ["sub_questions"],
    "additionalProperties": False,
}


def test_the_analysis_schema_from_its_model_is_the_text_sent_before() -> None:
    assert json.dumps(prompts.ANALYSIS_SCHEMA) == json.dumps(HAND_WRITTEN_ANALYSIS_SCHEMA)
    assert prompts.AnalysisReply.constrained and not prompts.SubQuestionsReply.constrained


def test_items_of_the_wrong_kind_read_as_none_or_empty() -> None:
    subs = prompts.SubQuestionsReply.model_validate({"sub_questions": [" a ", 2, {}, " "]})
    assert subs.sub_questions == [" a ", "2", None, " "] and subs.texts() == ["a", "2"]
    analysis = prompts.AnalysisReply.model_validate(
        {"sub_questions": ["x", {"entity": 3, "details": "y", "extra": 1}]}
    )
    assert analysis.sub_questions[0] is None
    item = analysis.sub_questions[1]
    assert item is not None and (item.entity, item.asks, item.details) == ("", "", [])
    triples = prompts.TriplesReply.model_validate({"triples": [1, {"source": "A"}]})
    assert triples.triples[0] is None and triples.triples[1] == prompts.Triple(source="A")
    assert prompts.AnswerReply.model_validate({"answer": ["B", "C"]}).answer == "B"
    answers = prompts.AnswersReply.model_validate({"answers": "not a list"})
    assert answers.answers == [] and answers.answer(0) is None


@pytest.mark.parametrize(
    ("model", "reply"),
    [
        (prompts.SubQuestionsReply, {"questions": ["a"]}),
        (prompts.AnalysisReply, {"sub_questions": "a"}),
        (prompts.AnswersReply, {"answers": None}),
        (prompts.AnswerReply, {}),
        (prompts.SupportedReply, {"supported": "true"}),
    ],
)
def test_a_reply_of_the_wrong_shape_is_no_reply(model: type[prompts.Reply], reply: dict) -> None:
    client = LLMClient(FakeListChatModel(responses=[json.dumps(reply)]), json_mode=False)
    parsed, usage = client.structured([("human", "hi")], model)
    assert parsed is None and usage.llm_calls == 1 and client.failed_requests == 0

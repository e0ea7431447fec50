"""What each JSON prompt's reply is: pydantic models the LLM client validates a reply into.

:meth:`dynakrag.llm.client.LLMClient.structured` asks with a prompt below and returns the
reply as its model, or None when the reply is not JSON or not of the model's shape (every
caller falls back the same way for both). A model's JSON schema comes from the model
(:meth:`Reply.reply_schema`); a model with ``constrained = True`` (the question analysis) is
sent it as ``response_format``, which llama.cpp turns into a grammar; the other prompts give
the format in their text.

The models read a reply as leniently as the hand-written readers they replace did, so a
cached reply gives the same result: a list item that is not what the prompt asks for is kept
as None (the caller drops or counts it), a field of the wrong kind is read as empty; only a
reply without the asked list (or value) is invalid.
"""

from __future__ import annotations

import copy
import functools
from typing import Annotated, Any, ClassVar

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, model_validator
from pydantic.json_schema import GenerateJsonSchema, JsonSchemaValue, SkipJsonSchema
from pydantic_core import core_schema

from dynakrag.prompts.dsrag import ANALYSIS_MAX_DETAILS, ANALYSIS_MAX_ITEMS


class _PlainSchema(GenerateJsonSchema):
    """JSON schema without titles or descriptions: only what constrains the reply, its keys in
    the order the model gives them (the request's text stays what it was)."""

    def sort(self, value: JsonSchemaValue, parent_key: str | None = None) -> JsonSchemaValue:
        return value

    def field_title_should_be_set(self, schema: Any) -> bool:
        return False

    def model_schema(self, schema: core_schema.ModelSchema) -> JsonSchemaValue:
        out = super().model_schema(schema)
        out.pop("title", None)
        out.pop("description", None)  # a model's docstring is for readers, not the grammar
        return out


def _inline(node: Any, defs: dict[str, Any]) -> Any:
    """``node`` with every ``$ref`` to ``#/$defs/...`` replaced by its definition."""
    if isinstance(node, dict):
        ref = node.get("$ref")
        if isinstance(ref, str) and ref.startswith("#/$defs/"):
            return _inline(defs[ref.removeprefix("#/$defs/")], defs)
        return {key: _inline(value, defs) for key, value in node.items()}
    if isinstance(node, list):
        return [_inline(value, defs) for value in node]
    return node


class Reply(BaseModel):
    """A JSON reply of one prompt."""

    constrained: ClassVar[bool] = False
    """Whether the schema is sent with the request (a grammar on llama.cpp)."""

    @classmethod
    def reply_schema(cls) -> dict[str, Any]:
        """The reply's JSON schema, self-contained (no ``$defs``) and without titles."""
        return copy.deepcopy(_schema_of(cls))


@functools.cache
def _schema_of(model: type[Reply]) -> dict[str, Any]:
    schema = model.model_json_schema(schema_generator=_PlainSchema)
    defs = schema.pop("$defs", {})
    return _inline(schema, defs)


# ------------------------------------------------------------------------------ item readers


def _text_or_none(value: Any) -> str | None:
    """A JSON string or number as text (``5`` reads ``"5"``); None for anything else."""
    return str(value) if isinstance(value, str | int | float) else None


def _string_or_empty(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _object_or_none(value: Any) -> Any:
    return value if isinstance(value, dict) else None


Text = Annotated[str | None, BeforeValidator(_text_or_none)]
"""A list item read as text; None when it is not a string or a number."""


# ------------------------------------------------------------------------------ the replies


class SubQuestionsReply(Reply):
    """``{"sub_questions": [...]}``: the decomposition, EPQD and multi-query prompts."""

    sub_questions: list[Text]

    def texts(self) -> list[str] | None:
        """The non-empty sub-questions, stripped; None when there is none."""
        cleaned = [text.strip() for text in self.sub_questions if text is not None]
        return [text for text in cleaned if text] or None


class EntitiesReply(Reply):
    """``{"entities": [...]}``: step 1 of the DS-RAG question graph."""

    entities: list[Text]


class Triple(BaseModel):
    """One pair of entities a relation type connects; a missing field reads ``""``."""

    source: Annotated[str, BeforeValidator(str)] = ""
    relation: Annotated[str, BeforeValidator(str)] = ""
    target: Annotated[str, BeforeValidator(str)] = ""


class TriplesReply(Reply):
    """``{"triples": [{"source", "relation", "target"}]}``: step 2 of the question graph."""

    triples: list[Annotated[Triple | None, BeforeValidator(_object_or_none)]]


class AnalysisItem(BaseModel):
    """One entity the question asks about (:mod:`dynakrag.dsrag.extraction` repairs it)."""

    # Extra keys are ignored when read; the grammar allows none.
    model_config = ConfigDict(json_schema_extra={"additionalProperties": False})

    entity: Annotated[str, BeforeValidator(_string_or_empty)]
    asks: Annotated[str, BeforeValidator(_string_or_empty)]
    # Bounded by the grammar only: an unconstrained model's longer list is cut by the caller.
    details: Annotated[
        list[Annotated[str, BeforeValidator(_string_or_empty)]],
        BeforeValidator(lambda value: value if isinstance(value, list) else []),
        Field(json_schema_extra={"maxItems": ANALYSIS_MAX_DETAILS}),
    ]
    question: Annotated[str, BeforeValidator(_string_or_empty)]

    @model_validator(mode="before")
    @classmethod
    def _missing_fields_read_empty(cls, value: Any) -> Any:
        """A missing field reads as empty (the schema still requires each one)."""
        if isinstance(value, dict):
            return {**dict.fromkeys(cls.model_fields), **value}
        return value


def _bounds_before_items(schema: dict[str, Any]) -> None:
    """The item bounds, written before ``items`` as the schema has always been sent."""
    items = schema.pop("items")
    schema.update(minItems=1, maxItems=ANALYSIS_MAX_ITEMS, items=items)


class AnalysisReply(Reply):
    """``{"sub_questions": [{"entity", "asks", "details", "question"}]}``: the DS-RAG question
    analysis, the one reply whose schema is sent."""

    constrained: ClassVar[bool] = True
    model_config = ConfigDict(json_schema_extra={"additionalProperties": False})

    sub_questions: Annotated[
        list[Annotated[AnalysisItem | SkipJsonSchema[None], BeforeValidator(_object_or_none)]],
        Field(json_schema_extra=_bounds_before_items),
    ]
    """An item that is not an object is None (noted and dropped by the caller)."""


class AnswerReply(Reply):
    """``{"answer": "..."}``: one hop of the chain; a list gives its first item."""

    answer: str | None

    @model_validator(mode="before")
    @classmethod
    def _first_of_a_list(cls, value: Any) -> Any:
        if isinstance(value, dict) and "answer" in value:
            answer = value["answer"]
            if isinstance(answer, list):
                answer = answer[0] if answer else None
            return {**value, "answer": None if answer is None else str(answer)}
        return value


def _answers(value: Any) -> Any:
    """A present but non-list ``answers`` reads as no answers (null is no reply at all)."""
    return value if value is None or isinstance(value, list) else []


class AnswersReply(Reply):
    """``{"answers": [...]}``: the sufficiency check's sub-answers, in order; an item is its
    text (``str`` of any JSON value), None for null."""

    answers: Annotated[
        list[Annotated[str | None, BeforeValidator(lambda v: None if v is None else str(v))]],
        BeforeValidator(_answers),
    ]

    def answer(self, index: int) -> str | None:
        """The ``index``-th answer, None when the reply has none there."""
        return self.answers[index] if index < len(self.answers) else None


class SupportedReply(Reply):
    """``{"supported": true|false}``: the grounding check (only a JSON ``true`` confirms)."""

    supported: bool = Field(strict=True)


ANALYSIS_SCHEMA = AnalysisReply.reply_schema()
"""The question analysis's reply schema (sent as ``response_format``; llama.cpp decodes under
it). Its data is what the hand-written schema before it was, so cached replies still match."""

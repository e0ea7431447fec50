"""The prompts of DS-RAG (:mod:`dynakrag.dsrag`): EPQD decomposition, the question graph's
entities and relations, and the one-call question analysis.

The questions below are the user's own text (or sub-questions made from it), never retrieved
passages, so they are given plainly as the graph's decomposition prompt gives them.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from dynakrag.prompts.passages import few_shot_messages

EPQD_SYSTEM = (
    "You turn a question into sub-questions for document search. The question has been "
    "separated into numbered parts at its conjunctions and commas. For each separated part, "
    "complete the meaning of the sentence using the previous part of the current section. "
    "Preserve original terminology wherever possible, guaranteeing that each sub-sentence forms "
    "a grammatically complete sentence. The number of sub-sentences created must match the "
    "number of separated parts. Write every sub-sentence as a question, keep names exactly as "
    "written, do not repeat in one sub-question the details that belong to another part, and "
    "add nothing that is not in the original question. Reply with JSON only: "
    '{"sub_questions": ["...", "..."]}, one sub-question per part, in order.'
)
"""EPQD's instruction (DS-RAG, Table 4), with the reply format."""

EPQD_EXAMPLES: tuple[tuple[str, list[str], list[str]], ...] = (
    # Preserve context: a bare name gets the whole measure the question asks about.
    (
        'Which novel sold more copies in its first year, "The Salt Orchard" or "Glass Rivers"?',
        ["Which novel sold more copies in its first year", '"The Salt Orchard"', '"Glass Rivers"'],
        [
            "Which novel sold more copies in its first year?",
            'How many copies did "The Salt Orchard" sell in its first year?',
            'How many copies did "Glass Rivers" sell in its first year?',
        ],
    ),
    # Remove duplicated entities: a describing clause stays with its own person only.
    (
        "Who was born earlier, Ada Voss, who founded Kestrel Labs, or Tom Reyl?",
        ["Who was born earlier", "Ada Voss", "who founded Kestrel Labs", "Tom Reyl"],
        [
            "Who was born earlier?",
            "When was Ada Voss born?",
            "Did Ada Voss found Kestrel Labs?",
            "When was Tom Reyl born?",
        ],
    ),
    # Nothing outside the original question is added.
    (
        "In what city are the headquarters of Orbis Devices and Lumen Works?",
        ["In what city are the headquarters of Orbis Devices", "Lumen Works"],
        [
            "In what city are the headquarters of Orbis Devices?",
            "In what city are the headquarters of Lumen Works?",
        ],
    ),
)


def _epqd_request(question: str, parts: Sequence[str]) -> str:
    numbered = "\n".join(f"{i}. {part}" for i, part in enumerate(parts, start=1))
    return f"Original question: {question}\nSeparated parts ({len(parts)}):\n{numbered}\nJSON:"


def epqd_messages(question: str, parts: Sequence[str]) -> list[tuple[str, str]]:
    """Few-shot messages asking for one sub-question per separated part (EPQD)."""
    shots = (
        (_epqd_request(example, example_parts), json.dumps({"sub_questions": sub_questions}))
        for example, example_parts, sub_questions in EPQD_EXAMPLES
    )
    return few_shot_messages(EPQD_SYSTEM, shots, _epqd_request(question, parts))


def epqd_repair_messages(
    question: str, parts: Sequence[str], reply: Sequence[str]
) -> list[tuple[str, str]]:
    """The EPQD messages, the reply whose count was wrong, and a request for the right count."""
    return [
        *epqd_messages(question, parts),
        ("ai", json.dumps({"sub_questions": list(reply)})),
        (
            "human",
            f"That is {len(reply)} sub-questions, but there are {len(parts)} separated parts. "
            f"Write exactly {len(parts)} sub-questions, one for each part, in the same order. "
            "JSON only.",
        ),
    ]


DSRAG_ENTITY_SYSTEM = (
    "You list the entities of a question, in the order they appear. Entities are: the question "
    "word (who, what, which, when, where, how, or the first word of a yes/no question such as "
    "Is or Did), names of people, places, organisations and works, dates and numbers, quoted "
    "titles, and the attribute the question asks about (such as birth date, nationality or "
    "population). Copy each entity exactly as it is written in the question and add nothing "
    'that is not in it. Reply with JSON only: {"entities": ["...", "..."]}.'
)
"""Step 1 of the question graph (DS-RAG, Appendix A.1; written from the paper's text)."""

DSRAG_ENTITY_EXAMPLES: tuple[tuple[str, list[str]], ...] = (
    ("When was Ada Voss born?", ["When", "Ada Voss"]),
    (
        "What is the population of the city where Kestrel Labs was founded?",
        ["What", "population", "city", "Kestrel Labs"],
    ),
    ("Did Tom Reyl study at Velford Conservatory?", ["Did", "Tom Reyl", "Velford Conservatory"]),
)


def dsrag_entity_messages(sub_question: str) -> list[tuple[str, str]]:
    """Few-shot messages asking for the entities of one sub-question."""
    shots = (
        (f"Question: {example}\nJSON:", json.dumps({"entities": entities}))
        for example, entities in DSRAG_ENTITY_EXAMPLES
    )
    return few_shot_messages(DSRAG_ENTITY_SYSTEM, shots, f"Question: {sub_question}\nJSON:")


DSRAG_RELATION_SYSTEM = (
    "You link the entities of a question. You are given the question, its entities and its "
    "relation types (the words of the question between the entities). For each relation type, "
    "give the two entities it connects, the one mentioned first as source. Use only the given "
    "entities and relation types; never invent new ones. Reply with JSON only: "
    '{"triples": [{"source": "...", "relation": "...", "target": "..."}]}.'
)
"""Step 2 of the question graph (DS-RAG, Appendix A.2; written from the paper's text)."""

DSRAG_RELATION_EXAMPLES: tuple[tuple[str, list[str], list[str], list[dict[str, str]]], ...] = (
    (
        "What is the population of the city where Kestrel Labs was founded?",
        ["What", "population", "city", "Kestrel Labs"],
        ["is the", "of the", "where", "was founded"],
        [
            {"source": "What", "relation": "is the", "target": "population"},
            {"source": "population", "relation": "of the", "target": "city"},
            {"source": "city", "relation": "where", "target": "Kestrel Labs"},
        ],
    ),
)


def _relation_request(sub_question: str, entities: Sequence[str], relations: Sequence[str]) -> str:
    return (
        f"Question: {sub_question}\nEntities: {json.dumps(list(entities))}\n"
        f"Relation types: {json.dumps(list(relations))}\nJSON:"
    )


def dsrag_relation_messages(
    sub_question: str, entities: Sequence[str], relations: Sequence[str]
) -> list[tuple[str, str]]:
    """Few-shot messages asking for the entity pair of each relation type."""
    shots = (
        (
            _relation_request(example, example_entities, example_relations),
            json.dumps({"triples": triples}),
        )
        for example, example_entities, example_relations, triples in DSRAG_RELATION_EXAMPLES
    )
    request = _relation_request(sub_question, entities, relations)
    return few_shot_messages(DSRAG_RELATION_SYSTEM, shots, request)


# --------------------------------------------------------------------------------------------
# DS-RAG question analysis (dynakrag.dsrag.extraction): ONE schema-constrained call per question
# --------------------------------------------------------------------------------------------
# It replaces EPQD's call plus two calls per sub-question with one reply that names, for each
# entity the question asks about, the fact asked, the names describing it and a sub-question.
# The examples use invented names only. The question (and sub-questions) are the user's text
# or the controller's, never retrieved passages.

ANALYSIS_SYSTEM = (
    "You prepare a question for document search. List the entities whose facts the question "
    "needs: every person, place, organisation or work it asks about. For each one give "
    '"entity": its name copied exactly from the question; "asks": the fact needed about it, '
    'as a short noun phrase such as "birth date", "nationality", "founder" or "population"; '
    '"details": the other names the question uses to describe that entity, copied exactly '
    '(often none); "question": one complete question asking for that fact about that entity '
    "by name. A question that ranks or compares several entities gives one item for each of "
    'them, all with the same "asks": youngest, oldest or born first asks for the birth date '
    "of each; same or different country asks for the nationality of each. A clause that "
    "describes an entity goes into its details, never into an item of its own. When "
    "sub-questions are given, give one item for each of them, in order. Add nothing that is "
    'not in the question. Reply with JSON only: {"sub_questions": [{"entity": "...", '
    '"asks": "...", "details": ["..."], "question": "..."}]}.'
)
"""The DS-RAG question analysis (:mod:`dynakrag.dsrag.extraction`): targets of one question."""

ANALYSIS_MAX_TOKENS = 320
"""Completion budget of the analysis (about 50 tokens an entity; capped by llm_max_tokens)."""

ANALYSIS_MAX_ITEMS = 12
ANALYSIS_MAX_DETAILS = 6
"""Bounds of the reply's lists in its schema (:class:`dynakrag.prompts.replies.AnalysisReply`)."""


def _analysis_item(entity: str, asks: str, question: str, *details: str) -> dict[str, Any]:
    return {"entity": entity, "asks": asks, "details": list(details), "question": question}


ANALYSIS_EXAMPLES: tuple[tuple[str, list[str], list[dict[str, Any]]], ...] = (
    # A ranking in other words than "the earliest birth date": one item per person.
    (
        "Which of Ada Voss, Tom Reyl and Mira Quon is the youngest?",
        [],
        [
            _analysis_item("Ada Voss", "birth date", "When was Ada Voss born?"),
            _analysis_item("Tom Reyl", "birth date", "When was Tom Reyl born?"),
            _analysis_item("Mira Quon", "birth date", "When was Mira Quon born?"),
        ],
    ),
    # A comparison with a describing clause: the clause is a detail, not an item.
    (
        "Are Lena Hartwig, who trained at Velford Conservatory in Brenn, and Ovid Marsh "
        "citizens of the same country?",
        [],
        [
            _analysis_item(
                "Lena Hartwig",
                "nationality",
                "What is the nationality of Lena Hartwig?",
                "Velford Conservatory",
                "Brenn",
            ),
            _analysis_item("Ovid Marsh", "nationality", "What is the nationality of Ovid Marsh?"),
        ],
    ),
    # Given sub-questions: one item each, in order.
    (
        "In which city is the headquarters of the company that makes the Lumo Kettle?",
        [
            "Which company makes the Lumo Kettle?",
            "In which city is the headquarters of Brightwell Appliances?",
        ],
        [
            _analysis_item("Lumo Kettle", "maker", "Which company makes the Lumo Kettle?"),
            _analysis_item(
                "Brightwell Appliances",
                "headquarters city",
                "In which city is the headquarters of Brightwell Appliances?",
            ),
        ],
    ),
)


def _analysis_request(question: str, sub_questions: Sequence[str]) -> str:
    lines = [f"Question: {question}"]
    if sub_questions:
        lines.append("Sub-questions:")
        lines += [f"{i}. {q}" for i, q in enumerate(sub_questions, start=1)]
    return "\n".join([*lines, "JSON:"])


def analysis_messages(question: str, sub_questions: Sequence[str] = ()) -> list[tuple[str, str]]:
    """Few-shot messages asking for the entities a question asks about, each with the fact
    asked, its describing names and one sub-question (optionally aligned to ``sub_questions``)."""
    # Compact JSON: every token of the examples is read again at each call.
    shots = (
        (
            _analysis_request(example, example_subs),
            json.dumps({"sub_questions": items}, separators=(",", ":")),
        )
        for example, example_subs, items in ANALYSIS_EXAMPLES
    )
    return few_shot_messages(ANALYSIS_SYSTEM, shots, _analysis_request(question, sub_questions))

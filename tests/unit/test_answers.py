"""Answer-line cleaning: one module, the outputs each former copy gave on the same replies."""

from __future__ import annotations

import pytest

from dynakrag import prompts
from dynakrag.eval.methods.base import clean_answer
from dynakrag.llm.answers import (
    parse_final_answer,
    parse_reasoned_answer,
    parse_short_answer,
    strip_answer_label,
)

# (reply, parse_final_answer: stop_answer / eval methods, parse_short_answer: light routing
# tier, parse_reasoned_answer: heavy routing tier). The rows where the columns differ are the
# two label rules at work: strict for the reader, tolerant for the routing tiers.
CASES = [
    ("Answer: Oslo", "Oslo", "Oslo", "Oslo"),
    ("ANSWER:Oslo", "Oslo", "Oslo", "Oslo"),
    ("\n\nAnswer: Oslo", "Oslo", "Oslo", "Oslo"),
    ('  answer:  "Oslo"  \nmore', "Oslo", 'answer:  "Oslo"  \nmore', '"Oslo"'),
    ('"Oslo"', "Oslo", '"Oslo"', None),
    ("Oslo\nAnswer: Bergen", "Oslo", "Oslo\nAnswer: Bergen", "Bergen"),
    ("Answer: Oslo\nbecause", "Oslo", "Answer: Oslo\nbecause", "Oslo"),
    ("Answer: A\nAnswer: B", "A", "Answer: A\nAnswer: B", "B"),
    ("Final answer: Oslo", "Final answer: Oslo", "Oslo", "Oslo"),
    ("Answer : Oslo", "Answer : Oslo", "Oslo", "Oslo"),
    ("Answer：Oslo", "Answer：Oslo", "Oslo", "Oslo"),
    ("**Answer**: Oslo", "**Answer**: Oslo", "Oslo", "Oslo"),
    ("**Answer:** Oslo", "**Answer:** Oslo", "** Oslo", "Oslo"),
    ("Answer: **Oslo**", "**Oslo**", "**Oslo**", "Oslo"),
    ("Step one.\nAnswer: Oslo\n", "Step one.", "Step one.\nAnswer: Oslo", "Oslo"),
    (
        "Reasoning.\n**Final answer:** Oslo",
        "Reasoning.",
        "Reasoning.\n**Final answer:** Oslo",
        "Oslo",
    ),
    ("The answer: Oslo", "The answer: Oslo", "The answer: Oslo", None),
    ("cut off mid reasoning", "cut off mid reasoning", "cut off mid reasoning", None),
    ("Answer:", None, "Answer:", None),
    ("   ", None, "", None),
    ("", None, "", None),
]


@pytest.mark.parametrize(("reply", "final", "short", "reasoned"), CASES)
def test_each_parser_keeps_its_callers_outputs(
    reply: str, final: str | None, short: str, reasoned: str | None
) -> None:
    assert parse_final_answer(reply) == final
    assert parse_short_answer(reply) == short
    assert parse_reasoned_answer(reply) == reasoned


def test_the_eval_reader_falls_back_to_insufficient_evidence() -> None:
    assert parse_final_answer(None) is None
    assert clean_answer(None) == prompts.INSUFFICIENT_EVIDENCE
    assert clean_answer("Answer:") == prompts.INSUFFICIENT_EVIDENCE
    assert clean_answer('Answer: "Oslo"') == "Oslo"


def test_the_two_label_rules() -> None:
    assert strip_answer_label("answer: x") == "x"
    assert strip_answer_label("Answer:") == ""
    assert strip_answer_label("Final answer: x") is None
    assert strip_answer_label("Final answer: x", tolerant=True) == "x"
    assert strip_answer_label("Answer:", tolerant=True) is None
    assert strip_answer_label("no label", tolerant=True) is None

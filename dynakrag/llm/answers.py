"""Reading the answer out of a model's reply: one place for the "Answer:" label rules.

Two label rules exist on purpose, and :func:`strip_answer_label` holds both:

* **strict** (the reader of :func:`dynakrag.prompts.answer_messages`, used by ``stop_answer``
  and every evaluation method): the line starts with ``answer:`` in any case;
* **tolerant** (the routing generator tiers, whose heavy tier reasons before it answers):
  also ``Final answer``, markup or spaces around the label (``**Answer**:``, ``Answer :``) and
  a full-width colon, and something must follow the label.

The parsers built on it keep each caller's outputs: :func:`parse_final_answer` (first line,
strict label, quotes removed), :func:`parse_short_answer` (a one-line reply's tolerant label,
else the whole reply) and :func:`parse_reasoned_answer` (the last tolerantly labelled line).
"""

from __future__ import annotations

import re

__all__ = [
    "parse_final_answer",
    "parse_reasoned_answer",
    "parse_short_answer",
    "strip_answer_label",
]

_STRICT_LABEL = "answer:"
_TOLERANT_LABEL = re.compile(r"^\W*(?:final\s+)?answer\W*?[:：]\s*(.+?)\s*$", re.IGNORECASE)


def strip_answer_label(line: str, *, tolerant: bool = False) -> str | None:
    """The text after the answer label that starts ``line`` (stripped), or None when the line
    has no such label. ``tolerant`` picks the rule (see the module doc); with the strict rule
    an empty text after the label gives ``""``."""
    if tolerant:
        match = _TOLERANT_LABEL.match(line)
        return match.group(1).strip() if match else None
    if line.lower().startswith(_STRICT_LABEL):
        return line[len(_STRICT_LABEL) :].strip()
    return None


def parse_final_answer(reply: str | None) -> str | None:
    """The answer of a reply to the final-answer prompt: its first line without a strict
    ``Answer:`` label and surrounding double quotes; None when nothing is left."""
    line = reply.strip().splitlines()[0].strip() if reply and reply.strip() else ""
    labelled = strip_answer_label(line)
    if labelled is not None:
        line = labelled
    return line.strip('"').strip() or None


def parse_short_answer(text: str) -> str:
    """A light-tier reply as an answer: stripped, and a one-line reply's tolerant
    ``Answer:`` label removed (a reply of several lines is kept whole)."""
    text = text.strip()
    lines = text.splitlines()
    if len(lines) == 1:
        labelled = strip_answer_label(lines[0], tolerant=True)
        if labelled is not None:
            return labelled
    return text


def parse_reasoned_answer(text: str) -> str | None:
    """The answer of a reason-then-answer reply: its last tolerantly labelled line, without
    markdown bold; ``None`` when it has none (e.g. cut off by ``max_tokens`` mid-reasoning)."""
    for line in reversed(text.strip().splitlines()):
        labelled = strip_answer_label(line, tolerant=True)
        if labelled is not None:
            return labelled.strip("*").strip()
    return None

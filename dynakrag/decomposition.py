"""Question decomposition: cutting a question into the parts or sub-questions it asks.

Three decompositions share this module:

:func:`split_query`
    Cheap rule-based split for retrieval: commas, semicolons and ``and``/``or``/``but`` outside
    quotes (single or double). Used by the ``hybrid+decompose`` retriever tier.
:func:`segment_question`
    EPQD's segmentation (DS-RAG, Section 2.2.2): commas and :data:`CONJUNCTIONS` outside
    double quotes. :mod:`dynakrag.dsrag.epqd` turns each part into a sub-question.
:func:`decompose`
    The LLM's numbered sub-questions (``#k`` refers to the answer of sub-question k, see
    :func:`resolve_references`), used by the ``sufficiency_check`` action and the
    ``decompose`` method.

Both rule-based splitters are :func:`split_outside_quotes` with their own separators and
quotation marks; they differ only in how they clean the pieces.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from dynakrag import prompts
from dynakrag.errors import UserInputError
from dynakrag.llm.client import LLMClient, Usage

__all__ = [
    "CONJUNCTIONS",
    "DOUBLE_QUOTES",
    "MAX_SUB_QUESTIONS",
    "PART_EDGES",
    "QUOTES",
    "REFERENCE",
    "decompose",
    "quoted_mask",
    "resolve_references",
    "segment_question",
    "separator_pattern",
    "split_outside_quotes",
    "split_query",
]

# ------------------------------------------------------------------------------ quotation

QUOTES: Mapping[str, str] = {'"': '"', "“": "”", "'": "'", "‘": "’"}
"""Opening quotation mark -> its closing mark (double and single quotes)."""
DOUBLE_QUOTES: Mapping[str, str] = {'"': '"', "“": "”"}
"""Double quotes only: EPQD leaves single quotes alone (``'`` is mostly an apostrophe)."""


def _closes(text: str, j: int, closer: str) -> bool:
    """Whether ``text[j]`` closes a quotation opened with ``closer``'s opener."""
    if text[j] != closer:
        return False
    # A closing single quote followed by a letter is an apostrophe (``'rock'n'roll``).
    return not (closer in "'’" and j + 1 < len(text) and text[j + 1].isalnum())


def quoted_mask(text: str, quotes: Mapping[str, str] = QUOTES) -> list[bool]:
    """For each character, whether it lies inside a quotation (linear time).

    ``quotes`` maps opening to closing marks. Double quotes always open/close. A single quote
    (``'`` or ``‘``) opens only when not preceded by a letter or digit and closes only when not
    followed by one, so apostrophes (``Curie's``, ``don't``) never open a quotation. An
    unclosed quotation is not a quotation.
    """
    mask = [False] * len(text)
    if not any(char in quotes for char in text):
        return mask
    # next_close[c][i]: the first position >= i closing a quotation of closer c, or -1.
    next_close: dict[str, list[int]] = {}
    for closer in set(quotes.values()):
        positions = [-1] * (len(text) + 1)
        for j in range(len(text) - 1, -1, -1):
            positions[j] = j if _closes(text, j, closer) else positions[j + 1]
        next_close[closer] = positions
    i = 0
    while i < len(text):
        closer = quotes.get(text[i])
        apostrophe = text[i] in "'‘" and i > 0 and text[i - 1].isalnum()
        if closer is not None and not apostrophe:
            end = next_close[closer][i + 1]
            if end != -1:
                for j in range(i, end + 1):
                    mask[j] = True
                i = end + 1
                continue
        i += 1
    return mask


# ------------------------------------------------------------------------------ splitting


def separator_pattern(punctuation: str, words: Sequence[str]) -> re.Pattern[str]:
    """A case-insensitive pattern matching one of ``punctuation``'s characters or one of
    ``words`` as whole words (a space in a word matches any run of whitespace)."""
    alternatives = "|".join(re.escape(word).replace(r"\ ", r"\s+") for word in words)
    return re.compile(f"[{re.escape(punctuation)}]|\\b(?:{alternatives})\\b", re.IGNORECASE)


def split_outside_quotes(
    text: str, separators: re.Pattern[str], quotes: Mapping[str, str] = QUOTES
) -> list[str]:
    """``text`` cut at every match of ``separators`` that does not start inside a quotation;
    the pieces are returned raw (not stripped, empty ones kept)."""
    mask = quoted_mask(text, quotes)
    pieces: list[str] = []
    start = 0
    for match in separators.finditer(text):
        if mask[match.start()]:
            continue  # a comma or "and" inside a quotation belongs to the quoted title
        pieces.append(text[start : match.start()])
        start = match.end()
    pieces.append(text[start:])
    return pieces


_QUERY_SEPARATORS = separator_pattern(",;", ("and", "or", "but"))
_QUERY_EDGES = " \t\n\r?!.:"


def split_query(query: str, *, max_parts: int = 4) -> list[str]:
    """Cheap rule-based decomposition: ``query`` cut at commas, semicolons and the words
    ``and``/``or``/``but`` that lie outside quotes.

    Parts are stripped of spaces and ``?!.:``; parts without a letter or digit and repeats
    are dropped; at most ``max_parts`` are kept. ``"A and B, 'C and D'"`` gives
    ``["A", "B", "'C and D'"]``. A query with nothing to cut gives itself, stripped.
    """
    if max_parts < 1:
        raise UserInputError(f"max_parts must be >= 1, got {max_parts!r}")
    kept: list[str] = []
    for part in split_outside_quotes(query, _QUERY_SEPARATORS, QUOTES):
        part = part.strip(_QUERY_EDGES)
        if any(char.isalnum() for char in part) and part not in kept:
            kept.append(part)
    if not kept:
        return [query.strip(_QUERY_EDGES)] if query.strip(_QUERY_EDGES) else []
    return kept[:max_parts]


CONJUNCTIONS: tuple[str, ...] = ("as well as", "whereas", "and", "or", "but", "nor")
"""The conjunctions EPQD splits at (besides commas). Words that are also prepositions or
adverbs ("for", "so", "yet") are left out: "the birth date for Taylor Swift" is one phrase."""

PART_EDGES = " \t\n,;:?!"
"""Characters stripped from the ends of an EPQD part (and of the sub-questions made from it)."""

_SEGMENT_SEPARATORS = separator_pattern(",", CONJUNCTIONS)


def segment_question(question: str) -> list[str]:
    """Split ``question`` at commas and :data:`CONJUNCTIONS`, never inside "..." or “...”.

    Parts are stripped of spaces and of ``,;:?!`` at their ends; empty ones are dropped. A
    question with at most one part comes back whole (question mark included); an empty
    question gives no part.
    """
    text = str(question or "").strip()
    if not text:
        return []
    pieces = split_outside_quotes(text, _SEGMENT_SEPARATORS, DOUBLE_QUOTES)
    cleaned = [part.strip(PART_EDGES) for part in pieces]
    cleaned = [part for part in cleaned if part]
    return cleaned if len(cleaned) > 1 else [text]


# ------------------------------------------------------------------------------ LLM path

MAX_SUB_QUESTIONS = 5
REFERENCE = re.compile(r"#(\d+)")
"""``#k`` in a sub-question stands for the answer of sub-question k (1-based)."""


def decompose(question: str, llm: LLMClient) -> tuple[list[str], Usage]:
    """Sub-questions of ``question``; falls back to the question itself on an unusable reply."""
    reply, usage = llm.json(
        prompts.decompose_messages(question), max_tokens=prompts.DECOMPOSE_MAX_TOKENS
    )
    parts = reply.get("sub_questions") if reply else None
    if not isinstance(parts, list):
        return [question], usage
    cleaned = [
        str(part).strip() for part in parts if isinstance(part, str | int) and str(part).strip()
    ]
    return (cleaned[:MAX_SUB_QUESTIONS] or [question]), usage


def resolve_references(text: str, answers: list[str | None]) -> str:
    """Replace ``#k`` with the answer of sub-question k where it is known."""

    def substitute(match: re.Match[str]) -> str:
        index = int(match.group(1)) - 1
        if 0 <= index < len(answers) and answers[index]:
            return str(answers[index])
        return match.group(0)

    return REFERENCE.sub(substitute, text)

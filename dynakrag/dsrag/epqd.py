"""EPQD: Entity-Preserving Question Decomposition (DS-RAG, Section 2.2.2).

The question is first segmented at its conjunctions and commas, never inside quotation marks
(:func:`~dynakrag.decomposition.segment_question`). The LLM then gets the original question
and the numbered parts and writes one grammatically complete sub-question per part, keeping
the original terminology (Table 4's instruction, with few-shot examples for "preserve context"
and "remove duplicated entities"; see :mod:`dynakrag.prompts`).

How a :class:`Decomposition` was obtained:

``llm``
    the reply had one sub-question per part.
``repaired``
    the reply had another count. The LLM is asked once more, stating the count; if that reply
    is still off, the reply closer to the count is aligned to the parts: missing positions
    take the rule-based sub-question of their part, extra ones are cut.
``fallback``
    no usable reply (the request failed, or the reply was not ``{"sub_questions": [...]}``),
    or no LLM at all: the rule-based sub-questions of :func:`rule_sub_questions`.

:func:`baseline_decompose` is the LangChain-style multi-query decomposition that DS-RAG's
Table 7 compares EPQD against: no segmentation, the LLM picks the number of sub-questions.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from dynakrag import prompts
from dynakrag.decomposition import PART_EDGES, segment_question
from dynakrag.dsrag.question_graph import (
    AUXILIARIES,
    QUESTION_WORDS,
    Span,
    is_abbreviation,
    name_spans,
)
from dynakrag.llm.client import NO_USAGE, LLMClient, Usage

__all__ = [
    "EPQD",
    "Decomposition",
    "baseline_decompose",
    "rule_decompose",
    "rule_sub_questions",
]

logger = logging.getLogger(__name__)

DecompositionMethod = Literal["llm", "repaired", "rules", "fallback"]
"""``rules``: the rule path was asked for; ``fallback``: the LLM path failed and fell back."""


@dataclass(frozen=True)
class Decomposition:
    """Sub-questions of one question with the parts they were made from."""

    question: str
    parts: tuple[str, ...]
    sub_questions: tuple[str, ...]
    method: DecompositionMethod
    usage: Usage = NO_USAGE
    note: str | None = None
    """Why a repair or the fallback was needed."""


# ------------------------------------------------------------------------------ rule path

_LIST_PREPOSITIONS = frozenset(
    {"among", "for", "of", "between", "including", "like", "versus", "vs", "with", "from"}
)
_TAIL_WORDS = frozenset(
    {"different", "the", "same", "similar", "alike", "identical", "equal", "respectively"}
)
_ADVERBS = frozenset({"later", "then", "also", "still", "soon", "once", "eventually"})
_NOT_VERBS = frozenset({"including", "regarding", "during", "concerning", "following", "according"})
_RELATIVES = frozenset({"who", "which", "that", "whom"})
_SUBJECT_PRONOUNS = frozenset({"he", "she", "they", "it"})
_POSSESSIVE_PRONOUNS = frozenset({"his", "her", "their", "its"})
_PLACE_PREPOSITIONS = frozenset({"in"})  # "born in Wapakoneta, Ohio"
_KIN = frozenset(
    {"son", "daughter", "child", "children", "wife", "husband", "brother", "sister", "parents"}
)  # "the son of Stephen Koenig Armstrong and Viola Louise Engel"
_COMMON_VERBS = frozenset(
    {
        "became", "become", "becomes", "began", "born", "built", "came", "died", "faced",
        "found", "gave", "got", "grew", "had", "held", "joined", "left", "led", "lived",
        "made", "met", "moved", "ran", "rose", "said", "saw", "sang", "served", "spent",
        "studied", "taught", "took", "told", "went", "won", "wrote",
    }
) | AUXILIARIES  # fmt: skip


@dataclass(frozen=True)
class _Item:
    """A part that is only a name (a list item or an apposition): "among Neil Armstrong",
    "John Legend different"."""

    preposition: str
    text: str
    name: str
    person_like: bool = True
    """False for "the X": an organisation, never a list item ("... attended Purdue
    University and the University of Southern California")."""


def _item(part: str) -> _Item | None:
    words = part.split()
    preposition = ""
    if words and words[0].lower() in _LIST_PREPOSITIONS:
        preposition, part = words[0], part[len(words[0]) :].strip()
    spans = name_spans(part)
    if len(spans) != 1:
        return None
    span = spans[0]
    before = part[: span.start].strip(' "“').split()
    after = re.sub(r"^['’]s\b", "", part[span.end :]).strip(' "”').split()
    if any(w.lower() not in {"the", "a", "an"} for w in before):
        return None
    if any(w.lower() not in _TAIL_WORDS for w in after):
        return None
    return _Item(preposition, part, span.text, person_like=not before)


def _question(text: str) -> str:
    text = text.strip().rstrip(PART_EDGES)
    if text.endswith(".") and not is_abbreviation(text.split()[-1]):
        text = text.rstrip(".")  # a full stop, not the one of "Jr."
    return (text[:1].upper() + text[1:] + "?") if text else ""


def _statement(text: str) -> str:
    return text.strip().rstrip("?").strip()


def _last_name(text: str) -> Span | None:
    spans = name_spans(text)
    return spans[-1] if spans else None


def _replace_slot(frame: str, slot: Span, text: str) -> str:
    start, end = slot.start, slot.end
    if start > 0 and end < len(frame) and frame[start - 1] in '"“' and frame[end] in '"”':
        start, end = start - 1, end + 1  # a quoted name is replaced with its quotes
    return frame[:start] + text + frame[end:]


def _first_word(part: str) -> str:
    words = part.split()
    return words[0].lower().strip('"“') if words else ""


def _is_verb_led(part: str) -> bool:
    words = [w.lower() for w in part.split()[:2]]
    if not words:
        return False
    if (words[0].endswith("ly") or words[0] in _ADVERBS) and len(words) > 1:
        words = words[1:]  # "later earned", "famously becoming"
    first = words[0]
    return first in _COMMON_VERBS or (first.endswith(("ed", "ing")) and first not in _NOT_VERBS)


def _is_new_question(part: str, anchor: str | None) -> bool:
    words = [w.lower() for w in part.split()[:2]]
    if len(words) < 2 or words[0] not in QUESTION_WORDS or words[1] not in AUXILIARIES:
        return False
    # Once someone is named, "who was born in ..." describes them: it is no new question.
    return not (anchor and words[0] in _RELATIVES)


def _ends_with_continued_name(part: str) -> bool:
    """The part ends with a name that the next name continues: a place ("in Wapakoneta" +
    "Ohio") or a relative ("the son of Stephen Koenig Armstrong" + "Viola Louise Engel")."""
    ending = _last_name(part)
    if ending is None or part[ending.end :].strip(' "”'):
        return False
    before = [w.lower() for w in part[: ending.start].split()]
    if before and before[-1] in _PLACE_PREPOSITIONS:
        return True
    return len(before) >= 2 and before[-1] == "of" and before[-2] in _KIN


def rule_sub_questions(parts: Sequence[str]) -> list[str]:
    """One sub-question per part without an LLM: Table 4's "complete the meaning of the
    sentence using the previous part" done with rules.

    * The first part (and a later one that opens a new wh-question) stands as it is.
    * A part that is only a name is a list item of the question's frame ("Who has the
      earliest birth date for Taylor Swift" + "Neil Armstrong" gives "Who has the earliest
      birth date for Neil Armstrong?"), or, in the middle of a description, an apposition of
      the previous sub-question's last name ("... in Wapakoneta" + "Ohio"). It is a list item
      right after the frame or another item, or in the run of name-only parts that ends the
      question (unless that run opens with a place after "in X", as "Wapakoneta, Ohio").
    * A describing part is said of the last list item (the *anchor*): "who grew up in
      Wapakoneta" gives "Is it true that Neil Armstrong grew up in Wapakoneta?"; pronouns
      ("he", "his") are replaced by the anchor.
    * Any other fragment ("a homemaker", "where his father worked ...") continues the
      previous sub-question.
    """
    parts = [str(p).strip(PART_EDGES) for p in parts if str(p).strip(PART_EDGES)]
    if not parts:
        return []
    items = [_item(part) for part in parts]
    is_item = [item is not None and item.person_like for item in items]
    trailing = len(parts)
    while trailing > 0 and is_item[trailing - 1]:
        trailing -= 1
    frame = _statement(_question(parts[0]))
    slot = _last_name(frame)
    anchor = slot.text if slot else None
    subs = [_question(parts[0])]
    kind = "head"
    for index in range(1, len(parts)):
        part, previous = parts[index], subs[-1]
        item = items[index]
        if item is not None:
            list_item = item.person_like and (
                kind in {"head", "item"}
                or (
                    index >= trailing
                    and not (index == trailing and _ends_with_continued_name(parts[index - 1]))
                )
            )
            if list_item:
                if slot is not None:
                    head = _replace_slot(frame, slot, "\0")
                    head, after = head.split("\0", 1)
                else:  # the frame names no one yet: the item completes it
                    head = frame + (f" {item.preposition} " if item.preposition else ", ")
                    after = ""
                # The next item replaces this whole item (its quotes and tail words too).
                frame = head + item.text + after
                slot = Span(item.text, len(head), len(head) + len(item.text))
                anchor, kind = item.name, "item"
                subs.append(_question(frame))
                continue
            base = _statement(previous)
            last = _last_name(base)
            apposed = _replace_slot(base, last, item.text) if last else f"{base}, {item.text}"
            subs.append(_question(apposed))
            kind = "apposition"
            continue
        if _is_new_question(part, anchor):
            frame = _statement(_question(part))
            slot = _last_name(frame)
            anchor = slot.text if slot else anchor
            subs.append(_question(part))
            kind = "head"
            continue
        kind = "description"
        first, rest = _first_word(part), part.split(maxsplit=1)[1:]
        tail = rest[0] if rest else ""
        if anchor and first in _RELATIVES | _SUBJECT_PRONOUNS and tail:
            subs.append(_question(f"Is it true that {anchor} {tail}"))
        elif anchor and first in _POSSESSIVE_PRONOUNS and tail:
            subs.append(_question(f"Is it true that {anchor}'s {tail}"))
        elif anchor and _is_verb_led(part):
            subs.append(_question(f"Is it true that {anchor} {part}"))
        else:
            subs.append(_question(f"{_statement(previous)}, {part}"))
    return subs


def rule_decompose(question: str) -> Decomposition:
    """EPQD without an LLM: :func:`~dynakrag.decomposition.segment_question`, then
    :func:`rule_sub_questions`."""
    text = str(question or "").strip()
    parts = segment_question(text)
    return Decomposition(
        text, tuple(parts), tuple(rule_sub_questions(parts)), "rules", note="rule-based"
    )


# ------------------------------------------------------------------------------ LLM path


class EPQD:
    """Entity-preserving decomposition over an :class:`LLMClient` (None: rule path only)."""

    def __init__(self, llm: LLMClient | None) -> None:
        self.llm = llm

    def decompose(self, question: str) -> Decomposition:
        """Sub-questions of ``question``, one per segmented part; never raises."""
        text = str(question or "").strip()
        parts = segment_question(text)
        if not parts:
            return Decomposition(text, (), (), "fallback", note="empty question")
        if self.llm is None:
            return self._fallback(text, parts, NO_USAGE, "no LLM")
        first, usage, error = self._ask(prompts.epqd_messages(text, parts))
        if first is None:
            return self._fallback(text, parts, usage, error or "reply is not the asked JSON")
        if len(first) == len(parts):
            return Decomposition(text, tuple(parts), tuple(first), "llm", usage)
        second, more, _ = self._ask(prompts.epqd_repair_messages(text, parts, first))
        usage += more
        if second is not None and len(second) == len(parts):
            note = f"{len(first)} sub-questions for {len(parts)} parts; fixed by asking again"
            return Decomposition(text, tuple(parts), tuple(second), "repaired", usage, note)
        candidates = [c for c in (first, second) if c is not None]
        closest = min(candidates, key=lambda c: abs(len(c) - len(parts)))
        rules = rule_sub_questions(parts)
        aligned = [*closest[: len(parts)], *rules[len(closest) :]]
        note = f"{len(closest)} sub-questions for {len(parts)} parts after asking again; " + (
            "padded with rule-based sub-questions" if len(closest) < len(parts) else "cut"
        )
        return Decomposition(text, tuple(parts), tuple(aligned), "repaired", usage, note)

    def _ask(self, messages: list[tuple[str, str]]) -> tuple[list[str] | None, Usage, str | None]:
        assert self.llm is not None
        try:
            reply, usage = self.llm.structured(messages, prompts.SubQuestionsReply)
        except Exception as exc:  # any backend fault, even one LLMClient re-raises
            logger.warning("EPQD request failed: %s", exc)
            return None, NO_USAGE, f"request failed: {type(exc).__name__}: {exc}"
        return (reply.texts() if reply is not None else None), usage, None

    @staticmethod
    def _fallback(text: str, parts: list[str], usage: Usage, why: str) -> Decomposition:
        subs = tuple(rule_sub_questions(parts))
        return Decomposition(text, tuple(parts), subs, "fallback", usage, f"{why}; rule-based")


def baseline_decompose(llm: LLMClient, question: str) -> Decomposition:
    """The multi-query decomposition baseline (Table 7): the LLM alone chooses the
    sub-questions and their number. Falls back to the question itself; never raises."""
    text = str(question or "").strip()
    if not text:
        return Decomposition(text, (), (), "fallback", note="empty question")
    try:
        reply, usage = llm.structured(
            prompts.multi_query_decompose_messages(text), prompts.SubQuestionsReply
        )
    except Exception as exc:
        logger.warning("baseline decomposition failed: %s", exc)
        return Decomposition(text, (text,), (text,), "fallback", note=f"request failed: {exc}")
    subs = reply.texts() if reply is not None else None
    if subs is None:
        return Decomposition(text, (text,), (text,), "fallback", usage, "reply is not JSON")
    return Decomposition(text, (text,), tuple(subs), "llm", usage)

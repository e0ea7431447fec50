"""DS-RAG's ranking and comparison answers, computed from the values the selected passages
state; and the selection that stops once every compared entity's value is covered.

A question that orders its entities or asks whether their values are the same
(:func:`dynakrag.values.comparison_asked`) is answered in code, not by a reader:

1. The entities compared are the analysis's targets that ask the fact most of them ask
   (:func:`compared_targets`: "born date" of each person of a ranking).
2. Each one's value is read from the passages by rules (:func:`read_value`): a sentence that
   names the entity (its full name; else its surname, when no other name stands before it) and
   the fact asked ("born", "nationality"); the value is the date (or number) written after the
   fact's word, or for a name-like fact the words after "is" / "was" ("... nationality is
   American."). The passage DICS chose for the entity's criterion is read first.
3. :func:`dynakrag.values.compare_values` orders or compares them. The answer is the entity
   at the rank asked (tied entities together), or yes / no; its provenance lists each value
   with its passage and sentence. A value that is not found, or does not parse, gives an
   answer that says so (``Cannot answer: ...``), never a guess.

:func:`covering_selection` is DICS's stop for these questions: of the chunks DICS chose, the
fewest that state every compared entity's value (the earliest chosen on a tie). An entity
whose value none of them states takes the first retrieved chunk that does; when no retrieved
chunk states it, it keeps the chunk DICS chose for its criterion.
"""

from __future__ import annotations

import itertools
import re
from collections import Counter
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from dynakrag.dsrag.analysis import QuestionAnalysis, Target
from dynakrag.dsrag.dics import DicsChoice, DicsResult
from dynakrag.dsrag.question_graph import normalize_entity
from dynakrag.values import (
    CannotCompare,
    ComparisonAnswer,
    EntityValue,
    Equality,
    Ordering,
    compare_values,
    comparison_asked,
    date_mentions,
    first_number,
    folded_words,
)

__all__ = [
    "ReadValue",
    "ValueAnswer",
    "answer_from_values",
    "compared_targets",
    "covering_selection",
    "fact_query",
    "read_value",
    "unstated_targets",
]

ValueKind = Literal["date", "number", "text"]

_GENERIC_WORDS = frozenset(
    "the of a an what which who when is was date day year time number value name".split()
)
"""Words of a fact ("born date") that do not say which fact a sentence states."""
_SAME_FACT = {
    "birth": "born",
    "birthday": "born",
    "death": "died",
    "dead": "died",
    "citizenship": "nationality",
    "citizen": "nationality",
    "citizens": "nationality",
}
"""Fact words a sentence writes in another form ("birth date" -> "was born on", "citizenship"
-> "nationality is")."""
_DATE_FACTS = frozenset(
    "born died founded established formed released published built opened created launched "
    "started date year when".split()
)
"""Fact words whose value is a date."""
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[\"'“(\[]?[A-Z0-9])")
_COPULA = re.compile(
    r"\b(?:is|was|are|were)\b\s*(?:an?\s+|the\s+)?(?P<value>[^.;:!?,()]+)|:\s*(?P<after>[^.;!?,()]+)",
    re.IGNORECASE,
)
_NAME_WORD = re.compile(r"[A-Z][\w'’-]*")


@dataclass(frozen=True)
class ReadValue:
    """One entity's value as a passage writes it, with the sentence that states it."""

    value: str
    passage: str
    sentence: str


def _fact_words(asks: str) -> set[str]:
    words = {_SAME_FACT.get(w, w) for w in folded_words(asks)}
    return words - _GENERIC_WORDS


def _value_kind(asks: str, asked: Ordering | Equality | None) -> ValueKind:
    if isinstance(asked, Ordering):
        return "date" if asked.scale == "time" else "number"
    words = {_SAME_FACT.get(w, w) for w in folded_words(asks)}
    return "date" if words & _DATE_FACTS else "text"


def _sentences(text: str) -> list[str]:
    return [s.strip() for s in _SENTENCE_END.split(text) if s.strip()]


def _has_word(words: Sequence[str], fact: set[str]) -> int | None:
    """Index of the first word of ``words`` naming the fact (a 5-letter prefix matches:
    "national" and "nationality"), or None."""
    for i, word in enumerate(words):
        word = _SAME_FACT.get(word, word)
        for wanted in fact:
            if word == wanted or (len(word) >= 5 and len(wanted) >= 5 and word[:5] == wanted[:5]):
                return i
    return None


def _contains(words: Sequence[str], name: Sequence[str]) -> bool:
    n = len(name)
    return n > 0 and any(list(words[i : i + n]) == list(name) for i in range(len(words) - n + 1))


def _names_by_surname(sentence: str, entity: str) -> bool:
    """Whether ``sentence`` names ``entity`` by its surname alone: the surname, with no other
    capitalised word right before it unless it is part of the entity's name ("Chopra Jonas"
    for Priyanka Chopra Jonas, "Grasse Tyson" for Neil deGrasse Tyson; not "Koenig Armstrong"
    for Neil Armstrong)."""
    parts = folded_words(entity)
    if len(parts) < 2 or len(parts[-1]) < 3:
        return False
    own = " ".join(parts)
    matches = list(_NAME_WORD.finditer(sentence))
    for i, match in enumerate(matches):
        if folded_words(match.group())[:1] != [parts[-1]]:
            continue
        before = matches[i - 1] if i else None
        adjacent = before is not None and sentence[before.end() : match.start()].strip() == ""
        if not adjacent:
            return True
        if all(word in own for word in folded_words(before.group())):  # type: ignore[union-attr]
            return True
    return False


def _value_in(sentence: str, fact_at: int | None, kind: ValueKind) -> str | None:
    """The value ``sentence`` writes after the fact's word (the ``fact_at``-th word)."""
    words = list(re.finditer(r"[^\W_]+", sentence))
    offset = words[fact_at].end() if fact_at is not None and fact_at < len(words) else 0
    rest = sentence[offset:]
    if kind == "date":
        for source in (rest, sentence):  # after the fact's word, else anywhere in the sentence
            dated = [m for m in date_mentions(source) if m.key[0]]
            if dated:
                return source[dated[0].start : dated[0].end]
        year = re.search(r"\b\d{4}\b", rest)
        return year.group() if year else None
    if kind == "number":
        return first_number(rest)
    match = _COPULA.search(rest)
    if match is None:
        return None
    value = (match.group("value") or match.group("after") or "").strip()
    return value or None


def read_value(
    entity: str,
    asks: str,
    passages: Sequence[tuple[str, str]],
    kind: ValueKind = "text",
    *,
    by_surname: bool = True,
) -> ReadValue | None:
    """The first value of ``entity``'s fact ``asks`` the passages (``(id, text)``, in the
    order to read them) state: sentences naming the entity in full first, then (unless
    ``by_surname`` is False) by surname."""
    fact = _fact_words(asks)
    name = folded_words(entity)
    for surname_only in (False, True) if by_surname else (False,):
        for passage_id, text in passages:
            for sentence in _sentences(text):
                words = folded_words(sentence)
                named = (
                    _names_by_surname(sentence, entity) if surname_only else _contains(words, name)
                )
                if not named:
                    continue
                fact_at = _has_word(words, fact) if fact else None
                if fact and fact_at is None:
                    continue
                value = _value_in(sentence, fact_at, kind)
                if value:
                    return ReadValue(value, passage_id, sentence)
    return None


_NOT_IN_A_NAME = re.compile(r"[,;:!?\[\]]")
_LONGEST_NAME = 6


def _name_like(entity: str) -> bool:
    """Whether ``entity`` reads as a name, not a quotation or a clause the rules took for one
    ("That's one small step for [a] man, ...")."""
    words = entity.split()
    return 0 < len(words) <= _LONGEST_NAME and not _NOT_IN_A_NAME.search(entity)


def compared_targets(analysis: QuestionAnalysis) -> list[Target]:
    """The targets compared: those naming an entity and asking the fact most such targets ask
    (one per entity), when at least two do; else none."""
    asked = [t for t in analysis.targets if normalize_entity(t.asks) and _name_like(t.entity)]
    if len(asked) < 2:
        return []
    fact, count = Counter(normalize_entity(t.asks) for t in asked).most_common(1)[0]
    if count < 2:
        return []
    seen: set[str] = set()
    out = []
    for target in asked:
        key = normalize_entity(target.entity)
        if normalize_entity(target.asks) == fact and key not in seen:
            seen.add(key)
            out.append(target)
    return out


@dataclass(frozen=True)
class ValueAnswer:
    """A computed answer (or the reason there is none) with each value's provenance."""

    result: ComparisonAnswer | CannotCompare
    sentences: Mapping[str, str]
    """The sentence that states each entity's value."""

    @property
    def text(self) -> str:
        return self.result.answer

    @property
    def answered(self) -> bool:
        return isinstance(self.result, ComparisonAnswer)

    @property
    def passages(self) -> list[str]:
        """Ids of the passages the values come from, in the entities' order."""
        return list(dict.fromkeys(v.passage for v in self.result.values if v.passage))

    def record(self) -> dict[str, Any]:
        """JSON-safe form for traces and benchmark records."""
        result = self.result
        record: dict[str, Any] = {
            "status": "answered" if isinstance(result, ComparisonAnswer) else "cannot_answer",
            "answer": result.answer,
            "asked": type(result.asked).__name__.lower(),
            "values": [
                {
                    "entity": v.entity,
                    "value": v.value,
                    "parsed": v.parsed,
                    "passage": v.passage,
                    "sentence": self.sentences.get(v.entity),
                }
                for v in result.values
            ],
        }
        if isinstance(result, ComparisonAnswer):
            record["chosen"] = list(result.chosen)
            record["ordered"] = list(result.ordered)
        else:
            record["reason"] = result.reason
            record["missing"] = list(result.missing)
            record["unparsed"] = [v.entity for v in result.unparsed]
        return record


def _asked(question: str, targets: Sequence[Target]) -> Ordering | Equality | None:
    asks = targets[0].asks if targets else ""
    if _value_kind(asks, None) == "date":
        return comparison_asked(question, "time")
    return comparison_asked(question)


def _reading_order(passages: Sequence[tuple[str, str]], first: str | None) -> list[tuple[str, str]]:
    return sorted(passages, key=lambda passage: passage[0] != first)


def answer_from_values(
    question: str,
    analysis: QuestionAnalysis,
    passages: Sequence[tuple[str, str]],
    chosen_for: Mapping[str, str] | None = None,
) -> ValueAnswer | None:
    """The answer of a ranking or comparison ``question`` computed from the values
    ``passages`` (``(id, text)``) state, or None when the question is no comparison this
    computes (or names fewer than two entities to compare): a reader answers it then.
    ``chosen_for``: the passage DICS chose for each entity (read first)."""
    targets = compared_targets(analysis)
    asked = _asked(question, targets)
    if asked is None or len(targets) < 2:
        return None
    kind = _value_kind(targets[0].asks, asked)
    values: list[EntityValue] = []
    sentences: dict[str, str] = {}
    for target in targets:
        first = (chosen_for or {}).get(normalize_entity(target.entity))
        read = read_value(target.entity, target.asks, _reading_order(passages, first), kind)
        if read is None:
            values.append(EntityValue(target.entity, None))
            continue
        values.append(EntityValue(target.entity, read.value, read.passage))
        sentences[target.entity] = read.sentence
    result = compare_values(question, values, asked)
    if result is None:
        return None
    if isinstance(result, CannotCompare) and result.missing:
        # Say what was looked for, not only for whom.
        fact = targets[0].asks
        names = list(result.missing)
        missing = ", ".join(names[:-1]) + f" and {names[-1]}" if len(names) > 1 else names[0]
        result = CannotCompare(
            f"no selected passage states the {fact} of {missing}",
            result.asked,
            result.missing,
            result.unparsed,
            result.values,
        )
    return ValueAnswer(result, sentences)


def chosen_passages(choices: Sequence[Mapping[str, Any]]) -> dict[str, str]:
    """The passage DICS chose for each anchor entity (normalised), from
    :meth:`~dynakrag.dsrag.pipeline.DicsSelection.choices` records."""
    out: dict[str, str] = {}
    for choice in choices:
        anchor = choice.get("anchor")
        if anchor:
            out.setdefault(normalize_entity(str(anchor)), str(choice.get("passage")))
    return out


def covering_selection(
    analysis: QuestionAnalysis,
    chosen: DicsResult,
    candidates: Sequence[tuple[Hashable, str]] = (),
) -> DicsResult:
    """DICS's choice for a ranking or comparison question (see the module doc) cut to the
    fewest chunks that state every compared entity's value; ``chosen`` unchanged for other
    questions.

    An entity whose value none of DICS's chunks states takes the first of ``candidates`` (the
    retrieved chunks, in order) that states it; when no candidate does, it keeps the chunk
    DICS chose for its criterion (the answer then says which value is missing)."""
    targets = compared_targets(analysis)
    asked = _asked(analysis.question, targets)
    if asked is None or len(targets) < 2 or chosen.mode != "criteria":
        return chosen
    kind = _value_kind(targets[0].asks, asked)

    def stated(chunk: tuple[Hashable, str], by_surname: bool) -> set[int]:
        one = [(str(chunk[0]), chunk[1])]
        return {
            i
            for i, target in enumerate(targets)
            if read_value(target.entity, target.asks, one, kind, by_surname=by_surname) is not None
        }

    pool = list(chosen.chunks)
    wanted = set(range(len(targets)))
    added: list[str] = []
    criterion_of: dict[Hashable, int | None] = {}
    # A chunk naming the entity in full first (the corpus also drops "Putin was born on ..."
    # into other people's text); a surname only where no chunk names it in full.
    covers = [stated(chunk, by_surname=False) for chunk in pool]
    for by_surname in (False, True):
        if by_surname:
            loose = wanted - set().union(*covers)
            covers = [
                c | (stated(chunk, True) & loose) for c, chunk in zip(covers, pool, strict=True)
            ]
        for i in sorted(wanted - set().union(*covers)):
            if i in set().union(*covers):
                continue  # a chunk added for an earlier entity states this one's value too
            for candidate in candidates:
                if any(candidate[0] == chunk_id for chunk_id, _ in pool):
                    continue
                if i in (states := stated(candidate, by_surname)):
                    pool.append(candidate)
                    covers.append(states)
                    added.append(f"{candidate[0]} for {targets[i].entity}")
                    criterion_of[candidate[0]] = _criterion_of(analysis, targets[i].entity)
                    break
    coverable = set().union(*covers)
    if not coverable:
        return chosen  # no value is stated anywhere: DICS's choice stands
    # An entity whose value no chunk states keeps the chunk DICS chose for its criterion.
    unstated = {_criterion_of(analysis, targets[i].entity) for i in wanted - coverable}
    kept_for_unstated = [
        chunk
        for chunk in chosen.chunks
        if any(c.chunk_id == chunk[0] and c.criterion in unstated for c in chosen.choices)
    ]
    for size in range(1, len(pool) + 1):
        for subset in itertools.combinations(range(len(pool)), size):
            if set().union(*(covers[j] for j in subset)) == coverable:
                kept = [pool[j] for j in subset]
                kept += [chunk for chunk in kept_for_unstated if chunk not in kept]
                return _kept(chosen, kept, candidates, added, criterion_of)
    return chosen  # unreachable: the whole pool covers what it can


def unstated_targets(
    analysis: QuestionAnalysis, passages: Sequence[tuple[Hashable, str]]
) -> list[Target]:
    """The compared targets of a ranking or comparison question whose value none of
    ``passages`` states naming them in full (none for another question): what a further
    search should look for (:func:`fact_query`)."""
    targets = compared_targets(analysis)
    asked = _asked(analysis.question, targets)
    if asked is None or len(targets) < 2:
        return []
    kind = _value_kind(targets[0].asks, asked)
    texts = [(str(chunk_id), text) for chunk_id, text in passages]
    # A value stated by surname only is searched too: a chunk may name the entity in full.
    return [
        t for t in targets if read_value(t.entity, t.asks, texts, kind, by_surname=False) is None
    ]


def fact_query(target: Target) -> str:
    """A search query for one target's fact, with the word a sentence states it by ("Will
    Ferrell birth date born": a term search for "birth date" misses "was born on")."""
    asked = folded_words(target.asks)
    stated = sorted(_fact_words(target.asks) - set(asked))
    return " ".join([target.entity, target.asks, *stated]).strip()


def _criterion_of(analysis: QuestionAnalysis, entity: str) -> int | None:
    """The index of the criterion whose anchor is ``entity``, or None."""
    key = normalize_entity(entity)
    for i, criterion in enumerate(analysis.criteria.criteria):
        anchor = next((n.text for n in criterion.nodes if n.key == criterion.anchor), "")
        if normalize_entity(anchor) == key:
            return i
    return None


def _kept(
    chosen: DicsResult,
    kept: Sequence[tuple[Hashable, str]],
    candidates: Sequence[tuple[Hashable, str]],
    added: Sequence[str],
    criterion_of: Mapping[Hashable, int | None],
) -> DicsResult:
    keep_ids = [chunk_id for chunk_id, _ in kept]
    if keep_ids == list(chosen.chunk_ids):
        return chosen
    unique = list(dict.fromkeys(chunk_id for chunk_id, _ in candidates))
    choices = [choice for choice in chosen.choices if choice.chunk_id in keep_ids]
    for chunk_id in keep_ids:
        if chunk_id not in chosen.chunk_ids:
            index = unique.index(chunk_id) if chunk_id in unique else -1
            criterion = criterion_of.get(chunk_id)
            choices.append(DicsChoice(criterion, chunk_id, index, score=0.0))
    dropped = [str(chunk_id) for chunk_id in chosen.chunk_ids if chunk_id not in keep_ids]
    why = f"{chosen.reason}; {len(kept)} chunks state every compared entity's value"
    if added:
        why += f" (added {', '.join(added)}: DICS's chunks do not state it)"
    if dropped:
        why += f"; dropped {', '.join(dropped)}"
    return DicsResult(tuple(kept), tuple(choices), chosen.mode, why)

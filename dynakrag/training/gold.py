"""Gold for logged runs, from a small JSONL file the user writes.

One JSON object a line::

    {"question": "Who founded ...?", "answers": ["Ada Lovelace"], "support": ["doc-12", "doc-40"]}
    {"run_id": "5f0c...", "answers": ["1947"]}

* ``question`` or ``run_id`` (at least one) says which runs the row labels: a run matches by
  its run id (``dynakrag ask --json`` prints it), else by its question, compared after
  normalisation (case, punctuation and spacing do not matter).
* ``answers``: the acceptable answers (strings).
* ``support`` (optional): ids of the passages of the user's corpus that hold the evidence; an
  entry may also be a list of interchangeable ids. With support, a state is labelled by its
  support recall, as ``dynakrag collect`` labels the benchmarks' questions.

Without ``support`` the labels come from answer correctness alone, which is **weaker**: a
passage counts as support when it contains a gold answer (normalised text), so a state's
"support recall" is 1 once its evidence states an answer and 0 before; bridge passages that
lead to the answer without stating it earn nothing. Give support where you can.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from dynakrag.errors import UserInputError
from dynakrag.eval.metrics import normalize_answer
from dynakrag.files import read_jsonl

__all__ = ["GoldBook", "GoldRow", "answer_support", "question_key", "read_gold"]

GoldItems = tuple[frozenset[str], ...]
_WORD = re.compile(r"\w+")


def question_key(text: str) -> str:
    """A question as gold rows are matched: lower-cased words, punctuation and spacing
    dropped."""
    return " ".join(_WORD.findall(text.casefold()))


@dataclass(frozen=True)
class GoldRow:
    """The gold of one question (see the module docstring)."""

    question: str | None
    answers: tuple[str, ...]
    support: GoldItems
    run_id: str | None = None
    line: int = 0

    @property
    def has_support(self) -> bool:
        """Whether the row names supporting passages (else: answer-only, weaker labels)."""
        return bool(self.support)


class GoldBook:
    """Gold rows looked up by run id or by normalised question."""

    def __init__(self, rows: Iterable[GoldRow], *, source: str = "gold") -> None:
        self.rows = list(rows)
        self.source = source
        self._by_run: dict[str, GoldRow] = {}
        self._by_question: dict[str, GoldRow] = {}
        for row in self.rows:
            if row.run_id is not None:
                self._add(self._by_run, row.run_id, row, "run_id")
            if row.question is not None:
                self._add(self._by_question, question_key(row.question), row, "question")

    def _add(self, index: dict[str, GoldRow], key: str, row: GoldRow, what: str) -> None:
        known = index.get(key)
        if known is not None and (known.answers, known.support) != (row.answers, row.support):
            raise UserInputError(
                f"{self.source} lines {known.line} and {row.line}: the same {what} with "
                "different gold"
            )
        index.setdefault(key, row)

    @classmethod
    def from_support(cls, gold_by_question: Mapping[str, Iterable[object]]) -> GoldBook:
        """A book of support-only rows, keyed by question (the older Python interface)."""
        return cls(
            GoldRow(question=q, answers=(), support=_support_items(items, "support", 0, "gold"))
            for q, items in gold_by_question.items()
        )

    def match(self, run_id: str | None, question: str | None) -> GoldRow | None:
        """The row of a run: by its run id first, else by its question."""
        if run_id is not None and run_id in self._by_run:
            return self._by_run[run_id]
        if question:
            return self._by_question.get(question_key(question))
        return None

    def __len__(self) -> int:
        return len(self.rows)


def read_gold(path: str | Path) -> GoldBook:
    """The gold file at ``path``; UserInputError naming the line for a malformed row."""
    source = str(path)
    rows: list[GoldRow] = []
    for line, data in enumerate(read_jsonl(path, what="gold file"), start=1):

        def bad(reason: str, line: int = line) -> UserInputError:
            return UserInputError(f"{source} row {line}: {reason}")

        question, run_id = data.get("question"), data.get("run_id")
        for name, value in (("question", question), ("run_id", run_id)):
            if value is not None and (not isinstance(value, str) or not value.strip()):
                raise bad(f"{name} must be a non-empty string")
        if question is None and run_id is None:
            raise bad('needs "question" or "run_id"')
        answers = data.get("answers", [])
        if isinstance(answers, str):
            answers = [answers]
        if not isinstance(answers, list) or not all(
            isinstance(a, str) and a.strip() for a in answers
        ):
            raise bad('"answers" must be a list of non-empty strings')
        support = _support_items(data.get("support", []), "support", line, source)
        if not answers and not support:
            raise bad('needs "answers" or "support"')
        rows.append(GoldRow(question, tuple(answers), support, run_id, line))
    if not rows:
        raise UserInputError(f"{source}: no gold rows")
    return GoldBook(rows, source=source)


def _support_items(value: object, name: str, line: int, source: str) -> GoldItems:
    """``support`` as gold items: one set of interchangeable ids per entry."""
    if not isinstance(value, list | tuple):
        raise UserInputError(f"{source} row {line}: {name!r} must be a list of passage ids")
    items: list[frozenset[str]] = []
    for entry in value:
        ids = [entry] if isinstance(entry, str) else entry
        if isinstance(entry, frozenset):
            ids = sorted(entry)
        if not isinstance(ids, list | tuple) or not ids or not all(isinstance(i, str) for i in ids):
            raise UserInputError(
                f"{source} row {line}: each {name!r} entry is a passage id or a list of ids"
            )
        items.append(frozenset(ids))
    return tuple(items)


def answer_support(answers: Iterable[str], passages: Iterable[Mapping[str, object]]) -> GoldItems:
    """Answer-only gold as support: one item, the ids of the ``passages`` (dicts with ``id``
    and ``text``, or Passage-like objects) whose text contains a gold answer (normalised,
    whole words); ``()`` when none does."""
    needles = [f" {n} " for n in (normalize_answer(a) for a in answers) if n]
    found: set[str] = set()
    for passage in passages:
        if isinstance(passage, Mapping):
            pid, text = passage.get("id"), passage.get("text", "")
        else:
            pid, text = getattr(passage, "id", None), getattr(passage, "text", "")
        if pid is None or str(pid) in found:
            continue
        haystack = f" {normalize_answer(str(text))} "
        if any(needle in haystack for needle in needles):
            found.add(str(pid))
    return (frozenset(found),) if found else ()

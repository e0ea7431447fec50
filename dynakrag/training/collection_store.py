"""Where ``dynakrag collect`` writes each finished question: its ``--out`` records file and/or
its trajectory log (``--log``), as one :class:`~dynakrag.workers.ResultStore`.

A collection runs through the executor every run over many questions shares
(:func:`~dynakrag.workers.resumed`), with its one resume rule: a question is done when its
whole result is written, here all its records (the ``--out`` file: as many as the records'
``question_records`` say, :func:`~dynakrag.training.records.resume_collection`; the log: one
transaction per question), and anything else is redone.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from dynakrag.data.datasets import QAExample
from dynakrag.errors import UserInputError
from dynakrag.files import write_jsonl
from dynakrag.graph.runlog import LogTarget, describe_log
from dynakrag.training.records import (
    Question,
    TransitionFields,
    question_groups,
    resume_collection,
)

__all__ = ["CollectionStore", "collected_key", "collected_questions"]


def collected_key(example: QAExample) -> str:
    """A question's key in a collection (dataset and id: only train rows are collected)."""
    return _key((example.dataset, example.id))


def _key(question: Question) -> str:
    return f"{question[0]}:{question[1]}"


class CollectionStore:
    """The ``--out`` file (appended, question by question) and/or the log of a collection.

    ``done`` maps the key of every question either already holds whole to its record count
    (``None`` where only the log holds it). ``restart`` empties ``--out`` first (else a file
    of other collection ``settings`` is refused); ``log_written`` says the log is written by
    someone else (each Dask worker writes its own questions), so only ``--out`` is here.
    """

    def __init__(
        self,
        out: Path | None,
        log: LogTarget | None,
        settings: Mapping[str, Any],
        *,
        restart: bool = False,
        log_written: bool = False,
    ) -> None:
        from dynakrag.training.trajectories import logged_questions

        self.out = out
        self.log = log
        self.log_written = log_written
        self.records = 0
        self.questions = 0
        # The log first: it is checked before any model loads.
        self.logged = logged_questions(log) if log is not None else set()
        self.finished: set[Question] = set()
        if out is not None:
            if restart:
                self._write_lines([], append=False)
            else:
                self.finished = resume_collection(out, settings)
        self.done: dict[str, int | None] = dict.fromkeys(map(_key, self.logged | self.finished))

    def carried(self, questions: Iterable[Question]) -> None:
        """Count ``questions`` done: their lines were copied in as they are (``--resume-from``,
        :func:`~dynakrag.training.records.carry_over`)."""
        self.finished |= set(questions)
        self.done.update(dict.fromkeys(map(_key, questions)))

    def add(self, key: str, value: Sequence[Mapping[str, Any]]) -> None:
        """Write one question's records whole: appended to ``--out``, and into the log in one
        transaction (unless the workers wrote it)."""
        if self.out is not None:
            self._write_lines(value, append=True)
        if self.log is not None and not self.log_written:
            from dynakrag.training.trajectories import write_log_records

            write_log_records(self.log, value)
        self.done[key] = len(value)
        self.records += len(value)
        self.questions += 1

    def _write_lines(self, records: Iterable[Mapping[str, Any]], *, append: bool) -> None:
        assert self.out is not None
        try:
            write_jsonl(records, self.out, append=append)
        except OSError as exc:
            raise UserInputError(f"cannot write {self.out}: {exc.strerror or exc}") from None

    def describe(self) -> str:
        """Where the records went, for the closing line."""
        places = [str(self.out)] if self.out is not None else []
        places += [describe_log(self.log)] if self.log is not None else []
        return " and ".join(places)


def collected_questions(
    examples: Sequence[QAExample], records: Iterable[TransitionFields]
) -> Iterator[tuple[QAExample, list[TransitionFields]]]:
    """``(question, its records)`` of a single-process collection of ``examples``, whose
    ``records`` come question by question (a question left out yields nothing)."""
    by_key = {collected_key(example): example for example in examples}
    for group in question_groups(records):
        first = group[0]
        yield by_key[_key((str(first["dataset"]), str(first["example_id"])))], group

"""The labelled transition records of collection: their format, their files, and resuming.

Record schema (one JSON object a line, ``RECORD_SCHEMA``)::

    schema          "dynakrag-transition/1"
    source          "collect" (:func:`~dynakrag.training.collect.collect`) or "log"
                    (:func:`~dynakrag.training.logged_runs.records_from_transitions`)
    example_id      the question's id (the thread id for a log)
    dataset, split  where the question comes from (only "train" rows are collected)
    step            actions taken before this state (0 at the initial state)
    history         those actions, in order (identifies the state within the example)
    feature_version FEATURE_SCHEMA_VERSION of ``features``
    features        featurize(s, action) in that version (kept for readers of old records)
    state           feature_inputs(s): a compact copy of what any feature may read, so that
                    ``dynakrag train`` recomputes the features under its own schema
    budgets         feature_config(cfg): the settings the features read
    valid           A(s), the valid actions at s
    action          the action the record labels
    label           v(s, action) (:mod:`dynakrag.training.collect`)
    label_version   2 (answer labels) or 1 (support-recall labels: every record of the
                    recall labels, and the answer actions labelled without an answer)
    sr_before       SR(s)
    sr_after        SR(s') (for stop_answer: of the final evidence the answer read)
    f1_before       F1(s) (null where stopping is not valid or without gold answers)
    f1_after        answer actions: F1 of the answer written right after the action, else null
    answer          answer actions: that answer, else null
    continuation    the continuation label of s (same in every record of s)
    continuation_support  the support-recall continuation of s (label version 1's)
    chosen          whether a rollout took this action from s
    executed        whether the action ran
    deltas          {retrieval_calls, llm_calls, prompt_tokens, completion_tokens} it spent
                    (the action's own; an answer written after it is not counted)
    question_records  how many records the question has (tells a finished question from
                    one a killed collection cut short: :func:`finished_questions`)
    collection      (collect only) the settings that produced it: seed, epsilon, rollouts,
                    branching, retriever, setting, corpus, model, and ``labels`` (absent for
                    the answer labels, which were the only ones before)

Records written before ``state`` existed carry only ``features`` (schema 1) and train only a
schema-1 policy.

Every reader checks each record against :class:`TransitionRecord` (the fields above, their
types, a known action, finite labels) and names the file and line of the first bad one.

A records file is JSON Lines (``.gz``: gzip-compressed), written question by question by
``dynakrag collect``. Resuming: :func:`resume_collection` prepares the ``--out`` file of an
interrupted collection (drops a question a kill cut short); :func:`carry_over` takes the
finished questions of other records files of the same collection settings, such as the sorted,
``gzip -n`` records that ship with the policy (``make default-policy``), so a collection
started from them continues it instead of redoing it, and a larger ``--sample`` only adds
questions. Their lines are copied as they are, so the records of a question are the same
bytes however often a collection is resumed.

Records that ship (:func:`pack_records`, ``dynakrag pack-records``) hold no text of the data
they were collected on: :func:`shareable` drops ``state`` (the question, the passages, the
model's sub-questions and hop answers) and ``answer``, and keeps the stored ``features``, so
they train a policy of their ``feature_version`` (``dynakrag train`` says so for another
schema), resume a collection and pool with a user's records as before.
"""

from __future__ import annotations

import gzip
import json
import os
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, Literal, TypedDict, TypeVar, cast

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from dynakrag.errors import UserInputError, one_line
from dynakrag.files import atomic_writer, jsonl_line, read_jsonl
from dynakrag.policy.features import FeatureInputs
from dynakrag.state import ACTIONS

__all__ = [
    "RECORD_SCHEMA",
    "CarriedOver",
    "Question",
    "TransitionFields",
    "TransitionRecord",
    "carry_over",
    "check_record",
    "checked_records",
    "finished_questions",
    "pack_records",
    "question_groups",
    "read_records",
    "resume_collection",
    "shareable",
]

RECORD_SCHEMA = "dynakrag-transition/1"

TEXT_FIELDS: tuple[str, ...] = ("state", "answer")
"""The fields of a record that hold text of the data or of the model's replies about it:
what :func:`shareable` drops."""

Number = Annotated[float, Field(strict=True, allow_inf_nan=False)]
"""A finite JSON number (an integer too; never ``true``/``false``)."""


class TransitionRecord(BaseModel):
    """One transition record (the module doc's fields), as read: what every reader checks.

    Fields left out by older collections are optional; fields it does not know are kept
    (``extra="allow"``), and the record itself is passed on as the dict it was written as
    (resuming copies its line byte for byte).
    """

    model_config = ConfigDict(extra="allow")

    schema_: Literal["dynakrag-transition/1"] = Field(alias="schema")
    source: str | None = None
    example_id: str = ""
    dataset: str = ""
    split: str | None = None
    step: int | None = None
    history: list[str] = []
    feature_version: int | None = None
    features: list[float] | None = None
    state: dict[str, Any] | None = None
    budgets: dict[str, int] | None = None
    valid: list[str] = []
    action: str
    label: Number
    label_version: int | None = None
    continuation: Number
    question_records: int | None = None
    collection: dict[str, Any] | None = None

    @field_validator("action")
    @classmethod
    def _known_action(cls, action: str) -> str:
        if action not in ACTIONS:
            raise ValueError(f"unknown action {action!r}")
        return action


class TransitionFields(TypedDict, total=False):
    """A transition record as a dict (the module doc's fields): as collection builds and
    writes it (:func:`~dynakrag.training.labelling.node_records`), and as readers pass it on
    once :class:`TransitionRecord` has checked it."""

    schema: str
    source: str
    example_id: str
    dataset: str
    split: str
    step: int
    history: list[str]
    feature_version: int
    features: list[float]
    state: FeatureInputs
    budgets: dict[str, int]
    valid: list[str]
    action: str
    label: float
    label_version: int
    sr_before: float
    sr_after: float
    f1_before: float | None
    f1_after: float | None
    answer: str | None
    continuation: float
    continuation_support: float
    chosen: bool
    executed: bool
    deltas: dict[str, int]
    question_records: int
    collection: dict[str, Any]


def check_record(record: Mapping[str, Any]) -> TransitionRecord:
    """``record`` read as a :class:`TransitionRecord`; ValueError saying what is wrong."""
    return TransitionRecord.model_validate(record)


def checked_records(records: Sequence[Mapping[str, Any]], where: str) -> list[TransitionFields]:
    """Check records read from elsewhere than a file (a log's table); the records, as they
    are. UserInputError naming ``where`` and the record's number (from 1) for the first bad
    one."""
    for number, record in enumerate(records, start=1):
        try:
            check_record(record)
        except ValidationError as exc:
            raise UserInputError(f"{where}: stored record {number}: {one_line(exc)}") from None
    return cast(list[TransitionFields], list(records))


Question = tuple[str, str]
"""``(dataset, example_id)``."""
Record = TypeVar("Record", bound=Mapping[str, Any])


def _question(record: Mapping[str, Any]) -> Question:
    return (str(record.get("dataset", "")), str(record.get("example_id", "")))


def question_groups(records: Iterable[Record]) -> Iterator[list[Record]]:
    """``records`` (collection writes them question by question) in one list a question: a
    question ends when it has as many records as its ``question_records`` says, or when the
    next question starts."""
    group: list[Record] = []
    for record in records:
        if group and _question(record) != _question(group[-1]):
            yield group
            group = []
        group.append(record)
        if record.get("question_records") == len(group):
            yield group
            group = []
    if group:
        yield group


def read_records(
    paths: str | os.PathLike[str] | Iterable[str | os.PathLike[str]],
) -> list[TransitionFields]:
    """The transition records of one or more JSONL files (written with
    :func:`dynakrag.files.write_jsonl`), each checked by :class:`TransitionRecord`;
    UserInputError naming file and line if one is bad."""
    records = read_jsonl(paths, schema=RECORD_SCHEMA, what="trajectories", check=check_record)
    return cast(list[TransitionFields], records)


def resume_collection(
    path: str | os.PathLike[str], collection: Mapping[str, Any]
) -> set[tuple[str, str]]:
    """Prepare the records file of an interrupted collection for appending; the
    ``(dataset, example_id)`` of the questions it already finished.

    The records of questions a kill cut short (fewer than their ``question_records``) and a
    last line cut mid-write are dropped, the file rewritten atomically without them, so
    appending the rest of the collection gives the file an uninterrupted run writes (in
    another order). Raises :class:`UserInputError` when the file holds records of other
    collection settings than ``collection`` (they would mix two collections) or is not a
    records file. A missing file finished nothing.
    """
    source = Path(path)
    if not source.exists():
        return set()
    try:
        lines = source.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise UserInputError(f"cannot read trajectories {source}: {exc}") from None
    records: list[dict[str, Any]] = []
    for number, _line, record in _parsed_records(source, lines):
        if record.get("collection") != dict(collection):
            raise UserInputError(
                f"{source} holds records of another collection (line {number}: "
                f"{record.get('collection')!r}, now {dict(collection)!r}); write to another "
                "--out, or pass --restart to replace it"
            )
        records.append(record)
    finished = finished_questions(records)
    kept = [r for r in records if (str(r.get("dataset")), str(r.get("example_id"))) in finished]
    if len(kept) < len(lines):
        with atomic_writer(source) as handle:
            for record in kept:
                handle.write((jsonl_line(record) + "\n").encode("utf-8"))
    return finished


def finished_questions(records: Iterable[Mapping[str, Any]]) -> set[tuple[str, str]]:
    """The ``(dataset, example_id)`` of questions whose records are all in ``records``: a
    question cut short (a killed collection wrote part of it) is left out, and so are records
    without a ``question_records`` count."""
    counts: dict[tuple[str, str], int] = {}
    expected: dict[tuple[str, str], int] = {}
    for record in records:
        key = _question(record)
        counts[key] = counts.get(key, 0) + 1
        total = record.get("question_records")
        if isinstance(total, int) and not isinstance(total, bool):
            expected[key] = total
    return {key for key, total in expected.items() if counts[key] == total}


@dataclass
class CarriedOver:
    """What :func:`carry_over` found in the resume points."""

    lines: list[str] = field(default_factory=list)
    """The record lines to add, question by question, as they were written."""
    questions: set[Question] = field(default_factory=set)
    other_settings: set[Question] = field(default_factory=set)
    """Finished questions of the resume points that other collection settings produced."""
    missing: list[str] = field(default_factory=list)
    """Resume points that do not exist (nothing to resume from them)."""

    def describe(self) -> str:
        """One line for the command line."""
        text = f"{len(self.questions)} finished questions taken from the resume points"
        if self.other_settings:
            text += (
                f" ({len(self.other_settings)} more were collected with other settings: "
                "collected again)"
            )
        if self.missing:
            text += f"; not there yet: {', '.join(self.missing)}"
        return text


def carry_over(
    sources: Sequence[str | os.PathLike[str]],
    collection: Mapping[str, Any],
    wanted: Collection[Question],
    done: Collection[Question] = (),
) -> CarriedOver:
    """The record lines of the questions of ``wanted`` (not ``done`` already) that one of
    the records files ``sources`` (``.gz`` too) holds finished and that a collection with
    the settings ``collection`` wrote; the first source holding a question gives its lines.

    Repeated lines of a question count once (two sorted files merged into one are still a
    resume point); a last line cut mid-write is ignored; a source that does not exist gives
    nothing (a first ``make default-policy`` has no records yet). Raises
    :class:`UserInputError` for an unreadable file or a line that is no record.
    """
    carried = CarriedOver()
    wanted_set, taken = set(wanted), set(done)
    for source in map(Path, sources):
        if not source.exists():
            carried.missing.append(str(source))
            continue
        for question, lines in _records_by_question(source).items():
            if question in taken or question not in wanted_set:
                continue
            if finished_questions(lines.values()) != {question}:
                continue  # cut short: collected again
            if any(r.get("collection") != dict(collection) for r in lines.values()):
                carried.other_settings.add(question)
                continue
            carried.lines.extend(lines)
            carried.questions.add(question)
            taken.add(question)
    carried.other_settings -= carried.questions
    return carried


def _records_by_question(
    source: Path, reshape: Callable[[dict[str, Any]], dict[str, Any]] | None = None
) -> dict[Question, dict[str, dict[str, Any]]]:
    """The records of a records file by question, keyed by their line (each distinct line
    once: two sorted files merged into one repeat lines). With ``reshape`` each record is
    reshaped first and keyed by its new line (:func:`~dynakrag.files.jsonl_line`)."""
    by_question: dict[Question, dict[str, dict[str, Any]]] = {}
    for line, record in _record_lines(source):
        if reshape is not None:
            record = reshape(record)
            line = jsonl_line(record)
        by_question.setdefault(_question(record), {}).setdefault(line, record)
    return by_question


def _record_lines(source: Path) -> Iterable[tuple[str, dict[str, Any]]]:
    """``(line, record)`` of each record of a records file, the line as written."""
    try:
        data = source.read_bytes()
        text = (gzip.decompress(data) if source.suffix == ".gz" else data).decode("utf-8")
    except (OSError, EOFError, UnicodeDecodeError, gzip.BadGzipFile) as exc:
        raise UserInputError(f"cannot read trajectories {source}: {exc}") from None
    for _number, line, record in _parsed_records(source, text.splitlines()):
        yield line, record


def _parsed_records(source: Path, lines: list[str]) -> Iterator[tuple[int, str, dict[str, Any]]]:
    """``(line number, line, record)`` of each record line; a last line a kill cut short ends
    the file, any other unreadable line is a :class:`UserInputError`."""
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except (json.JSONDecodeError, RecursionError):
            if number == len(lines):
                return  # the line a kill cut short
            raise UserInputError(f"{source} line {number}: invalid JSON") from None
        if not isinstance(record, dict) or record.get("schema") != RECORD_SCHEMA:
            raise UserInputError(f"{source} line {number}: not a {RECORD_SCHEMA} record")
        try:
            check_record(record)
        except ValidationError as exc:
            raise UserInputError(f"{source} line {number}: {one_line(exc)}") from None
        yield number, line, record


def shareable(record: Mapping[str, Any]) -> dict[str, Any]:
    """``record`` without the fields that hold the data's text (:data:`TEXT_FIELDS`), the
    other fields in their order: what may ship beside a policy. Dropping is idempotent."""
    return {key: value for key, value in record.items() if key not in TEXT_FIELDS}


def pack_records(
    sources: Sequence[str | os.PathLike[str]], out: str | os.PathLike[str]
) -> tuple[int, int]:
    """Write the finished questions of the records files ``sources`` (``.gz`` too) to
    ``out`` as records that may ship: each :func:`shareable`, repeated lines once, sorted as
    ``LC_ALL=C sort`` sorts (by their UTF-8 bytes), gzip-compressed without a name or a time
    (the same records give the same bytes). Records of questions a kill cut short are left
    out. Returns ``(records, questions)`` written. UserInputError for a file that is no
    records file."""
    lines: set[str] = set()
    finished: set[Question] = set()
    for source in map(Path, sources):
        if not source.exists():
            raise UserInputError(f"no records file {source}")
        for question, records in _records_by_question(source, shareable).items():
            if finished_questions(records.values()) == {question}:
                lines.update(records)
                finished.add(question)
    ordered = sorted(lines, key=lambda line: line.encode("utf-8"))
    payload = "".join(line + "\n" for line in ordered).encode("utf-8")
    with atomic_writer(Path(out)) as handle:
        handle.write(gzip.compress(payload, compresslevel=9, mtime=0))
    return len(ordered), len(finished)

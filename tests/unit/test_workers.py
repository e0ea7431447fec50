"""dynakrag.workers without a cluster: the resume journal and the client's argument checks."""

from __future__ import annotations

from pathlib import Path

import pytest

from dynakrag.errors import UserInputError
from dynakrag.workers import (
    Journal,
    RecordJournal,
    dask_client,
    in_order,
    journal_path,
    pending,
    resumed,
    worker_cached,
)

SETTINGS = {"kind": "collect", "seed": 13}


def test_journal_keeps_finished_questions_across_runs(tmp_path: Path) -> None:
    path = journal_path(tmp_path / "out.jsonl")
    assert path.name == "out.jsonl.partial.jsonl"
    with Journal(path, SETTINGS) as journal:
        journal.add("q1", [{"label": 0.5}])
        journal.add("q2", [])
    again = Journal(path, dict(SETTINGS))
    assert again.done == {"q1": [{"label": 0.5}], "q2": []}
    assert pending(["q1", "q2", "q3"], str, again.done) == ["q3"]
    again.add("q3", [{"label": 1.0}])
    again.remove()
    assert not path.exists()


def test_a_line_cut_by_a_crash_is_redone(tmp_path: Path) -> None:
    path = tmp_path / "j.jsonl"
    with Journal(path, SETTINGS) as journal:
        journal.add("q1", [1])
    with path.open("a") as file:
        file.write('{"key": "q2", "value": [2')  # the process died mid-line
    assert Journal(path, SETTINGS).done == {"q1": [1]}


def test_a_journal_of_other_settings_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "j.jsonl"
    with Journal(path, SETTINGS) as journal:
        journal.add("q1", [1])
    with pytest.raises(UserInputError, match="other settings"):
        Journal(path, {**SETTINGS, "seed": 14})
    path.write_text("not a journal\n")
    with pytest.raises(UserInputError, match="not a dynakrag journal"):
        Journal(path, SETTINGS)


def test_a_journal_line_its_load_refuses_is_named_in_one_line(tmp_path: Path) -> None:
    def positive(value: object) -> int:
        if not isinstance(value, int) or value < 1:
            raise ValueError(f"not a positive count: {value!r}")
        return value

    path = tmp_path / "j.jsonl"
    with Journal(path, SETTINGS) as journal:
        journal.add("q1", 1)
        journal.add("q2", -2)
    with pytest.raises(UserInputError) as refused:
        Journal(path, SETTINGS, load=positive)
    message = str(refused.value)
    assert message.startswith(f"{path} line 3: not a positive count: -2") and "\n" not in message
    assert Journal(path, SETTINGS).done == {"q1": 1, "q2": -2}  # no load: read as written


def test_a_journal_keeps_typed_values_and_writes_their_dump(tmp_path: Path) -> None:
    """``dump`` makes the line, ``load`` the value read back: ``done`` holds the typed value,
    the file its JSON form."""
    path = tmp_path / "j.jsonl"
    with Journal(path, SETTINGS, load=complex, dump=str) as journal:
        journal.add("q1", 1 + 2j)
        assert journal.done == {"q1": 1 + 2j}
    assert path.read_text().splitlines()[1] == '{"key": "q1", "value": "(1+2j)"}'
    assert Journal(path, SETTINGS, load=complex).done == {"q1": 1 + 2j}


def test_a_cut_line_is_cut_away_before_the_next_one(tmp_path: Path) -> None:
    path = tmp_path / "j.jsonl"
    with Journal(path, SETTINGS) as journal:
        journal.add("q1", [1])
    with path.open("a") as file:
        file.write('{"key": "q2", "value": [2')
    journal = Journal(path, SETTINGS)
    assert journal.cut_line
    journal.add("q2", [2])
    journal.close()
    lines = path.read_text().splitlines()
    assert len(lines) == 3 and lines[-1] == '{"key": "q2", "value": [2]}'


def test_record_journal_keeps_bare_records_with_the_same_resume_rule(tmp_path: Path) -> None:
    path = tmp_path / "runs" / "chain.jsonl"
    with RecordJournal(path) as journal:
        journal.add("q1", {"id": "q1", "em": 1.0})
        with pytest.raises(ValueError, match="must carry"):
            journal.add("q2", {"id": "other"})
    with path.open("a") as file:
        file.write('{"id": "q2", "em"')  # the process died mid-line
    again = RecordJournal(path)
    assert again.done == {"q1": {"id": "q1", "em": 1.0}} and again.cut_line
    again.add("q2", {"id": "q2", "em": 0.0})
    again.close()
    assert path.read_text().splitlines()[1] == '{"id": "q2", "em": 0.0}'  # plain JSON Lines
    path.write_text('{"id": "q1"}\n[1, 2]\n')
    with pytest.raises(UserInputError, match="line 2: not a record with a 'id'"):
        RecordJournal(path)


def test_resumed_runs_only_what_the_store_lacks_and_writes_each_result(tmp_path: Path) -> None:
    path = tmp_path / "j.jsonl"
    with Journal(path, SETTINGS) as journal:
        journal.add("b", "B")
    ran: list[list[str]] = []

    def run(todo: list[str]) -> list[tuple[str, str]]:
        ran.append(todo)
        return [(item, item.upper()) for item in todo if item != "d"]  # "d" is left out

    with Journal(path, SETTINGS) as journal:
        finished = list(resumed(["a", "b", "c", "d"], str, run, journal))
        assert ran == [["a", "c", "d"]] and finished == [("a", "A"), ("c", "C")]
        assert in_order(["a", "b", "c"], str, journal.done) == ["A", "B", "C"]
    assert set(Journal(path, SETTINGS).done) == {"a", "b", "c"}  # "d" is redone by a rerun


def test_worker_cache_builds_once_per_key() -> None:
    built: list[str] = []

    def build(name: str) -> str:
        built.append(name)
        return name.upper()

    assert worker_cached(("t", "a"), lambda: build("a")) == "A"
    assert worker_cached(("t", "a"), lambda: build("a")) == "A"
    assert worker_cached(("t", "b"), lambda: build("b")) == "B"
    assert built == ["a", "b"]


def test_client_needs_exactly_one_of_workers_and_scheduler() -> None:
    with pytest.raises(UserInputError, match="either"), dask_client():
        pass
    with pytest.raises(UserInputError, match="either"), dask_client(2, "tcp://127.0.0.1:1"):
        pass


def test_an_unreachable_scheduler_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    import socket

    monkeypatch.setattr("dynakrag.workers.SCHEDULER_TIMEOUT_S", 1)
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    address = f"tcp://127.0.0.1:{port}"
    expected = f"cannot reach the Dask scheduler at {address}"
    with pytest.raises(UserInputError, match=expected), dask_client(scheduler=address):
        pass


def test_a_lost_table_creation_race_is_tried_again(monkeypatch: pytest.MonkeyPatch) -> None:
    """Workers racing to create the records table: the loser writes again, at most 3 tries;
    any other error is raised at once."""
    errors = pytest.importorskip("psycopg.errors")
    from dynakrag.training import trajectories
    from dynakrag.training.workers import _write_question

    calls: list[str] = []
    script: list[BaseException] = []

    def write(log: str, records: list[dict[str, object]]) -> None:
        calls.append(log)
        if script:
            raise script.pop(0)

    monkeypatch.setattr(trajectories, "write_log_records", write)
    script[:] = [errors.DuplicateTable("records exists"), errors.UniqueViolation("pg_type")]
    _write_question("postgresql://db", [{"question": "q"}])
    assert calls == ["postgresql://db"] * 3

    calls.clear()
    script[:] = [errors.DuplicateObject(f"lost {n}") for n in range(4)]
    with pytest.raises(errors.DuplicateObject, match="lost 2"):
        _write_question("postgresql://db", [])
    assert len(calls) == 3

    calls.clear()
    script[:] = [OSError("disk full")]
    with pytest.raises(OSError, match="disk full"):
        _write_question("postgresql://db", [])
    assert len(calls) == 1

"""Faults at scale on the disk: ``ask --log`` into a SQLite log, and an evaluation's journal,
on a disk that fills (a small tmpfs as root, else a file-size limit): the run still prints
its answer, then one line naming the log and why; what was written stays readable.

Each test reports a row of RELIABILITY.md's "Faults at scale" table; fast (CI runs them).
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import subprocess
from collections.abc import Iterator
from pathlib import Path

from dynakrag import cli
from tests.reliability.scale_faults import DEMO, FAULT_MARKS, FaultRow, Report, write_demo_corpus

pytestmark = FAULT_MARKS


@contextlib.contextmanager
def small_disk(folder: Path, size_kb: int) -> Iterator[str]:
    """``folder`` on a ``size_kb`` tmpfs (root), else this process limited to files of
    ``size_kb`` (RLIMIT_FSIZE); yields which."""
    import resource

    folder.mkdir(parents=True, exist_ok=True)
    mounted = (
        subprocess.run(
            ["mount", "-t", "tmpfs", "-o", f"size={size_kb}k", "tmpfs", str(folder)],
            capture_output=True,
            check=False,
        ).returncode
        == 0
        if os.geteuid() == 0
        else False
    )
    if mounted:
        try:
            yield "tmpfs"
        finally:
            subprocess.run(["umount", "-l", str(folder)], check=False)
        return
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    resource.setrlimit(resource.RLIMIT_FSIZE, (size_kb * 1024, hard))
    try:
        yield "RLIMIT_FSIZE"
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))


DISK_KB = 1536
"""The log disk: room for a few dozen logged runs and an evaluation's journal."""


def test_log_disk_full(fake_model, tmp_path: Path, capsys, fault_row: Report) -> None:
    """``ask --log`` into a SQLite log on a full disk, and an eval journal on it: the run the
    disk filled under still prints its answer, then a one-line error naming the log and why
    (exit 1); what was written before stays readable."""
    from dynakrag.training.trajectories import list_threads, read_transitions
    from dynakrag.workers import Journal, JournalWriteError

    corpus = write_demo_corpus(tmp_path / "demo.jsonl")
    disk = tmp_path / "disk"
    questions = [e.question for e in DEMO]
    finished, error, journal_error, kept, answered = 0, "", "", 0, False
    with small_disk(disk, DISK_KB) as how:
        log = disk / "runs.sqlite"
        journal = Journal(disk / "eval.json.partial.jsonl", {"run": 1})
        for number in range(100):  # questions an evaluation finished before the disk filled
            journal.add(f"q{number}", {"answer": "x" * 256})
        for number in range(150):
            argv = ["ask", questions[number % len(questions)], "--corpus", str(corpus)]
            code = cli.main([*argv, "--log", str(log), "--quiet"])
            captured = capsys.readouterr()
            if code != 0:
                error = captured.err.strip()
                last = (captured.out.strip().splitlines() or [""])[-1]
                answered = last.startswith(("Answer:", "No answer:"))
                break
            finished += 1
        try:
            for number in range(100, 10_000):
                journal.add(f"q{number}", {"answer": "x" * 256})
        except JournalWriteError as exc:
            journal_error = str(exc)
        finally:
            journal.close()
        kept = len(Journal(disk / "eval.json.partial.jsonl", {"run": 1}).done)
        with contextlib.closing(sqlite3.connect(str(log))) as conn:
            integrity = conn.execute("PRAGMA integrity_check").fetchone()[0]
        readable = sum(1 for thread in list_threads(log) if read_transitions(log, thread))
    fault_row(
        FaultRow(
            f"log disk full ({how}, {DISK_KB} KiB)",
            "ask --log FILE.sqlite + eval journal",
            finished + 1,
            finished + int(answered),
            int(not answered),
            0,
            0,
            None,
            f"{'answer printed, then ' if answered else ''}error: cannot write the log: "
            f"{error.partition(f'{log}: ')[2].split(';')[0][:60]}; "
            f"{readable} runs and {kept} journal lines readable",
        )
    )
    assert error.startswith("dynakrag: error: cannot write the trajectory log "), error
    assert "\n" not in error and answered
    assert "full" in error or "space" in error.lower() or "large" in error.lower()
    assert integrity == "ok" and readable >= finished > 0, (error, log.stat().st_size)
    assert journal_error and "\n" not in journal_error and kept >= 100

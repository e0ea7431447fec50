"""Progress lines in a log file vs a live bar on a terminal."""

from __future__ import annotations

import io

from dynakrag.progress import progress_bar


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_a_file_gets_one_line_every_few_percent_without_carriage_returns() -> None:
    out = io.StringIO()
    for _ in progress_bar(range(200), desc="collecting", unit="question", file=out):
        pass
    text = out.getvalue()
    assert "\r" not in text
    lines = text.splitlines()
    assert 15 <= len(lines) <= 25, lines  # about one per 5% (plus the first and last)
    assert lines[-1].startswith("collecting: 100%") and "200/200" in lines[-1]


def test_a_terminal_gets_the_live_bar() -> None:
    out = _Terminal()
    for _ in progress_bar(range(50), desc="x", file=out, mininterval=0):
        pass
    assert "\r" in out.getvalue()


def test_manual_updates_and_unknown_totals_write_lines() -> None:
    out = io.StringIO()
    with progress_bar(total=10, desc="trees", file=out) as bar:
        for _ in range(10):
            bar.update(1)
    assert "10/10" in out.getvalue().splitlines()[-1]
    unknown = io.StringIO()
    for _ in progress_bar(iter(range(5)), desc="rows", file=unknown):
        pass
    assert unknown.getvalue().strip().splitlines()[-1].startswith("rows: 5")

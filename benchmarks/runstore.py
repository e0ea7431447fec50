"""What the long model-bound benchmarks share: a resumable store of finished runs with progress
lines and an ETA, the compact record of one evaluation, and the tests' scripted reader for smoke
runs without a model.

A benchmark is a list of runs (one ``evaluate`` each). :class:`RunStore` keeps every finished
run as one JSON file under ``<out-dir>/<name>-runs/``; a rerun after a kill reads those and
computes only the rest, and the LLM disk cache (``evaluate(cache=True)``) makes even a run that
was cut halfway cheap to redo.
"""

from __future__ import annotations

import hashlib
import json
import re
import statistics
import sys
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

from dynakrag.files import json_safe, read_json, write_json
from dynakrag.workers import RecordJournal, in_order, resumed

_REPO = Path(__file__).resolve().parent.parent
Item = TypeVar("Item")


def file_name(text: str) -> str:
    """``text`` with every run of characters unsafe in a file name made one ``_``."""
    return re.sub(r"[^A-Za-z0-9._=-]+", "_", text)


def settings_digest(settings: Mapping[str, Any]) -> str:
    """A short hash of a run's settings (JSON-able), for the name of the file it is kept in:
    a run of other settings is another file."""
    return hashlib.sha256(json.dumps(settings, sort_keys=True).encode()).hexdigest()[:10]


def journalled_records(
    items: Sequence[Item],
    key: Callable[[Item], str],
    path: Path,
    compute: Callable[[Item], dict[str, Any]],
    progress: Progress,
    describe: Callable[[Item, dict[str, Any]], str],
) -> list[dict[str, Any]]:
    """The records of one (method, setting) run over ``items``, in their order: those its
    journal at ``path`` holds, and ``compute(item)``'s for the rest, journalled as each is
    done (:func:`~dynakrag.workers.resumed`, the resume rule of every run). The journal is
    bare JSON lines, each record keyed by ``key(item)`` in its ``"id"``
    (:class:`~dynakrag.workers.RecordJournal`). ``describe(item, record)`` ends the item's
    progress line."""
    journal = RecordJournal(path, key_field="id")

    def computed(todo: list[Item]) -> Iterator[tuple[Item, dict[str, Any]]]:
        for item in todo:
            began = time.perf_counter()
            record = compute(item)
            progress.computed(time.perf_counter() - began, describe(item, record))
            yield item, record

    for _ in resumed(items, key, computed, journal, bar=progress.bar):
        pass
    return in_order(items, key, journal.done)


class Progress:
    """Progress lines with an ETA over a benchmark's runs, and the progress "bar" of each run
    through :func:`~dynakrag.workers.resumed` (``progress.bar``): ``computed(s)`` per item
    computed now; the items done before only count."""

    def __init__(self, label: str, total: int, *, quiet: bool = False) -> None:
        self.label, self.total, self.quiet = label, total, quiet
        self.done = 0
        self._seconds: list[float] = []

    def bar(self, items: int, done_before: int) -> Progress:
        """For one run of ``items``, ``done_before`` of them journalled by an earlier run."""
        self.done += done_before
        return self

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc_info: object) -> None:
        return None

    def update(self, count: int) -> None:
        """Nothing: :meth:`computed` counts the items run now (it prints their line)."""

    def computed(self, seconds: float, text: str) -> None:
        self.done += 1
        self._seconds.append(seconds)
        eta = statistics.fmean(self._seconds) * (self.total - self.done)
        if not self.quiet:
            print(
                f"[{self.label}] {self.done}/{self.total} {text}: {seconds:.1f} s; "
                f"ETA {eta / 60:.1f} min",
                file=sys.stderr,
                flush=True,
            )


def result_record(result: Any, seconds: float) -> dict[str, Any]:
    """What every journal keeps of one method run (a ``MethodResult``) besides its question."""
    return {
        "prediction": result.prediction,
        "abstained": result.abstained,
        "abstain_reason": result.abstain_reason,
        "answer_citations": result.answer_citations,
        "llm_calls": result.llm_calls,
        "tokens": result.prompt_tokens + result.completion_tokens,
        "latency_s": round(seconds, 3),
    }


class _RunFiles(Mapping[str, dict[str, Any]]):
    """The finished runs of a directory, by key, read when asked for."""

    def __init__(self, store: RunStore) -> None:
        self._store = store

    def __getitem__(self, key: str) -> dict[str, Any]:
        path = self._store.path(key)
        if not path.is_file():
            raise KeyError(key)
        return read_json(path)

    def __contains__(self, key: object) -> bool:
        return isinstance(key, str) and self._store.path(key).is_file()

    def __iter__(self) -> Iterator[str]:
        return (path.stem for path in sorted(self._store.directory.glob("*.json")))

    def __len__(self) -> int:
        return sum(1 for _ in self)


class RunStore:
    """Finished runs as JSON files in ``directory`` (a :class:`~dynakrag.workers.ResultStore`
    whose items are whole runs); ``run`` computes only missing ones, through the one executor
    and its resume rule (:func:`dynakrag.workers.resumed`): a run is done once its file is
    written whole."""

    def __init__(self, directory: Path, total: int, label: str, *, quiet: bool = False) -> None:
        self.directory = directory
        self.total = total
        self.label = label
        self.quiet = quiet
        self.finished = 0
        self._computed_s: list[float] = []

    def path(self, key: str) -> Path:
        return self.directory / (file_name(key) + ".json")

    @property
    def done(self) -> Mapping[str, dict[str, Any]]:
        return _RunFiles(self)

    def add(self, key: str, value: dict[str, Any]) -> None:
        write_json(self.path(key), value, default=str)

    def run(self, key: str, compute: Callable[[], dict[str, Any]]) -> dict[str, Any]:
        """The stored result of ``key``, or ``compute()``'s, stored now."""
        self.finished += 1
        if key in self.done:
            self._say(f"{key}: done earlier ({self.path(key).name})")
            return self.done[key]

        def timed(todo: list[str]) -> Iterator[tuple[str, dict[str, Any]]]:
            for item in todo:
                started = time.perf_counter()
                result = json_safe(compute())
                self._computed_s.append(time.perf_counter() - started)
                yield item, result

        (_, result), *_ = resumed([key], lambda item: item, timed, self)
        left = self.total - self.finished
        eta = statistics.fmean(self._computed_s) * left
        self._say(f"{key}: {self._computed_s[-1]:.0f} s; {left} left, ETA {eta / 60:.1f} min")
        return result

    def _say(self, text: str) -> None:
        if not self.quiet:
            print(
                f"[{self.label}] {self.finished}/{self.total} {text}", file=sys.stderr, flush=True
            )


def write_results(out_dir: Path, name: str, result: Any, text: str, **json_options: Any) -> None:
    """A benchmark's outputs: ``<name>.json`` (``result``) and ``<name>.md`` (``text``) under
    ``out_dir``, and the table printed."""
    out_dir.mkdir(parents=True, exist_ok=True)
    write_json(out_dir / f"{name}.json", result, **json_options)
    (out_dir / f"{name}.md").write_text(text, encoding="utf-8")
    print(text)


def first_decision(question: dict[str, Any]) -> dict[str, Any]:
    """The explanation of a question's first controller decision (``{}`` for other methods)."""
    trace = question.get("details", {}).get("trace") or []
    return dict(trace[0].get("explanation") or {}) if trace else {}


def compact(result: dict[str, Any]) -> dict[str, Any]:
    """What a benchmark keeps of ``evaluate``'s result: the summary, the generator and per
    question its tokens, support recall, F1 / EM and the λ its controller used."""
    questions = []
    for q in result["questions"]:
        decision = first_decision(q)
        questions.append(
            {
                "id": q["id"],
                "tokens": q["prompt_tokens"] + q["completion_tokens"],
                "support_recall": q["support_recall"],
                "f1": q["f1"],
                "em": q["em"],
                "cost_lambda": decision.get("cost_lambda"),
                "lambda_source": decision.get("lambda_source"),
            }
        )
    meta = result["meta"]
    return {
        "summary": result["summary"],
        "models": meta.get("models"),
        "llm_cache": meta.get("llm_cache"),
        "method_options": meta.get("method_options"),
        "questions": questions,
    }


def scripted_reader(datasets: Sequence[str], splits: Sequence[str], limit: int | None) -> Any:
    """The test suite's scripted reader (``tests.fakes.demo_chat_model``): knows the gold
    answers of the first ``limit`` questions of each split and says one only when the evidence
    states it; for smoke runs without a model."""
    if str(_REPO) not in sys.path:
        sys.path.insert(0, str(_REPO))  # tests/ is a package at the repository root
    from dynakrag.data.datasets import load_examples
    from tests.fakes import demo_chat_model

    answers = {
        ex.question: ex.answers[0] if ex.answers else ""
        for dataset in datasets
        for split in splits
        for ex in load_examples(dataset, split, limit)
    }
    return demo_chat_model(answers)


def figure(n_rows: int, n_cols: int, height: float) -> tuple[Any, Any]:
    """A headless matplotlib figure (object API on an Agg canvas) and its axes grid."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(max(6.0, 4.5 * n_cols), height * n_rows), dpi=100)
    FigureCanvasAgg(fig)
    return fig, fig.subplots(n_rows, n_cols, squeeze=False)


def fmt(value: Any, digits: int = 3) -> str:
    """A table cell: ``–`` for None, floats to ``digits`` places."""
    if value is None:
        return "–"
    return f"{value:.{digits}f}" if isinstance(value, float) else str(value)

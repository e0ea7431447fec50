"""Human-readable views of an evaluation result (the
:class:`~dynakrag.eval.records.EvalResult` :func:`~dynakrag.eval.runner.evaluate` returns): a
markdown report, PNG plots, and side-by-side tables of several runs.

Plots are drawn with matplotlib's object API on an Agg canvas (no pyplot state, no display), so
they work headless and leave a notebook's backend alone.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from dynakrag.eval.records import EvalResult

__all__ = [
    "COMPARE_COLUMNS",
    "compare_table",
    "markdown_report",
    "plot_report",
    "report_paths",
    "write_report",
]

COMPARE_COLUMNS: tuple[tuple[str, str], ...] = (
    ("support_recall", "SR"),
    ("em", "EM"),
    ("f1", "F1"),
    ("anls", "ANLS"),
    ("context_precision", "Ctx P"),
    ("context_recall", "Ctx R"),
    ("context_f1", "Ctx F1"),
    ("anc", "ANC"),
    ("retrieval_calls", "retr."),
    ("sr_per_retrieval_call", "SR/retr."),
    ("llm_calls", "LLM"),
    ("prompt_tokens", "prompt tok"),
    ("completion_tokens", "compl. tok"),
    ("latency_s", "latency s"),
    ("abstain_rate", "abstain"),
)
_RATIOS = frozenset(
    {
        "support_recall",
        "em",
        "f1",
        "anls",
        "context_precision",
        "context_recall",
        "context_f1",
        "sr_per_retrieval_call",
        "abstain_rate",
    }
)


def report_paths(out: str | Path) -> tuple[Path, Path]:
    """``(<out>.md, <out>.png)``: the JSON path with its suffix replaced."""
    path = Path(out)
    return path.with_suffix(".md"), path.with_suffix(".png")


def _fmt(key: str, value: Any) -> str:
    if value is None:
        return "–"
    if isinstance(value, float):
        if key in _RATIOS:
            return f"{value:.3f}"
        return f"{value:.1f}" if abs(value) >= 100 else f"{value:.2f}"
    return str(value)


def _cell(text: Any, width: int = 60) -> str:
    flat = " ".join(str(text).split()).replace("|", "\\|")
    return flat if len(flat) <= width else flat[: width - 1] + "…"


def _label(meta: dict[str, Any]) -> str:
    """``method (policy, w/o ablations) [no answer]``; a policy file by its name only."""
    label = str(meta.get("method", "?"))
    options = meta.get("method_options") or {}
    parts = []
    policy = options.get("policy")
    if policy:
        parts.append(Path(policy).name if str(policy).endswith(".npz") else str(policy))
    parts += [f"w/o {name}" for name in options.get("ablate") or ()]
    if parts:
        label += f" ({', '.join(parts)})"
    if meta.get("no_answer"):
        label += " [no answer]"
    return label


def compare_table(results: Sequence[EvalResult]) -> str:
    """A markdown table with one row per run: method, data, setting, retriever, n, metrics."""
    header = ["method", "dataset", "setting", "retriever", "n", *(t for _, t in COMPARE_COLUMNS)]
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    for result in results:
        meta, summary = result.get("meta", {}), result.get("summary", {})
        row = [
            _label(meta),
            f"{meta.get('dataset', '?')}/{meta.get('split', '?')}",
            str(meta.get("setting", "?")),
            str(meta.get("retriever", "?")),
            str(summary.get("n", len(result.get("questions", [])))),
            *(_fmt(key, summary.get(key)) for key, _ in COMPARE_COLUMNS),
        ]
        lines.append("| " + " | ".join(row) + " |")
    return "\n".join(lines) + "\n"


def action_counts(result: EvalResult) -> Counter[str]:
    """How often each action ran, over all questions."""
    return Counter(action for q in result.get("questions", []) for action in q.get("actions", []))


def markdown_report(result: EvalResult, *, image: str | None = None) -> str:
    """The run as markdown: set-up, summary, action frequencies and a per-question table."""
    meta, summary = result.get("meta", {}), result.get("summary", {})
    questions = result.get("questions", [])
    models = meta.get("models") or {}
    cache = meta.get("llm_cache") or {}
    commit = meta.get("git_commit") or "unknown"
    if meta.get("git_dirty"):
        commit += " (uncommitted changes)"
    out = [
        f"# {_label(meta)} on {meta.get('dataset')}/{meta.get('split')}",
        "",
        f"- setting: {meta.get('setting')}, retriever: {meta.get('retriever')}, "
        f"questions: {summary.get('n', len(questions))}, seed: {meta.get('seed')}",
        f"- generator: {models.get('llm')}; embeddings: {models.get('embeddings') or '-'}",
        f"- git commit: {commit}",
        f"- LLM cache: {cache.get('hits', 0)} hits, {cache.get('misses', 0)} misses"
        if cache.get("enabled")
        else "- LLM cache: off",
        f"- time: {meta.get('total_s')} s in all, {meta.get('index_build_s')} s building indexes",
        "",
        "## Summary (mean per question)",
        "",
        compare_table([result]),
        "## Actions",
        "",
    ]
    counts = action_counts(result)
    if counts:
        out += ["| action | count | per question |", "|---|---|---|"]
        n = max(1, len(questions))
        out += [f"| {a} | {c} | {c / n:.2f} |" for a, c in counts.most_common()]
    else:
        out.append("(none)")
    out += [
        "",
        "## Questions",
        "",
        "| id | SR | EM | F1 | passages | actions | prediction | gold |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for q in questions:
        out.append(
            "| "
            + " | ".join(
                [
                    _cell(q.get("id"), 30),
                    _fmt("support_recall", q.get("support_recall")),
                    _fmt("em", q.get("em")),
                    _fmt("f1", q.get("f1")),
                    str(len(q.get("evidence", []))),
                    str(len(q.get("actions", []))),
                    _cell(_prediction(q), 40),
                    _cell(" / ".join(q.get("gold_answers", [])), 40),
                ]
            )
            + " |"
        )
    if image:
        out += ["", f"![plots]({image})"]
    return "\n".join(out) + "\n"


def _prediction(question: dict[str, Any]) -> str:
    """The prediction cell: the answer, or why the method abstained."""
    if question.get("abstained"):
        return f"(no answer: {question.get('abstain_reason', '')})"
    return str(question.get("prediction", ""))


def plot_report(result: EvalResult, path: str | Path) -> Path:
    """Two panels into a PNG: the per-question support-recall histogram and action counts."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from matplotlib.ticker import MaxNLocator

    questions = result.get("questions", [])
    meta = result.get("meta", {})
    figure = Figure(figsize=(11, 4), dpi=100)
    FigureCanvasAgg(figure)
    left, right = figure.subplots(1, 2)
    recalls = [q["support_recall"] for q in questions if q.get("support_recall") is not None]
    left.hist(recalls, bins=[i / 10 for i in range(11)], color="#4c72b0", edgecolor="white")
    left.set_xlim(0, 1)
    left.yaxis.set_major_locator(MaxNLocator(integer=True))
    left.set_xlabel("support recall")
    left.set_ylabel("questions")
    left.set_title(f"Support recall per question (n={len(recalls)})")
    counts = action_counts(result).most_common()
    if counts:
        names = [name for name, _ in counts][::-1]
        values = [value for _, value in counts][::-1]
        right.barh(names, values, color="#55a868")
        right.xaxis.set_major_locator(MaxNLocator(integer=True))
    else:
        right.text(0.5, 0.5, "no actions", ha="center", va="center")
    right.set_xlabel("times run (all questions)")
    right.set_title("Actions")
    figure.suptitle(
        f"{_label(meta)} · {meta.get('dataset')}/{meta.get('split')} · "
        f"{meta.get('setting')} · {meta.get('retriever')}"
    )
    figure.tight_layout()
    target = Path(path)
    figure.savefig(target, format="png")
    return target


def write_report(result: EvalResult, out: str | Path) -> dict[str, Path]:
    """Write ``<out>.md`` and ``<out>.png`` beside the JSON ``out``; returns their paths."""
    md_path, png_path = report_paths(out)
    plot_report(result, png_path)
    md_path.write_text(markdown_report(result, image=png_path.name), encoding="utf-8")
    return {"markdown": md_path, "plot": png_path}

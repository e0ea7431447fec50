"""Demo world: does the graph follow each of its generated multi-hop chains to the end?

Runs the graph over every question of the generated demo corpus (``dynakrag demo``'s world: 2-,
3- and 4-hop bridge chains and comparisons over invented names, which no model can know) for
each configuration variant, side by side in one run. Reported per variant and per hop count:
exact match and F1 of the answer, the share of questions whose every gold passage was retrieved
(the chain followed to its end), the abstain rate, and model calls and tokens per question.

A variant is ``NAME`` or ``NAME:FIELD=VALUE[,FIELD=VALUE...]`` over the configuration (e.g.
``sequential:sub_question_answering=sequential``; a variant that names no field runs the
configuration's defaults: the chain, 16 steps, 10 retrieval calls); ``method=M`` runs another
method (``naive``, ``ircot``, ``decompose``) instead of the graph. ``ircot`` and ``decompose``
search up to ``max_retrieval_calls`` times: the stored baseline runs had 4, the default before
the chain became it (``ircot:method=ircot,max_retrieval_calls=4`` runs them so again).
``--world-seeds`` runs the worlds of other seeds (default: the shipped world's). Per-question
records, with the run's trace (plan, hops and why each stood or failed, search queries,
retrieved ids), are journalled (``<out-dir>/<name>-runs/<variant>[-w<seed>].jsonl``) so a
killed run resumes; progress with an ETA goes to stderr. Writes ``<name>.json`` and
``<name>.md`` under ``--out-dir``.

    .venv/bin/python benchmarks/demo_world.py \
        --variants joint:sub_question_answering=joint,max_steps=4,max_retrieval_calls=4 \
        sequential:sub_question_answering=sequential,max_steps=4,max_retrieval_calls=4
    .venv/bin/python benchmarks/demo_world.py --fake-llm --limit 4   # smoke, scripted reader
"""

from __future__ import annotations

import argparse
import random
import re
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path
from typing import Any

_HERE = Path(__file__).resolve().parent
if str(_HERE) not in sys.path:
    sys.path.insert(0, str(_HERE))  # the shared helpers beside this script, also when imported

from multihop import add_run_options  # noqa: E402
from runstore import Progress, fmt, journalled_records, result_record, write_results  # noqa: E402

from dynakrag.configuration import Configuration  # noqa: E402
from dynakrag.eval.methods import get_method  # noqa: E402
from dynakrag.eval.metrics import exact_match, f1_score  # noqa: E402
from dynakrag.eval.runner import git_commit  # noqa: E402

SECONDS_PER_QUESTION = 20.0
"""Rough seconds a graph run takes on the embedded 1.5B model on 2 cores, for the first ETA."""


def parse_variant(text: str) -> tuple[str, dict[str, str]]:
    """``NAME:FIELD=VALUE,...`` -> (NAME, {FIELD: VALUE})."""
    name, _, settings = text.partition(":")
    overrides: dict[str, str] = {}
    for pair in filter(None, settings.split(",")):
        field, sep, value = pair.partition("=")
        if not sep or (field not in Configuration.model_fields and field != "method"):
            raise SystemExit(f"demo_world: bad variant setting {pair!r} (FIELD=VALUE)")
        overrides[field] = value
    return name, overrides


def per_template(questions: list[Any], n: int | None) -> list[Any]:
    """The first ``n`` questions of each template, in the world's order (all with None)."""
    if n is None:
        return questions
    seen: dict[str, int] = {}
    kept = []
    for question in questions:
        template = question.id.rsplit("-", 1)[0]
        seen[template] = seen.get(template, 0) + 1
        if seen[template] <= n:
            kept.append(question)
    return kept


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--variants", nargs="+", default=["default"])
    parser.add_argument("--limit", type=int, default=None, help="the first N questions only")
    parser.add_argument(
        "--per-template",
        type=int,
        default=None,
        help="the first N questions of each template (q-<template>-NN) of each world: a sample "
        "of every kind that a later run with a larger N extends from the journals",
    )
    parser.add_argument("--policy", default=None, help="the graph's policy (default: configured)")
    parser.add_argument(
        "--world-seeds",
        type=int,
        nargs="+",
        default=None,
        help="worlds of these seeds (default: the shipped world's seed)",
    )
    parser.add_argument(
        "--reworded",
        action="store_true",
        help="ask each question in another wording (REWORDINGS, one per question, seeded)",
    )
    add_run_options(parser, "demo-world", "the tests' scripted reader (smoke runs)")
    return parser.parse_args(argv)


def run(args: argparse.Namespace) -> dict[str, Any]:
    from dynakrag.data.demo import DEMO_SEED, demo_passages
    from dynakrag.data.demo_corpus import generate_demo_corpus
    from dynakrag.llm.cache import SQLiteLLMCache
    from dynakrag.llm.factory import llm_client_from_config
    from dynakrag.routing.factory import build_searcher, needs_embeddings

    seeds = args.world_seeds or [DEMO_SEED]
    worlds = {seed: generate_demo_corpus(seed) for seed in seeds}
    questions_of = {
        seed: per_template(list(world.questions), args.per_template)[: args.limit]
        for seed, world in worlds.items()
    }
    base = Configuration.from_env()
    chat_model = None
    if args.fake_llm:
        if str(_HERE.parent) not in sys.path:
            sys.path.insert(0, str(_HERE.parent))
        from tests.fakes import demo_chat_model

        chat_model = demo_chat_model(
            {q.question: q.answer for qs in questions_of.values() for q in qs}
        )
        args.no_cache = True  # never mix scripted replies into the real model's cache
    embeddings = None
    if needs_embeddings(base.retriever):
        from dynakrag.retrieval.embeddings import default_embeddings

        embeddings = default_embeddings(batch_size=base.embedding_batch_size)
    variants = [parse_variant(text) for text in args.variants]
    total = len(variants) * sum(len(qs) for qs in questions_of.values())
    print(
        f"[demo-world] {total} runs ({len(variants)} variants x {len(seeds)} worlds); "
        f"first estimate ~{total * SECONDS_PER_QUESTION / 60:.0f} min on the embedded model",
        file=sys.stderr,
        flush=True,
    )
    cache = None if args.no_cache else SQLiteLLMCache.in_dir(base.cache_dir)
    progress = Progress("demo-world", total, quiet=args.quiet)
    runs: dict[str, list[dict[str, Any]]] = {}
    try:
        llm = llm_client_from_config(base, chat_model=chat_model, cache=cache)
        for seed in seeds:
            searcher = build_searcher(
                base.retriever,
                list(demo_passages(worlds[seed])),
                embeddings=embeddings,
                seed=args.seed,
            )
            for name, overrides in variants:
                settings = dict(overrides)
                method_name = settings.pop("method", "dynakrag")
                options = {"policy": args.policy} if args.policy else {}
                method = get_method(method_name, **(options if method_name == "dynakrag" else {}))
                cfg = base.merged({**settings, "seed": args.seed})
                suffix = "" if seed == DEMO_SEED else f"-w{seed}"
                answer = partial(
                    answer_record,
                    seed=seed,
                    run=partial(method.run, searcher=searcher, llm=llm, cfg=cfg),
                    reword=args.reworded,
                )
                records = journalled_records(
                    questions_of[seed],
                    lambda question: question.id,
                    args.out_dir / f"{args.name}-runs" / f"{name}{suffix}.jsonl",
                    answer,
                    progress,
                    partial(verdict_line, f"{name} w{seed}"),
                )
                runs.setdefault(name, []).extend(records)
    finally:
        if cache is not None:
            cache.close()
    return {
        "commit": git_commit(),
        "variants": dict(variants),
        "questions": sum(len(qs) for qs in questions_of.values()),
        "world_seeds": seeds,
        "retriever": base.retriever,
        "rows": [row for name, records in runs.items() for row in score(name, records)],
        "runs": runs,
    }


REWORDINGS: dict[str, tuple[str, tuple[str, ...]]] = {
    # template: (pattern of the templated question, other wordings of it)
    "hq": (
        r"company where (?P<e>.+) works\?$",
        (
            "{e} is employed by a company. In what city is that company headquartered?",
            "Name the city where the employer of {e} has its headquarters.",
        ),
    ),
    "maker": (
        r"makes the (?P<p>.+)\?$",
        (
            "The {p} is produced by some firm. Who set up that firm?",
            "Name the person who founded the maker of the {p}.",
        ),
    ),
    "country": (
        r"founder of (?P<c>.+) born\?$",
        (
            "{c} was started by someone. Which country was that person born in?",
            "Name the country of birth of the person who founded {c}.",
        ),
    ),
    "river": (
        r"company where (?P<e>.+) works\?$",
        (
            "{e} works for a firm whose founder was born in some city. Which river runs "
            "through that city?",
            "Name the river that flows through the city where the founder of the employer of "
            "{e} was born.",
        ),
    ),
    "compare": (
        r"earlier, (?P<a>.+) or (?P<b>.+)\?$",
        ("Of {a} and {b}, whose birth came first?", "Between {a} and {b}, who is the older one?"),
    ),
}
"""Other wordings of the demo templates (written for the benchmark, not for the graph: no rule,
prompt or threshold of the graph reads them)."""


def answer_record(
    question: Any, *, seed: int, run: Callable[[str], Any], reword: bool
) -> dict[str, Any]:
    """Ask ``question`` (reworded with ``reword``) through ``run``; its journal record."""
    asked = reworded(question, seed) if reword else question.question
    began = time.perf_counter()
    result = run(asked)
    seconds = time.perf_counter() - began
    return {**question_record(question, seed, result, seconds), "question": asked}


def verdict_line(run: str, question: Any, record: dict[str, Any]) -> str:
    """The end of a question's progress line: the run, the question and its verdict."""
    return f"{run} {question.id} ({'right' if record['em'] else 'wrong'})"


def reworded(question: Any, seed: int) -> str:
    """``question``'s text in another wording, chosen by ``seed`` and its id."""
    template = question.id.split("-")[1]
    pattern, wordings = REWORDINGS[template]
    match = re.search(pattern, question.question)
    if match is None:
        raise SystemExit(f"demo_world: cannot reword {question.question!r}")
    choice = random.Random(f"{seed}:{question.id}").choice(wordings)
    return choice.format(**match.groupdict())


def question_record(question: Any, seed: int, result: Any, seconds: float) -> dict[str, Any]:
    """One question's journal record: scores, cost and the run's trace (plan, hops, queries,
    retrieved ids), so a failure can be classified from the records."""
    trace = result.details.get("trace", [])
    retrieved = {pid for step in trace for pid in step.get("added", [])}
    retrieved |= {str(doc.get("id")) for doc in result.evidence}  # methods without a trace
    plan = next((step["plan"] for step in trace if step.get("plan")), None)
    return {
        "id": question.id,
        "world_seed": seed,
        "kind": question.kind,
        "hops": question.hops,
        "question": question.question,
        "gold": question.answer,
        "gold_support": list(question.support),
        "em": exact_match(result.prediction, [question.answer]),
        "f1": f1_score(result.prediction, [question.answer]),
        "chain_found": set(question.support) <= retrieved,
        "support_found": len(set(question.support) & retrieved),
        "support": len(question.support),
        "actions": result.actions,
        "abstain_reason": result.abstain_reason,
        "plan": plan,
        "chain": [
            {
                k: hop.get(k)
                for k in (
                    "question",
                    "expects",
                    "status",
                    "answer",
                    "passage",
                    "sentence",
                    "via",
                    "queries",
                    "rejected",
                    "why",
                )
            }
            for hop in result.details.get("hops", [])
        ],
        "searches": [
            {
                "action": step.get("action"),
                "query": step.get("search_query"),
                "added": step.get("added", []),
            }
            for step in trace
            if step.get("search_query")
        ],
        **result_record(result, seconds),
    }


def failure_cause(record: dict[str, Any]) -> str | None:
    """Why a question was missed, from its journal record (None: answered right): for the
    graph's chain, the first hop that did not stand and why; else wrong or abstained."""
    if record["em"]:
        return None
    chain = record.get("chain") or []
    if not chain:
        return "abstained" if record.get("abstained") else "wrong answer"
    # A hop extended through an entity (a city on the way to a country) counts as two.
    steps = len(chain) + sum(len(hop.get("via") or []) for hop in chain)
    merged = "plan merged hops" if record["kind"] == "bridge" and steps < record["hops"] else ""
    stuck = next((hop for hop in chain if hop.get("status") != "resolved"), None)
    if stuck is None:
        cause = "wrong answer from a complete chain"
    elif stuck.get("rejected"):
        cause = "hop answer did not stand"
    elif "no passage" in str(stuck.get("why")):
        cause = "hop entity's passage not found"
    else:
        cause = "hop not stated in its entity's passages"
    return f"{cause} ({merged})" if merged else cause


def score(name: str, records: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Rows of one variant: all questions, then each (kind, hops) group."""
    groups: dict[str, list[dict[str, Any]]] = {"all": list(records)}
    for record in records:
        groups.setdefault(f"{record['kind']}-{record['hops']}", []).append(record)
    seeds = sorted({record.get("world_seed") for record in records} - {None})
    if len(seeds) > 1:  # per world too
        for record in records:
            groups.setdefault(f"world-{record['world_seed']}", []).append(record)
    rows = []
    for group, members in groups.items():
        n = len(members)
        rows.append(
            {
                "variant": name,
                "group": group,
                "n": n,
                "em": sum(bool(r["em"]) for r in members) / n,
                "f1": statistics.fmean(r["f1"] for r in members),
                "chain_found": sum(bool(r["chain_found"]) for r in members) / n,
                "abstain_rate": sum(bool(r["abstained"]) for r in members) / n,
                "llm_calls": statistics.fmean(r["llm_calls"] for r in members),
                "tokens": statistics.fmean(r["tokens"] for r in members),
                "latency_s": statistics.fmean(r["latency_s"] for r in members),
            }
        )
    return rows


def causes(result: dict[str, Any]) -> dict[str, dict[str, int]]:
    """Per variant: missed questions by cause (:func:`failure_cause`)."""
    table: dict[str, dict[str, int]] = {}
    for name, records in result["runs"].items():
        for record in records:
            cause = failure_cause(record)
            if cause is not None:
                table.setdefault(name, {})[cause] = table.setdefault(name, {}).get(cause, 0) + 1
    return table


def markdown(result: dict[str, Any]) -> str:
    columns = ["variant", "group", "n", "em", "f1", "chain_found", "abstain_rate", "llm_calls"]
    lines = [
        f"# Demo world ({result['questions']} questions, retriever {result['retriever']}, "
        f"commit {result['commit']})",
        "",
        "chain_found: every gold passage of the question was retrieved during the run.",
        "",
        "| " + " | ".join(columns) + " | tokens | s/question |",
        "|" + "---|" * (len(columns) + 2),
    ]
    for row in result["rows"]:
        cells = [fmt(row[column]) for column in columns]
        lines.append(
            "| " + " | ".join([*cells, f"{row['tokens']:.0f}", f"{row['latency_s']:.1f}"]) + " |"
        )
    missed = causes(result)
    if missed:
        lines += ["", "Missed questions by cause (from the journals):", ""]
        lines += ["| variant | cause | n |", "|---|---|---|"]
        for name, counts in missed.items():
            for cause, n in sorted(counts.items(), key=lambda item: -item[1]):
                lines.append(f"| {name} | {cause} | {n} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    result = run(args)
    write_results(args.out_dir, args.name, result, markdown(result))


if __name__ == "__main__":
    main()

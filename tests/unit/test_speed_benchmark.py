"""The speed benchmark's reading of llama.cpp's server log and its table."""

from __future__ import annotations

import math

from tests.benchmark_scripts import benchmark_module

LOG = """\
INFO:     127.0.0.1:41728 - "POST /v1/chat/completions HTTP/1.1" 200 OK
llama_perf_context_print: prompt eval time =     647.16 ms /    21 tokens (   30.82 ms per token)
Llama.generate: 397 prefix-match hit, remaining 336 prompt tokens to eval
llama_perf_context_print: prompt eval time =    6950.08 ms /   336 tokens (   20.68 ms per token)
llama_perf_context_print:        eval time =     682.12 ms /    15 runs   (   45.48 ms per token)
Llama.generate: 5 prefix-match hit, remaining 325 prompt tokens to eval
llama_perf_context_print: prompt eval time =    7218.28 ms /   325 tokens (   22.21 ms per token)
"""


def test_sent_and_evaluated_prompt_tokens_come_from_the_log() -> None:
    with benchmark_module("speed") as speed:
        sent, evaluated = speed.server_log_tokens(LOG)
    assert evaluated == 21 + 336 + 325
    assert sent == 21 + (397 + 336) + (5 + 325)


def test_the_table_gives_times_as_ratios_to_naive() -> None:
    row = {
        "label": "after",
        "dataset": "hotpotqa",
        "n": 2,
        "p90_s": 3.0,
        "llm_calls": 1.0,
        "server_prompt_tokens_sent": 900.0,
        "server_prompt_tokens_evaluated": 300.0,
        "prefix_reuse": 2 / 3,
        "f1": 0.5,
        "support_recall": 1.0,
    }
    runs = [
        {**row, "method": "naive", "median_s": 2.0},
        {**row, "method": "dynakrag:heuristic", "median_s": 3.0},
    ]
    with benchmark_module("speed") as speed:
        text = speed.table(runs)
        assert math.isnan(speed._percentile([], 0.9))
    heuristic = text.splitlines()[-1].split("|")
    assert heuristic[6].strip() == "1.50" and heuristic[11].strip() == "0.67"

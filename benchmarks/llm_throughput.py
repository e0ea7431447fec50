"""Embedded generator throughput: llama.cpp build variants and settings side by side, one run.

For each configuration (CPU backend variant, threads, batch / micro-batch, flash attention,
KV-cache type, model file) it measures, each in a fresh process:

- through ``llama_cpp.Llama`` directly: prompt tokens/s (a ``--prompt-tokens`` prompt, a
  different opening each repetition so nothing is reused) and generation tokens/s (``--gen-tokens``
  greedy tokens, end-of-text banned so every run generates as many);
- through the embedded server (``--server``): the same prompt and generation over HTTP, read from
  llama.cpp's own timing lines in the server log, plus the request's wall time;
- end to end (``--naive N``): the first N HotpotQA eval questions with the naive method (disk LLM
  cache off), seconds per question and answer F1.

The table shows the machine's CPU flags, and ratios to the first configuration (the portable
build, the reference). JSON + markdown go to ``benchmarks/results/llm-throughput*.{json,md}``.

    .venv/bin/python benchmarks/llm_throughput.py --configs portable zen4 zen4+fa \
        --server --naive 10 --out benchmarks/results/llm-throughput.json

A configuration is ``VARIANT[+fa][+logits][+kv=q8_0][+ub=N][+b=N][+t=N][+model=PATH]``
(``logits``: every prompt token's logits kept, llama-cpp-python's server default): VARIANT is an
installed CPU backend (``portable``, ``zen4``, ..., ``auto``; see
:mod:`dynakrag.llm.cpu_backends`). Run it alone: two model processes on 2 cores slow each other.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

_HERE = Path(__file__).resolve().parent
if str(_HERE) not in sys.path:
    sys.path.insert(0, str(_HERE))  # the shared helpers beside this script

from runstore import fmt  # noqa: E402

RESULTS = _HERE / "results"
_PROMPT_EVAL = re.compile(r"prompt eval time =\s*([\d.]+) ms /\s*(\d+) tokens")
_EVAL = re.compile(r"\s eval time =\s*([\d.]+) ms /\s*(\d+) runs")
# Qwen2.5's end-of-text tokens, banned so that every run generates --gen-tokens tokens.
_QWEN_EOS = (151643, 151645)
_TEXT = (
    "The river town kept its records in a stone hall near the bridge. Every spring the council "
    "read out the names of the families who had arrived, the boats they had built and the fields "
    "they had cleared, and a clerk copied the list into a new book. "
)


def parse_config(spec: str) -> dict[str, Any]:
    """``zen4+fa+kv=q8_0+ub=256`` -> the settings of one configuration."""
    variant, *options = spec.split("+")
    config: dict[str, Any] = {
        "name": spec,
        "cpu_variant": variant,
        "flash_attn": False,
        "kv_cache_type": "f16",
        "n_batch": 512,
        "n_ubatch": 512,
        "n_threads": 2,
        "model": None,
        "logits_all": False,
    }
    for option in options:
        key, _, value = option.partition("=")
        if key == "fa":
            config["flash_attn"] = True
        elif key == "logits":
            config["logits_all"] = True
        elif key == "kv":
            config["kv_cache_type"] = value
        elif key in {"ub", "b", "t"}:
            config[{"ub": "n_ubatch", "b": "n_batch", "t": "n_threads"}[key]] = int(value)
        elif key == "model":
            config["model"] = value
        else:
            raise SystemExit(f"unknown option {option!r} in configuration {spec!r}")
    return config


def _model_path(config: dict[str, Any]) -> str:
    if config["model"]:
        return str(config["model"])
    from dynakrag.configuration import default_cache_dir
    from dynakrag.llm.model_assembly import assemble_model

    return str(assemble_model(default_cache_dir(), progress=False))


def _prompt_tokens(llm: Any, n: int, rep: int) -> list[int]:
    tokens = llm.tokenize(f"Record {rep * 7919}. ".encode() + (_TEXT * 200).encode())
    return tokens[:n]


def direct_worker(config: dict[str, Any], prompt_tokens: int, gen_tokens: int, reps: int) -> dict:
    """Measured in this process: load the backend, then time prompt and generation."""
    from dynakrag.llm.cpu_backends import load_cpu_backend
    from dynakrag.llm.server_settings import kv_cache_ggml_type

    loaded = load_cpu_backend(config["cpu_variant"])
    import llama_cpp
    import numpy as np

    kv_type = kv_cache_ggml_type(config["kv_cache_type"])
    llm = llama_cpp.Llama(
        model_path=_model_path(config),
        n_ctx=4096,
        n_threads=config["n_threads"],
        n_threads_batch=config["n_threads"],
        n_batch=config["n_batch"],
        n_ubatch=config["n_ubatch"],
        flash_attn=config["flash_attn"],
        type_k=kv_type,
        type_v=kv_type,
        logits_all=config["logits_all"],
        verbose=False,
    )
    prompt_rates, gen_rates = [], []
    for rep in range(reps + 1):  # the first repetition warms caches up and is not counted
        llm.reset()
        tokens = _prompt_tokens(llm, prompt_tokens, rep)
        start = time.perf_counter()
        llm.eval(tokens)
        prompt_s = time.perf_counter() - start
        start = time.perf_counter()
        for _ in range(gen_tokens):
            logits = np.ctypeslib.as_array(
                llama_cpp.llama_get_logits_ith(llm.ctx, -1), shape=(llm.n_vocab(),)
            ).copy()
            logits[list(_QWEN_EOS)] = -1e9
            llm.eval([int(logits.argmax())])
        gen_s = time.perf_counter() - start
        if rep:
            prompt_rates.append(len(tokens) / prompt_s)
            gen_rates.append(gen_tokens / gen_s)
    return {
        "loaded_variant": loaded,
        "prompt_tok_s": statistics.median(prompt_rates),
        "gen_tok_s": statistics.median(gen_rates),
    }


def _server_settings(config: dict[str, Any]) -> Any:
    from dynakrag.llm.server_settings import ServerSettings

    return ServerSettings(
        n_threads=config["n_threads"],
        n_batch=config["n_batch"],
        n_ubatch=config["n_ubatch"],
        flash_attn=config["flash_attn"],
        kv_cache_type=config["kv_cache_type"],
        cpu_variant=config["cpu_variant"],
        logits_all=config["logits_all"],
        prompt_cache_mb=0,
    )


def server_run(config: dict[str, Any], prompt_tokens: int, gen_tokens: int, reps: int) -> dict:
    """Prompt and generation through a private embedded server with ``config``'s settings."""
    from dynakrag.llm.server_process import EmbeddedServer

    with tempfile.TemporaryDirectory() as cache:
        model = Path(_model_path(config))
        server = EmbeddedServer(
            Path(cache), model=model, settings=_server_settings(config), progress=False
        )
        with server:
            tokenizer_words = (_TEXT * 200).split(" ")
            prompt_rates, gen_rates, walls = [], [], []
            for rep in range(reps + 1):
                # ~0.75 words a token for this text: cut the prompt to the token count, checked
                # against the server's own count below.
                words = " ".join(tokenizer_words[: int(prompt_tokens * 0.76)])
                body = {
                    "prompt": f"Record {rep * 7919}. {words}",
                    "max_tokens": gen_tokens,
                    "temperature": 0,
                    "logit_bias": {str(token): -100 for token in _QWEN_EOS},
                }
                request = urllib.request.Request(
                    f"{server.base_url}/completions",
                    data=json.dumps(body).encode(),
                    headers={"Content-Type": "application/json"},
                )
                before = server.log_path.stat().st_size if server.log_path else 0
                start = time.perf_counter()
                with urllib.request.urlopen(request, timeout=600) as reply:
                    json.load(reply)
                wall = time.perf_counter() - start
                time.sleep(0.2)  # the timing lines follow the reply
                log = server.log_path.read_bytes()[before:].decode("utf-8", "replace")
                prompt_line, eval_line = _PROMPT_EVAL.search(log), _EVAL.search(log)
                if rep and prompt_line and eval_line:
                    prompt_rates.append(
                        int(prompt_line.group(2)) / float(prompt_line.group(1)) * 1000
                    )
                    gen_rates.append(int(eval_line.group(2)) / float(eval_line.group(1)) * 1000)
                    walls.append(wall)
    return {
        "server_prompt_tok_s": statistics.median(prompt_rates) if prompt_rates else None,
        "server_gen_tok_s": statistics.median(gen_rates) if gen_rates else None,
        "server_request_s": statistics.median(walls) if walls else None,
    }


def naive_run(config: dict[str, Any], questions: int) -> dict:
    """The first ``questions`` HotpotQA eval rows, naive method, disk LLM cache off."""
    from dynakrag.configuration import Configuration
    from dynakrag.eval.runner import evaluate

    settings = _server_settings(config)
    cfg = Configuration.from_env(
        embedded_threads=settings.n_threads,
        embedded_batch_size=settings.n_batch,
        embedded_ubatch_size=settings.n_ubatch,
        embedded_flash_attn=settings.flash_attn,
        embedded_kv_cache_type=settings.kv_cache_type,
        embedded_cpu_variant=settings.cpu_variant,
        embedded_prompt_logprobs=settings.logits_all,
    )
    start = time.perf_counter()
    result = evaluate(
        "hotpotqa",
        split="eval",
        setting="open",
        method="naive",
        limit=questions,
        cfg=cfg,
        progress=False,
        cache=False,
        report=False,
    )
    elapsed = time.perf_counter() - start
    summary = result["summary"]
    return {
        "naive_s_per_q": elapsed / questions,
        "naive_f1": summary.get("f1"),
        "naive_em": summary.get("em"),
        "naive_answers": [record["prediction"] for record in result["questions"]],
    }


def _in_subprocess(mode: str, config: dict[str, Any], args: argparse.Namespace) -> dict:
    payload = json.dumps({"mode": mode, "config": config, "args": vars(args)}, default=str)
    env = {**os.environ, "DYNAKRAG_SHARED_SERVER": "0"}
    done = subprocess.run(
        [sys.executable, __file__, "--worker", payload],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if done.returncode or not lines:
        tail = (done.stderr or done.stdout).strip().splitlines()[-3:]
        return {f"{mode}_error": " | ".join(tail) or f"exit {done.returncode}"}
    return json.loads(lines[-1])


_BANDWIDTH_C = r"""
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
int main(void) {
    size_t n = (size_t)1 << 28;  /* 1 GiB of 32-bit words, larger than any cache */
    unsigned *a = aligned_alloc(64, n * sizeof *a);
    memset(a, 1, n * sizeof *a);
    double best = 0;
    for (int rep = 0; rep < 5; rep++) {
        unsigned long long sum = 0;
        double t = omp_get_wtime();
        #pragma omp parallel for reduction(+:sum)
        for (size_t i = 0; i < n; i++) sum += a[i];
        t = omp_get_wtime() - t;
        if (n * sizeof *a / t > best) best = n * sizeof *a / t;
        if (sum == 42) puts("");
    }
    printf("%.3f\n", best / 1e9);
    return 0;
}
"""


def read_bandwidth_gb_s(threads: int = 2) -> float | None:
    """The machine's best memory read bandwidth over 1 GiB with ``threads`` threads (GB/s):
    the ceiling of token generation, which reads every weight once a token."""
    with tempfile.TemporaryDirectory() as tmp:
        source, binary = Path(tmp) / "bw.c", Path(tmp) / "bw"
        source.write_text(_BANDWIDTH_C)
        built = subprocess.run(
            ["cc", "-O3", "-march=native", "-fopenmp", str(source), "-o", str(binary)],
            capture_output=True,
            check=False,
        )
        if built.returncode:
            return None
        done = subprocess.run(
            [str(binary)],
            capture_output=True,
            text=True,
            check=False,
            env={**os.environ, "OMP_NUM_THREADS": str(threads)},
        )
        return float(done.stdout.strip()) if done.returncode == 0 else None


def cpu_flags() -> list[str]:
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return []
    flags = next(
        (line.split(":", 1)[1].split() for line in text.splitlines() if line.startswith("flags")),
        [],
    )
    interesting = ("avx", "fma", "f16c", "bmi2", "amx", "vnni", "bf16", "sse4_2")
    return sorted(flag for flag in flags if flag.startswith(interesting))


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "unknown"


def table(rows: list[dict[str, Any]]) -> str:
    ref = rows[0]

    def ratio(row: dict[str, Any], key: str) -> str:
        a, b = row.get(key), ref.get(key)
        return f"{a / b:.2f}x" if a and b else "-"

    lines = [
        "| configuration | loaded backend | prompt tok/s | x ref | gen tok/s | x ref | "
        "server prompt tok/s | server gen tok/s | server/direct prompt | server/direct gen | "
        "naive s/q | naive F1 |",
        "|" + "---|" * 12,
    ]
    for row in rows:

        def share(server_key: str, direct_key: str, row: dict[str, Any] = row) -> str:
            a, b = row.get(server_key), row.get(direct_key)
            return f"{a / b:.2f}" if a and b else "-"

        lines.append(
            f"| {row['name']} | {row.get('loaded_variant', '-')} | "
            f"{fmt(row.get('prompt_tok_s'), 1)} | {ratio(row, 'prompt_tok_s')} | "
            f"{fmt(row.get('gen_tok_s'), 1)} | {ratio(row, 'gen_tok_s')} | "
            f"{fmt(row.get('server_prompt_tok_s'), 1)} | {fmt(row.get('server_gen_tok_s'), 1)} | "
            f"{share('server_prompt_tok_s', 'prompt_tok_s')} | "
            f"{share('server_gen_tok_s', 'gen_tok_s')} | "
            f"{fmt(row.get('naive_s_per_q'), 1)} | {fmt(row.get('naive_f1'), 3)} |"
        )
    return "\n".join(lines)


def _ceiling(rows: list[dict[str, Any]], bandwidth: float | None, model_bytes: int) -> str:
    """Generation against its ceiling: every token reads the whole weight file once."""
    if not bandwidth:
        return ""
    ceiling = bandwidth * 1e9 / model_bytes
    best = max((row.get("gen_tok_s") or 0.0, row["name"]) for row in rows)
    return (
        f"\n\nGeneration ceiling: memory read bandwidth {bandwidth:.1f} GB/s (2 threads, 1 GiB) "
        f"/ {model_bytes / 1e9:.2f} GB of weights read per token = {ceiling:.1f} tok/s; "
        f"best measured {best[0]:.1f} tok/s ({best[1]}), {best[0] / ceiling:.0%} of it."
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--configs", nargs="+", default=["portable", "auto"])
    parser.add_argument("--prompt-tokens", type=int, default=1000)
    parser.add_argument("--gen-tokens", type=int, default=64)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--server", action="store_true", help="also measure through the server")
    parser.add_argument("--naive", type=int, default=0, help="HotpotQA eval questions, naive")
    parser.add_argument("--out", type=Path, default=RESULTS / "llm-throughput.json")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)

    if args.worker:
        job = json.loads(args.worker)
        ns = argparse.Namespace(**job["args"])
        runner = {
            "direct": lambda c: direct_worker(c, ns.prompt_tokens, ns.gen_tokens, ns.reps),
            "server": lambda c: server_run(c, ns.prompt_tokens, ns.gen_tokens, ns.reps),
            "naive": lambda c: naive_run(c, ns.naive),
        }[job["mode"]]
        print(json.dumps(runner(job["config"])))
        return 0

    configs = [parse_config(spec) for spec in args.configs]
    bandwidth = read_bandwidth_gb_s(configs[0]["n_threads"])
    model_bytes = Path(_model_path(configs[0])).stat().st_size
    modes = ["direct"] + (["server"] if args.server else []) + (["naive"] if args.naive else [])
    print(f"CPU: {cpu_model()}; flags: {' '.join(cpu_flags())}", file=sys.stderr)
    rows = []
    started = time.perf_counter()
    for index, config in enumerate(configs):
        row = dict(config)
        for mode in modes:
            row.update(_in_subprocess(mode, config, args))
        rows.append(row)
        done = index + 1
        eta = (time.perf_counter() - started) / done * (len(configs) - done)
        print(
            f"[{done}/{len(configs)}] {config['name']}: prompt "
            f"{fmt(row.get('prompt_tok_s'), 1)} tok/s, gen {fmt(row.get('gen_tok_s'), 1)} tok/s "
            f"(ETA {eta / 60:.1f} min)",
            file=sys.stderr,
        )
    markdown = (
        f"CPU: {cpu_model()}, {os.cpu_count()} cores; flags: `{' '.join(cpu_flags())}`\n\n"
        f"Prompt {args.prompt_tokens} tokens, generation {args.gen_tokens} tokens, median of "
        f"{args.reps} repetitions after a warm-up, each configuration in a fresh process; "
        f"naive: first {args.naive} HotpotQA eval questions, LLM cache off.\n\n"
        + table(rows)
        + _ceiling(rows, bandwidth, model_bytes)
    )
    print(markdown)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    meta = {
        "cpu": cpu_model(),
        "cpu_flags": cpu_flags(),
        "cores": os.cpu_count(),
        "read_bandwidth_gb_s": bandwidth,
        "model_bytes": model_bytes,
        "prompt_tokens": args.prompt_tokens,
        "gen_tokens": args.gen_tokens,
        "reps": args.reps,
        "naive_questions": args.naive,
    }
    args.out.write_text(json.dumps({"meta": meta, "rows": rows}, indent=2) + "\n")
    args.out.with_suffix(".md").write_text(markdown + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())

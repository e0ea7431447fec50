"""Token-budget benchmark: tokens per question against quality, by λ and by ``--token-budget``.

Per dataset (eval rows, open setting and hybrid retrieval by default), three kinds of run, each
one ``dynakrag eval --method dynakrag`` on the first ``--limit`` questions:

``lambda``
    the learned policy (``--policy``, default the shipped ``default_policy.npz``) at each λ in
    ``--lambdas``, without a budget: the paper's knob.
``budget``
    the calibrated policy with ``token_budget`` N for each N in ``--budgets``: λ chosen from its
    calibration curve, and the stop rule (see :mod:`dynakrag.policy.token_budget`).
``default``
    the configured default policy (``learned`` unless ``DYNAKRAG_POLICY`` says otherwise)
    without a budget: the point a user gets without asking.

The calibrated policy is ``--calibrated FILE`` if given, else ``<out-dir>/<name>-policy.npz``,
made first by ``dynakrag calibrate``'s code on the first ``--calibrate-limit`` TRAIN questions of
each dataset (kept: a rerun reuses it). Reported per run: mean and largest tokens (prompt +
completion) per question, how many questions went over the budget, SR, F1, EM, LLM calls and the
λ the controller used; per dataset the Pareto front of (fewer tokens, higher SR).

``--parts`` runs only some of the three kinds (``--parts default budget``: no λ sweep; its λ
still calibrate). Resumable (every finished run is a JSON file under ``<out-dir>/<name>-runs/``;
the LLM disk cache replays what a killed run had done), with progress lines and an ETA on
stderr. Writes
``<name>.json``, ``<name>.md`` and ``<name>.png`` under ``--out-dir``
(``benchmarks/results`` by default).

    .venv/bin/python benchmarks/token_budget.py --limit 30 --calibrate-limit 20
    .venv/bin/python benchmarks/token_budget.py --datasets 2wiki --limit 2 --fake-llm \
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
from dynakrag.eval.methods.dynakrag import DynakragMethod  # noqa: E402
from dynakrag.eval.runner import evaluate, git_commit  # noqa: E402
from dynakrag.files import write_json  # noqa: E402
from dynakrag.policy.learned import LearnedPolicy  # noqa: E402
from dynakrag.policy.registry import DEFAULT_POLICY_FILE  # noqa: E402
from dynakrag.training.calibrate import DEFAULT_LAMBDAS, calibrate, describe_costs  # noqa: E402

BUDGETS = (800, 1500, 2500)
PARTS = ("default", "lambda", "budget")
"""The kinds of run (see the module doc), chosen with ``--parts``."""
ALL = "all"
"""The pooled row: every question of every dataset."""


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datasets", nargs="+", default=list(QA_DATASETS), choices=QA_DATASETS)
    parser.add_argument("--limit", type=int, default=30, help="eval questions per dataset")
    parser.add_argument("--budgets", nargs="+", type=int, default=list(BUDGETS))
    parser.add_argument(
        "--lambdas",
        nargs="+",
        type=float,
        default=list(DEFAULT_LAMBDAS),
        help="the λ of the sweep and of the calibration on train rows",
    )
    parser.add_argument(
        "--parts",
        nargs="+",
        choices=PARTS,
        default=list(PARTS),
        help="which kinds of run (default: all three; the calibration is made first either way)",
    )
    parser.add_argument("--policy", type=Path, default=DEFAULT_POLICY_FILE, help="learned policy")
    parser.add_argument(
        "--calibrated", type=Path, help="a calibrated policy file (default: calibrate --policy)"
    )
    parser.add_argument(
        "--calibrate-limit", type=int, default=20, help="train questions per dataset to calibrate"
    )
    parser.add_argument("--setting", default="open", choices=("open", "distractor"))
    parser.add_argument("--retriever", default="hybrid", choices=("bm25", "dense", "hybrid"))
    add_run_options(parser, "token-budget", "the tests' scripted reader (smoke runs)")
    return parser.parse_args(argv)


# --------------------------------------------------------------------------------------------
# Runs


def _row(dataset: str, kind: str, run: dict[str, Any], **config: Any) -> dict[str, Any]:
    """The numbers of one run (``run``: :func:`runstore.compact`), flat."""
    questions = run["questions"]
    tokens = [q["tokens"] for q in questions]
    lambdas = sorted({q["cost_lambda"] for q in questions if q["cost_lambda"] is not None})
    budget = config.get("token_budget")
    f1 = [q["f1"] for q in questions if q["f1"] is not None]
    em = [q["em"] for q in questions if q["em"] is not None]
    return {
        "dataset": dataset,
        "kind": kind,
        **config,
        "n": len(questions),
        "tokens": statistics.fmean(tokens),
        "tokens_max": max(tokens),
        "over_budget": sum(t > budget for t in tokens) if budget else None,
        "within_budget": statistics.fmean(tokens) <= budget if budget else None,
        "support_recall": statistics.fmean(q["support_recall"] for q in questions),
        "f1": statistics.fmean(f1) if f1 else None,
        "em": statistics.fmean(em) if em else None,
        "lambda_used": lambdas,
        "lambda_source": next((q["lambda_source"] for q in questions), None),
    }


def pooled(rows: Sequence[dict[str, Any]], runs: dict[tuple[str, str], dict[str, Any]]) -> list:
    """The ``all`` rows: every dataset's questions of one configuration together."""
    out = []
    for label in dict.fromkeys(r["label"] for r in rows):
        mine = [r for r in rows if r["label"] == label]
        merged = {"questions": [q for r in mine for q in runs[(r["dataset"], label)]["questions"]]}
        config = {k: mine[0][k] for k in ("label", "policy", "cost_lambda", "token_budget")}
        out.append(_row(ALL, mine[0]["kind"], merged, **config))
    return out


def mark_pareto(rows: list[dict[str, Any]]) -> None:
    """``pareto``: no other row of the dataset has fewer tokens and at least its SR (or the
    same tokens and a higher SR)."""
    for row in rows:
        peers = [r for r in rows if r["dataset"] == row["dataset"] and r is not row]
        row["pareto"] = not any(
            (p["tokens"] <= row["tokens"] and p["support_recall"] >= row["support_recall"])
            and (p["tokens"] < row["tokens"] or p["support_recall"] > row["support_recall"])
            for p in peers
        )


def calibrated_policy(
    args: argparse.Namespace,
    policy: LearnedPolicy,
    cfg: Configuration,
    chat_model: BaseChatModel | None,
    embeddings: Any,
) -> tuple[Path, LearnedPolicy]:
    """``--calibrated``, or the policy calibrated on train rows now (kept for reruns)."""
    path = args.calibrated or args.out_dir / f"{args.name}-policy.npz"
    if not path.is_file():
        print(f"[token-budget] calibrating on train rows -> {path}", file=sys.stderr, flush=True)
        curve = calibrate(
            policy,
            args.datasets,
            limit=args.calibrate_limit,
            lambdas=args.lambdas,
            setting=args.setting,
            retriever=args.retriever,
            cfg=cfg,
            chat_model=chat_model,
            embeddings=embeddings,
            cache=not args.no_cache,
            progress=not args.quiet,
        )
        policy.with_calibration(curve).save(path)
    calibrated = LearnedPolicy.load(path)
    if calibrated.calibration is None:
        raise SystemExit(f"token-budget benchmark: {path} has no calibration curve")
    return path, calibrated


def main(argv: list[str] | None = None, *, chat_model: BaseChatModel | None = None) -> int:
    """Run the benchmark; ``chat_model`` replaces the configured generator (tests)."""
    args = parse_args(argv)
    if not args.policy.is_file():
        print(f"token-budget benchmark: no learned policy at {args.policy}", file=sys.stderr)
        return 2
    cfg = Configuration.from_env()
    if chat_model is None and args.fake_llm:
        chat_model = scripted_reader(args.datasets, ("train", "eval"), None)
        args.no_cache = True  # never mix scripted replies into the real model's cache
    embeddings = None
    if args.retriever in ("dense", "hybrid"):
        from dynakrag.retrieval.embeddings import default_embeddings

        embeddings = default_embeddings(batch_size=cfg.embedding_batch_size)  # loaded once
    args.out_dir.mkdir(parents=True, exist_ok=True)
    policy = LearnedPolicy.load(args.policy)
    calibrated_path, calibrated = calibrated_policy(args, policy, cfg, chat_model, embeddings)

    configs: list[tuple[str, str, Any, dict[str, Any]]] = [
        ("default", cfg.policy, cfg.policy, {"cost_lambda": cfg.cost_lambda, "token_budget": None})
    ]
    configs += [
        ("lambda", f"learned λ={lam:g}", policy, {"cost_lambda": lam, "token_budget": None})
        for lam in args.lambdas
    ]
    configs += [
        ("budget", f"budget {n}", calibrated, {"cost_lambda": cfg.cost_lambda, "token_budget": n})
        for n in args.budgets
    ]
    configs = [config for config in configs if config[0] in args.parts]
    store = RunStore(
        args.out_dir / f"{args.name}-runs",
        len(configs) * len(args.datasets),
        "token-budget",
        quiet=args.quiet,
    )
    rows: list[dict[str, Any]] = []
    runs: dict[tuple[str, str], dict[str, Any]] = {}
    for dataset in args.datasets:
        for kind, label, spec, overrides in configs:

            def one_run(
                spec: Any = spec, overrides: dict[str, Any] = overrides, dataset: str = dataset
            ) -> dict:
                result = evaluate(
                    dataset,
                    "eval",
                    args.setting,
                    DynakragMethod(policy=spec),
                    retriever=args.retriever,
                    limit=args.limit,
                    seed=args.seed,
                    cfg=cfg.merged(overrides),
                    chat_model=chat_model,
                    embeddings=embeddings,
                    progress=not args.quiet,
                    cache=not args.no_cache,
                    report=False,
                )
                return compact(result)

            run = store.run(f"{dataset}-{label}", one_run)
            runs[(dataset, label)] = run
            policy_name = spec if isinstance(spec, str) else spec.name
            rows.append(_row(dataset, kind, run, label=label, policy=policy_name, **overrides))
    rows += pooled(rows, runs)
    mark_pareto(rows)
    return write_outputs(args, cfg, calibrated_path, calibrated, rows)


# --------------------------------------------------------------------------------------------
# Outputs


def table(rows: Sequence[dict[str, Any]]) -> str:
    header = ["dataset", "run", "λ used", "n", "tokens / q", "max tokens", "over budget",
              "SR", "F1", "EM", "Pareto"]  # fmt: skip
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    for r in rows:
        lambdas = ", ".join(f"{v:g}" for v in r["lambda_used"]) or "–"
        over = "–" if r["over_budget"] is None else f"{r['over_budget']}/{r['n']}"
        cells = [r["dataset"], r["label"], lambdas, str(r["n"]), f"{r['tokens']:.0f}",
                 str(r["tokens_max"]), over, fmt(r["support_recall"]), fmt(r["f1"]),
                 fmt(r["em"]), "yes" if r["pareto"] else ""]  # fmt: skip
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def plot(rows: Sequence[dict[str, Any]], datasets: Sequence[str], path: Path) -> Path:
    """SR and F1 against tokens per question: the λ sweep as a line, budgets as squares with
    their limit dotted, the default policy as a star, the Pareto front dashed."""
    columns = [*datasets, ALL]
    fig, axes = figure(2, len(columns), 3.6)
    for col, dataset in enumerate(columns):
        mine = [r for r in rows if r["dataset"] == dataset]
        for ax, key, name in ((axes[0][col], "support_recall", "SR"), (axes[1][col], "f1", "F1")):
            sweep = sorted((r for r in mine if r["kind"] == "lambda"), key=lambda r: r["tokens"])
            ax.plot([r["tokens"] for r in sweep], [r[key] or 0 for r in sweep], "o-",
                    color="#4c72b0", label="learned, λ sweep")  # fmt: skip
            for r in sweep:
                ax.annotate(f"λ={r['cost_lambda']:g}", (r["tokens"], r[key] or 0), fontsize=7)
            budgets = [r for r in mine if r["kind"] == "budget"]
            for index, r in enumerate(budgets):
                ax.axvline(r["token_budget"], linestyle=":", linewidth=0.8, color="#dd8452")
                ax.plot(r["tokens"], r[key] or 0, "s", color="#dd8452",
                        label="token budget N (calibrated)" if index == 0 else None)  # fmt: skip
                ax.annotate(f"N={r['token_budget']}", (r["tokens"], r[key] or 0), fontsize=7)
            for r in (r for r in mine if r["kind"] == "default"):
                ax.plot(r["tokens"], r[key] or 0, "*", markersize=12, color="#c44e52",
                        label=f"default ({r['policy']})")  # fmt: skip
            if key == "support_recall":
                front = sorted((r for r in mine if r["pareto"]), key=lambda r: r["tokens"])
                ax.plot([r["tokens"] for r in front], [r[key] for r in front], "--",
                        color="grey", linewidth=0.8, label="Pareto front")  # fmt: skip
            ax.set_title(dataset)
            ax.set_xlabel("tokens / question")
            ax.set_ylabel(name)
            ax.set_ylim(0, 1.05)
        axes[0][col].legend(fontsize="x-small")
    fig.suptitle("Quality against tokens: λ sweep, token budgets, default policy")
    fig.tight_layout()
    fig.savefig(path, format="png")
    return path


def write_outputs(
    args: argparse.Namespace,
    cfg: Configuration,
    calibrated_path: Path,
    calibrated: LearnedPolicy,
    rows: list[dict[str, Any]],
) -> int:
    """Print the table; write JSON, markdown and the plot under ``--out-dir``."""
    assert calibrated.calibration is not None
    curve = calibrated.calibration
    png = plot(rows, args.datasets, args.out_dir / f"{args.name}.png")
    curve_lines = [
        "| λ | tokens / q | SR | F1 | n |",
        "|---|---|---|---|---|",
        *(
            f"| {p.cost_lambda:g} | {p.tokens:.0f} | {p.support_recall:.3f} | {fmt(p.f1)} | {p.n} |"
            for p in curve.points
        ),
    ]
    budgets = [r for r in rows if r["kind"] == "budget"]
    kept = sum(bool(r["within_budget"]) for r in budgets)
    text = "\n".join(
        [
            f"# Token budgets (first {args.limit} eval questions per dataset, {args.setting} "
            f"setting, {args.retriever} retrieval)",
            "",
            table(rows),
            f"Mean tokens within the budget in {kept} of {len(budgets)} budget runs.",
            "",
            f"## Calibration curve (train rows, {calibrated_path.name})",
            "",
            *curve_lines,
            "",
            f"Token cost table: {describe_costs(curve.costs)}",
            "",
            f"![token budgets]({png.name})",
        ]
    )
    print(text)
    (args.out_dir / f"{args.name}.md").write_text(text + "\n", encoding="utf-8")
    meta = {
        **run_settings(args),
        "budgets": args.budgets,
        "lambdas": args.lambdas,
        **policy_settings(args.policy),
        "calibrated_file": str(calibrated_path),
        "calibration": curve.to_json(),
        "configuration": cfg.model_dump(mode="json"),
        "git_commit": git_commit(),
    }
    write_json(args.out_dir / f"{args.name}.json", {"meta": meta, "rows": rows}, default=str)
    return 0


if __name__ == "__main__":
    sys.exit(main())

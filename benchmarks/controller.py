"""Controller benchmark: the learned policy against uniform, fixed and oracle control, on eval rows.

Every run is one ``dynakrag eval --method dynakrag --policy P [--ablate A]``
(:func:`dynakrag.eval.runner.evaluate`) on the first ``--limit`` eval questions of each dataset
(open setting and hybrid retrieval by default); only the controller differs between rows.
Nothing here fits or tunes anything.

Variants
    ``learned`` (the policy file: ``--policy FILE``, default the shipped
    ``dynakrag/policy/models/default_policy.npz``), ``uniform`` (random valid action),
    ``fixed`` (hand-written schedule), ``oracle`` (gold-aware look-ahead: an upper bound), and
    the learned policy with each ablation (``w/o sufficiency``, ``w/o compression``,
    ``w/o continuation``). ``--policies`` / ``--ablations`` choose which (``heuristic`` can be
    added).

Settings: the controller settings (sub-question answering, max steps, max retrieval calls) the
learned policy's records were collected at, which a policy file fitted since it recorded them
carries; the paper's joint check, 4 control steps and 4 retrieval calls
(:data:`PAPER_SETTINGS`) for an older file or a run without the learned policy. A
``DYNAKRAG_*`` variable overrides either.

Parts (``--parts``)
    ``main``: every variant at the configured budget. ``budget``: ``max_retrieval_calls`` in
    ``--budgets`` (1..4) for each policy: SR against the budget. ``lambda``: ``cost_lambda`` in
    ``--lambdas`` for the learned policy: quality (SR) against cost (retrieval calls, tokens).

Reported per run: SR, SR per retrieval call (mean SR / mean retrieval calls), retrieval calls,
LLM calls and tokens (prompt + completion) per question, F1 / EM unless ``--no-answer``. The
oracle's look-ahead calls are outside its accounting (column ``look-ahead LLM``). Per dataset,
"gap closed" = (learned - uniform) / (oracle - uniform) on SR per retrieval call (and on SR);
None when the oracle does not beat uniform.

Each run is kept in ``<out-dir>/<name>-runs/`` (journalled per question while it runs, so a
killed run resumes; a finished one is read back, not rerun; the file name carries a hash of its
settings). Writes ``<out-dir>/<name>.json`` (rows, gap closed, meta), ``<name>.md`` (the tables),
``<name>-budget.png`` and ``<name>-lambda.png`` (default ``benchmarks/results/controller*``).

    DYNAKRAG_DATA_DIR=/work/shared/data .venv/bin/python benchmarks/controller.py --limit 20
    .venv/bin/python benchmarks/controller.py --datasets 2wiki --limit 3 --no-answer --fake-llm
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

_HERE = Path(__file__).resolve().parent
_REPO = _HERE.parent
if str(_HERE) not in sys.path:
    sys.path.insert(0, str(_HERE))  # the shared helpers of multihop.py, also when imported

from langchain_core.embeddings import Embeddings  # noqa: E402
from langchain_core.language_models import BaseChatModel  # noqa: E402
from multihop import (  # noqa: E402
    QA_DATASETS,
    add_run_options,
    check_support_recall,
    policy_settings,
    run_settings,
)
from runstore import file_name, settings_digest  # noqa: E402

from dynakrag.configuration import Configuration  # noqa: E402
from dynakrag.data.datasets import load_examples  # noqa: E402
from dynakrag.errors import UserInputError  # noqa: E402
from dynakrag.eval.methods.dynakrag import ABLATIONS, ORACLE, DynakragMethod  # noqa: E402
from dynakrag.eval.runner import evaluate, git_commit  # noqa: E402
from dynakrag.policy.learned import load_policy_file  # noqa: E402

DEFAULT_POLICY = _REPO / "dynakrag" / "policy" / "models" / "default_policy.npz"
LEARNED = "learned"
POLICIES = (LEARNED, "uniform", "fixed", ORACLE)
KNOWN_POLICIES = (*POLICIES, "heuristic")
BUDGETS = (1, 2, 3, 4)
PAPER_SETTINGS: dict[str, Any] = {
    "sub_question_answering": "joint",
    "max_steps": 4,
    "max_retrieval_calls": 4,
}
"""The DynaKRAG paper's check and budget: the policies are compared at them when the policy
file does not record the settings its records were collected at (files fitted before it did),
unless a ``DYNAKRAG_*`` variable sets one; the library's default is the chain (16 steps, 10
retrieval calls)."""
LAMBDAS = (0.0, 0.05, 0.1, 0.2, 0.5)
PARTS = ("main", "budget", "lambda")
COLUMNS: tuple[tuple[str, str], ...] = (
    ("support_recall", "SR"),
    ("sr_per_retrieval_call", "SR/retr."),
    ("retrieval_calls", "retr."),
    ("llm_calls", "LLM"),
    ("tokens", "tokens"),
    ("f1", "F1"),
    ("em", "EM"),
    ("lookahead_llm_calls", "look-ahead LLM"),
)


@dataclass(frozen=True)
class Variant:
    """One controller: a policy (a name, or ``learned`` for the policy file) and ablations."""

    policy: str
    ablate: tuple[str, ...] = ()

    @property
    def name(self) -> str:
        return " ".join([self.policy, *(f"w/o {a}" for a in self.ablate)])


def comparison_configuration(policy_file: Path | None) -> Configuration:
    """The environment's configuration, with the controller settings the learned policy's
    records were collected at (:data:`PAPER_SETTINGS` when the policy file does not say) for
    the fields the environment leaves at their defaults: every policy is compared where the
    learned one was trained."""
    cfg = Configuration.from_env()
    settings = dict(PAPER_SETTINGS)
    if policy_file is not None and policy_file.is_file():
        settings = load_policy_file(policy_file).controller_settings or settings
    return cfg.merged({k: v for k, v in settings.items() if k not in cfg.model_fields_set})


def variants(policies: Sequence[str], ablations: Sequence[str]) -> list[Variant]:
    """The main comparison: each policy, then the learned policy with each ablation."""
    return [Variant(p) for p in policies] + [Variant(LEARNED, (a,)) for a in ablations]


# --------------------------------------------------------------------------------------------
# Runs


def fake_chat_model(datasets: Sequence[str], limit: int | None) -> BaseChatModel:
    """The test suite's scripted reader: knows the gold answers, says one only when the
    evidence states it (``tests.fakes.demo_chat_model``); for smoke runs without a model."""
    if str(_REPO) not in sys.path:
        sys.path.insert(0, str(_REPO))  # tests/ is a package at the repository root
    from tests.fakes import demo_chat_model

    answers = {
        ex.question: ex.answers[0] if ex.answers else ""
        for dataset in datasets
        for ex in load_examples(dataset, "eval", limit)
    }
    return demo_chat_model(answers)


def _file_digest(path: Path | None) -> str | None:
    return None if path is None else hashlib.sha256(path.read_bytes()).hexdigest()[:16]


class Runner:
    """Runs (and memoises) one evaluation per dataset, variant, budget and lambda."""

    def __init__(
        self,
        args: argparse.Namespace,
        cfg: Configuration,
        policy_file: Path | None,
        chat_model: BaseChatModel | None,
        embeddings: Embeddings | None,
    ) -> None:
        self.args, self.cfg, self.policy_file = args, cfg, policy_file
        self.chat_model, self.embeddings = chat_model, embeddings
        self.results: dict[tuple[str, Variant, int, float], dict[str, Any]] = {}

    def run_path(self, dataset: str, variant: Variant, cfg: Configuration) -> Path:
        """Where one run's result is kept: named by what it ran, and a hash of every setting
        that changes it (so a run of other settings is another file)."""
        settings = {
            "limit": self.args.limit,
            "setting": self.args.setting,
            "retriever": self.args.retriever,
            "seed": self.args.seed,
            "no_answer": self.args.no_answer,
            "oracle_horizon": self.args.oracle_horizon,
            "policy_file": _file_digest(self.policy_file) if variant.policy == LEARNED else None,
            "fake": self.chat_model is not None,
            "cfg": cfg.model_dump(mode="json", exclude={"cache_dir"}),
        }
        name = file_name(f"{dataset}-{variant.name}-{settings_digest(settings)}")
        return self.args.out_dir / f"{self.args.name}-runs" / f"{name}.json"

    def run(
        self, dataset: str, variant: Variant, budget: int | None = None, lam: float | None = None
    ) -> dict[str, Any]:
        budget = self.cfg.max_retrieval_calls if budget is None else budget
        lam = self.cfg.cost_lambda if lam is None else lam
        key = (dataset, variant, budget, lam)
        if key not in self.results:
            policy = str(self.policy_file) if variant.policy == LEARNED else variant.policy
            method = DynakragMethod(
                policy=policy, ablate=variant.ablate, oracle_horizon=self.args.oracle_horizon
            )
            cfg = self.cfg.merged({"max_retrieval_calls": budget, "cost_lambda": lam})
            out = self.run_path(dataset, variant, cfg)
            if out.is_file():  # finished earlier with these settings
                print(f"[controller] {dataset} {variant.name}: done earlier ({out.name})",
                      file=sys.stderr)  # fmt: skip
                result = json.loads(out.read_text(encoding="utf-8"))
            else:
                print(f"[controller] {dataset} {variant.name} budget={budget} λ={lam}",
                      file=sys.stderr)  # fmt: skip
                result = evaluate(
                    dataset,
                    "eval",
                    self.args.setting,
                    method,
                    retriever=self.args.retriever,
                    limit=self.args.limit,
                    seed=self.args.seed,
                    no_answer=self.args.no_answer,
                    out=out,  # journalled per question: a killed run resumes
                    cfg=cfg,
                    chat_model=self.chat_model,
                    embeddings=self.embeddings,
                    progress=not self.args.quiet,
                    cache=not self.args.no_cache,
                    report=False,
                )
            check_support_recall(result, dataset)
            self.results[key] = result
        return row(dataset, variant, budget, lam, self.results[key])


def row(
    dataset: str, variant: Variant, budget: int, lam: float, result: dict[str, Any]
) -> dict[str, Any]:
    """The numbers of one run, flat."""
    summary = result["summary"]
    questions = result["questions"]
    lookahead = [
        q["details"]["oracle"]["lookahead_llm_calls"]
        for q in questions
        if isinstance(q.get("details", {}).get("oracle"), dict)
    ]
    return {
        "dataset": dataset,
        "variant": variant.name,
        "policy": variant.policy,
        "ablate": list(variant.ablate),
        "max_retrieval_calls": budget,
        "cost_lambda": lam,
        "n": summary["n"],
        "support_recall": summary["support_recall"],
        "sr_per_retrieval_call": summary["sr_per_retrieval_call"],
        "retrieval_calls": summary["retrieval_calls"],
        "llm_calls": summary["llm_calls"],
        "tokens": (summary["prompt_tokens"] or 0) + (summary["completion_tokens"] or 0),
        "f1": summary["f1"],
        "em": summary["em"],
        "lookahead_llm_calls": sum(lookahead) / len(lookahead) if lookahead else None,
    }


def gap_closed(rows: Sequence[dict[str, Any]], key: str) -> float | None:
    """(learned - uniform) / (oracle - uniform) on ``key``; None when undefined."""
    by = {r["variant"]: r.get(key) for r in rows}
    learned, uniform, oracle = by.get(LEARNED), by.get("uniform"), by.get(ORACLE)
    if learned is None or uniform is None or oracle is None or oracle - uniform <= 1e-9:
        return None
    return (learned - uniform) / (oracle - uniform)


# --------------------------------------------------------------------------------------------
# Tables and plots


def _fmt(key: str, value: Any) -> str:
    if value is None:
        return "–"
    if key in ("tokens", "llm_calls", "lookahead_llm_calls"):
        return f"{value:.1f}"
    if key == "retrieval_calls":
        return f"{value:.2f}"
    return f"{value:.3f}" if isinstance(value, float) else str(value)


def table(rows: Sequence[dict[str, Any]]) -> str:
    """A markdown table: dataset, variant, budget, lambda, n and :data:`COLUMNS`."""
    header = ["dataset", "variant", "budget", "λ", "n", *(title for _, title in COLUMNS)]
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    for r in rows:
        cells = [r["dataset"], r["variant"], str(r["max_retrieval_calls"]), f"{r['cost_lambda']:g}"]
        cells += [str(r["n"]), *(_fmt(key, r.get(key)) for key, _ in COLUMNS)]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def _figure(n_rows: int, n_cols: int, height: float) -> tuple[Any, Any]:
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    figure = Figure(figsize=(max(6.0, 4.5 * n_cols), height * n_rows), dpi=100)
    FigureCanvasAgg(figure)  # object API on an Agg canvas: headless, no pyplot state
    return figure, figure.subplots(n_rows, n_cols, squeeze=False)


def plot_budget(rows: Sequence[dict[str, Any]], datasets: Sequence[str], path: Path) -> Path:
    """SR against max_retrieval_calls, one line per policy, one panel per dataset."""
    from matplotlib.ticker import MaxNLocator

    figure, axes = _figure(1, len(datasets), 3.8)
    for ax, dataset in zip(axes[0], datasets, strict=True):
        mine = [r for r in rows if r["dataset"] == dataset]
        names = dict.fromkeys(r["variant"] for r in mine)
        # Distinct markers and dashes keep coinciding lines (e.g. oracle = uniform) visible.
        for index, name in enumerate(names):
            points = sorted(
                (r["max_retrieval_calls"], r["support_recall"])
                for r in mine
                if r["variant"] == name
            )
            ax.plot(
                [b for b, _ in points],
                [v for _, v in points],
                marker="osD^v<>"[index % 7],
                linestyle=("-", "--", "-.", ":")[index % 4],
                label=name,
            )
        ax.set_title(dataset)
        ax.set_xlabel("max retrieval calls")
        ax.set_ylabel("support recall")
        ax.set_ylim(0, 1.02)
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.legend(fontsize="small")
    figure.suptitle("Retrieval-budget sensitivity")
    figure.tight_layout()
    figure.savefig(path, format="png")
    return path


def plot_lambda(rows: Sequence[dict[str, Any]], datasets: Sequence[str], path: Path) -> Path:
    """The learned policy's SR against its cost (retrieval calls, tokens), points labelled λ."""
    figure, axes = _figure(2, len(datasets), 3.4)
    for col, dataset in enumerate(datasets):
        mine = sorted((r for r in rows if r["dataset"] == dataset), key=lambda r: r["cost_lambda"])
        for ax, cost, label in (
            (axes[0][col], "retrieval_calls", "retrieval calls / question"),
            (axes[1][col], "tokens", "tokens / question"),
        ):
            xs, ys = [r[cost] for r in mine], [r["support_recall"] for r in mine]
            ax.plot(xs, ys, marker="o", color="#4c72b0")
            for r, x, y in zip(mine, xs, ys, strict=True):
                ax.annotate(f"λ={r['cost_lambda']:g}", (x, y), fontsize="small")
            ax.set_xlabel(label)
            ax.set_ylabel("support recall")
            ax.set_ylim(0, 1.05)
            ax.set_title(dataset)
    figure.suptitle("Learned policy: quality against cost over cost_lambda")
    figure.tight_layout()
    figure.savefig(path, format="png")
    return path


# --------------------------------------------------------------------------------------------
# Main


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datasets", nargs="+", default=list(QA_DATASETS), choices=QA_DATASETS)
    parser.add_argument("--limit", type=int, default=10, help="eval questions per run")
    parser.add_argument("--setting", default="open", choices=("open", "distractor"))
    parser.add_argument("--retriever", default="hybrid", choices=("bm25", "dense", "hybrid"))
    parser.add_argument(
        "--policy",
        type=Path,
        help=f"learned policy file (default {DEFAULT_POLICY.relative_to(_REPO)})",
    )
    parser.add_argument("--policies", nargs="+", default=list(POLICIES), choices=KNOWN_POLICIES)
    parser.add_argument("--ablations", nargs="*", default=list(ABLATIONS), choices=tuple(ABLATIONS))
    parser.add_argument("--parts", nargs="+", default=list(PARTS), choices=PARTS)
    parser.add_argument("--budgets", nargs="+", type=int, default=list(BUDGETS))
    parser.add_argument("--lambdas", nargs="+", type=float, default=list(LAMBDAS))
    parser.add_argument("--oracle-horizon", type=int, default=2, help="oracle look-ahead")
    parser.add_argument("--no-answer", action="store_true", help="skip final answers (no F1/EM)")
    add_run_options(parser, "controller", "the tests' scripted reader")
    return parser.parse_args(argv)


def _needs_learned(args: argparse.Namespace) -> bool:
    main_needs = "main" in args.parts and (LEARNED in args.policies or bool(args.ablations))
    budget_needs = "budget" in args.parts and LEARNED in args.policies
    return main_needs or budget_needs or "lambda" in args.parts


def main(argv: list[str] | None = None, *, chat_model: BaseChatModel | None = None) -> int:
    """Run the benchmark; ``chat_model`` replaces the configured generator (tests)."""
    args = parse_args(argv)
    policy_file: Path | None = None
    if _needs_learned(args):
        policy_file = args.policy or DEFAULT_POLICY
        if not policy_file.is_file():
            print(
                f"controller benchmark: no learned policy at {policy_file}. Train one "
                "(dynakrag collect --dataset hotpotqa --split train --out traj.jsonl; dynakrag "
                "train --trajectories traj.jsonl --out policy.npz) and pass --policy "
                "policy.npz, or leave 'learned' out: --policies uniform fixed oracle "
                "--ablations --parts main budget",
                file=sys.stderr,
            )
            return 2
    cfg = comparison_configuration(policy_file)
    if chat_model is None and args.fake_llm:
        chat_model = fake_chat_model(args.datasets, args.limit)
        args.no_cache = True  # never mix scripted replies into the real model's cache
    embeddings = None
    if args.retriever in ("dense", "hybrid"):
        from dynakrag.retrieval.embeddings import default_embeddings

        embeddings = default_embeddings(batch_size=cfg.embedding_batch_size)  # loaded once
    runner = Runner(args, cfg, policy_file, chat_model, embeddings)
    main_variants = variants(args.policies, args.ablations)
    rows: dict[str, list[dict[str, Any]]] = {part: [] for part in args.parts}
    try:
        for dataset in args.datasets:
            if "main" in args.parts:
                rows["main"] += [runner.run(dataset, v) for v in main_variants]
            if "budget" in args.parts:
                rows["budget"] += [
                    runner.run(dataset, Variant(p), budget=b)
                    for p in args.policies
                    for b in args.budgets
                ]
            if "lambda" in args.parts:
                rows["lambda"] += [
                    runner.run(dataset, Variant(LEARNED), lam=lam) for lam in args.lambdas
                ]
    except UserInputError as exc:
        print(f"controller benchmark: {exc}", file=sys.stderr)
        return 2

    gaps = (
        {
            dataset: {
                key: gap_closed([r for r in rows["main"] if r["dataset"] == dataset], key)
                for key in ("sr_per_retrieval_call", "support_recall")
            }
            for dataset in args.datasets
        }
        if "main" in args.parts
        else {}
    )
    return write_outputs(args, cfg, policy_file, chat_model, rows, gaps)


def write_outputs(
    args: argparse.Namespace,
    cfg: Configuration,
    policy_file: Path | None,
    chat_model: BaseChatModel | None,
    rows: dict[str, list[dict[str, Any]]],
    gaps: dict[str, dict[str, float | None]],
) -> int:
    """Print the tables; write JSON, markdown and the plots under ``--out-dir``."""
    out = args.out_dir
    out.mkdir(parents=True, exist_ok=True)
    sections = [
        f"# Controller benchmark (first {args.limit} eval questions, {args.setting} setting, "
        f"{args.retriever} retrieval{', no answers' if args.no_answer else ''})",
        "",
    ]
    titles = {
        "main": f"## Policies and ablations (max_retrieval_calls={cfg.max_retrieval_calls})",
        "budget": "## Retrieval-budget sensitivity",
        "lambda": "## Learned policy over cost_lambda",
    }
    for part in args.parts:
        sections += [titles[part], "", table(rows[part])]
    if gaps:
        sections += [
            "## Gap closed: (learned - uniform) / (oracle - uniform)",
            "",
            "| dataset | on SR per retrieval call | on SR |",
            "|---|---|---|",
            *(
                f"| {d} | {_fmt('gap', g['sr_per_retrieval_call'])} | "
                f"{_fmt('gap', g['support_recall'])} |"
                for d, g in gaps.items()
            ),
            "",
        ]
    plots = {}
    if "budget" in args.parts:
        plots["budget"] = plot_budget(
            rows["budget"], args.datasets, out / f"{args.name}-budget.png"
        )
    if "lambda" in args.parts:
        plots["lambda"] = plot_lambda(
            rows["lambda"], args.datasets, out / f"{args.name}-lambda.png"
        )
    sections += [f"![{part}]({path.name})" for part, path in plots.items()]
    text = "\n".join(sections) + "\n"
    print(text)
    (out / f"{args.name}.md").write_text(text, encoding="utf-8")
    meta = {
        **run_settings(args),
        "no_answer": args.no_answer,
        "oracle_horizon": args.oracle_horizon,
        **policy_settings(policy_file),
        "llm": type(chat_model).__name__ if chat_model is not None else "configured backend",
        "configuration": cfg.model_dump(mode="json"),
        "git_commit": git_commit(),
    }
    payload = {
        "meta": meta,
        "rows": rows,
        "gap_closed": gaps,
        "plots": {k: str(v) for k, v in plots.items()},
    }
    (out / f"{args.name}.json").write_text(json.dumps(payload, indent=2, default=str) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())

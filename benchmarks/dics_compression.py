"""DICS as the graph's compression step, and DS-RAG on templated vs reworded questions (#14).

Two parts, each a set of runs over the rows of ``--split``:

``graph``
    The DynaKRAG graph (policy: the configuration's, or ``--policy``) on ``--graph-datasets``
    (default HotpotQA, 2Wiki, MuSiQue) with each ``--compressions`` (``dics``, ``heuristic``,
    ``passthrough``; ``dsrag_extraction`` for ``dics`` from ``--extraction`` or the
    configuration). Reported per run: answer EM / F1, prompt tokens, final passages (the
    evidence the answer was written from), LLM calls, retrieval calls; and per dataset whether
    ``dics`` reaches the heuristic's answer F1 at no more prompt tokens per question.
``dsrag``
    The ``dsrag`` method (default settings unless flags say otherwise) on ``--dsrag-datasets``
    in each ``--forms``: ``templated`` (the rows as written) and ``reworded`` (the same people
    and facts in other words, :mod:`rewordings`). Reported: context precision / recall / F1,
    chunks per question, answer quality (ANLS for ranking, EM for comparison), the reworded
    drop in context F1 (the issue's bar: at most 0.05) and, on templated rows, the issue's
    context bars (F1 >= 0.85 ranking / 0.93 comparison at <= 3.95 / 3.01 chunks; they are
    stated for eval rows).

Rows: ``--split train`` (the default) is for development. ``--split eval`` is the FINAL
measurement only (the rewordings of eval rows included): it is printed as such and named in
the result files. Nothing here fits or tunes anything.

Resumable: every question's record is appended to
``<out-dir>/<name>-runs/<part>-<dataset>-<variant>-<settings hash>.jsonl`` as soon as it is
done (the hash covers every setting that changes a record, so another setting starts its own
file); a rerun skips the questions already there (a line torn by a kill is dropped). Progress:
one line per run, then a bar (plain lines in a log file). Every model call goes through the
disk LLM cache (``<cache_dir>/llm-cache.sqlite``) unless ``--no-cache``; ``--fake-llm`` uses
the scripted stand-in of ``benchmarks/dsrag.py`` and no cache (smoke runs only).

Writes ``<out-dir>/<name>.json`` and ``<name>.md`` (default name ``dics-compression-<split>``).

    .venv/bin/python benchmarks/dics_compression.py --parts dsrag --limit 50     # train rows
    .venv/bin/python benchmarks/dics_compression.py --parts graph --limit 60 --split eval
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

_HERE = Path(__file__).resolve().parent
if str(_HERE) not in sys.path:
    sys.path.insert(0, str(_HERE))  # the sibling scripts' helpers

from langchain_core.embeddings import Embeddings  # noqa: E402
from langchain_core.language_models import BaseChatModel  # noqa: E402
from langchain_core.messages import BaseMessage  # noqa: E402
from multihop import add_run_options, dsrag_overrides  # noqa: E402
from rewordings import reworded_examples  # noqa: E402

from dynakrag.configuration import Configuration  # noqa: E402
from dynakrag.data.datasets import QAExample, load_examples, open_corpus  # noqa: E402
from dynakrag.errors import DynakragError, UserInputError  # noqa: E402
from dynakrag.eval.methods import Method  # noqa: E402
from dynakrag.eval.methods.base import method_configuration  # noqa: E402
from dynakrag.eval.methods.dsrag import DsragMethod  # noqa: E402
from dynakrag.eval.methods.dynakrag import DynakragMethod  # noqa: E402
from dynakrag.eval.records import check_eval_record  # noqa: E402
from dynakrag.eval.runner import (  # noqa: E402
    MemoEmbeddings,
    git_commit,
    open_index_dir,
    question_record,
    summarize_records,
)
from dynakrag.files import write_json, write_text_atomic  # noqa: E402
from dynakrag.llm.cache import SQLiteLLMCache  # noqa: E402
from dynakrag.llm.client import LLMClient  # noqa: E402
from dynakrag.llm.factory import llm_client_from_config, llm_description  # noqa: E402
from dynakrag.llm.fake import ScriptedChatModel  # noqa: E402
from dynakrag.progress import progress_bar  # noqa: E402
from dynakrag.retrieval.base import Searcher  # noqa: E402
from dynakrag.routing.factory import build_searcher, needs_embeddings  # noqa: E402
from dynakrag.workers import RecordJournal, in_order, resumed  # noqa: E402

PARTS = ("graph", "dsrag")
GRAPH_DATASETS = ("hotpotqa", "2wiki", "musique")
DSRAG_DATASETS = ("dsrag-ranking", "dsrag-comparison")
COMPRESSIONS = ("dics", "heuristic", "passthrough")
FORMS = ("templated", "reworded")
EXTRACTIONS = ("llm", "rules", "auto")
# The bars (stated for all DS-RAG eval rows): context F1 at most so many chunks.
CONTEXT_BARS: dict[str, tuple[float, float]] = {
    "dsrag-ranking": (0.85, 3.95),
    "dsrag-comparison": (0.93, 3.01),
}
MAX_REWORDED_DROP = 0.05
SUMMARY_KEYS = (
    "em", "f1", "anls", "context_precision", "context_recall", "context_f1", "anc",
    "prompt_tokens", "completion_tokens", "llm_calls", "retrieval_calls", "latency_s",
)  # fmt: skip


@dataclass(frozen=True)
class Run:
    """One method over one dataset's questions in one variant (a compression or a form)."""

    part: str
    dataset: str
    variant: str
    examples: tuple[QAExample, ...]
    method: Method
    cfg: Configuration


# --------------------------------------------------------------------------------------------
# Resumable runs


def settings_hash(run: Run, args: argparse.Namespace) -> str:
    """A short hash of everything that changes a record of ``run`` (not the row limit)."""
    settings = {
        "part": run.part,
        "dataset": run.dataset,
        "variant": run.variant,
        "split": args.split,
        "setting": args.setting if run.part == "graph" else "open",
        "method": run.method.name,
        "method_options": run.method.options(),
        "configuration": run.cfg.model_dump(mode="json", exclude={"cache_dir"}),
        "fake_llm": bool(args.fake_llm),
    }
    text = json.dumps(settings, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:10]


def _compact(record: dict[str, Any]) -> dict[str, Any]:
    """A question record with the graph's trace cut to its compression step."""
    details = dict(record.get("details") or {})
    trace = details.pop("trace", None)
    if trace is not None:
        compress = [e for e in trace if e.get("action") == "compress_answer_evidence"]
        details["actions"] = [e.get("action") for e in trace]
        details["compress"] = {
            k: v for k, v in (compress[0] if compress else {}).items() if k != "explanation"
        }
    return {**record, "details": details}


def run_questions(
    run: Run,
    searcher_for: Callable[[QAExample], Searcher],
    llm: LLMClient,
    path: Path,
    quiet: bool,
) -> list[dict[str, Any]]:
    """The records of ``run``: those already in ``path``, then the rest, each appended to
    ``path`` as soon as it is done (:func:`~dynakrag.workers.resumed`: a question is done when
    its whole line is written; a line torn by a kill is dropped and its question rerun)."""
    journal = RecordJournal(path, key_field="key")
    if journal.cut_line:
        print(f"[dics] dropping a torn last line of {path}", file=sys.stderr)
    before = sum(example.id in journal.done for example in run.examples)
    print(
        f"[dics] {run.part} {run.dataset} {run.variant}: {before} of "
        f"{len(run.examples)} done before, {len(run.examples) - before} to run -> {path}",
        file=sys.stderr,
    )

    def answered(todo: list[QAExample]) -> Iterator[tuple[QAExample, dict[str, Any]]]:
        for example in todo:
            tick = time.perf_counter()
            result = run.method.run(example.question, searcher_for(example), llm, run.cfg)
            latency = time.perf_counter() - tick
            record = question_record(example, result, latency, no_answer=run.method.no_answer)
            yield example, {"key": example.id, **_compact(record.to_json())}

    def bar(total: int, done_before: int) -> Any:
        desc = f"{run.dataset} {run.variant}"
        return progress_bar(
            total=total, initial=done_before, desc=desc, unit="q", file=sys.stderr, disable=quiet
        )

    def key(example: QAExample) -> str:
        return example.id

    for _ in resumed(run.examples, key, answered, journal, bar=bar):
        pass
    return in_order(run.examples, key, journal.done)


# --------------------------------------------------------------------------------------------
# Rows and verdicts


def summary_row(run: Run, records: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """The means of one run, flat, with the answer-quality measure of its dataset."""
    summary = summarize_records([check_eval_record(record) for record in records])
    row: dict[str, Any] = {
        "part": run.part,
        "dataset": run.dataset,
        "variant": run.variant,
        "n": summary.n,
        **{key: getattr(summary, key) for key in SUMMARY_KEYS},
    }
    metric = {"dsrag-ranking": "anls", "dsrag-comparison": "em"}.get(run.dataset, "f1")
    row["answer_metric"], row["answer_quality"] = metric, getattr(summary, metric)
    details = [r.get("details") or {} for r in records]
    if run.part == "dsrag":
        row["criteria_per_question"] = _mean(len(d.get("criteria") or []) for d in details)
        row["extractions"] = _counts(str(d.get("decomposition")) for d in details)
    else:
        compress = [d.get("compress") or {} for d in details]
        row["compressed"] = sum(1 for c in compress if c)
        row["extractions"] = _counts(
            str(c["extraction"].get("method")) for c in compress if c.get("extraction")
        )
    return row


def _mean(values: Any) -> float | None:
    values = list(values)
    return sum(values) / len(values) if values else None


def _counts(values: Any) -> dict[str, int]:
    out: dict[str, int] = {}
    for value in values:
        out[value] = out.get(value, 0) + 1
    return out


def graph_verdicts(rows: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per dataset: does ``dics`` reach the heuristic's answer F1 at no more prompt tokens?"""
    verdicts = []
    by = {(r["dataset"], r["variant"]): r for r in rows if r["part"] == "graph"}
    for dataset in dict.fromkeys(r["dataset"] for r in rows if r["part"] == "graph"):
        dics, heuristic = by.get((dataset, "dics")), by.get((dataset, "heuristic"))
        if dics is None or heuristic is None or dics["f1"] is None or heuristic["f1"] is None:
            continue
        verdicts.append(
            {
                "dataset": dataset,
                "f1_dics": dics["f1"],
                "f1_heuristic": heuristic["f1"],
                "prompt_tokens_dics": dics["prompt_tokens"],
                "prompt_tokens_heuristic": heuristic["prompt_tokens"],
                "meets": dics["f1"] >= heuristic["f1"]
                and dics["prompt_tokens"] <= heuristic["prompt_tokens"],
            }
        )
    return verdicts


def dsrag_verdicts(rows: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per dataset: the templated context bars and the reworded drop."""
    verdicts = []
    by = {(r["dataset"], r["variant"]): r for r in rows if r["part"] == "dsrag"}
    for dataset in dict.fromkeys(r["dataset"] for r in rows if r["part"] == "dsrag"):
        templated, reworded = by.get((dataset, "templated")), by.get((dataset, "reworded"))
        verdict: dict[str, Any] = {"dataset": dataset}
        bar_f1, bar_chunks = CONTEXT_BARS[dataset]
        if templated is not None and templated["context_f1"] is not None:
            verdict["context_bar"] = {
                "f1": templated["context_f1"],
                "chunks": templated["anc"],
                "bar_f1": bar_f1,
                "bar_chunks": bar_chunks,
                "meets": templated["context_f1"] >= bar_f1 and templated["anc"] <= bar_chunks,
            }
        if templated is not None and reworded is not None:
            drop = templated["context_f1"] - reworded["context_f1"]
            verdict["reworded_drop"] = {
                "drop": drop,
                "bar": MAX_REWORDED_DROP,
                "meets": drop <= MAX_REWORDED_DROP,
            }
        verdicts.append(verdict)
    return verdicts


def _num(value: Any, digits: int = 3) -> str:
    return "–" if value is None else f"{value:.{digits}f}"


def markdown(payload: dict[str, Any]) -> str:
    """The tables and verdicts of a run, as markdown."""
    meta = payload["meta"]
    split = meta["split"]
    lines = ["# DICS compression and DS-RAG rewordings (issue #14)", ""]
    if split == "eval":
        lines += ["**EVAL ROWS: final measurement (never used for development).**", ""]
    else:
        lines += ["Train rows (development).", ""]
    lines += [
        f"Generator: {meta['generator']}; extraction for dics / dsrag: "
        f"`{meta['extraction']}`; policy: `{meta['policy']}`; graph: {meta['setting']} "
        f"setting, {meta['retriever']} retrieval; DS-RAG: open setting, "
        f"{meta.get('dsrag_retriever', meta['retriever'])} retrieval; "
        f"limit: {meta['limit']} rows per run.",
        "",
    ]
    header = ["part", "dataset", "variant", "n", "F1", "EM", "answer (metric)", "ctx P",
              "ctx R", "ctx F1", "passages", "prompt tok", "LLM calls", "retr. calls",
              "extractions"]  # fmt: skip
    lines += ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    for r in payload["rows"]:
        cells = [r["part"], r["dataset"], r["variant"], str(r["n"]), _num(r["f1"]),
                 _num(r["em"]), f"{_num(r['answer_quality'])} ({r['answer_metric']})",
                 _num(r["context_precision"]), _num(r["context_recall"]),
                 _num(r["context_f1"]), _num(r["anc"], 2), _num(r["prompt_tokens"], 0),
                 _num(r["llm_calls"], 2), _num(r["retrieval_calls"], 2),
                 json.dumps(r.get("extractions", {}))]  # fmt: skip
        lines.append("| " + " | ".join(cells) + " |")
    lines.append("")
    for v in payload["verdicts"]["graph"]:
        verdict = "meets" if v["meets"] else "does not meet"
        lines.append(
            f"- **{v['dataset']}** (graph): dics {verdict} the bar: answer F1 "
            f"{_num(v['f1_dics'])} vs heuristic {_num(v['f1_heuristic'])}, prompt tokens "
            f"{_num(v['prompt_tokens_dics'], 0)} vs {_num(v['prompt_tokens_heuristic'], 0)}."
        )
    for v in payload["verdicts"]["dsrag"]:
        parts = []
        if "context_bar" in v:
            bar = v["context_bar"]
            parts.append(
                f"templated context F1 {_num(bar['f1'])} at {_num(bar['chunks'], 2)} chunks "
                f"({'meets' if bar['meets'] else 'does not meet'} F1 >= {bar['bar_f1']} at <= "
                f"{bar['bar_chunks']} chunks)"
            )
        if "reworded_drop" in v:
            drop = v["reworded_drop"]
            parts.append(
                f"reworded drop {_num(drop['drop'])} "
                f"({'meets' if drop['meets'] else 'does not meet'} <= {drop['bar']})"
            )
        if parts:
            lines.append(f"- **{v['dataset']}** (DS-RAG): " + "; ".join(parts) + ".")
    return "\n".join(lines) + "\n"


# --------------------------------------------------------------------------------------------
# Main


def fake_chat_model(examples: Sequence[QAExample]) -> BaseChatModel:
    """The scripted stand-in: DS-RAG prompts as ``benchmarks/dsrag.py`` answers them, the
    graph's prompts as the test suite's reader (it knows each gold answer and says it only
    when the evidence states it)."""
    from dsrag import _dsrag_reply

    repo = str(_HERE.parent)
    if repo not in sys.path:
        sys.path.insert(0, repo)  # tests/ is a package at the repository root
    from tests.fakes import demo_chat_model

    reader: Any = demo_chat_model({ex.question: ex.answers[0] for ex in examples if ex.answers})

    def respond(messages: list[BaseMessage]) -> str:
        reply = _dsrag_reply(messages)
        return reply if reply is not None else reader.respond(messages)

    return ScriptedChatModel(respond=respond)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--parts", nargs="+", default=list(PARTS), choices=PARTS)
    parser.add_argument("--split", choices=("train", "eval"), default="train")
    parser.add_argument("--graph-datasets", nargs="+", default=list(GRAPH_DATASETS))
    parser.add_argument("--dsrag-datasets", nargs="+", default=list(DSRAG_DATASETS))
    parser.add_argument("--compressions", nargs="+", default=list(COMPRESSIONS))
    parser.add_argument("--forms", nargs="+", default=list(FORMS), choices=FORMS)
    parser.add_argument("--limit", type=int, default=None, help="rows per run (all)")
    parser.add_argument("--setting", choices=("open", "distractor"), default="open")
    parser.add_argument(
        "--retriever",
        default=None,
        help="when unset: the configuration's for the graph, DS-RAG's bm25 for DS-RAG",
    )
    parser.add_argument("--policy", default=None, help="graph policy (configuration's)")
    parser.add_argument("--extraction", choices=EXTRACTIONS, default=None)
    parser.add_argument("--selector", type=Path, default=None, help="GS model file (shipped)")
    parser.add_argument("--no-answer", action="store_true", help="skip final answers")
    add_run_options(parser, "", "the scripted stand-in of benchmarks/dsrag.py (smoke)")
    args = parser.parse_args(argv)
    unknown = set(args.compressions) - set(COMPRESSIONS)
    if unknown:
        parser.error(f"unknown compression {sorted(unknown)[0]!r}")
    args.name = args.name or f"dics-compression-{args.split}"
    return args


def main(argv: list[str] | None = None, *, chat_model: BaseChatModel | None = None) -> int:
    """Run the benchmark; ``chat_model`` replaces the configured generator (tests)."""
    args = parse_args(argv)
    if args.split == "eval":
        print("[dics] EVAL ROWS: the final measurement, never for development", file=sys.stderr)
    if args.selector is not None and not args.selector.is_file():
        print(f"dics benchmark: no selector file at {args.selector}", file=sys.stderr)
        return 2
    overrides = dsrag_overrides(args)
    if args.retriever:
        overrides["retriever"] = args.retriever
    try:
        cfg = Configuration.from_env().merged(overrides)
        runs = plan_runs(args, cfg)
    except (UserInputError, DynakragError) as exc:
        print(f"dics benchmark: {exc}", file=sys.stderr)
        return 2
    if chat_model is None and args.fake_llm:
        chat_model = fake_chat_model([ex for run in runs for ex in run.examples])
        args.no_cache = True  # never mix scripted replies into the real model's cache
    embeddings: Embeddings | None = None
    if any(needs_embeddings(run.cfg.retriever) for run in runs):
        from dynakrag.retrieval.embeddings import default_embeddings

        embeddings = MemoEmbeddings(default_embeddings(batch_size=cfg.embedding_batch_size))
    cache = None if args.no_cache else SQLiteLLMCache.in_dir(cfg.cache_dir)
    rows = []
    try:
        llm = llm_client_from_config(cfg, chat_model=chat_model, cache=cache)
        searchers = Searchers(args, cfg, embeddings)
        for run in runs:
            path = (
                args.out_dir
                / f"{args.name}-runs"
                / f"{run.part}-{run.dataset}-{run.variant}-{settings_hash(run, args)}.jsonl"
            )
            records = run_questions(run, searchers.for_run(run), llm, path, args.quiet)
            rows.append({**summary_row(run, records), "file": str(path)})
        cache_stats = {"enabled": False} if cache is None else {"enabled": True, **cache.stats()}
    except (UserInputError, DynakragError) as exc:
        print(f"dics benchmark: {exc}", file=sys.stderr)
        return 2
    finally:
        if cache is not None:
            cache.close()
    generator = "scripted stand-in (--fake-llm)" if args.fake_llm else None
    generator = generator or llm_description(cfg, chat_model)["llm"]
    payload = {
        "meta": {
            "parts": args.parts,
            "split": args.split,
            "final_measurement": args.split == "eval",
            "limit": args.limit,
            "setting": args.setting,
            "retriever": cfg.retriever,
            "dsrag_retriever": method_configuration(DsragMethod(), cfg).retriever,
            "extraction": cfg.dsrag_extraction,
            "policy": args.policy or cfg.policy,
            "selector": cfg.selector,
            "no_answer": args.no_answer,
            "generator": generator,
            "llm_cache": cache_stats,
            "configuration": cfg.model_dump(mode="json"),
            "git_commit": git_commit(),
        },
        "rows": rows,
        "verdicts": {"graph": graph_verdicts(rows), "dsrag": dsrag_verdicts(rows)},
    }
    text = markdown(payload)
    print(text)
    args.out_dir.mkdir(parents=True, exist_ok=True)
    write_json(args.out_dir / f"{args.name}.json", payload, default=str)
    write_text_atomic(args.out_dir / f"{args.name}.md", text)
    return 0


def plan_runs(args: argparse.Namespace, cfg: Configuration) -> list[Run]:
    """Every run of the asked parts, in order (datasets, then variants)."""
    runs: list[Run] = []
    if "graph" in args.parts:
        for dataset in args.graph_datasets:
            examples = tuple(load_examples(dataset, args.split, args.limit))
            for compression in args.compressions:
                method = DynakragMethod(no_answer=args.no_answer, policy=args.policy)
                variant_cfg = cfg.merged({"compression": compression})
                runs.append(Run("graph", dataset, compression, examples, method, variant_cfg))
    if "dsrag" in args.parts:
        for dataset in args.dsrag_datasets:
            templated, reworded = reworded_examples(dataset, args.split, args.limit, args.seed)
            forms = {"templated": templated, "reworded": reworded}
            for form in args.forms:
                method = DsragMethod(no_answer=args.no_answer)
                method_cfg = method_configuration(method, cfg)
                runs.append(Run("dsrag", dataset, form, tuple(forms[form]), method, method_cfg))
    return runs


class Searchers:
    """The retriever of each run: one open-setting index per dataset (over the pooled
    paragraphs of the split, or DS-RAG's corpus), or one per question in the distractor
    setting; built once and shared by a dataset's runs."""

    def __init__(
        self, args: argparse.Namespace, cfg: Configuration, embeddings: Embeddings | None
    ) -> None:
        self.args, self.cfg, self.embeddings = args, cfg, embeddings
        self.open: dict[str, Searcher] = {}

    def for_run(self, run: Run) -> Callable[[QAExample], Searcher]:
        retriever, embeddings = run.cfg.retriever, self.embeddings
        if run.part == "graph" and self.args.setting == "distractor":
            return lambda ex: build_searcher(retriever, ex.passages, embeddings=embeddings)
        if run.dataset not in self.open:
            pool = load_examples(run.dataset, self.args.split)  # type: ignore[arg-type]
            corpus = open_corpus(pool)
            index_dir = None
            if embeddings is not None:  # the eval runner's own index of the pool (one build)
                index_dir = open_index_dir(
                    self.cfg, run.dataset, self.args.split, corpus, embeddings
                )
            self.open[run.dataset] = build_searcher(
                retriever,
                corpus,
                embeddings=embeddings,
                index_dir=index_dir,
                progress=not self.args.quiet,
                seed=self.args.seed,
            )
        searcher = self.open[run.dataset]
        return lambda ex: searcher


if __name__ == "__main__":
    sys.exit(main())

"""DICS as the graph's compression step, and DS-RAG on templated vs reworded questions (#14).

Three parts, each a set of runs over the rows of ``--split``:

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
``kept``
    What each compression keeps (#34), cheaply: the graph (as in ``graph``: ``--setting``,
    default open; its policy and configuration, environment variables such as
    ``DYNAKRAG_SUB_QUESTION_ANSWERING`` included) runs ONCE per question on
    ``--graph-datasets``, checkpointed in memory and interrupted before
    ``compress_answer_evidence`` or ``stop_answer``, whichever the controller chooses first, so
    neither the compression nor the reader runs (as with ``--no-answer``, the answer prompt is
    declined; the part never answers). Each of ``--compressions`` (``passthrough`` = none,
    ``heuristic`` = lexical, ``dics`` with ``--extraction``) is then applied to that same state
    by the graph's own action (``compress_answer_evidence`` with ``compression`` set). Where
    the controller chose ``stop_answer`` (no compression; the heuristic policy does that when
    the evidence is at most one action's passages) every compression keeps what the reader
    would read, the first ``max_final_docs`` passages (``applied`` false; counted in
    ``compressed``). The run up to that point is the configuration's own (its ``compression``
    only matters to a policy that prices compression: ``cost_lambda`` > 0 or a
    ``token_budget``). Recorded per question: the evidence before compression (ids, titles,
    texts; every passage acquired), and before and per compression the passages, tokens and
    support recall (SR: :func:`dynakrag.eval.metrics.support_recall` against the example's
    gold sets, as the eval runner scores it), and the model calls the compression itself
    made; the graph's own calls beside them. Tokens: the passages as the reader's prompt shows
    them (:func:`dynakrag.prompts.format_passages`) at the library's estimate of 4 characters
    a token (:func:`dynakrag.llm.client.estimate_tokens`). Reported per dataset and
    compression: n, questions compressed, SR before / after, passages and tokens before /
    after, support kept per 1,000 tokens = mean SR after / mean tokens after x 1,000 (a ratio
    of the means over the questions), the compression's model calls; and per dataset the
    issue's rule for ``dics``: its SR after >= the lexical one's and >= SR before - 0.02, at no
    more tokens after than the lexical one's.

Rows: ``--split train`` (the default) is for development. ``--split eval`` is the FINAL
measurement only (the rewordings of eval rows included): it is printed as such and named in
the result files. Nothing here fits or tunes anything.

Resumable: every question's record is appended to
``<out-dir>/<name>-runs/<part>-<dataset>-<variant>-<settings hash>.jsonl`` as soon as it is
done (the hash covers every setting that changes a record, so another setting starts its own
file); a rerun skips the questions already there (a line torn by a kill is dropped), and a
larger ``--limit`` runs only the new rows into the same file. Progress: first a plan (per run,
questions done and to run, ETA = seconds per question, the mean of the run's journaled
records, x questions to run), then per run one line, the first question's time with the ETA
of the rest, and a bar (plain lines in a log file). Every model call goes through the
disk LLM cache (``<cache_dir>/llm-cache.sqlite``) unless ``--no-cache``; ``--fake-llm`` uses
the scripted stand-in of ``benchmarks/dsrag.py`` and no cache (smoke runs only).

Writes ``<out-dir>/<name>.json`` and ``<name>.md`` (default name ``dics-compression-<split>``).

    .venv/bin/python benchmarks/dics_compression.py --parts dsrag --limit 50     # train rows
    .venv/bin/python benchmarks/dics_compression.py --parts graph --limit 60 --split eval
    .venv/bin/python benchmarks/dics_compression.py --parts kept --limit 200 --split eval
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
from typing import Any, cast

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
from dynakrag.eval import metrics  # noqa: E402
from dynakrag.eval.methods import Method  # noqa: E402
from dynakrag.eval.methods.base import method_configuration  # noqa: E402
from dynakrag.eval.methods.dsrag import DsragMethod  # noqa: E402
from dynakrag.eval.methods.dynakrag import AnswerlessLLM, DynakragMethod  # noqa: E402
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
from dynakrag.llm.client import LLMClient, estimate_tokens  # noqa: E402
from dynakrag.llm.factory import llm_client_from_config, llm_description  # noqa: E402
from dynakrag.llm.fake import ScriptedChatModel  # noqa: E402
from dynakrag.progress import progress_bar  # noqa: E402
from dynakrag.prompts import format_passages  # noqa: E402
from dynakrag.retrieval.base import Searcher  # noqa: E402
from dynakrag.routing.factory import build_searcher, needs_embeddings  # noqa: E402
from dynakrag.state import State  # noqa: E402
from dynakrag.workers import RecordJournal, in_order, resumed  # noqa: E402

PARTS = ("graph", "dsrag", "kept")
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
COMPRESSION_LABELS = {"passthrough": "none (passthrough)", "heuristic": "lexical (heuristic)"}
SR_TOLERANCE = 0.02  # the rule: dics keeps SR within 0.02 of SR before compression
HELD_BACK = ("compress_answer_evidence", "stop_answer")  # the kept part stops before either
USAGE_KEYS = ("llm_calls", "prompt_tokens", "completion_tokens")
STEP_KEYS = ("dics_mode", "criteria", "criteria_fallback", "dics_choices", "answer_passages",
             "hop_passages", "extraction")  # fmt: skip
KEPT_RECORD = 1  # the kept part's record format (in its settings hash)
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
        "setting": args.setting if run.part in ("graph", "kept") else "open",
        "method": run.method.name,
        "method_options": run.method.options(),
        "configuration": run.cfg.model_dump(mode="json", exclude={"cache_dir"}),
        "fake_llm": bool(args.fake_llm),
    }
    if run.part == "kept":
        settings["record"] = KEPT_RECORD
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
    todo = len(run.examples) - before
    print(
        f"[dics] {run.part} {run.dataset} {run.variant}: {before} of "
        f"{len(run.examples)} done before, {todo} to run -> {path}",
        file=sys.stderr,
    )

    def record_of(example: QAExample) -> dict[str, Any]:
        if run.part == "kept":
            return kept_record(run, example, searcher_for(example), llm)
        tick = time.perf_counter()
        result = run.method.run(example.question, searcher_for(example), llm, run.cfg)
        latency = time.perf_counter() - tick
        record = question_record(example, result, latency, no_answer=run.method.no_answer)
        return _compact(record.to_json())

    def answered(todo: list[QAExample]) -> Iterator[tuple[QAExample, dict[str, Any]]]:
        for number, example in enumerate(todo, start=1):
            record = {"key": example.id, **record_of(example)}
            if number == 1 and len(todo) > 1:
                seconds = float(record.get("latency_s") or 0.0)
                print(
                    f"[dics] {run.part} {run.dataset} {run.variant}: the first question took "
                    f"{seconds:.1f} s; ETA {_duration(seconds * (len(todo) - 1))} for the "
                    f"{len(todo) - 1} left",
                    file=sys.stderr,
                )
            yield example, record

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


def journal_path(run: Run, args: argparse.Namespace) -> Path:
    """Where the records of ``run`` are journaled (one file per settings hash)."""
    name = f"{run.part}-{run.dataset}-{run.variant}-{settings_hash(run, args)}.jsonl"
    return args.out_dir / f"{args.name}-runs" / name


def print_plan(runs: Sequence[Run], args: argparse.Namespace) -> None:
    """Before any question runs: per run, the questions done before and those to run, and the
    ETA, seconds per question x questions to run (seconds per question: the mean
    ``latency_s`` of the run's journaled records; unknown for a run with none, until its first
    question is done)."""
    total_todo, total_s, unknown = 0, 0.0, 0
    for run in runs:
        path = journal_path(run, args)
        done = RecordJournal(path, key_field="key").done if path.is_file() else {}
        todo = sum(example.id not in done for example in run.examples)
        seconds = [float(r["latency_s"]) for r in done.values() if r.get("latency_s") is not None]
        per_q = sum(seconds) / len(seconds) if seconds else None
        eta = (
            "unknown until its first question"
            if per_q is None
            else (f"{per_q:.1f} s/q x {todo} = {_duration(per_q * todo)}")
        )
        print(
            f"[dics] plan: {run.part} {run.dataset} {run.variant}: {len(run.examples) - todo} "
            f"of {len(run.examples)} done, {todo} to run; ETA {eta}",
            file=sys.stderr,
        )
        total_todo += todo
        if todo and per_q is None:
            unknown += todo
        total_s += (per_q or 0.0) * todo
    if unknown == total_todo and total_todo:
        eta = "unknown until the first question is done"
    else:
        eta = _duration(total_s) + (f" + {unknown} questions of unknown speed" if unknown else "")
    print(f"[dics] plan: {total_todo} question(s) to run; ETA {eta}", file=sys.stderr)


def _duration(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


# --------------------------------------------------------------------------------------------
# The kept part: the graph once per question, every compression on its evidence


def held_back_state(
    run: Run, question: str, searcher: Searcher, client: LLMClient
) -> tuple[State, str]:
    """The graph's state where it would compress: the run of :class:`DynakragMethod` (its
    policy, its configuration, the answer prompt declined as with ``--no-answer``), checkpointed
    in memory and interrupted before ``compress_answer_evidence`` or ``stop_answer``, whichever
    the controller chooses first. Neither runs: ``(state, the node held back)``. ``client``
    is the run's (an :class:`AnswerlessLLM`, which the compressions then share)."""
    from langgraph.checkpoint.memory import InMemorySaver

    from dynakrag.graph.builder import build_graph

    method = run.method
    assert isinstance(method, DynakragMethod)
    cfg = method.configured(run.cfg)
    policy = method.make_policy(cfg, searcher, client)
    graph = build_graph(
        searcher, policy=policy, configuration=cfg, llm=client, checkpointer=InMemorySaver()
    )
    config: Any = {"configurable": {"thread_id": "kept"}}
    graph.invoke({"question": question}, config, interrupt_before=list(HELD_BACK))
    snapshot = graph.get_state(config)
    held = snapshot.next[0] if snapshot.next else ""
    if held not in HELD_BACK:  # the graph always ends through stop_answer
        raise DynakragError(f"the graph stopped before {held or 'the end'}, not at {HELD_BACK}")
    return cast(State, dict(snapshot.values)), held


def passage_tokens(passages: Sequence[Any]) -> int:
    """Tokens of ``passages`` as the reader's prompt shows them: their blocks
    (:func:`dynakrag.prompts.format_passages`) at the library's estimate of 4 characters a
    token (:func:`dynakrag.llm.client.estimate_tokens`, the one the token budget uses); 0 for
    none."""
    return estimate_tokens(format_passages(passages)) if passages else 0


def _kept_side(passages: Sequence[Any], gold: Any) -> dict[str, Any]:
    ids = [doc["id"] for doc in passages]
    return {
        "kept": ids,
        "passages": len(ids),
        "tokens": passage_tokens(passages),
        "support_recall": metrics.support_recall(ids, gold),
    }


def kept_record(run: Run, example: QAExample, searcher: Searcher, llm: LLMClient) -> dict[str, Any]:
    """One question of the kept part: the graph run once up to its compression
    (:func:`held_back_state`), the evidence it holds there (``before``: every passage acquired),
    then each compression of the run applied to that same state by the graph's own action
    (:func:`~dynakrag.actions.compress_answer_evidence.compress_answer_evidence` with
    ``compression`` set), each with what it kept, its tokens, its support recall and the model
    calls it made. When the controller chose ``stop_answer`` (no compression: the evidence is
    small), every compression keeps what the reader would read, the first ``max_final_docs``
    passages, with ``applied`` false."""
    from dynakrag.actions.common import Resources
    from dynakrag.actions.compress_answer_evidence import compress_answer_evidence

    gold = example.gold_sets
    client = AnswerlessLLM(llm)  # the graph's and the compressions' one client
    tick = time.perf_counter()
    state, held = held_back_state(run, example.question, searcher, client)
    graph_s = time.perf_counter() - tick
    evidence = list(state.get("evidence") or [])
    assert isinstance(run.method, DynakragMethod)
    cfg = run.method.configured(run.cfg)
    resources = Resources(searcher=searcher, llm=client)
    compressions: dict[str, Any] = {}
    for name in run.variant.split("+"):
        tick = time.perf_counter()
        if held == "compress_answer_evidence":
            update: dict[str, Any] = dict(
                compress_answer_evidence(state, resources, cfg.merged({"compression": name}))
            )
            kept = list(update.get("evidence") or [])
            step = (update.get("trace") or [{}])[0]
            usage = {k: int(update.get(k) or 0) for k in USAGE_KEYS}
            details = {k: step[k] for k in STEP_KEYS if k in step}
        else:
            kept, usage, details = evidence[: cfg.max_final_docs], dict.fromkeys(USAGE_KEYS, 0), {}
        compressions[name] = {
            **_kept_side(kept, gold),
            "applied": held == "compress_answer_evidence",
            **usage,
            "seconds": round(time.perf_counter() - tick, 4),
            "details": details,
        }
    before = {k: v for k, v in _kept_side(evidence, gold).items() if k != "kept"}
    before["evidence"] = [
        {"id": doc["id"], "title": doc.get("title", ""), "text": doc.get("text", "")}
        for doc in evidence
    ]
    trace = list(state.get("trace") or [])
    latency = graph_s + sum(c["seconds"] for c in compressions.values())
    return {
        "id": example.id,
        "question": example.question,
        "gold_sets": [sorted(group) for group in gold],
        "held_back": held,
        "graph": {
            "actions": [entry.get("action") for entry in trace],
            "retrieval_calls": int(state.get("retrieval_calls") or 0),
            **{key: int(state.get(key) or 0) for key in USAGE_KEYS},
            "seconds": round(graph_s, 4),
        },
        "before": before,
        "compressions": compressions,
        "latency_s": round(latency, 4),
    }


def kept_rows(run: Run, records: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per compression of ``run``, the means over its questions. ``support_per_1k_tokens``:
    mean SR after / mean tokens after x 1,000 (a ratio of the means, not a mean of per-question
    ratios; None at 0 tokens); ``before`` values are the same in every row (one state)."""
    rows = []
    for name in run.variant.split("+"):
        sides = [r["compressions"][name] for r in records]
        sr_after = _mean(s["support_recall"] for s in sides)
        tokens_after = _mean(s["tokens"] for s in sides)
        rows.append(
            {
                "dataset": run.dataset,
                "compression": name,
                "label": COMPRESSION_LABELS.get(name, name),
                "n": len(records),
                "compressed": sum(1 for s in sides if s["applied"]),
                "sr_before": _mean(r["before"]["support_recall"] for r in records),
                "sr_after": sr_after,
                "passages_before": _mean(r["before"]["passages"] for r in records),
                "passages_after": _mean(s["passages"] for s in sides),
                "tokens_before": _mean(r["before"]["tokens"] for r in records),
                "tokens_after": tokens_after,
                "support_per_1k_tokens": sr_after / tokens_after * 1000
                if sr_after is not None and tokens_after
                else None,
                "compression_llm_calls": _mean(s["llm_calls"] for s in sides),
                "compression_prompt_tokens": _mean(s["prompt_tokens"] for s in sides),
                "graph_llm_calls": _mean(r["graph"]["llm_calls"] for r in records),
                "graph_retrieval_calls": _mean(r["graph"]["retrieval_calls"] for r in records),
                "seconds_per_question": _mean(r["latency_s"] for r in records),
            }
        )
    return rows


def kept_verdicts(rows: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per dataset, the issue's default rule for ``dics``: its final-evidence SR at least the
    lexical compression's (``heuristic``) and at least SR before compression - 0.02
    (:data:`SR_TOLERANCE`), at no more tokens than the lexical one's."""
    verdicts = []
    by = {(r["dataset"], r["compression"]): r for r in rows}
    for dataset in dict.fromkeys(r["dataset"] for r in rows):
        dics, lexical = by.get((dataset, "dics")), by.get((dataset, "heuristic"))
        if dics is None or lexical is None or not dics["n"]:
            continue
        checks = {
            "sr_at_least_lexical": dics["sr_after"] >= lexical["sr_after"],
            "sr_within_tolerance_of_before": dics["sr_after"] >= dics["sr_before"] - SR_TOLERANCE,
            "tokens_at_most_lexical": dics["tokens_after"] <= lexical["tokens_after"],
        }
        verdicts.append(
            {
                "dataset": dataset,
                "sr_dics": dics["sr_after"],
                "sr_lexical": lexical["sr_after"],
                "sr_before": dics["sr_before"],
                "tolerance": SR_TOLERANCE,
                "tokens_dics": dics["tokens_after"],
                "tokens_lexical": lexical["tokens_after"],
                **checks,
                "meets": all(checks.values()),
            }
        )
    return verdicts


def kept_markdown(rows: Sequence[dict[str, Any]], verdicts: Sequence[dict[str, Any]]) -> list[str]:
    """The kept part's table and the rule's verdicts, as markdown lines."""
    header = ["dataset", "compression", "n", "compressed", "SR before", "SR after",
              "passages before", "passages after", "tokens before", "tokens after",
              "SR per 1k tokens", "compression LLM calls", "graph LLM calls", "s/q"]  # fmt: skip
    lines = [
        "## What each compression keeps (the graph once per question)",
        "",
        "| " + " | ".join(header) + " |",
        "|" + "|".join("---" for _ in header) + "|",
    ]
    for r in rows:
        cells = [r["dataset"], r["label"], str(r["n"]), str(r["compressed"]),
                 _num(r["sr_before"]), _num(r["sr_after"]), _num(r["passages_before"], 2),
                 _num(r["passages_after"], 2), _num(r["tokens_before"], 0),
                 _num(r["tokens_after"], 0), _num(r["support_per_1k_tokens"]),
                 _num(r["compression_llm_calls"], 2), _num(r["graph_llm_calls"], 2),
                 _num(r["seconds_per_question"], 1)]  # fmt: skip
        lines.append("| " + " | ".join(cells) + " |")
    lines += [
        "",
        "SR: support recall of the evidence before compression (every passage the graph "
        "acquired) and after it; tokens: the passages' prompt blocks at 4 characters a token; "
        "SR per 1k tokens: mean SR after / mean tokens after x 1,000; compressed: questions "
        "where the controller chose to compress (elsewhere every compression keeps the first "
        "max_final_docs passages).",
        "",
    ]
    for v in verdicts:
        verdict = "meets" if v["meets"] else "does not meet"

        def ok(check: str, v: dict[str, Any] = v) -> str:
            return "ok" if v[check] else "fails"

        lines.append(
            f"- **{v['dataset']}** (kept): dics {verdict} the rule: SR after "
            f"{_num(v['sr_dics'])} (>= lexical {_num(v['sr_lexical'])}: "
            f"{ok('sr_at_least_lexical')}; >= before {_num(v['sr_before'])} - "
            f"{v['tolerance']}: {ok('sr_within_tolerance_of_before')}), tokens after "
            f"{_num(v['tokens_dics'], 0)} (<= lexical {_num(v['tokens_lexical'], 0)}: "
            f"{ok('tokens_at_most_lexical')})."
        )
    return lines


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
    if payload["rows"]:
        lines += ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    for r in payload["rows"]:
        cells = [r["part"], r["dataset"], r["variant"], str(r["n"]), _num(r["f1"]),
                 _num(r["em"]), f"{_num(r['answer_quality'])} ({r['answer_metric']})",
                 _num(r["context_precision"]), _num(r["context_recall"]),
                 _num(r["context_f1"]), _num(r["anc"], 2), _num(r["prompt_tokens"], 0),
                 _num(r["llm_calls"], 2), _num(r["retrieval_calls"], 2),
                 json.dumps(r.get("extractions", {}))]  # fmt: skip
        lines.append("| " + " | ".join(cells) + " |")
    if payload["rows"]:
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
    if payload.get("kept"):
        lines += ["", *kept_markdown(payload["kept"], payload["verdicts"]["kept"])]
    # One blank line between blocks, whichever parts ran.
    lines = [line for i, line in enumerate(lines) if line or (i and lines[i - 1])]
    return "\n".join(lines).rstrip("\n") + "\n"


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
    rows, kept = [], []
    print_plan(runs, args)
    try:
        llm = llm_client_from_config(cfg, chat_model=chat_model, cache=cache)
        searchers = Searchers(args, cfg, embeddings)
        for run in runs:
            path = journal_path(run, args)
            records = run_questions(run, searchers.for_run(run), llm, path, args.quiet)
            if run.part == "kept":
                kept += [{**row, "file": str(path)} for row in kept_rows(run, records)]
            else:
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
        "kept": kept,
        "verdicts": {
            "graph": graph_verdicts(rows),
            "dsrag": dsrag_verdicts(rows),
            "kept": kept_verdicts(kept),
        },
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
    if "kept" in args.parts:
        for dataset in args.graph_datasets:
            examples = tuple(load_examples(dataset, args.split, args.limit))
            method = DynakragMethod(no_answer=True, policy=args.policy)
            variant = "+".join(dict.fromkeys(args.compressions))
            runs.append(Run("kept", dataset, variant, examples, method, cfg))
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
        if run.part in ("graph", "kept") and self.args.setting == "distractor":
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

"""Why a chain missed: each missed question of a finished ``dynakrag eval`` run, by cause.

Reads the run's journal (each question's planned hops: answer, passage, the passages asked,
the answers turned down) beside the gold decomposition (MuSiQue's ``decomposition``, 2Wiki's
``evidences`` triples) and names the first place the chain left the gold path:

- ``plan: N hops for M``: the plan's hop count differs from the gold one (reported beside the
  cause below, which is read hop by hop in order);
- ``hop k: passage not found``: the gold passage of the first wrong hop was never asked;
- ``hop k: right answer turned down``: asked, and the gold answer is among the turned-down;
- ``hop k: found, nothing stated``: asked, no answer stood;
- ``hop k: wrong answer (gold passage | other passage)``: a wrong answer stood;
- ``hops right, final answer wrong``: every hop matched, the answer did not.

A hop matches when its answer's token F1 against the gold hop answer is at least 0.5.
Choose changes from TRAIN rows only; on eval rows this is a report, never a guide.

    python benchmarks/chain_causes.py RUN.json --dataset musique --split train
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

_HERE = Path(__file__).resolve().parent
if str(_HERE) not in sys.path:
    sys.path.insert(0, str(_HERE))

from hop_retrieval import HOPS_OF, GoldHop  # noqa: E402

from dynakrag.eval.metrics import f1_score  # noqa: E402

MATCH = 0.5
MISSED = 0.5


def matches(answer: str, gold: str) -> bool:
    return bool(answer) and f1_score(answer, gold) >= MATCH


def journal_hops(record: dict[str, Any]) -> list[dict[str, Any]]:
    """The planned hops a run's record journals (none without a chain)."""
    return (record.get("details") or {}).get("hops") or []


def hop_cause(position: int, hop: dict[str, Any], gold: GoldHop) -> str | None:
    """The cause at this hop, or None when its answer matches the gold one."""
    if hop.get("status") == "resolved" and matches(str(hop.get("answer", "")), gold.answer):
        return None
    where = f"hop {position + 1}"
    asked = set(hop.get("asked") or ()) | {hop.get("passage") or ""}
    if hop.get("status") == "resolved":
        source = "gold passage" if hop.get("passage") == gold.passage else "other passage"
        return f"{where}: wrong answer ({source})"
    if gold.passage not in asked:
        return f"{where}: passage not found"
    # each turned-down answer is journalled as "answer: why"
    rejected = [str(entry).split(": ", 1)[0] for entry in hop.get("rejected") or ()]
    if any(matches(answer, gold.answer) for answer in rejected):
        return f"{where}: right answer turned down"
    return f"{where}: found, nothing stated"


def question_cause(record: dict[str, Any], gold: Sequence[GoldHop]) -> tuple[str, str]:
    """(plan note, cause) of one missed question."""
    hops = journal_hops(record)
    plan = "" if len(hops) == len(gold) else f"plan: {len(hops)} hops for {len(gold)}"
    if not hops:
        return plan, "no plan"
    for position, (hop, gold_hop) in enumerate(zip(hops, gold, strict=False)):
        cause = hop_cause(position, hop, gold_hop)
        if cause is not None:
            return plan, cause
    if len(hops) < len(gold):
        return plan, "plan stops before the last gold hop"
    return plan, "hops right, final answer wrong"


def analyse(run: dict[str, Any], dataset: str, split: str) -> dict[str, Any]:
    from dynakrag.data.datasets.loading import load_examples

    examples = {e.id: e for e in load_examples(dataset, split)}  # type: ignore[arg-type]
    causes: Counter[str] = Counter()
    plans: Counter[str] = Counter()
    rows = []
    for record in run["questions"]:
        example = examples.get(record["id"])
        if example is None or float(record.get("f1", 0.0)) >= MISSED:
            continue
        gold = HOPS_OF[dataset](example)
        plan, cause = question_cause(record, gold)
        causes[cause] += 1
        plans[plan or "plan: gold hop count"] += 1
        hops = journal_hops(record)
        rows.append(
            {
                "id": record["id"],
                "question": example.question,
                "prediction": record.get("prediction", ""),
                "answers": list(example.answers),
                "f1": record.get("f1"),
                "plan": plan,
                "cause": cause,
                "hops": [
                    [h.get("question"), h.get("status"), h.get("answer"), h.get("why")]
                    for h in hops
                ],
                "gold": [[g.text, g.answer] for g in gold],
            }
        )
    n = len(run["questions"])
    return {
        "dataset": dataset,
        "split": split,
        "n": n,
        "missed": len(rows),
        "causes": dict(causes.most_common()),
        "plans": dict(plans.most_common()),
        "rows": rows,
    }


def markdown(result: dict[str, Any]) -> str:
    lines = [
        f"# Chain misses by cause: {result['dataset']} {result['split']} rows",
        "",
        f"{result['missed']} of {result['n']} questions with F1 below {MISSED}.",
        "",
        "| cause | n |",
        "|---|---|",
    ]
    lines += [f"| {cause} | {n} |" for cause, n in result["causes"].items() if n]
    lines += ["", "| plan | n |", "|---|---|"]
    lines += [f"| {plan} | {n} |" for plan, n in result["plans"].items()]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("run", type=Path, help="a finished `dynakrag eval` JSON")
    parser.add_argument("--dataset", required=True, choices=sorted(HOPS_OF))
    parser.add_argument("--split", default="train", choices=("train", "eval"))
    parser.add_argument("--json", type=Path, help="also write the per-question causes here")
    parser.add_argument("--verbose", action="store_true", help="print each missed question")
    args = parser.parse_args(argv)
    result = analyse(json.loads(args.run.read_text()), args.dataset, args.split)
    print(markdown(result))
    for row in result["rows"] if args.verbose else ():
        print(f"- {row['id']} F1 {row['f1']:.2f} {row['cause']} {row['plan']}")
        print(f"  Q: {row['question']}  -> {row['prediction']!r} (gold {row['answers']})")
        for hop in row["hops"]:
            print(f"  plan: {hop}")
        for hop in row["gold"]:
            print(f"  gold: {hop}")
    if args.json:
        args.json.write_text(json.dumps(result, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

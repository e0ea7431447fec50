"""Comparisons in the graph: answers computed from the chain's parsed values beside the reader's.

A comparison ("Which film came out earlier, A or B?", "Who was born first, A or B?") gets a hop
per option in ``chain`` mode; when each hop's answer is a value (a date, a number) the answer is
computed in code from the parsed values (:mod:`dynakrag.values`), with no model call, and cites
each value's passage. Otherwise the reader composes it from the resolved hops and the passages.

This script puts the two side by side on runs already made, with no model call:

* **2Wiki, first 60 eval rows** (their ``type`` from the dataset: comparison, bridge_comparison,
  compositional): EM of the chain run split by how each answer was made (computed in code,
  no model call at ``stop_answer``; written by the reader; abstained), beside the EM of the
  joint graph before the chain and of naive top-5 on the same rows, whose answers the reader
  always writes. Reads the stored runs in ``benchmarks/results/chain-real-runs/``
  (``2wiki-chain-read.json``, ``2wiki-before.json``, ``2wiki-naive.json``).
* **Demo worlds** (the shipped world's journals and the held-out seeds'): EM on the comparison
  questions for the chain and for naive, from the journals of ``benchmarks/demo_world.py``.

Eval rows are measured here, never tuned on. Needs ``DYNAKRAG_DATA_DIR`` for the 2Wiki types
(the part is skipped with a message without it).

    .venv/bin/python benchmarks/computed_comparisons.py
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

_HERE = Path(__file__).resolve().parent
if str(_HERE) not in sys.path:
    sys.path.insert(0, str(_HERE))

from runstore import fmt, write_results  # noqa: E402

RESULTS = _HERE / "results"
REAL_RUNS = RESULTS / "chain-real-runs"
DEMO_JOURNALS = (RESULTS / "demo-world-chain-runs", RESULTS / "demo-world-heldout-seeds-runs")
TYPES_2WIKI = ("comparison", "bridge_comparison", "compositional")


def how_answered(record: dict[str, Any]) -> str:
    """``computed`` (the chain's own answer: no model call at ``stop_answer``), ``reader`` or
    ``abstained``."""
    if record.get("abstained"):
        return "abstained"
    stop = (record.get("details") or {}).get("accounting", {}).get("stop_answer", {})
    return "computed" if stop.get("llm_calls", 1) == 0 else "reader"


def _em(records: Iterable[dict[str, Any]]) -> tuple[int, float | None]:
    scores = [float(r.get("em") or 0.0) for r in records]
    return len(scores), (sum(scores) / len(scores) if scores else None)


def wiki_rows(runs_dir: Path, limit: int = 60) -> list[dict[str, Any]]:
    """Per 2Wiki question type: the chain's EM by how its answers were made, and the EM of
    the reader-written runs (before, naive) on the same rows."""
    from dynakrag.data.datasets import load_examples

    kinds = {e.id: str(e.meta.get("type")) for e in load_examples("2wiki", "eval", limit)}
    runs = {}
    for method in ("chain-read", "before", "naive"):
        path = runs_dir / f"2wiki-{method}.json"
        runs[method] = {r["id"]: r for r in json.loads(path.read_text())["questions"]}
    rows = []
    for kind in TYPES_2WIKI:
        ids = [i for i, k in kinds.items() if k == kind and i in runs["chain-read"]]
        chain = [runs["chain-read"][i] for i in ids]
        row: dict[str, Any] = {"set": "2Wiki eval", "type": kind, "n": len(ids)}
        row["chain"] = _em(chain)[1]
        for how in ("computed", "reader", "abstained"):
            row[f"chain_{how}"] = _em(r for r in chain if how_answered(r) == how)
        for method in ("before", "naive"):
            row[method] = _em(runs[method][i] for i in ids if i in runs[method])[1]
        rows.append(row)
    return rows


def demo_rows(folders: Sequence[Path]) -> list[dict[str, Any]]:
    """EM on the demo worlds' comparison questions, per journal (variant and seed)."""
    per: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    for folder in folders:
        for path in sorted(folder.glob("*.jsonl")):
            variant = path.stem.rsplit("-w", 1)[0]
            for line in path.read_text(encoding="utf-8").splitlines():
                record = json.loads(line)
                if record.get("kind") == "comparison":
                    per[(variant, str(record.get("world_seed")))].append(record)
    rows = []
    for (variant, seed), records in sorted(
        per.items(), key=lambda item: (int(item[0][1]), item[0][0])
    ):
        computed = [r for r in records if variant == "chain" and _chain_computed(r)]
        n, em = _em(records)
        rows.append(
            {
                "set": f"demo world {seed}",
                "type": "comparison",
                "variant": variant,
                "n": n,
                "em": em,
                "computed": _em(computed) if variant == "chain" else None,
            }
        )
    return rows


def _chain_computed(record: dict[str, Any]) -> bool:
    """A demo-world chain answer made in code: every hop resolved to a value and no reader
    call after the hops (the journal keeps the chain and the prediction)."""
    chain = record.get("chain") or []
    return (
        bool(chain)
        and all(h.get("status") == "resolved" for h in chain)
        and not any(h.get("expects") not in ("date", "number") for h in chain)
    )


def markdown(wiki: Sequence[dict[str, Any]], demo: Sequence[dict[str, Any]]) -> str:
    lines = ["# Comparisons in the graph: computed from the chain's values vs the reader", ""]
    if wiki:
        lines += [
            "## 2Wiki, first 60 eval rows (open setting, dense, embedded 1.5B)",
            "The chain's own answer needs no model call at the end: computed from the hops' values "
            "for a comparison, the last hop's answer for a bridge (compositional).",
            "",
            "| type | n | chain EM | chain's own answer: n, EM | reader: n, EM | abstained: n "
            "| before EM (reader) | naive EM (reader) |",
            "|---|---|---|---|---|---|---|---|",
        ]
        for row in wiki:
            parts = [
                row["type"],
                str(row["n"]),
                fmt(row["chain"]),
                *(f"{n}, {fmt(em)}" for n, em in (row["chain_computed"], row["chain_reader"])),
                str(row["chain_abstained"][0]),
                fmt(row["before"]),
                fmt(row["naive"]),
            ]
            lines.append("| " + " | ".join(parts) + " |")
        lines.append("")
    if demo:
        lines += [
            "## Demo worlds, comparison questions",
            "",
            "| world | variant | n | EM | of them computed from dates: n, EM |",
            "|---|---|---|---|---|",
        ]
        for row in demo:
            computed = row["computed"]
            cell = f"{computed[0]}, {fmt(computed[1])}" if computed else "–"
            lines.append(
                f"| {row['set']} | {row['variant']} | {row['n']} | {fmt(row['em'])} | {cell} |"
            )
        lines.append("")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs-dir", type=Path, default=REAL_RUNS)
    parser.add_argument("--demo-journals", type=Path, nargs="*", default=list(DEMO_JOURNALS))
    parser.add_argument("--out-dir", type=Path, default=RESULTS)
    parser.add_argument("--name", default="computed-comparisons")
    args = parser.parse_args(argv)
    from dynakrag.data.datasets import data_dir

    wiki: list[dict[str, Any]] = []
    if data_dir(must_exist=False).is_dir():
        wiki = wiki_rows(args.runs_dir)
    else:
        print("2Wiki part skipped: set DYNAKRAG_DATA_DIR to the benchmark data", file=sys.stderr)
    demo = demo_rows(args.demo_journals)
    text = markdown(wiki, demo)
    write_results(args.out_dir, args.name, {"2wiki": wiki, "demo_worlds": demo}, text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

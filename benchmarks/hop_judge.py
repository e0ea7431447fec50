"""Which answers the chain lets stand: its judge on gold hops, without a model.

The chain keeps a hop's answer only when a sentence of a passage about the hop's entity states
it, the answer is of the kind the hop asks for and is not the question's own entity
(``actions.chain``). Whether that judge turns down right answers, and how many other names it
would let through, is a question of language rules alone, so it is measured here on the gold
decompositions (MuSiQue's ``decomposition``, 2Wiki's ``evidences`` triples; earlier hops'
answers written in, "Subject >> relation" asked as "What is the relation of Subject?"):

* **gold accepted**: the hop's gold answer over its gold passage stands (recall; a turned-down
  right answer costs the chain that hop, and every hop after it);
* **other names accepted**: up to 5 other names of the same passage, of the kind the hop asks
  for, stand (what the judge leaves to the model: it cannot tell a wrong name the passage
  states about the entity from the right one);
* the reasons right answers are turned down, most frequent first.

TRAIN ROWS ONLY by default. Writes ``hop-judge.json`` and ``.md`` under ``--out-dir``.

    python benchmarks/hop_judge.py                           # MuSiQue and 2Wiki, 200 each
    python benchmarks/hop_judge.py --datasets musique --limit 50
"""

from __future__ import annotations

import argparse
import re
import sys
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

_HERE = Path(__file__).resolve().parent
if str(_HERE) not in sys.path:
    sys.path.insert(0, str(_HERE))

from hop_retrieval import HOPS_OF, GoldHop, add_gold_hop_options  # noqa: E402
from runstore import fmt, write_results  # noqa: E402

from dynakrag.actions.chain import judge_answer, plan_hops  # noqa: E402
from dynakrag.actions.statements import kind_fits  # noqa: E402

OTHER_NAMES = 5
_NAME = re.compile(r"\b[A-Z][\w'-]+(?:\s+(?:of\s+|the\s+|de\s+)?[A-Z][\w'-]+)*")
_QUOTED = re.compile(r"'[^']*'|\"[^\"]*\"")


def hop_question(hop: GoldHop) -> str:
    """The hop as the chain would ask it: "Subject >> relation" becomes "What is the relation
    of Subject?"; a question stays as it is."""
    if ">>" not in hop.text:
        return hop.text
    subject, relation = (part.strip() for part in hop.text.split(">>", 1))
    return f"What is the {relation} of {subject}?"


def planned(hop: GoldHop) -> tuple[list[Any], int]:
    """The chain's plan at this hop, and the hop's index in it: the earlier hops it goes on
    from resolved to their gold answers and referred to as ``#k`` (as the chain holds them),
    then the hop."""
    asked = hop_question(hop)
    bridges = [bridge for bridge in hop.bridges if bridge and bridge in asked]
    for number, bridge in enumerate(bridges, start=1):
        asked = asked.replace(bridge, f"#{number}")
    hops = plan_hops([*(f"What is {bridge}?" for bridge in bridges), asked])
    for earlier, bridge in zip(hops, bridges, strict=False):
        earlier["status"], earlier["answer"] = "resolved", bridge
    return hops, len(bridges)


def _as_doc(passage: Any) -> dict[str, Any]:
    return {"id": passage.id, "title": passage.title, "text": passage.text}


def _names_of_kind(text: str, expects: str, answer: str, limit: int) -> list[str]:
    """Up to ``limit`` names of ``text`` (sorted) of the kind a hop expects, not ``answer``."""
    wanted = answer.lower()
    return sorted(
        name
        for name in {m.group(0) for m in _NAME.finditer(text)}
        if name.lower() not in wanted and wanted not in name.lower() and kind_fits(name, expects)
    )[:limit]


def elsewhere(
    hop: GoldHop, question: str, passages: Sequence[Any], bridge_named: bool = True
) -> tuple[int, int]:
    """For a hop that goes on from an earlier answer: (names of the question's other passages
    -- neither gold passage -- of the hop's kind, how many of them the judge lets stand over
    their own passage). A passage about another entity ("a Tony winner's" for "What did #1
    win a Tony for?") states nothing about the hop's."""
    hops, index = planned(hop)
    if index == 0:
        return 0, 0
    names = accepted = 0
    for passage in passages:
        for name in _names_of_kind(passage.text, hops[index]["expects"], hop.answer, 3):
            names += 1
            stood = judge_answer(
                name, hops, index, question, [_as_doc(passage)], bridge_named=bridge_named
            )
            accepted += stood[0] is not None
    return names, accepted


def judged(
    hop: GoldHop,
    question: str,
    passage: Any,
    bridge_named: bool = True,
    others_passages: Sequence[Any] = (),
) -> dict[str, Any]:
    """The judge's verdicts on the gold answer and on other names of the gold passage."""
    hops, index = planned(hop)
    docs = [_as_doc(passage)]
    statement, why, through = judge_answer(
        hop.answer, hops, index, question, docs, bridge_named=bridge_named
    )
    others = _names_of_kind(passage.text, hops[index]["expects"], hop.answer, OTHER_NAMES)
    let_through = sum(
        judge_answer(name, hops, index, question, docs, bridge_named=bridge_named)[0] is not None
        for name in others
    )
    elsewhere_names, elsewhere_accepted = elsewhere(hop, question, others_passages, bridge_named)
    return {
        "position": hop.position,
        "goes_on": index > 0,
        "elsewhere": elsewhere_names,
        "elsewhere_accepted": elsewhere_accepted,
        "accepted": statement is not None,
        "extended": through is not None,
        "reason": "" if statement is not None else _QUOTED.sub("'…'", why),
        "others": len(others),
        "others_accepted": let_through,
    }


def summarise(rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    others = sum(r["others"] for r in rows)
    later = [r for r in rows if r["goes_on"]]
    elsewhere_names = sum(r["elsewhere"] for r in later)
    return {
        "later_hops": len(later),
        "later_gold_accepted": sum(r["accepted"] for r in later) / len(later) if later else 0.0,
        "elsewhere_names": elsewhere_names,
        "elsewhere_accepted": (
            sum(r["elsewhere_accepted"] for r in later) / elsewhere_names
            if elsewhere_names
            else 0.0
        ),
        "hops": len(rows),
        "gold_accepted": sum(r["accepted"] for r in rows) / len(rows) if rows else 0.0,
        "extended": sum(r["extended"] for r in rows),
        "other_names": others,
        "other_names_accepted": (
            sum(r["others_accepted"] for r in rows) / others if others else 0.0
        ),
        "reasons": Counter(r["reason"] for r in rows if r["reason"]).most_common(10),
    }


JUDGES = {"judge": True, "judge, bridge's passage not required": False}
"""The shipped judge, and the same judge without the rule that a hop going on from an earlier
answer stands only on a passage naming that answer (``bridge_named``), side by side."""


def run(args: argparse.Namespace) -> dict[str, Any]:
    from dynakrag.data.datasets.loading import load_examples

    result: dict[str, Any] = {"split": args.split, "limit": args.limit, "rows": []}
    for dataset in args.datasets:
        pool = load_examples(dataset, args.split)  # type: ignore[arg-type]
        examples = pool[: args.limit] if args.limit else pool
        for judge, bridge_named in JUDGES.items():
            tick = time.perf_counter()
            rows = []
            for example in examples:
                passages = {p.id: p for p in example.passages}
                others = [p for p in example.passages if p.id not in set(example.support)]
                for hop in HOPS_OF[dataset](example):
                    if hop.answer and hop.passage in passages:
                        rows.append(
                            judged(
                                hop, example.question, passages[hop.passage], bridge_named, others
                            )
                        )
            summary = summarise(rows)
            summary.update(
                dataset=dataset,
                judge=judge,
                questions=len(examples),
                seconds=time.perf_counter() - tick,
            )
            result["rows"].append(summary)
            print(
                f"[hop-judge] {dataset}, {judge}: gold accepted {summary['gold_accepted']:.3f} "
                f"of {summary['hops']} hops; other names accepted "
                f"{summary['other_names_accepted']:.3f} of {summary['other_names']}; names "
                f"elsewhere accepted {summary['elsewhere_accepted']:.3f} of "
                f"{summary['elsewhere_names']}",
                file=sys.stderr,
                flush=True,
            )
    return result


def markdown(result: dict[str, Any]) -> str:
    lines = [
        "# The chain's judge on gold hops (no model)",
        "",
        f"{result['split'].upper()} rows (first {result['limit'] or 'all'} per dataset). "
        "Gold accepted: the hop's gold answer over its gold passage stands; other names "
        f"accepted: up to {OTHER_NAMES} other names of that passage, of the hop's kind, stand "
        "(the model must tell those apart). Later hops: those that go on from an earlier "
        "hop's answer (resolved in the plan, as the chain holds them); names elsewhere: up to 3 "
        "names of each of the question's passages that are neither gold passage, of the hop's "
        "kind, judged over their own passage (each one a wrong answer let stand).",
        "",
        "| dataset | judge | questions | hops | gold accepted | extended through | other names | "
        "other names accepted | later hops | their gold accepted | names elsewhere | "
        "accepted |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for row in result["rows"]:
        lines.append(
            f"| {row['dataset']} | {row['judge']} | {row['questions']} | {row['hops']} | "
            f"{fmt(row['gold_accepted'])} | {row['extended']} | {row['other_names']} | "
            f"{fmt(row['other_names_accepted'])} | {row['later_hops']} | "
            f"{fmt(row['later_gold_accepted'])} | {row['elsewhere_names']} | "
            f"{fmt(row['elsewhere_accepted'])} |"
        )
    for row in result["rows"]:
        lines += ["", f"Right answers turned down, {row['dataset']}, {row['judge']}:", ""]
        lines += [f"- {n} x {reason}" for reason, n in row["reasons"]]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    add_gold_hop_options(parser, name="hop-judge", limit=200)
    args = parser.parse_args(argv)
    result = run(args)
    write_results(args.out_dir, args.name, result, markdown(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

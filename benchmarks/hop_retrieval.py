"""Which retriever finds each hop's passage: bm25, dense and hybrid on gold hop queries.

The chain searches one hop at a time with a query that names the hop's entity exactly, and
takes the candidates that name it first (``actions.frontier.acquire``). Whether dense, BM25 or
their fusion finds the hop's passage is a question of retrieval alone, so it is measured here
without a model: for every hop of the gold decompositions (MuSiQue's ``decomposition``,
2Wiki's ``evidences`` triples), the query is the hop's subject and relation with the gold
answers of earlier hops written in, searched over the split's pooled corpus (the open
setting), and a hop counts as found when its gold passage is among the ``docs_per_action``
passages the chain would add (names first) -- or among the top 10 (the frontier).

TRAIN ROWS ONLY by default (this picks a default). Writes ``hop-retrieval.json`` and ``.md``
under ``--out-dir``.

    python benchmarks/hop_retrieval.py                       # MuSiQue and 2Wiki train rows
    python benchmarks/hop_retrieval.py --datasets musique --limit 50
"""

from __future__ import annotations

import argparse
import re
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

_HERE = Path(__file__).resolve().parent
if str(_HERE) not in sys.path:
    sys.path.insert(0, str(_HERE))

from runstore import fmt, write_results  # noqa: E402

from dynakrag.actions.frontier import nearness  # noqa: E402
from dynakrag.configuration import Configuration  # noqa: E402

RETRIEVERS = ("bm25", "dense", "hybrid")
FRONTIER = 10
_REFERENCE = re.compile(r"#(\d+)")


@dataclass(frozen=True)
class GoldHop:
    """One hop of a gold decomposition: its query, the entity it names, its passage id, its
    gold answer and its text as the decomposition words it (earlier answers written in)."""

    question_id: str
    position: int
    query: str
    entity: str
    passage: str
    answer: str = ""
    text: str = ""
    bridges: tuple[str, ...] = ()
    """Earlier hops' answers written into ``text`` (the entity a later hop goes on from)."""


def musique_hops(example: Any) -> list[GoldHop]:
    """MuSiQue's hops: "Subject >> relation" (or a question with ``#k``), each with its
    answer and supporting paragraph; earlier answers are written into later hops."""
    answers: list[str] = []
    hops: list[GoldHop] = []
    for position, (text, answer, passage) in enumerate(example.meta["decomposition"]):

        def written(match: re.Match[str]) -> str:
            index = int(match.group(1)) - 1
            return answers[index] if 0 <= index < len(answers) else match.group(0)

        resolved = _REFERENCE.sub(written, text)
        subject = resolved.split(">>", 1)[0].strip() if ">>" in resolved else ""
        entity = subject or next(
            (answers[int(m) - 1] for m in _REFERENCE.findall(text) if int(m) - 1 < len(answers)),
            "",
        )
        query = " ".join(resolved.replace(">>", " ").split())
        bridges = tuple(
            answers[int(m) - 1] for m in _REFERENCE.findall(text) if 0 < int(m) <= len(answers)
        )
        hops.append(
            GoldHop(example.id, position, query, entity, passage, answer, resolved, bridges)
        )
        answers.append(answer)
    return hops


def wiki_hops(example: Any) -> list[GoldHop]:
    """2Wiki's hops: one per evidence triple (subject, relation, object); its passage is the
    question's own paragraph titled with the subject."""
    by_title = {p.title: p.id for p in example.passages if p.id in set(example.support)}
    hops = []
    values: list[str] = []
    for position, (subject, relation, value) in enumerate(example.meta.get("evidences") or ()):
        bridges = (subject,) if subject in values else ()
        values.append(value)
        if subject in by_title:
            hops.append(
                GoldHop(
                    example.id,
                    position,
                    f"{subject} {relation}",
                    subject,
                    by_title[subject],
                    value,
                    f"{subject} >> {relation}",
                    bridges,
                )
            )
    return hops


HOPS_OF = {"musique": musique_hops, "2wiki": wiki_hops}


def hop_ranks(searcher: Any, hops: Sequence[GoldHop], take: int) -> list[dict[str, Any]]:
    """Per hop: whether its passage is among the ``take`` the chain would add (names first),
    among the plain top ``take``, and among the top :data:`FRONTIER`."""
    rows = []
    for hop in hops:
        hits = searcher.search(hop.query, FRONTIER)
        ids = [passage.id for passage, _ in hits]
        named = sorted(hits, key=lambda hit: nearness(hit[0], [hop.entity]))
        rows.append(
            {
                "position": hop.position,
                "named_first": hop.passage in [p.id for p, _ in named[:take]],
                "plain": hop.passage in ids[:take],
                "frontier": hop.passage in ids,
            }
        )
    return rows


def summarise(rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    n = len(rows)
    later = [r for r in rows if r["position"] > 0]

    def share(items: Sequence[dict[str, Any]], key: str) -> float:
        return sum(r[key] for r in items) / len(items) if items else 0.0

    return {
        "hops": n,
        "named_first": share(rows, "named_first"),
        "plain": share(rows, "plain"),
        "frontier": share(rows, "frontier"),
        "first_hop_named_first": share([r for r in rows if r["position"] == 0], "named_first"),
        "later_hops_named_first": share(later, "named_first"),
    }


def run(args: argparse.Namespace) -> dict[str, Any]:
    from dynakrag.data.datasets.loading import load_examples, open_corpus
    from dynakrag.retrieval.embeddings import default_embeddings
    from dynakrag.routing.factory import build_searcher

    cfg = Configuration.from_env()
    embeddings = default_embeddings(batch_size=cfg.embedding_batch_size)
    result: dict[str, Any] = {
        "split": args.split,
        "take": cfg.docs_per_action,
        "frontier": FRONTIER,
        "rows": [],
    }
    for dataset in args.datasets:
        pool = load_examples(dataset, args.split)  # type: ignore[arg-type]
        examples = pool[: args.limit] if args.limit else pool
        hops = [hop for ex in examples for hop in HOPS_OF[dataset](ex)]
        corpus = open_corpus(pool)
        print(
            f"[hop-retrieval] {dataset}/{args.split}: {len(examples)} questions, {len(hops)} "
            f"hops, {len(corpus)} passages",
            file=sys.stderr,
            flush=True,
        )
        dense = build_searcher("dense", corpus, embeddings=embeddings, progress=not args.quiet)
        for name in RETRIEVERS:
            tick = time.perf_counter()
            searcher = dense if name == "dense" else build_searcher(name, corpus, dense=dense)
            rows = hop_ranks(searcher, hops, cfg.docs_per_action)
            summary = summarise(rows)
            summary.update(
                dataset=dataset,
                retriever=name,
                questions=len(examples),
                seconds=time.perf_counter() - tick,
            )
            result["rows"].append(summary)
            print(
                f"[hop-retrieval] {dataset} {name}: found {summary['named_first']:.3f} "
                f"(plain {summary['plain']:.3f}, top {FRONTIER} {summary['frontier']:.3f})",
                file=sys.stderr,
                flush=True,
            )
    return result


def markdown(result: dict[str, Any]) -> str:
    lines = [
        "# Each hop's passage, by retriever (no model)",
        "",
        f"{result['split'].upper()} rows, open setting (the split's pooled corpus). A hop's "
        "query is its subject and relation with the gold answers of earlier hops written in; "
        f"found = its gold passage is among the {result['take']} passages the chain adds "
        "(candidates naming the entity first, a namesake's own name aside, from the top "
        f"{result['frontier']}).",
        "",
        "| dataset | retriever | questions | hops | found (names first) | found (plain top "
        f"{result['take']}) | in top {result['frontier']} | first hop | later hops |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for row in result["rows"]:
        lines.append(
            f"| {row['dataset']} | {row['retriever']} | {row['questions']} | {row['hops']} | "
            f"{fmt(row['named_first'])} | {fmt(row['plain'])} | {fmt(row['frontier'])} | "
            f"{fmt(row['first_hop_named_first'])} | {fmt(row['later_hops_named_first'])} |"
        )
    return "\n".join(lines) + "\n"


def add_gold_hop_options(parser: argparse.ArgumentParser, *, name: str, limit: int) -> None:
    """The options of the benchmarks on gold hops: datasets, split, rows, where results go."""
    parser.add_argument("--datasets", nargs="+", default=list(HOPS_OF), choices=list(HOPS_OF))
    parser.add_argument("--split", default="train", choices=("train", "eval"))
    parser.add_argument("--limit", type=int, default=limit, help="first N questions (0: all)")
    parser.add_argument("--out-dir", type=Path, default=_HERE / "results")
    parser.add_argument("--name", default=name)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    add_gold_hop_options(parser, name="hop-retrieval", limit=0)
    parser.add_argument("--quiet", action="store_true")
    args = parser.parse_args(argv)
    result = run(args)
    write_results(args.out_dir, args.name, result, markdown(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

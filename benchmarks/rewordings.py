"""DS-RAG questions asked in other words: the same people and facts, not the two templates.

DS-RAG's rows are written from two templates ("Who's born date is the <rank> earliest, among
A, <description>, B and C?", "Is nationality of A, <description>, B and C the same/different?").
:func:`reword` asks the same thing otherwise: another phrasing ("Which of A, B and C is the
youngest?", "Are A, B and C from the same country?"), the people in another order, and the
description of the described person kept inline, in parentheses, as a sentence of its own, or
left out. The gold answer, the gold chunks and the people stay those of the row, so context
P/R/F1 of the reworded question is comparable with the templated one.

Rewordings are built at run time from the data folder (``DYNAKRAG_DATA_DIR``); no copy of the
data is written. Development uses TRAIN rows only (``split="train"``, the default); the same
generator on EVAL rows is for the final measurement only (``split="eval"``; the callers flag
it). Each row gets one rewording, chosen by a seeded generator from the row's dataset and
number, so a run is reproducible.

    .venv/bin/python benchmarks/rewordings.py --dataset dsrag-ranking --limit 5   # prints them
"""

from __future__ import annotations

import argparse
import dataclasses
import random
import re
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from dynakrag.data.datasets import QAExample, load_examples

__all__ = ["Template", "parse_template", "reword", "reworded_examples"]

RANKING = re.compile(r"^Who's born date is the (\w+) earliest, among (?P<body>.+)\?$", re.S)
COMPARISON = re.compile(r"^Is nationality of (?P<body>.+) (?P<compare>the same|different)\?$", re.S)
ORDINALS = ("first", "second", "third", "fourth", "fifth")
DESCRIPTION_MODES = ("inline", "parenthetical", "sentence", "none")

RANKING_PHRASES: tuple[str, ...] = (
    "Which of {people} is the {oldest}?",
    "Of {people}, who was born {born}?",
    "Who among {people} has the {earliest} birth date?",
    "Looking at {people}: who is the {oldest}?",
)
COMPARISON_PHRASES: dict[str, tuple[str, ...]] = {
    "same": (
        "Are {people} from the same country?",
        "Do {people} share the same nationality?",
        "Is it true that {people} all hold the same citizenship?",
        "Looking at {people}: are they citizens of the same country?",
    ),
    "different": (
        "Are {people} from different countries?",
        "Do {people} have different nationalities?",
        "Is it true that {people} hold different citizenships?",
        "Looking at {people}: are they citizens of different countries?",
    ),
}


@dataclass(frozen=True)
class Template:
    """What a templated row asks: the people in the question's order, which of them carries
    the description (and the description, "who ..."), and the rank or the comparison."""

    kind: Literal["ranking", "comparison"]
    people: tuple[str, ...]
    described: int | None
    description: str
    rank: int = 0
    """1-based rank by birth date, earliest first; -1 for "last"."""
    compare: str = ""
    """``same`` or ``different``."""


def parse_template(example: QAExample) -> Template:
    """The parts of a templated DS-RAG question; ValueError when it is not one of the two
    templates or does not name every person of its row."""
    question = " ".join(example.question.split())
    ranking, comparison = RANKING.match(question), COMPARISON.match(question)
    match = ranking or comparison
    if match is None:
        raise ValueError(f"not a templated DS-RAG question: {question[:80]!r}")
    body = match.group("body")
    people = [str(p) for p in example.meta.get("people", ())]
    positions = sorted((body.find(person), person) for person in people)
    if not people or any(position < 0 for position, _ in positions):
        raise ValueError(f"the question does not name every person of its row: {people}")
    described, description = None, ""
    for index, (position, person) in enumerate(positions):
        following = positions[index + 1][0] if index + 1 < len(positions) else len(body)
        between = body[position + len(person) : following].strip(" ,")
        between = re.sub(r",?\s*(?:and|or)$", "", between).strip(" ,")
        if between:
            described, description = index, between
    ordered = tuple(person for _, person in positions)
    if ranking is not None:
        word = ranking.group(1).lower()
        rank = -1 if word == "last" else ORDINALS.index(word) + 1 if word in ORDINALS else 0
        if rank == 0:
            raise ValueError(f"unknown rank {word!r}")
        return Template("ranking", ordered, described, description, rank=rank)
    compare = "same" if match.group("compare") == "the same" else "different"
    return Template("comparison", ordered, described, description, compare=compare)


def _listed(entries: Sequence[str]) -> str:
    """ "A, B and C"; an entry that ends with a comma (an inline description) is followed by
    " B" or " and C" instead."""
    text = entries[0]
    for index, entry in enumerate(entries[1:], start=1):
        last = index == len(entries) - 1
        if text.endswith(","):
            text += " and " if last else " "
        else:
            text += " and " if last else ", "
        text += entry
    return text


def _rank_words(rank: int, count: int) -> dict[str, str]:
    """ "oldest" / "born first" / "earliest" for a rank counted from the earliest birth date."""
    if rank == 1:
        return {"oldest": "oldest", "born": "first", "earliest": "earliest"}
    if rank == -1 or rank == count:
        return {"oldest": "youngest", "born": "last", "earliest": "latest"}
    ordinal = ORDINALS[rank - 1]
    return {"oldest": f"{ordinal} oldest", "born": ordinal, "earliest": f"{ordinal} earliest"}


def _sentence(person: str, description: str) -> str:
    """ "who was born in Brenn, and who faced ..." said of ``person`` as a sentence."""
    clause = re.sub(r"^who\s+", "", description)
    clause = re.sub(r",?\s+and who\s+", ", and ", clause)
    return f"{person} {clause}".rstrip(".") + "."


def reword(example: QAExample, seed: int = 13) -> QAExample:
    """``example`` asked in other words (see the module doc); ValueError when its question is
    not templated. The id gets ``-reworded``; ``meta`` keeps the original question and how it
    was reworded."""
    template = parse_template(example)
    rng = random.Random(f"{seed}:{example.dataset}:{example.row}")
    people = list(template.people)
    rng.shuffle(people)
    mode = rng.choice(DESCRIPTION_MODES) if template.described is not None else "none"
    described = template.people[template.described] if template.described is not None else ""
    lead = ""
    names = list(people)
    if mode == "inline":
        names = [f"{p}, {template.description}," if p == described else p for p in people]
    elif mode == "parenthetical":
        names = [f"{p} ({template.description})" if p == described else p for p in people]
    elif mode == "sentence":
        lead = _sentence(described, template.description) + " "
    listed = _listed(names)
    if template.kind == "ranking":
        phrase = rng.choice(RANKING_PHRASES)
        words = _rank_words(template.rank, len(people))
        question = phrase.format(people=listed, **words)
    else:
        phrase = rng.choice(COMPARISON_PHRASES[template.compare])
        question = phrase.format(people=listed)
    question = re.sub(r",\s*([?:,])", r"\1", lead + question)  # "A, who ...,?" -> "A, who ...?"
    meta = {
        **dict(example.meta),
        "original_question": example.question,
        "rewording": {"phrase": phrase, "description": mode, "order": people},
    }
    return dataclasses.replace(example, id=f"{example.id}-reworded", question=question, meta=meta)


def reworded_examples(
    dataset: str,
    split: Literal["train", "eval"] = "train",
    limit: int | None = None,
    seed: int = 13,
) -> tuple[list[QAExample], list[QAExample]]:
    """The first ``limit`` templated rows of ``dataset``/``split`` that parse, and their
    rewordings (same order). ``split="eval"`` is for the final measurement only."""
    originals, reworded = [], []
    for example in load_examples(dataset, split):
        if limit is not None and len(originals) >= limit:
            break
        try:
            reworded.append(reword(example, seed))
        except ValueError:
            continue  # a row whose question does not name its people as written
        originals.append(example)
    return originals, reworded


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", default="dsrag-ranking")
    parser.add_argument("--split", choices=("train", "eval"), default="train")
    parser.add_argument("--limit", type=int, default=5)
    parser.add_argument("--seed", type=int, default=13)
    args = parser.parse_args(argv)
    if args.split == "eval":
        print("EVAL rows: for the final measurement only", file=sys.stderr)
    originals, reworded = reworded_examples(args.dataset, args.split, args.limit, args.seed)
    for original, new in zip(originals, reworded, strict=True):
        print(f"{original.question}\n  -> {new.question}\n  answer: {new.answers[0]}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""The demo world's questions, from templates whose support documents are in hop order:

* ``hq`` (2 hops): employee -> company -> headquarters city.
* ``maker`` (2 hops): product -> company -> founder.
* ``country`` (3 hops): company -> founder -> birth city -> country.
* ``river`` (4 hops): employee -> company -> founder -> birth city -> river.
* ``compare`` (2 docs): which of two people was born earlier.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from dynakrag.data.demo_world import DemoWorld

DEMO_QUESTION_ID = "q-hq-00"
"""Id of the default demo question: the first 2-hop "headquarters of the employer" question."""


@dataclass(frozen=True)
class DemoQuestion:
    """One question with its answer and gold support documents (in hop order)."""

    id: str
    question: str
    answer: str
    support: tuple[str, ...]
    hops: int
    kind: str


def world_questions(world: DemoWorld, rng: random.Random) -> list[DemoQuestion]:
    """All questions of the world (pairs to compare drawn from ``rng``), grouped by template,
    ids ``q-<template>-<NN>``."""
    companies, founders, employees = world.companies, world.founders, world.employees
    products, cities = world.products, world.cities
    city_by_name = {c.name: c for c in cities}
    out: list[DemoQuestion] = []
    for i, (comp, emp) in enumerate(zip(companies, employees, strict=True)):
        out.append(
            DemoQuestion(
                id=f"q-hq-{i:02d}",
                question=(
                    f"In which city is the headquarters of the company where {emp.name} works?"
                ),
                answer=comp.hq,
                support=(emp.doc_id, comp.doc_id),
                hops=2,
                kind="bridge",
            )
        )
    for i, (comp, founder, prod) in enumerate(zip(companies, founders, products, strict=True)):
        out.append(
            DemoQuestion(
                id=f"q-maker-{i:02d}",
                question=f"Who founded the company that makes the {prod.name}?",
                answer=founder.name,
                support=(prod.doc_id, comp.doc_id),
                hops=2,
                kind="bridge",
            )
        )
    for i, (comp, founder) in enumerate(zip(companies, founders, strict=True)):
        city = city_by_name[founder.city]
        out.append(
            DemoQuestion(
                id=f"q-country-{i:02d}",
                question=f"In which country was the founder of {comp.name} born?",
                answer=city.country,
                support=(comp.doc_id, founder.doc_id, city.doc_id),
                hops=3,
                kind="bridge",
            )
        )
    for i, (comp, founder, emp) in enumerate(zip(companies, founders, employees, strict=True)):
        city = city_by_name[founder.city]
        out.append(
            DemoQuestion(
                id=f"q-river-{i:02d}",
                question=(
                    "Which river flows through the birth city of the founder of the company "
                    f"where {emp.name} works?"
                ),
                answer=city.river,
                support=(emp.doc_id, comp.doc_id, founder.doc_id, city.doc_id),
                hops=4,
                kind="bridge",
            )
        )
    people = founders + employees
    pairs: set[frozenset[str]] = set()
    n_compare = max(1, len(companies) // 2)
    for _ in range(100 * n_compare):
        if len(pairs) == n_compare:
            break
        a, b = rng.sample(people, 2)
        key = frozenset((a.name, b.name))
        if a.year == b.year or key in pairs:
            continue
        pairs.add(key)
        older, younger = (a, b) if a.year < b.year else (b, a)
        out.append(
            DemoQuestion(
                id=f"q-compare-{len(pairs) - 1:02d}",
                question=f"Who was born earlier, {a.name} or {b.name}?",
                answer=older.name,
                support=(younger.doc_id, older.doc_id),
                hops=2,
                kind="comparison",
            )
        )
    return out

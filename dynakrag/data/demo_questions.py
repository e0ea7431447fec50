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
        question = f"In which city is the headquarters of the company where {emp.name} works?"
        out.append(_bridge(f"q-hq-{i:02d}", question, comp.hq, emp.doc_id, comp.doc_id))
    for i, (comp, founder, prod) in enumerate(zip(companies, founders, products, strict=True)):
        question = f"Who founded the company that makes the {prod.name}?"
        out.append(_bridge(f"q-maker-{i:02d}", question, founder.name, prod.doc_id, comp.doc_id))
    for i, (comp, founder) in enumerate(zip(companies, founders, strict=True)):
        city = city_by_name[founder.city]
        question = f"In which country was the founder of {comp.name} born?"
        support = (comp.doc_id, founder.doc_id, city.doc_id)
        out.append(_bridge(f"q-country-{i:02d}", question, city.country, *support))
    for i, (comp, founder, emp) in enumerate(zip(companies, founders, employees, strict=True)):
        city = city_by_name[founder.city]
        question = (
            "Which river flows through the birth city of the founder of the company "
            f"where {emp.name} works?"
        )
        support = (emp.doc_id, comp.doc_id, founder.doc_id, city.doc_id)
        out.append(_bridge(f"q-river-{i:02d}", question, city.river, *support))
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


def _bridge(question_id: str, question: str, answer: str, *support: str) -> DemoQuestion:
    """A bridge question: one hop per support document, in hop order."""
    return DemoQuestion(
        id=question_id,
        question=question,
        answer=answer,
        support=support,
        hops=len(support),
        kind="bridge",
    )

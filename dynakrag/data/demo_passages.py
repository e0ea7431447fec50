"""The demo world's passages: one short text per entity, stating its attributes in plain
sentences and naming the related entities a bridge hop follows."""

from __future__ import annotations

import random

from dynakrag.data.demo_world import (
    INDUSTRIES,
    City,
    Company,
    DemoWorld,
    Person,
    Product,
    University,
)

_COMPANY_TRAITS = (
    "reliable products", "friendly customer service", "low prices", "careful engineering",
    "bold designs", "long product warranties",
)  # fmt: skip
_COMPANY_EXTRAS = (
    "The company sells its products in many countries.",
    "The company opened a second factory a few years after it was founded.",
    "The company gives every worker a free lunch on Fridays.",
    "The company publishes a short report about its work every year.",
    "The company has won several awards for good design.",
)
_CITY_FEATURES = (
    "its old stone bridges", "its busy fish market", "its tall clock tower",
    "its spring flower festival", "its large public library", "its green parks",
    "its narrow painted houses", "its summer music festival",
)  # fmt: skip
_CITY_JOBS = (
    "farming", "fishing", "shipping", "tourism", "textile mills", "trade", "banking", "schools",
)  # fmt: skip
_CITY_WEATHER = (
    "Winters in {city} are cold and snowy.",
    "Summers in {city} are warm and dry.",
    "It rains often in {city}, especially in autumn.",
    "The weather in {city} is mild for most of the year.",
)
_PRODUCT_EXTRAS = (
    "Many customers like it because it is easy to use.",
    "It comes in three colors: black, white and blue.",
    "It is sold with a two-year warranty.",
    "It is sold in shops and online.",
    "Reviewers praised its simple design.",
    "It is known for being quiet and sturdy.",
)
_UNIVERSITY_SUBJECTS = (
    "medicine", "history", "engineering", "mathematics", "music", "chemistry", "economics",
)  # fmt: skip
_UNIVERSITY_EXTRAS = (
    "The main campus has a large garden and an old library.",
    "Many students live in small houses near the campus.",
    "The university has a famous rowing club.",
    "Its students publish a weekly newspaper.",
)


def _person_text(p: Person, rng: random.Random) -> str:
    """Passage describing a person (employee or founder)."""
    if p.role is None:
        subject = rng.choice(("business", "economics", "engineering", "law", "history"))
        lines = [
            f"{p.name} is an entrepreneur and investor.",
            f"{p.name} was born in {p.year} in the city of {p.city}.",
            f"{p.name} studied {subject} at {p.university}.",
            f"{p.name} is known for {p.trait}.",
            f"Outside of work, {p.name} enjoys {p.hobby}.",
        ]
    else:
        role, duty, subject = p.role
        article = "an" if role[0] in "aeiou" else "a"
        lines = [
            f"{p.name} is {article} {role} who works at {p.company}.",
            f"{p.name} was born in {p.year} in the city of {p.city}.",
            f"{p.name} studied {subject} at {p.university}.",
            f"At {p.company}, {p.name} {duty}.",
            f"Outside of work, {p.name} enjoys {p.hobby}.",
        ]
    return " ".join(lines)


def _company_text(c: Company, rng: random.Random) -> str:
    """Passage describing a company: founder, founding year, headquarters."""
    industry_words = INDUSTRIES[c.industry][0]
    article = "an" if industry_words[0] in "aeiou" else "a"
    return " ".join(
        [
            f"{c.name} is {article} {industry_words} company.",
            f"{c.name} was founded in {c.year} by {c.founder}.",
            f"The headquarters of {c.name} is in the city of {c.hq}.",
            f"{c.name} has about {c.size:,} employees.",
            f"The company is known for {rng.choice(_COMPANY_TRAITS)}.",
            rng.choice(_COMPANY_EXTRAS),
        ]
    )


def _product_text(p: Product, rng: random.Random) -> str:
    """Passage describing a product and its maker."""
    extras = rng.sample(_PRODUCT_EXTRAS, 2)
    return " ".join(
        [
            f"The {p.name} is a {p.description}.",
            f"The {p.name} is made by the company {p.company}.",
            f"The {p.name} was first sold in {p.year}.",
            f"In shops, the {p.name} costs about {rng.randrange(3, 60) * 10} dollars.",
            *extras,
        ]
    )


def _city_text(c: City, rng: random.Random) -> str:
    """Passage describing a city: country, river, population."""
    return " ".join(
        [
            f"{c.name} is a city in the country of {c.country}.",
            f"The {c.river} flows through {c.name}.",
            f"About {c.population:,} people live in {c.name}.",
            f"{c.name} is known for {rng.choice(_CITY_FEATURES)}.",
            f"Many people in {c.name} work in {rng.choice(_CITY_JOBS)}.",
            rng.choice(_CITY_WEATHER).format(city=c.name),
        ]
    )


def _university_text(u: University, rng: random.Random) -> str:
    """Passage describing a university."""
    s1, s2 = rng.sample(_UNIVERSITY_SUBJECTS, 2)
    return " ".join(
        [
            f"{u.name} is a university in the city of {u.city}.",
            f"{u.name} was founded in {u.year}.",
            f"About {u.students:,} students study at {u.name}.",
            f"{u.name} is known for its programs in {s1} and {s2}.",
            rng.choice(_UNIVERSITY_EXTRAS),
        ]
    )


def _passage(doc_id: str, title: str, text: str) -> dict[str, str]:
    """A passage record."""
    return {"id": doc_id, "title": title, "text": text}


def world_passages(world: DemoWorld, rng: random.Random) -> list[dict[str, str]]:
    """One passage record per entity, texts drawn from ``rng``, sorted by id so distractors are
    interleaved with the rest."""
    passages: list[dict[str, str]] = []
    for person in world.founders + world.employees + world.distractor_people:
        passages.append(_passage(person.doc_id, person.name, _person_text(person, rng)))
    for company in world.companies + world.distractor_companies:
        passages.append(_passage(company.doc_id, company.name, _company_text(company, rng)))
    for product in world.products + world.distractor_products:
        passages.append(_passage(product.doc_id, product.name, _product_text(product, rng)))
    for city in world.cities + world.distractor_cities:
        passages.append(_passage(city.doc_id, city.name, _city_text(city, rng)))
    for uni in world.universities:
        passages.append(_passage(uni.doc_id, uni.name, _university_text(uni, rng)))
    passages.sort(key=lambda p: p["id"])
    return passages

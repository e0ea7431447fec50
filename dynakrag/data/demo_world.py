"""The demo world's entities: fictional people, companies, products, cities and universities,
drawn from a seeded random generator.

Names come from pools of invented syllables, each entity type with its own, and a registry keeps
every name unique and no name inside another. Distractors get names similar to real ones.
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable
from dataclasses import dataclass

from dynakrag.errors import CorpusError

# --------------------------------------------------------------------------------------------
# Name material. Pools of different entity types use disjoint syllables so that names of one
# type never look like names of another.

_FIRST_ONSETS = (
    "Tal", "Mir", "Ysol", "Bren", "Cor", "Dav", "Fen", "Gal", "Hes", "Iv", "Jor", "Kal",
    "Lor", "Nes", "Orl", "Pel", "Ros", "Sev", "Thal", "Ul", "Var", "Wyn", "Zel", "Ead",
)  # fmt: skip
_FIRST_ENDS = (
    "vor", "ela", "ric", "wen", "ian", "dra", "mund", "ith", "oran", "essa", "ard", "yne",
)  # fmt: skip
_SURNAME_ROOTS = (
    "Quen", "Dov", "Hask", "Marl", "Tesk", "Wend", "Brom", "Cald", "Gorm", "Grav", "Lind",
    "Pask", "Rud", "Sall", "Trev", "Vask", "Yarr", "Nolk",
)  # fmt: skip
_SURNAME_ENDS = ("by", "in", "ley", "ow", "ett", "ard", "isk", "ane", "ock", "ith", "er", "ton")

_COMPANY_ROOTS = (
    "Brell", "Quor", "Zand", "Vess", "Olmen", "Kyr", "Mavel", "Selk", "Drox", "Halv", "Ixen",
    "Lum", "Nort", "Pryn", "Ustra", "Cadra",
)  # fmt: skip
_COMPANY_ENDS = ("moor", "wick", "dane", "thorn", "vale", "crest", "holt", "mere")

_PRODUCT_ROOTS = (
    "Zen", "Pex", "Vorn", "Quel", "Astr", "Nimb", "Kav", "Tiss", "Yum", "Grob", "Fizz", "Wex",
)  # fmt: skip
_PRODUCT_ENDS = ("trix", "ora", "ika", "nik", "ola", "rel", "bra", "ito")

_CITY_ROOTS = (
    "Vel", "Quar", "Tiv", "Ormel", "Zeb", "Kest", "Pell", "Ryn", "Mord", "Sav", "Ithar", "Ambel",
)  # fmt: skip
_CITY_ENDS = ("haven", "ford", "mouth", "stead", "bury", "port", "wyn", "gard")

_RIVER_ROOTS = (
    "Orv", "Til", "Sab", "Wem", "Ald", "Mur", "Kelb", "Ess", "Pim", "Dun", "Arl", "Sim",
)  # fmt: skip
_RIVER_ENDS = ("ane", "sey", "rin", "ella", "ow", "ith", "ent", "ara")

_UNIVERSITY_ROOTS = ("Wren", "Crane", "Lark", "Heron", "Finch", "Plover")
_UNIVERSITY_ENDS = ("hollow", "wood", "field", "leigh", "combe")

_COUNTRIES = (
    "Norvalia", "Estrund", "Calvoria", "Drumena", "Tessarin", "Vardonia", "Sylmark", "Ombrelle",
)  # fmt: skip

# Company name suffix -> (industry words used in text, ((product noun, product description), ...))
INDUSTRIES: dict[str, tuple[str, tuple[tuple[str, str], ...]]] = {
    "Robotics": (
        "robotics",
        (("Drone", "small flying drone with a camera"), ("Mower", "robot lawn mower")),
    ),
    "Electronics": (
        "consumer electronics",
        (("Tablet", "thin tablet computer"), ("Headset", "wireless headset for music")),
    ),
    "Appliances": (
        "home appliance",
        (("Kettle", "electric kettle for the kitchen"), ("Blender", "kitchen blender")),
    ),
    "Mobility": (
        "transport",
        (("Scooter", "electric scooter for city streets"), ("Bicycle", "folding bicycle")),
    ),
    "Lighting": (
        "lighting",
        (("Lamp", "desk lamp with adjustable brightness"), ("Lantern", "camping lantern")),
    ),
    "Networks": (
        "networking",
        (("Router", "home internet router"), ("Modem", "cable modem for homes")),
    ),
    "Optics": (
        "optics",
        (("Camera", "compact digital camera"), ("Telescope", "telescope for hobby astronomers")),
    ),
    "Wearables": (
        "wearable technology",
        (("Watch", "fitness watch"), ("Ring", "smart ring that tracks sleep")),
    ),
}

# (role, what the role does at the company, field of study)
_ROLES = (
    ("software engineer", "writes software for new products", "computer science"),
    ("product designer", "designs the look of new products", "industrial design"),
    ("accountant", "keeps track of the company's money", "economics"),
    ("sales manager", "leads a team of sales people", "business"),
    ("research scientist", "runs experiments in the laboratory", "physics"),
    ("marketing director", "plans the advertising campaigns", "communications"),
    ("quality inspector", "tests products before they are shipped", "mechanical engineering"),
    ("lawyer", "reviews the company's contracts", "law"),
)
_HOBBIES = (
    "hiking in the hills", "playing the violin", "growing tomatoes", "painting landscapes",
    "playing chess", "baking bread", "swimming in lakes", "reading old maps", "watching birds",
    "riding a bicycle", "writing short poems", "fishing on quiet mornings",
)  # fmt: skip
_FOUNDER_TRAITS = (
    "careful planning", "bold decisions", "quiet leadership", "long working days",
    "generous gifts to local schools", "a love of detailed reports",
)  # fmt: skip


def _slug(name: str) -> str:
    """Lower-case, dash-separated form of a name, for document ids."""
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")


class _Names:
    """Registry of used names: every name is unique and no name is a substring of another."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.used: list[str] = []

    def ok(self, name: str) -> bool:
        """Whether ``name`` neither contains nor is contained in a used name."""
        low = name.lower()
        return all(low not in u.lower() and u.lower() not in low for u in self.used)

    def take(
        self, kind: str, preferred: list[str], fallback: Callable[[], list[str]] | None = None
    ) -> str:
        """Register and return a random acceptable name, from ``preferred`` if any is left."""
        for make in (lambda: list(preferred), fallback or list):
            pool = make()
            self.rng.shuffle(pool)
            for name in pool:
                if self.ok(name):
                    self.used.append(name)
                    return name
        raise CorpusError(f"ran out of unique {kind} names; ask for a smaller corpus")


def _combos(roots: tuple[str, ...], ends: tuple[str, ...], suffix: str = "") -> list[str]:
    """All ``root + end + suffix`` names."""
    return [f"{r}{e}{suffix}" for r in roots for e in ends]


@dataclass
class Person:
    name: str
    year: int
    city: str
    university: str
    role: tuple[str, str, str] | None  # None for founders
    company: str | None
    trait: str
    hobby: str

    @property
    def doc_id(self) -> str:
        return f"person-{_slug(self.name)}"


@dataclass
class Company:
    name: str
    industry: str
    founder: str
    year: int
    hq: str
    size: int

    @property
    def doc_id(self) -> str:
        return f"company-{_slug(self.name)}"


@dataclass
class Product:
    name: str
    description: str
    company: str
    year: int

    @property
    def doc_id(self) -> str:
        return f"product-{_slug(self.name)}"


@dataclass
class City:
    name: str
    country: str
    river: str
    population: int

    @property
    def doc_id(self) -> str:
        return f"city-{_slug(self.name)}"


@dataclass
class University:
    name: str
    city: str
    year: int
    students: int

    @property
    def doc_id(self) -> str:
        return f"university-{_slug(self.name)}"


@dataclass
class DemoWorld:
    """Every entity of one generated world; the distractors are never an answer."""

    cities: list[City]
    universities: list[University]
    companies: list[Company]
    founders: list[Person]
    """``founders[i]`` founded ``companies[i]``."""
    employees: list[Person]
    """``employees[i]`` works at ``companies[i]``."""
    products: list[Product]
    """``products[i]`` is made by ``companies[i]``."""
    distractor_people: list[Person]
    distractor_companies: list[Company]
    distractor_cities: list[City]
    distractor_products: list[Product]


def build_demo_world(rng: random.Random, n_companies: int, n_distractors: int) -> DemoWorld:
    """The entities of a world with ``n_companies`` companies and ``n_distractors``
    distractors, drawn from ``rng``."""
    names = _Names(rng)

    # Countries, cities (one unique river each), universities.
    n_cities = max(5, (n_companies + 1) // 2 + 3)
    countries = rng.sample(_COUNTRIES, max(2, min(len(_COUNTRIES), n_cities // 3)))
    names.used.extend(countries)
    cities: list[City] = []
    for i in range(n_cities):
        city = names.take("city", _combos(_CITY_ROOTS, _CITY_ENDS))
        river = names.take("river", _combos(_RIVER_ROOTS, _RIVER_ENDS, " River"))
        pop = rng.randrange(40, 900) * 1000
        cities.append(City(city, countries[i % len(countries)], river, pop))
    universities = [
        University(
            names.take("university", _combos(_UNIVERSITY_ROOTS, _UNIVERSITY_ENDS, " University")),
            rng.choice(cities).name,
            rng.randrange(1820, 1960),
            rng.randrange(8, 40) * 1000,
        )
        for _ in range(max(2, n_companies // 4))
    ]

    # Real people have unique first names and unique surnames.
    used_first: set[str] = set()
    used_last: set[str] = set()

    def new_person_name() -> str:
        firsts = [f for f in _combos(_FIRST_ONSETS, _FIRST_ENDS) if f not in used_first]
        lasts = [s for s in _combos(_SURNAME_ROOTS, _SURNAME_ENDS) if s not in used_last]
        rng.shuffle(firsts)
        rng.shuffle(lasts)
        cands = [f"{f} {s}" for f, s in zip(firsts, lasts, strict=False)]
        name = names.take("person", cands)
        first, last = name.split(" ")
        used_first.add(first)
        used_last.add(last)
        return name

    city_names = [c.name for c in cities]
    industries = list(INDUSTRIES)
    companies: list[Company] = []
    founders: list[Person] = []
    employees: list[Person] = []
    products: list[Product] = []
    company_cands = [f"{r}{e}" for r in _COMPANY_ROOTS for e in _COMPANY_ENDS]
    product_roots = _combos(_PRODUCT_ROOTS, _PRODUCT_ENDS)
    used_company_roots: set[str] = set()
    used_product_roots: set[str] = set()
    for i in range(n_companies):
        industry = (
            industries[i % len(industries)] if i < len(industries) else rng.choice(industries)
        )
        root = names.take(
            "company",
            [f"{r} {industry}" for r in company_cands if r not in used_company_roots],
        ).split(" ")[0]
        used_company_roots.add(root)
        cname = f"{root} {industry}"
        # Headquarters, founder's birth city and employee's birth city are pairwise different,
        # so no passage short-cuts a hop.
        hq, founder_city, employee_city = rng.sample(city_names, 3)
        founder_year = rng.randrange(1935, 1972)
        founder = Person(
            new_person_name(),
            founder_year,
            founder_city,
            rng.choice(universities).name,
            None,
            None,
            rng.choice(_FOUNDER_TRAITS),
            rng.choice(_HOBBIES),
        )
        founded = rng.randrange(founder_year + 24, min(founder_year + 50, 2012))
        companies.append(
            Company(cname, industry, founder.name, founded, hq, rng.randrange(2, 90) * 50)
        )
        founders.append(founder)
        employees.append(
            Person(
                new_person_name(),
                rng.randrange(1960, 2000),
                employee_city,
                rng.choice(universities).name,
                rng.choice(_ROLES),
                cname,
                "",
                rng.choice(_HOBBIES),
            )
        )
        noun, description = rng.choice(INDUSTRIES[industry][1])
        pname = names.take(
            "product",
            [f"{r} {noun}" for r in product_roots if r not in used_product_roots],
        )
        used_product_roots.add(pname.split(" ")[0])
        products.append(Product(pname, description, cname, rng.randrange(founded + 1, 2024)))

    # Distractors: similar names (a shared word or root), plausible attributes, never an answer.
    d_people: list[Person] = []
    d_companies: list[Company] = []
    d_cities: list[City] = []
    d_products: list[Product] = []
    real_people = founders + employees
    all_firsts = _combos(_FIRST_ONSETS, _FIRST_ENDS)
    all_lasts = _combos(_SURNAME_ROOTS, _SURNAME_ENDS)
    for i in range(n_distractors):
        kind = ("person", "company", "city", "product")[i % 4]
        if kind == "person":
            first, last = rng.choice(real_people).name.split(" ")
            if rng.random() < 0.5:
                similar = [f"{first} {s}" for s in all_lasts]
            else:
                similar = [f"{f} {last}" for f in all_firsts]

            def anyone() -> list[str]:
                return [f"{f} {s}" for f in all_firsts for s in all_lasts]

            d_people.append(
                Person(
                    names.take("person", similar, anyone),
                    rng.randrange(1940, 2000),
                    rng.choice(city_names),
                    rng.choice(universities).name,
                    rng.choice(_ROLES),
                    rng.choice([c.name for c in companies + d_companies]),
                    "",
                    rng.choice(_HOBBIES),
                )
            )
        elif kind == "company":
            base_company = rng.choice(companies)
            root = base_company.name.split(" ")[0]
            similar = [f"{root} {ind}" for ind in industries if ind != base_company.industry]

            def anyone() -> list[str]:
                return [f"{r} {ind}" for r in company_cands for ind in industries]

            cname = names.take("company", similar, anyone)
            d_companies.append(
                Company(
                    cname,
                    cname.split(" ")[1],
                    rng.choice(d_people).name,
                    rng.randrange(1970, 2015),
                    rng.choice(city_names),
                    rng.randrange(2, 90) * 50,
                )
            )
        elif kind == "city":
            base_city = rng.choice(cities)
            root = next(r for r in _CITY_ROOTS if base_city.name.startswith(r))
            cname = names.take(
                "city", [f"{root}{e}" for e in _CITY_ENDS], lambda: _combos(_CITY_ROOTS, _CITY_ENDS)
            )
            river = names.take("river", _combos(_RIVER_ROOTS, _RIVER_ENDS, " River"))
            d_cities.append(City(cname, base_city.country, river, rng.randrange(40, 900) * 1000))
        else:
            maker = rng.choice(d_companies)
            noun, description = rng.choice(INDUSTRIES[maker.industry][1])
            brand = rng.choice(products).name.split(" ")[0]
            pname = names.take(
                "product",
                [f"{brand} {noun}"],
                lambda noun=noun: [f"{r} {noun}" for r in product_roots],
            )
            d_products.append(
                Product(pname, description, maker.name, rng.randrange(maker.year + 1, 2025))
            )

    return DemoWorld(
        cities=cities,
        universities=universities,
        companies=companies,
        founders=founders,
        employees=employees,
        products=products,
        distractor_people=d_people,
        distractor_companies=d_companies,
        distractor_cities=d_cities,
        distractor_products=d_products,
    )

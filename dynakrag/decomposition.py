"""Question decomposition: cutting a question into the parts or sub-questions it asks.

Three decompositions share this module:

:func:`split_query`
    Cheap rule-based split for retrieval: commas, semicolons and ``and``/``or``/``but`` outside
    quotes (single or double). Used by the ``hybrid+decompose`` retriever tier.
:func:`segment_question`
    EPQD's segmentation (DS-RAG, Section 2.2.2): commas and :data:`CONJUNCTIONS` outside
    double quotes. :mod:`dynakrag.dsrag.epqd` turns each part into a sub-question.
:func:`decompose`
    The LLM's numbered sub-questions (``#k`` refers to the answer of sub-question k, see
    :func:`resolve_references`), used by the ``sufficiency_check`` action and the
    ``decompose`` method.

Both rule-based splitters are :func:`split_outside_quotes` with their own separators and
quotation marks; they differ only in how they clean the pieces.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from dynakrag import prompts
from dynakrag.choices import (
    NAME,
    compared_dates,
    compared_quantities,
    offered_options,
    options_apart,
    predicate_choice,
)
from dynakrag.entity_classes import CLASS_HEADS, PERSON_NOUNS, RELATION_NOUNS
from dynakrag.errors import UserInputError
from dynakrag.llm.client import LLMClient, Usage
from dynakrag.values import Ordering, comparison_asked

__all__ = [
    "CONJUNCTIONS",
    "DOUBLE_QUOTES",
    "MAX_SUB_QUESTIONS",
    "PART_EDGES",
    "QUOTES",
    "REFERENCE",
    "decompose",
    "joins_facts",
    "quoted_mask",
    "refers_ahead",
    "resolve_references",
    "segment_question",
    "separator_pattern",
    "split_facts",
    "split_outside_quotes",
    "split_query",
]

# ------------------------------------------------------------------------------ quotation

QUOTES: Mapping[str, str] = {'"': '"', "“": "”", "'": "'", "‘": "’"}
"""Opening quotation mark -> its closing mark (double and single quotes)."""
DOUBLE_QUOTES: Mapping[str, str] = {'"': '"', "“": "”"}
"""Double quotes only: EPQD leaves single quotes alone (``'`` is mostly an apostrophe)."""


def _closes(text: str, j: int, closer: str) -> bool:
    """Whether ``text[j]`` closes a quotation opened with ``closer``'s opener."""
    if text[j] != closer:
        return False
    # A closing single quote followed by a letter is an apostrophe (``'rock'n'roll``).
    return not (closer in "'’" and j + 1 < len(text) and text[j + 1].isalnum())


def quoted_mask(text: str, quotes: Mapping[str, str] = QUOTES) -> list[bool]:
    """For each character, whether it lies inside a quotation (linear time).

    ``quotes`` maps opening to closing marks. Double quotes always open/close. A single quote
    (``'`` or ``‘``) opens only when not preceded by a letter or digit and closes only when not
    followed by one, so apostrophes (``Curie's``, ``don't``) never open a quotation. An
    unclosed quotation is not a quotation.
    """
    mask = [False] * len(text)
    if not any(char in quotes for char in text):
        return mask
    # next_close[c][i]: the first position >= i closing a quotation of closer c, or -1.
    next_close: dict[str, list[int]] = {}
    for closer in set(quotes.values()):
        positions = [-1] * (len(text) + 1)
        for j in range(len(text) - 1, -1, -1):
            positions[j] = j if _closes(text, j, closer) else positions[j + 1]
        next_close[closer] = positions
    i = 0
    while i < len(text):
        closer = quotes.get(text[i])
        apostrophe = text[i] in "'‘" and i > 0 and text[i - 1].isalnum()
        if closer is not None and not apostrophe:
            end = next_close[closer][i + 1]
            if end != -1:
                for j in range(i, end + 1):
                    mask[j] = True
                i = end + 1
                continue
        i += 1
    return mask


# ------------------------------------------------------------------------------ splitting


def separator_pattern(punctuation: str, words: Sequence[str]) -> re.Pattern[str]:
    """A case-insensitive pattern matching one of ``punctuation``'s characters or one of
    ``words`` as whole words (a space in a word matches any run of whitespace)."""
    alternatives = "|".join(re.escape(word).replace(r"\ ", r"\s+") for word in words)
    return re.compile(f"[{re.escape(punctuation)}]|\\b(?:{alternatives})\\b", re.IGNORECASE)


def split_outside_quotes(
    text: str, separators: re.Pattern[str], quotes: Mapping[str, str] = QUOTES
) -> list[str]:
    """``text`` cut at every match of ``separators`` that does not start inside a quotation;
    the pieces are returned raw (not stripped, empty ones kept)."""
    mask = quoted_mask(text, quotes)
    pieces: list[str] = []
    start = 0
    for match in separators.finditer(text):
        if mask[match.start()]:
            continue  # a comma or "and" inside a quotation belongs to the quoted title
        pieces.append(text[start : match.start()])
        start = match.end()
    pieces.append(text[start:])
    return pieces


_QUERY_SEPARATORS = separator_pattern(",;", ("and", "or", "but"))
_QUERY_EDGES = " \t\n\r?!.:"


def split_query(query: str, *, max_parts: int = 4) -> list[str]:
    """Cheap rule-based decomposition: ``query`` cut at commas, semicolons and the words
    ``and``/``or``/``but`` that lie outside quotes.

    Parts are stripped of spaces and ``?!.:``; parts without a letter or digit and repeats
    are dropped; at most ``max_parts`` are kept. ``"A and B, 'C and D'"`` gives
    ``["A", "B", "'C and D'"]``. A query with nothing to cut gives itself, stripped.
    """
    if max_parts < 1:
        raise UserInputError(f"max_parts must be >= 1, got {max_parts!r}")
    kept: list[str] = []
    for part in split_outside_quotes(query, _QUERY_SEPARATORS, QUOTES):
        part = part.strip(_QUERY_EDGES)
        if any(char.isalnum() for char in part) and part not in kept:
            kept.append(part)
    if not kept:
        return [query.strip(_QUERY_EDGES)] if query.strip(_QUERY_EDGES) else []
    return kept[:max_parts]


CONJUNCTIONS: tuple[str, ...] = ("as well as", "whereas", "and", "or", "but", "nor")
"""The conjunctions EPQD splits at (besides commas). Words that are also prepositions or
adverbs ("for", "so", "yet") are left out: "the birth date for Taylor Swift" is one phrase."""

PART_EDGES = " \t\n,;:?!"
"""Characters stripped from the ends of an EPQD part (and of the sub-questions made from it)."""

_SEGMENT_SEPARATORS = separator_pattern(",", CONJUNCTIONS)


def segment_question(question: str) -> list[str]:
    """Split ``question`` at commas and :data:`CONJUNCTIONS`, never inside "..." or “...”.

    Parts are stripped of spaces and of ``,;:?!`` at their ends; empty ones are dropped. A
    question with at most one part comes back whole (question mark included); an empty
    question gives no part.
    """
    text = str(question or "").strip()
    if not text:
        return []
    pieces = split_outside_quotes(text, _SEGMENT_SEPARATORS, DOUBLE_QUOTES)
    cleaned = [part.strip(PART_EDGES) for part in pieces]
    cleaned = [part for part in cleaned if part]
    return cleaned if len(cleaned) > 1 else [text]


# ------------------------------------------------------------------------------ LLM path

MAX_SUB_QUESTIONS = 5
REFERENCE = re.compile(r"#(\d+)")
"""``#k`` in a sub-question stands for the answer of sub-question k (1-based)."""
"""A proper name: capitalised words, with the lower-case words titles keep inside them ("A
Treatise Concerning the Principles of Human Knowledge", "Gone With the Wind")."""


def decompose(
    question: str, llm: LLMClient, *, split_joined: bool = False
) -> tuple[list[str], Usage]:
    """Sub-questions of ``question``; falls back to the question itself on an unusable reply.

    With ``split_joined`` the plan is checked: a sub-question that joins two facts
    (:func:`joins_facts`) is cut in two (:func:`split_facts`), and a plan that lost words of
    the question (a relation the model merged away: "birth" of "the birth city of ...") or
    whose parts do not lead to its last one (:func:`leads_to_last`) is replaced by the rule
    split of the question itself, when that has several parts and the question sets nothing
    side by side. A plan whose parts refer to a part not before them (:func:`refers_ahead`)
    lost a hop: the rule split, or the question itself, replaces it.
    """
    reply, usage = llm.structured(
        prompts.decompose_messages(question),
        prompts.SubQuestionsReply,
        max_tokens=prompts.DECOMPOSE_MAX_TOKENS,
    )
    parts = reply.texts() if reply is not None else None
    if parts is None:
        return [question], usage
    if (
        split_joined
        and len(parts) < 2
        and (compared := compared_dates(question) or compared_quantities(question))
    ):
        return compared, usage  # the model kept "who is older, A or B?" as one question
    options = offered_options(question) if split_joined else None
    ordered = options is not None and isinstance(comparison_asked(question), Ordering)
    if options and ordered and not options_apart(parts, options):
        # An ordering of the options whose plan does not look each one up on its own ("Which
        # band has more members?", the options dropped) is not answered by one hop's
        # sentence: a date, a measure or a count of each ("formed first", "taller", "more
        # members") is compared, else each option's passage is looked up and the reader
        # orders them.
        compared = compared_dates(question) or compared_quantities(question)
        return compared or [f"What is {option}?" for option in options], usage
    if options and not ordered and not options_apart(parts, options):
        # A choice by what is said of one of them ("Which singer is American, A or B?") whose
        # plan does not ask it of each: a yes/no of each, the one said yes of answers.
        chosen_by = predicate_choice(question)
        if chosen_by is not None:
            return chosen_by, usage
    if split_joined:
        parts = split_facts(parts)
        by_rule = split_facts([question])
        if refers_ahead(parts):
            # "... during the administration of #1?" with no hop 1: the plan lost its start.
            return (by_rule if len(by_rule) > 1 else [question])[:MAX_SUB_QUESTIONS], usage
        if (
            len(by_rule) > 1
            and _one_chain(question)
            and (_lost_words(question, parts) or not leads_to_last(parts))
        ):
            parts = by_rule
    return (parts[:MAX_SUB_QUESTIONS] or [question]), usage


def refers_ahead(sub_questions: Sequence[str]) -> bool:
    """Whether a sub-question refers to the answer of one that is not before it (``#k`` with
    no k-th sub-question earlier): a plan that lost a hop."""
    return any(
        not 1 <= int(found) <= position
        for position, text in enumerate(sub_questions)
        for found in REFERENCE.findall(text)
    )


def leads_to_last(sub_questions: Sequence[str]) -> bool:
    """Whether every sub-question's answer is used on the way to the last one (through the
    ``#k`` of those after it): a chain, not parts answered side by side."""
    needed = {len(sub_questions) - 1}
    frontier = [len(sub_questions) - 1]
    while frontier:
        for found in REFERENCE.findall(sub_questions[frontier.pop()]):
            index = int(found) - 1
            if 0 <= index < len(sub_questions) and index not in needed:
                needed.add(index)
                frontier.append(index)
    return bool(sub_questions) and needed == set(range(len(sub_questions)))


_SIDE_BY_SIDE = re.compile(r"\b(?:or|both|same|between|than|whether|and)\b", re.IGNORECASE)


def _one_chain(question: str) -> bool:
    """Whether a question reads as one chain of facts, nothing set side by side ("A or B",
    "both", "the same", "than", "A and B"): a plan that lost a word of it or whose parts do
    not lead to its last one then lost a link, which the rule split of the question keeps
    (where things are set side by side, the rule split is no plan)."""
    return not _SIDE_BY_SIDE.search(question)


_WORD_PREFIX = 4


_PLAIN_WORD = re.compile(r"\b[a-z][a-z'’-]{3,}\b")
_COMMON_WORDS = frozenset(
    "what which where when whose whom does did have has had were been being that this these "
    "those there their them they with from into onto over under about after before some name "
    "tell give list find also both each either other same than then".split()
)


def _lost_words(question: str, parts: Sequence[str]) -> bool:
    """Whether a lower-case content word of ``question`` (four letters or more, not a common
    word) is in none of ``parts``; words are compared on their first four letters ("works"
    finds "work", "founder" finds "founded")."""
    have = {word[:_WORD_PREFIX] for word in _PLAIN_WORD.findall(" ".join(parts).lower())}
    return any(
        word[:_WORD_PREFIX] not in have
        for word in _PLAIN_WORD.findall(question)
        if word not in _COMMON_WORDS
    )


# Entity classes by the common nouns that name them: a hop asking for a noun of one class is
# not answered by an entity a sentence labels with a noun of another.

_DESCRIBED = re.compile(r"\b(?:the|a|an)\s+[a-z]+\s+(?:where|that|which|who|whom|whose)\s+\w")
_CHAINED_OF = re.compile(r"\b[Tt]he\s+(?:[a-z]+\s+){1,2}of\s+the\s+(?:[a-z]+\s+){1,2}of\s")
"""Two "the X of" chained, the second the object of the first ("the birth city of the founder
of ...")."""


_RELATIVE = re.compile(
    r"\b(?:the|a|an)\s+([a-z]+(?:\s+[a-z]+)?)\s+(where|that|which|who|whom)\s+([^,?;]+?)"
    r"\s*[?.!]*\s*$"
)
"""A thing described by a clause that ends the question (where a clause stops inside a
question, "... where Ada works born?", is not told by a rule)."""
_CONTACT = re.compile(
    r"\b(?:the|a|an)\s+([a-z]+(?:\s+[a-z]+)?)\s+()([A-Z][^,?;]*?\s(?:after|for|on|in|with|by|"
    r"at|from|to|about))\s*[?.!]*\s*$"
)
"""A thing described by a clause without its relative word, told by the name that opens the
clause and the preposition it leaves at the question's end ("the person Mach's principle was
named after", "the city Ada was born in"); groups as :data:`_RELATIVE`'s, the word empty."""
_DO_SUPPORT = re.compile(r"\b(?:did|does|do)\b", re.IGNORECASE)
_AUXILIARY_WORDS = "is|was|are|were|be|been|did|does|do|has|have|had"
_ENDS_WITH_AUXILIARY = re.compile(rf"\b(?:{_AUXILIARY_WORDS})\s*$", re.I)
_TITLE_WITH_AND = rf"{NAME}(?:\s+(?:and|&)\s+(?:the\s+|a\s+|an\s+)?{NAME})?"
"""A name that may hold "and" ("Pride and Prejudice", "Harry Potter and the Goblet of Fire"):
what follows "the X of"; :data:`~dynakrag.choices.NAME` itself stops at "and", where two
offered options meet."""
_LAST_OF = re.compile(rf"\bthe\s+([a-z]+(?:\s+[a-z]+)?)\s+of\s+(?:the\s+)?(#\d+|{_TITLE_WITH_AND})")
_ASKED_FIRST = re.compile(
    r"^\s*(?:(?:please\s+)?(?:name|give|list|identify|tell\s+me)|(?:what|which|who)\s+"
    r"(?:is|was|are|were))\s*$",
    re.IGNORECASE,
)
"""What may stand before the thing a question asks for ("Name the city where ...", "What is
the company that ..."): a clause describing that thing is the question, not a fact to cut."""


def _clause_to_cut(text: str) -> re.Match[str] | None:
    """The outermost thing described by a clause that is a fact of its own: not the thing the
    question asks for ("Name the city where ...", "What is the company that ...") and not a
    clause holding the asked part ("a company that has its office in what city")."""
    start = 0
    while (found := _RELATIVE.search(text, start)) is not None:
        if not (_WH_WORD.search(found.group(3)) or _ASKED_FIRST.match(text[: found.start()])):
            return found
        start = found.start() + 1
    return _contact_clause(text)


def _contact_clause(text: str) -> re.Match[str] | None:
    """A thing described by a clause without its relative word (:data:`_CONTACT`), unless it
    is the thing asked for or the subject of the question's own verb ("Which country is the
    film Titanic set in?": "the film Titanic" is named, and "set in" is the question's)."""
    found = _CONTACT.search(text)
    if found is None:
        return None
    before = text[: found.start()]
    if _ASKED_FIRST.match(before) or _ENDS_WITH_AUXILIARY.search(before):
        return None
    if _DO_SUPPORT.search(before) or _is_participle(found.group(1).split()[-1]):
        # "What did the singer ... in the movie B win a Tony for?": the question's own verb
        # comes after "did", inside what reads as the clause; "a character named B set in"
        # names B.
        return None
    return found


def split_facts(sub_questions: Sequence[str]) -> list[str]:
    """Sub-questions with each one that joins two facts (:func:`joins_facts`) cut in two,
    innermost fact first: a thing described by a clause becomes its own question ("Who founded
    the company where Ada works?" -> "What is the company where Ada works?", "Who founded #1?"),
    and so does the last of two chained "the X of Y" ("the birth city of the founder of #1" ->
    "What is the founder of #1?", "... the birth city of #2"). ``#k`` are renumbered."""
    out: list[str] = []
    final_of: dict[int, int] = {}  # old 1-based number -> new 1-based number

    def renumber(text: str) -> str:
        return REFERENCE.sub(lambda m: f"#{final_of.get(int(m.group(1)), int(m.group(1)))}", text)

    for number, part in enumerate(sub_questions, start=1):
        text = renumber(part)
        for _ in range(4):  # at most four cuts per sub-question
            if not joins_facts(text):
                break
            possessive = _POSSESSIVE_CHAIN.search(text) or _possessive_fact(text)
            if possessive is not None:  # "Ada's mother's spouse": the mother first
                owner, noun = possessive.group(1), possessive.group(2)
                start = possessive.start()
                if text[:start].endswith("the "):  # "the Liberal Party's leader": its "the"
                    owner, start = f"the {owner}", start - 4
                asks = "Who" if noun.split()[-1] in PERSON_NOUNS else "What"
                out.append(f"{asks} is {owner}'s {noun}?")
                text = f"{text[:start]}#{len(out)}{text[possessive.end(2) :]}"
                continue
            relative = _clause_to_cut(text)
            chained = [found for found in _LAST_OF.finditer(text) if _cuttable_of(text, found)]
            # Innermost first: a "the X of Y" inside the clause is cut before the clause.
            inner_of = bool(chained) and (
                relative is None or chained[-1].start() >= relative.start()
            )
            if inner_of:
                last = chained[-1]
                out.append(f"What is the {last.group(1)} of {last.group(2)}?")
                text = f"{text[: last.start()]}#{len(out)}{text[last.end() :]}"
            elif relative is not None:
                noun, word, clause = relative.groups()
                clause, tail = _clause_and_tail(text[: relative.start()], clause)
                if tail is None:
                    break  # where the clause ends is not told by a rule
                described = " ".join(part for part in (noun, word, clause.strip()) if part)
                out.append(f"What is the {described}?")
                text = f"{text[: relative.start()]}#{len(out)}{tail}?"
            else:
                break
            if not text.rstrip().endswith(("?", ".", "!")):
                text = f"{text.rstrip()}?"
        out.append(text)
        final_of[number] = len(out)
    return out


_WH_WORD = re.compile(r"\b(?:what|which|who|whom|whose|where|when|how)\b", re.IGNORECASE)
_AUXILIARY = re.compile(rf"\b(?:{_AUXILIARY_WORDS})\b")
_ASKS_ABOUT_SUBJECT = re.compile(
    r"\b(?:is|was|are|were|did|does|do|has|have|had)\s+(?:(?:the|a|an)\s|$)"
)
_NAMES_SOMETHING = re.compile(r"[A-Z0-9#]")
_ENDS_WITH_DO = re.compile(r"\b(?:did|does|do)\s*$", re.IGNORECASE)
_PARTICIPLES = frozenset("born built held made found set shot sold won run".split())


def _is_participle(word: str) -> bool:
    """Whether a lower-case word reads as a past participle ("born", "founded", "taken")."""
    return word.islower() and (
        word in _PARTICIPLES or (len(word) > 4 and word.endswith(("ed", "en")))
    )


def _clause_and_tail(before: str, clause: str) -> tuple[str, str | None]:
    """Where a relative clause that runs to the end of a question really ends: the clause and
    the words after it (None: not told by a rule).

    "In which country was the founder of the firm where Ada works born?": a question that put
    its auxiliary before the described thing ("was the founder ...") ends with its own verb,
    a participle the clause does not take ("works born"); "... where the museum is located"
    keeps its participle. After "did"/"does" the question's own verb follows the clause
    ("What did the man who wrote X use as ...?"), where no rule can tell the clause's end.
    """
    words = clause.split()
    if not _NAMES_SOMETHING.search(clause) or len(_AUXILIARY.findall(clause)) >= 2:
        # A clause naming nothing ("the directors that share the same nationality") is no
        # fact to look up; one with two verbs ("where X was born is located") holds the
        # question's own verb somewhere inside.
        return clause, None
    if (
        len(words) >= 3
        and _ASKS_ABOUT_SUBJECT.search(before)
        and _is_participle(words[-1].rstrip("?.!"))
        and not _AUXILIARY.fullmatch(words[-2])
    ):
        return " ".join(words[:-1]), f" {words[-1]}"
    if _ENDS_WITH_DO.search(before):
        return clause, None
    return clause, ""


_NAME_GOES_ON = re.compile(r"(?:\s+(?:and|&)\s+(?:the\s+|a\s+|an\s+)?|,\s+)[A-Z0-9]")
"""After a name (one holding "and" taken whole): "and" or a comma with more capitalised
words, a title that goes on ("Alexander and the Terrible, Horrible, No Good, Very Bad Day")
or names joined; no rule tells where it ends, so it is not cut there ("#1, Horrible, ...")."""
_ASKS_THE_OF = re.compile(r"^\s*(?:what|who|which)\s+(?:is|was|are|were)\s+the\s", re.IGNORECASE)


def _cuttable_of(text: str, phrase: re.Match[str]) -> bool:
    """Whether the "the X of Y" ``phrase`` is a fact of its own inside ``text``: one of two
    chained, or a person named by a relation ("the founder of") or a described place or thing
    ("the birth city of"; "the city of Paris" is Paris) inside another relation."""
    if phrase.group(2).endswith(("'s", "’s")) or text[phrase.end() :].startswith(("'s", "’s")):
        return False  # "the actor of Grace's boyfriend": the name goes on as a possessive
    if _NAME_GOES_ON.match(text, phrase.end()):
        return False  # "the author of Alexander and the Terrible, Horrible, ...": it goes on
    if text[: phrase.start()].endswith(("of ", "of the ")) or _CHAINED_OF.match(
        text, phrase.start()
    ):
        return True  # one of two chained
    if _ASKS_THE_OF.match(text) and phrase.start() == _ASKS_THE_OF.match(text).end() - 4:
        return False  # "Who is the founder of X?" asks that fact itself
    words = phrase.group(1).split()
    return words[-1] in RELATION_NOUNS or (len(words) == 2 and words[-1] in CLASS_HEADS)


_POSSESSIVE_CHAIN = re.compile(rf"(#\d+|\b{NAME})['’]s\s+([a-z]+(?:\s+[a-z]+)?)(?=['’]s\s)")
"""Two chained possessives ("Ada Voss's mother's spouse"): the first is a fact of its own."""


_ORDER_WORDS = "first|second|third|last|current|former|original|founding|late"
_POSSESSIVE_THING = re.compile(
    rf"(#\d+|\b{NAME})['’]s\s+((?:(?:[a-z]+-[a-z]+|[a-z]+est|{_ORDER_WORDS})\s+)?[a-z]+)\b(?!['’])"
)
"""A name's thing, the noun perhaps after one word that singles it out ("Ada's company",
"the Liberal Party's longest-serving leader", "Ada's eldest son", "Zeta's first president")."""
_ASKS_THE_POSSESSIVE = re.compile(r"^\s*(?:what|who|which)\s+(?:is|was|are|were)\s+$", re.I)


def _possessive_fact(text: str) -> re.Match[str] | None:
    """A thing named by its relation to a name inside another relation ("What products does
    Bordan Tkachuk's company provide?", "When was #1's wife born?"): a fact of its own. Not
    the thing the question asks for ("Who is Ada's father?"), and not one named beside it
    ("Ada's band Zeta")."""
    for found in _POSSESSIVE_THING.finditer(text):
        noun, after = found.group(2).split()[-1], text[found.end() :]
        if noun not in RELATION_NOUNS and noun not in CLASS_HEADS:
            continue
        if re.match(r"\s+[A-Z]", after):
            continue
        if _ASKS_THE_POSSESSIVE.match(text[: found.start()]) and not after.strip(" ?.!"):
            continue
        return found
    return None


def joins_facts(sub_question: str) -> bool:
    """Whether a sub-question asks two facts at once: it describes a thing by another fact
    instead of naming it ("Who founded the company where Ada works?"), or chains two "the X
    of" phrases ("the birth city of the founder of ..."), or names it by a possessive inside
    another relation ("What products does Ada's company make?")."""
    lowered = sub_question.lower()
    if _POSSESSIVE_CHAIN.search(sub_question) or _possessive_fact(sub_question):
        return True
    if _DESCRIBED.search(lowered) or _CHAINED_OF.search(sub_question):
        return True
    if _contact_clause(sub_question) is not None:
        return True
    return any(_cuttable_of(sub_question, phrase) for phrase in _LAST_OF.finditer(sub_question))


_CLAUSE_WORD = re.compile(r"\b(?:who|whom|whose|which|that|where|when|what|whether)\b", re.I)
_OPENS_WITH_WH = re.compile(
    r"^(?:(?:in|on|at|for|from|of|by|to|with|during|over|under)\s+)?"
    r"(?:what|which|who|whom|whose|where|when|how)\b",
    re.IGNORECASE,
)
_DESCRIPTION = re.compile(r"\b(?:the|a|an|its|their|his|her)\s+[a-z0-9]")
_COMPOSED_RELATION = re.compile(
    r"\b(?:grand\w*|great-\w+|step\w+|\w+-in-law|paternal|maternal|uncle|aunt|nephew|niece|"
    r"cousin)s?\b",
    re.IGNORECASE,
)
"""Kinship a family passage seldom states outright: a grandmother is a parent's mother."""
_ASKS_DESCRIBED = re.compile(
    r"^\s*(?:(?:what|who|which)\s+(?:is|was|are|were)|name|give|list)\s+(?:the|a|an)\s",
    re.IGNORECASE,
)
_POSSESSIVENAME = re.compile(r"\w['’]s\b|s['’](?=\s)")
_NAME_SPAN = re.compile(NAME)
_SENTENCE_END = re.compile(r"[.!?]\s+\S")


def one_fact(question: str) -> bool:
    """Whether ``question`` plainly asks one fact of at most one named thing, so its plan is
    itself without asking the model ("In which language is Faiss written?", "What is the
    capital of France?"). Conservative: it opens with its question word, and any sign of a
    second fact says no -- another clause word, a thing described rather than named ("the
    production company for X", "the 20th President") other than the one asked for, a
    possessive, a composed kinship ("grandmother", "father-in-law"), two names, two
    sentences, or things set side by side."""
    text = question.strip()
    if not _OPENS_WITH_WH.match(text) or _SENTENCE_END.search(text) or not _one_chain(text):
        return False
    if compared_dates(text) or _POSSESSIVENAME.search(text) or _COMPOSED_RELATION.search(text):
        return False
    if len(_CLAUSE_WORD.findall(text)) > 1:
        return False  # a clause word besides the question's own describes another thing
    described = list(_DESCRIPTION.finditer(text))
    asked = _ASKS_DESCRIBED.match(text)
    if len(described) > 1 or (described and not (asked and described[0].start() < asked.end())):
        return False
    if asked and _DESCRIBED.search(text.lower()):
        return False
    words = text.split()
    return len(_NAME_SPAN.findall(" ".join(words[1:]))) <= 1


def resolve_references(text: str, answers: list[str | None]) -> str:
    """Replace ``#k`` with the answer of sub-question k where it is known."""

    def substitute(match: re.Match[str]) -> str:
        index = int(match.group(1)) - 1
        if 0 <= index < len(answers) and answers[index]:
            return str(answers[index])
        return match.group(0)

    return REFERENCE.sub(substitute, text)

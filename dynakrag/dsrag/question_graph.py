"""DS-RAG question graph (paper, Section 2.3.1, Steps 1-3): entities, triples, one merged graph.

Step 1 identifies the entities of each sub-question; they become nodes numbered by their order
of appearance. Step 2 links them: the relation types are the words of the sub-question that are
not entities, entity pairs are found per relation type, every edge points from the entity
mentioned earlier to the one mentioned later, and an entity left unpaired is linked to the entity
just before it by a null edge (``relation=None``). Step 3 merges the sub-question graphs.

Two extractors do Steps 1-2 behind one :class:`Extractor` protocol:

* :class:`LLMGraphExtractor` asks the LLM for the entities (Appendix A.1) and for the entity
  pair of each relation type (Appendix A.2; the appendix prompts are not in our copy of the
  paper, so ours are written from the Step 1-2 text). A failed request or a reply that is not
  the asked JSON falls back to :class:`RuleGraphExtractor` for that sub-question, recorded in
  :attr:`Extraction.note`.
* :class:`RuleGraphExtractor` needs no model: question words, attribute phrases ("birth date",
  "nationality", "the X of"), capitalised name spans and quoted spans, in order, each linked to
  the next (every pair of neighbours shares the relation phrase between them).

Merging (Step 3, our reading of Figure 2, which our copy of the paper lacks as an image): the
paper's core node is "the common element" of the sub-questions, a node "with an in-degree of two
or more", and Algorithm 1 expects several roots sorted by sub-question. Both hold only when an
entity named in several sub-questions becomes one node while each sub-question keeps its own
question word. So entity nodes with the same text (case, spacing, surrounding quotes and a
possessive ``'s`` ignored) merge into their first occurrence by ``(sub_question, node_id)``;
question-word nodes never merge ("Who" in two sub-questions asks two things). Self-loops left by
a merge are dropped, and of several edges between the same two nodes (in either direction, so
no two-node cycles) only the first by the source's ``(sub_question, node_id)`` is kept.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal, Protocol

from dynakrag import prompts
from dynakrag.dsrag.types import NodeKey, QEdge, QNode, QuestionGraph
from dynakrag.llm.client import NO_USAGE, LLMClient, Usage

__all__ = [
    "ATTRIBUTE_PHRASES",
    "Extraction",
    "Extractor",
    "GraphExtraction",
    "LLMGraphExtractor",
    "RuleGraphExtractor",
    "Span",
    "build_question_graph",
    "extract_question_graph",
    "find_entities",
    "is_abbreviation",
    "merge_extractions",
    "name_spans",
    "normalize_entity",
    "question_word_span",
    "relation_types",
]

logger = logging.getLogger(__name__)

ExtractionMethod = Literal["llm", "rule", "rule-fallback"]

QUESTION_WORDS = frozenset({"who", "whom", "whose", "what", "which", "when", "where", "why", "how"})
AUXILIARIES = frozenset(
    {
        "is", "are", "was", "were", "am", "do", "does", "did", "has", "have", "had", "can",
        "could", "will", "would", "should", "shall", "may", "might", "must",
    }
)  # fmt: skip
"""First words of a yes/no question; they stand as its question-word node, so a yes/no
sub-question has a root of its own as a wh-question does."""

_LEAD_PREPOSITIONS = frozenset(
    {"in", "on", "at", "for", "from", "to", "by", "with", "of", "during", "since", "among"}
)

ATTRIBUTE_PHRASES: tuple[str, ...] = (
    "date of birth", "place of birth", "date of death", "place of death", "born date",
    "birth date", "birth place", "birthplace", "birthday", "death date", "nationality",
    "citizenship", "net worth", "occupation", "profession", "population", "headquarters",
    "release date", "publication date", "founding date", "operating profit",
)  # fmt: skip
"""Attribute nouns a question asks about (an overlapping longer match wins)."""

_SUPERLATIVE = re.compile(r"^(?:most|least|more|less|first|second|third|fourth|fifth|\w+est)$")
_ASKED_NOUN = re.compile(
    r"^\W*(?:[A-Za-z]+\s+)?(which|what|how many|how much)\s+((?:[a-z][a-z-]*)(?:\s+[a-z][a-z-]*)?)",
    flags=re.IGNORECASE,
)
_OF_ATTRIBUTE = re.compile(
    r"\b(?:the|its|their|his|her)\s+((?:[a-z][a-z-]*\s+){0,2}[a-z][a-z-]*)\s+(?:of|for)\b"
)

# Name tokens: words, numbers and initials; a quoted span is one token of its own.
_TOKEN = re.compile(r"[“\"][^”\"]+[”\"]|[^\W_][\w'’-]*\.?")
_WORD = re.compile(r"[A-Za-z]+(?:['’]s)?")
_NAME_CONNECTORS = frozenset(
    {"of", "van", "von", "de", "da", "di", "du", "del", "der", "la", "le", "bin", "al", "y"}
)
_ABBREVIATIONS = frozenset({"jr.", "sr.", "st.", "dr.", "mr.", "mrs.", "ms.", "inc.", "co."})
_NOT_NAMES = frozenset(
    {
        "the", "a", "an", "and", "or", "but", "nor", "if", "as", "to", "by", "from", "with",
        "for", "among", "between", "in", "on", "at", "of", "he", "she", "it", "they", "his",
        "her", "its", "their", "i", "we", "you", "this", "that", "these", "those", "there",
        "yes", "no", "true", "false",
    }
) | QUESTION_WORDS | AUXILIARIES  # fmt: skip
_FIRST_NAMES = frozenset({"Will", "May"})  # auxiliaries that also open names ("Will Smith")
_POSSESSIVE = re.compile(r"(?:'s|’s|'|’)$")


@dataclass(frozen=True)
class Span:
    """An entity mention: its text (as written, possessive dropped) and character range."""

    text: str
    start: int
    end: int
    is_question_word: bool = False


@dataclass(frozen=True)
class Extraction:
    """Steps 1-2 for one sub-question: its nodes (keys ``(number, 0..)``) and triples."""

    number: int
    sub_question: str
    nodes: tuple[QNode, ...]
    edges: tuple[QEdge, ...]
    method: ExtractionMethod
    usage: Usage = NO_USAGE
    note: str | None = None
    """Why the rule extractor stood in, or what was dropped from the LLM reply."""


class Extractor(Protocol):
    """Steps 1-2 of the paper for one sub-question; ``number`` is 1-based."""

    def extract(self, sub_question: str, number: int) -> Extraction: ...


# ------------------------------------------------------------------------------ entities


def normalize_entity(text: str) -> str:
    """The merge key of an entity: case, spacing, quotes, end punctuation and ``'s`` ignored."""
    text = " ".join(text.split()).strip(' "“”,;:?!').casefold()
    return _POSSESSIVE.sub("", text).strip()


def question_word_span(text: str) -> Span | None:
    """The question word opening ``text``: a wh-word (possibly after one preposition, "In
    which city ...") or the auxiliary of a yes/no question ("Is", "Did")."""
    for position, match in enumerate(list(_WORD.finditer(text))[:2]):
        word = _POSSESSIVE.sub("", match.group())
        lower = word.lower()
        if position == 0 and word in _FIRST_NAMES and _capitalised_next(text, match.end()):
            return None  # "Will Smith ..." opens with a name, not with "will"
        if lower in QUESTION_WORDS or (position == 0 and lower in AUXILIARIES):
            return Span(word, match.start(), match.start() + len(word), is_question_word=True)
        if lower not in _LEAD_PREPOSITIONS:
            break
    return None


def _capitalised_next(text: str, position: int) -> bool:
    following = text[position:].split(maxsplit=1)
    return bool(following) and following[0][:1].isupper()


def name_spans(text: str) -> list[Span]:
    """Capitalised name spans ("Neil deGrasse Tyson", "Martin Luther King Jr.", "Apollo 11")
    and quoted spans, in order of appearance. A name never runs across punctuation and ends
    at a possessive ("NASA's" gives "NASA")."""
    spans: list[Span] = []
    run: list[tuple[int, int, str]] = []

    def flush() -> None:
        tokens = list(run)
        run.clear()
        # Capitalised stop words ("Is", "The", "In") open sentences, not names; "Will" and
        # "May" before another capitalised word are first names ("Will Smith").
        while tokens and (
            (tokens[0][2].lower() in _NOT_NAMES and not _first_name_like(tokens))
            or not _starts_name(tokens[0][2])
        ):
            tokens.pop(0)
        while tokens and tokens[-1][2].lower() in _NAME_CONNECTORS:
            tokens.pop()
        if tokens:
            start, end = tokens[0][0], tokens[-1][1]
            spans.append(Span(text[start:end], start, end))

    previous_end = 0
    for match in _TOKEN.finditer(text):
        token, start = match.group(), match.start()
        if text[previous_end:start].strip():
            flush()  # punctuation between two words ends a name
        previous_end = match.end()
        if token[0] in '“"':
            flush()
            inner = token[1:-1].strip()
            if inner:
                offset = token.index(inner)
                spans.append(Span(inner, start + offset, start + offset + len(inner)))
            continue
        ends_name = False
        if token.endswith(".") and not is_abbreviation(token):
            token, ends_name = token[:-1], True  # a full stop, not "Jr."
        if _POSSESSIVE.search(token):
            token, ends_name = _POSSESSIVE.sub("", token), True
        if token and (
            _starts_name(token)
            or (run and (token.lower() in _NAME_CONNECTORS or token[0].isdigit()))
        ):
            run.append((start, start + len(token), token))
        else:
            flush()
        if ends_name:
            flush()
    flush()
    return spans


def _first_name_like(tokens: Sequence[tuple[int, int, str]]) -> bool:
    return len(tokens) > 1 and tokens[0][2] in _FIRST_NAMES and tokens[1][2][:1].isupper()


def _starts_name(token: str) -> bool:
    return token[0].isupper() or bool(re.match(r"[a-z]+[A-Z]", token))  # "deGrasse", "iPhone"


def is_abbreviation(token: str) -> bool:
    """Whether a full stop belongs to ``token`` ("Jr.", an initial "J.")."""
    return token.lower() in _ABBREVIATIONS or bool(re.fullmatch(r"[A-Z]\.", token))


def attribute_spans(text: str) -> list[Span]:
    """Attribute noun phrases: the known ones ("birth date", "nationality"), "the X of", and
    the noun a question word asks for ("which company", "how many derivative breeds")."""
    lower = text.lower()
    spans = []
    asked = _ASKED_NOUN.match(text)
    if asked:
        words = asked.group(2).split()
        if asked.group(1).lower() in {"which", "what"}:
            words = words[:1]  # "Which novel sold ...": only the noun, not the verb after it
        words = words[: next((i for i, w in enumerate(words) if w in _NOT_NAMES), len(words))]
        if words:
            phrase = " ".join(words)
            spans.append(Span(phrase, asked.start(2), asked.start(2) + len(phrase)))
    for phrase in ATTRIBUTE_PHRASES:
        for match in re.finditer(rf"\b{re.escape(phrase)}\b", lower):
            spans.append(Span(text[match.start() : match.end()], match.start(), match.end()))
    for match in _OF_ATTRIBUTE.finditer(text):
        words = match.group(1).split()
        while len(words) > 1 and _SUPERLATIVE.match(words[0]):
            words.pop(0)  # "the earliest birth date of" -> "birth date"
        if not words or _SUPERLATIVE.match(words[0]) or words[-1] in _NOT_NAMES:
            continue
        phrase = " ".join(words)
        start = match.start(1) + match.group(1).index(words[0])
        spans.append(Span(phrase, start, start + len(phrase)))
    return spans


def find_entities(text: str) -> list[Span]:
    """Rule-based Step 1: question word, quoted spans, names and attributes, in order.

    Where two candidates overlap, the earlier kind in that list wins, then the longer one."""
    ranked: list[tuple[int, Span]] = []
    qword = question_word_span(text)
    if qword:
        ranked.append((0, qword))
    ranked += [(1, span) for span in name_spans(text)]
    ranked += [(2, span) for span in attribute_spans(text)]
    ranked.sort(key=lambda item: (item[0], -(item[1].end - item[1].start), item[1].start))
    chosen: list[Span] = []
    for _, span in ranked:
        if all(span.end <= other.start or span.start >= other.end for other in chosen):
            chosen.append(span)
    return sorted(chosen, key=lambda span: span.start)


# ------------------------------------------------------------------------------ triples


def relation_types(text: str, spans: Sequence[Span]) -> list[str]:
    """Step 2's relation types: the pieces of the sub-question between its entities."""
    pieces = []
    edges = [0, *(p for span in spans for p in (span.start, span.end)), len(text)]
    for start, end in zip(edges[::2], edges[1::2], strict=True):
        piece = _relation_text(text[start:end])
        if piece:
            pieces.append(piece)
    return list(dict.fromkeys(pieces))


def _relation_text(piece: str) -> str:
    piece = re.sub(r"^['’]s\b", "", piece.strip())  # the possessive left behind by a name
    return " ".join(piece.strip(' ,;:?!."“”').split())


def _chain_edges(number: int, spans: Sequence[Span], text: str) -> list[QEdge]:
    """Each entity linked to the next, with the words between them as the relation."""
    edges = []
    for index in range(1, len(spans)):
        between = _relation_text(text[spans[index - 1].end : spans[index].start])
        edges.append(QEdge((number, index - 1), (number, index), between or None))
    return edges


def _nodes(number: int, spans: Sequence[Span], sub_question: str) -> tuple[QNode, ...]:
    if not spans:
        # No entity: the sub-question stands as one node, so it still has a criterion.
        return (QNode(number, 0, sub_question.strip()),)
    return tuple(
        QNode(number, i, span.text, is_question_word=span.is_question_word)
        for i, span in enumerate(spans)
    )


class RuleGraphExtractor:
    """Steps 1-2 without a model: :func:`find_entities`, each entity linked to the next.

    Linking neighbours is Step 2 with every relation type pairing the two entities around it
    (the rule the paper uses for unpaired entities), which is what a chain-shaped template
    question needs. No entity gives a single node holding the whole sub-question.
    """

    def extract(self, sub_question: str, number: int) -> Extraction:
        text = str(sub_question or "")
        spans = find_entities(text)
        return Extraction(
            number,
            text,
            _nodes(number, spans, text),
            tuple(_chain_edges(number, spans, text)),
            "rule",
        )


class LLMGraphExtractor:
    """Steps 1-2 with the LLM: entities, then the entity pair of each relation type.

    Entities the reply names but the sub-question does not contain are dropped (entities are
    nodes *of the question*). When the entity reply is unusable (request failed, not the asked
    JSON, no entity found in the text) the sub-question goes to :class:`RuleGraphExtractor`
    (``method="rule-fallback"``). When only the pairing reply is unusable, the LLM's entities
    are kept and every one counts as unpaired (each linked to the one before it).
    """

    def __init__(self, llm: LLMClient) -> None:
        self.llm = llm
        self._rules = RuleGraphExtractor()

    def extract(self, sub_question: str, number: int) -> Extraction:
        text = str(sub_question or "")
        try:
            reply, usage = self.llm.structured(
                prompts.dsrag_entity_messages(text), prompts.EntitiesReply
            )
        except Exception as exc:  # any backend fault, even one LLMClient re-raises
            return self._fallback(text, number, NO_USAGE, f"entity request failed: {exc}")
        if reply is None:
            return self._fallback(text, number, usage, "entity reply is not the asked JSON")
        entities = reply.entities
        spans = _locate(text, [e for e in entities if e is not None])
        if not spans:
            return self._fallback(text, number, usage, "no entity of the reply is in the text")
        edges, pair_usage, note = self._pair(text, number, spans)
        dropped = len(entities) - len(spans)
        if dropped > 0:
            note = "; ".join(filter(None, [note, f"{dropped} entities not in the text dropped"]))
        return Extraction(
            number, text, _nodes(number, spans, text), tuple(edges), "llm", usage + pair_usage, note
        )

    def _pair(
        self, text: str, number: int, spans: list[Span]
    ) -> tuple[list[QEdge], Usage, str | None]:
        relations = relation_types(text, spans)
        if len(spans) < 2:
            return [], NO_USAGE, None
        if not relations:
            return _chain_edges(number, spans, text), NO_USAGE, None
        names = [span.text for span in spans]
        try:
            reply, usage = self.llm.structured(
                prompts.dsrag_relation_messages(text, names, relations), prompts.TriplesReply
            )
        except Exception as exc:
            return _link_unpaired([], number, spans), NO_USAGE, f"pair request failed: {exc}"
        if reply is None:
            note = "pair reply is not the asked JSON; entities linked in order"
            return _link_unpaired([], number, spans), usage, note
        index = {normalize_entity(span.text): i for i, span in reversed(list(enumerate(spans)))}
        pairs: list[tuple[int, int, str | None]] = []
        for triple in reply.triples:
            if triple is None:
                continue
            source = index.get(normalize_entity(triple.source))
            target = index.get(normalize_entity(triple.target))
            if source is None or target is None or source == target:
                continue
            relation = triple.relation.strip()
            # Relation types come from the question only; an invented one is not kept.
            kept = relation if relation in relations else None
            # Direction by order of appearance: earlier entity -> later entity.
            pairs.append((min(source, target), max(source, target), kept))
        return _link_unpaired(pairs, number, spans), usage, None

    def _fallback(self, text: str, number: int, usage: Usage, why: str) -> Extraction:
        logger.info("DS-RAG graph: rule extractor for sub-question %d (%s)", number, why)
        rules = self._rules.extract(text, number)
        return Extraction(
            number, text, rules.nodes, rules.edges, "rule-fallback", usage, f"{why}; rule extractor"
        )


def _locate(text: str, entities: Sequence[str]) -> list[Span]:
    """Place each named entity at its first free occurrence in ``text``; sort by position."""
    placed: list[Span] = []
    qword = question_word_span(text)
    lower = text.lower()
    for entity in entities:
        needle = " ".join(entity.split()).strip(' "“”,;:?!')
        if not needle:
            continue
        start = lower.find(needle.lower())
        while start != -1:
            end = start + len(needle)
            if all(end <= s.start or start >= s.end for s in placed):
                break
            start = lower.find(needle.lower(), start + 1)
        if start == -1:
            continue
        word = _POSSESSIVE.sub("", text[start : start + len(needle)])
        is_qword = (
            qword is not None and start == qword.start and needle.lower() in (qword.text.lower(),)
        )
        placed.append(Span(word, start, start + len(word), is_question_word=is_qword))
    return sorted(placed, key=lambda span: span.start)


def _link_unpaired(
    pairs: Sequence[tuple[int, int, str | None]], number: int, spans: Sequence[Span]
) -> list[QEdge]:
    """The LLM's pairs, then a null edge for every entity no pair mentions: from the entity
    just before it, or, for the first entity, to the entity after it (it has none before)."""
    edges: dict[tuple[int, int], QEdge] = {}
    for source, target, relation in pairs:
        edges.setdefault((source, target), QEdge((number, source), (number, target), relation))
    paired = {i for pair in edges for i in pair}
    for i in range(len(spans)):
        if i in paired or len(spans) < 2:
            continue
        source, target = (i - 1, i) if i > 0 else (0, 1)
        edges.setdefault((source, target), QEdge((number, source), (number, target), None))
    return sorted(edges.values(), key=lambda e: (e.source, e.target))


# ------------------------------------------------------------------------------ Step 3


@dataclass(frozen=True)
class GraphExtraction:
    """The merged graph with the per-sub-question extractions it was built from."""

    graph: QuestionGraph
    extractions: tuple[Extraction, ...] = ()
    usage: Usage = NO_USAGE
    notes: tuple[str, ...] = field(default=())
    """One line per sub-question whose extraction fell back or dropped something."""


def extract_question_graph(sub_questions: Sequence[str], extractor: Extractor) -> GraphExtraction:
    """Steps 1-3 for every sub-question; never raises (a failing extractor is replaced by the
    rule extractor for that sub-question)."""
    rules = RuleGraphExtractor()
    extractions = []
    for number, sub_question in enumerate(sub_questions or (), start=1):
        text = str(sub_question or "").strip()
        if not text:
            continue
        try:
            extraction = extractor.extract(text, number)
        except Exception as exc:  # a third-party extractor must not break the pipeline
            logger.warning("DS-RAG extractor failed on sub-question %d: %s", number, exc)
            ruled = rules.extract(text, number)
            extraction = Extraction(
                number,
                text,
                ruled.nodes,
                ruled.edges,
                "rule-fallback",
                note=f"extractor raised {type(exc).__name__}: {exc}; rule extractor",
            )
        extractions.append(extraction)
    usage = sum((e.usage for e in extractions), NO_USAGE)
    notes = tuple(f"sub-question {e.number}: {e.note}" for e in extractions if e.note)
    return GraphExtraction(merge_extractions(extractions), tuple(extractions), usage, notes)


def build_question_graph(sub_questions: Sequence[str], extractor: Extractor) -> QuestionGraph:
    """The merged question graph of ``sub_questions`` (see :func:`extract_question_graph`)."""
    return extract_question_graph(sub_questions, extractor).graph


def merge_extractions(extractions: Sequence[Extraction]) -> QuestionGraph:
    """Step 3: one graph; same-text entity nodes merged, redundant triples removed."""
    nodes = sorted(node for e in extractions for node in e.nodes)
    canonical: dict[str, NodeKey] = {}
    alias: dict[NodeKey, NodeKey] = {}
    kept: dict[NodeKey, QNode] = {}
    for node in nodes:
        if node.is_question_word:
            alias[node.key] = node.key
        else:
            alias[node.key] = canonical.setdefault(normalize_entity(node.text), node.key)
        kept.setdefault(alias[node.key], node)
    edges: dict[frozenset[NodeKey], QEdge] = {}
    # The first edge of a pair of nodes is the one whose (original) source key is smallest.
    for edge in sorted(
        (edge for e in extractions for edge in e.edges), key=lambda e: (e.source, e.target)
    ):
        if edge.source not in alias or edge.target not in alias:
            continue
        source, target = alias[edge.source], alias[edge.target]
        if source != target:
            edges.setdefault(frozenset((source, target)), QEdge(source, target, edge.relation))
    ordered = sorted(edges.values(), key=lambda e: (e.source, e.target))
    return QuestionGraph(nodes=tuple(sorted(kept.values())), edges=tuple(ordered))

"""DS-RAG selection criteria (Section 2.3.1, Step 4): Algorithm 1 (core node) and 2 (criteria).

Both algorithms are implemented as the paper writes them, with these readings of its
pseudo-code, each needed for the paper's own worked example to come out right:

* ``outgoing_edges`` holds the outgoing edges *of the node being visited* (the pseudo-code
  initialises it once and only ever inserts into it, which would count the edges of every
  node seen so far and make the second node of any chain a "core").
* A node branches with **two or more** outgoing edges in both of Algorithm 1's branches. Line
  23 writes "> 2", line 7 "≥ 2"; with "> 2" the two-person example ("... Taylor Swift or Neil
  Armstrong ...", whose core "birth date" has two outgoing edges) finds no core.
* A node is queued once and a walk stops at a node it has seen, so a cyclic graph ends.
* Algorithm 2's predecessor triple is stored as the graph's edge (``incoming -> core``); line
  6 names it ``(core_node, edge, incoming_node)`` but the edge keeps its direction.
* BFS never walks through the core node, so one branch cannot pull in another.

``hops`` (Section 2.3.2: "how many hops from the core node should be included") limits both
walks: an edge whose far end is more than ``hops`` edges from the core is left out. The edge
between the core and its neighbour is hop 1, so every criterion keeps it; ``None`` is no limit.

:func:`criteria_for_question` runs Steps 1-4 and defines what happens when the paper's
procedure gives nothing (see :class:`CriteriaResult`).
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from dynakrag.dsrag.question_graph import (
    Extraction,
    Extractor,
    GraphExtraction,
    RuleGraphExtractor,
    extract_question_graph,
)
from dynakrag.dsrag.types import Criterion, NodeKey, QEdge, QNode, QuestionGraph
from dynakrag.llm.client import NO_USAGE, Usage

__all__ = [
    "CriteriaResult",
    "criteria_for_graph",
    "criteria_for_question",
    "find_core_node",
    "per_sub_question_criteria",
    "selection_criteria",
]

logger = logging.getLogger(__name__)

FALLBACK_EMPTY = "empty graph: the whole question is the only criterion"
FALLBACK_NO_CANDIDATE = "no node with in-degree >= 2: one criterion per sub-question"
FALLBACK_NO_CORE = "Algorithm 1 found no core node: one criterion per sub-question"
FALLBACK_NO_BRANCH = "the core node has no outgoing edge: one criterion per sub-question"


@dataclass(frozen=True)
class _Adjacency:
    successors: dict[NodeKey, list[NodeKey]]
    predecessors: dict[NodeKey, list[NodeKey]]
    edges: dict[tuple[NodeKey, NodeKey], QEdge]


def _adjacency(graph: QuestionGraph) -> _Adjacency:
    successors: dict[NodeKey, list[NodeKey]] = {node.key: [] for node in graph.nodes}
    predecessors: dict[NodeKey, list[NodeKey]] = {node.key: [] for node in graph.nodes}
    edges: dict[tuple[NodeKey, NodeKey], QEdge] = {}
    for edge in graph.edges:
        if edge.source not in successors or edge.target not in successors:
            continue  # an edge to a node the graph does not hold is ignored
        if (edge.source, edge.target) in edges:
            continue
        edges[(edge.source, edge.target)] = edge
        successors[edge.source].append(edge.target)
        predecessors[edge.target].append(edge.source)
    for neighbours in (*successors.values(), *predecessors.values()):
        neighbours.sort()  # (sub_question, node_id) order everywhere
    return _Adjacency(successors, predecessors, edges)


def _is_question_word(graph: QuestionGraph, key: NodeKey) -> bool:
    return graph.node(key).is_question_word


def find_core_node(graph: QuestionGraph) -> NodeKey | None:
    """Algorithm 1: the node highest in the question hierarchy where the question branches.

    With one root (a node of the triples with in-degree 0), walk down its chain to the first
    node with two or more outgoing edges; if that node is a question word, its successors join
    the root list. With several roots, visit them in (sub_question, node_id) order, queueing
    the successors of non-branching nodes: the first branching node that is not a question
    word is the core; branching question words are kept aside, and the first of them is the
    core when nothing else branches. None when nothing branches.
    """
    adjacency = _adjacency(graph)
    successors = adjacency.successors
    in_triples = {key for pair in adjacency.edges for key in pair}
    roots = sorted(key for key in in_triples if not adjacency.predecessors[key])
    core: NodeKey | None = None
    question_word_nodes: list[NodeKey] = []
    if len(roots) == 1:
        current, seen = roots[0], set()
        while successors[current] and current not in seen:  # not a leaf
            seen.add(current)
            outgoing = successors[current]
            if len(outgoing) >= 2:
                core = current
                if _is_question_word(graph, current):
                    roots.extend(k for k in outgoing if k not in roots)
                break
            current = outgoing[0]
    if len(roots) > 1:
        queue = sorted(roots)
        queued = set(queue)
        position = 0
        while position < len(queue):
            node = queue[position]
            position += 1
            outgoing = successors[node]
            if len(outgoing) >= 2:
                core = node
                if _is_question_word(graph, node):
                    question_word_nodes.append(node)
                    core = None
                else:
                    break
            else:
                for following in outgoing:
                    if following not in queued:
                        queued.add(following)
                        queue.append(following)
    if core is None and question_word_nodes:
        core = question_word_nodes[0]
    return core


def _walk(
    start: NodeKey,
    neighbours: dict[NodeKey, list[NodeKey]],
    edge: Callable[[NodeKey, NodeKey], QEdge],
    core: NodeKey,
    hops: int | None,
) -> list[QEdge]:
    """BFS from ``start`` (one hop from the core): every triple met, within ``hops``."""
    triples: list[QEdge] = []
    seen = {start, core}
    frontier: deque[tuple[NodeKey, int]] = deque([(start, 1)])
    while frontier:
        node, depth = frontier.popleft()
        if hops is not None and depth + 1 > hops:
            continue
        for other in neighbours[node]:
            if other == core:
                continue  # never through the core: that would reach the other branches
            triples.append(edge(node, other))
            if other not in seen:
                seen.add(other)
                frontier.append((other, depth + 1))
    return triples


def selection_criteria(
    graph: QuestionGraph, core: NodeKey | None, hops: int | None = None
) -> list[Criterion]:
    """Algorithm 2: one criterion per outgoing node of ``core``, in key order.

    A criterion holds the triple from the core to that node, every triple found by BFS over
    the node's successors, and every triple of the core's predecessors (found by BFS over
    predecessors). ``hops`` limits both walks (None: no limit; below 1 counts as 1). An
    unknown or None core gives no criteria.
    """
    if core is None or all(node.key != core for node in graph.nodes):
        return []
    limit = None if hops is None else max(1, int(hops))
    adjacency = _adjacency(graph)
    edges = adjacency.edges

    def forward(source: NodeKey, target: NodeKey) -> QEdge:
        return edges[(source, target)]

    def backward(node: NodeKey, predecessor: NodeKey) -> QEdge:
        return edges[(predecessor, node)]

    predecessor_triples: list[QEdge] = []
    for incoming in adjacency.predecessors[core]:
        predecessor_triples.append(edges[(incoming, core)])
        predecessor_triples += _walk(incoming, adjacency.predecessors, backward, core, limit)
    criteria = []
    for outgoing in adjacency.successors[core]:
        triples = [edges[(core, outgoing)]]
        triples += _walk(outgoing, adjacency.successors, forward, core, limit)
        triples += predecessor_triples
        triples = list(dict.fromkeys(triples))
        keys = {core, outgoing} | {key for t in triples for key in (t.source, t.target)}
        nodes = tuple(graph.node(key) for key in sorted(keys))
        criteria.append(Criterion(core, outgoing, tuple(triples), nodes))
    return criteria


# ------------------------------------------------------------------------------ pipeline


@dataclass(frozen=True)
class CriteriaResult:
    """Steps 1-4 for one question.

    ``fallback`` is None when Algorithms 1-2 gave the criteria, else the reason for the
    defined fallback (one of the ``FALLBACK_*`` texts):

    * empty graph (no sub-question, or none with text): one criterion holding the whole
      question as its only node;
    * no node with in-degree >= 2 (the paper's core candidates), no core from Algorithm 1, or
      a core without outgoing edges: one criterion per sub-question, built from that
      sub-question's own (unmerged) nodes and triples, with its first node as core and its last
      non-question-word node as anchor (the later entity is usually the specific one: "birth
      date of *Taylor Swift*"). These nodes keep their unmerged keys, so they need not all be
      nodes of ``graph``.
    """

    question: str
    sub_questions: tuple[str, ...]
    graph: QuestionGraph
    core: NodeKey | None
    criteria: tuple[Criterion, ...]
    fallback: str | None = None
    usage: Usage = NO_USAGE
    extraction_notes: tuple[str, ...] = ()
    extractions: tuple[Extraction, ...] = ()


def _whole_question(question: str) -> Criterion:
    node = QNode(1, 0, question)
    return Criterion(core=node.key, anchor=node.key, triples=(), nodes=(node,))


def per_sub_question_criteria(extractions: Sequence[Extraction]) -> list[Criterion]:
    """One criterion per sub-question, from its own (unmerged) nodes and triples: its first
    node as core and its last non-question-word node as anchor (see :class:`CriteriaResult`)."""
    criteria = []
    for extraction in extractions:
        if not extraction.nodes:
            continue
        nodes = tuple(sorted(extraction.nodes))
        entities = [node for node in nodes if not node.is_question_word]
        anchor = (entities[-1] if entities else nodes[-1]).key
        criteria.append(Criterion(nodes[0].key, anchor, tuple(extraction.edges), nodes))
    return criteria


def one_criterion_each(texts: Sequence[str]) -> list[Criterion]:
    """Exactly one criterion per text, in order: its own rule extraction (first node core,
    last entity anchor, as :func:`per_sub_question_criteria`), or the whole text as one node
    when it names nothing. What a chain of hops selects by: one criterion per hop."""
    criteria = []
    for text in texts:
        built = extract_question_graph([text], RuleGraphExtractor())
        own = per_sub_question_criteria(built.extractions)
        criteria.append(own[0] if own else _whole_question(text))
    return criteria


def criteria_for_question(
    question: str,
    sub_questions: Sequence[str],
    extractor: Extractor | None = None,
    hops: int | None = None,
) -> CriteriaResult:
    """Question graph, core node and selection criteria of ``question``; never raises.

    ``extractor`` defaults to :class:`RuleGraphExtractor`; ``hops`` is passed to
    :func:`selection_criteria`.
    """
    subs = tuple(str(s).strip() for s in (sub_questions or ()) if str(s or "").strip())
    built = extract_question_graph(subs, extractor or RuleGraphExtractor())
    return criteria_for_graph(question, subs, built, hops)


def criteria_for_graph(
    question: str,
    sub_questions: Sequence[str],
    built: GraphExtraction,
    hops: int | None = None,
) -> CriteriaResult:
    """Step 4 (Algorithms 1-2 and their fallbacks) on an extraction already made: the rule or
    LLM extractors' (:func:`criteria_for_question`) or the one-call question analysis's
    (:mod:`dynakrag.dsrag.extraction`). Never raises."""
    text = str(question or "").strip()
    subs = tuple(sub_questions)
    graph = built.graph

    def result(
        core: NodeKey | None, criteria: Sequence[Criterion], why: str | None
    ) -> CriteriaResult:
        return CriteriaResult(
            text, subs, graph, core, tuple(criteria), why, built.usage, built.notes,
            built.extractions,
        )  # fmt: skip

    def per_sub_question(why: str) -> CriteriaResult:
        criteria = per_sub_question_criteria(built.extractions)
        if not criteria:
            return result(None, [_whole_question(text)], FALLBACK_EMPTY)
        return result(None, criteria, why)

    if not graph.nodes:
        return result(None, [_whole_question(text)], FALLBACK_EMPTY)
    try:
        adjacency = _adjacency(graph)
        if all(len(p) < 2 for p in adjacency.predecessors.values()):
            return per_sub_question(FALLBACK_NO_CANDIDATE)
        core = find_core_node(graph)
        if core is None:
            return per_sub_question(FALLBACK_NO_CORE)
        criteria = selection_criteria(graph, core, hops)
    except Exception as exc:  # a malformed hand-made graph must not break a pipeline run
        logger.warning("DS-RAG criteria failed: %s", exc)
        return per_sub_question(f"criteria failed ({type(exc).__name__}: {exc})")
    if not criteria:
        return per_sub_question(FALLBACK_NO_BRANCH)
    return result(core, criteria, None)

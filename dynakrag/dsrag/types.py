"""The data shared by the DS-RAG pieces: question-graph nodes, edges and selection criteria.

A question graph (paper, Section 2.3.1) holds one node per entity mention of a sub-question.
A node is identified by ``(sub_question, node_id)``: its sub-question number (1-based) and
the order of the entity's appearance in that sub-question (0-based). Edges are directed from
the entity mentioned earlier to the one mentioned later; ``relation`` is ``None`` for the
null edge that links an unpaired entity to its preceding entity. Relation types are kept for
display only: neither Algorithm 1/2 nor the selection model reads them.
"""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["Criterion", "CriterionGraph", "QEdge", "QNode", "QuestionGraph"]

NodeKey = tuple[int, int]  # (sub_question, node_id)


@dataclass(frozen=True, order=True)
class QNode:
    """One entity mention; ordering is (sub_question, node_id), the paper's queue order."""

    sub_question: int
    node_id: int
    text: str = field(compare=False)
    is_question_word: bool = field(default=False, compare=False)

    @property
    def key(self) -> NodeKey:
        return (self.sub_question, self.node_id)


@dataclass(frozen=True)
class QEdge:
    """A directed triple ``(source, relation, target)`` (keys of :class:`QNode`)."""

    source: NodeKey
    target: NodeKey
    relation: str | None = None


@dataclass(frozen=True)
class QuestionGraph:
    """The merged question graph: nodes sorted by key, edges without duplicates."""

    nodes: tuple[QNode, ...] = ()
    edges: tuple[QEdge, ...] = ()

    def node(self, key: NodeKey) -> QNode:
        for node in self.nodes:
            if node.key == key:
                return node
        raise KeyError(key)


@dataclass(frozen=True)
class CriterionGraph:
    """What the selection model consumes: node texts, edges as index pairs and the anchor
    node whose graph representation is the criterion embedding."""

    node_texts: tuple[str, ...]
    edges: tuple[tuple[int, int], ...]
    anchor: int


@dataclass(frozen=True)
class Criterion:
    """One selection criterion (Algorithm 2): the triples of one outgoing branch of the core
    node plus every triple of the core node's predecessors. ``anchor`` is the outgoing node
    of the core node that starts the branch."""

    core: NodeKey
    anchor: NodeKey
    triples: tuple[QEdge, ...]
    nodes: tuple[QNode, ...]

    @property
    def text(self) -> str:
        """A readable form, e.g. ``"born date -> Neil Armstrong -> Wapakoneta"``."""
        by_key = {n.key: n for n in self.nodes}
        ordered = [by_key[self.core], *(by_key[k] for k in sorted(by_key) if k != self.core)]
        return " -> ".join(dict.fromkeys(n.text for n in ordered))

    def as_graph(self) -> CriterionGraph:
        """Node texts and index edges for the selection model (relation types left out,
        as the paper's Eq. 2)."""
        keys = sorted({n.key for n in self.nodes})
        index = {k: i for i, k in enumerate(keys)}
        by_key = {n.key: n for n in self.nodes}
        edges = tuple(
            dict.fromkeys(
                (index[t.source], index[t.target])
                for t in self.triples
                if t.source in index and t.target in index
            )
        )
        return CriterionGraph(
            node_texts=tuple(by_key[k].text for k in keys), edges=edges, anchor=index[self.anchor]
        )

"""Criterion graphs as the GS model's input: checked, then batched as one disconnected graph."""

from __future__ import annotations

from collections.abc import Sequence

import torch

from dynakrag.dsrag.types import CriterionGraph

__all__ = ["check_graph", "graph_batch"]


def graph_batch(
    graphs: Sequence[CriterionGraph], node_rows: Sequence[Sequence[int]], table: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Batch criterion graphs as one disconnected graph.

    ``node_rows[i]`` gives, for each node of ``graphs[i]``, its row in ``table`` (the text
    embeddings). Returns node features, ``edge_index`` (offset per graph) and anchor indices.
    """
    rows: list[int] = []
    edges: list[tuple[int, int]] = []
    anchors: list[int] = []
    for graph, graph_rows in zip(graphs, node_rows, strict=True):
        offset = len(rows)
        rows.extend(graph_rows)
        edges.extend((offset + s, offset + t) for s, t in graph.edges)
        anchors.append(offset + graph.anchor)
    edge_index = (
        torch.tensor(edges, dtype=torch.long).T if edges else torch.zeros((2, 0), dtype=torch.long)
    )
    return table[torch.tensor(rows, dtype=torch.long)], edge_index, torch.tensor(anchors)


def check_graph(graph: CriterionGraph) -> None:
    """Raise ``ValueError`` unless ``graph`` has nodes, an anchor and edges in range."""
    n = len(graph.node_texts)
    if n == 0:
        raise ValueError("a criterion graph needs at least one node")
    if not 0 <= graph.anchor < n:
        raise ValueError(f"anchor {graph.anchor} is outside 0..{n - 1}")
    for source, target in graph.edges:
        if not (0 <= source < n and 0 <= target < n):
            raise ValueError(f"edge {(source, target)} is outside 0..{n - 1}")

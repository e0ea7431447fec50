"""The GS model of DS-RAG's graph-based selection (paper, Section 2.3.2): the torch module.

It scores a selection criterion against retrieved chunks by cosine similarity, over the
frozen text embeddings of :class:`~dynakrag.dsrag.text_encoder.TextEncoder`:

* **Graph encoder** (Eq. 3): ``layers`` ``GATConv`` layers over the criterion graph's edges
  (relation types are not embedded, Eq. 2). Edges keep the question graph's direction
  (``directed=True``): a node aggregates what points *to* it. Each layer is residual with a
  learned gate that starts at 0 (``h <- h + g * ELU(GAT(h))``), so the node text semantics are
  kept and an untrained model scores exactly as plain text cosine.
* **Readout**: the representation of the criterion's *anchor* node, the outgoing node of the
  core that starts the criterion's branch (the paper's RS-RAG setting, Section 3.3.1). With
  directed edges the anchor's representation mixes in its core node (its in-neighbour) and,
  with two layers, the core's predecessors, but not the ancillary description hanging below the
  anchor ("... who grew up in Wapakoneta"): selection focuses on the core elements.
* **Chunk projection** (Eq. 4): a residual MLP ``c + W2 GELU(W1 c)`` with ``W2`` initialised
  to zero (identity at start), keeping the chunk's text semantics while aligning it with the
  graph side.

Its input graphs are batched by :func:`~dynakrag.dsrag.selector_graphs.graph_batch`.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn
from torch.nn import functional as F

__all__ = ["GSArchitecture", "GraphSelectionModel"]


@dataclass(frozen=True)
class GSArchitecture:
    """The GS model's shape: what a file must record to rebuild the module."""

    dim: int
    heads: int = 4
    layers: int = 2
    mlp_hidden: int = 384
    dropout: float = 0.1
    directed: bool = True

    def __post_init__(self) -> None:
        for name in ("dim", "heads", "layers", "mlp_hidden"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 16384:
                raise ValueError(f"{name} must be an integer in 1..16384, got {value!r}")
        if self.dim % self.heads:
            raise ValueError(f"dim {self.dim} is not divisible by heads {self.heads}")
        if self.layers > 8:
            raise ValueError(f"layers must be at most 8, got {self.layers}")
        if not (isinstance(self.dropout, int | float) and 0.0 <= self.dropout < 1.0):
            raise ValueError(f"dropout must be in [0, 1), got {self.dropout!r}")
        if not isinstance(self.directed, bool):
            raise ValueError(f"directed must be a boolean, got {self.directed!r}")


class GraphSelectionModel(nn.Module):
    """GAT criterion encoder + residual MLP chunk projection; ``forward`` gives cosines."""

    def __init__(self, architecture: GSArchitecture) -> None:
        super().__init__()
        from torch_geometric.nn import GATConv  # heavy import, only where the module is built

        self.architecture = architecture
        a = architecture
        self.convs = nn.ModuleList(
            GATConv(a.dim, a.dim // a.heads, heads=a.heads, concat=True, dropout=a.dropout)
            for _ in range(a.layers)
        )
        # ReZero-style gates: the graph encoder starts as the identity on node texts.
        self.gates = nn.Parameter(torch.zeros(a.layers))
        self.proj_in = nn.Linear(a.dim, a.mlp_hidden)
        self.proj_out = nn.Linear(a.mlp_hidden, a.dim)
        nn.init.zeros_(self.proj_out.weight)
        nn.init.zeros_(self.proj_out.bias)

    def encode_criteria(
        self, x: torch.Tensor, edge_index: torch.Tensor, anchors: torch.Tensor
    ) -> torch.Tensor:
        """Criterion embeddings ``[B, dim]``: node features ``x`` ``[N, dim]`` of B graphs
        batched as one disconnected graph, ``edge_index`` ``[2, E]`` (source, target) and the
        anchor node index of each graph."""
        if not self.architecture.directed and edge_index.numel():
            edge_index = torch.cat([edge_index, edge_index.flip(0)], dim=1)
        h = x
        for conv, gate in zip(self.convs, self.gates, strict=True):
            h = h + gate * F.elu(conv(h, edge_index))
        return h[anchors]

    def encode_chunks(self, chunks: torch.Tensor) -> torch.Tensor:
        """Projected chunk embeddings ``[M, dim]`` (identity before training)."""
        return chunks + self.proj_out(F.gelu(self.proj_in(chunks)))

    def forward(
        self,
        x: torch.Tensor,
        edge_index: torch.Tensor,
        anchors: torch.Tensor,
        chunks: torch.Tensor,
    ) -> torch.Tensor:
        """Cosine similarity ``[B, M]`` of each criterion with each chunk."""
        h_sc = F.normalize(self.encode_criteria(x, edge_index, anchors), dim=-1)
        h_rc = F.normalize(self.encode_chunks(chunks), dim=-1)
        return h_sc @ h_rc.T

    def count_parameters(self) -> dict[str, int]:
        """Trainable parameters of the graph encoder (GAT layers + gates) and projection."""
        graph = sum(p.numel() for p in self.convs.parameters()) + self.gates.numel()
        projection = sum(p.numel() for m in (self.proj_in, self.proj_out) for p in m.parameters())
        return {"graph_encoder": graph, "projection": projection, "trainable": graph + projection}

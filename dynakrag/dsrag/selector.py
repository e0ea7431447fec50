"""DS-RAG's graph-based selection (GS) model (paper, Section 2.3.2) and its files.

The model scores a selection criterion against retrieved chunks by cosine similarity:

* **Text encoder** (frozen): every node text of the criterion graph and every chunk is
  embedded by the project's embedding model (all-MiniLM-L6-v2, 384-d, from
  :mod:`dynakrag.retrieval.embeddings`; the paper uses text-embedding-3-large, 3072-d). Each
  distinct text is embedded once per :class:`TextEncoder` (memoised).
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

:class:`GraphSelector` is the estimator around the module: hyper-parameters in ``__init__``,
``score``, ``select``, ``save`` and ``load``. It is fitted by
:func:`dynakrag.dsrag.selector_training.fit_selector` (InfoNCE); the model does not import its
trainer.

Files
    ``<name>.npz`` holds the weights (float32 arrays named by the module's ``state_dict``
    keys), written and read by :func:`dynakrag.files.write_arrays` /
    :func:`~dynakrag.files.read_arrays`: a zip of ``.npy`` arrays loaded with
    ``allow_pickle=False`` after every header was checked, so loading never runs code from the
    file. ``<name>.json`` beside it holds the metadata: format, schema version, architecture,
    encoder, temperature, training settings, training-data SHA-256, metrics and the SHA-256 of
    the ``.npz``, which is checked before the weights are opened. Anything else is refused with
    :class:`SelectorFileError`.
"""

from __future__ import annotations

import math
import os
import re
import threading
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from langchain_core.embeddings import Embeddings
from torch import nn
from torch.nn import functional as F

from dynakrag.dsrag.types import CriterionGraph
from dynakrag.errors import ConfigurationError, ModelUnavailableError
from dynakrag.files import (
    ModelFileError,
    json_safe,
    read_arrays,
    read_json,
    sha256_file,
    write_arrays,
    write_json,
)
from dynakrag.retrieval.dense import model_name_of

__all__ = [
    "DEFAULT_MODEL_PATH",
    "FILE_FORMAT",
    "SCHEMA_VERSION",
    "GSArchitecture",
    "GraphSelectionModel",
    "GraphSelector",
    "SelectorFileError",
    "TextEncoder",
    "assign_chunks",
    "load_default_selector",
]

FILE_FORMAT = "dynakrag-gs-selector"
SCHEMA_VERSION = 1
"""Version of the selector file layout (metadata keys and array names)."""
DEFAULT_MODEL_PATH = Path(__file__).resolve().parent / "models" / "gs-selector.npz"
"""Where the shipped model lives (package data); its metadata is ``gs-selector.json``."""
MAX_METADATA_BYTES = 1 << 20
_SHA256 = re.compile(r"[0-9a-f]{64}")
_WEIGHTS_FORMAT = f"{FILE_FORMAT}-weights"


class SelectorFileError(ModelFileError):
    """A file given as a GS selector is not a valid dynakrag selector file."""

    kind = "selector file"


# --------------------------------------------------------------------------------------------
# The module


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


# --------------------------------------------------------------------------------------------
# The frozen text encoder


class TextEncoder:
    """The frozen text encoder: unit-length float32 vectors, each distinct text embedded once.

    Passages and node texts both go through ``embed_documents`` (MiniLM is symmetric). The
    memo is cleared when it holds ``max_cached`` texts, so a long-running service stays small.
    """

    def __init__(self, embeddings: Embeddings, *, max_cached: int = 200_000) -> None:
        self.embeddings = embeddings
        self.max_cached = max_cached
        self._memo: dict[str, np.ndarray] = {}
        self._lock = threading.Lock()

    @property
    def name(self) -> str:
        return model_name_of(self.embeddings)

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        """``[len(texts), dim]`` float32, L2-normalised (a zero vector stays zero)."""
        texts = list(texts)
        with self._lock:
            known = {t: self._memo[t] for t in set(texts) if t in self._memo}
        missing = [t for t in dict.fromkeys(texts) if t not in known]
        if missing:
            vectors = np.asarray(self.embeddings.embed_documents(missing), dtype=np.float32)
            if vectors.ndim != 2 or vectors.shape[0] != len(missing):
                raise ModelUnavailableError(
                    f"embedding model {self.name} returned shape {vectors.shape} for "
                    f"{len(missing)} texts"
                )
            norms = np.linalg.norm(vectors, axis=1, keepdims=True)
            norms[norms == 0.0] = 1.0
            fresh = dict(zip(missing, vectors / norms, strict=True))
            known.update(fresh)
            with self._lock:
                if len(self._memo) + len(fresh) > self.max_cached:
                    self._memo.clear()
                self._memo.update(fresh)
        if not texts:
            return np.zeros((0, 0), dtype=np.float32)
        return np.stack([known[t] for t in texts])


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


# --------------------------------------------------------------------------------------------
# Choosing one chunk per criterion


def assign_chunks(scores: np.ndarray, *, distinct: bool = True) -> list[tuple[int, bool]]:
    """One chunk per criterion (row of ``scores``): ``(chunk column, shared)``.

    With ``distinct``, criteria are served in order of their best similarity (most confident
    first, ties by row order); a criterion whose best chunk is already taken takes its best
    unused chunk. Only when every chunk is taken (more criteria than chunks) does a criterion
    share its best chunk, with ``shared=True``. Without ``distinct`` each row takes its argmax.
    Rows need at least one column.
    """
    scores = np.nan_to_num(np.asarray(scores, dtype=np.float64), nan=-np.inf)
    if scores.ndim != 2 or (scores.shape[0] and scores.shape[1] == 0):
        raise ValueError(f"need a [criteria, chunks] matrix with chunks, got {scores.shape}")
    rankings = [np.argsort(-row, kind="stable") for row in scores]
    if not distinct:
        return [(int(ranking[0]), False) for ranking in rankings]
    best = [row[ranking[0]] for row, ranking in zip(scores, rankings, strict=True)]
    order = sorted(range(len(rankings)), key=lambda i: (-best[i], i))
    used: set[int] = set()
    out: list[tuple[int, bool]] = [(0, False)] * len(rankings)
    for i in order:
        pick = next((int(j) for j in rankings[i] if int(j) not in used), None)
        if pick is None:
            out[i] = (int(rankings[i][0]), True)
        else:
            used.add(pick)
            out[i] = (pick, False)
    return out


# --------------------------------------------------------------------------------------------
# The estimator


class GraphSelector:
    """The GS model as an estimator: ``fit`` on criteria with gold chunks, then ``score``.

    ``embeddings`` is the frozen text encoder (default: the bundled MiniLM, loaded on first
    use). The remaining arguments are the architecture (:class:`GSArchitecture`; ``dim`` comes
    from the encoder) and the InfoNCE training settings. ``random_state`` seeds torch and numpy
    for the initialisation, dropout and batch order, so a fit is reproducible on CPU.
    """

    # Fitted state, set by ``selector_training.fit_selector`` or by :meth:`load` (scikit-learn's
    # trailing underscore): the module, the fit's report (None after a load), the SHA-256 of
    # the training examples, the report's metrics and the caller's info.
    model_: GraphSelectionModel
    report_: Any
    training_data_sha256_: str
    metrics_: dict[str, Any]
    info_: dict[str, Any]

    def __init__(
        self,
        embeddings: Embeddings | None = None,
        *,
        heads: int = 4,
        layers: int = 2,
        mlp_hidden: int = 384,
        dropout: float = 0.1,
        directed: bool = True,
        temperature: float = 0.05,
        epochs: int = 10,
        batch_size: int = 64,
        learning_rate: float = 2e-3,
        weight_decay: float = 1e-3,
        random_state: int = 13,
        progress: bool = False,
    ) -> None:
        self.embeddings = embeddings
        self.heads = heads
        self.layers = layers
        self.mlp_hidden = mlp_hidden
        self.dropout = dropout
        self.directed = directed
        self.temperature = temperature
        self.epochs = epochs
        self.batch_size = batch_size
        self.learning_rate = learning_rate
        self.weight_decay = weight_decay
        self.random_state = random_state
        self.progress = progress
        self._encoder: TextEncoder | None = None

    # --- pieces ---------------------------------------------------------------------------

    @property
    def encoder(self) -> TextEncoder:
        """The memoised frozen text encoder (created on first use)."""
        if self._encoder is None:
            if self.embeddings is None:
                from dynakrag.retrieval.embeddings import default_embeddings

                self.embeddings = default_embeddings()
            self._encoder = TextEncoder(self.embeddings)
        return self._encoder

    def architecture(self, dim: int) -> GSArchitecture:
        return GSArchitecture(
            dim=dim,
            heads=self.heads,
            layers=self.layers,
            mlp_hidden=self.mlp_hidden,
            dropout=self.dropout,
            directed=self.directed,
        )

    def _model(self) -> GraphSelectionModel:
        model = getattr(self, "model_", None)
        if model is None:
            raise ConfigurationError(
                "this GraphSelector is not fitted: fit it with "
                "dynakrag.dsrag.selector_training.fit_selector, or load() a saved one"
            )
        return model

    # --- scoring --------------------------------------------------------------------------

    def score(
        self, criteria_graphs: Sequence[CriterionGraph], chunk_texts: Sequence[str]
    ) -> np.ndarray:
        """Cosine similarity ``[n_criteria, n_chunks]`` (float32) of each criterion's graph
        embedding with each projected chunk embedding. Raises ``ValueError`` for a malformed
        graph."""
        model = self._model()
        graphs, texts = list(criteria_graphs), list(chunk_texts)
        if not graphs or not texts:
            return np.zeros((len(graphs), len(texts)), dtype=np.float32)
        for graph in graphs:
            check_graph(graph)
        node_texts = list(dict.fromkeys(t for g in graphs for t in g.node_texts))
        row = {t: i for i, t in enumerate(node_texts)}
        table = self._embed(node_texts + texts, model.architecture.dim)
        x, edge_index, anchors = graph_batch(
            graphs, [[row[t] for t in g.node_texts] for g in graphs], table
        )
        model.eval()
        with torch.no_grad():
            sims = model(x, edge_index, anchors, table[len(node_texts) :])
        return sims.numpy().astype(np.float32)

    def text_similarity(self, query: str, texts: Sequence[str]) -> np.ndarray:
        """Plain cosine of the frozen text embeddings of ``query`` and ``texts`` (no graph,
        no projection): DICS's fallback when a question yields no criteria."""
        texts = list(texts)
        if not texts:
            return np.zeros(0, dtype=np.float32)
        vectors = self.encoder.encode([query, *texts])
        return (vectors[1:] @ vectors[0]).astype(np.float32)

    def select(
        self,
        criteria_graphs: Sequence[CriterionGraph],
        chunk_texts: Sequence[str],
        *,
        distinct: bool = True,
    ) -> list[int]:
        """The chunk index chosen for each criterion (:func:`assign_chunks`); ``[]`` when
        there are no chunks."""
        if not chunk_texts:
            return []
        return [
            j for j, _ in assign_chunks(self.score(criteria_graphs, chunk_texts), distinct=distinct)
        ]

    def _embed(self, texts: Sequence[str], dim: int) -> torch.Tensor:
        vectors = self.encoder.encode(texts)
        if vectors.shape[1] != dim:
            raise ConfigurationError(
                f"the text encoder {self.encoder.name} gives {vectors.shape[1]}-d vectors; "
                f"this selector was built for {dim}-d"
            )
        return torch.from_numpy(np.ascontiguousarray(vectors))

    # --- size -----------------------------------------------------------------------------

    def n_parameters(self) -> int:
        """Trainable parameters (graph encoder + projection; the frozen text encoder is not
        counted), the GS model's size as in the paper's Table 9."""
        return self._model().count_parameters()["trainable"]

    def parameter_counts(self, *, include_text_encoder: bool = False) -> dict[str, int | None]:
        """``graph_encoder``, ``projection``, ``trainable`` and, when asked, ``text_encoder``
        (the frozen encoder's parameters; None when it is not a torch model)."""
        counts: dict[str, int | None] = dict(self._model().count_parameters())
        if include_text_encoder:
            counts["text_encoder"] = _text_encoder_parameters(self.encoder.embeddings)
        return counts

    # --- files ----------------------------------------------------------------------------

    def metadata(self) -> dict[str, Any]:
        """The JSON metadata written beside the weights (without ``weights_sha256``)."""
        model = self._model()
        return {
            "format": FILE_FORMAT,
            "schema_version": SCHEMA_VERSION,
            "architecture": asdict(model.architecture),
            "readout": "anchor",
            "encoder": {"name": self.encoder.name, "dimension": model.architecture.dim},
            "temperature": float(self.temperature),
            "training": {
                "epochs": self.epochs,
                "batch_size": self.batch_size,
                "learning_rate": self.learning_rate,
                "weight_decay": self.weight_decay,
                "random_state": self.random_state,
            },
            "training_data_sha256": getattr(self, "training_data_sha256_", ""),
            "metrics": json_safe(getattr(self, "metrics_", {})),
            "info": json_safe(getattr(self, "info_", {})),
            "n_parameters": model.count_parameters(),
        }

    def save(self, path: str | os.PathLike[str]) -> Path:
        """Write ``<name>.npz`` (weights) and ``<name>.json`` (metadata with the weights'
        SHA-256); ``path`` must end in ``.npz``. Returns the ``.npz`` path."""
        weights = Path(path)
        if weights.suffix != ".npz":
            raise ValueError(f"a selector file must end in .npz, got {weights.name!r}")
        model = self._model()
        arrays = {
            name: tensor.detach().cpu().numpy().astype(np.float32)
            for name, tensor in model.state_dict().items()
        }
        write_arrays(weights, arrays, {"format": _WEIGHTS_FORMAT, "schema": SCHEMA_VERSION})
        meta = {
            **self.metadata(),
            "weights_file": weights.name,
            "weights_sha256": sha256_file(weights),
        }
        write_json(weights.with_suffix(".json"), meta, sort_keys=True, allow_nan=False)
        return weights

    @classmethod
    def load(
        cls, path: str | os.PathLike[str], embeddings: Embeddings | None = None
    ) -> GraphSelector:
        """Read a selector written by :meth:`save` (``path``: its ``.npz`` or ``.json``).

        Raises :class:`SelectorFileError` for anything that is not a valid selector file
        (wrong format or schema, hash mismatch, a pickle, garbage, missing or misshapen arrays)
        and :class:`ConfigurationError` when ``embeddings`` is not the encoder it was trained
        with. ``embeddings`` defaults to the bundled MiniLM.
        """
        given = Path(path)
        weights = given.with_suffix(".npz") if given.suffix == ".json" else given
        meta_path = weights.with_suffix(".json")
        meta = _read_metadata(given, meta_path)

        def refuse(reason: str) -> SelectorFileError:
            return SelectorFileError(given, reason)

        try:
            architecture = GSArchitecture(**_architecture_fields(meta.get("architecture")))
        except (TypeError, ValueError) as exc:
            raise refuse(f"bad architecture in its metadata ({exc})") from None
        encoder = meta.get("encoder")
        if not isinstance(encoder, dict) or not isinstance(encoder.get("name"), str):
            raise refuse("its metadata does not name the text encoder")
        temperature = meta.get("temperature")
        if not _positive_number(temperature):
            raise refuse("temperature must be a positive number")
        digest = meta.get("training_data_sha256")
        if not isinstance(digest, str) or not (digest == "" or _SHA256.fullmatch(digest)):
            raise refuse("training_data_sha256 is not a SHA-256 hex digest")
        _check_weights_hash(given, weights, meta)
        try:
            arrays, weights_meta = read_arrays(weights)
        except ModelFileError as exc:
            raise refuse(f"its weights {weights.name}: {exc.reason}") from None
        if weights_meta.get("format") != _WEIGHTS_FORMAT:
            raise refuse(f"{weights.name} does not hold selector weights")
        torch.manual_seed(0)  # the module's random init is overwritten below
        model = GraphSelectionModel(architecture)
        model.load_state_dict(_state_dict(given, model, arrays))
        model.eval()

        selector = cls(embeddings, temperature=float(temperature), **_hyper(architecture))
        recorded, actual = encoder["name"], selector.encoder.name
        if recorded != actual:
            raise ConfigurationError(
                f"{given} was trained with text encoder {recorded!r}, but {actual!r} was given"
            )
        training = meta.get("training")
        if isinstance(training, dict):
            for key in ("epochs", "batch_size", "random_state"):
                if isinstance(training.get(key), int) and not isinstance(training[key], bool):
                    setattr(selector, key, training[key])
            for key in ("learning_rate", "weight_decay"):
                if _positive_number(training.get(key)) or training.get(key) == 0:
                    setattr(selector, key, float(training[key]))
        selector.model_ = model
        selector.report_ = None
        selector.training_data_sha256_ = digest
        metrics, info = meta.get("metrics"), meta.get("info")
        selector.metrics_ = metrics if isinstance(metrics, dict) else {}
        selector.info_ = info if isinstance(info, dict) else {}
        return selector


def _hyper(architecture: GSArchitecture) -> dict[str, Any]:
    fields = asdict(architecture)
    fields.pop("dim")
    return fields


def _architecture_fields(value: Any) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise TypeError("architecture is not an object")
    names = {"dim", "heads", "layers", "mlp_hidden", "dropout", "directed"}
    if set(value) != names:
        raise TypeError(f"architecture keys must be {sorted(names)}")
    return dict(value)


def _positive_number(value: Any) -> bool:
    return (
        isinstance(value, int | float)
        and not isinstance(value, bool)
        and math.isfinite(value)
        and value > 0
    )


def _read_metadata(given: Path, meta_path: Path) -> dict[str, Any]:
    try:
        meta = read_json(meta_path, max_bytes=MAX_METADATA_BYTES)
    except OSError as exc:
        raise SelectorFileError(
            given, f"cannot read its metadata {meta_path.name} ({exc.strerror or exc})"
        ) from None
    except ValueError as exc:
        raise SelectorFileError(
            given, f"its metadata {meta_path.name} is not JSON ({exc})"
        ) from None
    if not isinstance(meta, dict):
        raise SelectorFileError(given, "its metadata is not a JSON object")
    if meta.get("format") != FILE_FORMAT:
        raise SelectorFileError(
            given, f"its metadata format is {meta.get('format')!r}, not {FILE_FORMAT!r}"
        )
    if meta.get("schema_version") != SCHEMA_VERSION:
        raise SelectorFileError(
            given,
            f"schema version {meta.get('schema_version')!r}; this dynakrag reads version "
            f"{SCHEMA_VERSION} (retrain the selector)",
        )
    return meta


def _check_weights_hash(given: Path, weights: Path, meta: Mapping[str, Any]) -> None:
    """Compare the ``.npz``'s SHA-256 with the metadata's before the weights are opened."""
    expected = meta.get("weights_sha256")
    if not isinstance(expected, str) or not _SHA256.fullmatch(expected):
        raise SelectorFileError(given, "its metadata has no valid weights_sha256")
    try:
        digest = sha256_file(weights)
    except OSError as exc:
        raise SelectorFileError(
            given, f"cannot read its weights {weights.name} ({exc.strerror or exc})"
        ) from None
    if digest != expected:
        raise SelectorFileError(
            given,
            f"the SHA-256 of {weights.name} is {digest}, its metadata says "
            f"{expected} (the weights were altered or belong to another model)",
        )


def _state_dict(
    given: Path, model: GraphSelectionModel, arrays: Mapping[str, np.ndarray]
) -> dict[str, torch.Tensor]:
    """The stored arrays as a state dict, refusing missing, extra, misshapen or non-finite
    ones."""
    expected = model.state_dict()
    if set(arrays) != set(expected):
        odd = sorted(set(arrays) ^ set(expected))
        raise SelectorFileError(given, f"unexpected or missing arrays: {', '.join(odd)}")
    out: dict[str, torch.Tensor] = {}
    for name, reference in expected.items():
        array = arrays[name]
        if tuple(array.shape) != tuple(reference.shape):
            raise SelectorFileError(
                given, f"array {name} has shape {array.shape}, expected {tuple(reference.shape)}"
            )
        if not np.all(np.isfinite(array)):
            raise SelectorFileError(given, f"array {name} holds non-finite numbers")
        out[name] = torch.from_numpy(np.ascontiguousarray(array, dtype=np.float32))
    return out


def _text_encoder_parameters(embeddings: Embeddings) -> int | None:
    from dynakrag.retrieval.embeddings import MiniLMEmbeddings, _load_minilm

    model = _load_minilm(embeddings.device) if isinstance(embeddings, MiniLMEmbeddings) else None
    if model is None:
        model = getattr(embeddings, "model", None)
    if not isinstance(model, nn.Module):
        return None
    return sum(p.numel() for p in model.parameters())


# --------------------------------------------------------------------------------------------
# The shipped model

_LOADED_LOCK = threading.Lock()
_LOADED: dict[tuple[Path, int], GraphSelector] = {}  # by (resolved path, mtime in ns)


def load_default_selector(path: str | os.PathLike[str] | None = None) -> GraphSelector:
    """The GS model at ``path`` (default the shipped ``dynakrag/dsrag/models/gs-selector.npz``)
    with the bundled MiniLM, loaded once per process and file version (a retrained file is
    reloaded). Raises :class:`ModelUnavailableError` when it is not installed and
    :class:`SelectorFileError` when it is damaged."""
    target = Path(path) if path is not None else DEFAULT_MODEL_PATH
    with _LOADED_LOCK:
        if not target.is_file():
            raise ModelUnavailableError(
                f"no trained GS selector at {target}: train one with 'dynakrag train-selector "
                f"--out {target}'"
            )
        key = (target.resolve(), target.stat().st_mtime_ns)
        if key not in _LOADED:
            _LOADED[key] = GraphSelector.load(target)
        return _LOADED[key]

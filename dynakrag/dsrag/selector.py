"""DS-RAG's graph-based selection (GS, paper, Section 2.3.2): the selector as an estimator.

:class:`GraphSelector` holds the hyper-parameters in ``__init__`` and gives ``score``,
``select``, ``save`` and ``load``; :func:`load_default_selector` loads the shipped model once
per process. Its pieces:

* :mod:`~dynakrag.dsrag.text_encoder`: the frozen text encoder of node texts and chunks;
* :mod:`~dynakrag.dsrag.selector_model`: the torch module (GAT criterion encoder, anchor
  readout, residual chunk projection);
* :mod:`~dynakrag.dsrag.selector_graphs`: criterion graphs checked and batched as its input;
* :mod:`~dynakrag.dsrag.selector_files`: the ``.npz`` weights and ``.json`` metadata, checked
  before anything is loaded.

It is fitted by :func:`dynakrag.dsrag.selector_training.fit_selector` (InfoNCE); the model does
not import its trainer.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np
import torch
from langchain_core.embeddings import Embeddings

from dynakrag.dsrag.selector_files import (
    FILE_FORMAT,
    SCHEMA_VERSION,
    read_selector,
    write_selector_metadata,
    write_selector_weights,
)
from dynakrag.dsrag.selector_graphs import check_graph, graph_batch
from dynakrag.dsrag.selector_model import GraphSelectionModel, GSArchitecture
from dynakrag.dsrag.text_encoder import TextEncoder, text_encoder_parameters
from dynakrag.dsrag.types import CriterionGraph
from dynakrag.errors import ConfigurationError, ModelUnavailableError
from dynakrag.files import json_safe

__all__ = [
    "DEFAULT_MODEL_PATH",
    "GraphSelector",
    "assign_chunks",
    "load_default_selector",
]

DEFAULT_MODEL_PATH = Path(__file__).resolve().parent / "models" / "gs-selector.npz"
"""Where the shipped model lives (package data); its metadata is ``gs-selector.json``."""


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
    use). The remaining arguments are the architecture
    (:class:`~dynakrag.dsrag.selector_model.GSArchitecture`; ``dim`` comes from the encoder)
    and the InfoNCE training settings. ``random_state`` seeds torch and numpy for the
    initialisation, dropout and batch order, so a fit is reproducible on CPU.
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
            counts["text_encoder"] = text_encoder_parameters(self.encoder.embeddings)
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
        write_selector_weights(weights, self._model())
        write_selector_metadata(weights, self.metadata())
        return weights

    @classmethod
    def load(
        cls, path: str | os.PathLike[str], embeddings: Embeddings | None = None
    ) -> GraphSelector:
        """Read a selector written by :meth:`save` (``path``: its ``.npz`` or ``.json``).

        Raises :class:`~dynakrag.dsrag.selector_files.SelectorFileError` for anything that is
        not a valid selector file (wrong format or schema, hash mismatch, a pickle, garbage,
        missing or misshapen arrays) and :class:`ConfigurationError` when ``embeddings`` is not
        the encoder it was trained with. ``embeddings`` defaults to the bundled MiniLM.
        """
        stored = read_selector(path)
        selector = cls(
            embeddings, temperature=stored.temperature, **_hyper(stored.model.architecture)
        )
        recorded, actual = stored.encoder_name, selector.encoder.name
        if recorded != actual:
            raise ConfigurationError(
                f"{Path(path)} was trained with text encoder {recorded!r}, but {actual!r} was given"
            )
        for key, value in stored.training.items():
            setattr(selector, key, value)
        selector.model_ = stored.model
        selector.report_ = None
        selector.training_data_sha256_ = stored.training_data_sha256
        selector.metrics_ = stored.metrics
        selector.info_ = stored.info
        return selector


def _hyper(architecture: GSArchitecture) -> dict[str, Any]:
    fields = asdict(architecture)
    fields.pop("dim")
    return fields


# --------------------------------------------------------------------------------------------
# The shipped model

_LOADED_LOCK = threading.Lock()
_LOADED: dict[tuple[Path, int], GraphSelector] = {}  # by (resolved path, mtime in ns)


def load_default_selector(path: str | os.PathLike[str] | None = None) -> GraphSelector:
    """The GS model at ``path`` (default the shipped ``dynakrag/dsrag/models/gs-selector.npz``)
    with the bundled MiniLM, loaded once per process and file version (a retrained file is
    reloaded). Raises :class:`ModelUnavailableError` when it is not installed and
    :class:`~dynakrag.dsrag.selector_files.SelectorFileError` when it is damaged."""
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

"""Training the GS selector: data from DS-RAG's TRAIN rows and an InfoNCE fit (Section 3.3.1).

Data (:func:`build_selection_examples`)
    For each training question, ``criteria_fn`` gives its selection criteria. A criterion's
    positive is its gold chunk: the ``gt_doc`` sentence that names the criterion's anchor
    (matched by name tokens, e.g. anchor "Neil Armstrong" <-> "Armstrong was born on ...": the
    sentence sharing the most tokens with the anchor, when that best is unique), and every
    chunk of that sentence's gold group holds it. A criterion without such a sentence is
    skipped (counted in :class:`BuildStats`). Its candidate set is the question's gold chunks
    (the other criteria's gold chunks are the hard negatives) plus the top ``k_retrieved``
    chunks BM25 retrieves from the DS-RAG corpus for the criterion's text. Chunks are compared
    by text, so a copy of the gold sentence in another chunk of its group is a positive too.
    Only ``split="train"`` rows are read; the ``*_test.json`` eval rows never are.

Held-out split (:func:`split_holdout`)
    By anchor (person): DS-RAG's eval questions are about people no train question mentions, so
    the validation criteria are about people the fit never saw as anchors.

Fit (:func:`fit_selector`, scikit-learn style: it returns the fitted selector)
    The text encoder is frozen; each distinct text (node texts and chunks) is embedded once.
    Batches of ``batch_size`` criteria are scored against the union of their candidate sets,
    so every criterion also meets the other criteria's candidates (in-batch negatives). The
    loss is InfoNCE with several positives allowed: ``-log(sum_pos e^{s/t} / sum_all e^{s/t})``
    with ``s`` the cosine and ``t`` the temperature. Adam, CPU, seeded (torch's RNG is forked,
    so the caller's global seed state is untouched). Validation accuracy is top-1: the chunk
    with the highest score among the criterion's own candidates is a positive. The default
    L2 penalty (``weight_decay=1e-3``) matters: the 41 training people give few distinct
    texts, and without it the model memorises them (all 6,000 train questions, metadata
    criteria: held-out 89.7% without, 100% with; plain cosine 79.1%).
"""

from __future__ import annotations

import math
import re
import sys
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from dynakrag.dsrag.selector import GraphSelector
from dynakrag.dsrag.selector_graphs import check_graph, graph_batch
from dynakrag.dsrag.selector_model import GraphSelectionModel
from dynakrag.dsrag.types import Criterion, CriterionGraph, QEdge, QNode
from dynakrag.errors import ConfigurationError, UserInputError
from dynakrag.files import records_sha256

if TYPE_CHECKING:
    from langchain_core.embeddings import Embeddings

    from dynakrag.data.datasets import QAExample
    from dynakrag.retrieval.base import Searcher
    from dynakrag.retrieval.passage import Passage

__all__ = [
    "DSRAG_DATASETS",
    "BuildStats",
    "CriteriaFn",
    "SelectionExample",
    "SelectorFitReport",
    "build_selection_examples",
    "examples_sha256",
    "fit_model",
    "fit_selector",
    "info_nce",
    "load_training_questions",
    "match_gold_sentence",
    "metadata_criteria",
    "rule_criteria",
    "split_holdout",
    "train_selector",
]

CriteriaFn = Callable[["QAExample"], Sequence[Criterion]]
"""What gives a training question its selection criteria."""
DSRAG_DATASETS: tuple[str, ...] = ("dsrag-ranking", "dsrag-comparison")
_NAME_TOKEN = re.compile(r"[a-z0-9]{2,}")


@dataclass(frozen=True)
class SelectionExample:
    """One criterion with its gold chunk texts (``positives``) and the texts it is chosen
    from (``candidates``, holding at least one positive). ``group`` is the held-out unit."""

    graph: CriterionGraph
    positives: frozenset[str]
    candidates: tuple[str, ...]
    group: str = ""
    question_id: str = ""

    def __post_init__(self) -> None:
        check_graph(self.graph)
        if not any(text in self.positives for text in self.candidates):
            raise ValueError("the candidates must hold at least one positive")

    def record(self) -> dict[str, Any]:
        """A JSON form (for the training-data hash)."""
        return {
            "question_id": self.question_id,
            "group": self.group,
            "node_texts": list(self.graph.node_texts),
            "edges": [list(edge) for edge in self.graph.edges],
            "anchor": self.graph.anchor,
            "positives": sorted(self.positives),
            "candidates": list(self.candidates),
        }


def examples_sha256(examples: Iterable[SelectionExample]) -> str:
    """SHA-256 of the examples' canonical JSON lines, in order."""
    return records_sha256(example.record() for example in examples)


# --------------------------------------------------------------------------------------------
# Criteria


def metadata_criteria(example: QAExample) -> list[Criterion]:
    """One criterion per person of a DS-RAG row: core = the attribute, anchor = the person,
    one edge core -> person. It reads the row's ``combination`` (``meta["people"]``,
    ``meta["attribute"]``), so it is a training stand-in, not an inference path."""
    attribute = str(example.meta.get("attribute", "")).strip()
    people = [str(p).strip() for p in example.meta.get("people", ()) if str(p).strip()]
    if not attribute or not people:
        return []
    core = QNode(1, 0, attribute)
    out = []
    for i, person in enumerate(people, start=1):
        node = QNode(1, i, person)
        out.append(
            Criterion(
                core=core.key,
                anchor=node.key,
                triples=(QEdge(core.key, node.key, None),),
                nodes=(core, node),
            )
        )
    return out


def rule_criteria(hops: int | None = None) -> CriteriaFn:
    """The inference-time criteria: EPQD's rule-based decomposition
    (:func:`dynakrag.dsrag.epqd.rule_decompose`), the rule-based graph extractor and
    Algorithms 1-2 (:func:`dynakrag.dsrag.criteria.criteria_for_question`), ``hops`` from the
    core (None: no limit), including that module's fallbacks.

    Raises :class:`ConfigurationError` when those modules are not installed.
    """
    try:
        from dynakrag.dsrag.criteria import criteria_for_question
        from dynakrag.dsrag.epqd import rule_decompose
        from dynakrag.dsrag.question_graph import RuleGraphExtractor
    except ImportError as exc:
        raise ConfigurationError(
            f"the rule-based selection criteria are unavailable ({exc}); use the metadata "
            "criteria (--criteria metadata) to train on the DS-RAG rows' people and attribute"
        ) from None
    extractor = RuleGraphExtractor()

    def criteria(example: QAExample) -> list[Criterion]:
        sub_questions = rule_decompose(example.question).sub_questions
        found = criteria_for_question(example.question, sub_questions, extractor, hops)
        return list(found.criteria)

    criteria.__qualname__ = f"rule_criteria(hops={hops})"
    return criteria


def _name_tokens(text: str) -> set[str]:
    return set(_NAME_TOKEN.findall(text.lower()))


def match_gold_sentence(anchor: str, sentences: Sequence[str]) -> int | None:
    """The index of the sentence sharing the most name tokens with ``anchor`` (a shared last
    token counts 1.5); None when no sentence shares one or the best is tied (ambiguous)."""
    words = _NAME_TOKEN.findall(anchor.lower())
    if not words:
        return None
    wanted, surname = set(words), words[-1]
    # A shared surname counts half a token more: "Armstrong was born ..." names "Neil
    # Armstrong" rather than "Neil deGrasse Tyson".
    overlap = [
        len(wanted & tokens) + 0.5 * (surname in tokens)
        for tokens in (_name_tokens(s) for s in sentences)
    ]
    best = max(overlap, default=0.0)
    if best == 0 or overlap.count(best) > 1:
        return None
    return overlap.index(best)


# --------------------------------------------------------------------------------------------
# Data


def load_training_questions(
    limit: int | None = None, datasets: Sequence[str] = DSRAG_DATASETS
) -> list[QAExample]:
    """The TRAIN rows of each DS-RAG dataset (the first ``limit`` of each)."""
    from dynakrag.data.datasets import load_examples

    return [q for dataset in datasets for q in load_examples(dataset, "train", limit)]


@dataclass
class BuildStats:
    """What :func:`build_selection_examples` kept and skipped."""

    questions: int = 0
    criteria: int = 0
    examples: int = 0
    no_criteria: int = 0
    """Questions for which ``criteria_fn`` gave no criterion (or raised)."""
    unmatched: int = 0
    """Criteria whose anchor names no single gold sentence."""
    mean_candidates: float = 0.0

    def format(self) -> str:
        return (
            f"{self.questions} questions, {self.criteria} criteria -> {self.examples} "
            f"examples ({self.unmatched} criteria without a unique gold sentence, "
            f"{self.no_criteria} questions without criteria), "
            f"{self.mean_candidates:.1f} candidate chunks per criterion"
        )


def build_selection_examples(
    questions: Sequence[QAExample],
    criteria_fn: CriteriaFn,
    *,
    corpus: Sequence[Passage] | None = None,
    searcher: Searcher | None = None,
    k_retrieved: int = 5,
    progress: bool = False,
) -> tuple[list[SelectionExample], BuildStats]:
    """Selection examples from DS-RAG questions (see the module doc).

    ``corpus`` defaults to :func:`~dynakrag.data.datasets.dsrag_corpus`; ``searcher`` to a
    BM25 index over it. Questions must carry ``meta["gt_doc"]`` and ``meta["gold_groups"]``.
    """
    from dynakrag.progress import progress_bar

    if corpus is None:
        from dynakrag.data.datasets import dsrag_corpus

        corpus = dsrag_corpus()
    text_of = {p.id: p.text for p in corpus}
    if searcher is None and k_retrieved > 0:
        from dynakrag.retrieval.lexical import BM25Index

        searcher = BM25Index.build(corpus)
    stats = BuildStats()
    out: list[SelectionExample] = []
    for question in progress_bar(
        questions, desc="building examples", unit="q", file=sys.stderr, disable=not progress
    ):
        stats.questions += 1
        sentences = list(question.meta.get("gt_doc", ()))
        groups = [[text_of[c] for c in group if c in text_of] for group in question.gold_sets]
        try:
            criteria = list(criteria_fn(question))
        except Exception:  # a criteria function that fails on one question skips it
            criteria = []
        if not criteria:
            stats.no_criteria += 1
            continue
        gold_texts = [t for group in groups for t in group]
        for criterion in criteria:
            stats.criteria += 1
            try:
                graph = criterion.as_graph()
                check_graph(graph)
            except (KeyError, ValueError):
                stats.unmatched += 1
                continue
            j = match_gold_sentence(graph.node_texts[graph.anchor], sentences)
            if j is None or j >= len(groups) or not groups[j]:
                stats.unmatched += 1
                continue
            retrieved = (
                [p.text for p, _ in searcher.search(criterion.text, k_retrieved)]
                if searcher is not None and k_retrieved > 0
                else []
            )
            # Sorted: the order of a candidate set carries no gold signal (argmax ties).
            candidates = tuple(sorted(set(gold_texts) | set(retrieved)))
            out.append(
                SelectionExample(
                    graph=graph,
                    positives=frozenset(groups[j]),
                    candidates=candidates,
                    group=" ".join(graph.node_texts[graph.anchor].lower().split()),
                    question_id=question.id,
                )
            )
    stats.examples = len(out)
    stats.mean_candidates = float(np.mean([len(e.candidates) for e in out])) if out else 0.0
    return out, stats


def split_holdout(
    examples: Sequence[SelectionExample], holdout: float = 0.2, seed: int = 13
) -> tuple[list[SelectionExample], list[SelectionExample]]:
    """``(train, validation)``: a seeded ``holdout`` share of the groups (anchors) goes to
    validation (at least one group when ``holdout > 0`` and there are two or more)."""
    if not 0.0 <= holdout < 1.0:
        raise UserInputError(f"holdout must be in [0, 1), got {holdout}")
    groups = sorted({e.group for e in examples})
    if holdout == 0.0 or len(groups) < 2:
        return list(examples), []
    n_val = min(len(groups) - 1, max(1, round(holdout * len(groups))))
    order = np.random.default_rng(seed).permutation(len(groups))
    held = {groups[i] for i in order[:n_val]}
    return [e for e in examples if e.group not in held], [e for e in examples if e.group in held]


# --------------------------------------------------------------------------------------------
# Fitting


def info_nce(sims: torch.Tensor, positive: torch.Tensor, temperature: float) -> torch.Tensor:
    """Mean InfoNCE loss of ``sims`` ``[B, U]`` (cosines) with a boolean ``positive`` mask
    (each row at least one): ``logsumexp(all) - logsumexp(positives)`` over ``sims / t``."""
    logits = sims / temperature
    positives = logits.masked_fill(~positive, float("-inf")).logsumexp(dim=1)
    return (logits.logsumexp(dim=1) - positives).mean()


@dataclass
class SelectorFitReport:
    """What a selector fit did and how well the model picks gold chunks."""

    n_train: int
    n_validation: int
    n_train_groups: int
    n_validation_groups: int
    n_texts: int
    epochs: int
    validation_accuracy: float | None
    validation_accuracy_untrained: float | None
    train_accuracy: float | None
    n_parameters: int
    embed_seconds: float
    train_seconds: float
    history: list[dict[str, float | None]] = field(default_factory=list)

    def metrics(self) -> dict[str, Any]:
        return asdict(self)

    def format(self) -> str:
        def pct(value: float | None) -> str:
            return "n/a" if value is None else f"{100 * value:.1f}%"

        lines = [
            f"train: {self.n_train} criteria ({self.n_train_groups} anchors); held out: "
            f"{self.n_validation} criteria ({self.n_validation_groups} anchors, unseen)",
            f"held-out top-1 accuracy: {pct(self.validation_accuracy)} (untrained = plain "
            f"cosine: {pct(self.validation_accuracy_untrained)}); train: "
            f"{pct(self.train_accuracy)}",
            f"trainable parameters: {self.n_parameters:,}",
            f"time: embedding {self.embed_seconds:.1f}s ({self.n_texts} texts), training "
            f"{self.train_seconds:.1f}s ({self.epochs} epochs)",
        ]
        return "\n".join(lines)


@dataclass(frozen=True)
class _Indexed:
    graph: CriterionGraph
    node_rows: tuple[int, ...]
    candidates: np.ndarray
    positive_rows: frozenset[int]


def _index(examples: Sequence[SelectionExample], row: dict[str, int]) -> list[_Indexed]:
    return [
        _Indexed(
            graph=e.graph,
            node_rows=tuple(row[t] for t in e.graph.node_texts),
            candidates=np.array([row[t] for t in e.candidates], dtype=np.int64),
            positive_rows=frozenset(row[t] for t in e.candidates if t in e.positives),
        )
        for e in examples
    ]


def _forward(
    model: GraphSelectionModel, batch: Sequence[_Indexed], table: torch.Tensor
) -> tuple[torch.Tensor, np.ndarray]:
    """Cosines of the batch's criteria with the union of their candidates, and that union."""
    pool = np.unique(np.concatenate([item.candidates for item in batch]))
    x, edge_index, anchors = graph_batch(
        [item.graph for item in batch], [item.node_rows for item in batch], table
    )
    return model(x, edge_index, anchors, table[torch.from_numpy(pool)]), pool


def _accuracy(
    model: GraphSelectionModel, data: Sequence[_Indexed], table: torch.Tensor, batch: int = 256
) -> float | None:
    """Share of criteria whose best-scored own candidate is a positive."""
    if not data:
        return None
    model.eval()
    hits = 0
    with torch.no_grad():
        for start in range(0, len(data), batch):
            chunk = data[start : start + batch]
            sims, pool = _forward(model, chunk, table)
            column = {int(r): c for c, r in enumerate(pool)}
            for i, item in enumerate(chunk):
                columns = [column[int(r)] for r in item.candidates]
                best = int(item.candidates[int(torch.argmax(sims[i, columns]))])
                hits += best in item.positive_rows
    return hits / len(data)


def fit_model(
    selector: GraphSelector,
    train: Sequence[SelectionExample],
    validation: Sequence[SelectionExample] = (),
) -> tuple[GraphSelectionModel, SelectorFitReport]:
    """Fit a :class:`GraphSelectionModel` with ``selector``'s hyper-parameters and encoder."""
    from dynakrag.progress import progress_bar

    if not train:
        raise UserInputError("no training examples for the selector")
    if not (math.isfinite(selector.temperature) and selector.temperature > 0):
        raise UserInputError(f"temperature must be > 0, got {selector.temperature}")
    if selector.epochs < 1 or selector.batch_size < 1:
        raise UserInputError("epochs and batch_size must be >= 1")
    every = [*train, *validation]
    texts = list(
        dict.fromkeys(
            [t for e in every for t in e.graph.node_texts]
            + [t for e in every for t in e.candidates]
        )
    )
    started = time.perf_counter()
    encoder, step = selector.encoder, 256
    blocks = []
    for start in progress_bar(
        range(0, len(texts), step),
        desc="embedding texts",
        unit="block",
        file=sys.stderr,
        disable=not selector.progress,
    ):
        blocks.append(encoder.encode(texts[start : start + step]))
    table = torch.from_numpy(np.ascontiguousarray(np.concatenate(blocks), dtype=np.float32))
    embed_seconds = time.perf_counter() - started
    row = {t: i for i, t in enumerate(texts)}
    train_items, val_items = _index(train, row), _index(validation, row)

    started = time.perf_counter()
    history: list[dict[str, float | None]] = []
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(selector.random_state)
        rng = np.random.default_rng(selector.random_state)
        model = GraphSelectionModel(selector.architecture(int(table.shape[1])))
        untrained = _accuracy(model, val_items, table)
        optimizer = torch.optim.Adam(
            model.parameters(), lr=selector.learning_rate, weight_decay=selector.weight_decay
        )
        n_batches = math.ceil(len(train_items) / selector.batch_size)
        with progress_bar(
            total=selector.epochs * n_batches,
            desc="training GS selector",
            unit="batch",
            file=sys.stderr,
            disable=not selector.progress,
        ) as bar:
            for epoch in range(1, selector.epochs + 1):
                model.train()
                order = rng.permutation(len(train_items))
                losses = []
                for start in range(0, len(order), selector.batch_size):
                    batch = [train_items[i] for i in order[start : start + selector.batch_size]]
                    sims, pool = _forward(model, batch, table)
                    positive = torch.tensor(
                        np.array([[int(r) in item.positive_rows for r in pool] for item in batch])
                    )
                    loss = info_nce(sims, positive, selector.temperature)
                    optimizer.zero_grad()
                    loss.backward()
                    optimizer.step()
                    losses.append(loss.item())
                    bar.update(1)
                val_accuracy = _accuracy(model, val_items, table)
                history.append(
                    {"epoch": epoch, "loss": float(np.mean(losses)), "val_accuracy": val_accuracy}
                )
                bar.set_postfix(
                    loss=f"{history[-1]['loss']:.3f}",
                    val="-" if val_accuracy is None else f"{val_accuracy:.3f}",
                )
        train_accuracy = _accuracy(model, train_items, table)
    model.eval()
    report = SelectorFitReport(
        n_train=len(train),
        n_validation=len(validation),
        n_train_groups=len({e.group for e in train}),
        n_validation_groups=len({e.group for e in validation}),
        n_texts=len(texts),
        epochs=selector.epochs,
        validation_accuracy=history[-1]["val_accuracy"] if history else None,
        validation_accuracy_untrained=untrained,
        train_accuracy=train_accuracy,
        n_parameters=model.count_parameters()["trainable"],
        embed_seconds=embed_seconds,
        train_seconds=time.perf_counter() - started,
        history=history,
    )
    return model, report


def fit_selector(
    selector: GraphSelector,
    train: Sequence[SelectionExample],
    validation: Sequence[SelectionExample] = (),
    *,
    info: Mapping[str, Any] | None = None,
) -> GraphSelector:
    """Train ``selector``'s graph encoder and projection with InfoNCE (:func:`fit_model`) and
    return it, fitted: its ``model_``, ``report_``, ``training_data_sha256_`` (of ``train``
    then ``validation``), ``metrics_`` and ``info_`` (stored in the metadata: data sources,
    criteria function) are set."""
    model, report = fit_model(selector, train, validation)
    selector.model_ = model
    selector.report_ = report
    selector.training_data_sha256_ = examples_sha256([*train, *validation])
    selector.metrics_ = report.metrics()
    selector.info_ = dict(info or {})
    return selector


# --------------------------------------------------------------------------------------------
# End to end


def train_selector(
    *,
    limit: int | None = None,
    criteria_fn: CriteriaFn | None = None,
    embeddings: Embeddings | None = None,
    holdout: float = 0.2,
    k_retrieved: int = 5,
    progress: bool = False,
    **selector_params: Any,
) -> tuple[GraphSelector, SelectorFitReport, BuildStats]:
    """Build examples from the DS-RAG TRAIN rows (first ``limit`` of each dataset), hold out a
    share of the anchors and fit a :class:`GraphSelector` (``selector_params``: its
    hyper-parameters). ``criteria_fn`` defaults to :func:`rule_criteria`."""
    criteria_fn = criteria_fn if criteria_fn is not None else rule_criteria()
    questions = load_training_questions(limit)
    if not questions:
        raise UserInputError("no DS-RAG training questions were found")
    examples, stats = build_selection_examples(
        questions, criteria_fn, k_retrieved=k_retrieved, progress=progress
    )
    if not examples:
        raise UserInputError(f"no usable selection examples: {stats.format()}")
    seed = int(selector_params.get("random_state", 13))
    train, validation = split_holdout(examples, holdout, seed)
    selector = GraphSelector(embeddings, progress=progress, **selector_params)
    info = {
        "datasets": list(DSRAG_DATASETS),
        "split": "train",
        "limit": limit,
        "questions": len(questions),
        "criteria_fn": getattr(criteria_fn, "__qualname__", type(criteria_fn).__name__),
        "k_retrieved": k_retrieved,
        "retriever": "bm25",
        "holdout": holdout,
        "build": asdict(stats),
    }
    fit_selector(selector, train, validation, info=info)
    assert selector.report_ is not None
    return selector, selector.report_, stats

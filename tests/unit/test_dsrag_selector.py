"""The GS selector: model shapes, determinism, files (and refusals), training, examples."""

from __future__ import annotations

import hashlib
import json
import pickle
from pathlib import Path

import numpy as np
import pytest
import torch

from dynakrag.data.datasets import QAExample
from dynakrag.dsrag.selector import GraphSelector, assign_chunks, load_default_selector
from dynakrag.dsrag.selector_files import SelectorFileError
from dynakrag.dsrag.selector_model import GraphSelectionModel, GSArchitecture
from dynakrag.dsrag.selector_training import (
    SelectionExample,
    build_selection_examples,
    fit_selector,
    info_nce,
    match_gold_sentence,
    metadata_criteria,
    split_holdout,
)
from dynakrag.dsrag.text_encoder import TextEncoder
from dynakrag.dsrag.types import Criterion, CriterionGraph, QEdge, QNode
from dynakrag.errors import ConfigurationError, ModelUnavailableError
from dynakrag.retrieval.passage import Passage
from tests.fakes import HashedWords

DIM = 64


PEOPLE = [
    f"{first} {last}"
    for first, last in zip(
        ["Ava", "Ben", "Cy", "Dee", "Eli", "Fay", "Gus", "Hal", "Ivy", "Jo", "Kai", "Lu"],
        [
            "Stone",
            "Marsh",
            "Vale",
            "Brook",
            "Frost",
            "Lake",
            "Moor",
            "Reed",
            "Wood",
            "Field",
            "Glen",
            "Hart",
        ],
        strict=True,
    )
]
ATTRIBUTES = {"born date": "was born on {}", "nationality": "has nationality {}"}
VALUES = ["alpha", "beta", "gamma", "delta", "omega", "sigma", "kappa", "theta"]


def criterion(core: str, anchor: str, extra: str | None = None) -> Criterion:
    core_node, anchor_node = QNode(1, 0, core), QNode(1, 1, anchor)
    nodes = [core_node, anchor_node]
    triples = [QEdge(core_node.key, anchor_node.key, "of")]
    if extra is not None:
        extra_node = QNode(1, 2, extra)
        nodes.append(extra_node)
        triples.append(QEdge(anchor_node.key, extra_node.key, None))
    return Criterion(core_node.key, anchor_node.key, tuple(triples), tuple(nodes))


def synthetic(people: list[str]) -> list[SelectionExample]:
    """Per person and attribute: the gold chunk states that attribute; the same person's other
    attribute chunk is the hard negative (plain cosine with the anchor cannot tell them
    apart), other people's chunks are easy ones."""
    out = []
    for i, person in enumerate(people):
        chunks = {
            attr: f"{person} {phrase.format(VALUES[(i + k) % len(VALUES)])}"
            for k, (attr, phrase) in enumerate(ATTRIBUTES.items())
        }
        others = [f"{p} {ATTRIBUTES['born date'].format('x')}" for p in people if p != person][:2]
        for attr, gold in chunks.items():
            graph = criterion(attr, person).as_graph()
            out.append(
                SelectionExample(
                    graph=graph,
                    positives=frozenset({gold}),
                    candidates=tuple(sorted({*chunks.values(), *others})),
                    group=person.lower(),
                    question_id=f"{person}-{attr}",
                )
            )
    return out


def small_selector(**params: object) -> GraphSelector:
    settings: dict[str, object] = {
        "heads": 2,
        "mlp_hidden": 32,
        "epochs": 30,
        "batch_size": 8,
        "learning_rate": 1e-2,
        "dropout": 0.0,
        "random_state": 3,
    }
    settings.update(params)
    return GraphSelector(HashedWords(DIM), **settings)  # type: ignore[arg-type]


@pytest.fixture(scope="module")
def fitted() -> GraphSelector:
    train = synthetic(PEOPLE[:8])
    return fit_selector(small_selector(), train, synthetic(PEOPLE[8:]))


GRAPHS = [
    criterion("born date", "Ava Stone", "Wapakoneta").as_graph(),
    criterion("nationality", "Ben Marsh").as_graph(),
]
CHUNKS = ["Ava Stone was born on alpha", "Ben Marsh has nationality beta", "unrelated text"]


# --- the module ---------------------------------------------------------------------------


def test_forward_shapes_and_identity_at_initialisation() -> None:
    torch.manual_seed(0)
    model = GraphSelectionModel(GSArchitecture(dim=DIM, heads=2, mlp_hidden=16))
    x = torch.nn.functional.normalize(torch.randn(5, DIM), dim=-1)
    edge_index = torch.tensor([[0, 1, 3], [1, 2, 4]])
    chunks = torch.nn.functional.normalize(torch.randn(7, DIM), dim=-1)
    sims = model(x, edge_index, torch.tensor([1, 4]), chunks)
    assert sims.shape == (2, 7)
    # Zero gates and a zero-initialised projection: an untrained model is plain cosine.
    assert torch.allclose(sims, x[[1, 4]] @ chunks.T, atol=1e-6)
    assert model.encode_criteria(
        x, torch.zeros((2, 0), dtype=torch.long), torch.tensor([0])
    ).shape == (1, DIM)


def test_architecture_is_validated() -> None:
    with pytest.raises(ValueError, match="divisible"):
        GSArchitecture(dim=10, heads=3)
    with pytest.raises(ValueError, match="dropout"):
        GSArchitecture(dim=8, heads=2, dropout=1.5)


def test_text_encoder_embeds_each_text_once() -> None:
    embeddings = HashedWords(DIM)
    encoder = TextEncoder(embeddings)
    first = encoder.encode(["a b", "c", "a b"])
    again = encoder.encode(["c", "a b"])
    assert embeddings.calls == 2
    assert first.shape == (3, DIM)
    assert np.allclose(np.linalg.norm(first, axis=1), 1.0)
    assert np.array_equal(again[1], first[0])


def test_assign_chunks_distinct_and_shared() -> None:
    scores = np.array([[0.9, 0.8, 0.1], [0.95, 0.2, 0.3], [0.5, 0.4, 0.45]])
    # Row 1 is most confident about chunk 0; row 0 then takes its next best, row 2 the rest.
    assert assign_chunks(scores) == [(1, False), (0, False), (2, False)]
    assert assign_chunks(scores, distinct=False) == [(0, False), (0, False), (0, False)]
    assert assign_chunks(np.array([[0.1], [0.9]])) == [(0, True), (0, False)]


# --- fitting, scoring, determinism ---------------------------------------------------------


def test_score_shapes_and_select(fitted: GraphSelector) -> None:
    scores = fitted.score(GRAPHS, CHUNKS)
    assert scores.shape == (2, 3) and scores.dtype == np.float32
    assert np.all(np.abs(scores) <= 1.0 + 1e-5)
    assert fitted.score([], CHUNKS).shape == (0, 3)
    assert fitted.score(GRAPHS, []).shape == (2, 0)
    assert fitted.select(GRAPHS, CHUNKS) == [0, 1]
    assert fitted.text_similarity("Ava Stone born", CHUNKS).shape == (3,)
    with pytest.raises(ValueError, match="anchor"):
        fitted.score([CriterionGraph(("a",), (), 3)], CHUNKS)


def test_unfitted_selector_refuses_to_score() -> None:
    with pytest.raises(ConfigurationError, match="not fitted"):
        small_selector().score(GRAPHS, CHUNKS)


def test_training_beats_the_untrained_model_on_unseen_anchors(fitted: GraphSelector) -> None:
    report = fitted.report_
    assert report is not None
    assert report.n_validation == 8 and report.n_validation_groups == 4
    # Untrained: the anchor's text alone cannot tell a person's two attribute chunks apart.
    assert report.validation_accuracy_untrained is not None
    assert report.validation_accuracy_untrained <= 0.75
    assert report.validation_accuracy == 1.0
    assert report.history[-1]["loss"] < report.history[0]["loss"]


def test_fit_is_deterministic_with_a_seed(fitted: GraphSelector) -> None:
    again = fit_selector(small_selector(), synthetic(PEOPLE[:8]), synthetic(PEOPLE[8:]))
    assert np.array_equal(again.score(GRAPHS, CHUNKS), fitted.score(GRAPHS, CHUNKS))
    other = fit_selector(small_selector(random_state=4, epochs=2), synthetic(PEOPLE[:8]))
    assert not np.array_equal(other.score(GRAPHS, CHUNKS), fitted.score(GRAPHS, CHUNKS))
    assert fitted.training_data_sha256_ == again.training_data_sha256_


def test_parameter_count(fitted: GraphSelector) -> None:
    counts = fitted.parameter_counts(include_text_encoder=True)
    # GATConv(64 -> 2 x 32): weight 64*64 + att_src 64 + att_dst 64 + bias 64; two layers.
    assert counts["graph_encoder"] == 2 * (64 * 64 + 3 * 64) + 2
    assert counts["projection"] == 64 * 32 + 32 + 32 * 64 + 64
    assert fitted.n_parameters() == counts["trainable"]
    assert counts["text_encoder"] is None  # not a torch model


def test_info_nce_prefers_the_positive() -> None:
    sims = torch.tensor([[0.9, 0.1, 0.0], [0.1, 0.1, 0.8]])
    positive = torch.tensor([[True, False, False], [False, True, False]])
    loss = info_nce(sims, positive, 0.1)
    assert float(loss) == pytest.approx(
        float(
            np.mean(
                [
                    -np.log(np.exp(9) / (np.exp(9) + np.exp(1) + 1)),
                    -np.log(np.exp(1) / (np.exp(1) + np.exp(1) + np.exp(8))),
                ]
            )
        ),
        rel=1e-5,
    )


# --- files ----------------------------------------------------------------------------------


def test_save_load_round_trip(fitted: GraphSelector, tmp_path: Path) -> None:
    path = fitted.save(tmp_path / "sel.npz")
    meta = json.loads((tmp_path / "sel.json").read_text())
    assert meta["weights_sha256"] == hashlib.sha256(path.read_bytes()).hexdigest()
    assert meta["architecture"]["dim"] == DIM and meta["encoder"]["name"] == "test-hashed-words"
    assert meta["metrics"]["validation_accuracy"] == 1.0
    loaded = GraphSelector.load(path, HashedWords(DIM))
    assert np.array_equal(loaded.score(GRAPHS, CHUNKS), fitted.score(GRAPHS, CHUNKS))
    assert loaded.n_parameters() == fitted.n_parameters()
    assert GraphSelector.load(tmp_path / "sel.json", HashedWords(DIM)).temperature == 0.05
    # Same model, same bytes.
    again = fitted.save(tmp_path / "again.npz")
    assert again.read_bytes() == path.read_bytes()


def test_load_refuses_another_encoder(fitted: GraphSelector, tmp_path: Path) -> None:
    path = fitted.save(tmp_path / "sel.npz")

    class Other(HashedWords):
        model_name = "another-model"

    with pytest.raises(ConfigurationError, match="another-model"):
        GraphSelector.load(path, Other())


def _rehash(weights: Path) -> None:
    """Make the metadata agree with whatever the weights file now holds."""
    meta_path = weights.with_suffix(".json")
    meta = json.loads(meta_path.read_text())
    meta["weights_sha256"] = hashlib.sha256(weights.read_bytes()).hexdigest()
    meta_path.write_text(json.dumps(meta))


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        ("pickle", "not an .npz archive"),
        ("garbage", "not an .npz archive"),
        ("hash", "SHA-256"),
        ("missing-array", "missing arrays"),
        ("schema", "schema version"),
        ("pickled-meta", "not JSON"),
        ("no-meta", "cannot read its metadata"),
        ("shape", "shape"),
    ],
)
def test_load_refuses_invalid_files(
    fitted: GraphSelector, tmp_path: Path, damage: str, message: str
) -> None:
    from dynakrag.files import read_arrays, write_arrays

    path = fitted.save(tmp_path / "sel.npz")
    meta_path = path.with_suffix(".json")
    if damage == "pickle":
        path.write_bytes(pickle.dumps({"weights": [1, 2, 3]}))
        _rehash(path)
    elif damage == "garbage":
        path.write_bytes(b"\x00garbage" * 50)
        _rehash(path)
    elif damage == "hash":
        arrays, meta = read_arrays(path)
        arrays["gates"] = arrays["gates"] + 1.0
        write_arrays(path, arrays, meta)
    elif damage in ("missing-array", "shape"):
        arrays, meta = read_arrays(path)
        if damage == "missing-array":
            del arrays["proj_in.bias"]
        else:
            arrays["gates"] = np.zeros(5, dtype=np.float32)
        write_arrays(path, arrays, meta)
        _rehash(path)
    elif damage == "schema":
        meta = json.loads(meta_path.read_text())
        meta["schema_version"] = 99
        meta_path.write_text(json.dumps(meta))
    elif damage == "pickled-meta":
        meta_path.write_bytes(pickle.dumps(json.loads(meta_path.read_text())))
    elif damage == "no-meta":
        meta_path.unlink()
    with pytest.raises(SelectorFileError, match=message) as info:
        GraphSelector.load(path, HashedWords(DIM))
    assert "is not a dynakrag selector file" in str(info.value)


def test_save_needs_npz_suffix(fitted: GraphSelector, tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"\.npz"):
        fitted.save(tmp_path / "sel.bin")


def test_default_selector_missing_is_reported(tmp_path: Path) -> None:
    with pytest.raises(ModelUnavailableError, match="train-selector"):
        load_default_selector(tmp_path / "absent.npz")


# --- examples from DS-RAG rows ----------------------------------------------------------------


def test_match_gold_sentence_by_name_tokens() -> None:
    sentences = [
        "Taylor Swift was born on December 13, 1989.",
        "Armstrong was born on August 5, 1930.",
        "Neil deGrasse Tyson was born on October 5, 1958.",
    ]
    assert match_gold_sentence("Neil Armstrong", sentences) == 1
    assert match_gold_sentence("Taylor Swift", sentences) == 0
    assert match_gold_sentence("born date", sentences) is None  # ties: ambiguous
    assert match_gold_sentence("Elon Musk", sentences) is None


def _row() -> tuple[QAExample, list[Passage]]:
    corpus = [
        Passage("c0", "", "Ava Stone was born on alpha. Ava Stone likes tea."),
        Passage("c1", "", "Ben Marsh was born on beta."),
        Passage("c2", "", "Ava Stone has nationality gamma."),
        Passage("c3", "", "Ava Stone was born on alpha. Other words here."),
        Passage("c4", "", "Nothing relevant at all."),
    ]
    example = QAExample(
        id="q1",
        question="Who was born first, Ava Stone or Ben Marsh?",
        answers=("Ava Stone",),
        support=("c0", "c3", "c1"),
        passages=(),
        dataset="dsrag-ranking",
        row=0,
        split="train",
        meta={
            "attribute": "born date",
            "people": ("Ava Stone", "Ben Marsh"),
            "gt_doc": ("Ava Stone was born on alpha.", "Ben Marsh was born on beta."),
            "gold_groups": (("c0", "c3"), ("c1",)),
        },
    )
    return example, corpus


def test_build_selection_examples() -> None:
    from tests.fakes import KeywordSearcher

    example, corpus = _row()
    examples, stats = build_selection_examples(
        [example], metadata_criteria, corpus=corpus, searcher=KeywordSearcher(corpus), k_retrieved=2
    )
    assert stats.examples == 2 and stats.unmatched == 0
    ava, ben = examples
    assert ava.graph.node_texts == ("born date", "Ava Stone") and ava.graph.anchor == 1
    assert ava.positives == {corpus[0].text, corpus[3].text}
    assert ben.positives == {corpus[1].text}
    # The other criterion's gold chunk is a hard negative; candidates carry no order signal.
    assert corpus[1].text in ava.candidates and corpus[0].text in ben.candidates
    assert list(ava.candidates) == sorted(ava.candidates)
    assert ava.group == "ava stone"

    def broken(_: QAExample) -> list[Criterion]:
        raise RuntimeError("no graph")

    _, stats = build_selection_examples([example], broken, corpus=corpus, k_retrieved=0)
    assert stats.no_criteria == 1 and stats.examples == 0


def test_holdout_splits_by_anchor() -> None:
    data = synthetic(PEOPLE)
    train, val = split_holdout(data, 0.25, seed=1)
    assert {e.group for e in train}.isdisjoint({e.group for e in val})
    assert len({e.group for e in val}) == 3 and len(train) + len(val) == len(data)
    assert split_holdout(data, 0.25, seed=1) == (train, val)
    assert split_holdout(data, 0.0) == (data, [])


def test_selection_example_needs_a_positive_candidate() -> None:
    with pytest.raises(ValueError, match="positive"):
        SelectionExample(GRAPHS[0], frozenset({"gold"}), ("other",))


def _rows() -> tuple[list[QAExample], list[Passage]]:
    """Rows of four people (two a question) and a corpus holding their gold sentences."""
    corpus, rows = [], []
    for i, person in enumerate(PEOPLE[:4]):
        corpus.append(Passage(f"g{i}", "", f"{person} was born on {VALUES[i]}. More text."))
        corpus.append(Passage(f"n{i}", "", f"{person} has nationality {VALUES[i]}."))
    for i in range(4):
        pair = (PEOPLE[i], PEOPLE[(i + 1) % 4])
        rows.append(
            QAExample(
                id=f"q{i}",
                question=f"Who was born first, {pair[0]} or {pair[1]}?",
                answers=(pair[0],),
                support=(f"g{i}", f"g{(i + 1) % 4}"),
                passages=(),
                dataset="dsrag-ranking",
                row=i,
                split="train",
                meta={
                    "attribute": "born date",
                    "people": pair,
                    "gt_doc": tuple(f"{p} was born on {VALUES[PEOPLE.index(p)]}." for p in pair),
                    "gold_groups": ((f"g{i}",), (f"g{(i + 1) % 4}",)),
                },
            )
        )
    return rows, corpus


def test_train_selector_command(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from dynakrag import cli
    from dynakrag.data import datasets
    from dynakrag.dsrag import selector_training
    from dynakrag.retrieval import embeddings

    rows, corpus = _rows()
    monkeypatch.setattr(selector_training, "load_training_questions", lambda limit: rows[:limit])
    monkeypatch.setattr(datasets, "dsrag_corpus", lambda: corpus)
    monkeypatch.setattr(embeddings, "default_embeddings", HashedWords)
    out = tmp_path / "gs.npz"
    code = cli.main(
        ["train-selector", "--criteria", "metadata", "--epochs", "2", "--holdout", "0.25",
         "--k-retrieved", "2", "--out", str(out)]
    )  # fmt: skip
    assert code == 0
    meta = json.loads(out.with_suffix(".json").read_text())
    assert meta["info"]["criteria_fn"] == "metadata_criteria"
    assert meta["info"]["build"]["examples"] == 8
    assert meta["metrics"]["n_validation_groups"] == 1
    assert GraphSelector.load(out, HashedWords(DIM)).n_parameters() > 0
    assert cli.main(["train-selector", "--out", str(tmp_path / "gs.bin")]) == 2


def test_rule_criteria_plug_in() -> None:
    from dynakrag.dsrag.selector_training import rule_criteria

    rows, corpus = _rows()
    criteria = rule_criteria()(rows[0])
    anchors = {c.as_graph().node_texts[c.as_graph().anchor] for c in criteria}
    assert set(rows[0].meta["people"]) <= anchors
    # A criterion whose anchor names no gold sentence (e.g. "Who") is skipped, not mislabelled.
    examples, stats = build_selection_examples(
        rows[:1], rule_criteria(), corpus=corpus, k_retrieved=0
    )
    assert {e.group for e in examples} == {"ava stone", "ben marsh"}
    assert stats.unmatched == stats.criteria - 2

"""Lexical, hybrid (RRF), parent-document and multi-vector retrieval, provenance, and the
LangChain adapters. Fast: BM25 and fake embeddings only."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from langchain_core.callbacks import CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.embeddings import DeterministicFakeEmbedding
from langchain_core.retrievers import BaseRetriever
from langchain_core.vectorstores import InMemoryVectorStore

from dynakrag.errors import ConfigurationError, CorpusError, UserInputError
from dynakrag.retrieval.base import Searcher
from dynakrag.retrieval.dense import DenseIndex
from dynakrag.retrieval.hybrid import HybridRetriever, reciprocal_rank_fusion
from dynakrag.retrieval.langchain import LangChainSearcher, SearcherRetriever
from dynakrag.retrieval.lexical import BM25Index, tokenize
from dynakrag.retrieval.passage import Passage
from dynakrag.retrieval.provenance import Hit, search_with_provenance
from dynakrag.retrieval.views import (
    MultiVectorRetriever,
    ParentDocumentRetriever,
    build_views,
    first_sentence,
    split_into_children,
)

CORPUS = [
    Passage(
        "curie",
        "Marie Curie",
        "Marie Curie was a physicist and chemist who researched radioactivity.",
    ),
    Passage("pierre", "Pierre Curie", "Pierre Curie was a French physicist, husband of Marie."),
    Passage("warsaw", "Warsaw", "Warsaw is the capital and largest city of Poland."),
    Passage("paris", "Paris", "Paris is the capital of France."),
]


def P(pid: str) -> Passage:
    return Passage(pid, pid.upper(), f"text of {pid}")


class ListSearcher:
    """Returns a fixed ranking (best first), whatever the query; records the k asked for."""

    def __init__(self, ranking: list[tuple[Passage, float]], name: str | None = None) -> None:
        self.ranking = ranking
        self.asked: list[int] = []
        if name:
            self.name = name

    def search(self, query: str, k: int) -> list[tuple[Passage, float]]:
        self.asked.append(k)
        return self.ranking[:k]


@pytest.fixture(scope="module")
def bm25() -> BM25Index:
    return BM25Index.build(CORPUS)


# --- BM25 -------------------------------------------------------------------------------------


def test_tokenize_lowercases_and_drops_stopwords_and_single_characters() -> None:
    assert tokenize("The Capital of POLAND is Warsaw, a city!") == [
        "capital",
        "poland",
        "warsaw",
        "city",
    ]


def test_bm25_ranks_the_passage_with_more_query_terms_first(bm25: BM25Index) -> None:
    results = bm25.search("physicist who researched radioactivity", 4)
    assert [p.id for p, _ in results] == ["curie", "pierre"]
    assert results[0][1] > results[1][1] > 0
    assert isinstance(bm25, Searcher)


def test_bm25_title_words_are_indexed(bm25: BM25Index) -> None:
    assert [p.id for p, _ in bm25.search("Warsaw", 3)] == ["warsaw"]


def test_bm25_query_sharing_no_term_returns_nothing(bm25: BM25Index) -> None:
    assert bm25.search("zebra giraffe", 3) == []
    assert bm25.search("the of and is", 3) == []  # stopwords only
    assert bm25.search("", 3) == []


def test_bm25_k_is_clipped_to_the_matching_passages(bm25: BM25Index) -> None:
    results = bm25.search("capital", 10)
    assert {p.id for p, _ in results} == {"warsaw", "paris"}
    assert len(bm25.search("capital", 1)) == 1
    with pytest.raises(UserInputError):
        bm25.search("capital", 0)


def test_idf_is_higher_for_rarer_terms(bm25: BM25Index) -> None:
    n = len(CORPUS)
    assert bm25.document_frequency("physicist") == 2
    assert bm25.idf("radioactivity") == pytest.approx(math.log(1 + (n - 1 + 0.5) / 1.5))
    assert bm25.idf("physicist") == pytest.approx(math.log(1 + (n - 2 + 0.5) / 2.5))
    assert bm25.idf("zebra") > bm25.idf("radioactivity") > bm25.idf("physicist")
    assert bm25.idf("The") == 0.0  # a stopword is not an index term
    assert bm25.average_idf("radioactivity Warsaw") > bm25.average_idf("capital physicist")
    assert bm25.average_idf("the of") == 0.0
    assert bm25.average_idf("capital capital physicist") == pytest.approx(
        bm25.average_idf("capital physicist")
    )
    with pytest.raises(UserInputError, match="average_idf"):
        bm25.idf("two words")


def test_bm25_build_rejects_bad_corpora() -> None:
    with pytest.raises(CorpusError, match="empty"):
        BM25Index.build([])
    with pytest.raises(CorpusError, match="duplicate"):
        BM25Index.build([P("a"), P("a")])
    with pytest.raises(CorpusError, match="indexable"):
        BM25Index.build([Passage("a", "", "the of a")])


def test_bm25_save_load_round_trip(bm25: BM25Index, tmp_path: Path) -> None:
    root = bm25.save(tmp_path / "idx")
    assert not any(p.suffix == ".pkl" for p in root.iterdir())
    manifest = json.loads((root / "bm25.manifest.json").read_text())
    assert manifest["format_version"] == 1 and manifest["count"] == len(CORPUS)
    loaded = BM25Index.load(root)
    assert loaded.passages == bm25.passages
    for query in ("physicist radioactivity", "capital", "zebra"):
        assert loaded.search(query, 4) == bm25.search(query, 4)
    assert loaded.average_idf("Curie capital") == pytest.approx(bm25.average_idf("Curie capital"))


def test_bm25_and_dense_index_can_share_a_folder(bm25: BM25Index, tmp_path: Path) -> None:
    fake = DeterministicFakeEmbedding(size=8)
    DenseIndex.build(CORPUS, fake, progress=False).save(tmp_path)
    bm25.save(tmp_path)
    assert BM25Index.load(tmp_path).search("capital", 1)
    assert len(DenseIndex.load(tmp_path, fake)) == len(CORPUS)


@pytest.mark.parametrize(
    "damage",
    ["array", "vocab", "passages", "manifest", "version", "missing_manifest", "missing_array"],
)
def test_bm25_load_reports_corruption(bm25: BM25Index, tmp_path: Path, damage: str) -> None:
    root = bm25.save(tmp_path / "idx")
    manifest_path = root / "bm25.manifest.json"
    if damage == "array":
        data = bytearray((root / "bm25.data.npy").read_bytes())
        data[-1] ^= 0xFF
        (root / "bm25.data.npy").write_bytes(bytes(data))
    elif damage == "vocab":
        (root / "bm25.vocab.json").write_text('{"broken": ')
    elif damage == "passages":
        with (root / "bm25.passages.jsonl").open("a") as f:
            f.write('{"id": "extra", "title": "", "text": "x"}\n')
    elif damage == "manifest":
        manifest_path.write_text("{not json")
    elif damage == "version":
        manifest = json.loads(manifest_path.read_text())
        manifest["format_version"] = 99
        manifest_path.write_text(json.dumps(manifest))
    elif damage == "missing_manifest":
        manifest_path.unlink()
    else:
        (root / "bm25.indptr.npy").unlink()
    with pytest.raises(CorpusError):
        BM25Index.load(root)


def test_bm25_load_of_a_missing_folder(tmp_path: Path) -> None:
    with pytest.raises(CorpusError, match="no BM25 index"):
        BM25Index.load(tmp_path / "nowhere")


# --- provenance -------------------------------------------------------------------------------


def test_every_searcher_gets_provenance(bm25: BM25Index) -> None:
    hits, dropped = bm25.search_with_provenance("physicist", 2)
    assert dropped == []
    expected = bm25.search("physicist", 2)
    assert [(h.passage, h.score, h.retriever, h.rank) for h in hits] == [
        (expected[0][0], expected[0][1], "bm25", 1),
        (expected[1][0], expected[1][1], "bm25", 2),
    ]
    assert hits[0].sources == (("bm25", 1, hits[0].score),)
    # A searcher without its own search_with_provenance (DenseIndex, a user's class).
    dense = DenseIndex.build(CORPUS, DeterministicFakeEmbedding(size=8), progress=False)
    hits, dropped = search_with_provenance(dense, "Paris", 2)
    assert [h.retriever for h in hits] == ["dense", "dense"] and dropped == []
    plain = ListSearcher([(P("a"), 0.5)])
    hits, _ = search_with_provenance(plain, "q", 3, name="mine")
    assert hits == [Hit(P("a"), 0.5, "mine", 1, (("mine", 1, 0.5),))]
    as_dict = hits[0].to_dict()
    assert as_dict["id"] == "a" and as_dict["sources"] == [
        {"retriever": "mine", "rank": 1, "score": 0.5}
    ]
    json.dumps(as_dict)


# --- reciprocal-rank fusion -------------------------------------------------------------------


def test_rrf_fused_scores_by_hand() -> None:
    a, b, c, d = P("a"), P("b"), P("c"), P("d")
    rankings = {
        "dense": [(a, 0.9), (b, 0.8), (c, 0.7)],
        "bm25": [(b, 12.0), (d, 9.0), (a, 3.0), (b, 1.0)],  # b repeated at rank 4
    }
    hits, dropped = reciprocal_rank_fusion(rankings, 3, k_rrf=60)
    # a: dense 1, bm25 3 -> 1/61 + 1/63;  b: dense 2, bm25 1 -> 1/62 + 1/61
    # c: dense 3 -> 1/63;  d: bm25 2 -> 1/62
    assert [h.passage.id for h in hits] == ["b", "a", "d"]
    assert [h.score for h in hits] == pytest.approx([1 / 62 + 1 / 61, 1 / 61 + 1 / 63, 1 / 62])
    assert [h.rank for h in hits] == [1, 2, 3]
    assert hits[0].retriever == "hybrid"
    assert hits[0].sources == (("dense", 2, 0.8), ("bm25", 1, 12.0))
    assert hits[2].sources == (("bm25", 2, 9.0),)
    assert dropped == [
        {
            "passage_id": "b",
            "retriever": "bm25",
            "rank": 4,
            "score": 1.0,
            "reason": "duplicate of b from bm25",
        },
        {
            "passage_id": "c",
            "retriever": "hybrid",
            "rank": 4,
            "score": pytest.approx(1 / 63),
            "reason": "below top-k cutoff (fused rank 4)",
            "sources": [{"retriever": "dense", "rank": 3, "score": 0.7}],
        },
    ]


def test_rrf_weights_and_k_rrf() -> None:
    a, b, c, d = P("a"), P("b"), P("c"), P("d")
    rankings = {"dense": [(a, 0.9), (b, 0.8), (c, 0.7)], "bm25": [(b, 12.0), (d, 9.0), (a, 3.0)]}
    hits, _ = reciprocal_rank_fusion(rankings, 4, k_rrf=60, weights={"dense": 3.0})
    # a: 3/61 + 1/63 = 0.06505 > b: 3/62 + 1/61 = 0.06478;  c: 3/63 = 0.04762 > d: 1/62
    assert [h.passage.id for h in hits] == ["a", "b", "c", "d"]
    assert [h.score for h in hits] == pytest.approx(
        [3 / 61 + 1 / 63, 3 / 62 + 1 / 61, 3 / 63, 1 / 62]
    )
    hits, _ = reciprocal_rank_fusion(rankings, 2, k_rrf=0)
    # k_rrf = 0: a: 1/1 + 1/3, b: 1/2 + 1/1 -> b (1.5) before a (1.333)
    assert [(h.passage.id, h.score) for h in hits] == [
        ("b", pytest.approx(1.5)),
        ("a", pytest.approx(4 / 3)),
    ]


def test_rrf_ties_go_to_the_better_single_rank_then_first_seen() -> None:
    x, y, z = P("x"), P("y"), P("z")
    hits, _ = reciprocal_rank_fusion({"one": [(x, 1.0), (z, 0.5)], "two": [(y, 1.0)]}, 3)
    assert [h.passage.id for h in hits] == ["x", "y", "z"]


def test_hybrid_retriever_fuses_and_records_drops(bm25: BM25Index) -> None:
    curie, paris = CORPUS[0], CORPUS[3]
    dense = ListSearcher([(paris, 0.9), (curie, 0.5), (paris, 0.4)])
    hybrid = HybridRetriever({"dense": dense, "bm25": bm25})
    hits, dropped = hybrid.search_with_provenance("radioactivity Curie", 1)
    assert dense.asked == [30]  # candidate_k defaults to max(3k, 30)
    assert [h.passage.id for h in hits] == ["curie"]
    assert hits[0].sources[0] == ("dense", 2, 0.5) and hits[0].sources[1][:2] == ("bm25", 1)
    reasons = {(d["passage_id"], d["reason"]) for d in dropped}
    assert ("paris", "duplicate of paris from dense") in reasons
    assert any(r.startswith("below top-k cutoff (fused rank 2)") for _, r in reasons)
    assert hybrid.search("radioactivity Curie", 1) == [(hits[0].passage, hits[0].score)]
    assert isinstance(hybrid, Searcher)


def test_hybrid_candidate_k_zero_weight_and_config_errors(bm25: BM25Index) -> None:
    dense = ListSearcher([(CORPUS[3], 0.9)])
    off = ListSearcher([(CORPUS[2], 0.9)])
    hybrid = HybridRetriever({"dense": dense, "off": off}, candidate_k=5, weights={"off": 0})
    hits, _ = hybrid.search_with_provenance("q", 2)
    assert dense.asked == [5] and off.asked == [] and [h.passage.id for h in hits] == ["paris"]
    with pytest.raises(ConfigurationError):
        HybridRetriever({})
    with pytest.raises(ConfigurationError, match="unknown"):
        HybridRetriever({"bm25": bm25}, weights={"dense": 1.0})
    with pytest.raises(ConfigurationError):
        HybridRetriever({"bm25": bm25}, weights={"bm25": -1.0})
    with pytest.raises(ConfigurationError):
        HybridRetriever({"bm25": bm25}, k_rrf=-1)
    with pytest.raises(UserInputError):
        HybridRetriever({"bm25": bm25}).search("q", 0)


# --- parent-document and multi-vector -------------------------------------------------------

PARENTS = [
    Passage(
        "equipment",
        "Equipment",
        "Large monitors and video conferencing equipment can be rented at the information desk. "
        "Equipment must be switched off and returned to its place after use. "
        "Report any broken monitors to the general affairs team at once.",
    ),
    Passage(
        "reservation",
        "Reservation",
        "Meeting rooms can be reserved up to one hour before the meeting starts. "
        "A reservation without a check-in is released after fifteen minutes.",
    ),
]


def test_split_into_children_sets_parent_ids() -> None:
    children = split_into_children(PARENTS, chunk_words=8, overlap=2)
    assert len(children) > len(PARENTS)
    assert {c.parent_id for c in children} == {"equipment", "reservation"}
    assert children[0].id == "equipment::chunk0" and children[0].title == "Equipment"
    assert len({c.id for c in children}) == len(children)


def test_parent_document_returns_each_parent_once() -> None:
    children = split_into_children(PARENTS, chunk_words=8, overlap=2)
    child_index = BM25Index.build(children)
    retriever = ParentDocumentRetriever(child_index, {p.id: p for p in PARENTS})
    hits, dropped = retriever.search_with_provenance("monitors", 5)
    child_hits = child_index.search("monitors", 5)
    assert len([c for c, _ in child_hits if c.parent_id == "equipment"]) >= 2
    assert [h.passage for h in hits] == [PARENTS[0]]  # the whole parent, once
    assert hits[0].score == child_hits[0][1]  # score of the best child
    assert hits[0].via[0] == child_hits[0][0].id and len(hits[0].via) >= 2
    assert hits[0].sources == (("bm25", 1, child_hits[0][1]),)
    duplicates = [d for d in dropped if d["reason"].startswith("duplicate of equipment from")]
    assert len(duplicates) == len(hits[0].via) - 1
    assert retriever.search("monitors", 5) == [(PARENTS[0], hits[0].score)]


def test_parent_document_from_passages_cutoff_and_unknown_parent() -> None:
    retriever = ParentDocumentRetriever.from_passages(
        PARENTS, BM25Index.build, chunk_words=8, overlap=2
    )
    hits, dropped = retriever.search_with_provenance("monitors meeting", 1)
    assert len(hits) == 1
    assert any(d["reason"] == "below top-k cutoff (parent rank 2)" for d in dropped)
    orphan = ListSearcher([(Passage("c1", "", "x", parent_id="gone"), 1.0)], name="kids")
    hits, dropped = ParentDocumentRetriever(orphan, PARENTS).search_with_provenance("x", 1)
    assert hits == [] and dropped[0]["reason"] == "no parent passage 'gone' for c1"
    assert dropped[0]["retriever"] == "kids"


def test_parent_document_reads_deeper_until_k_parents() -> None:
    # 50 children of parent "equipment" come before the only child of "reservation".
    kids = [(Passage(f"e{i}", "", "x", parent_id="equipment"), 1.0) for i in range(50)]
    kids.append((Passage("r0", "", "x", parent_id="reservation"), 0.5))
    searcher = ListSearcher(kids)
    hits, _ = ParentDocumentRetriever(searcher, PARENTS).search_with_provenance("x", 2)
    assert [h.passage.id for h in hits] == ["equipment", "reservation"]
    assert searcher.asked == [40, 80]


def test_views_title_first_sentence_body() -> None:
    views = build_views(PARENTS)
    ids = [v.id for v in views]
    assert ids[:3] == ["equipment::title", "equipment::first_sentence", "equipment::body"]
    assert all(v.parent_id in {"equipment", "reservation"} and v.title == "" for v in views)
    assert views[1].text.endswith("information desk.")
    one_sentence = Passage("s", "", "Only one sentence here.")
    # No title, and a body equal to the first sentence: one view only.
    assert [v.id for v in build_views([one_sentence])] == ["s::first_sentence"]
    assert first_sentence(Passage("t", "", "Dr. Who? No. It is 3.5 m long.")) == "Dr. Who?"


def test_multi_vector_title_only_match_finds_the_parent() -> None:
    parents = [
        Passage(
            "ada",
            "Ada Lovelace",
            "She wrote the first published algorithm. Babbage designed the Analytical Engine.",
        ),
        Passage("babbage", "Charles Babbage", "He designed the Analytical Engine. He was English."),
    ]
    retriever = MultiVectorRetriever(parents, BM25Index.build)
    hits, _ = retriever.search_with_provenance("Lovelace", 3)
    assert [(h.passage.id, h.via) for h in hits] == [("ada", ("ada::title",))]
    assert hits[0].passage == parents[0]  # the parent, not the view

    hits, dropped = retriever.search_with_provenance("Analytical Engine", 3)
    assert sorted(h.passage.id for h in hits) == ["ada", "babbage"]  # each parent once
    babbage = next(h for h in hits if h.passage.id == "babbage")
    assert set(babbage.via) == {"babbage::first_sentence", "babbage::body"}
    assert any(d["reason"].startswith("duplicate of babbage from babbage::") for d in dropped)


def test_multi_vector_with_a_dense_factory_and_custom_view() -> None:
    fake = DeterministicFakeEmbedding(size=16)
    views = {"title": lambda p: p.title, "question": lambda p: f"What is {p.title}?"}
    retriever = MultiVectorRetriever(
        PARENTS, lambda ps: DenseIndex.build(ps, fake, progress=False), views=views
    )
    # The fake embedding maps equal strings to equal vectors: query one view's exact text.
    hits, _ = retriever.search_with_provenance("What is Reservation?", 1)
    assert hits[0].passage.id == "reservation" and hits[0].via[0] == "reservation::question"
    assert hits[0].sources[0][0] == "dense"
    with pytest.raises(ConfigurationError):
        MultiVectorRetriever(PARENTS, BM25Index.build, views={})


def test_views_compose_with_hybrid(bm25: BM25Index) -> None:
    views = MultiVectorRetriever(PARENTS, BM25Index.build)
    parent = ParentDocumentRetriever.from_passages(
        PARENTS, BM25Index.build, chunk_words=8, overlap=2
    )
    hybrid = HybridRetriever({"multivector": views, "parent": parent})
    hits, dropped = hybrid.search_with_provenance("rented monitors", 2)
    assert hits[0].passage.id == "equipment"
    inner = [d for d in dropped if d["reason"].startswith("duplicate of equipment from")]
    assert inner and all(d["inner_retriever"] == "bm25" for d in inner)
    assert {d["retriever"] for d in inner} <= {"multivector", "parent"}
    assert [s[0] for s in hits[0].sources] == ["multivector", "parent"]
    assert any(v.startswith("equipment::chunk") for v in hits[0].via)


# --- LangChain adapters -----------------------------------------------------------------------


class FixedRetriever(BaseRetriever):
    docs: list[Document]

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun
    ) -> list[Document]:
        return self.docs


def test_searcher_retriever_wraps_any_searcher(bm25: BM25Index) -> None:
    retriever = SearcherRetriever(searcher=bm25, k=2)
    documents = retriever.invoke("physicist radioactivity")
    assert [d.page_content for d in documents] == [CORPUS[0].text, CORPUS[1].text]
    meta = documents[0].metadata
    assert meta["id"] == "curie" and meta["title"] == "Marie Curie"
    assert meta["retriever"] == "bm25" and meta["rank"] == 1 and meta["score"] > 0
    assert documents[0].id == "curie"
    plain = SearcherRetriever(searcher=ListSearcher([(P("a"), 0.5)]))
    assert plain.invoke("q")[0].metadata["retriever"] == "listsearcher"


def test_langchain_vector_store_as_a_searcher() -> None:
    store = InMemoryVectorStore(DeterministicFakeEmbedding(size=16))
    store.add_documents(
        [Document(id=p.id, page_content=p.text, metadata={"title": p.title}) for p in CORPUS]
    )
    searcher = LangChainSearcher(store)
    results = searcher.search(CORPUS[2].text, 2)
    assert len(results) == 2
    assert results[0][0] == CORPUS[2] and results[0][1] == pytest.approx(1.0)
    assert searcher.score_kind == "store"  # InMemoryVectorStore has no relevance function
    via_retriever = LangChainSearcher(store.as_retriever(search_kwargs={"k": 1}))
    assert via_retriever.search(CORPUS[3].text, 3)[0][0] == CORPUS[3]
    assert len(via_retriever.search(CORPUS[3].text, 3)) == 3  # our k, not the retriever's
    # Plugged into a hybrid next to BM25.
    hybrid = HybridRetriever({"store": searcher, "bm25": BM25Index.build(CORPUS)})
    hits, _ = hybrid.search_with_provenance(CORPUS[0].text, 1)
    assert hits[0].passage.id == "curie" and len(hits[0].sources) == 2


def test_langchain_retriever_as_a_searcher_uses_rank_scores() -> None:
    docs = [
        Document(page_content="first", metadata={"title": "T", "parent_id": "doc"}),
        Document(page_content="second", metadata={"id": "s2"}),
        Document(page_content="third"),
    ]
    searcher = LangChainSearcher(FixedRetriever(docs=docs), name="fixed")
    results = searcher.search("anything", 2)
    assert [score for _, score in results] == [1.0, 0.5]
    first, second = results[0][0], results[1][0]
    assert first.id.startswith("lc-") and first.title == "T" and first.parent_id == "doc"
    assert first.id == LangChainSearcher(FixedRetriever(docs=docs)).search("x", 1)[0][0].id
    assert second.id == "s2"
    hits, _ = searcher.search_with_provenance("anything", 1)
    assert hits[0].retriever == "fixed" and searcher.score_kind == "rank"
    with pytest.raises(ConfigurationError):
        LangChainSearcher(object())  # type: ignore[arg-type]


def test_adapters_round_trip(bm25: BM25Index) -> None:
    back = LangChainSearcher(SearcherRetriever(searcher=bm25))
    assert back.search("capital", 5) == bm25.search("capital", 5)
    store = InMemoryVectorStore(DeterministicFakeEmbedding(size=16))
    store.add_documents([Document(id="x", page_content="hello world")])
    documents = SearcherRetriever(searcher=LangChainSearcher(store), k=1).invoke("hello world")
    assert documents[0].id == "x" and documents[0].metadata["rank"] == 1

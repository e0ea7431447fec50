"""Loading a corpus from a ``.jsonl`` file or a folder of ``.txt``/``.md`` files."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from dynakrag.errors import ConfigurationError, CorpusError
from dynakrag.retrieval.passage import Passage

TEXT_SUFFIXES: frozenset[str] = frozenset({".txt", ".md"})


def chunk_text(text: str, chunk_words: int = 200, overlap_words: int = 40) -> list[str]:
    """Split ``text`` into windows of ``chunk_words`` words, consecutive windows sharing
    ``overlap_words`` words. Whitespace is normalised to single spaces; empty text gives ``[]``.
    """
    if chunk_words < 1:
        raise ConfigurationError(f"chunk_words must be >= 1, got {chunk_words}")
    if not 0 <= overlap_words < chunk_words:
        raise ConfigurationError(
            f"overlap_words must be >= 0 and < chunk_words ({chunk_words}), got {overlap_words}"
        )
    words = text.split()
    if not words:
        return []
    step = chunk_words - overlap_words
    chunks: list[str] = []
    start = 0
    while True:
        chunks.append(" ".join(words[start : start + chunk_words]))
        # Stop once a window reaches the end: another one would only repeat its tail.
        if start + chunk_words >= len(words):
            return chunks
        start += step


def load_corpus(
    path: str | Path, *, chunk_words: int = 200, overlap_words: int = 40
) -> list[Passage]:
    """Load passages from a ``.jsonl`` file or a folder of ``.txt``/``.md`` files.

    jsonl rows are ``{"id"?, "title"?, "text"}`` objects taken as whole passages (a missing id
    becomes ``line-<N>``; blank lines and whitespace-only texts are skipped). Folder files are
    read recursively in sorted order (hidden files and folders skipped) and chunked by words;
    chunk ids are ``<relative path>#<chunk no>``. Every problem raises :class:`CorpusError`.
    """
    # Validate chunking options first so a bad option is reported even for a jsonl corpus.
    chunk_text("", chunk_words, overlap_words)
    root = Path(path).expanduser()
    if not root.exists():
        raise CorpusError(f"corpus path does not exist: {root}")
    if root.is_dir():
        passages = _load_folder(root, chunk_words, overlap_words)
    elif root.is_file() and root.suffix.lower() == ".jsonl":
        passages = _load_jsonl(root)
    else:
        raise CorpusError(
            f"corpus must be a .jsonl file or a folder of .txt/.md files, got: {root}"
        )
    if not passages:
        raise CorpusError(f"corpus is empty (no passages with text): {root}")
    _check_unique_ids(passages, root)
    return passages


def _read_text(path: Path) -> str:
    """Read a UTF-8 file, turning OS and decoding failures into one-line CorpusErrors."""
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise CorpusError(f"cannot read {path}: not UTF-8 text ({exc.reason})") from exc
    except OSError as exc:
        raise CorpusError(f"cannot read {path}: {exc.strerror or exc}") from exc


def _load_jsonl(path: Path) -> list[Passage]:
    passages: list[Passage] = []
    for lineno, line in enumerate(_read_text(path).splitlines(), start=1):
        if not line.strip():
            continue
        where = f"{path} line {lineno}"
        try:
            row: Any = json.loads(line)
        except json.JSONDecodeError as exc:
            raise CorpusError(f"malformed JSON in {where}: {exc.msg}") from exc
        except RecursionError:  # absurdly deep nesting: malformed, not a crash
            raise CorpusError(f"malformed JSON in {where}: nested too deeply") from None
        if not isinstance(row, dict):
            raise CorpusError(f"{where}: expected a JSON object, got {type(row).__name__}")
        if "text" not in row:
            raise CorpusError(f"{where}: row has no 'text' field")
        text, title, pid = row["text"], row.get("title", ""), row.get("id")
        if not isinstance(text, str):
            raise CorpusError(f"{where}: 'text' must be a string, got {type(text).__name__}")
        if title is None:
            title = ""
        if not isinstance(title, str):
            raise CorpusError(f"{where}: 'title' must be a string, got {type(title).__name__}")
        if pid is None:
            pid = f"line-{lineno}"
        elif isinstance(pid, int) and not isinstance(pid, bool):
            pid = str(pid)  # numeric ids are common in benchmark dumps
        elif not isinstance(pid, str) or not pid:
            raise CorpusError(f"{where}: 'id' must be a non-empty string or an integer")
        if not text.strip():
            continue
        passages.append(Passage(id=pid, title=title, text=text))
    return passages


def _load_folder(root: Path, chunk_words: int, overlap_words: int) -> list[Passage]:
    passages: list[Passage] = []
    files = sorted(
        p
        for p in root.rglob("*")
        if p.suffix.lower() in TEXT_SUFFIXES
        # Skip hidden entries (.git, editor backups) that are never meant as corpus text.
        and not any(part.startswith(".") for part in p.relative_to(root).parts)
        and p.is_file()
    )
    for file in files:
        rel = file.relative_to(root).as_posix()
        for number, chunk in enumerate(chunk_text(_read_text(file), chunk_words, overlap_words)):
            passages.append(
                Passage(id=f"{rel}#{number}", title=file.stem, text=chunk, parent_id=rel)
            )
    return passages


def _check_unique_ids(passages: list[Passage], root: Path) -> None:
    seen: set[str] = set()
    for passage in passages:
        if passage.id in seen:
            raise CorpusError(f"duplicate passage id {passage.id!r} in {root}")
        seen.add(passage.id)

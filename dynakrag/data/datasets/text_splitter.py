"""LangChain's ``RecursiveCharacterTextSplitter``, re-implemented on offsets: how DS-RAG cuts its
corpus into chunks (``chunk_size=250, chunk_overlap=50``)."""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from itertools import pairwise

from dynakrag.errors import UserInputError

DSRAG_CHUNK_SIZE = 250
DSRAG_CHUNK_OVERLAP = 50
DEFAULT_SEPARATORS: tuple[str, ...] = ("\n\n", "\n", " ", "")


def _strip_span(text: str, start: int, end: int) -> tuple[int, int] | None:
    segment = text[start:end]
    left = len(segment) - len(segment.lstrip())
    right = len(segment.rstrip())
    return (start + left, start + right) if right > left else None


def _merge_spans(
    text: str, spans: Sequence[tuple[int, int]], size: int, overlap: int
) -> list[tuple[int, int]]:
    """LangChain's ``_merge_splits`` with ``keep_separator=True`` (pieces join with "")."""
    chunks: list[tuple[int, int]] = []
    current: deque[tuple[int, int]] = deque()
    total = 0
    for start, end in spans:
        length = end - start
        if total + length > size and current:
            chunk = _strip_span(text, current[0][0], current[-1][1])
            if chunk is not None:
                chunks.append(chunk)
            while total > overlap or (total + length > size and total > 0):
                first = current.popleft()
                total -= first[1] - first[0]
        current.append((start, end))
        total += length
    if current:
        chunk = _strip_span(text, current[0][0], current[-1][1])
        if chunk is not None:
            chunks.append(chunk)
    return chunks


def _split_recursive(
    text: str,
    start: int,
    end: int,
    separators: Sequence[str],
    size: int,
    overlap: int,
    out: list[tuple[int, int]],
) -> None:
    separator, rest = separators[-1], ()
    for i, candidate in enumerate(separators):
        if not candidate:
            separator = candidate
            break
        if text.find(candidate, start, end) != -1:
            separator, rest = candidate, tuple(separators[i + 1 :])
            break
    if separator:
        # Split before each occurrence, keeping the separator at the start of the next piece.
        bounds = [start]
        position = text.find(separator, start, end)
        while position != -1:
            bounds.append(position)
            position = text.find(separator, position + len(separator), end)
        bounds.append(end)
        pieces = [(a, b) for a, b in pairwise(bounds) if b > a]
    else:
        pieces = [(i, i + 1) for i in range(start, end)]
    good: list[tuple[int, int]] = []
    for a, b in pieces:
        if b - a < size:
            good.append((a, b))
            continue
        if good:
            out.extend(_merge_spans(text, good, size, overlap))
            good = []
        if rest:
            _split_recursive(text, a, b, rest, size, overlap, out)
        else:
            out.append((a, b))
    if good:
        out.extend(_merge_spans(text, good, size, overlap))


def split_spans(
    text: str,
    chunk_size: int = DSRAG_CHUNK_SIZE,
    chunk_overlap: int = DSRAG_CHUNK_OVERLAP,
    separators: Sequence[str] = DEFAULT_SEPARATORS,
) -> list[tuple[int, int]]:
    """``(start, end)`` offsets of the chunks that LangChain's
    ``RecursiveCharacterTextSplitter(chunk_size, chunk_overlap)`` (default separators, kept at
    the start of the following piece, chunks whitespace-stripped, length = characters) cuts
    from ``text``: ``text[start:end]`` is each chunk. Offsets are non-decreasing."""
    if chunk_size < 1 or not 0 <= chunk_overlap < chunk_size:
        raise UserInputError(
            f"need chunk_size >= 1 and 0 <= chunk_overlap < chunk_size, got "
            f"{chunk_size}/{chunk_overlap}"
        )
    if not separators:
        raise UserInputError("separators must not be empty")
    out: list[tuple[int, int]] = []
    _split_recursive(text, 0, len(text), tuple(separators), chunk_size, chunk_overlap, out)
    return out


def split_text(
    text: str,
    chunk_size: int = DSRAG_CHUNK_SIZE,
    chunk_overlap: int = DSRAG_CHUNK_OVERLAP,
    separators: Sequence[str] = DEFAULT_SEPARATORS,
) -> list[str]:
    """The chunk strings of :func:`split_spans`."""
    return [text[a:b] for a, b in split_spans(text, chunk_size, chunk_overlap, separators)]

"""Benchmark datasets: HotpotQA, 2WikiMultihopQA, MuSiQue and DS-RAG as one schema.

The data is never copied into the repository. It is read from :func:`data_dir` (the
``DYNAKRAG_DATA_DIR`` environment variable, else ``<repo>/../shared/data``), whose
``splits.json`` says which rows of every file are ``train`` rows (fit and tune) and which are
``eval`` rows (report only). :func:`load_examples` uses every file of a dataset listed there.

Passage ids
    HotpotQA, 2Wiki and MuSiQue paragraphs get the content-addressed id
    ``"{title}#{sha1(title + "\\n" + text)[:10]}"`` (see :func:`passage_id`). Text is the
    paragraph with whitespace collapsed, so the same paragraph gets the same id in every
    question and file (IRCoT's double-spaced text and the standard sentence lists agree). One
    id scheme serves both settings: the distractor setting uses ``QAExample.passages``, the
    open setting pools them with :func:`open_corpus`, and gold ids are valid in both. Titles
    repeat inside MuSiQue questions, hence the hash rather than the bare title.

    DS-RAG chunks are ``"multisourceqa-{n:05d}"``, ``n`` the chunk's position in the corpus
    cut by :func:`split_spans` (LangChain's ``RecursiveCharacterTextSplitter`` with
    ``chunk_size=250, chunk_overlap=50``, re-implemented here).

Gold evidence
    * HotpotQA / 2Wiki standard layout: the paragraphs whose title is in ``supporting_facts``.
    * HotpotQA explorer sample: ``title_a`` and ``title_b``.
    * IRCoT and MuSiQue: the paragraphs with ``is_supporting: true``.
    * DS-RAG: for every ``gt_doc`` sentence, every occurrence of it in the corpus (the paper
      inserts each one several times) maps to the chunks that contain that occurrence whole;
      an occurrence cut by a chunk boundary (no chunk holds it whole) maps to the chunk with
      the largest overlap (the earliest on a tie). The sentence's *gold group* is the union
      over its occurrences: retrieving any chunk of the group retrieves that gold sentence, as
      in the paper's substring-based evaluation. ``QAExample.support`` is the union of all
      groups; ``QAExample.gold_sets`` gives one group per gold item and is what the metrics in
      :mod:`dynakrag.eval.metrics` should receive (for the Wikipedia datasets it is one
      singleton per support id).

Row rules
    * A train row whose question id also appears in an eval row of the same dataset is dropped
      (splits.json's note for MIGRES HotpotQA, applied to every file).
    * A question id appears at most once per split (the first file listed in splits.json
      wins).
    * 2Wiki rows without context paragraphs are skipped.
    * The explorer sample stores its gold paragraphs before the distractors; its passages are
      sorted by title so that position carries no gold signal.
"""

from __future__ import annotations

import hashlib
import json
import os
from bisect import bisect_left, bisect_right
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import lru_cache
from itertools import pairwise
from pathlib import Path
from typing import Any, Literal

from dynakrag.errors import CorpusError, UserInputError
from dynakrag.retrieval.passage import Passage

__all__ = [
    "DATASETS",
    "DATA_DIR_ENV",
    "DSRAG_CHUNK_OVERLAP",
    "DSRAG_CHUNK_SIZE",
    "DataMissingError",
    "FrozenMeta",
    "QAExample",
    "Split",
    "data_dir",
    "dsrag_corpus",
    "load_examples",
    "open_corpus",
    "passage_id",
    "split_spans",
    "split_text",
]

DATASETS: tuple[str, ...] = ("hotpotqa", "2wiki", "musique", "dsrag-ranking", "dsrag-comparison")

Split = Literal["train", "eval"]
SPLITS: tuple[str, ...] = ("train", "eval")
DATA_DIR_ENV = "DYNAKRAG_DATA_DIR"
DSRAG_CORPUS_FILE = "dsrag/corpus/multisourceqa.txt"
DSRAG_CHUNK_SIZE = 250
DSRAG_CHUNK_OVERLAP = 50
DEFAULT_SEPARATORS: tuple[str, ...] = ("\n\n", "\n", " ", "")

# Which files of splits.json belong to which dataset.
_PREFIXES: dict[str, str] = {
    "hotpotqa": "hotpotqa/",
    "2wiki": "2wikimultihopqa/",
    "musique": "musique/",
    "dsrag-ranking": "dsrag/rankingqa/",
    "dsrag-comparison": "dsrag/comparisonqa/",
}
_REPO_ROOT = Path(__file__).resolve().parents[2]


class DataMissingError(CorpusError):
    """The benchmark data (or one of its files) is not where it was looked for."""


class FrozenMeta(Mapping[str, Any]):
    """A read-only mapping (unlike ``MappingProxyType`` it pickles and deep-copies)."""

    __slots__ = ("_data",)

    def __init__(self, data: Mapping[str, Any] | Iterable[tuple[str, Any]] = ()) -> None:
        self._data: dict[str, Any] = dict(data)

    def __getitem__(self, key: str) -> Any:
        return self._data[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)

    def __repr__(self) -> str:
        return f"FrozenMeta({self._data!r})"


@dataclass(frozen=True)
class QAExample:
    """One question with its gold answers and gold evidence.

    ``support`` holds gold passage ids; ``passages`` the question's own candidate paragraphs
    (the distractor setting; empty for DS-RAG, which retrieves over :func:`dsrag_corpus`).
    ``row`` is the 0-based row in the source file ``meta["source"]`` (relative to
    :func:`data_dir`). ``meta`` is read-only; keys depend on the dataset (``type``, ``level``,
    ``hops``, ``supporting_facts``, ``decomposition``, ``gold_groups``, ...).
    """

    id: str
    question: str
    answers: tuple[str, ...]
    support: tuple[str, ...]
    passages: tuple[Passage, ...] = field(repr=False)
    dataset: str
    row: int
    split: str
    meta: Mapping[str, Any] = field(default_factory=FrozenMeta, compare=False, repr=False)

    def __post_init__(self) -> None:
        if not isinstance(self.meta, FrozenMeta):
            object.__setattr__(self, "meta", FrozenMeta(self.meta))

    @property
    def gold_sets(self) -> tuple[frozenset[str], ...]:
        """One set of interchangeable passage ids per gold item (pass this to the metrics).

        DS-RAG: one group per ``gt_doc`` sentence (every chunk holding a copy of it); other
        datasets: one singleton per ``support`` id.
        """
        groups = self.meta.get("gold_groups")
        if groups is not None:
            return tuple(frozenset(group) for group in groups)
        return tuple(frozenset((pid,)) for pid in self.support)


# --------------------------------------------------------------------------------------------
# Locating the data
# --------------------------------------------------------------------------------------------


def data_dir(*, must_exist: bool = True) -> Path:
    """The data folder: ``$DYNAKRAG_DATA_DIR`` if set, else ``<repo>/../shared/data``.

    Raises :class:`DataMissingError` when ``must_exist`` and the folder does not exist.
    """
    configured = os.environ.get(DATA_DIR_ENV)
    path = Path(configured).expanduser() if configured else _REPO_ROOT.parent / "shared" / "data"
    if must_exist and not path.is_dir():
        how = f"${DATA_DIR_ENV}" if configured else f"the default (${DATA_DIR_ENV} is unset)"
        raise DataMissingError(f"benchmark data folder not found: {path} (from {how})")
    return path


def _require_file(root: Path, relative: str) -> Path:
    path = root / relative
    if not path.is_file():
        raise DataMissingError(
            f"benchmark data file {relative!r} not found: looked for {path} "
            f"(data folder from ${DATA_DIR_ENV} or <repo>/../shared/data)"
        )
    return path


_Stamp = tuple[int, int] | None


def _stamp(path: Path) -> _Stamp:
    """(mtime_ns, size) of a file, None when absent: part of every cache key, so an edited
    file is re-read."""
    try:
        info = path.stat()
    except OSError:
        return None
    return (info.st_mtime_ns, info.st_size)


def _splits(root: Path) -> dict[str, dict[str, Any]]:
    return _splits_cached(str(root), _stamp(root / "splits.json"))


@lru_cache(maxsize=8)
def _splits_cached(root_str: str, stamp: _Stamp) -> dict[str, dict[str, Any]]:
    path = _require_file(Path(root_str), "splits.json")
    try:
        spec = json.loads(path.read_text(encoding="utf-8"))
        files = spec["files"]
        if not isinstance(files, dict):
            raise TypeError("'files' is not an object")
    except (OSError, UnicodeDecodeError, ValueError, KeyError, TypeError) as exc:
        raise CorpusError(f"unreadable splits file {path}: {exc}") from exc
    return files


def _row_numbers(spec: Any, n_rows: int, path: Path, split: str) -> list[int]:
    """Expand a splits.json entry (``"all"`` or ``[[start, stop), ...]``) to row numbers."""
    if spec == "all":
        return list(range(n_rows))
    rows: list[int] = []
    try:
        for start, stop in spec:
            if not (isinstance(start, int) and isinstance(stop, int) and 0 <= start <= stop):
                raise ValueError(f"bad range {[start, stop]}")
            if stop > n_rows:
                raise ValueError(f"range {[start, stop]} runs past the file's {n_rows} rows")
            rows.extend(range(start, stop))
    except (TypeError, ValueError) as exc:
        raise CorpusError(f"splits.json entry {split!r} for {path}: {exc}") from exc
    return rows


# --------------------------------------------------------------------------------------------
# Reading files
# --------------------------------------------------------------------------------------------


def _raw_rows(path: Path) -> list[Any]:
    """Rows of a JSON list or JSON Lines file (row = list position or 0-based line number;
    blank lines are rows holding ``None``)."""
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise CorpusError(f"cannot read {path}: not UTF-8 text ({exc.reason})") from exc
    except OSError as exc:
        raise CorpusError(f"cannot read {path}: {exc.strerror or exc}") from exc
    if text.lstrip().startswith("["):
        try:
            rows = json.loads(text)
        except json.JSONDecodeError as exc:
            raise CorpusError(
                f"malformed JSON in {path} (line {exc.lineno} column {exc.colno}): {exc.msg}"
            ) from exc
        except RecursionError:  # absurdly deep nesting: malformed, not a crash
            raise CorpusError(f"malformed JSON in {path}: nested too deeply") from None
        if not isinstance(rows, list):
            raise CorpusError(f"{path}: expected a JSON list of rows")
        return rows
    out: list[Any] = []
    for row, line in enumerate(text.splitlines()):
        if not line.strip():
            out.append(None)
            continue
        try:
            out.append(json.loads(line))
        except json.JSONDecodeError as exc:
            raise CorpusError(f"malformed row {row} of {path}: invalid JSON ({exc.msg})") from exc
        except RecursionError:
            raise CorpusError(f"malformed row {row} of {path}: nested too deeply") from None
    return out


# What a malformed row can raise while it is parsed.
_ROW_ERRORS = (KeyError, TypeError, ValueError, IndexError, AttributeError, ArithmeticError)


def _malformed_row(exc: Exception, index: int, path: Path) -> CorpusError:
    """The error naming the file and row that could not be parsed."""
    what = f"missing field {exc}" if isinstance(exc, KeyError) else str(exc)
    return CorpusError(f"malformed row {index} of {path}: {what}")


def _norm_space(text: str) -> str:
    return " ".join(text.split())


def passage_id(title: str, text: str) -> str:
    """Content-addressed id ``"{title}#{sha1(title + "\\n" + text)[:10]}"``."""
    digest = hashlib.sha1(f"{title}\n{text}".encode()).hexdigest()[:10]
    return f"{title}#{digest}"


def _str(value: Any, name: str) -> str:
    if not isinstance(value, str):
        raise TypeError(f"field {name!r} must be a string, got {type(value).__name__}")
    return value


def _list(value: Any, name: str) -> list[Any]:
    if not isinstance(value, list):
        raise TypeError(f"field {name!r} must be a list, got {type(value).__name__}")
    return value


def _paragraph(title: Any, body: Any, name: str) -> Passage:
    """A passage from a title and either a text or a list of sentences."""
    title = _str(title, f"{name} title")
    if isinstance(body, list):
        text = " ".join(_str(sentence, f"{name} sentence") for sentence in body)
    else:
        text = _str(body, f"{name} text")
    text = _norm_space(text)
    return Passage(id=passage_id(title, text), title=title, text=text)


def _unique(passages: Iterable[Passage]) -> tuple[Passage, ...]:
    """Drop repeated passages (same id) within one question, keeping the first."""
    seen: dict[str, Passage] = {}
    for passage in passages:
        seen.setdefault(passage.id, passage)
    return tuple(seen.values())


def _gold_by_title(passages: Sequence[Passage], titles: Sequence[str]) -> tuple[str, ...]:
    by_title: dict[str, list[str]] = {}
    for passage in passages:
        by_title.setdefault(passage.title, []).append(passage.id)
    gold: list[str] = []
    for title in dict.fromkeys(titles):
        if title not in by_title:
            raise ValueError(f"supporting title {title!r} is not among the context titles")
        gold.extend(by_title[title])
    return tuple(dict.fromkeys(gold))


# A parsed row before a split is assigned; None marks a row to skip.
_Parser = Callable[[dict[str, Any], int, str], "QAExample | None"]


def _parse_standard(row: dict[str, Any], index: int, dataset: str) -> QAExample | None:
    """HotpotQA/2Wiki standard layout: ``context`` = [[title, [sentences]]], ``supporting_facts``
    = [[title, sentence id]]."""
    context = row.get("context")
    if dataset == "2wiki" and not context:
        return None  # splits.json: 2Wiki rows without paragraphs are unusable
    passages = _unique(_paragraph(t, s, "context") for t, s in _list(context, "context"))
    facts = tuple(
        (_str(title, "supporting_facts title"), int(sentence))
        for title, sentence in _list(row["supporting_facts"], "supporting_facts")
    )
    meta: dict[str, Any] = {"supporting_facts": facts}
    for key in ("type", "level"):
        if isinstance(row.get(key), str):
            meta[key] = row[key]
    if isinstance(row.get("evidences"), list):
        meta["evidences"] = tuple(tuple(str(part) for part in ev) for ev in row["evidences"])
    return QAExample(
        id=_str(row["_id"], "_id"),
        question=_str(row["question"], "question"),
        answers=(_str(row["answer"], "answer"),),
        support=_gold_by_title(passages, [title for title, _ in facts]),
        passages=passages,
        dataset=dataset,
        row=index,
        split="",
        meta=meta,
    )


def _parse_explorer(row: dict[str, Any], index: int, dataset: str) -> QAExample:
    """HotpotQA explorer sample: ``title_a``/``para_a``, ``title_b``/``para_b`` (the gold
    paragraphs), ``distractors`` = [[title, [sentences], score]]."""
    gold = [
        _paragraph(row["title_a"], _list(row["para_a"], "para_a"), "para_a"),
        _paragraph(row["title_b"], _list(row["para_b"], "para_b"), "para_b"),
    ]
    distractors = [
        _paragraph(entry[0], _list(entry[1], "distractors"), "distractors")
        for entry in _list(row["distractors"], "distractors")
    ]
    passages = _unique(sorted([*gold, *distractors], key=lambda p: (p.title, p.id)))
    facts_a, facts_b = _list(row["supporting_facts"], "supporting_facts")
    facts = tuple((gold[0].title, int(i)) for i in facts_a) + tuple(
        (gold[1].title, int(i)) for i in facts_b
    )
    return QAExample(
        id=_str(row["_id"], "_id"),
        question=_str(row["question"], "question"),
        answers=(_str(row["answer"], "answer"),),
        support=tuple(dict.fromkeys(p.id for p in gold)),
        passages=passages,
        dataset=dataset,
        row=index,
        split="",
        meta={"supporting_facts": facts},
    )


def _parse_ircot(row: dict[str, Any], index: int, dataset: str) -> QAExample:
    """IRCoT processed layout: ``contexts`` = [{title, paragraph_text, is_supporting}]."""
    passages: list[Passage] = []
    support: list[str] = []
    for ctx in _list(row["contexts"], "contexts"):
        passage = _paragraph(ctx["title"], ctx["paragraph_text"], "contexts")
        passages.append(passage)
        if ctx.get("is_supporting") is True:
            support.append(passage.id)
    answers = [
        _str(span, "answers_objects span")
        for obj in _list(row["answers_objects"], "answers_objects")
        for span in _list(obj["spans"], "spans")
    ]
    if not answers or not support:
        raise ValueError("row has no answer span or no supporting context")
    return QAExample(
        id=_str(row["question_id"], "question_id"),
        question=_str(row["question_text"], "question_text"),
        answers=tuple(dict.fromkeys(answers)),
        support=tuple(dict.fromkeys(support)),
        passages=_unique(passages),
        dataset=dataset,
        row=index,
        split="",
        meta={},
    )


def _parse_musique(row: dict[str, Any], index: int, dataset: str) -> QAExample:
    """MuSiQue: ``paragraphs`` = [{idx, title, paragraph_text, is_supporting}]; titles can
    repeat, so paragraphs are told apart by content (their ``idx`` is kept in ``meta``)."""
    passages: list[Passage] = []
    by_idx: dict[int, str] = {}
    support: list[str] = []
    for para in _list(row["paragraphs"], "paragraphs"):
        passage = _paragraph(para["title"], para["paragraph_text"], "paragraphs")
        idx = para["idx"]
        if not isinstance(idx, int) or idx in by_idx:
            raise ValueError(f"paragraph idx {idx!r} is not a unique integer")
        by_idx[idx] = passage.id
        passages.append(passage)
        if para.get("is_supporting") is True:
            support.append(passage.id)
    if not support:
        raise ValueError("row has no supporting paragraph")
    steps = []
    for step in _list(row.get("question_decomposition", []), "question_decomposition"):
        support_idx = step.get("paragraph_support_idx")
        steps.append(
            (
                _str(step["question"], "decomposition question"),
                _str(step["answer"], "decomposition answer"),
                by_idx.get(support_idx) if isinstance(support_idx, int) else None,
            )
        )
    aliases = [_str(a, "answer_aliases") for a in _list(row.get("answer_aliases", []), "aliases")]
    return QAExample(
        id=_str(row["id"], "id"),
        question=_str(row["question"], "question"),
        answers=tuple(dict.fromkeys([_str(row["answer"], "answer"), *aliases])),
        support=tuple(dict.fromkeys(support)),
        passages=_unique(passages),
        dataset=dataset,
        row=index,
        split="",
        meta={
            "hops": len(steps),
            "decomposition": tuple(steps),
            "answerable": bool(row.get("answerable", True)),
            "paragraph_idx": tuple(by_idx.items()),
        },
    )


def _row_parser(row: dict[str, Any], dataset: str) -> _Parser:
    """Pick the layout of one row from its keys (files of one dataset differ in layout)."""
    if dataset.startswith("dsrag"):
        raise AssertionError("DS-RAG rows are parsed by _parse_dsrag_file")
    if dataset == "musique" or "paragraphs" in row:
        return _parse_musique
    if "contexts" in row:
        return _parse_ircot
    if "title_a" in row:
        return _parse_explorer
    return _parse_standard


@lru_cache(maxsize=32)
def _parsed_file(
    path_str: str, dataset: str, source: str, stamps: tuple[_Stamp, ...]
) -> tuple[QAExample | None, ...]:
    """Every row of one file as a QAExample with ``split=""`` (None for skipped rows).
    ``stamps`` (of the file, and for DS-RAG of the corpus) only key the cache."""
    path = Path(path_str)
    if dataset.startswith("dsrag"):
        return _parse_dsrag_file(path, dataset, source)
    out: list[QAExample | None] = []
    for index, row in enumerate(_raw_rows(path)):
        if row is None:  # a blank line of a JSON Lines file
            out.append(None)
            continue
        try:
            if not isinstance(row, dict):
                raise TypeError(f"expected a JSON object, got {type(row).__name__}")
            example = _row_parser(row, dataset)(row, index, dataset)
        except _ROW_ERRORS as exc:
            raise _malformed_row(exc, index, path) from exc
        if example is not None:
            example = replace(example, meta={**example.meta, "source": source})
        out.append(example)
    return tuple(out)


# --------------------------------------------------------------------------------------------
# DS-RAG: recursive character splitting and gold chunks
# --------------------------------------------------------------------------------------------


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


@dataclass(frozen=True)
class _DsragIndex:
    text: str
    spans: tuple[tuple[int, int], ...]
    passages: tuple[Passage, ...]
    starts: tuple[int, ...]
    ends: tuple[int, ...]
    gold_cache: dict[str, tuple[str, ...]] = field(compare=False, repr=False)


def _dsrag_index(root: Path) -> _DsragIndex:
    return _dsrag_index_cached(str(root), _stamp(root / DSRAG_CORPUS_FILE))


@lru_cache(maxsize=4)
def _dsrag_index_cached(root_str: str, stamp: _Stamp) -> _DsragIndex:
    path = _require_file(Path(root_str), DSRAG_CORPUS_FILE)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise CorpusError(f"cannot read the DS-RAG corpus {path}: {exc}") from exc
    spans = tuple(split_spans(text))
    if not spans:
        raise CorpusError(f"the DS-RAG corpus is empty: {path}")
    parent = Path(DSRAG_CORPUS_FILE).name
    passages = tuple(
        Passage(id=f"multisourceqa-{n:05d}", title="", text=text[a:b], parent_id=parent)
        for n, (a, b) in enumerate(spans)
    )
    starts, ends = tuple(a for a, _ in spans), tuple(b for _, b in spans)
    if any(a > b for a, b in pairwise(starts)) or any(a > b for a, b in pairwise(ends)):
        raise AssertionError("chunk offsets must be non-decreasing")  # split_spans guarantees it
    return _DsragIndex(
        text=text,
        spans=spans,
        passages=passages,
        starts=starts,
        ends=ends,
        gold_cache={},
    )


def _chunks_for_occurrence(index: _DsragIndex, start: int, end: int) -> list[int]:
    # Chunks are ordered with non-decreasing starts and ends: the ones holding [start, end)
    # whole form one index range.
    lo, hi = bisect_left(index.ends, end), bisect_right(index.starts, start)
    if lo < hi:
        return list(range(lo, hi))
    best, best_overlap = -1, 0
    for n in range(bisect_right(index.ends, start), bisect_left(index.starts, end)):
        overlap = min(index.ends[n], end) - max(index.starts[n], start)
        if overlap > best_overlap:
            best, best_overlap = n, overlap
    return [best] if best >= 0 else []


def _dsrag_gold_group(index: _DsragIndex, sentence: str) -> tuple[str, ...]:
    """Chunk ids of every corpus occurrence of ``sentence`` (see module doc), memoised."""
    cached = index.gold_cache.get(sentence)
    if cached is None:
        chunks: set[int] = set()
        position = index.text.find(sentence)
        while position != -1:
            chunks.update(_chunks_for_occurrence(index, position, position + len(sentence)))
            position = index.text.find(sentence, position + 1)
        cached = tuple(index.passages[n].id for n in sorted(chunks))
        index.gold_cache[sentence] = cached
    return cached


def _parse_dsrag_file(path: Path, dataset: str, source: str) -> tuple[QAExample | None, ...]:
    corpus = _dsrag_index(path.parents[2])  # <data>/dsrag/<kind>/<file>.json
    out: list[QAExample | None] = []
    for index, row in enumerate(_raw_rows(path)):
        try:
            if not isinstance(row, dict):
                raise TypeError(f"expected a JSON object, got {type(row).__name__}")
            sentences = [
                _str(s, "gt_doc").strip() for s in _list(row["gt_doc"], "gt_doc") if s.strip()
            ]
            if not sentences:
                raise ValueError("gt_doc is empty")
            groups = []
            for sentence in sentences:
                group = _dsrag_gold_group(corpus, sentence)
                if not group:
                    raise ValueError(f"gt_doc sentence {sentence!r} is not in the corpus")
                groups.append(group)
            combination = row["combination"]
            if not isinstance(combination, dict):
                raise TypeError("field 'combination' must be an object")
            meta: dict[str, Any] = {
                "source": source,
                "attribute": _str(combination["D"], "combination.D"),
                "people": tuple(_str(c, "C_values") for c in _list(combination["C_values"], "C")),
                "used_categories": tuple(
                    str(c) for c in _list(combination.get("used_categories", []), "categories")
                ),
                "gt_doc": tuple(sentences),
                "gold_groups": tuple(groups),
                "hops": len(sentences),
            }
            if isinstance(combination.get("compare"), str):
                meta["compare"] = combination["compare"]
            support = tuple(dict.fromkeys(pid for group in groups for pid in group))
            out.append(
                QAExample(
                    id=f"{path.stem}-{index}",
                    question=_str(row["question"], "question"),
                    answers=(_str(row["gt_ans"], "gt_ans"),),
                    support=support,
                    passages=(),
                    dataset=dataset,
                    row=index,
                    split="",
                    meta=meta,
                )
            )
        except _ROW_ERRORS as exc:
            raise _malformed_row(exc, index, path) from exc
    return tuple(out)


def default_setting(dataset: str) -> str:
    """``distractor`` where rows carry their own paragraphs; ``open`` for DS-RAG, which has
    only its corpus."""
    return "open" if dataset.startswith("dsrag") else "distractor"


def dsrag_corpus() -> list[Passage]:
    """The whole DS-RAG corpus ``multisourceqa.txt``, chunked 250/50 (ids
    ``multisourceqa-NNNNN``, ``parent_id="multisourceqa.txt"``, empty titles)."""
    return list(_dsrag_index(data_dir()).passages)


# --------------------------------------------------------------------------------------------
# Public loading API
# --------------------------------------------------------------------------------------------


def _dataset_files(root: Path, dataset: str) -> list[tuple[str, dict[str, Any]]]:
    files = [
        (rel, spec) for rel, spec in _splits(root).items() if rel.startswith(_PREFIXES[dataset])
    ]
    if not files:
        raise DataMissingError(
            f"splits.json in {root} lists no file for dataset {dataset!r} "
            f"(expected paths under {_PREFIXES[dataset]!r})"
        )
    for rel, spec in files:
        if not isinstance(spec, dict):
            raise CorpusError(f"splits.json entry for {rel!r} must be an object")
    return files


def _file_stamps(root: Path, dataset: str, rel: str) -> tuple[_Stamp, ...]:
    stamps = [_stamp(root / rel)]
    if dataset.startswith("dsrag"):
        stamps.append(_stamp(root / DSRAG_CORPUS_FILE))
    return tuple(stamps)


@lru_cache(maxsize=32)
def _load(
    dataset: str, split: str, root_str: str, fingerprint: tuple[Any, ...]
) -> tuple[QAExample, ...]:
    """``fingerprint`` (splits.json and file stamps) only keys the cache."""
    root = Path(root_str)
    chosen: dict[str, list[QAExample]] = {"train": [], "eval": []}
    for rel, spec in _dataset_files(root, dataset):
        path = _require_file(root, rel)
        rows = _parsed_file(str(path), dataset, rel, _file_stamps(root, dataset, rel))
        for name in SPLITS:
            for row in _row_numbers(spec.get(name, []), len(rows), path, name):
                example = rows[row]
                if example is not None:
                    chosen[name].append(replace(example, split=name))
    eval_ids = {example.id for example in chosen["eval"]}
    out: list[QAExample] = []
    seen: set[str] = set()
    for example in chosen[split]:
        if example.id in seen or (split == "train" and example.id in eval_ids):
            continue
        seen.add(example.id)
        out.append(example)
    return tuple(out)


def load_examples(dataset: str, split: Split, limit: int | None = None) -> list[QAExample]:
    """The ``split`` rows of every file of ``dataset`` listed in splits.json, in file order.

    ``dataset`` is one of :data:`DATASETS`; ``limit`` keeps the first ``limit`` examples.
    Train rows whose question is also an eval question are dropped, as are repeated question
    ids and 2Wiki rows without context. Raises :class:`DataMissingError` when the data is
    absent and :class:`CorpusError` (naming file and row) for a malformed row. Parsed files
    are cached per process.
    """
    if dataset not in DATASETS:
        raise UserInputError(f"unknown dataset {dataset!r}; choose one of {', '.join(DATASETS)}")
    if split not in SPLITS:
        raise UserInputError(f"split must be 'train' or 'eval', got {split!r}")
    if limit is not None and (not isinstance(limit, int) or limit < 0):
        raise UserInputError(f"limit must be a non-negative integer or None, got {limit!r}")
    root = data_dir()
    fingerprint = (
        _stamp(root / "splits.json"),
        *((rel, _file_stamps(root, dataset, rel)) for rel, _ in _dataset_files(root, dataset)),
    )
    examples = _load(dataset, split, str(root), fingerprint)
    return list(examples if limit is None else examples[:limit])


def open_corpus(examples: Iterable[QAExample]) -> list[Passage]:
    """The open-setting retrieval pool of ``examples``: their paragraphs, pooled and
    de-duplicated by id in first-seen order; DS-RAG examples contribute the whole chunked
    corpus (:func:`dsrag_corpus`)."""
    pool: dict[str, Passage] = {}
    with_dsrag = False
    for example in examples:
        if example.dataset.startswith("dsrag") and not with_dsrag:
            with_dsrag = True
            for passage in dsrag_corpus():
                pool.setdefault(passage.id, passage)
        for passage in example.passages:
            pool.setdefault(passage.id, passage)
    return list(pool.values())

"""Loading a dataset's train or eval rows as listed in splits.json, and the open-setting pool.

Each dataset's files are read by its parser (one protocol, :data:`FileParser`): the Wikipedia
datasets' by :func:`~dynakrag.data.datasets.wikipedia.parse_wikipedia_file`, DS-RAG's by
:func:`~dynakrag.data.datasets.dsrag.parse_dsrag_file`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import replace
from functools import lru_cache
from pathlib import Path
from typing import Any, Literal

from dynakrag.data.datasets.dsrag import DSRAG_CORPUS_FILE, dsrag_corpus, parse_dsrag_file
from dynakrag.data.datasets.examples import QAExample
from dynakrag.data.datasets.location import (
    DataMissingError,
    FileStamp,
    data_dir,
    file_stamp,
    require_file,
    row_numbers,
    split_files,
)
from dynakrag.data.datasets.wikipedia import parse_wikipedia_file
from dynakrag.errors import CorpusError, UserInputError
from dynakrag.retrieval.passage import Passage

DATASETS: tuple[str, ...] = ("hotpotqa", "2wiki", "musique", "dsrag-ranking", "dsrag-comparison")

Split = Literal["train", "eval"]
SPLITS: tuple[str, ...] = ("train", "eval")

# Which files of splits.json belong to which dataset.
_PREFIXES: dict[str, str] = {
    "hotpotqa": "hotpotqa/",
    "2wiki": "2wikimultihopqa/",
    "musique": "musique/",
    "dsrag-ranking": "dsrag/rankingqa/",
    "dsrag-comparison": "dsrag/comparisonqa/",
}


FileParser = Callable[[Path, str, str], tuple[QAExample | None, ...]]
"""``(path, dataset, source) -> rows``: every row of one file as a QAExample with ``split=""``
(None for a skipped row); ``source`` is the file relative to the data folder."""
_FILE_PARSERS: dict[str, FileParser] = {
    "hotpotqa": parse_wikipedia_file,
    "2wiki": parse_wikipedia_file,
    "musique": parse_wikipedia_file,
    "dsrag-ranking": parse_dsrag_file,
    "dsrag-comparison": parse_dsrag_file,
}


@lru_cache(maxsize=32)
def _parsed_file(
    path_str: str, dataset: str, source: str, stamps: tuple[FileStamp, ...]
) -> tuple[QAExample | None, ...]:
    """Every row of one file as a QAExample with ``split=""`` (None for skipped rows).
    ``stamps`` (of the file, and for DS-RAG of the corpus) only key the cache."""
    return _FILE_PARSERS[dataset](Path(path_str), dataset, source)


def default_setting(dataset: str) -> str:
    """``distractor`` where rows carry their own paragraphs; ``open`` for DS-RAG, which has
    only its corpus."""
    return "open" if dataset.startswith("dsrag") else "distractor"


def _dataset_files(root: Path, dataset: str) -> list[tuple[str, dict[str, Any]]]:
    files = [
        (rel, spec) for rel, spec in split_files(root).items() if rel.startswith(_PREFIXES[dataset])
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


def _file_stamps(root: Path, dataset: str, rel: str) -> tuple[FileStamp, ...]:
    stamps = [file_stamp(root / rel)]
    if dataset.startswith("dsrag"):
        stamps.append(file_stamp(root / DSRAG_CORPUS_FILE))
    return tuple(stamps)


@lru_cache(maxsize=32)
def _load(
    dataset: str, split: str, root_str: str, fingerprint: tuple[Any, ...]
) -> tuple[QAExample, ...]:
    """``fingerprint`` (splits.json and file stamps) only keys the cache."""
    root = Path(root_str)
    chosen: dict[str, list[QAExample]] = {"train": [], "eval": []}
    for rel, spec in _dataset_files(root, dataset):
        path = require_file(root, rel)
        rows = _parsed_file(str(path), dataset, rel, _file_stamps(root, dataset, rel))
        for name in SPLITS:
            for row in row_numbers(spec.get(name, []), len(rows), path, name):
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
        file_stamp(root / "splits.json"),
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

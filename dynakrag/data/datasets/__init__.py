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

from dynakrag.data.datasets.dsrag import dsrag_corpus
from dynakrag.data.datasets.examples import FrozenMeta, QAExample, require_train_split
from dynakrag.data.datasets.loading import (
    DATASETS,
    Split,
    default_setting,
    load_examples,
    open_corpus,
)
from dynakrag.data.datasets.location import DATA_DIR_ENV, DataMissingError, data_dir
from dynakrag.data.datasets.paragraphs import passage_id
from dynakrag.data.datasets.text_splitter import (
    DSRAG_CHUNK_OVERLAP,
    DSRAG_CHUNK_SIZE,
    split_spans,
    split_text,
)

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
    "default_setting",
    "dsrag_corpus",
    "load_examples",
    "open_corpus",
    "passage_id",
    "require_train_split",
    "split_spans",
    "split_text",
]

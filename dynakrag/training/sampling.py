"""Stratified samples of training questions that grow without changing what they hold.

``dynakrag collect --sample K`` labels K questions of a dataset, stratified by question type
and hop count (:func:`question_stratum`), so that a small collection already sees every kind
of question in its share. The sample is a prefix of one fixed order of all the dataset's
train questions (:func:`stratified_order`): a larger K keeps every question of a smaller one
and adds new ones, so a collection of 100 questions resumes into one of 200 by collecting only
the 100 new questions. The order depends only on the questions and the seed.

The order: within each stratum, questions are shuffled by a seeded hash of their id; the
question of rank ``r`` in a stratum of ``n`` sits at the quantile ``(r + 1/2) / n``, and all
questions are sorted by quantile. Any prefix of K questions then holds each stratum in
proportion to its size (within one question either way).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

from dynakrag.data.datasets import QAExample

__all__ = ["question_stratum", "stratified_order", "stratified_sample"]

Stratum = tuple[str, int]


def question_stratum(example: QAExample) -> Stratum:
    """``(question type, hop count)``: the type the dataset gives (HotpotQA's and 2Wiki's
    ``type``, the demo's ``kind``; "" where none is given) and the number of hops (MuSiQue's
    and the demo's ``hops``, else the number of gold support items)."""
    kind = example.meta.get("type", example.meta.get("kind", ""))
    hops = example.meta.get("hops")
    if not isinstance(hops, int) or isinstance(hops, bool):
        hops = len(example.gold_sets)
    return (str(kind or ""), hops)


def _shuffle_key(example: QAExample, seed: int) -> str:
    return hashlib.sha256(f"{seed}|{example.dataset}|{example.id}".encode()).hexdigest()


def stratified_order(examples: Sequence[QAExample], seed: int = 13) -> list[QAExample]:
    """All ``examples`` in the order whose every prefix is a stratified sample (module
    docstring)."""
    strata: dict[Stratum, list[QAExample]] = {}
    for example in examples:
        strata.setdefault(question_stratum(example), []).append(example)
    placed: list[tuple[float, str, QAExample]] = []
    for members in strata.values():
        members.sort(key=lambda example: _shuffle_key(example, seed))
        for rank, example in enumerate(members):
            placed.append(((rank + 0.5) / len(members), _shuffle_key(example, seed), example))
    placed.sort(key=lambda item: (item[0], item[1]))
    return [example for _, _, example in placed]


def stratified_sample(examples: Sequence[QAExample], k: int, seed: int = 13) -> list[QAExample]:
    """The first ``k`` questions of :func:`stratified_order` (all of them when fewer)."""
    return stratified_order(examples, seed)[:k]

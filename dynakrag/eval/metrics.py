"""Evaluation metrics for multi-hop QA and retrieval, in pure Python.

Answer quality
    * :func:`exact_match` and :func:`f1_score`: SQuAD-normalised answer match (lower-case, drop
      punctuation and the articles a/an/the, collapse whitespace), best over the gold answers.
    * :func:`anls`: Average Normalised Levenshtein Similarity (Biten et al. 2019), as used by
      DS-RAG (Kwon et al. 2025, eq. 7-8) with tau = 0.5.

Retrieval quality (DS-RAG eq. 5-6, HotpotQA/MuSiQue "support recall")
    * :func:`context_precision`, :func:`context_recall`, :func:`context_f1`,
      :func:`support_recall`, :func:`anc`.

Question decomposition (DS-RAG section 3.2)
    * :func:`entity_addition_rate` (EAR) and :func:`entity_omission_rate` (EOR).

Aggregation
    * :func:`summarize` averages per-question metric dicts (macro average).

Gold evidence
    Every retrieval metric takes ``gold`` as an iterable whose items are either a passage id
    (``str``) or a non-string collection of ids. A collection is *one* gold item that is
    satisfied by any of its ids: DS-RAG inserts every ground-truth sentence into the corpus
    several times, so one gold sentence maps to several equally good chunks (see
    :attr:`dynakrag.data.datasets.QAExample.gold_sets`). Plain ids behave as singleton items,
    which gives the usual set-based definitions. Identical items are counted once.
"""

from __future__ import annotations

import math
import re
import string
from collections import Counter
from collections.abc import Collection, Iterable, Mapping, Sequence
from typing import Any

__all__ = [
    "GoldItems",
    "anc",
    "anls",
    "answer_metrics",
    "context_f1",
    "context_metrics",
    "context_precision",
    "context_recall",
    "ear",
    "entity_addition_rate",
    "entity_omission_rate",
    "eor",
    "exact_match",
    "f1_score",
    "levenshtein",
    "normalize_answer",
    "summarize",
    "support_recall",
]

#: Gold evidence of one question: ids, or collections of interchangeable ids (see module doc).
GoldItems = Iterable[str | Collection[str]]

_PUNCTUATION = frozenset(string.punctuation)
_ARTICLES = re.compile(r"\b(a|an|the)\b")
_YES_NO = frozenset({"yes", "no", "noanswer"})


# --------------------------------------------------------------------------------------------
# Answer metrics
# --------------------------------------------------------------------------------------------


def normalize_answer(text: str) -> str:
    """SQuAD normalisation: lower-case, drop punctuation, drop a/an/the, collapse whitespace."""
    text = "".join(ch for ch in text.lower() if ch not in _PUNCTUATION)
    text = _ARTICLES.sub(" ", text)
    return " ".join(text.split())


def _as_answers(answers: str | Iterable[str]) -> list[str]:
    return [answers] if isinstance(answers, str) else list(answers)


def exact_match(prediction: str, answers: str | Iterable[str]) -> float:
    """1.0 if ``normalize_answer(prediction)`` equals that of any gold answer, else 0.0.

    ``EM = max_j [norm(prediction) == norm(answer_j)]``; no gold answers gives 0.0.
    """
    pred = normalize_answer(prediction)
    return float(any(pred == normalize_answer(gold) for gold in _as_answers(answers)))


def _token_f1(prediction: str, gold: str) -> float:
    pred_norm, gold_norm = normalize_answer(prediction), normalize_answer(gold)
    # HotpotQA's official rule: a yes/no/noanswer answer only matches itself exactly.
    if (pred_norm in _YES_NO or gold_norm in _YES_NO) and pred_norm != gold_norm:
        return 0.0
    pred_tokens, gold_tokens = pred_norm.split(), gold_norm.split()
    common = Counter(pred_tokens) & Counter(gold_tokens)
    same = sum(common.values())
    if same == 0:
        return 0.0
    precision, recall = same / len(pred_tokens), same / len(gold_tokens)
    return 2 * precision * recall / (precision + recall)


def f1_score(prediction: str, answers: str | Iterable[str]) -> float:
    """Token-level F1 of the normalised answers, best over the gold answers.

    With ``c`` = number of tokens in common (multiset intersection),
    ``P = c / |pred tokens|``, ``R = c / |gold tokens|``, ``F1 = 2PR / (P + R)`` (0 when
    ``c = 0``). As in the official HotpotQA script, when either side normalises to
    ``yes``/``no``/``noanswer`` the score is 0 unless both are identical. No gold answers
    gives 0.0.
    """
    return max((_token_f1(prediction, gold) for gold in _as_answers(answers)), default=0.0)


def levenshtein(a: str, b: str) -> int:
    """Edit distance (insertions, deletions, substitutions all cost 1) between ``a`` and ``b``."""
    if len(a) < len(b):
        a, b = b, a
    previous = list(range(len(b) + 1))
    for i, char_a in enumerate(a, start=1):
        current = [i]
        for j, char_b in enumerate(b, start=1):
            current.append(
                min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (char_a != char_b))
            )
        previous = current
    return previous[-1]


def _anls_norm(text: str) -> str:
    # The reference ANLS implementation is case-insensitive and collapses whitespace.
    return " ".join(text.lower().split())


def _nls(prediction: str, gold: str, tau: float) -> float:
    pred, ref = _anls_norm(prediction), _anls_norm(gold)
    longest = max(len(pred), len(ref))
    if longest == 0:
        return 1.0
    # The distance is at least the length difference: skip the DP when that already fails.
    if abs(len(pred) - len(ref)) / longest >= tau:
        return 0.0
    nl = levenshtein(pred, ref) / longest
    return 1.0 - nl if nl < tau else 0.0


def anls(prediction: str, answers: str | Iterable[str], tau: float = 0.5) -> float:
    """Normalised Levenshtein similarity of one question (average it over questions for ANLS).

    ``NL(a, o) = levenshtein(a, o) / max(|a|, |o|)`` on lower-cased, whitespace-collapsed
    strings; ``s(a, o) = 1 - NL(a, o)`` if ``NL < tau`` else 0; the score is
    ``max_j s(a_j, o)`` (DS-RAG eq. 7-8). Two empty strings have similarity 1. No gold
    answers gives 0.0.
    """
    if not 0.0 <= tau <= 1.0:
        raise ValueError(f"tau must be in [0, 1], got {tau}")
    return max((_nls(prediction, gold, tau) for gold in _as_answers(answers)), default=0.0)


def answer_metrics(prediction: str, answers: str | Iterable[str]) -> dict[str, float]:
    """``{"em", "f1", "anls"}`` of one prediction, ready for :func:`summarize`."""
    gold = _as_answers(answers)
    return {
        "em": exact_match(prediction, gold),
        "f1": f1_score(prediction, gold),
        "anls": anls(prediction, gold),
    }


# --------------------------------------------------------------------------------------------
# Retrieval metrics
# --------------------------------------------------------------------------------------------


def _gold_items(gold: GoldItems) -> list[frozenset[str]]:
    """Distinct, non-empty gold items; a bare ``str`` is a singleton item."""
    if isinstance(gold, str):
        raise TypeError("gold must be an iterable of ids or id collections, not a single str")
    items: list[frozenset[str]] = []
    seen: set[frozenset[str]] = set()
    for entry in gold:
        item = frozenset((entry,)) if isinstance(entry, str) else frozenset(entry)
        if item and item not in seen:
            seen.add(item)
            items.append(item)
    return items


def _covered(retrieved_ids: Iterable[str], gold: GoldItems) -> tuple[int, int]:
    """(number of gold items hit by at least one retrieved id, number of gold items)."""
    if isinstance(retrieved_ids, str):
        raise TypeError("retrieved_ids must be an iterable of ids, not a single str")
    retrieved = set(retrieved_ids)
    items = _gold_items(gold)
    return sum(1 for item in items if item & retrieved), len(items)


def context_precision(retrieved_ids: Sequence[str], gold: GoldItems) -> float:
    """DS-RAG eq. 5: ground-truth chunks in the context / chunks in the context.

    ``P = min(1, |{g in gold : g hit by the context}| / len(retrieved_ids))``. The numerator
    counts gold *items*, so a gold chunk (or another copy of the same gold sentence) that
    appears several times counts once, while every position of ``retrieved_ids`` counts in
    the denominator. The ``min`` only matters when one chunk holds two gold items. An empty
    context gives 0.0.
    """
    retrieved = list(retrieved_ids)
    if not retrieved:
        return 0.0
    hit, _ = _covered(retrieved, gold)
    return min(1.0, hit / len(retrieved))


def context_recall(retrieved_ids: Iterable[str], gold: GoldItems) -> float:
    """DS-RAG eq. 6: ground-truth chunks in the context / ground-truth chunks.

    ``R = |{g in gold : g hit by the context}| / |gold|``; no gold items gives 0.0 (the
    reference implementation's convention).
    """
    hit, total = _covered(retrieved_ids, gold)
    return hit / total if total else 0.0


def support_recall(evidence_ids: Iterable[str], gold: GoldItems) -> float:
    """Support Recall (SR): fraction of a question's gold paragraphs in the final evidence.

    ``SR = |{g in gold : g in evidence}| / |gold|`` -- the same formula as
    :func:`context_recall`, named for the multi-hop benchmarks. No gold gives 0.0.
    """
    return context_recall(evidence_ids, gold)


def state_support_recall(state: Mapping[str, Any], gold: GoldItems) -> float:
    """SR of a run state's evidence against ``gold`` (ids, or one id collection per item)."""
    return support_recall([doc["id"] for doc in state.get("evidence") or []], gold)


def context_f1(retrieved_ids: Sequence[str], gold: GoldItems) -> float:
    """Harmonic mean ``2PR / (P + R)`` of :func:`context_precision` and
    :func:`context_recall` (0.0 when both are 0)."""
    retrieved, items = list(retrieved_ids), _gold_items(gold)
    precision = context_precision(retrieved, items)
    recall = context_recall(retrieved, items)
    if precision + recall == 0:
        return 0.0
    return 2 * precision * recall / (precision + recall)


def anc(contexts: Iterable[Sequence[str]]) -> float:
    """Average Number of Chunks: ``ANC = (1/N) sum_i len(context_i)`` over N questions.

    Each element is the list of chunk ids given to the LLM for one question; every position
    counts (a proxy for LLM input cost). No questions gives 0.0.
    """
    sizes = [len(context) for context in contexts]
    return sum(sizes) / len(sizes) if sizes else 0.0


def context_metrics(retrieved_ids: Sequence[str], gold: GoldItems) -> dict[str, float]:
    """``{"precision", "recall", "f1", "num_chunks"}`` of one question's context.

    Averaging ``num_chunks`` with :func:`summarize` gives ANC.
    """
    retrieved = list(retrieved_ids)
    items = _gold_items(gold)
    return {
        "precision": context_precision(retrieved, items),
        "recall": context_recall(retrieved, items),
        "f1": context_f1(retrieved, items),
        "num_chunks": float(len(retrieved)),
    }


# --------------------------------------------------------------------------------------------
# Question-decomposition metrics (EAR / EOR)
# --------------------------------------------------------------------------------------------


def _entity_set(entities: Iterable[str | Iterable[str]]) -> set[str]:
    """Flatten one level (a sub-question's entities may be a collection), case-fold, and
    collapse whitespace so that ``"Taylor  Swift"`` and ``"taylor swift"`` are one entity."""
    if isinstance(entities, str):
        raise TypeError("entities must be an iterable of strings, not a single str")
    flat: set[str] = set()
    for entry in entities:
        for entity in (entry,) if isinstance(entry, str) else entry:
            key = " ".join(entity.casefold().split())
            if key:
                flat.add(key)
    return flat


def entity_addition_rate(
    original_entities: Iterable[str], decomposed_entities: Iterable[str | Iterable[str]]
) -> float:
    """EAR: share of the sub-questions' entities that are not in the original question.

    With ``O`` the original question's entities and ``D`` the union of the sub-questions'
    entities (``decomposed_entities`` may hold strings or one collection per sub-question),
    ``EAR = |D \\ O| / |D|``; 0.0 when ``D`` is empty. Lower is better.
    """
    original, decomposed = _entity_set(original_entities), _entity_set(decomposed_entities)
    return len(decomposed - original) / len(decomposed) if decomposed else 0.0


def entity_omission_rate(
    original_entities: Iterable[str], decomposed_entities: Iterable[str | Iterable[str]]
) -> float:
    """EOR: share of the original question's entities missing from every sub-question.

    ``EOR = |O \\ D| / |O|`` with ``O`` and ``D`` as in :func:`entity_addition_rate`; 0.0
    when ``O`` is empty. Lower is better.
    """
    original, decomposed = _entity_set(original_entities), _entity_set(decomposed_entities)
    return len(original - decomposed) / len(original) if original else 0.0


ear = entity_addition_rate
eor = entity_omission_rate


# --------------------------------------------------------------------------------------------
# Aggregation
# --------------------------------------------------------------------------------------------


def summarize(records: Iterable[Mapping[str, object]]) -> dict[str, float]:
    """Macro-average per-question metric dicts.

    For every key, the mean of its numeric values (``bool`` counts as 0/1) over the records
    that have one; ``None``, strings, NaN and other non-numbers are skipped, so ids or notes
    can ride along. ``"n"`` is the number of records. Keys keep their first-seen order.
    """
    sums: dict[str, float] = {}
    counts: dict[str, int] = {}
    n = 0
    for record in records:
        n += 1
        for key, value in record.items():
            if not isinstance(value, int | float) or (
                isinstance(value, float) and math.isnan(value)
            ):
                continue
            sums[key] = sums.get(key, 0.0) + float(value)
            counts[key] = counts.get(key, 0) + 1
    summary = {key: sums[key] / counts[key] for key in sums}
    summary["n"] = float(n)
    return summary

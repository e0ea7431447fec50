"""Hand-worked cases for every metric in dynakrag.eval.metrics."""

from __future__ import annotations

import math

import pytest

from dynakrag.eval.metrics import (
    anc,
    anls,
    answer_metrics,
    context_f1,
    context_metrics,
    context_precision,
    context_recall,
    ear,
    entity_addition_rate,
    entity_omission_rate,
    eor,
    exact_match,
    f1_score,
    levenshtein,
    normalize_answer,
    summarize,
    support_recall,
)

# ---------------------------------------------------------------------------- answers


def test_normalize_answer_squad_rules() -> None:
    # lower -> drop punctuation -> drop a/an/the -> collapse whitespace
    assert normalize_answer("The  Quick, brown fox!") == "quick brown fox"
    assert normalize_answer("An apple a day") == "apple day"
    assert normalize_answer("theatre") == "theatre"  # articles only as whole words


def test_exact_match() -> None:
    assert exact_match("the Eiffel Tower.", ["Eiffel tower"]) == 1.0
    assert exact_match("Eiffel", ["Eiffel Tower"]) == 0.0
    assert exact_match("Paris", "paris") == 1.0  # a bare string is one answer
    assert exact_match("Paris", ["London", "PARIS!"]) == 1.0  # best over answers
    assert exact_match("Paris", []) == 0.0


def test_f1_score_token_overlap() -> None:
    # pred -> [cat, sat, on, mat] (4 tokens), gold -> [cat, on, mat] (3 tokens); common = 3
    # P = 3/4, R = 3/3, F1 = 2 * 0.75 * 1 / 1.75 = 6/7
    assert f1_score("the cat sat on the mat", ["a cat on a mat"]) == pytest.approx(6 / 7)
    # multiset overlap: pred [new, new, york], gold [new, york]: common = 2
    # P = 2/3, R = 1, F1 = (4/3) / (5/3) = 0.8
    assert f1_score("new new york", "New York") == pytest.approx(0.8)
    assert f1_score("Berlin", ["Paris"]) == 0.0
    assert f1_score("Berlin", []) == 0.0


def test_f1_score_is_max_over_answers() -> None:
    # vs "obama": P = 1/2, R = 1 -> 2/3; vs "president barack obama": P = 1, R = 2/3 -> 0.8
    assert f1_score("Barack Obama", ["Obama", "President Barack Obama"]) == pytest.approx(0.8)


def test_f1_score_yes_no_rule() -> None:
    # HotpotQA: a yes/no answer only matches exactly, no partial credit
    assert f1_score("yes it is", ["yes"]) == 0.0
    assert f1_score("Yes.", ["yes"]) == 1.0
    assert f1_score("no", ["yes"]) == 0.0


def test_levenshtein() -> None:
    assert levenshtein("kitten", "sitting") == 3  # k->s, e->i, +g
    assert levenshtein("flaw", "lawn") == 2  # -f, +n
    assert levenshtein("", "abc") == 3
    assert levenshtein("same", "same") == 0


def test_anls() -> None:
    # case and spacing are ignored: distance 0 -> 1.0
    assert anls("Neil  Armstrong", ["neil armstrong"]) == 1.0
    # "neil armstron" (13) vs "neil armstrong" (14): distance 1, NL = 1/14, s = 13/14
    assert anls("Neil Armstron", ["Neil Armstrong"]) == pytest.approx(13 / 14)
    # "kitten" vs "sitting": NL = 3/7 < 0.5, s = 4/7
    assert anls("kitten", "sitting") == pytest.approx(4 / 7)
    # ... but 3/7 >= tau = 0.4 -> 0
    assert anls("kitten", "sitting", tau=0.4) == 0.0
    # "taylor" vs "taylor swift": distance 6, NL = 6/12 = 0.5, not < 0.5 -> 0
    assert anls("Taylor", ["Taylor Swift"]) == 0.0
    # max over answers: exact match with the second answer
    assert anls("kitten", ["sitting", "KITTEN"]) == 1.0
    assert anls("", [""]) == 1.0
    assert anls("x", []) == 0.0
    with pytest.raises(ValueError):
        anls("a", ["a"], tau=1.5)


def test_answer_metrics_bundle() -> None:
    # em: "cat" vs "the cat" -> both "cat" -> 1; f1 1; anls "cat" vs "the cat": NL = 4/7 >= 0.5
    assert answer_metrics("cat", ["the cat"]) == {"em": 1.0, "f1": 1.0, "anls": 0.0}


# ---------------------------------------------------------------------------- retrieval


def test_context_precision_recall_f1_plain_ids() -> None:
    retrieved, gold = ["a", "b", "c", "d"], ["a", "c", "e"]
    # hits {a, c} = 2: P = 2/4, R = 2/3, F1 = 2 * (1/2)(2/3) / (1/2 + 2/3) = (2/3)/(7/6) = 4/7
    assert context_precision(retrieved, gold) == pytest.approx(0.5)
    assert context_recall(retrieved, gold) == pytest.approx(2 / 3)
    assert context_f1(retrieved, gold) == pytest.approx(4 / 7)


def test_repeated_gold_chunk_counts_once() -> None:
    # "a" twice: numerator 1 (counted once), denominator 3 positions
    # P = 1/3, R = 1/1, F1 = 2 * (1/3) / (4/3) = 0.5
    assert context_precision(["a", "a", "b"], ["a"]) == pytest.approx(1 / 3)
    assert context_recall(["a", "a", "b"], ["a"]) == 1.0
    assert context_f1(["a", "a", "b"], ["a"]) == pytest.approx(0.5)


def test_gold_groups_of_interchangeable_chunks() -> None:
    # DS-RAG: one gold sentence copied into chunks c1..c3, a second one only in c9.
    gold = [{"c1", "c2", "c3"}, "c9"]
    retrieved = ["c1", "c2", "x"]
    # items hit: only the first (c1 and c2 are copies of one gold sentence) -> 1
    # P = 1/3, R = 1/2, F1 = 2 * (1/3)(1/2) / (5/6) = 2/5
    assert context_precision(retrieved, gold) == pytest.approx(1 / 3)
    assert context_recall(retrieved, gold) == pytest.approx(0.5)
    assert context_f1(retrieved, gold) == pytest.approx(0.4)
    # one chunk holding two gold items: 2 items / 1 chunk, capped at 1
    assert context_precision(["k"], [{"k", "m"}, {"k", "n"}]) == 1.0
    assert context_recall(["k"], [{"k", "m"}, {"k", "n"}]) == 1.0


def test_retrieval_edge_cases() -> None:
    assert context_precision([], ["a"]) == 0.0
    assert context_recall([], ["a"]) == 0.0
    assert context_f1([], ["a"]) == 0.0
    assert context_recall(["a"], []) == 0.0  # no gold: 0 by convention
    assert context_f1(["a"], (g for g in ["a"])) == 1.0  # a generator is read once
    with pytest.raises(TypeError):
        context_recall(["a"], "a")  # a bare string is not a gold list
    with pytest.raises(TypeError):
        context_recall("a", ["a"])


def test_support_recall() -> None:
    # gold {p1, p3}, evidence holds p1 only -> 1/2; repeated gold ids count once
    assert support_recall(["p1", "p2", "p5"], ["p1", "p3"]) == 0.5
    assert support_recall(["p1", "p2", "p5"], ["p1", "p1", "p3"]) == 0.5
    assert support_recall(["p3", "p1"], ["p1", "p3"]) == 1.0


def test_anc() -> None:
    # (2 + 1 + 0) / 3 = 1.0 ; (4 + 2) / 2 = 3.0 ; every position counts: (2 + 1) / 2 = 1.5
    assert anc([["a", "b"], ["c"], []]) == 1.0
    assert anc([["a", "b", "c", "d"], ["x", "y"]]) == 3.0
    assert anc([["a", "a"], ["b"]]) == 1.5
    assert anc([]) == 0.0


def test_context_metrics_bundle() -> None:
    # P = 1/2, R = 1/2, F1 = 1/2, 2 chunks
    assert context_metrics(["a", "x"], ["a", "b"]) == {
        "precision": 0.5,
        "recall": 0.5,
        "f1": 0.5,
        "num_chunks": 2.0,
    }


# ---------------------------------------------------------------------------- EAR / EOR


def test_entity_addition_and_omission_rates() -> None:
    original = {"Neil Armstrong", "Wapakoneta", "birth date"}
    decomposed = [["Neil Armstrong", "birth date"], ["Taylor Swift", "birth date"]]
    # D = {neil armstrong, birth date, taylor swift}; D \ O = {taylor swift} -> EAR = 1/3
    assert entity_addition_rate(original, decomposed) == pytest.approx(1 / 3)
    # O \ D = {wapakoneta} -> EOR = 1/3
    assert entity_omission_rate(original, decomposed) == pytest.approx(1 / 3)
    # flat sets work too: D = {a, b, c, d}, O = {a, b}: EAR = 2/4, EOR = 0/2
    assert ear(["a", "b"], ["a", "b", "c", "d"]) == 0.5
    assert eor(["a", "b"], ["a", "b", "c", "d"]) == 0.0


def test_entity_rates_normalise_and_edges() -> None:
    # case and spacing are ignored -> nothing added, nothing omitted
    assert ear(["Taylor Swift"], ["taylor  swift"]) == 0.0
    assert eor(["Taylor Swift"], ["taylor  swift"]) == 0.0
    # no sub-question entities: nothing added (0), everything omitted (1/1)
    assert ear(["x"], []) == 0.0
    assert eor(["x"], []) == 1.0
    # no original entities: nothing to omit (0), all 2 sub-question entities added (2/2)
    assert eor([], ["x", "y"]) == 0.0
    assert ear([], ["x", "y"]) == 1.0
    with pytest.raises(TypeError):
        ear("Taylor Swift", ["Taylor Swift"])


# ---------------------------------------------------------------------------- summarize


def test_summarize_macro_average() -> None:
    records = [
        {"id": "q1", "em": 1, "f1": 0.5},
        {"id": "q2", "em": 0, "f1": 1.0, "recall": None},
        {"id": "q3", "em": True, "f1": 0.0, "recall": 0.25, "anls": math.nan},
    ]
    summary = summarize(records)
    # em = (1 + 0 + 1) / 3; f1 = (0.5 + 1 + 0) / 3 = 0.5; recall: one number -> 0.25;
    # ids (strings), None and NaN are skipped
    assert summary == {"em": pytest.approx(2 / 3), "f1": 0.5, "recall": 0.25, "n": 3.0}
    assert summarize([]) == {"n": 0.0}

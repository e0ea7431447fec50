"""Retraining from logged runs (issue: one command from logs to a policy), on a corpus of the
user's own (not the demo world), with the fake model: gold files, then ask --log, a gold file,
train --log (--branch) and ask --policy, and --base pooling the shipped records."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import pytest

from dynakrag.configuration import Configuration
from dynakrag.errors import UserInputError
from dynakrag.graph.controller import decide
from dynakrag.graph.replay import initial_state
from dynakrag.policy.learned import load_policy_file
from dynakrag.retrieval.corpus import load_corpus
from dynakrag.routing.factory import build_searcher
from dynakrag.state import ACQUISITION_ACTIONS
from dynakrag.training import read_transitions
from dynakrag.training import retrain as retrain_module
from dynakrag.training.gold import answer_support, question_key, read_gold
from dynakrag.training.logged_runs import records_from_transitions
from tests.unit.retrain.support import (
    PEOPLE,
    QUESTIONS,
    SUPPORT,
    StopEarly,
    fake_llm,
    log_runs,
    question_of,
    run_cli,
    write_gold,
)

# --------------------------------------------------------------------------------------------
# Gold files


def test_gold_rows_match_by_normalised_question_or_run_id(tmp_path: Path) -> None:
    path = write_gold(
        tmp_path / "gold.jsonl",
        [
            {
                "question": "Where is  ACME based?",
                "answers": ["Paris"],
                "support": ["a", ["b", "c"]],
            },
            {"run_id": "run-7", "answers": "Oslo"},
        ],
    )
    book = read_gold(path)
    row = book.match(None, "where is acme based")
    assert row is not None and row.answers == ("Paris",) and row.has_support
    assert row.support == (frozenset({"a"}), frozenset({"b", "c"}))
    by_run = book.match("run-7", "something else")
    assert by_run is not None and by_run.answers == ("Oslo",) and not by_run.has_support
    assert book.match("run-8", "Where is ACME based, then?") is None
    assert question_key("Where is  ACME based?") == question_key("where is acme based")


@pytest.mark.parametrize(
    ("row", "message"),
    [
        ({"answers": ["x"]}, "question"),
        ({"question": "q"}, "answers"),
        ({"question": "q", "answers": [""]}, "answers"),
        ({"question": "q", "answers": ["x"], "support": "doc-1"}, "support"),
        ({"question": 3, "answers": ["x"]}, "question"),
    ],
)
def test_bad_gold_rows_name_the_row(tmp_path: Path, row: dict[str, Any], message: str) -> None:
    path = write_gold(tmp_path / "gold.jsonl", [{"question": "ok?", "answers": ["y"]}, row])
    with pytest.raises(UserInputError, match=rf"row 2: .*{message}"):
        read_gold(path)


def test_conflicting_gold_for_one_question_is_refused(tmp_path: Path) -> None:
    path = write_gold(
        tmp_path / "gold.jsonl",
        [{"question": "Q?", "answers": ["a"]}, {"question": "q", "answers": ["b"]}],
    )
    with pytest.raises(UserInputError, match="lines 1 and 2"):
        read_gold(path)


def test_answer_support_finds_passages_stating_an_answer() -> None:
    passages = [
        {"id": "x", "text": "The Beatles came from Liverpool."},
        {"id": "y", "text": "Liverpoolish is not a word."},
        {"id": "z", "text": "Nothing here."},
    ]
    assert answer_support(["liverpool"], passages) == (frozenset({"x"}),)
    assert answer_support(["Manchester"], passages) == ()


# --------------------------------------------------------------------------------------------
# The flow: ask --log, a gold file, train --log, ask --policy


def test_logged_runs_to_a_policy_that_ask_uses(
    world: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    log = tmp_path / "runs.sqlite"
    people = PEOPLE[:6]
    for person, _, _ in people:
        code, _, err = run_cli(
            ["ask", question_of(person), "--corpus", world, "--log", log, "--quiet"], capsys
        )
        assert code == 0, err
    gold_rows: list[dict[str, Any]] = [
        {"question": question_of(p), "answers": [city], "support": SUPPORT[question_of(p)]}
        for p, _, city in people[:4]
    ]
    # answers only (weaker), with the question typed differently
    gold_rows += [
        {"question": question_of(p).upper().rstrip("?"), "answers": [c]} for p, _, c in people[4:]
    ]
    gold = write_gold(tmp_path / "gold.jsonl", gold_rows)
    policy_path = tmp_path / "my.npz"
    fit = ["--n-estimators", "20", "--min-samples-leaf", "1"]
    code, out, err = run_cli(
        ["train", "--log", log, "--gold", gold, "--corpus", world, "--out", policy_path, *fit],
        capsys,
    )
    assert code == 0, err
    assert "4 runs by support, 2 by answers only (weaker labels), 0 without gold" in out
    assert "held-out R² per action" in out
    assert "decisions of the new policy on the logged states:" in out
    assert f"Saved the policy to {policy_path}" in out
    policy = load_policy_file(policy_path)

    question = question_of(PEOPLE[7][0])  # not logged
    code, out, err = run_cli(
        ["ask", question, "--corpus", world, "--policy", policy_path, "--json"], capsys
    )
    assert code == 0, err
    first = json.loads(out)["trace"][0]
    cfg = Configuration.from_env()
    expected = decide(initial_state(question, cfg), policy, cfg)["policy_scores"]
    assert first["scores"] == expected  # the trained file made the decisions


def test_gold_ids_of_another_corpus_are_refused(
    world: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    log = tmp_path / "runs.sqlite"
    log_runs(log, world, PEOPLE[:1], "heuristic")
    gold = write_gold(
        tmp_path / "gold.jsonl",
        [{"question": question_of("Ana Ruiz"), "answers": ["Tolleno"], "support": ["doc-1"]}],
    )
    code, _, err = run_cli(
        ["train", "--log", log, "--gold", gold, "--corpus", world, "--out", tmp_path / "p.npz"],
        capsys,
    )
    assert code == 2 and "none of the support ids" in err


def test_retrained_policy_moves_toward_what_the_gold_implies(
    world: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Runs that answered after one retrieval (half the support, wrong answers); with gold and
    counterfactual branches the new policy fetches the second hop on those same states."""
    log = tmp_path / "runs.sqlite"
    log_runs(log, world, PEOPLE, StopEarly())
    logged = [t for t in read_transitions(log) if t.action == "stop_answer"]
    assert len(logged) == len(PEOPLE)
    assert all(t.next_state["answer"] not in QUESTIONS.values() for t in logged)
    gold = write_gold(
        tmp_path / "gold.jsonl",
        [
            {"question": q, "answers": [city], "support": SUPPORT[q]}
            for q, city in QUESTIONS.items()
        ],
    )
    policy_path = tmp_path / "p.npz"
    fit = ["--n-estimators", "25", "--min-samples-leaf", "1", "--holdout", "0"]
    argv = ["train", "--log", log, "--gold", gold, "--corpus", world, *fit]
    code, out, err = run_cli([*argv, "--branch", "--out", policy_path], capsys)
    assert code == 0, err
    assert "stop_answer -> " in out

    policy = load_policy_file(policy_path)
    cfg = Configuration.from_env()
    gold_book = read_gold(gold)
    records = records_from_transitions(
        read_transitions(log),
        gold_book,
        cfg,
        branch=_resources(world),
    )
    for transition in logged:
        choice = decide(transition.state, policy, cfg)["next_action"]
        assert choice != "stop_answer"
        assert choice in ACQUISITION_ACTIONS
        labels = {
            r["action"]: r["label"]
            for r in records
            if r["example_id"] == transition.thread_id and r["step"] == 1
        }
        # the direction the gold implies: the new choice was labelled above stopping
        assert labels[choice] > labels["stop_answer"]

    # Without the branches the log labels only what the runs did: no alternative at those states.
    unbranched = records_from_transitions(read_transitions(log), gold_book, cfg)
    assert {(r["step"], r["action"]) for r in unbranched} == {
        (0, "retrieve_more"),
        (1, "stop_answer"),
    }
    assert all(r["chosen"] for r in unbranched)
    assert any(not r["chosen"] and r["label"] > 0 for r in records)


def _resources(corpus: Path) -> Any:
    from dynakrag.actions.common import Resources

    return Resources(build_searcher("bm25", load_corpus(corpus)), fake_llm())


def test_answer_only_gold_labels_by_the_answer(world: Path, tmp_path: Path) -> None:
    log = tmp_path / "runs.sqlite"
    log_runs(log, world, PEOPLE[:2], "heuristic")
    book = read_gold(
        write_gold(
            tmp_path / "gold.jsonl",
            [{"question": question_of(p), "answers": [c]} for p, _, c in PEOPLE[:2]],
        )
    )
    records = records_from_transitions(read_transitions(log), book)
    assert records
    for record in records:
        # support is "a passage stating the answer": 0 before the second hop, 1 after
        assert record["sr_before"] in (0.0, 1.0) and record["sr_after"] in (0.0, 1.0)
    fetched = [r for r in records if r["action"] in ACQUISITION_ACTIONS and r["label"] == 1.0]
    assert fetched, "the hop that fetched the answer passage earns the label"
    answered = [r for r in records if r["action"] in {"stop_answer", "compress_answer_evidence"}]
    assert answered and all(r["label"] == 1.0 and r["label_version"] == 2 for r in answered)


# --------------------------------------------------------------------------------------------
# --base


def test_base_default_without_shipped_records_fails_clearly(
    world: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(retrain_module, "DEFAULT_POLICY_RECORDS", tmp_path / "absent.jsonl.gz")
    log = tmp_path / "runs.sqlite"
    log_runs(log, world, PEOPLE[:1], "heuristic")
    code, _, err = run_cli(
        ["train", "--log", log, "--base", "default", "--out", tmp_path / "p.npz"], capsys
    )
    assert code == 2
    assert "make default-policy" in err and len(err.strip().splitlines()) == 1


def test_base_records_are_pooled(
    world: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    log = tmp_path / "runs.sqlite"
    log_runs(log, world, PEOPLE[:3], "heuristic")
    gold = write_gold(
        tmp_path / "gold.jsonl",
        [
            {"question": q, "answers": [c], "support": SUPPORT[q]}
            for q, c in list(QUESTIONS.items())[:3]
        ],
    )
    mine = records_from_transitions(read_transitions(log), read_gold(gold))
    base = [{**r, "dataset": "base", "example_id": f"b{i}"} for i, r in enumerate(mine * 2)]
    shipped = tmp_path / "default_policy.records.jsonl.gz"
    shipped.write_bytes(gzip.compress("".join(json.dumps(r) + "\n" for r in base).encode()))
    monkeypatch.setattr(retrain_module, "DEFAULT_POLICY_RECORDS", shipped)
    code, _, err = run_cli(
        ["train", "--trajectories", shipped, "--out", tmp_path / "b.npz", "--n-estimators", "5"],
        capsys,
    )
    assert code == 0, err  # a records file reads gzip-compressed as well
    argv = ["train", "--log", log, "--gold", gold, "--base", "default", "--n-estimators", "5"]
    code, out, err = run_cli([*argv, "--out", tmp_path / "p.npz"], capsys)
    assert code == 0, err
    assert f"pooled with {len(base)} base records (default)" in out
    assert f"records: {len(mine) + len(base)} " in out
    assert "differs from the shipped learned policy on" in out

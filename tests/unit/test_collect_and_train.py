"""Replay, collection labels, fitting and the collect/train commands, on the demo corpus."""

from __future__ import annotations

import argparse
import json
import random
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from langgraph.types import Overwrite

from dynakrag import build_graph
from dynakrag.actions.common import Resources
from dynakrag.cli import collect as collect_command
from dynakrag.cli import pack as pack_command
from dynakrag.cli import train as train_command
from dynakrag.configuration import Configuration
from dynakrag.data.datasets import QAExample
from dynakrag.errors import UserInputError
from dynakrag.eval.metrics import f1_score, support_recall
from dynakrag.files import write_jsonl
from dynakrag.graph.replay import initial_state, replay, step
from dynakrag.llm.client import LLMClient
from dynakrag.policy.features import FEATURE_NAMES, N_STATE_FEATURES, featurize
from dynakrag.policy.heuristic import HeuristicPolicy
from dynakrag.policy.learned import LearnedPolicy, load_policy_file
from dynakrag.policy.uniform import UniformPolicy
from dynakrag.state import ACQUISITION_ACTIONS, ACTIONS
from dynakrag.training import open_trajectory_log, read_transitions
from dynakrag.training.collect import collect, demo_examples, training_world_examples
from dynakrag.training.fit import fit_policy
from dynakrag.training.logged_runs import records_from_transitions
from dynakrag.training.records import RECORD_SCHEMA, read_records, resume_collection
from tests.fakes import KeywordSearcher, demo_chat_model
from tests.joint import joint_configuration

CFG = joint_configuration()  # the demo reader answers the joint check; records pinned on it
EXAMPLES = demo_examples()
ANSWERS = {e.question: e.answers[0] for e in EXAMPLES}
TRAIN = EXAMPLES[::3]  # every question kind
UNSEEN = [e for e in EXAMPLES if e not in TRAIN][::4]
COUNTERS = ("retrieval_calls", "llm_calls", "prompt_tokens", "completion_tokens")


def llm() -> LLMClient:
    return LLMClient(demo_chat_model(ANSWERS))


def searcher_for(example: QAExample) -> KeywordSearcher:
    return KeywordSearcher(example.passages)


def resources(example: QAExample) -> Resources:
    return Resources(searcher_for(example), llm())


def sr(state: dict[str, Any], example: QAExample) -> float:
    return support_recall([d["id"] for d in state.get("evidence", [])], example.gold_sets)


@pytest.fixture(scope="module")
def records() -> list[dict[str, Any]]:
    """The answer labels (label version 2), every branch answered."""
    return list(collect(TRAIN, searcher_for, llm(), CFG, progress=False, labels="answer"))


@pytest.fixture(scope="module")
def trained(records: list[dict[str, Any]], tmp_path_factory: pytest.TempPathFactory) -> Path:
    policy, _ = fit_policy(records, n_estimators=20, progress=False)
    return policy.save(tmp_path_factory.mktemp("policy") / "policy.npz")


# --------------------------------------------------------------------------------------------
# Replay


def test_initial_state_is_what_prepare_writes() -> None:
    example = EXAMPLES[0]
    graph = build_graph(searcher_for(example), demo_chat_model(ANSWERS))
    question = f"  {example.question}\x07 "
    for chunk in graph.stream({"question": question}, stream_mode="updates"):
        assert set(chunk) == {"prepare"}
        written = {
            key: value.value if isinstance(value, Overwrite) else value
            for key, value in chunk["prepare"].items()
        }
        assert written == initial_state(question, CFG)
        break
    with pytest.raises(UserInputError):
        initial_state("   ", CFG)


@pytest.mark.parametrize("policy_cls", [HeuristicPolicy, UniformPolicy])
@pytest.mark.parametrize("budgets", [{}, {"max_steps": 6, "max_retrieval_calls": 5}])
def test_replay_reproduces_the_graph(policy_cls: type, budgets: dict[str, Any]) -> None:
    cfg = CFG.merged(budgets)
    seen: set[str] = set()
    for example in EXAMPLES[1::5]:
        graph = build_graph(
            searcher_for(example), demo_chat_model(ANSWERS), configuration=CFG, policy=policy_cls()
        )
        final = graph.invoke({"question": example.question}, {"configurable": budgets})
        actions = [entry["action"] for entry in final["trace"]]
        replayed = replay(example.question, actions, resources(example), cfg, policy=policy_cls())
        assert replayed == final, actions
        seen.update(actions)
    if policy_cls is UniformPolicy:
        assert seen >= {"compress_answer_evidence", "sufficiency_check", "bridge_entity_expand"}


def test_step_refuses_invalid_actions() -> None:
    example = EXAMPLES[0]
    state = initial_state(example.question, CFG)
    with pytest.raises(ValueError, match="not valid"):
        step(state, "gap_query", resources(example), CFG)
    with pytest.raises(ValueError, match="unknown"):
        step(state, "jump", resources(example), CFG)
    compressed = replay(
        example.question,
        ["retrieve_more", "bridge_entity_expand", "compress_answer_evidence"],
        resources(example),
        CFG,
    )
    with pytest.raises(ValueError, match="only stop_answer"):
        step(compressed, "retrieve_more", resources(example), CFG)


# --------------------------------------------------------------------------------------------
# Collection


def test_records_follow_the_schema(records: list[dict[str, Any]]) -> None:
    assert records
    assert {r["example_id"] for r in records} == {e.id for e in TRAIN}
    assert {r["action"] for r in records} == set(ACTIONS)
    for record in records:
        assert record["schema"] == RECORD_SCHEMA and record["split"] == "train"
        assert len(record["features"]) == len(FEATURE_NAMES)
        assert record["action"] in record["valid"]
        assert record["step"] == len(record["history"])
        assert set(record["deltas"]) == set(COUNTERS)
        assert 0.0 <= record["continuation_support"] <= 1.0 - record["sr_before"] + 1e-12
        assert 0.0 <= record["continuation"] <= 1.0 - (record["f1_before"] or 0.0) + 1e-12
        assert record["executed"] and record["label_version"] == 2
        assert record["features"] == featurize(record["state"], record["action"], CFG).tolist()
        json.dumps(record, allow_nan=False)
    # Each state's records share one continuation label and one state feature vector.
    by_state: dict[tuple, list[dict[str, Any]]] = {}
    for record in records:
        by_state.setdefault((record["example_id"], tuple(record["history"])), []).append(record)
    for group in by_state.values():
        assert len({r["continuation"] for r in group}) == 1
        assert len({tuple(r["features"][:N_STATE_FEATURES]) for r in group}) == 1
        # Branching: every valid action of a visited state has a labelled outcome.
        assert sorted(r["action"] for r in group) == sorted(group[0]["valid"])
        assert any(r["chosen"] for r in group)


def test_labels_follow_the_definitions(records: list[dict[str, Any]]) -> None:
    by_id = {e.id: e for e in TRAIN}
    for r in records:
        if r["action"] in ACQUISITION_ACTIONS:
            assert r["label"] == pytest.approx(r["sr_after"] - r["sr_before"])
            assert r["answer"] is None and r["f1_after"] is None
        else:  # answer actions: the F1 of the answer written right after them
            answers = by_id[r["example_id"]].answers
            assert r["label"] == r["f1_after"] == f1_score(r["answer"], answers)
        if r["action"] == "stop_answer":
            # The graph's answer step ran: one model call, the answer's F1 is F1(s).
            assert r["deltas"]["llm_calls"] == 1 and r["f1_before"] == r["f1_after"]
    labels = Counter((r["action"], r["label"]) for r in records)
    for action in ("sufficiency_check", "stop_answer", "compress_answer_evidence"):
        assert labels[(action, 1.0)] and labels[(action, 0.0)], action


def test_labels_match_hand_computed_support_recall(records: list[dict[str, Any]]) -> None:
    example = TRAIN[0]
    gold = set(example.support)
    assert len(gold) == 2
    # The first state: retrieve_more adds the top docs_per_action passages of the question.
    top = [p.id for p, _ in searcher_for(example).search(example.question, CFG.frontier_depth)]
    expected = len(gold & set(top[: CFG.docs_per_action])) / len(gold)
    first = next(r for r in records if r["example_id"] == example.id and r["history"] == [])
    assert first["action"] == "retrieve_more" and first["valid"] == ["retrieve_more"]
    assert first["sr_before"] == 0.0 and first["label"] == expected
    # A branch that adds one gold document gets +1/len(gold); check it by replaying by hand.
    by_id = {e.id: e for e in TRAIN}
    gains = [r for r in records if r["action"] in ACQUISITION_ACTIONS and r["label"] > 0]
    assert gains
    for record in gains[:6] + [r for r in records if r["label"] == 0][:4]:
        ex = by_id[record["example_id"]]
        before = replay(ex.question, record["history"], resources(ex), CFG)
        after = step(before, record["action"], resources(ex), CFG)
        added = {d["id"] for d in after["evidence"]} - {d["id"] for d in before["evidence"]}
        hand = len(added & set(ex.support)) / len(ex.support)
        assert record["sr_before"] == sr(before, ex) and record["sr_after"] == sr(after, ex)
        if record["action"] in ACQUISITION_ACTIONS:
            assert record["label"] == pytest.approx(hand)
        assert record["features"] == featurize(before, record["action"], CFG).tolist()
        for counter in COUNTERS:
            assert record["deltas"][counter] == after[counter] - before[counter]


def test_continuation_is_the_gain_still_reached_later(records: list[dict[str, Any]]) -> None:
    # Every visited state was reached through the initial state, so its continuation label is
    # the best SR any rollout of the example reached.
    for example in TRAIN:
        mine = [r for r in records if r["example_id"] == example.id]
        start = next(r for r in mine if r["history"] == [])
        reached = [r["sr_before"] for r in mine] + [
            r["sr_after"] for r in mine if r["chosen"] and r["action"] == "compress_answer_evidence"
        ]
        assert start["sr_before"] == 0.0 and start["continuation_support"] == max(reached)
        # The answer continuation: stopping is not valid at the start (F1 counts as 0), so it
        # is the best answer F1 of any state or compression of the example.
        answered = [r["f1_before"] or 0.0 for r in mine] + [
            r["f1_after"] for r in mine if r["chosen"] and r["action"] == "compress_answer_evidence"
        ]
        assert start["f1_before"] is None and start["continuation"] == max(answered)
    assert any(0 < r["continuation_support"] < 1 for r in records)
    # Where the answer is already right, going on gains nothing.
    right = [r for r in records if r["f1_before"] == 1.0]
    assert right and all(r["continuation"] == 0.0 for r in right)


def test_collection_is_seeded_and_can_skip_branching() -> None:
    few = TRAIN[:3]
    again = list(collect(few, searcher_for, llm(), CFG, progress=False))
    assert again == list(collect(few, searcher_for, llm(), CFG, progress=False))
    other = list(collect(few, searcher_for, llm(), CFG, progress=False, seed=99, epsilon=1.0))
    assert other != again
    unbranched = list(collect(few, searcher_for, llm(), CFG, progress=False, branch=False))
    assert unbranched and all(r["chosen"] for r in unbranched)
    assert len(unbranched) < len(again)


def test_collection_refuses_eval_rows() -> None:
    eval_row = QAExample(
        id="e1",
        question=TRAIN[0].question,
        answers=("x",),
        support=TRAIN[0].support,
        passages=TRAIN[0].passages,
        dataset="demo",
        row=0,
        split="eval",
    )
    with pytest.raises(UserInputError, match="eval"):
        list(collect([eval_row], searcher_for, llm(), CFG, progress=False))


def test_records_from_a_logged_run(tmp_path: Path) -> None:
    log = tmp_path / "runs.sqlite"
    saver = open_trajectory_log(log)
    example, other = TRAIN[1], TRAIN[2]
    try:
        graph = build_graph(searcher_for(example), demo_chat_model(ANSWERS), checkpointer=saver)
        final = graph.invoke({"question": example.question}, {"configurable": {"thread_id": "a"}})
        graph.invoke({"question": other.question}, {"configurable": {"thread_id": "b"}})
    finally:
        saver.conn.close()
    transitions = read_transitions(log)
    logged = records_from_transitions(transitions, {example.question: example.gold_sets})
    actions = [e["action"] for e in final["trace"]]
    if actions[-2:] == ["compress_answer_evidence", "stop_answer"]:
        actions = actions[:-1]
    assert [r["action"] for r in logged] == actions
    assert {r["example_id"] for r in logged} == {"a"} and all(r["source"] == "log" for r in logged)
    for index, record in enumerate(logged):
        assert record["step"] == index
        later = max(r["sr_after"] for r in logged[index:])
        assert record["continuation"] == pytest.approx(max(0.0, later - record["sr_before"]))
        assert record["valid"] == transitions[index].state["valid_actions"]
    assert logged[-1]["sr_after"] == sr(final, example)
    with pytest.raises(UserInputError):
        records_from_transitions(transitions, {}, split="eval")
    assert records_from_transitions(transitions, {}) == []


def test_jsonl_round_trip(tmp_path: Path, records: list[dict[str, Any]]) -> None:
    path = tmp_path / "t.jsonl"
    assert write_jsonl(records[:30], path) == 30
    assert read_records(path) == records[:30]
    assert read_records([path, path]) == records[:30] * 2
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"schema": "other"}\n')
    with pytest.raises(UserInputError, match="line 1"):
        read_records(bad)
    deep = tmp_path / "deep.jsonl"
    deep.write_text("[" * 100_000 + "]" * 100_000 + "\n")
    with pytest.raises(UserInputError, match="line 1"):
        read_records(deep)
    with pytest.raises(UserInputError, match="cannot read"):
        read_records(tmp_path / "missing.jsonl")


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        ({"action": "guess"}, "action: unknown action 'guess'"),
        ({"label": "0.5"}, "label: Input should be a valid number"),
        ({"continuation": True}, "continuation: Input should be a valid number"),
        ({"history": "retrieve"}, "history: Input should be a valid list"),
    ],
)
def test_a_bad_record_names_its_file_line_and_field(
    tmp_path: Path, records: list[dict[str, Any]], change: dict[str, Any], reason: str
) -> None:
    path = tmp_path / "t.jsonl"
    settings = {"seed": 1}
    first, second = ({**record, "collection": settings} for record in records[:2])
    write_jsonl([first, {**second, **change}], path)
    with pytest.raises(UserInputError) as error:
        read_records(path)
    assert str(error.value) == f"{path} line 2: {reason}"
    # Resuming reads the file the same way.
    with pytest.raises(UserInputError, match=f"line 2: {reason}"):
        resume_collection(path, settings)


# --------------------------------------------------------------------------------------------
# Fitting


def test_fit_reports_and_is_deterministic(records: list[dict[str, Any]], tmp_path: Path) -> None:
    policy, report = fit_policy(records, n_estimators=20, progress=False)
    shuffled = list(records)
    random.Random(0).shuffle(shuffled)
    again, _ = fit_policy(shuffled + records[:10], n_estimators=20, progress=False)
    first = policy.save(tmp_path / "a.npz").read_bytes()
    assert again.save(tmp_path / "b.npz").read_bytes() == first
    assert policy.training_data_sha256 == report.training_data_sha256
    assert report.n_questions == len(TRAIN)
    assert 0 < report.n_holdout_questions < report.n_questions
    assert report.r2_overall is not None and report.r2_overall > 0.3
    assert report.r2_continuation is not None
    assert set(report.r2_by_action) == set(ACTIONS)
    assert len(report.top_features) == 10
    assert all(name in FEATURE_NAMES for name, _ in report.top_features)
    text = report.format()
    assert "held-out R²" in text and "stop_answer" in text and report.training_data_sha256 in text
    different, _ = fit_policy(records, n_estimators=20, progress=False, random_state=14)
    assert different.save(tmp_path / "c.npz").read_bytes() != first


def test_fit_refuses_bad_records(records: list[dict[str, Any]]) -> None:
    with pytest.raises(UserInputError, match="eval"):
        fit_policy([{**records[0], "split": "eval"}], progress=False)
    # Records without a state (written before records kept one) train only their own schema.
    old = {k: v for k, v in records[0].items() if k not in ("state", "budgets")}
    with pytest.raises(UserInputError, match="only features of schema 0"):
        fit_policy([{**old, "feature_version": 0}], progress=False)
    with pytest.raises(UserInputError, match="features"):
        fit_policy([{**old, "features": [1.0]}], progress=False)
    with pytest.raises(UserInputError, match="budgets"):
        fit_policy([{**records[0], "budgets": {"max_steps": "4"}}], progress=False)
    with pytest.raises(UserInputError, match="no training records"):
        fit_policy([], progress=False)


BUDGETS = ({}, {"max_steps": 2, "max_retrieval_calls": 1}, {"max_steps": 6})


def test_trained_policy_runs_the_graph_within_budgets(trained: Path) -> None:
    policy = load_policy_file(trained)
    assert isinstance(policy, LearnedPolicy)
    # On the joint check it was trained on, and on the default configuration's chain.
    runs = [(base, budgets) for base in (CFG, Configuration()) for budgets in BUDGETS]
    for base, budgets in runs:
        cfg = base.merged(budgets)
        for example in UNSEEN:
            graph = build_graph(
                searcher_for(example), demo_chat_model(ANSWERS), configuration=base, policy=policy
            )
            final = graph.invoke({"question": example.question}, {"configurable": budgets})
            actions = [entry["action"] for entry in final["trace"]]
            assert actions[-1] == "stop_answer"
            # An answer, or (abstention on) no answer with its reason.
            assert final["answer"] or (final["abstained"] and final["abstain_reason"])
            assert final["steps"] <= cfg.max_steps
            assert final["retrieval_calls"] <= cfg.max_retrieval_calls
            if actions[-2:] == ["compress_answer_evidence", "stop_answer"]:
                # A fixed edge, not a policy decision: nothing scored.
                assert final["valid_actions"] == ["stop_answer"] and not final["policy_scores"]
            else:
                assert set(final["policy_scores"]) == set(final["valid_actions"])
    # It learned something: it finds at least as much gold support as always stopping early.
    recalls = []
    for example in UNSEEN:
        graph = build_graph(
            searcher_for(example), demo_chat_model(ANSWERS), configuration=CFG, policy=policy
        )
        recalls.append(sr(graph.invoke({"question": example.question}), example))
    assert sum(recalls) / len(recalls) >= 0.5


# --------------------------------------------------------------------------------------------
# Commands


def run_cli(argv: list[str]) -> int:
    """What dynakrag.cli.main does with these commands: user errors exit 2."""
    parser = argparse.ArgumentParser(prog="dynakrag", exit_on_error=False)
    subparsers = parser.add_subparsers(dest="command", required=True)
    for command in (collect_command, pack_command, train_command):
        command.add_parser(subparsers)
    args = parser.parse_args(argv)
    try:
        return args.handler(args)
    except UserInputError:
        return 2


def test_demo_training_worlds_are_apart_from_the_measured_ones() -> None:
    examples = training_world_examples((1101, 1202))
    assert len({e.id for e in examples}) == len(examples) == 2 * len(EXAMPLES)
    assert not {e.question for e in examples} & {e.question for e in EXAMPLES}
    assert [e.row for e in examples] == list(range(len(examples)))
    with pytest.raises(UserInputError, match="404 are for measuring"):
        training_world_examples((1101, 404))


def test_collect_refuses_the_eval_split(tmp_path: Path) -> None:
    out = tmp_path / "t.jsonl"
    argv = ["collect", "--dataset", "demo", "--split", "eval", "--out", str(out)]
    assert run_cli(argv) == 2
    assert not out.exists()


def test_collect_then_train_from_the_command_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(collect_command, "make_llm", lambda cfg, **options: llm())
    out = tmp_path / "t.jsonl"
    argv = ["collect", "--dataset", "demo", "--out", str(out), "--limit", "4"]
    assert run_cli([*argv, "--retriever", "bm25", "--epsilon", "0.5"]) == 0
    collected = read_records(out)
    # The demo worlds of the training seeds, never the shipped one the benchmarks measure on.
    assert {r["example_id"] for r in collected} == {e.id for e in training_world_examples()[:4]}
    assert "records from 4 questions" in capsys.readouterr().out
    policy_path = tmp_path / "p.npz"
    train = ["train", "--trajectories", str(out), "--out", str(policy_path), "--n-estimators", "5"]
    assert run_cli(train) == 0
    printed = capsys.readouterr().out
    assert "held-out R² per action" in printed and "top feature importances" in printed
    assert isinstance(LearnedPolicy.load(policy_path), LearnedPolicy)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["p.npz", "t.jsonl"]

"""Issue #13 on the fake model: answer labels generated once per state, fitting from the
stored states under any schema, resumable collection with the disk cache, offline replay and
the generalisation benchmark."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import BaseMessage

from dynakrag import prompts
from dynakrag.cli import collect as collect_command
from dynakrag.configuration import Configuration
from dynakrag.errors import UserInputError
from dynakrag.llm.client import LLMClient
from dynakrag.llm.fake import ScriptedChatModel
from dynakrag.policy.base import Policy
from dynakrag.policy.features import FEATURE_SCHEMAS, feature_schema, featurize
from dynakrag.policy.learned import LearnedPolicy
from dynakrag.state import ACTIONS, State
from dynakrag.training import collect as training_collect
from dynakrag.training.collect import collect, training_world_examples
from dynakrag.training.fit import fit_policy
from dynakrag.training.offline import replay_on_records
from dynakrag.training.records import finished_questions, resume_collection, shareable
from tests.benchmark_scripts import benchmark_module
from tests.fakes import demo_responder, prompt_kind
from tests.unit.test_collect_and_train import (
    ANSWERS,
    CFG,
    TRAIN,
    llm,
    run_cli,
    searcher_for,
)

COLLECT = ["collect", "--dataset", "demo", "--retriever", "bm25"]


@pytest.fixture(scope="module")
def records() -> list[dict[str, Any]]:
    return list(collect(TRAIN[:8], searcher_for, llm(), CFG, progress=False, labels="answer"))


# --------------------------------------------------------------------------------------------
# Answer labels


def test_each_answer_is_generated_once_per_state() -> None:
    kinds: Counter[str] = Counter()
    respond = demo_responder(ANSWERS)

    def counting(messages: list[BaseMessage]) -> str:
        kinds[prompt_kind(messages)] += 1
        return respond(messages)

    client = LLMClient(ScriptedChatModel(respond=counting))
    # Without the request memo, which would also share answers of states with equal evidence.
    made = list(
        collect(TRAIN[:4], searcher_for, client, CFG, progress=False, labels="answer", memo=False)
    )
    answered: set[tuple[str, tuple[str, ...]]] = set()
    for record in made:
        history = tuple(record["history"])
        if record["action"] == "stop_answer":
            answered.add((record["example_id"], history))
        elif record["action"] in ("compress_answer_evidence", "sufficiency_check"):
            answered.add((record["example_id"], (*history, record["action"])))
    # The state after a check is also a visited state whose stop branch reuses that answer.
    naive = sum(r["action"] != "retrieve_more" and r["answer"] is not None for r in made)
    assert kinds[prompts.ANSWER] == len(answered) < naive


def test_a_question_with_a_failed_model_request_is_left_out(
    caplog: pytest.LogCaptureFixture,
) -> None:
    respond = demo_responder(ANSWERS)
    flaky_question = TRAIN[1].question

    def flaky(messages: list[BaseMessage]) -> str:
        if prompt_kind(messages) == prompts.ANSWER and flaky_question in str(messages[-1].content):
            raise RuntimeError("server busy")
        return respond(messages)

    client = LLMClient(ScriptedChatModel(respond=flaky), max_retries=0)
    made = list(collect(TRAIN[:3], searcher_for, client, CFG, progress=False, labels="answer"))
    # Its failed answers would read as wrong ones: no records rather than wrong labels.
    assert {r["example_id"] for r in made} == {TRAIN[0].id, TRAIN[2].id}
    assert f"question {TRAIN[1].id} left out" in caplog.text and "server busy" in caplog.text


# --------------------------------------------------------------------------------------------
# Fitting


def test_fit_recomputes_the_features_from_the_stored_state(
    records: list[dict[str, Any]], tmp_path: Path
) -> None:
    policy, _ = fit_policy(records, n_estimators=8, progress=False)
    blank = [{**r, "features": [0.0] * len(r["features"])} for r in records]
    again, _ = fit_policy(blank, n_estimators=8, progress=False)
    # Only the stored features differ, which the fit does not read: the same forests.
    assert again.value_model.to_arrays("v").keys() == policy.value_model.to_arrays("v").keys()
    for name, array in policy.value_model.to_arrays("v").items():
        assert (again.value_model.to_arrays("v")[name] == array).all(), name
    # The same records train the older schema too, from the same stored states.
    older, report = fit_policy(records, n_estimators=8, progress=False, feature_version=1)
    assert older.feature_version == report.feature_version == 1
    loaded = LearnedPolicy.load(older.save(tmp_path / "v1.npz"))
    assert loaded.feature_version == 1
    state = records[-1]["state"]
    assert loaded.choose(state, records[-1]["valid"], CFG) in records[-1]["valid"]


def test_records_without_a_state_train_only_their_own_schema(
    records: list[dict[str, Any]],
) -> None:
    old = []
    for record in records:
        stripped = {k: v for k, v in record.items() if k not in ("state", "budgets")}
        features = featurize(record["state"], record["action"], CFG, version=1).tolist()
        old.append({**stripped, "feature_version": 1, "features": features})
    policy, _ = fit_policy(old, n_estimators=5, progress=False, feature_version=1)
    assert policy.feature_version == 1
    with pytest.raises(UserInputError, match="only features of schema 1"):
        fit_policy(old, n_estimators=5, progress=False)
    with pytest.raises(UserInputError, match="unknown feature schema 7"):
        fit_policy(records, n_estimators=5, progress=False, feature_version=7)


def test_the_report_and_the_policy_file_give_errors_and_the_schema(
    records: list[dict[str, Any]],
) -> None:
    policy, report = fit_policy(records, n_estimators=8, progress=False)
    assert report.feature_version == max(FEATURE_SCHEMAS)
    assert set(report.mae_by_action) == set(ACTIONS)
    held = [a for a, n in report.n_holdout_by_action.items() if n]
    assert held and all(0.0 <= report.mae_by_action[a] <= 1.0 for a in held)
    assert report.mae_overall is not None and report.mae_continuation is not None
    assert report.label_versions == {"2": len(records)}
    text = report.format()
    for name, meaning in feature_schema().meanings().items():
        if not name.startswith("act_"):
            assert f"{name:<28} {meaning}" in text
    assert "mean absolute error" in text
    meta = policy.metadata()
    assert meta["info"]["fit"]["mae_by_action"] == report.mae_by_action
    assert meta["feature_meanings"] == feature_schema().meanings()


def test_the_policy_file_keeps_the_controller_settings_its_records_share(
    records: list[dict[str, Any]], tmp_path: Path
) -> None:
    settings = {"sub_question_answering": "chain", "max_steps": 16, "max_retrieval_calls": 10}
    records = [{**r, "collection": {"seed": 13, "controller": settings}} for r in records]
    policy, report = fit_policy(records, n_estimators=4, progress=False, holdout=0.0)
    assert report.controller_settings == settings
    assert "collected with the controller settings: max_retrieval_calls=" in report.format()
    path = policy.save(tmp_path / "p.npz")
    assert LearnedPolicy.load(path).controller_settings == settings
    # Records of two settings (or none) give no shared settings: never a wrong one.
    other = {**records[-1], "collection": {**records[-1]["collection"], "controller": {}}}
    mixed, mixed_report = fit_policy(
        [*records[:-1], other], n_estimators=4, progress=False, holdout=0.0
    )
    assert mixed_report.controller_settings is None and mixed.controller_settings is None
    assert "not recorded, or mixed" in mixed_report.format()


def test_train_prints_errors_and_schema_and_trains_an_older_schema(
    records: list[dict[str, Any]], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "t.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    out = tmp_path / "p.npz"
    train = ["train", "--trajectories", str(path), "--out", str(out), "--n-estimators", "4"]
    assert run_cli(train) == 0
    printed = capsys.readouterr().out
    assert "mean absolute error" in printed and "feature schema 3" in printed
    assert "fr_margin_norm" in printed and "fr_top_score" not in printed
    assert LearnedPolicy.load(out).feature_version == 3
    assert run_cli([*train, "--feature-version", "1"]) == 0
    assert "feature schema 1" in capsys.readouterr().out
    assert LearnedPolicy.load(out).feature_version == 1
    assert run_cli([*train, "--feature-version", "9"]) == 2


# --------------------------------------------------------------------------------------------
# Collection at scale: resume, settings, progress, disk cache


def _lines(path: Path) -> list[str]:
    return sorted(path.read_text(encoding="utf-8").splitlines())


def test_resume_collection_drops_a_cut_question(tmp_path: Path) -> None:
    made = list(
        collect(TRAIN[:3], searcher_for, llm(), CFG, progress=False, collection={"seed": 13})
    )
    assert finished_questions(made) == {("demo", e.id) for e in TRAIN[:3]}
    path = tmp_path / "t.jsonl"
    text = "".join(json.dumps(r) + "\n" for r in made)
    path.write_text(text[: len(text) - 300])  # the last question loses records, mid-line
    done = resume_collection(path, {"seed": 13})
    assert done == {("demo", e.id) for e in TRAIN[:2]}
    kept = [json.loads(line) for line in path.read_text().splitlines()]
    assert kept == [r for r in made if r["example_id"] != TRAIN[2].id]
    with pytest.raises(UserInputError, match="another collection"):
        resume_collection(path, {"seed": 14})
    path.write_text("not json\n" + text)
    with pytest.raises(UserInputError, match="line 1"):
        resume_collection(path, {"seed": 13})
    assert resume_collection(tmp_path / "missing.jsonl", {"seed": 13}) == set()


def test_collect_resumes_without_redoing_finished_questions(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(collect_command, "make_llm", lambda cfg, **options: llm())
    started: list[str] = []
    real = training_collect.collect

    def spy(examples: Any, *args: Any, **kwargs: Any) -> Any:
        def tracked() -> Any:
            for example in examples:
                started.append(example.id)
                yield example

        return real(tracked(), *args, **kwargs)

    monkeypatch.setattr(training_collect, "collect", spy)
    full, part = tmp_path / "full.jsonl", tmp_path / "part.jsonl"
    assert run_cli([*COLLECT, "--out", str(full), "--limit", "5"]) == 0
    assert run_cli([*COLLECT, "--out", str(part), "--limit", "3"]) == 0
    text = part.read_text()
    part.write_text(text[: len(text) - 200])  # killed while writing the third question
    started.clear()
    capsys.readouterr()
    assert run_cli([*COLLECT, "--out", str(part), "--limit", "5"]) == 0
    assert started == [
        e.id for e in training_world_examples()[2:5]
    ]  # the cut one again, then the new ones
    assert _lines(part) == _lines(full)
    captured = capsys.readouterr()
    assert "Resuming" in captured.out and "2 questions already collected" in captured.out
    assert "collecting" in captured.err and "5/5" in captured.err  # progress with a total
    # Other settings would mix two collections: refused, and the file is left as it was.
    before = part.read_bytes()
    assert run_cli([*COLLECT, "--out", str(part), "--limit", "5", "--seed", "14"]) == 2
    assert part.read_bytes() == before
    started.clear()
    assert run_cli([*COLLECT, "--out", str(part), "--limit", "5"]) == 0
    assert started == [] and part.read_bytes() == before  # nothing left to do
    assert run_cli([*COLLECT, "--out", str(part), "--limit", "2", "--restart"]) == 0
    assert {json.loads(line)["example_id"] for line in _lines(part)} == {
        e.id for e in training_world_examples()[:2]
    }


def test_collection_uses_the_disk_llm_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    options: list[dict[str, Any]] = []

    def make(cfg: Configuration, **given: Any) -> LLMClient:
        options.append(given)
        return llm()

    monkeypatch.setattr(collect_command, "make_llm", make)
    out = tmp_path / "t.jsonl"
    assert run_cli([*COLLECT, "--out", str(out), "--limit", "1"]) == 0
    assert run_cli([*COLLECT, "--out", str(out), "--limit", "1", "--restart", "--no-cache"]) == 0
    assert options == [{"disk_cache": True}, {"disk_cache": False}]
    from dynakrag.cli.generator import make_llm

    make_llm(Configuration(cache_dir=tmp_path / "cache"), disk_cache=True)
    assert (tmp_path / "cache" / "llm-cache.sqlite").is_file()


# --------------------------------------------------------------------------------------------
# Offline replay


class Prefer(Policy):
    """Chooses the first of ``order`` that is valid."""

    name = "prefer"

    def __init__(self, *order: str) -> None:
        self.order = order

    def value(self, state: State, actions: Sequence[str], cfg: Configuration) -> dict[str, float]:
        return {a: -float(self.order.index(a)) if a in self.order else -99.0 for a in actions}


def tree_records(with_second_hop: bool = True) -> list[dict[str, Any]]:
    """One question: retrieve (SR 0 -> 0.5); then stop (F1 0), compress (F1 0) or retrieve
    again (SR 1.0) and stop (F1 1)."""

    def record(history: list[str], valid: list[str], action: str, **values: Any) -> dict:
        return {
            "dataset": "d",
            "example_id": "q",
            "history": history,
            "valid": valid,
            "action": action,
            "state": {"question": "q?"},
            "budgets": {},
            "deltas": {"retrieval_calls": int(action == "retrieve_more")},
            **values,
        }

    after_one = ["retrieve_more", "stop_answer", "compress_answer_evidence"]
    made = [
        record([], ["retrieve_more"], "retrieve_more", sr_before=0.0, sr_after=0.5),
        record(["retrieve_more"], after_one, "retrieve_more", sr_before=0.5, sr_after=1.0),
        record(
            ["retrieve_more"], after_one, "stop_answer", sr_before=0.5, sr_after=0.5, f1_after=0.0
        ),
        record(
            ["retrieve_more"],
            after_one,
            "compress_answer_evidence",
            sr_before=0.5,
            sr_after=0.5,
            f1_after=0.0,
        ),
    ]
    if with_second_hop:
        two = ["retrieve_more", "retrieve_more"]
        made.append(
            record(two, ["stop_answer"], "stop_answer", sr_before=1.0, sr_after=1.0, f1_after=1.0)
        )
    return made


def test_offline_replay_walks_the_recorded_tree() -> None:
    early = replay_on_records(Prefer("stop_answer", "retrieve_more"), tree_records())
    assert (early.support_recall, early.f1, early.on_tree, early.retrieval_calls) == (
        0.5,
        0.0,
        1.0,
        1.0,
    )
    assert early.walks[0].actions == ["retrieve_more", "stop_answer"]
    deep = replay_on_records(Prefer("retrieve_more", "stop_answer"), tree_records())
    assert (deep.support_recall, deep.f1, deep.on_tree, deep.retrieval_calls) == (
        1.0,
        1.0,
        1.0,
        2.0,
    )
    # The second hop's state was never visited: the walk leaves the tree with the SR it reached.
    off = replay_on_records(Prefer("retrieve_more", "stop_answer"), tree_records(False))
    assert (off.support_recall, off.f1, off.on_tree) == (1.0, None, 0.0)
    assert replay_on_records(Prefer("stop_answer"), []).questions == 0


# --------------------------------------------------------------------------------------------
# The generalisation benchmark


def test_generalisation_benchmark_on_synthetic_records(
    records: list[dict[str, Any]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ids = sorted({r["example_id"] for r in records})
    names = ("a", "b", "demo")  # "demo": the generated worlds, judged with and without
    datasets = {example_id: names[i % 3] for i, example_id in enumerate(ids)}
    synthetic = [{**r, "dataset": datasets[r["example_id"]]} for r in records]
    path = tmp_path / "records.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in synthetic))

    def no_model(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("the generalisation checks must not run actions or the model")

    monkeypatch.setattr("dynakrag.graph.replay.Branches.step", no_model)
    monkeypatch.setattr(LLMClient, "text", no_model)
    with benchmark_module("policy_generalisation") as module:
        argv = ["--records", str(path), "--n-estimators", "5", "--out-dir", str(tmp_path)]
        assert module.main([*argv, "--name", "gen"]) == 0
    result = json.loads((tmp_path / "gen.json").read_text())
    markdown = (tmp_path / "gen.md").read_text()
    left_out = result["leave_one_dataset_out"]
    assert [row["held_out"] for row in left_out] == ["a", "b", "demo"]
    for row in left_out:
        assert row["train_questions"] + row["test_questions"] == len(ids)
        assert sorted(row["train_datasets"]) == sorted(set(names) - {row["held_out"]})
        assert 0.0 <= row["learned"]["support_recall"] <= 1.0
        assert row["errors"]["mae_overall"] is not None
    sizes = result["training_size"]
    assert [row["fraction"] for row in sizes] == [0.25, 0.5, 1.0]
    assert len({row["test_questions"] for row in sizes}) == 1
    trained = [row["train_questions"] for row in sizes]
    assert trained == sorted(trained) and trained[0] < trained[-1]
    assert trained[-1] + sizes[0]["test_questions"] == len(ids)
    assert "## Leave one dataset out" in markdown and "| 25% |" in markdown
    assert markdown.count("\n| a |") == 1
    worlds = result["generated_worlds"]
    assert [(r["fraction"], r["demo_worlds"]) for r in worlds] == [
        (f, w) for f in (0.25, 0.5, 1.0) for w in (True, False)
    ]
    # Judged on the same held-out questions (the real datasets'); without the worlds, fewer
    # questions to learn from.
    held = {r["test_questions"] for r in worlds}
    assert len(held) == 1 and held.pop() <= sizes[0]["test_questions"]
    for with_row, without_row in zip(worlds[::2], worlds[1::2], strict=True):
        assert without_row["train_questions"] <= with_row["train_questions"]
    assert worlds[-1]["train_questions"] < worlds[-2]["train_questions"]
    assert "| 100%, without |" in markdown
    # Packed records (what ships: no state) give the label errors and no replay, not zeros.
    packed = tmp_path / "packed.jsonl"
    packed.write_text("".join(json.dumps(shareable(r)) + "\n" for r in synthetic))
    with benchmark_module("policy_generalisation") as module:
        argv = ["--records", str(packed), "--n-estimators", "5", "--out-dir", str(tmp_path)]
        assert module.main([*argv, "--name", "packed"]) == 0
    rows = json.loads((tmp_path / "packed.json").read_text())["training_size"]
    assert all(row["learned"] is None and row["heuristic"] is None for row in rows)
    assert [row["errors"]["r2_overall"] for row in rows] == [
        row["errors"]["r2_overall"] for row in sizes
    ]

"""``benchmarks/controller.py`` end to end on two 2Wiki eval questions with the scripted fake
reader and BM25 (seconds; no model is loaded)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest
from langchain_core.messages import BaseMessage

from dynakrag.llm.fake import ScriptedChatModel
from dynakrag.policy.features import FEATURE_NAMES
from dynakrag.policy.learned import LearnedPolicy
from dynakrag.policy.value_model import TreeEnsemble
from tests.benchmark_scripts import benchmark_module
from tests.fakes import constant_tree
from tests.markers import needs_data

PNG = b"\x89PNG\r\n\x1a\n"


pytestmark = needs_data


@pytest.fixture(scope="module")
def benchmark() -> Iterator[ModuleType]:
    with benchmark_module("controller") as module:
        yield module


@pytest.fixture(autouse=True)
def _isolated(isolated_env: None, no_models: None) -> None:
    """Every test here: no caller settings, a private cache, no real model."""


@pytest.fixture(scope="module")
def policy_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny learned policy (one tree each: acquire 0.3, stop 0.8, continuation 0.2)."""
    stop = FEATURE_NAMES.index("act_stop_answer")
    value = TreeEnsemble(
        n_features=len(FEATURE_NAMES),
        offsets=np.array([0, 3]),
        children_left=np.array([1, -1, -1]),
        children_right=np.array([2, -1, -1]),
        feature=np.array([stop, -2, -2]),
        threshold=np.array([0.5, -2.0, -2.0]),
        value=np.array([0.0, 0.3, 0.8]),
    )
    return LearnedPolicy(value, constant_tree(0.2)).save(tmp_path_factory.mktemp("p") / "tiny.npz")


def test_benchmark_smoke_with_the_fake_model(
    benchmark: ModuleType, policy_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "results"
    argv = ["--datasets", "2wiki", "--limit", "2", "--retriever", "bm25", "--fake-llm",
            "--policy", str(policy_file), "--budgets", "1", "2", "--lambdas", "0", "0.5",
            "--quiet", "--out-dir", str(out), "--name", "smoke"]  # fmt: skip
    assert benchmark.main(argv) == 0
    printed = capsys.readouterr().out
    columns = "| SR | SR/retr. | retr. | LLM | tokens | F1 | EM |"
    for heading in ("Policies and ablations", "Retrieval-budget sensitivity", "cost_lambda",
                    "Gap closed", columns):  # fmt: skip
        assert heading in printed

    data = json.loads((out / "smoke.json").read_text(encoding="utf-8"))
    main = data["rows"]["main"]
    assert [r["variant"] for r in main] == [
        "learned", "uniform", "fixed", "oracle",
        "learned w/o sufficiency", "learned w/o compression", "learned w/o continuation",
    ]  # fmt: skip
    for row in main + data["rows"]["budget"] + data["rows"]["lambda"]:
        assert row["n"] == 2 and row["dataset"] == "2wiki"
        assert row["retrieval_calls"] <= row["max_retrieval_calls"]
        assert row["sr_per_retrieval_call"] == pytest.approx(
            row["support_recall"] / row["retrieval_calls"]
        )
        assert row["f1"] is not None and row["tokens"] > 0
    budget = data["rows"]["budget"]
    assert {(r["variant"], r["max_retrieval_calls"]) for r in budget} == {
        (p, b) for p in ("learned", "uniform", "fixed", "oracle") for b in (1, 2)
    }
    assert [r["cost_lambda"] for r in data["rows"]["lambda"]] == [0.0, 0.5]
    oracle = next(r for r in main if r["variant"] == "oracle")
    assert oracle["lookahead_llm_calls"] is not None
    assert set(data["gap_closed"]["2wiki"]) == {"sr_per_retrieval_call", "support_recall"}
    assert data["meta"]["policy_sha256"] and data["meta"]["llm"] == "ScriptedChatModel"
    for name in ("smoke-budget.png", "smoke-lambda.png"):
        assert (out / name).read_bytes()[:8] == PNG
    assert "![budget](smoke-budget.png)" in (out / "smoke.md").read_text(encoding="utf-8")


def test_gap_closed_definition(benchmark: ModuleType) -> None:
    rows = [
        {"variant": "learned", "x": 0.5},
        {"variant": "uniform", "x": 0.25},
        {"variant": "oracle", "x": 0.75},
    ]
    assert benchmark.gap_closed(rows, "x") == pytest.approx(0.5)
    rows[2]["x"] = 0.25  # the oracle does not beat uniform: undefined
    assert benchmark.gap_closed(rows, "x") is None


def test_a_missing_learned_policy_is_a_clear_message(
    benchmark: ModuleType, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["--datasets", "2wiki", "--policy", str(tmp_path / "none.npz"), "--fake-llm",
            "--retriever", "bm25", "--out-dir", str(tmp_path)]  # fmt: skip
    assert benchmark.main(argv) == 2
    assert "no learned policy" in capsys.readouterr().err
    assert not list(tmp_path.glob("*.json"))


def test_baselines_run_without_a_learned_policy(
    benchmark: ModuleType, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["--datasets", "2wiki", "--limit", "1", "--retriever", "bm25", "--fake-llm",
            "--no-answer", "--policy", str(tmp_path / "none.npz"), "--policies", "uniform",
            "fixed", "--ablations", "--parts", "main", "--out-dir", str(tmp_path),
            "--quiet"]  # fmt: skip
    assert benchmark.main(argv) == 0
    rows = json.loads((tmp_path / "controller.json").read_text(encoding="utf-8"))["rows"]
    assert [r["variant"] for r in rows["main"]] == ["uniform", "fixed"]
    assert all(r["f1"] is None and r["llm_calls"] >= 0 for r in rows["main"])
    # Every run is kept: a rerun reads them back instead of asking the model again.
    assert len(list((tmp_path / "controller-runs").glob("*.json"))) == 2

    def refuse(messages: list[BaseMessage]) -> str:
        raise AssertionError("a finished run was computed again")

    assert benchmark.main(argv, chat_model=ScriptedChatModel(respond=refuse)) == 0
    again = json.loads((tmp_path / "controller.json").read_text(encoding="utf-8"))["rows"]
    assert again["main"] == rows["main"]


def test_policies_are_compared_at_the_settings_the_learned_one_was_collected_at(
    benchmark: ModuleType, policy_file: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    chain = {"sub_question_answering": "chain", "max_steps": 16, "max_retrieval_calls": 10}
    policy = LearnedPolicy.load(policy_file)
    policy.info = {"fit": {"controller_settings": chain}}
    collected = policy.save(tmp_path / "chain.npz")
    cfg = benchmark.comparison_configuration(collected)
    assert {k: getattr(cfg, k) for k in chain} == chain
    # A file that does not say (fitted before it was recorded): the paper's settings.
    old = benchmark.comparison_configuration(policy_file)
    assert {k: getattr(old, k) for k in chain} == benchmark.PAPER_SETTINGS
    monkeypatch.setenv("DYNAKRAG_MAX_STEPS", "6")  # the environment still wins
    assert benchmark.comparison_configuration(collected).max_steps == 6

"""``benchmarks/token_budget.py`` and ``benchmarks/second_generator.py`` end to end on a couple
of 2Wiki questions with the scripted reader and BM25 (seconds; no model is loaded), and resumed
without calling any model."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest
from langchain_core.messages import BaseMessage

from dynakrag.configuration import Configuration
from dynakrag.llm.fake import ScriptedChatModel
from tests.benchmark_scripts import benchmark_module
from tests.markers import needs_data

PNG = b"\x89PNG\r\n\x1a\n"

pytestmark = needs_data


@pytest.fixture(autouse=True)
def _isolated(isolated_env: None, no_models: None) -> None:
    """Every test here: no caller settings, a private cache, no real model."""


@pytest.fixture(scope="module")
def token_budget() -> Iterator[ModuleType]:
    with benchmark_module("token_budget") as module:
        yield module


@pytest.fixture(scope="module")
def second_generator() -> Iterator[ModuleType]:
    with benchmark_module("second_generator") as module:
        yield module


def refusing_model() -> ScriptedChatModel:
    """A model that fails the test if a resumed benchmark calls it."""

    def respond(messages: list[BaseMessage]) -> str:
        raise AssertionError("a finished run was computed again")

    return ScriptedChatModel(respond=respond)


def test_token_budget_benchmark_keeps_budgets_and_resumes(
    token_budget: ModuleType, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "results"
    argv = ["--datasets", "2wiki", "--limit", "3", "--calibrate-limit", "3", "--fake-llm",
            "--retriever", "bm25", "--budgets", "900", "1500", "--lambdas", "0", "1",
            "--out-dir", str(out), "--name", "tb", "--quiet"]  # fmt: skip
    assert token_budget.main(argv) == 0
    printed = capsys.readouterr()
    assert "| dataset | run | λ used |" in printed.out and "Calibration curve" in printed.out

    data = json.loads((out / "tb.json").read_text(encoding="utf-8"))
    rows = data["rows"]
    labels = [r["label"] for r in rows if r["dataset"] == "2wiki"]
    default = Configuration.from_env().policy  # the "default" run is the configured policy
    assert labels == [default, "learned λ=0", "learned λ=1", "budget 900", "budget 1500"]
    assert {r["dataset"] for r in rows} == {"2wiki", "all"}
    for row in rows:
        assert row["n"] == 3 and row["tokens"] > 0 and row["f1"] is not None
        if row["kind"] == "budget":
            assert row["within_budget"] and row["tokens"] <= row["token_budget"]
            assert row["lambda_used"] and row["lambda_source"].startswith(("calibrated", "no "))
        if row["kind"] == "lambda":
            assert row["lambda_used"] == [row["cost_lambda"]]
    assert any(r["pareto"] for r in rows if r["dataset"] == "2wiki")
    calibration = data["meta"]["calibration"]
    assert [p["cost_lambda"] for p in calibration["points"]] == [0.0, 1.0]
    assert calibration["data"]["split"] == "train"
    assert (out / "tb-policy.npz").is_file()
    assert (out / "tb.png").read_bytes()[:8] == PNG
    assert "![token budgets](tb.png)" in (out / "tb.md").read_text(encoding="utf-8")

    # A rerun reads every finished run (and the calibrated policy) instead of computing it.
    argv.remove("--fake-llm")
    assert token_budget.main(argv, chat_model=refusing_model()) == 0
    assert json.loads((out / "tb.json").read_text(encoding="utf-8"))["rows"] == rows
    # --parts keeps only some kinds of run (the λ still calibrate: the same policy file).
    assert token_budget.main([*argv, "--parts", "budget"], chat_model=refusing_model()) == 0
    parts = json.loads((out / "tb.json").read_text(encoding="utf-8"))["rows"]
    assert [r["label"] for r in parts if r["dataset"] == "2wiki"] == ["budget 900", "budget 1500"]


def test_token_budget_progress_lines(
    token_budget: ModuleType, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["--datasets", "2wiki", "--limit", "1", "--calibrate-limit", "1", "--fake-llm",
            "--retriever", "bm25", "--budgets", "2000", "--lambdas", "0",
            "--out-dir", str(tmp_path)]  # fmt: skip
    assert token_budget.main(argv) == 0
    err = capsys.readouterr().err
    default = Configuration.from_env().policy
    assert f"[token-budget] 1/3 2wiki-{default}:" in err and "ETA" in err
    assert "[calibrate] 2wiki/train" in err


def test_second_generator_benchmark_table_and_resume(
    second_generator: ModuleType, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "results"
    argv = ["--datasets", "2wiki", "--limit", "2", "--fake-llm", "--retriever", "bm25",
            "--out-dir", str(out), "--name", "sg"]  # fmt: skip
    assert second_generator.main(argv) == 0
    captured = capsys.readouterr()
    assert "The learned policy's lead" in captured.out and "ETA" in captured.err
    data = json.loads((out / "sg.json").read_text(encoding="utf-8"))
    keys = [(r["generator"], r["method"]) for r in data["rows"]]
    assert keys == [
        (g, m)
        for g in ("qwen2.5-coder-0.5b", "qwen2.5-coder-1.5b")
        for m in ("learned", "heuristic", "naive")
    ]
    for row in data["rows"]:
        assert row["n"] == 2 and row["f1"] is not None and row["tokens"] > 0
        assert row["llm_calls"] == 1.0 if row["method"] == "naive" else row["llm_calls"] >= 1
    lead = data["advantage"][0]
    learned, heuristic = (
        next(r for r in data["rows"] if r["method"] == m and r["generator"] == lead["generator"])
        for m in ("learned", "heuristic")
    )
    assert lead["f1_vs_heuristic"] == pytest.approx(learned["f1"] - heuristic["f1"])
    assert set(data["meta"]["generators"]) == {"qwen2.5-coder-0.5b", "qwen2.5-coder-1.5b"}
    assert "0.5B" in data["meta"]["generators"]["qwen2.5-coder-0.5b"]
    assert (out / "sg.png").read_bytes()[:8] == PNG

    argv.remove("--fake-llm")
    assert second_generator.main(argv, chat_model=refusing_model()) == 0
    assert json.loads((out / "sg.json").read_text(encoding="utf-8"))["rows"] == data["rows"]


def test_second_generator_needs_its_model_or_endpoint(
    second_generator: ModuleType,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    argv = ["--datasets", "2wiki", "--limit", "1", "--generators", "endpoint",
            "--out-dir", str(tmp_path)]  # fmt: skip
    assert second_generator.main(argv) == 2
    assert "needs --endpoint" in capsys.readouterr().err
    monkeypatch.setattr(second_generator, "embedded_available", lambda spec: False)
    argv[argv.index("endpoint")] = "qwen2.5-coder-0.5b"
    assert second_generator.main(argv) == 2
    assert "embedded-small" in capsys.readouterr().err
    assert not list(tmp_path.iterdir())

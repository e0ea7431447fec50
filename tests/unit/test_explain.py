"""Per-decision explanations: exact forest contributions, the trace, and ``ask --explain``."""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from typing import Any

import numpy as np
import pytest

from dynakrag import build_graph, cli
from dynakrag.cli import ask as ask_command
from dynakrag.configuration import Configuration
from dynakrag.data.demo import demo_passages
from dynakrag.data.demo_corpus import DemoCorpus, generate_demo_corpus
from dynakrag.llm.client import LLMClient
from dynakrag.policy.explain import describe, explain_decision, value_breakdown
from dynakrag.policy.features import FEATURE_NAMES, N_STATE_FEATURES
from dynakrag.policy.learned import LearnedPolicy
from dynakrag.policy.registry import resolve_policy
from dynakrag.policy.value_model import TreeEnsemble, fit_forest
from dynakrag.state import ACTIONS
from tests.fakes import KeywordSearcher, demo_chat_model


@pytest.fixture(scope="module")
def corpus() -> DemoCorpus:
    return generate_demo_corpus(7)


@pytest.fixture(scope="module")
def fitted_forest() -> tuple[TreeEnsemble, np.ndarray]:
    """A real scikit-learn forest (60 trees) on data where feature 0 drives the target."""
    rng = np.random.default_rng(3)
    X = rng.random((500, 6))
    y = 3.0 * X[:, 0] + 0.5 * (X[:, 3] > 0.5) + rng.normal(0, 0.05, 500)
    _, ensemble = fit_forest(X, y, n_estimators=60, min_samples_leaf=3, random_state=5)
    return ensemble, rng.random((40, 6))


def test_contributions_plus_bias_equal_the_forest_prediction(
    fitted_forest: tuple[TreeEnsemble, np.ndarray],
) -> None:
    ensemble, X = fitted_forest
    bias, contributions = ensemble.path_contributions(X)
    assert contributions.shape == X.shape
    np.testing.assert_allclose(bias + contributions.sum(axis=1), ensemble.predict(X), atol=1e-12)
    # The bias is the forest's mean root value, i.e. about the training mean of y (1.75).
    assert bias == pytest.approx(1.75, abs=0.1)


def test_contributions_credit_the_features_that_drive_the_target(
    fitted_forest: tuple[TreeEnsemble, np.ndarray],
) -> None:
    ensemble, _ = fitted_forest
    low, high = np.full(6, 0.5), np.full(6, 0.5)
    low[0], high[0] = 0.02, 0.98
    _, contributions = ensemble.path_contributions(np.stack([low, high]))
    assert np.argmax(np.abs(contributions[0])) == 0 and contributions[0, 0] < -1.0
    assert np.argmax(np.abs(contributions[1])) == 0 and contributions[1, 0] > 1.0
    assert np.abs(contributions[:, [1, 2, 4, 5]]).max() < 0.2  # noise features barely count


def _fitted_policy() -> LearnedPolicy:
    """A learned policy whose forests were fitted (on random rows) by scikit-learn."""
    rng = np.random.default_rng(11)
    X = rng.random((300, len(FEATURE_NAMES)))
    y = X[:, FEATURE_NAMES.index("act_stop_answer")] * 0.6 + X[:, 0] * 0.2
    _, value = fit_forest(X, y, n_estimators=25, min_samples_leaf=4)
    Xs = rng.random((200, N_STATE_FEATURES))
    _, continuation = fit_forest(Xs, Xs[:, 1] * 0.4, n_estimators=10, min_samples_leaf=4)
    return LearnedPolicy(value, continuation)


def _graph(corpus: DemoCorpus, **kwargs: Any) -> Any:
    answers = {q.question: q.answer for q in corpus.questions}
    return build_graph(KeywordSearcher(demo_passages(corpus)), demo_chat_model(answers), **kwargs)


def test_breakdown_reconciles_with_the_policy_scores(corpus: DemoCorpus) -> None:
    policy = _fitted_policy()
    cfg = Configuration(cost_lambda=0.2)
    final = _graph(corpus, policy=policy, configuration=cfg).invoke(
        {"question": corpus.questions[0].question}
    )
    state = {**final, "answer": ""}  # a mid-run state: evidence, sub-questions, trace
    valid = [a for a in ACTIONS if a != "rewrite_query"]
    parts = value_breakdown(policy, state, valid, valid, cfg, top=4)
    scores = policy.scores(state, valid, cfg)
    raw = policy.raw_values(state, valid, cfg)
    for action, part in parts.items():
        kept = sum(c["contribution"] for c in part["contributions"])
        assert part["bias"] + kept + part["rest"] == pytest.approx(raw[action], abs=1e-12)
        assert part["value"] == pytest.approx(raw[action], abs=1e-12)
        assert part["score"] == pytest.approx(scores[action], abs=1e-12)
        assert part["cost"] == pytest.approx(0.2 * policy.action_costs[action])
        assert len(part["contributions"]) <= 4
        # Sorted by size; the action one-hot family is one term named by the candidate.
        sizes = [abs(c["contribution"]) for c in part["contributions"]]
        assert sizes == sorted(sizes, reverse=True)
        families = [c for c in part["contributions"] if c["feature"] == "act_*"]
        assert all(c["value"] == action for c in families)


def test_every_trace_entry_says_why(corpus: DemoCorpus) -> None:
    final = _graph(corpus, policy="learned").invoke({"question": corpus.questions[1].question})
    trace = final["trace"]
    first = trace[0]["explanation"]
    assert first["chosen"] == "retrieve_more" and first["policy"] == "learned"
    assert set(first["blocked"]) == set(ACTIONS) - {"retrieve_more"}
    assert set(first["blocked"].values()) == {"first_step_retrieves"}
    for entry in trace:
        explanation = entry["explanation"]
        if "fixed_edge" in explanation:
            assert entry["action"] == "stop_answer" and not entry["scores"]
            continue
        assert explanation["chosen"] == entry["action"]
        assert set(explanation["blocked"]).isdisjoint(entry["valid_actions"])
        assert set(explanation["blocked"]) | set(entry["valid_actions"]) == set(ACTIONS)
        second = explanation["runner_up"]
        assert (second is None) == (len(entry["valid_actions"]) == 1)
        for action, part in explanation["values"].items():
            assert part["score"] == pytest.approx(entry["scores"][action], abs=1e-5)
        assert explanation["continuation"]["guard"] in (True, False)
        assert explanation["lambda_source"] == "configured cost_lambda"
        json.dumps(explanation)  # JSON-safe: Studio and --json show it as is


def test_hand_written_policies_explain_without_contributions(corpus: DemoCorpus) -> None:
    final = _graph(corpus, policy="heuristic").invoke({"question": corpus.questions[0].question})
    explanation = final["trace"][1]["explanation"]
    assert explanation["policy"] == "heuristic" and "values" not in explanation
    lines = describe(explanation)
    assert lines[0].startswith(f"why: {final['trace'][1]['action']}")
    assert any(line.startswith("blocked: ") for line in lines)


def test_explanation_names_the_runner_up_by_score() -> None:
    policy = resolve_policy("heuristic")
    state = {"question": "Who?", "evidence": [], "trace": []}
    scores = {"retrieve_more": 0.3, "gap_query": 0.7, "stop_answer": 0.5}
    explanation = explain_decision(
        policy, state, list(scores), scores, "gap_query", Configuration(), {"rewrite_query": "r"}
    )
    assert explanation["runner_up"] == "stop_answer"
    assert explanation["scores"] == {"gap_query": 0.7, "stop_answer": 0.5}
    assert explanation["blocked"] == {"rewrite_query": "r"}


# --- the command line --------------------------------------------------------------------------


@pytest.fixture
def fake_ask(corpus: DemoCorpus, monkeypatch: pytest.MonkeyPatch, no_models: None) -> Sequence[str]:
    """``dynakrag ask`` over the demo passages with the scripted reader; the question."""
    for name in list(os.environ):
        if name.startswith("DYNAKRAG_"):
            monkeypatch.delenv(name)
    question = corpus.questions[1]
    monkeypatch.setattr(
        ask_command, "_searcher_for", lambda *a: KeywordSearcher(demo_passages(corpus))
    )
    reader = demo_chat_model({question.question: question.answer})
    monkeypatch.setattr(ask_command, "make_llm", lambda cfg: LLMClient(reader))
    return [question.question, question.answer]


def test_ask_explain_prints_choice_contributions_and_blocking_rules(
    fake_ask: Sequence[str], capsys: pytest.CaptureFixture[str]
) -> None:
    question, answer = fake_ask
    assert cli.main(["ask", question, "--policy", "learned", "--explain"]) == 0
    printed = capsys.readouterr().out
    steps = [line for line in printed.splitlines() if line.startswith("[")]
    whys = [line for line in printed.splitlines() if line.startswith("    why: ")]
    assert len(whys) == len(steps) >= 2
    assert "why: retrieve_more" in whys[0]
    assert "blocked: gap_query, bridge_entity_expand, " in printed
    assert "compress_answer_evidence by first_step_retrieves" in printed
    # The learned policy's contributions: "feature [value] +0.12" after the bias.
    assert "candidate action [" in printed and "bias " in printed
    assert "continuation estimate" in printed
    assert printed.rstrip().endswith(f"Answer: {answer}")
    assert cli.main(["ask", question, "--policy", "learned"]) == 0
    assert "why:" not in capsys.readouterr().out


def test_ask_json_carries_the_explanations(
    fake_ask: Sequence[str], capsys: pytest.CaptureFixture[str]
) -> None:
    question, _ = fake_ask
    assert cli.main(["ask", question, "--policy", "learned", "--json", "--explain"]) == 0
    state = json.loads(capsys.readouterr().out)
    assert all("explanation" in entry for entry in state["trace"])
    assert [e["step"] for e in state["explanations"]] == [e["step"] for e in state["trace"]]
    assert state["explanations"][0]["lines"][0].startswith("why: retrieve_more")
    values = state["trace"][-1]["explanation"].get("values") or {}
    for part in values.values():
        total = part["bias"] + sum(c["contribution"] for c in part["contributions"])
        assert total + part["rest"] == pytest.approx(part["value"], abs=1e-9)


def test_ask_explain_shows_the_budget_rule_at_work(
    fake_ask: Sequence[str], capsys: pytest.CaptureFixture[str]
) -> None:
    question, answer = fake_ask
    argv = ["ask", question, "--explain", "--token-budget", "1200"]
    assert cli.main(argv) == 0
    printed = capsys.readouterr().out
    assert "by token_budget" in printed and "would cost" in printed
    assert "budget: 0 of 1200 tokens spent" in printed
    # The heuristic policy has no calibration curve: the first step says which rule stands in.
    assert printed.count("has no calibration curve") == 1
    assert printed.rstrip().splitlines()[-1] == f"Answer: {answer}"

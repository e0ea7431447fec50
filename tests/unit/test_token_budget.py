"""Token budgets: the estimate, the stop rule, the calibration curve, its policy file and the
runs that respect a budget (scripted reader, demo corpus)."""

from __future__ import annotations

import statistics
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from dynakrag import build_graph, cli
from dynakrag.configuration import Configuration
from dynakrag.data.demo import demo_passages
from dynakrag.data.demo_corpus import DemoCorpus, generate_demo_corpus
from dynakrag.files import read_arrays, write_arrays
from dynakrag.graph.validity import invalid_reasons, valid_actions
from dynakrag.policy.learned import LearnedPolicy, PolicyFileError
from dynakrag.policy.registry import DEFAULT_POLICY_FILE
from dynakrag.policy.token_budget import (
    BUDGET_RULE,
    CalibrationCurve,
    CurvePoint,
    TokenCosts,
    budget_status,
    choose_lambda,
    estimate,
    estimated_tokens,
    fit_token_costs,
    run_correction,
)
from dynakrag.state import ACQUISITION_ACTIONS, ACTIONS, initial_state
from tests.fakes import KeywordSearcher, demo_chat_model
from tests.joint import JOINT
from tests.markers import needs_data

CFG0 = Configuration()


@pytest.fixture(scope="module")
def corpus() -> DemoCorpus:
    return generate_demo_corpus(7)


def passage(n: int, chars: int = 400) -> dict[str, Any]:
    return {"id": f"p{n}", "title": f"Title {n}", "text": "word " * (chars // 5), "query": "q"}


def state_with(n_docs: int, **fields: Any) -> dict[str, Any]:
    state = dict(initial_state("Who founded the company that makes the Astrora Headset?"))
    state["evidence"] = [passage(i) for i in range(n_docs)]
    state.update(fields)
    return state


def curve(*points: tuple[float, float, float]) -> Any:
    return CalibrationCurve(
        points=tuple(CurvePoint(lam, tokens, sr, sr, 10) for lam, tokens, sr in points),
        costs=TokenCosts(),
    )


# --- estimating ----------------------------------------------------------------------------------


def test_estimates_follow_the_prompts_each_action_sends() -> None:
    cfg = Configuration()
    small, large = state_with(2), state_with(6)
    assert estimated_tokens(large, "stop_answer", cfg) > estimated_tokens(small, "stop_answer", cfg)
    assert estimated_tokens(state_with(0), "stop_answer", cfg) == 0  # no passages: no call
    for action in ("retrieve_more", "gap_query", "bridge_entity_expand"):
        assert estimated_tokens(large, action, cfg) == 0  # search only
    first = estimated_tokens(small, "sufficiency_check", cfg)
    decomposed = state_with(2, sub_questions=[{"question": "Who makes it?", "answer": None}])
    assert first > estimated_tokens(decomposed, "sufficiency_check", cfg)  # + decomposition
    assert estimated_tokens(small, "compress_answer_evidence", cfg) == 0
    dics = cfg.merged({"compression": "dics", "dsrag_extraction": "llm"})
    assert estimated_tokens(small, "compress_answer_evidence", dics) > 0


def test_the_stop_rule_blocks_what_the_rest_of_the_budget_cannot_pay() -> None:
    state = state_with(3, prompt_tokens=400, completion_tokens=20)
    answer_now = estimated_tokens(state, "stop_answer", Configuration())
    roomy = budget_status(state, Configuration(token_budget=100_000))
    assert roomy is not None and roomy.blocked == frozenset() and roomy.spent == 420
    tight = budget_status(state, Configuration(token_budget=420 + int(answer_now) + 5))
    assert tight is not None
    # Acquisitions add passages the answer must then read: all blocked; answering never is.
    assert tight.blocked >= ACQUISITION_ACTIONS and "sufficiency_check" in tight.blocked
    assert "stop_answer" not in tight.price and "compress_answer_evidence" not in tight.blocked
    reasons = invalid_reasons(state, Configuration(token_budget=420 + int(answer_now) + 5))
    # The named rules come first (no gap to query, no bridge entity); the budget blocks the rest.
    assert reasons["gap_query"] == "gap_query_needs_gap"
    assert {reasons[a] for a in ("retrieve_more", "rewrite_query", "sufficiency_check")} == {
        BUDGET_RULE
    }
    assert budget_status(state, Configuration()) is None


def test_a_spent_budget_still_answers_and_the_first_retrieval_is_never_blocked() -> None:
    cfg = Configuration(token_budget=10)
    spent = state_with(3, prompt_tokens=500)
    assert valid_actions(spent, cfg) == ["stop_answer", "compress_answer_evidence"]
    empty = state_with(0)
    assert valid_actions(empty, cfg) == ["retrieve_more"]


def step(action: str, estimated: float, prompt: int, completion: int = 0) -> dict[str, Any]:
    """A trace entry whose decision recorded ``estimated`` prompt tokens."""
    return {
        "action": action,
        "explanation": {"tokens": {"prompt": estimated, "completion_budget": 48}},
        "llm_calls": 1 if prompt else 0,
        "prompt_tokens": prompt,
        "completion_tokens": completion,
    }


def test_the_runs_own_counters_correct_the_prompt_estimate() -> None:
    trace = [step("sufficiency_check", 500.0, 750, 40)]
    assert run_correction(trace) == pytest.approx(1.5)
    assert run_correction([], prior=0.8) == 0.8  # before any call: the policy's measured ratio
    assert run_correction([step("sufficiency_check", 500.0, 50_000)]) == 2.0  # clamped
    state = state_with(3, trace=trace, prompt_tokens=750, completion_tokens=40)
    cfg = Configuration(token_budget=5000)
    status, plain = budget_status(state, cfg), budget_status({**state, "trace": []}, cfg)
    assert status is not None and plain is not None and status.correction == 1.5
    # retrieve_more's price is the answer after it: prompt x1.5, completion budget unchanged.
    after = plain.price["retrieve_more"] - 48
    assert status.price["retrieve_more"] == pytest.approx(1.5 * after + 48)


def test_the_cost_table_is_measured_on_the_recorded_decisions() -> None:
    traces = [[step("stop_answer", 1000.0, 800, 6), step("retrieve_more", 0.0, 0)]] * 3
    traces.append([step("sufficiency_check", 500.0, 900, 30)])  # one sample: too few
    costs = fit_token_costs(traces)
    assert costs.prompt_scale == pytest.approx((3 * 800 + 900) / (3 * 1000 + 500), abs=1e-4)
    assert costs.completion == {"stop_answer": 6.0}
    answer = estimate(state_with(3), "stop_answer", Configuration())
    assert costs.completion_of("stop_answer", answer) == 6.0
    assert costs.completion_of("sufficiency_check", answer) == answer.completion_budget
    assert costs.completion_of("retrieve_more", estimate(state_with(3), "retrieve_more", CFG0)) == 0
    cfg = Configuration(token_budget=5000)
    fitted, plain = budget_status(state_with(3), cfg, costs), budget_status(state_with(3), cfg)
    assert fitted is not None and plain is not None
    assert fitted.price["retrieve_more"] < plain.price["retrieve_more"]


# --- choosing lambda ---------------------------------------------------------------------------


def test_the_curve_picks_the_best_lambda_that_fits_the_budget() -> None:
    points = curve((0.0, 2400, 0.90), (0.1, 1400, 0.85), (0.5, 900, 0.70), (1.0, 700, 0.55))
    assert points.pick(2500)[0] == 0.0
    assert points.pick(1500)[0] == 0.1
    lam, why = points.pick(1000)
    assert lam == 0.5 and why.startswith("calibrated")
    lam, why = points.pick(500)
    assert lam == 1.0 and "no calibrated λ" in why and "stop rule" in why
    # Equal SR: the cheaper-in-λ point wins only on F1, then on the smaller λ.
    tied = curve((0.2, 800, 0.8), (0.1, 900, 0.8))
    assert tied.pick(1000)[0] == 0.1


def test_without_a_curve_the_configured_lambda_is_kept_and_said() -> None:
    cfg = Configuration(token_budget=1500, cost_lambda=0.05)
    lam, why = choose_lambda(cfg, None, "learned")
    assert lam == 0.05 and "no calibration curve" in why and "stop rule" in why
    assert choose_lambda(Configuration(cost_lambda=0.3), None, "x") == (
        0.3,
        "configured cost_lambda",
    )
    assert choose_lambda(cfg, curve((0.2, 1000, 0.5)), "learned")[0] == 0.2


def test_a_curve_round_trips_and_rejects_nonsense() -> None:
    original = CalibrationCurve(
        points=(CurvePoint(0.0, 1200.0, 0.8, None, 4), CurvePoint(0.5, 700.0, 0.6, 0.4, 4)),
        costs=TokenCosts(prompt_scale=0.9, completion={"stop_answer": 7.5}),
        data={"split": "train"},
    )
    assert CalibrationCurve.from_json(original.to_json()) == original
    for broken in (
        {**original.to_json(), "version": 9},
        {**original.to_json(), "points": []},
        {**original.to_json(), "points": [{"cost_lambda": "x"}]},
        {**original.to_json(), "token_costs": {"prompt_scale": 1.0}},
        {**original.to_json(), "token_costs": {"prompt_scale": 0, "completion_tokens": {}}},
        {**original.to_json(), "token_costs": {"prompt_scale": 1, "completion_tokens": {"x": 1}}},
        [],
    ):
        with pytest.raises(ValueError):
            CalibrationCurve.from_json(broken)


# --- the policy file ----------------------------------------------------------------------------


def test_the_shipped_policy_has_no_curve_and_a_calibrated_copy_round_trips(
    tmp_path: Path,
) -> None:
    shipped = LearnedPolicy.load(DEFAULT_POLICY_FILE)
    assert shipped.calibration is None
    assert "calibration" not in read_arrays(DEFAULT_POLICY_FILE)[1]
    calibrated = shipped.with_calibration(curve((0.0, 2000, 0.9), (0.5, 900, 0.7)))
    path = calibrated.save(tmp_path / "calibrated.npz")
    loaded = LearnedPolicy.load(path)
    assert loaded.calibration == calibrated.calibration
    assert loaded.with_ablated_continuation().calibration == calibrated.calibration
    state = state_with(3)
    cfg = Configuration()
    assert loaded.scores(state, list(ACTIONS), cfg) == shipped.scores(state, list(ACTIONS), cfg)
    arrays, meta = read_arrays(path)
    meta["calibration"]["points"][0]["tokens"] = -5.0
    write_arrays(tmp_path / "bad.npz", arrays, meta)
    with pytest.raises(PolicyFileError, match=r"calibration|finite"):
        LearnedPolicy.load(tmp_path / "bad.npz")


# --- runs ---------------------------------------------------------------------------------------


def run_tokens(corpus: DemoCorpus, cfg: Configuration, policy: Any = None) -> list[int]:
    answers = {q.question: q.answer for q in corpus.questions}
    graph = build_graph(
        KeywordSearcher(demo_passages(corpus)),
        demo_chat_model(answers),
        configuration=cfg,
        policy=policy,
    )
    tokens = []
    for question in corpus.questions:
        final = graph.invoke({"question": question.question})
        tokens.append(final["prompt_tokens"] + final["completion_tokens"])
    return tokens


CHAIN = {"sub_question_answering": "chain", "max_steps": 16, "max_retrieval_calls": 10}


@pytest.mark.parametrize(
    ("policy", "settings"),
    [("heuristic", JOINT), ("learned", JOINT), ("heuristic", CHAIN), ("learned", CHAIN)],
    ids=["heuristic-joint", "learned-joint", "heuristic-chain", "learned-chain"],
)
def test_budgets_are_respected_on_a_fake_run(
    corpus: DemoCorpus, policy: str, settings: dict[str, Any]
) -> None:
    # On the chain, the hop calls cost less than priced; the run's correction then fell below
    # 1 and the answer after compression went over 2500 tokens on 13 of 54 questions.
    free = statistics.fmean(run_tokens(corpus, Configuration(policy=policy, **settings)))
    means = {}
    for budget in (900, 1500, 2500):
        cfg = Configuration(policy=policy, token_budget=budget, **settings)
        tokens = run_tokens(corpus, cfg)
        means[budget] = statistics.fmean(tokens)
        assert means[budget] <= budget, (budget, tokens)
        assert max(tokens) <= budget
    assert means[900] <= means[1500] <= means[2500] <= free + 1e-9
    assert means[900] < free  # the budget changed what the controller did


def test_a_calibrated_policy_runs_with_the_lambda_its_curve_picks(corpus: DemoCorpus) -> None:
    points = curve((0.0, 2200, 0.9), (0.3, 1200, 0.8), (1.0, 800, 0.6))
    policy = LearnedPolicy.load(DEFAULT_POLICY_FILE).with_calibration(points)
    answers = {q.question: q.answer for q in corpus.questions}
    graph = build_graph(
        KeywordSearcher(demo_passages(corpus)),
        demo_chat_model(answers),
        configuration=Configuration(token_budget=1300),
        policy=policy,
    )
    final = graph.invoke({"question": corpus.questions[0].question})
    first = final["trace"][0]["explanation"]
    assert first["cost_lambda"] == 0.3 and first["lambda_source"].startswith("calibrated: λ=0.3")
    assert first["budget"]["token_budget"] == 1300
    assert final["prompt_tokens"] + final["completion_tokens"] <= 1300
    # The shipped policy has no curve: the trace says which rule stands in.
    fallback = build_graph(
        KeywordSearcher(demo_passages(corpus)),
        demo_chat_model(answers),
        configuration=Configuration(token_budget=1300, policy="learned"),
    ).invoke({"question": corpus.questions[0].question})
    source = fallback["trace"][0]["explanation"]["lambda_source"]
    assert "no calibration curve" in source and "stop rule" in source


# --- eval and calibrate ------------------------------------------------------------------------


@pytest.fixture
def scripted_backend(monkeypatch: pytest.MonkeyPatch, isolated_env: None) -> None:
    """The configured generator replaced by the scripted reader of 2Wiki's questions."""
    from dynakrag.data.datasets import load_examples

    answers = {
        ex.question: ex.answers[0]
        for split in ("train", "eval")
        for ex in load_examples("2wiki", split, 3)
    }
    reader = demo_chat_model(answers)
    monkeypatch.setattr("dynakrag.llm.factory.chat_model_from_config", lambda cfg: reader)


@needs_data
def test_eval_with_a_token_budget_stays_within_it(scripted_backend: None, tmp_path: Path) -> None:
    from dynakrag.eval.runner import evaluate

    runs = {}
    for budget in (None, 900):
        result = evaluate(
            "2wiki", "eval", "open", "dynakrag", retriever="bm25", limit=3, progress=False,
            cfg=Configuration(token_budget=budget, policy="learned"), cache=False, report=False,
        )  # fmt: skip
        summary = result["summary"]
        runs[budget] = summary["prompt_tokens"] + summary["completion_tokens"]
        assert result["meta"]["configuration"]["token_budget"] == budget
    assert runs[900] <= 900 < runs[None]


@needs_data
def test_calibrate_writes_a_policy_whose_curve_drives_budget_runs(
    scripted_backend: None,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Every run must write an answer for the cost table to price it: no abstention.
    monkeypatch.setenv("DYNAKRAG_ABSTAIN", "0")
    out = tmp_path / "calibrated.npz"
    argv = ["calibrate", "--policy", "learned", "--dataset", "2wiki", "--limit", "3",
            "--lambdas", "0", "1", "--retriever", "bm25", "--setting", "open", "--no-cache",
            "--quiet", "--out", str(out)]  # fmt: skip
    assert cli.main(argv) == 0
    printed = capsys.readouterr().out
    assert "λ=0:" in printed and "λ=1:" in printed and str(out) in printed
    policy = LearnedPolicy.load(out)
    assert policy.calibration is not None
    points = policy.calibration.points
    assert [p.cost_lambda for p in points] == [0.0, 1.0] and all(p.n == 3 for p in points)
    assert points[1].tokens <= points[0].tokens  # a heavier cost weight spends fewer tokens
    data = policy.calibration.data
    assert data["split"] == "train" and data["datasets"] == ["2wiki"] and data["policy_sha256"]
    costs = policy.calibration.costs  # fitted on the runs: the answers' real completions
    # Actions that made calls are measured (the chain's own answers call no reader); the
    # scripted replies are short.
    assert costs.prompt_scale != 1.0 and costs.completion
    assert all(0 < tokens < 48 for tokens in costs.completion.values()), costs.completion
    same = LearnedPolicy.load(DEFAULT_POLICY_FILE)
    state = state_with(2)
    np.testing.assert_allclose(
        list(policy.raw_values(state, list(ACTIONS), Configuration()).values()),
        list(same.raw_values(state, list(ACTIONS), Configuration()).values()),
    )


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--policy", "learned", "--split", "eval"], "only --split train"),
        (["--policy", "heuristic"], "not a learned policy"),
        (["--policy", "learned", "--lambdas", "-1"], "number >= 0"),
    ],
)
def test_calibrate_refuses_eval_rows_and_policies_without_lambda(
    argv: list[str],
    message: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    isolated_env: None,
) -> None:
    full = ["calibrate", "--dataset", "2wiki", "--out", str(tmp_path / "p.npz"), *argv]
    assert cli.main(full) == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "p.npz").exists()


def test_eval_token_budget_applies_to_the_dynakrag_method_only(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], isolated_env: None
) -> None:
    out = ["--out", str(tmp_path / "r.json")]
    naive = ["eval", "--dataset", "2wiki", "--method", "naive", "--token-budget", "900", *out]
    assert cli.main(naive) == 2
    assert "--token-budget applies to --method dynakrag only" in capsys.readouterr().err
    zero = ["eval", "--dataset", "2wiki", "--method", "dynakrag", "--token-budget", "0", *out]
    assert cli.main(zero) == 2
    assert "positive integer" in capsys.readouterr().err
    assert not (tmp_path / "r.json").exists()

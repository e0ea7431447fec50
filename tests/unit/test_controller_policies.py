"""Comparison policies of the controller: the fixed schedule, the gold-aware oracle, the
action-removal wrapper, and how the registry exposes them (demo corpus, fake models)."""

from __future__ import annotations

from itertools import pairwise
from statistics import fmean
from typing import Any

import pytest

from dynakrag import build_graph
from dynakrag.actions.common import Resources
from dynakrag.configuration import Configuration
from dynakrag.data.datasets import QAExample
from dynakrag.errors import ConfigurationError, UserInputError
from dynakrag.eval.metrics import state_support_recall
from dynakrag.eval.oracle import OraclePolicy
from dynakrag.graph.replay import initial_state, replay
from dynakrag.llm.client import LLMClient
from dynakrag.policy.ablation import WithoutActions
from dynakrag.policy.fixed import FIXED_ACQUISITION_ORDER, FixedSchedulePolicy
from dynakrag.policy.heuristic import HeuristicPolicy
from dynakrag.policy.registry import BUILTIN_POLICIES, resolve_policy
from dynakrag.policy.uniform import UniformPolicy
from dynakrag.state import ACQUISITION_ACTIONS, ACTIONS, TERMINAL_ACTIONS
from dynakrag.training.collect import demo_examples
from tests.fakes import KeywordSearcher, demo_chat_model

CFG = Configuration()
EXAMPLES = demo_examples()
ANSWERS = {e.question: e.answers[0] for e in EXAMPLES}
# Bridge and comparison questions alike (the comparison questions are the last six).
SAMPLE = EXAMPLES[:48:6] + EXAMPLES[48::2]


def llm() -> LLMClient:
    return LLMClient(demo_chat_model(ANSWERS))


def resources(example: QAExample) -> Resources:
    return Resources(KeywordSearcher(example.passages), llm())


def run(example: QAExample, policy: Any, cfg: Configuration = CFG) -> dict[str, Any]:
    searcher = KeywordSearcher(example.passages)
    graph = build_graph(searcher, policy=policy, configuration=cfg, llm=llm())
    return graph.invoke({"question": example.question})


def actions_of(final: dict[str, Any]) -> list[str]:
    return [entry["action"] for entry in final["trace"]]


def sr(final: dict[str, Any], example: QAExample) -> float:
    return state_support_recall(final, example.gold_sets)


# --------------------------------------------------------------------------------------------
# Registry


def test_fixed_is_built_in_and_the_oracle_is_refused_by_name() -> None:
    assert isinstance(resolve_policy("fixed"), FixedSchedulePolicy)
    assert "fixed" in BUILTIN_POLICIES and "oracle" not in BUILTIN_POLICIES
    with pytest.raises(ConfigurationError, match="gold support"):
        resolve_policy("oracle")
    with pytest.raises(ConfigurationError, match="fixed"):
        resolve_policy("no-such-policy")  # the message lists the built-in names


# --------------------------------------------------------------------------------------------
# Fixed schedule


def test_fixed_schedule_order_on_hand_made_states() -> None:
    policy = FixedSchedulePolicy()
    base = initial_state(EXAMPLES[0].question, CFG)
    doc = {"id": "d1", "title": "t", "text": "x"}

    def choose(valid: list[str], **state: Any) -> str:
        return policy.choose({**base, **state}, valid, CFG)

    everything = list(ACTIONS)
    assert choose(["retrieve_more"]) == "retrieve_more"  # first step
    # New evidence since the last check: check sufficiency first.
    assert choose(everything, evidence=[doc], evidence_count_at_check=-1) == "sufficiency_check"
    checked = {"evidence": [doc], "evidence_count_at_check": 1, "sufficient": False}
    # Something is missing: acquire in the fixed order, the first valid one.
    for index, action in enumerate(FIXED_ACQUISITION_ORDER):
        valid = [*FIXED_ACQUISITION_ORDER[index:], "stop_answer", "compress_answer_evidence"]
        assert choose(valid, **checked) == action
    # Nothing left to acquire, or the check says sufficient: compress, then stop.
    terminal = ["stop_answer", "compress_answer_evidence"]
    assert choose(terminal, **checked) == "compress_answer_evidence"
    assert choose(["stop_answer"], **checked) == "stop_answer"
    sufficient = {**checked, "sufficient": True}
    assert choose(everything, **sufficient) == "compress_answer_evidence"
    # A fixed schedule ignores cost_lambda.
    expensive = CFG.merged({"cost_lambda": 5.0})
    state = {**base, **checked}
    assert policy.choose(state, ["rewrite_query", "stop_answer"], expensive) == "rewrite_query"


def test_fixed_schedule_runs_retrieve_check_acquire_check_then_compress_and_stop() -> None:
    cfg = CFG.merged({"max_steps": 6})
    for example in SAMPLE:
        actions = actions_of(run(example, "fixed", cfg))
        assert actions[0] == "retrieve_more"
        assert actions[-1] == "stop_answer"
        body = actions[:-1]
        if body[-1] == "compress_answer_evidence":
            body = body[:-1]
        # Every acquisition is followed by a sufficiency check while steps are left.
        for before, after in pairwise(body):
            if before in ACQUISITION_ACTIONS:
                assert after == "sufficiency_check", actions
            if before == "sufficiency_check":
                assert after in ACQUISITION_ACTIONS, actions
        assert not set(body) & TERMINAL_ACTIONS


# --------------------------------------------------------------------------------------------
# Oracle


def test_oracle_refuses_to_run_without_gold() -> None:
    example = EXAMPLES[0]
    with pytest.raises(UserInputError, match="gold"):
        OraclePolicy([], resources(example))
    with pytest.raises(UserInputError, match="horizon"):
        OraclePolicy(example.gold_sets, resources(example), horizon=0)


def test_oracle_support_recall_is_at_least_every_other_policy() -> None:
    recalls: dict[str, list[float]] = {"oracle": [], "uniform": [], "fixed": [], "heuristic": []}
    for example in SAMPLE:
        oracle = OraclePolicy(example.gold_sets, resources(example))
        final = run(example, oracle)
        recalls["oracle"].append(sr(final, example))
        assert final["retrieval_calls"] <= CFG.max_retrieval_calls
        assert oracle.stats()["lookahead_steps"] > 0
        for name, policy in (
            ("uniform", UniformPolicy()),
            ("fixed", FixedSchedulePolicy()),
            ("heuristic", HeuristicPolicy()),
        ):
            recalls[name].append(sr(run(example, policy), example))
    means = {name: fmean(values) for name, values in recalls.items()}
    assert means["oracle"] >= max(means["uniform"], means["fixed"], means["heuristic"])
    assert means["oracle"] > means["uniform"]


def test_oracle_stops_once_support_recall_cannot_improve() -> None:
    for example in SAMPLE:
        final = run(example, OraclePolicy(example.gold_sets, resources(example)))
        actions = actions_of(final)
        # SR along the run: after each prefix of actions (replayed: the graph is deterministic).
        srs = [
            state_support_recall(replay(example.question, actions[:i], resources(example), CFG),
                                 example.gold_sets)
            for i in range(1, len(actions))
        ]  # fmt: skip
        full = [i for i, value in enumerate(srs) if value >= 1.0]
        if full:  # once all gold is found, the run ends: at most one check reads it first
            rest = actions[full[0] + 1 :]
            assert set(rest) <= TERMINAL_ACTIONS | {"sufficiency_check"}, actions
            assert rest.count("sufficiency_check") <= 1, actions
        # Its last acquisition gained something: it never acquires for nothing at the end.
        last = max(i for i, a in enumerate(actions) if a in ACQUISITION_ACTIONS)
        assert last == 0 or srs[last] > srs[last - 1], actions


def test_oracle_respects_removed_actions() -> None:
    example = EXAMPLES[0]
    oracle = OraclePolicy(example.gold_sets, resources(example), without={"sufficiency_check"})
    assert "sufficiency_check" not in actions_of(run(example, oracle))


# --------------------------------------------------------------------------------------------
# Removing actions (the sufficiency ablation)


def test_without_actions_filters_the_valid_set_but_never_empties_it() -> None:
    policy = WithoutActions(HeuristicPolicy(), {"sufficiency_check"})
    assert policy.allowed(["sufficiency_check", "stop_answer"]) == ["stop_answer"]
    assert policy.allowed(["sufficiency_check"]) == ["sufficiency_check"]
    with pytest.raises(ValueError, match="unknown"):
        WithoutActions(HeuristicPolicy(), {"jump"})
    for example in SAMPLE[:4]:
        final = run(example, policy)
        assert "sufficiency_check" not in actions_of(final)
        for entry in final["trace"]:
            # What the policy ranked (recorded as scores) never holds the removed action.
            assert "sufficiency_check" not in entry["scores"]
    assert any("sufficiency_check" in actions_of(run(e, "heuristic")) for e in SAMPLE[:4])


def test_rank_evaluates_the_policy_once_and_agrees_with_scores_and_choose() -> None:
    class Counting(HeuristicPolicy):
        calls = 0

        def value(self, state: Any, actions: Any, cfg: Configuration) -> dict[str, float]:
            Counting.calls += 1
            return super().value(state, actions, cfg)

    policy = Counting()
    state = initial_state(EXAMPLES[0].question, CFG)
    valid = ["retrieve_more", "rewrite_query", "stop_answer"]
    scores, choice = policy.rank(state, valid, CFG)
    assert Counting.calls == 1
    assert scores == policy.scores(state, valid, CFG)
    assert choice == policy.choose(state, valid, CFG) == "retrieve_more"
    # The ablation wrapper ranks (and so scores) only what it allows.
    ablated_scores, ablated = WithoutActions(policy, {"retrieve_more"}).rank(state, valid, CFG)
    assert set(ablated_scores) == {"rewrite_query", "stop_answer"}
    assert ablated == "rewrite_query"

"""Every run ends, within its budgets, whatever the policy prefers and whatever the model says."""

from __future__ import annotations

import itertools
import json
import math
from collections.abc import Callable, Sequence
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langchain_core.messages import BaseMessage
from langgraph.errors import GraphRecursionError

from dynakrag import build_graph
from dynakrag.configuration import Configuration
from dynakrag.data.demo import demo_passages
from dynakrag.data.demo_corpus import generate_demo_corpus
from dynakrag.llm.client import LLMClient
from dynakrag.llm.fake import ScriptedChatModel
from dynakrag.policy.base import ACTION_COSTS, Policy
from dynakrag.policy.heuristic import HeuristicPolicy
from dynakrag.policy.uniform import UniformPolicy
from dynakrag.state import ACTIONS, TERMINAL_ACTIONS, State
from tests.fakes import KeywordSearcher, demo_responder

CORPUS = generate_demo_corpus(7)
PASSAGES = demo_passages(CORPUS)
QUESTIONS = [q for q in CORPUS.questions if q.id.endswith("-00") or q.id.endswith("-01")]
ANSWERS = {q.question: q.answer for q in CORPUS.questions}
COUNTERS = ("retrieval_calls", "llm_calls", "prompt_tokens", "completion_tokens")
SETTINGS = settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


# --- adversarial policies ------------------------------------------------------------------


class DrawnValuesPolicy(Policy):
    """v(s, a) taken from a drawn table, one row per decision (NaN and infinities included)."""

    name = "drawn"

    def __init__(self, rows: Sequence[Sequence[float]]) -> None:
        self.rows = itertools.cycle(rows)

    def value(self, state: State, actions: Sequence[str], cfg: Configuration) -> dict[str, float]:
        row = next(self.rows)
        return {action: row[ACTIONS.index(action)] for action in actions}


class MostExpensivePolicy(Policy):
    """Always prefers the costliest valid action."""

    name = "most-expensive"

    def value(self, state: State, actions: Sequence[str], cfg: Configuration) -> dict[str, float]:
        return {action: 10.0 * ACTION_COSTS[action] for action in actions}


class PreferPolicy(Policy):
    """Always prefers one action (when valid), then the others in reverse canonical order."""

    def __init__(self, favourite: str) -> None:
        self.favourite = favourite
        self.name = f"prefer-{favourite}"

    def value(self, state: State, actions: Sequence[str], cfg: Configuration) -> dict[str, float]:
        return {a: 100.0 if a == self.favourite else float(ACTIONS.index(a)) for a in actions}


class NeverAnswerPolicy(Policy):
    """Never wants to answer or compress; otherwise prefers the later actions."""

    name = "never-answer"

    def value(self, state: State, actions: Sequence[str], cfg: Configuration) -> dict[str, float]:
        return {a: -math.inf if a in TERMINAL_ACTIONS else float(ACTIONS.index(a)) for a in actions}


ANY_FLOAT = st.floats(allow_nan=True, allow_infinity=True) | st.sampled_from(
    [0.0, 1.0, -1.0, math.inf, -math.inf, math.nan, 1e308]
)


@st.composite
def policies(draw: st.DrawFn) -> Policy:
    kind = draw(st.sampled_from(["drawn", "expensive", "prefer", "never", "heuristic", "uniform"]))
    if kind == "drawn":
        rows = draw(st.lists(st.lists(ANY_FLOAT, min_size=7, max_size=7), min_size=1, max_size=6))
        return DrawnValuesPolicy(rows)
    if kind == "expensive":
        return MostExpensivePolicy()
    if kind == "prefer":
        return PreferPolicy(draw(st.sampled_from(ACTIONS)))
    if kind == "never":
        return NeverAnswerPolicy()
    return HeuristicPolicy() if kind == "heuristic" else UniformPolicy()


# --- adversarial models --------------------------------------------------------------------

JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=3)
    ),
    max_leaves=8,
)
BEHAVIOUR = st.one_of(
    st.just(("raise", "")),
    st.just(("empty", "")),
    st.just(("demo", "")),
    st.tuples(st.just("garbage"), st.text(max_size=60)),
    st.tuples(
        st.just("json"),
        st.fixed_dictionaries(
            {},
            optional={
                "sub_questions": st.lists(
                    st.text(max_size=30)
                    | st.sampled_from(["#1", "Who founded #2?", ""])
                    | st.integers()
                    | st.none(),
                    max_size=6,
                ),
                "answers": st.lists(
                    st.text(max_size=30)
                    | st.sampled_from(["UNKNOWN", "#1", "Quarstead"])
                    | st.none()
                    | st.integers(),
                    max_size=6,
                ),
            },
        ).map(json.dumps),
    ),
    st.tuples(st.just("json"), JSON_VALUES.map(json.dumps)),
)


class Model:
    """Replies by cycling through drawn behaviours; counts every request."""

    def __init__(self, behaviours: Sequence[tuple[str, str]]) -> None:
        self.behaviours = itertools.cycle(behaviours)
        self.reader = demo_responder(ANSWERS)
        self.calls = 0

    def __call__(self, messages: list[BaseMessage]) -> str:
        self.calls += 1
        kind, payload = next(self.behaviours)
        if kind == "raise":
            raise RuntimeError("backend unavailable")
        if kind == "empty":
            return ""
        if kind == "demo":
            return self.reader(messages)
        return payload


BUDGETS = st.fixed_dictionaries(
    {
        "max_steps": st.integers(1, 6),
        "max_retrieval_calls": st.integers(1, 6),
        "docs_per_action": st.integers(1, 4),
        "max_final_docs": st.integers(1, 12),
        "compression": st.sampled_from(["heuristic", "passthrough"]),
    }
)


def run(
    policy: Policy,
    behaviours: Sequence[tuple[str, str]],
    budgets: dict[str, Any],
    text: str,
    retries: int = 0,
) -> tuple[dict[str, Any], Model, KeywordSearcher]:
    model = Model(behaviours)
    searcher = KeywordSearcher(PASSAGES)
    llm = LLMClient(ScriptedChatModel(respond=model), max_retries=retries, backoff_s=0)
    graph = build_graph(searcher, llm=llm, policy=policy)
    try:
        final = graph.invoke({"question": text}, {"configurable": budgets})
    except GraphRecursionError:
        pytest.fail(f"the run did not end: {policy.name}, {budgets}")
    return final, model, searcher


def check_run(
    final: dict[str, Any], model: Model, searcher: KeywordSearcher, budgets: dict[str, Any]
) -> None:
    cfg = Configuration(**budgets)
    # Every run ends with an answer or with an abstention and its reason, never both.
    if final["abstained"]:
        assert final["answer"] == "" and final["abstain_reason"].strip()
    else:
        assert isinstance(final["answer"], str) and final["answer"].strip()
    trace = final["trace"]
    actions = [entry["action"] for entry in trace]
    assert actions[-1] == "stop_answer" and actions.count("stop_answer") == 1
    assert actions.count("compress_answer_evidence") <= 1
    if "compress_answer_evidence" in actions:
        assert actions[-2] == "compress_answer_evidence"
    assert final["steps"] == sum(1 for a in actions if a not in TERMINAL_ACTIONS)
    assert final["steps"] <= cfg.max_steps
    assert final["retrieval_calls"] <= cfg.max_retrieval_calls
    assert len(final["evidence"]) <= cfg.max_final_docs
    # What was spent is what was accounted.
    assert final["retrieval_calls"] == len(searcher.calls)
    assert final["llm_calls"] == model.calls
    for counter in COUNTERS:
        assert final[counter] == sum(entry[counter] for entry in trace)
        assert final[counter] == sum(c[counter] for c in final["accounting"].values())
    for index, entry in enumerate(trace):
        if index and actions[index - 1] == "compress_answer_evidence":
            continue  # reached by edge, not chosen
        assert entry["action"] in entry["valid_actions"]


QUESTION = st.sampled_from([q.question for q in QUESTIONS])
BEHAVIOURS = st.lists(BEHAVIOUR, min_size=1, max_size=8)


@SETTINGS
@given(policy=policies(), behaviours=BEHAVIOURS, budgets=BUDGETS, text=QUESTION)
def test_every_run_ends_within_its_budgets(
    policy: Policy, behaviours: list[tuple[str, str]], budgets: dict[str, Any], text: str
) -> None:
    final, model, searcher = run(policy, behaviours, budgets, text)
    check_run(final, model, searcher, budgets)


@SETTINGS
@given(
    favourite=st.sampled_from(ACTIONS),
    behaviours=BEHAVIOURS,
    budgets=BUDGETS,
    text=QUESTION,
    retries=st.integers(0, 1),
)
def test_single_minded_policies_end_within_budgets(
    favourite: str,
    behaviours: list[tuple[str, str]],
    budgets: dict[str, Any],
    text: str,
    retries: int,
) -> None:
    final, model, searcher = run(PreferPolicy(favourite), behaviours, budgets, text, retries)
    check_run(final, model, searcher, budgets)


@pytest.mark.parametrize(
    "policy_factory",
    [
        MostExpensivePolicy,
        lambda: PreferPolicy("sufficiency_check"),
        NeverAnswerPolicy,
        HeuristicPolicy,
    ],
    ids=["most-expensive", "prefer-sufficiency", "never-answer", "heuristic"],
)
@pytest.mark.parametrize("kind", ["raise", "empty", "garbage", "demo"])
def test_fixed_model_behaviours_end(policy_factory: Callable[[], Policy], kind: str) -> None:
    budgets = {"max_steps": 6, "max_retrieval_calls": 6, "docs_per_action": 4}
    for q in QUESTIONS[:3]:
        final, model, searcher = run(policy_factory(), [(kind, "}{ not json")], budgets, q.question)
        check_run(final, model, searcher, budgets)
        # No reply, or an unusable one the passages do not state: no answer, with a reason.
        if kind in ("raise", "empty", "garbage"):
            assert final["abstained"] and final["answer"] == ""
        else:
            assert final["answer"] == q.answer or final["abstained"]


@pytest.mark.parametrize("policy_factory", [lambda: PreferPolicy("rewrite_query"), UniformPolicy])
def test_rewrite_preferring_policies_end(policy_factory: Callable[[], Policy]) -> None:
    budgets = {"max_steps": 6, "max_retrieval_calls": 6, "docs_per_action": 2}
    for q in QUESTIONS:
        final, model, searcher = run(policy_factory(), [("demo", "")], budgets, q.question)
        check_run(final, model, searcher, budgets)

"""The validity layer: each named rule blocks exactly in its situation, and A(s) is never empty."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dynakrag.configuration import Configuration
from dynakrag.graph.validity import (
    CHAIN_READS_FIRST,
    MAX_REWRITES,
    MAX_UNREAD_SEARCHES,
    RULES,
    Rule,
    invalid_reasons,
    valid_actions,
)
from dynakrag.state import ACQUISITION_ACTIONS, ACTIONS, Document, State, initial_state

QUESTION = "In which city is the headquarters of the company where Ada Voss works?"
# The rule tests run on the joint check, where every action of ``rich_state`` is open; the
# chain's own rule (unread evidence is read first) is tested on CHAIN, the default.
CFG = Configuration(max_steps=4, max_retrieval_calls=4, sub_question_answering="joint")
CHAIN = Configuration(max_steps=4, max_retrieval_calls=4)
CONTROL_ACTIONS = ACQUISITION_ACTIONS | {"sufficiency_check"}

# Every rule in RULES must be exercised by a test below (see test_every_rule_has_a_test).
TESTED_RULES = {
    "answered_ends_run",
    "question_needs_content",
    "step_budget",
    "retrieval_budget",
    "first_step_retrieves",
    "retrieve_more_needs_frontier",
    "gap_query_needs_gap",
    "bridge_needs_unexpanded_entity",
    "rewrite_needs_evidence_and_limit",
    "sufficiency_needs_new_evidence",
    "compress_once_on_the_way_to_answer",
    "complete_chain_searches_no_more",
}


def docs(n: int) -> list[Document]:
    """``n`` distinct evidence passages."""
    return [Document(id=f"d{i}", title=f"Doc {i}", text=f"text {i}") for i in range(n)]


def make_state(**overrides: Any) -> State:
    """A state as ``prepare`` leaves it, with ``overrides`` applied."""
    state: dict[str, Any] = dict(initial_state(QUESTION))
    state.update(overrides)
    return state  # type: ignore[return-value]


def rich_state(**overrides: Any) -> State:
    """A mid-run state where every action has something to work on."""
    values: dict[str, Any] = {
        "evidence": docs(3),
        "steps": 1,
        "retrieval_calls": 1,
        "gaps": ["Who founded Kestrel Labs?"],
        "bridge_entities": ["Kestrel Labs"],
        "frontier": {"query": QUESTION, "unseen_left": 5},
    }
    values.update(overrides)
    return make_state(**values)


def rule(name: str) -> Rule:
    matches = [r for r in RULES if r.name == name]
    assert len(matches) == 1, name
    return matches[0]


def blocks(name: str, state: State, cfg: Configuration = CFG) -> bool:
    return rule(name).blocks(state, cfg)


# --- the rule table itself -----------------------------------------------------------------


def test_rule_names_are_unique_and_every_rule_is_described() -> None:
    names = [r.name for r in RULES]
    assert len(names) == len(set(names))
    for r in RULES:
        assert r.name and r.name.isidentifier(), r
        assert isinstance(r.description, str) and len(r.description.strip()) >= 20, r.name
        assert r.description.strip().endswith("."), r.name  # a sentence, like a docstring
        assert r.actions and r.actions <= set(ACTIONS), r.name
        assert callable(r.blocks)


def test_every_rule_has_a_test() -> None:
    assert {r.name for r in RULES} == TESTED_RULES


def test_rich_state_allows_every_action() -> None:
    """The baseline of the tests below: nothing is blocked in ``rich_state`` (without a chain;
    with one its unread evidence is read first, tested below)."""
    assert invalid_reasons(rich_state(), CFG) == {}
    assert valid_actions(rich_state(), CFG) == list(ACTIONS)
    checked = rich_state(evidence_count_at_check=3)
    assert set(invalid_reasons(checked, CHAIN)) == {"sufficiency_check"}


# --- one test per rule ---------------------------------------------------------------------


def test_answered_ends_run() -> None:
    answered = rich_state(answer="Velford")
    assert blocks("answered_ends_run", answered)
    assert valid_actions(answered, CFG) == []
    assert set(invalid_reasons(answered, CFG)) == set(ACTIONS)
    assert all(reason == "answered_ends_run" for reason in invalid_reasons(answered, CFG).values())
    # Even a state with no evidence and spent budgets has nothing valid once answered.
    assert valid_actions(make_state(answer="x", steps=9, retrieval_calls=9), CFG) == []
    assert not blocks("answered_ends_run", rich_state())
    assert not blocks("answered_ends_run", rich_state(answer=""))


def test_an_abstention_ends_the_run_too() -> None:
    abstained = rich_state(answer="", abstained=True, abstain_reason="no passage")
    assert blocks("answered_ends_run", abstained)
    assert valid_actions(abstained, CFG) == []


def test_question_needs_content() -> None:
    for text in ("?", "What?", ",,,,", "\ufffd\ufffd\ufffd", "-h"):
        empty = make_state(question=text, query=text)
        assert blocks("question_needs_content", empty)
        # Nothing but the answer (an abstention) may run, even before any evidence.
        assert valid_actions(empty, CFG) == ["stop_answer"]
        assert not blocks("question_needs_content", empty, Configuration(abstain=False))
    assert not blocks("question_needs_content", rich_state())
    assert not blocks("question_needs_content", make_state())


def test_step_budget_stops_control_steps() -> None:
    spent = rich_state(steps=CFG.max_steps)
    assert blocks("step_budget", spent)
    assert blocks("step_budget", rich_state(steps=CFG.max_steps + 3))
    allowed = valid_actions(spent, CFG)
    assert not CONTROL_ACTIONS & set(allowed)
    assert allowed == ["stop_answer", "compress_answer_evidence"]
    assert {invalid_reasons(spent, CFG)[a] for a in CONTROL_ACTIONS} == {"step_budget"}
    # One step left: control steps may run.
    assert not blocks("step_budget", rich_state(steps=CFG.max_steps - 1))
    assert valid_actions(rich_state(steps=CFG.max_steps - 1), CFG) == list(ACTIONS)


def test_step_budget_follows_the_configuration() -> None:
    state = rich_state(steps=2)
    assert blocks("step_budget", state, Configuration(max_steps=2))
    assert not blocks("step_budget", state, Configuration(max_steps=3))


def test_retrieval_budget_stops_retrieval_only() -> None:
    spent = rich_state(retrieval_calls=CFG.max_retrieval_calls)
    assert blocks("retrieval_budget", spent)
    allowed = valid_actions(spent, CFG)
    assert not ACQUISITION_ACTIONS & set(allowed)
    # A sufficiency check reads the evidence; it needs no retrieval.
    assert allowed == ["sufficiency_check", "stop_answer", "compress_answer_evidence"]
    assert {invalid_reasons(spent, CFG)[a] for a in ACQUISITION_ACTIONS} == {"retrieval_budget"}
    assert not blocks("retrieval_budget", rich_state(retrieval_calls=CFG.max_retrieval_calls - 1))


def test_first_step_retrieves_no_answer_before_evidence() -> None:
    start = make_state()
    assert blocks("first_step_retrieves", start)
    assert valid_actions(start, CFG) == ["retrieve_more"]
    reasons = invalid_reasons(start, CFG)
    assert reasons["stop_answer"] == "first_step_retrieves"
    assert "retrieve_more" not in reasons
    # With evidence the rule is silent.
    assert not blocks("first_step_retrieves", make_state(evidence=docs(1)))


@pytest.mark.parametrize(
    "spent",
    [{"steps": CFG.max_steps}, {"retrieval_calls": CFG.max_retrieval_calls}],
    ids=["steps", "retrieval_calls"],
)
def test_first_step_retrieves_gives_way_when_the_budget_is_spent(spent: dict[str, int]) -> None:
    state = make_state(**spent)
    assert not blocks("first_step_retrieves", state)
    assert valid_actions(state, CFG) == ["stop_answer"]


def test_retrieve_more_blocked_when_the_current_query_frontier_is_exhausted() -> None:
    exhausted = rich_state(exhausted_queries=[QUESTION])
    assert blocks("retrieve_more_needs_frontier", exhausted)
    assert "retrieve_more" not in valid_actions(exhausted, CFG)
    assert invalid_reasons(exhausted, CFG) == {"retrieve_more": "retrieve_more_needs_frontier"}
    # Candidates left: allowed.
    assert not blocks("retrieve_more_needs_frontier", rich_state(exhausted_queries=["other"]))
    # No search yet: allowed.
    assert not blocks("retrieve_more_needs_frontier", make_state())
    # Another query is exhausted (the query was rewritten since): allowed.
    rewritten = rich_state(query="Kestrel Labs headquarters", exhausted_queries=[QUESTION])
    assert not blocks("retrieve_more_needs_frontier", rewritten)
    # An empty query means the question.
    assert blocks(
        "retrieve_more_needs_frontier", rich_state(query="", exhausted_queries=[QUESTION])
    )
    # A later search for something else does not make the exhausted query searchable again.
    later = rich_state(
        exhausted_queries=[QUESTION], frontier={"query": "Tom Reyl", "unseen_left": 4}
    )
    assert blocks("retrieve_more_needs_frontier", later)


def test_gap_query_needs_a_recorded_gap() -> None:
    no_gap = rich_state(gaps=[], queried_gaps=["Who founded Kestrel Labs?"])
    assert blocks("gap_query_needs_gap", no_gap)
    assert "gap_query" not in valid_actions(no_gap, CFG)
    assert invalid_reasons(no_gap, CFG) == {"gap_query": "gap_query_needs_gap"}
    assert not blocks("gap_query_needs_gap", rich_state(gaps=["Where was Tom Reyl born?"]))


def test_bridge_entity_expand_needs_an_unexpanded_entity() -> None:
    none_found = rich_state(bridge_entities=[])
    assert blocks("bridge_needs_unexpanded_entity", none_found)
    # Expanded already (case does not matter).
    done = rich_state(bridge_entities=["Kestrel Labs"], expanded_entities=["kestrel labs"])
    assert blocks("bridge_needs_unexpanded_entity", done)
    assert "bridge_entity_expand" not in valid_actions(done, CFG)
    assert invalid_reasons(done, CFG) == {"bridge_entity_expand": "bridge_needs_unexpanded_entity"}
    # One still pending.
    pending = rich_state(
        bridge_entities=["Kestrel Labs", "Tom Reyl"], expanded_entities=["Kestrel Labs"]
    )
    assert not blocks("bridge_needs_unexpanded_entity", pending)
    assert "bridge_entity_expand" in valid_actions(pending, CFG)


def test_rewrite_needs_evidence_and_is_limited() -> None:
    assert blocks("rewrite_needs_evidence_and_limit", rich_state(rewrites=MAX_REWRITES))
    assert "rewrite_query" not in valid_actions(rich_state(rewrites=MAX_REWRITES), CFG)
    assert not blocks("rewrite_needs_evidence_and_limit", rich_state(rewrites=MAX_REWRITES - 1))
    # Nothing to rewrite from.
    assert blocks("rewrite_needs_evidence_and_limit", make_state(steps=CFG.max_steps))


def test_no_sufficiency_check_twice_without_new_evidence() -> None:
    checked = rich_state(evidence=docs(3), evidence_count_at_check=3)
    assert blocks("sufficiency_needs_new_evidence", checked)
    assert "sufficiency_check" not in valid_actions(checked, CFG)
    assert invalid_reasons(checked, CFG) == {"sufficiency_check": "sufficiency_needs_new_evidence"}
    # New evidence since the check: allowed again.
    fresh = rich_state(evidence=docs(4), evidence_count_at_check=3)
    assert not blocks("sufficiency_needs_new_evidence", fresh)
    # Never checked, evidence present: allowed.
    assert not blocks("sufficiency_needs_new_evidence", rich_state(evidence_count_at_check=-1))
    # No evidence at all: nothing to check (even when the budget lets answering through).
    assert blocks("sufficiency_needs_new_evidence", make_state(steps=CFG.max_steps))


def test_compress_once_and_only_on_the_way_to_the_answer() -> None:
    assert blocks("compress_once_on_the_way_to_answer", rich_state(compressed=True))
    assert "compress_answer_evidence" not in valid_actions(rich_state(compressed=True), CFG)
    # A single passage needs no compression; none cannot be compressed.
    assert blocks("compress_once_on_the_way_to_answer", rich_state(evidence=docs(1)))
    assert blocks("compress_once_on_the_way_to_answer", make_state(steps=CFG.max_steps))
    assert not blocks("compress_once_on_the_way_to_answer", rich_state(evidence=docs(2)))
    # Where compression may run, answering may too (compression leads to the answer).
    allowed = valid_actions(rich_state(evidence=docs(2), steps=CFG.max_steps), CFG)
    assert allowed == ["stop_answer", "compress_answer_evidence"]


# --- A(s) as a whole -----------------------------------------------------------------------


def test_valid_actions_falls_back_to_stop_answer() -> None:
    """No evidence, budget left, but the question's frontier is empty: answering is the way out."""
    stuck = make_state(exhausted_queries=[QUESTION])
    assert valid_actions(stuck, CFG) == ["stop_answer"]


_DOC_COUNTS = st.integers(min_value=0, max_value=6)


@st.composite
def random_states(draw: st.DrawFn) -> tuple[State, Configuration]:
    cfg = Configuration(
        max_steps=draw(st.integers(1, 8)),
        max_retrieval_calls=draw(st.integers(1, 8)),
        docs_per_action=draw(st.integers(1, 5)),
    )
    n_docs = draw(_DOC_COUNTS)
    names = st.sampled_from(["Kestrel Labs", "Tom Reyl", "Velford", "kestrel labs"])
    query = draw(st.sampled_from([QUESTION, "", "Kestrel Labs founder"]))
    exhausted_queries = draw(
        st.lists(st.sampled_from([QUESTION, "Kestrel Labs founder", "other"]), max_size=3)
    )
    values: dict[str, Any] = {
        "query": query,
        "evidence": docs(n_docs),
        "steps": draw(st.integers(0, 10)),
        "retrieval_calls": draw(st.integers(0, 10)),
        "gaps": draw(st.lists(st.sampled_from(["g1", "g2", QUESTION]), max_size=3)),
        "bridge_entities": draw(st.lists(names, max_size=3)),
        "expanded_entities": draw(st.lists(names, max_size=3)),
        "rewrites": draw(st.integers(0, 3)),
        "evidence_count_at_check": draw(st.integers(-1, 7)),
        "compressed": draw(st.booleans()),
        "sufficient": draw(st.booleans()),
    }
    values["exhausted_queries"] = exhausted_queries
    return make_state(**values), cfg


@settings(max_examples=150, deadline=None)
@given(random_states())
def test_valid_actions_is_never_empty_before_an_answer(
    case: tuple[State, Configuration],
) -> None:
    state, cfg = case
    allowed = valid_actions(state, cfg)
    reasons = invalid_reasons(state, cfg)
    assert allowed, state
    assert len(allowed) == len(set(allowed))
    assert allowed == [a for a in ACTIONS if a in allowed]  # canonical order
    if allowed != ["stop_answer"]:
        assert not set(allowed) & set(reasons)
    else:  # the termination fallback, or stop_answer genuinely valid
        assert "stop_answer" not in reasons or len(reasons) == len(ACTIONS)
    if state["steps"] >= cfg.max_steps:
        assert not CONTROL_ACTIONS & set(allowed)
    if state["retrieval_calls"] >= cfg.max_retrieval_calls:
        assert not ACQUISITION_ACTIONS & set(allowed)
    if "compress_answer_evidence" in allowed:
        assert "stop_answer" in allowed
    # Once answered, nothing is valid.
    assert valid_actions({**state, "answer": "Velford"}, cfg) == []  # type: ignore[typeddict-item]


def test_a_complete_chain_searches_no_more() -> None:
    from dynakrag.actions.chain import plan_hops

    hops = plan_hops(["Who founded Kestrel Labs?", "Where was #1 born?"])
    hops[0].update(status="resolved", answer="Ada Voss")
    halfway = rich_state(hops=hops)
    assert not blocks("complete_chain_searches_no_more", halfway)
    assert not blocks("complete_chain_searches_no_more", rich_state())  # no chain at all
    hops = [dict(hop) for hop in hops]
    hops[1].update(status="resolved", answer="Velford")
    done = rich_state(hops=hops)
    assert blocks("complete_chain_searches_no_more", done)
    assert set(valid_actions(done, CFG)) == {"compress_answer_evidence", "stop_answer"}


def test_a_chain_reads_new_evidence_before_it_answers() -> None:
    """Retrieving and then stopping answers without the hop the search found: with a chain
    to finish, unread evidence goes to sufficiency_check first (the learned forest of recall
    labels stopped so on 41 of 60 MuSiQue eval questions, an open hop left)."""
    from dynakrag.actions.chain import plan_hops

    hops = plan_hops(["Who founded Kestrel Labs?", "Where was #1 born?"])
    unread = rich_state(hops=hops)  # 3 passages, none checked
    reasons = invalid_reasons(unread, CHAIN)
    assert reasons == {
        "stop_answer": CHAIN_READS_FIRST,
        "compress_answer_evidence": CHAIN_READS_FIRST,
    }
    assert "sufficiency_check" in valid_actions(unread, CHAIN)
    assert invalid_reasons(rich_state(), CHAIN) == reasons  # before the first check plans it
    # read: answering is open again
    assert invalid_reasons(rich_state(hops=hops, evidence_count_at_check=3), CHAIN) == {
        "sufficiency_check": "sufficiency_needs_new_evidence"
    }
    # the joint check keeps the paper's freedom to stop at once
    assert invalid_reasons(unread, CFG) == {}
    # a failed chain has nothing the check could resolve
    failed = [dict(hop) for hop in hops]
    failed[0].update(status="failed")
    assert "stop_answer" not in invalid_reasons(rich_state(hops=failed), CHAIN)


def test_a_chain_reads_after_two_searches_in_a_row() -> None:
    """Unread searches pile up passages no hop has read (the chain forest made up to 10 in a
    row, answering no better): after MAX_UNREAD_SEARCHES the check comes next."""
    from dynakrag.actions.chain import plan_hops

    hops = plan_hops(["Who founded Kestrel Labs?", "Where was #1 born?"])

    def after(*actions: str) -> State:
        return rich_state(hops=hops, trace=[{"action": a} for a in actions])

    assert MAX_UNREAD_SEARCHES == 2
    assert "retrieve_more" in valid_actions(after("retrieve_more"), CHAIN)
    two = after("retrieve_more", "bridge_entity_expand")
    assert valid_actions(two, CHAIN) == ["sufficiency_check"]
    assert invalid_reasons(two, CHAIN)["gap_query"] == CHAIN_READS_FIRST
    # a check in between resets the count; the joint check is free of the rule
    read_then_two = after("retrieve_more", "sufficiency_check", "gap_query", "rewrite_query")
    assert valid_actions(read_then_two, CHAIN) == ["sufficiency_check"]
    once = after("retrieve_more", "retrieve_more", "sufficiency_check", "gap_query")
    assert "retrieve_more" in valid_actions(once, CHAIN)
    assert "retrieve_more" in valid_actions(two, CFG)


def test_the_chain_rule_gives_way_when_no_check_can_run() -> None:
    """No step left for the check (or no tokens for it): answering stays possible."""
    spent = rich_state(steps=4)
    assert "stop_answer" in valid_actions(spent, CHAIN)
    assert invalid_reasons(spent, CHAIN).get("stop_answer") is None

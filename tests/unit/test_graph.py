"""The compiled graph end to end, on the generated demo corpus, with the fakes."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import pytest
from langchain_core.messages import BaseMessage
from langgraph.checkpoint.memory import InMemorySaver

import dynakrag
from dynakrag import ConfigurationError, UserInputError, build_graph
from dynakrag.configuration import BUILD_TIME_FIELDS, Configuration
from dynakrag.data.demo import demo_passages
from dynakrag.data.demo_corpus import DemoCorpus, generate_demo_corpus
from dynakrag.data.demo_questions import DemoQuestion
from dynakrag.llm.client import LLMClient
from dynakrag.llm.fake import ScriptedChatModel
from dynakrag.policy.heuristic import HeuristicPolicy
from dynakrag.policy.registry import resolve_policy
from dynakrag.policy.uniform import UniformPolicy
from dynakrag.state import ACTIONS, TERMINAL_ACTIONS
from tests.fakes import KeywordSearcher, demo_chat_model, demo_responder
from tests.joint import joint_configuration

COUNTERS = ("retrieval_calls", "llm_calls", "prompt_tokens", "completion_tokens")
GOLD_KEY = re.compile(r"gold|support|label|ground_?truth|reference_answer", re.IGNORECASE)


@pytest.fixture(scope="module")
def corpus() -> DemoCorpus:
    return generate_demo_corpus(7)


def question(corpus: DemoCorpus, qid: str) -> DemoQuestion:
    return next(q for q in corpus.questions if q.id == qid)


def title(corpus: DemoCorpus, doc_id: str) -> str:
    return next(p["title"] for p in corpus.passages if p["id"] == doc_id)


def name_hops(corpus: DemoCorpus, q: DemoQuestion) -> list[str]:
    """Sub-questions written with the names of the support documents (keyword-searchable).

    The fake reader answers a sub-question only when the final answer is in the passages, so the
    first part stays a gap; naming the bridge entity in the second part lets gap_query reach the
    second-hop document. Phrasings with common words ("Which company ...") pull in distractors.
    """
    first, second = (title(corpus, doc_id) for doc_id in q.support)
    if q.id.startswith("q-hq"):
        return [f"{first} employer", f"{second} headquarters city"]
    return [f"{first} maker", f"{second} founder"]


def graph_for(
    corpus: DemoCorpus,
    answers: Mapping[str, str] | None = None,
    hops: Mapping[str, Sequence[str]] | None = None,
    **kwargs: Any,
) -> Any:
    if answers is None:
        answers = {q.question: q.answer for q in corpus.questions}
    return build_graph(
        KeywordSearcher(demo_passages(corpus)), demo_chat_model(answers, hops), **kwargs
    )


def walk_keys(value: Any) -> Iterator[str]:
    """Every dict key anywhere in ``value``."""
    if isinstance(value, Mapping):
        for key, inner in value.items():
            yield str(key)
            yield from walk_keys(inner)
    elif isinstance(value, list | tuple):
        for inner in value:
            yield from walk_keys(inner)


def check_final_state(final: Mapping[str, Any], cfg: Configuration) -> None:
    """Answer, evidence, trace and accounting of a finished run are complete and consistent."""
    # An answer or an abstention with its reason, never both.
    if final["abstained"]:
        assert final["answer"] == "" and final["abstain_reason"].strip()
    else:
        assert isinstance(final["answer"], str) and final["answer"].strip()
    for doc in final["evidence"]:
        assert {"id", "title", "text"} <= set(doc)
        assert all(isinstance(doc[k], str) for k in ("id", "title", "text"))
    assert len({doc["id"] for doc in final["evidence"]}) == len(final["evidence"])
    assert len(final["evidence"]) <= cfg.max_final_docs
    trace = final["trace"]
    actions = [entry["action"] for entry in trace]
    assert actions[-1] == "stop_answer" and actions.count("stop_answer") == 1
    assert [entry["step"] for entry in trace] == list(range(1, len(trace) + 1))
    if "compress_answer_evidence" in actions:
        assert actions.count("compress_answer_evidence") == 1
        assert actions[-2] == "compress_answer_evidence"
    # Steps count the non-terminal actions; the budgets hold.
    assert final["steps"] == sum(1 for a in actions if a not in TERMINAL_ACTIONS)
    assert final["steps"] <= cfg.max_steps
    assert final["retrieval_calls"] <= cfg.max_retrieval_calls
    # Totals equal the trace sums, and per-node accounting equals the per-action trace sums.
    for counter in COUNTERS:
        assert final[counter] == sum(entry[counter] for entry in trace), counter
    accounting = final["accounting"]
    assert set(accounting) == set(actions)
    for action, counts in accounting.items():
        entries = [entry for entry in trace if entry["action"] == action]
        assert counts["calls"] == len(entries)
        for counter in COUNTERS:
            assert counts[counter] == sum(entry[counter] for entry in entries), (action, counter)
    # Each chosen action was valid when chosen (stop_answer after compression comes by edge).
    for index, entry in enumerate(trace):
        if (
            entry["action"] == "stop_answer"
            and index
            and actions[index - 1] == ("compress_answer_evidence")
        ):
            continue
        assert entry["action"] in entry["valid_actions"], entry


# --- structure -----------------------------------------------------------------------------


def test_graph_has_the_seven_action_nodes_plus_prepare_and_controller(corpus: DemoCorpus) -> None:
    nodes = set(graph_for(corpus).get_graph().nodes) - {"__start__", "__end__"}
    assert len(ACTIONS) == 7
    assert nodes == {*ACTIONS, "prepare", "controller"}


# --- end to end ----------------------------------------------------------------------------


@pytest.mark.parametrize("qid", ["q-hq-00", "q-maker-00"])
def test_two_hop_question_ends_with_the_answer_and_both_gold_documents(
    corpus: DemoCorpus, qid: str
) -> None:
    # The joint check (the scripted reader answers its prompt, not a hop's); the chain's own
    # end-to-end runs are tests/unit/test_chain.py's.
    q = question(corpus, qid)
    assert q.hops == 2
    cfg = joint_configuration()
    graph = graph_for(
        corpus,
        {q.question: q.answer},
        {q.question: name_hops(corpus, q)},
        configuration=cfg,
        policy="heuristic",  # the steps asserted below are the heuristic's
    )
    final = graph.invoke({"question": q.question})
    assert final["answer"] == q.answer
    found = [doc["id"] for doc in final["evidence"]]
    assert set(q.support) <= set(found), found
    check_final_state(final, cfg)
    actions = [entry["action"] for entry in final["trace"]]
    assert actions[0] == "retrieve_more"
    assert "sufficiency_check" in actions and "gap_query" in actions
    assert final["llm_calls"] > 0 and final["prompt_tokens"] > 0
    assert final["completion_tokens"] > 0 and final["retrieval_calls"] > 0
    assert final["accounting"]["retrieve_more"]["retrieval_calls"] == 1


def test_final_state_holds_no_gold_labels(corpus: DemoCorpus) -> None:
    q = question(corpus, "q-hq-00")
    final = graph_for(corpus, hops={q.question: name_hops(corpus, q)}).invoke(
        {"question": q.question}
    )
    keys = set(walk_keys(dict(final)))
    assert not {key for key in keys if GOLD_KEY.search(key)}, keys
    for doc in final["evidence"]:
        assert set(doc) <= {"id", "title", "text", "score", "query", "action", "step"} | {
            "retriever",
            "rank",
            "sources",
        }
        # Provenance: which retriever found it, at what rank.
        assert doc["retriever"] == "keywordsearcher" and doc["rank"] >= 1
        assert doc["sources"][0]["retriever"] == "keywordsearcher"


def test_configurable_max_steps_changes_behaviour_per_run(corpus: DemoCorpus) -> None:
    q = question(corpus, "q-hq-00")
    graph = graph_for(corpus, hops={q.question: name_hops(corpus, q)})
    short = graph.invoke({"question": q.question}, {"configurable": {"max_steps": 1}})
    assert short["steps"] == 1
    short_actions = [e["action"] for e in short["trace"]]
    assert short_actions[0] == "retrieve_more" and short_actions[-1] == "stop_answer"
    check_final_state(short, Configuration(max_steps=1))
    default = graph.invoke({"question": q.question})
    assert default["steps"] > 1
    check_final_state(default, Configuration())
    # The override applied to that run only.
    again = graph.invoke({"question": q.question}, {"configurable": {"max_steps": 1}})
    assert [e["action"] for e in again["trace"]] == [e["action"] for e in short["trace"]]


def test_configurable_budgets_hold(corpus: DemoCorpus) -> None:
    q = question(corpus, "q-river-00")
    cfg = {"max_steps": 6, "max_retrieval_calls": 2, "docs_per_action": 1, "max_final_docs": 2}
    final = graph_for(corpus).invoke({"question": q.question}, {"configurable": cfg})
    check_final_state(final, Configuration(**cfg))
    assert all(len(e["added"]) <= 1 for e in final["trace"])


@pytest.mark.parametrize(
    "configurable",
    [
        {"max_steps": 0},
        {"max_steps": 33},
        {"docs_per_action": "many"},
        {"compression": "zip"},
        {"cost_lambda": -1},
        {"policy": "nope"},
    ],
    ids=lambda c: next(iter(c)),
)
def test_invalid_configurable_value_raises_configuration_error(
    corpus: DemoCorpus, configurable: dict[str, Any]
) -> None:
    with pytest.raises(ConfigurationError):
        graph_for(corpus).invoke(
            {"question": "Where does Hesian Vaskow work?"}, {"configurable": configurable}
        )


@pytest.mark.parametrize(
    ("field", "value"),
    [("llm_model", "another-model"), ("cache_dir", "/elsewhere"), ("retriever", "bm25")],
)
def test_a_run_cannot_change_a_build_time_setting(
    corpus: DemoCorpus, field: str, value: Any
) -> None:
    assert field in BUILD_TIME_FIELDS
    built = Configuration(llm_model="built-model", cache_dir="/built", retriever="dense")
    graph = graph_for(corpus, configuration=built)
    q = question(corpus, "q-hq-00").question
    with pytest.raises(ConfigurationError, match=rf"^'{field}' is fixed when the graph is built"):
        graph.invoke({"question": q}, {"configurable": {field: value}})
    # The value the graph was built with is accepted, as are per-run fields beside it.
    same = {field: getattr(built, field), "max_steps": 1}
    assert graph.invoke({"question": q}, {"configurable": same})["steps"] == 1


@pytest.mark.parametrize(
    "bad_question",
    ["", "   ", "\n\t  \r\n", "\x00\x01\x1b", "x" * 4001, 42, None],
    ids=["empty", "spaces", "whitespace", "control-only", "too-long", "int", "none"],
)
def test_unusable_question_raises_user_input_error(corpus: DemoCorpus, bad_question: Any) -> None:
    graph = graph_for(corpus)
    with pytest.raises(UserInputError):
        graph.invoke({"question": bad_question})
    assert issubclass(UserInputError, ValueError)


def test_question_length_limit_follows_the_configuration(corpus: DemoCorpus) -> None:
    graph = graph_for(corpus)
    with pytest.raises(UserInputError, match="max_question_chars"):
        graph.invoke({"question": "x" * 17}, {"configurable": {"max_question_chars": 16}})
    final = graph.invoke({"question": "x" * 4000}, {"configurable": {"max_steps": 1}})
    assert final["answer"] or final["abstained"]  # accepted: it ran to its end


def test_control_characters_are_stripped(corpus: DemoCorpus) -> None:
    q = question(corpus, "q-hq-00")
    prompts_seen: list[str] = []
    respond = demo_responder({q.question: q.answer})

    def recording(messages: list[BaseMessage]) -> str:
        prompts_seen.extend(str(m.content) for m in messages)
        return respond(messages)

    graph = build_graph(
        KeywordSearcher(demo_passages(corpus)), ScriptedChatModel(respond=recording)
    )
    dirty = "\x00In which city\x07 is the headquarters\tof the company\u200b where\n" + (
        q.question.split("where ", 1)[1] + "\x1b[31m"
    )
    final = graph.invoke({"question": dirty})
    assert final["question"] == q.question + " [31m"
    assert not re.search(r"[\x00-\x08\x0b-\x1f\x7f\u200b]", final["question"])
    assert final["trace"][0]["search_query"] == final["question"]
    assert prompts_seen and not any(re.search(r"[\x00\x07\x1b\u200b]", p) for p in prompts_seen)


# --- policies ------------------------------------------------------------------------------


def test_uniform_policy_is_selectable_by_configuration(corpus: DemoCorpus) -> None:
    q = question(corpus, "q-hq-00")
    graph = graph_for(corpus)
    heuristic = graph.invoke(
        {"question": q.question}, {"configurable": {"max_steps": 1, "policy": "heuristic"}}
    )
    uniform = graph.invoke(
        {"question": q.question}, {"configurable": {"max_steps": 1, "policy": "uniform"}}
    )
    first_state: dict[str, Any] = {"question": q.question, "trace": []}
    cfg = Configuration()
    expected_uniform = UniformPolicy().scores(first_state, ["retrieve_more"], cfg)  # type: ignore[arg-type]
    expected_heuristic = HeuristicPolicy().scores(first_state, ["retrieve_more"], cfg)  # type: ignore[arg-type]
    assert expected_uniform != expected_heuristic
    assert uniform["trace"][0]["scores"] == pytest.approx(expected_uniform, abs=1e-6)
    assert heuristic["trace"][0]["scores"] == pytest.approx(expected_heuristic, abs=1e-6)
    # The fixed policy of build_graph applies too.
    fixed = graph_for(corpus, policy="uniform").invoke(
        {"question": q.question}, {"configurable": {"max_steps": 1}}
    )
    assert fixed["trace"][0]["scores"] == uniform["trace"][0]["scores"]


def test_resolve_policy() -> None:
    assert isinstance(resolve_policy("heuristic"), HeuristicPolicy)
    assert isinstance(resolve_policy("uniform"), UniformPolicy)
    instance = UniformPolicy()
    assert resolve_policy(instance) is instance
    with pytest.raises(ConfigurationError, match="nope"):
        resolve_policy("nope")


def test_build_graph_rejects_an_unknown_policy_name(corpus: DemoCorpus) -> None:
    with pytest.raises(ConfigurationError):
        graph_for(corpus, policy="nope")


# --- the package API -----------------------------------------------------------------------


def test_ask_runs_a_given_graph_and_validates_first(corpus: DemoCorpus) -> None:
    q = question(corpus, "q-hq-00")
    final = dynakrag.ask(q.question, graph=graph_for(corpus), max_steps=1)
    # One retrieval does not find the second hop: the reader finds no answer, so it abstains.
    assert final["steps"] == 1 and final["abstained"] and final["answer"] == ""
    with pytest.raises(UserInputError):
        dynakrag.ask("  ", graph=graph_for(corpus))


def test_llm_client_given_to_build_graph_is_used(corpus: DemoCorpus) -> None:
    q = question(corpus, "q-hq-00")
    calls: Counter[str] = Counter()
    respond = demo_responder({q.question: q.answer})

    def counting(messages: list[BaseMessage]) -> str:
        calls["n"] += 1
        return respond(messages)

    llm = LLMClient(ScriptedChatModel(respond=counting), max_retries=0, backoff_s=0)
    final = build_graph(KeywordSearcher(demo_passages(corpus)), llm=llm).invoke(
        {"question": q.question}
    )
    assert calls["n"] == final["llm_calls"] > 0


def test_a_second_question_on_the_same_thread_gets_a_fresh_budget(corpus: DemoCorpus) -> None:
    first, second = question(corpus, "q-hq-00"), question(corpus, "q-hq-01")
    graph = graph_for(corpus, checkpointer=InMemorySaver())
    thread = {"configurable": {"thread_id": "t1"}}
    graph.invoke({"question": first.question}, thread)
    final = graph.invoke({"question": second.question}, thread)
    assert final["trace"][0]["action"] == "retrieve_more"
    assert final["retrieval_calls"] >= 1 and final["evidence"]
    check_final_state(final, Configuration())

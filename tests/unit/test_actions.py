"""The seven atomic actions called directly on hand-made states, and the LLM client under them."""

from __future__ import annotations

import json
import operator
from collections.abc import Callable
from typing import Any

import pytest
from langchain_core.messages import BaseMessage

from dynakrag import prompts
from dynakrag.actions.bridge_entities import detect_bridge_entities
from dynakrag.actions.bridge_entity_expand import bridge_entity_expand
from dynakrag.actions.common import Resources
from dynakrag.actions.compress_answer_evidence import compress_answer_evidence
from dynakrag.actions.gap_query import gap_query
from dynakrag.actions.retrieve_more import retrieve_more
from dynakrag.actions.rewrite_query import rewrite_query
from dynakrag.actions.stop_answer import stop_answer
from dynakrag.actions.sufficiency_check import sufficiency_check
from dynakrag.configuration import Configuration
from dynakrag.errors import ModelUnavailableError
from dynakrag.graph.nodes import FIXED_EDGES, run_action
from dynakrag.llm import client as client_module
from dynakrag.llm.client import LLMClient, Usage, estimate_tokens, parse_json_object
from dynakrag.llm.fake import ScriptedChatModel
from dynakrag.retrieval.passage import Passage
from dynakrag.state import Document, State, initial_state, merge_accounting
from tests.fakes import KeywordSearcher, prompt_kind

QUESTION = "In which city is the headquarters of the company where Ada Voss works?"
SUB_QUESTIONS = [
    "Which company does Ada Voss work for?",
    "In which city is the headquarters of #1?",
    "Who founded #1?",
]

PASSAGES = [
    Passage("ada", "Ada Voss", "Ada Voss is an engineer who works at Kestrel Labs."),
    Passage(
        "kestrel",
        "Kestrel Labs",
        "Kestrel Labs is a robotics company. The headquarters of Kestrel Labs is in Velford. "
        "Kestrel Labs was founded by Tom Reyl.",
    ),
    Passage("ada-painter", "Ada Voss (painter)", "Ada Voss is also the name of a painter."),
    Passage("tom", "Tom Reyl", "Tom Reyl was born in Quarmouth."),
    Passage("velford", "Velford", "Velford is a city on the river Orvane."),
    Passage("banana", "Bananas", "Bananas are a yellow fruit."),
]
BY_ID = {p.id: p for p in PASSAGES}

ADDITIVE = ("trace", "steps", "retrieval_calls", "llm_calls", "prompt_tokens", "completion_tokens")


# --- helpers -------------------------------------------------------------------------------


class Recorder:
    """A responder that records every prompt and replies with ``reply(kind, human)``
    (``kind``: :func:`tests.fakes.prompt_kind`)."""

    def __init__(self, reply: Callable[[str, str], str]) -> None:
        self.reply = reply
        self.calls: list[list[BaseMessage]] = []
        self.replies: list[str] = []

    def __call__(self, messages: list[BaseMessage]) -> str:
        self.calls.append(messages)
        text = self.reply(prompt_kind(messages), str(messages[-1].content))
        self.replies.append(text)
        return text

    @property
    def kinds(self) -> list[str]:
        return [prompt_kind(m) for m in self.calls]

    def tokens(self) -> tuple[int, int]:
        """Prompt and completion tokens ScriptedChatModel reports for the recorded calls."""
        prompt = sum(sum(len(str(m.content)) for m in msgs) // 4 for msgs in self.calls)
        completion = sum(len(text) // 4 for text in self.replies)
        return prompt, completion


def fixed(text: str) -> Recorder:
    return Recorder(lambda system, human: text)


def by_prompt(**replies: str) -> Recorder:
    """Replies keyed by prompt kind: decompose, sufficiency, rewrite, answer."""

    def reply(kind: str, human: str) -> str:
        if kind not in replies:
            raise AssertionError(f"unexpected {kind} prompt")
        return replies[kind]

    return Recorder(reply)


def failing() -> Recorder:
    def reply(system: str, human: str) -> str:
        raise RuntimeError("model down")

    return Recorder(reply)


def resources(
    responder: Callable[[list[BaseMessage]], str] | None = None,
) -> tuple[Resources, KeywordSearcher]:
    searcher = KeywordSearcher(PASSAGES)
    model = ScriptedChatModel(respond=responder or fixed("unused"))
    return Resources(searcher=searcher, llm=LLMClient(model, max_retries=0, backoff_s=0)), searcher


def doc(passage_id: str) -> Document:
    p = BY_ID[passage_id]
    return Document(id=p.id, title=p.title, text=p.text)


def make_state(**overrides: Any) -> State:
    state: dict[str, Any] = dict(initial_state(QUESTION))
    state.update(overrides)
    return state  # type: ignore[return-value]


def apply(state: State, update: dict[str, Any]) -> State:
    """Merge an update the way the graph's reducers do."""
    merged: dict[str, Any] = dict(state)
    for key, value in update.items():
        if key in ADDITIVE:
            merged[key] = operator.add(merged.get(key, [] if key == "trace" else 0), value)
        elif key == "accounting":
            merged[key] = merge_accounting(merged.get(key), value)
        else:
            merged[key] = value
    return merged  # type: ignore[return-value]


def check_accounting(
    state: State,
    update: dict[str, Any],
    action: str,
    *,
    retrieval_calls: int,
    llm_calls: int,
    step: bool = True,
    tokens: tuple[int, int] | None = None,
) -> dict[str, Any]:
    """The trace entry, counters and per-node accounting of one action's update."""
    (entry,) = update["trace"]
    assert entry["action"] == action
    assert entry["step"] == len(state.get("trace", [])) + 1
    counters = {
        "retrieval_calls": retrieval_calls,
        "llm_calls": llm_calls,
        "prompt_tokens": update["prompt_tokens"],
        "completion_tokens": update["completion_tokens"],
    }
    for key, value in counters.items():
        assert update[key] == value, key
        assert entry[key] == value, key
    if tokens is not None:
        assert (update["prompt_tokens"], update["completion_tokens"]) == tokens
    if llm_calls == 0:
        assert update["prompt_tokens"] == update["completion_tokens"] == 0
    assert update["steps"] == (1 if step else 0)
    assert update["accounting"] == {action: {"calls": 1, **counters}}
    return entry


# --- retrieve_more -------------------------------------------------------------------------


def test_retrieve_more_adds_unseen_docs_and_pages_deeper() -> None:
    res, searcher = resources()
    cfg = Configuration(docs_per_action=2)
    state = make_state(query="Ada Voss Kestrel Labs")
    first = retrieve_more(state, res, cfg)
    entry = check_accounting(state, first, "retrieve_more", retrieval_calls=1, llm_calls=0)
    assert [d["id"] for d in first["evidence"]] == ["ada", "kestrel"]
    assert entry["added"] == ["ada", "kestrel"] and first["last_new_docs"] == 2
    assert entry["search_query"] == "Ada Voss Kestrel Labs"
    assert searcher.calls == [("Ada Voss Kestrel Labs", cfg.frontier_depth)]
    for d in first["evidence"]:
        assert (d["title"], d["text"]) == (BY_ID[d["id"]].title, BY_ID[d["id"]].text)
        assert d["action"] == "retrieve_more" and d["step"] == 1 and d["score"] > 0
    assert first["frontier"]["query"] == "Ada Voss Kestrel Labs"
    assert first["frontier"]["depth_reached"] == 2
    assert first["frontier"]["unseen_left"] == 1
    # Bridge entities come from the evidence, not from the question.
    assert "Tom Reyl" in first["bridge_entities"]

    state = apply(state, first)
    second = retrieve_more(state, res, cfg)
    check_accounting(state, second, "retrieve_more", retrieval_calls=1, llm_calls=0)
    assert [d["id"] for d in second["evidence"]] == ["ada", "kestrel", "ada-painter"]
    assert second["trace"][0]["added"] == ["ada-painter"]
    assert second["frontier"]["depth_reached"] == 3
    assert second["frontier"]["unseen_left"] == 0
    assert second["exhausted_queries"] == ["Ada Voss Kestrel Labs"]
    assert "exhausted_queries" not in first
    assert second["evidence"][-1]["step"] == 2

    state = apply(state, second)
    assert state["retrieval_calls"] == 2 and state["steps"] == 2
    assert state["accounting"]["retrieve_more"]["calls"] == 2


def test_retrieve_more_uses_the_question_when_no_query_is_set() -> None:
    res, searcher = resources()
    update = retrieve_more(make_state(query=""), res, Configuration())
    assert searcher.calls[0][0] == QUESTION
    assert update["trace"][0]["search_query"] == QUESTION


# --- gap_query -----------------------------------------------------------------------------


def test_gap_query_queries_the_first_gap_and_marks_it_queried() -> None:
    res, searcher = resources()
    cfg = Configuration(docs_per_action=1)
    state = make_state(
        evidence=[doc("ada")],
        gaps=["Where was Tom Reyl born?", "Velford river"],
        queried_gaps=["Which company does Ada Voss work for?"],
    )
    update = gap_query(state, res, cfg)
    entry = check_accounting(state, update, "gap_query", retrieval_calls=1, llm_calls=0)
    assert searcher.calls == [("Where was Tom Reyl born?", cfg.frontier_depth)]
    assert entry["search_query"] == "Where was Tom Reyl born?"
    assert update["gaps"] == ["Velford river"]
    assert update["queried_gaps"] == [
        "Which company does Ada Voss work for?",
        "Where was Tom Reyl born?",
    ]
    assert [d["id"] for d in update["evidence"]] == ["ada", "tom"]
    assert update["evidence"][-1]["action"] == "gap_query"
    # The query the controller conditions on is unchanged.
    assert "query" not in update


# --- bridge_entity_expand ------------------------------------------------------------------


def test_bridge_entity_expand_queries_the_first_pending_entity() -> None:
    res, searcher = resources()
    cfg = Configuration(docs_per_action=1)
    state = make_state(
        evidence=[doc("ada")],
        bridge_entities=["Kestrel Labs", "Tom Reyl", "Velford"],
        expanded_entities=["kestrel labs"],
    )
    update = bridge_entity_expand(state, res, cfg)
    entry = check_accounting(state, update, "bridge_entity_expand", retrieval_calls=1, llm_calls=0)
    assert searcher.calls[0][0] == "Tom Reyl"
    assert entry["entity"] == "Tom Reyl" and entry["search_query"] == "Tom Reyl"
    assert update["expanded_entities"] == ["kestrel labs", "Tom Reyl"]
    assert [d["id"] for d in update["evidence"]] == ["ada", "tom"]
    # The expanded entity's passage now titles the evidence: it is no longer a bridge entity.
    assert "Tom Reyl" not in update["bridge_entities"]


def test_bridge_entities_leave_out_names_whose_passage_is_in_evidence() -> None:
    evidence = [
        Document(id="a", title="Ada Voss", text="At Kestrel Labs, Ada Voss builds robots."),
        doc("kestrel"),
    ]
    found = detect_bridge_entities(QUESTION, evidence, [])
    assert not [name for name in found if "kestrel labs" in name.lower()], found


# --- rewrite_query -------------------------------------------------------------------------


def test_rewrite_query_uses_the_model_rewrite() -> None:
    recorder = fixed('New query: "Kestrel Labs headquarters"\nsecond line')
    res, searcher = resources(recorder)
    state = make_state(evidence=[doc("ada")], rewrites=1)
    update = rewrite_query(state, res, Configuration(docs_per_action=2))
    entry = check_accounting(
        state, update, "rewrite_query", retrieval_calls=1, llm_calls=1, tokens=recorder.tokens()
    )
    assert recorder.kinds == [prompts.REWRITE]
    assert "Ada Voss is an engineer" in str(recorder.calls[0][-1].content)
    assert update["query"] == "Kestrel Labs headquarters"
    assert searcher.calls[0][0] == "Kestrel Labs headquarters"
    assert entry["rewritten_query"] == "Kestrel Labs headquarters" and entry["fallback"] is False
    assert update["rewrites"] == 2
    assert update["evidence"][1]["id"] == "kestrel"
    assert update["frontier"]["query"] == "Kestrel Labs headquarters"


@pytest.mark.parametrize(
    ("extra", "expected_tail"),
    [
        (
            {"gaps": ["Who founded Kestrel Labs?"], "bridge_entities": ["Tom Reyl"]},
            " Who founded Kestrel Labs?",
        ),
        ({"bridge_entities": ["Tom Reyl"]}, " Tom Reyl"),
        ({}, ""),
    ],
    ids=["gap", "bridge-entity", "question-only"],
)
def test_rewrite_query_falls_back_on_an_empty_reply(
    extra: dict[str, Any], expected_tail: str
) -> None:
    """Documented fallback: the question widened by the first gap, else the first bridge entity."""
    recorder = fixed("")
    res, searcher = resources(recorder)
    state = make_state(evidence=[doc("ada")], **extra)
    update = rewrite_query(state, res, Configuration())
    entry = check_accounting(state, update, "rewrite_query", retrieval_calls=1, llm_calls=1)
    assert update["query"] == QUESTION + expected_tail
    assert searcher.calls[0][0] == QUESTION + expected_tail
    assert entry["fallback"] is True
    assert update["rewrites"] == 1


def test_rewrite_query_falls_back_when_the_reply_repeats_the_query_or_the_model_fails() -> None:
    state = make_state(evidence=[doc("ada")], gaps=["Who founded Kestrel Labs?"])
    expected = f"{QUESTION} Who founded Kestrel Labs?"
    res, _ = resources(fixed(QUESTION.upper()))
    assert rewrite_query(state, res, Configuration())["query"] == expected
    recorder = failing()
    res, _ = resources(recorder)
    update = rewrite_query(state, res, Configuration())
    assert update["query"] == expected and update["trace"][0]["fallback"] is True
    # A failed request still counts as a call (its prompt was sent).
    assert len(recorder.calls) == 1
    check_accounting(state, update, "rewrite_query", retrieval_calls=1, llm_calls=1)
    assert update["completion_tokens"] == 0 and update["prompt_tokens"] > 0


# --- sufficiency_check ---------------------------------------------------------------------


def _answers(*values: Any) -> str:
    return json.dumps({"answers": list(values)})


def test_sufficiency_check_decomposes_and_records_unknown_parts_as_resolved_gaps() -> None:
    recorder = by_prompt(
        decompose=json.dumps({"sub_questions": SUB_QUESTIONS}),
        sufficiency=_answers("Kestrel Labs", "UNKNOWN", "unknown."),
    )
    res, searcher = resources(recorder)
    state = make_state(evidence=[doc("ada")], queried_gaps=[])
    update = sufficiency_check(state, res, Configuration())
    entry = check_accounting(
        state,
        update,
        "sufficiency_check",
        retrieval_calls=0,
        llm_calls=2,
        tokens=recorder.tokens(),
    )
    assert searcher.calls == []
    assert recorder.kinds == [prompts.DECOMPOSE, prompts.SUFFICIENCY]
    assert update["sub_questions"] == [
        {"question": SUB_QUESTIONS[0], "answer": "Kestrel Labs"},
        {"question": "In which city is the headquarters of Kestrel Labs?", "answer": None},
        {"question": "Who founded Kestrel Labs?", "answer": None},
    ]
    assert update["gaps"] == [
        "In which city is the headquarters of Kestrel Labs?",
        "Who founded Kestrel Labs?",
    ]
    assert update["sufficient"] is False
    assert update["evidence_count_at_check"] == 1
    assert entry["gaps"] == update["gaps"] and entry["sufficient"] is False
    assert entry["parsed"] is True
    # The answered sub-question's entity is a bridge entity to expand.
    assert update["bridge_entities"][0] == "Kestrel Labs"


def test_sufficiency_check_does_not_decompose_again_when_sub_questions_exist() -> None:
    recorder = by_prompt(sufficiency=_answers("Kestrel Labs", "UNKNOWN"))
    res, _ = resources(recorder)
    known = [
        {"question": "Which company does Ada Voss work for?", "answer": None},
        {"question": "In which city is the headquarters of #1?", "answer": None},
    ]
    state = make_state(evidence=[doc("ada"), doc("ada-painter")], sub_questions=known)
    update = sufficiency_check(state, res, Configuration())
    assert prompts.DECOMPOSE not in recorder.kinds
    assert recorder.kinds == [prompts.SUFFICIENCY]
    prompt = str(recorder.calls[0][-1].content)
    assert "1. Which company does Ada Voss work for?" in prompt
    assert "2. In which city is the headquarters of #1?" in prompt
    check_accounting(state, update, "sufficiency_check", retrieval_calls=0, llm_calls=1)
    assert update["gaps"] == ["In which city is the headquarters of Kestrel Labs?"]
    assert update["evidence_count_at_check"] == 2


def test_sufficiency_check_leaves_unresolved_references_and_queried_gaps_out_of_the_gaps() -> None:
    recorder = by_prompt(
        decompose=json.dumps({"sub_questions": SUB_QUESTIONS}),
        sufficiency=_answers("UNKNOWN", "UNKNOWN", "UNKNOWN"),
    )
    res, _ = resources(recorder)
    state = make_state(evidence=[doc("ada")], queried_gaps=[SUB_QUESTIONS[0].upper()])
    update = sufficiency_check(state, res, Configuration())
    # Part 1 was queried already (case does not matter); parts 2 and 3 still say #1.
    assert update["gaps"] == []
    assert [s["question"] for s in update["sub_questions"]] == SUB_QUESTIONS
    assert update["sufficient"] is False


def test_a_sub_question_that_depends_on_an_unknown_answer_stays_unknown() -> None:
    # The model shifts answers across parts: the first part (the company) is not answered, yet it
    # names a city for "the headquarters of #1". With #1 unknown that city is a guess.
    recorder = by_prompt(
        decompose=json.dumps({"sub_questions": SUB_QUESTIONS[:2]}),
        sufficiency=_answers("UNKNOWN", "Velford"),
    )
    res, _ = resources(recorder)
    state = make_state(evidence=[doc("ada"), doc("kestrel")])
    update = sufficiency_check(state, res, Configuration())
    assert [sub["answer"] for sub in update["sub_questions"]] == [None, None]
    assert update["sufficient"] is False


def test_sequential_answering_asks_each_sub_question_alone_with_earlier_answers_filled_in() -> None:
    def reply(kind: str, human: str) -> str:
        if kind == prompts.DECOMPOSE:
            return json.dumps({"sub_questions": SUB_QUESTIONS[:2]})
        asked = human.split("Sub-questions:\n", 1)[1]
        return _answers("Velford" if "headquarters of Kestrel Labs" in asked else "Kestrel Labs")

    recorder = Recorder(reply)
    res, _ = resources(recorder)
    cfg = Configuration(sub_question_answering="sequential")
    state = make_state(evidence=[doc("ada"), doc("kestrel")])
    update = sufficiency_check(state, res, cfg)
    assert recorder.kinds == [prompts.DECOMPOSE, prompts.SUFFICIENCY, prompts.SUFFICIENCY]
    requests = [str(call[-1].content) for call in recorder.calls[1:]]
    assert "1. Which company does Ada Voss work for?" in requests[0]
    assert "1. In which city is the headquarters of Kestrel Labs?" in requests[1]
    # Asked alone, a sub-question goes without the main question (it would draw the answer).
    assert all("Main question:" not in request for request in requests)
    assert [sub["answer"] for sub in update["sub_questions"]] == ["Kestrel Labs", "Velford"]
    assert update["sufficient"] is True
    check_accounting(state, update, "sufficiency_check", retrieval_calls=0, llm_calls=3)


def test_sequential_answering_does_not_ask_a_sub_question_whose_reference_is_unknown() -> None:
    recorder = by_prompt(
        decompose=json.dumps({"sub_questions": SUB_QUESTIONS}), sufficiency=_answers("UNKNOWN")
    )
    res, _ = resources(recorder)
    cfg = Configuration(sub_question_answering="sequential")
    update = sufficiency_check(make_state(evidence=[doc("ada")]), res, cfg)
    assert recorder.kinds == [prompts.DECOMPOSE, prompts.SUFFICIENCY]  # parts 2 and 3 say #1
    assert [sub["answer"] for sub in update["sub_questions"]] == [None, None, None]
    assert update["gaps"] == [SUB_QUESTIONS[0]]


def test_sufficiency_check_is_sufficient_when_every_part_is_answered() -> None:
    recorder = by_prompt(
        decompose=json.dumps({"sub_questions": SUB_QUESTIONS[:2]}),
        sufficiency="```json\n" + _answers("Kestrel Labs", "Velford") + "\n```",
    )
    res, _ = resources(recorder)
    state = make_state(evidence=[doc("ada"), doc("kestrel")])
    update = sufficiency_check(state, res, Configuration())
    assert update["sufficient"] is True
    assert update["gaps"] == []
    assert [s["answer"] for s in update["sub_questions"]] == ["Kestrel Labs", "Velford"]
    assert update["sub_questions"][1]["question"] == (
        "In which city is the headquarters of Kestrel Labs?"
    )


def test_sufficiency_check_rejects_answers_the_evidence_does_not_state() -> None:
    recorder = by_prompt(
        decompose=json.dumps({"sub_questions": SUB_QUESTIONS[:2]}),
        sufficiency=_answers("Kestrel Labs", "Paris"),
    )
    res, _ = resources(recorder)
    update = sufficiency_check(
        make_state(evidence=[doc("ada"), doc("kestrel")]), res, Configuration()
    )
    assert update["sufficient"] is False
    assert update["sub_questions"][1]["answer"] is None
    assert update["gaps"] == ["In which city is the headquarters of Kestrel Labs?"]


@pytest.mark.parametrize(
    "reply",
    ["I think the answer is Velford.", '{"answers": "Velford"}', '{"verdict": "yes"}', "[1, 2]"],
    ids=["prose", "answers-not-a-list", "wrong-key", "json-array"],
)
def test_sufficiency_check_treats_an_unusable_reply_as_all_unknown(reply: str) -> None:
    recorder = by_prompt(
        decompose=json.dumps(
            {
                "sub_questions": [
                    "Which company does Ada Voss work for?",
                    "Who founded Kestrel Labs?",
                ]
            }
        ),
        sufficiency=reply,
    )
    res, _ = resources(recorder)
    state = make_state(evidence=[doc("ada"), doc("kestrel")])
    update = sufficiency_check(state, res, Configuration())
    assert [s["answer"] for s in update["sub_questions"]] == [None, None]
    assert update["gaps"] == ["Which company does Ada Voss work for?", "Who founded Kestrel Labs?"]
    assert update["sufficient"] is False
    check_accounting(state, update, "sufficiency_check", retrieval_calls=0, llm_calls=2)


def test_sufficiency_check_falls_back_to_the_question_on_an_unusable_decomposition() -> None:
    recorder = by_prompt(decompose="no idea", sufficiency=_answers("UNKNOWN"))
    res, _ = resources(recorder)
    update = sufficiency_check(make_state(evidence=[doc("ada")]), res, Configuration())
    assert update["sub_questions"] == [{"question": QUESTION, "answer": None}]
    assert update["gaps"] == [QUESTION]


def test_sufficiency_check_survives_a_failing_model() -> None:
    recorder = failing()
    res, _ = resources(recorder)
    state = make_state(evidence=[doc("ada")])
    update = sufficiency_check(state, res, Configuration())
    assert update["sub_questions"] == [{"question": QUESTION, "answer": None}]
    assert update["sufficient"] is False
    check_accounting(state, update, "sufficiency_check", retrieval_calls=0, llm_calls=2)


def test_sufficiency_check_counts_a_null_answer_as_unknown() -> None:
    recorder = by_prompt(sufficiency=_answers(None))
    res, _ = resources(recorder)
    evidence = [Document(id="x", title="Ada Voss", text="None of Ada Voss's robots can swim.")]
    state = make_state(
        evidence=evidence,
        sub_questions=[{"question": "Which robots of Ada Voss can swim?", "answer": None}],
    )
    update = sufficiency_check(state, res, Configuration())
    assert update["sub_questions"][0]["answer"] is None
    assert update["sufficient"] is False


# --- stop_answer ---------------------------------------------------------------------------


def test_stop_answer_answers_from_the_evidence() -> None:
    recorder = by_prompt(answer='Answer: "Velford"\nThe passage says so.')
    res, searcher = resources(recorder)
    subs = [
        {"question": "Which company does Ada Voss work for?", "answer": "Kestrel Labs"},
        {"question": "In which city is the headquarters of Kestrel Labs?", "answer": None},
    ]
    state = make_state(evidence=[doc("ada"), doc("kestrel")], sub_questions=subs)
    update = stop_answer(state, res, Configuration())
    entry = check_accounting(
        state,
        update,
        "stop_answer",
        retrieval_calls=0,
        llm_calls=1,
        step=False,
        tokens=recorder.tokens(),
    )
    assert update["answer"] == "Velford"
    assert entry["answer"] == "Velford" and entry["fallback"] is False
    assert update["evidence"] == state["evidence"]
    assert searcher.calls == []
    prompt = str(recorder.calls[0][-1].content)
    # Two evidence passages, then the verified sub-answers as one more data block.
    assert prompt.count("<passage ") == 3
    assert "Kestrel Labs" in prompt.split(f'title="{prompts.FACTS_TITLE}"')[1]


WITHOUT_ABSTENTION = Configuration(abstain=False)
"""The fallbacks below are those of the earlier behaviour; tests/unit/test_abstention.py tests
the abstentions that replace them by default."""


def test_stop_answer_without_evidence_does_not_call_the_model() -> None:
    recorder = fixed("Velford")
    res, _ = resources(recorder)
    state = make_state()
    update = stop_answer(state, res, WITHOUT_ABSTENTION)
    assert update["answer"] == prompts.INSUFFICIENT_EVIDENCE == "insufficient evidence"
    assert recorder.calls == []
    entry = check_accounting(
        state, update, "stop_answer", retrieval_calls=0, llm_calls=0, step=False
    )
    assert entry["fallback"] is True


def test_stop_answer_survives_a_failing_model() -> None:
    recorder = failing()
    res, _ = resources(recorder)
    state = make_state(evidence=[doc("ada"), doc("kestrel")])
    update = stop_answer(state, res, WITHOUT_ABSTENTION)
    assert update["answer"] == "insufficient evidence"
    assert len(recorder.calls) == 1
    entry = check_accounting(
        state, update, "stop_answer", retrieval_calls=0, llm_calls=1, step=False
    )
    assert entry["fallback"] is True
    assert update["completion_tokens"] == 0


@pytest.mark.parametrize("reply", ["", "   \n ", '""', "Answer:"])
def test_stop_answer_falls_back_on_an_empty_reply(reply: str) -> None:
    res, _ = resources(fixed(reply))
    update = stop_answer(make_state(evidence=[doc("ada")]), res, WITHOUT_ABSTENTION)
    assert update["answer"] == "insufficient evidence"


def test_stop_answer_falls_back_to_the_last_sub_answer_when_sufficient() -> None:
    res, _ = resources(failing())
    subs = [
        {"question": "Which company does Ada Voss work for?", "answer": "Kestrel Labs"},
        {"question": "In which city is the headquarters of Kestrel Labs?", "answer": "Velford"},
    ]
    state = make_state(evidence=[doc("ada"), doc("kestrel")], sub_questions=subs, sufficient=True)
    assert stop_answer(state, res, Configuration())["answer"] == "Velford"
    # Not judged sufficient: no guess from the sub-answers.
    not_sufficient = make_state(evidence=[doc("ada")], sub_questions=subs, sufficient=False)
    assert stop_answer(not_sufficient, res, WITHOUT_ABSTENTION)["answer"] == "insufficient evidence"
    # With abstention (the default) that is no answer, with the reason.
    abstained = stop_answer(not_sufficient, res, Configuration())
    assert abstained["answer"] == "" and abstained["abstained"] and abstained["abstain_reason"]


def test_stop_answer_trims_to_max_final_docs() -> None:
    recorder = fixed("Velford")
    res, _ = resources(recorder)
    evidence = [doc(pid) for pid in ("ada", "kestrel", "tom", "velford")]
    state = make_state(evidence=evidence)
    update = stop_answer(state, res, Configuration(max_final_docs=2))
    assert [d["id"] for d in update["evidence"]] == ["ada", "kestrel"]
    assert update["trace"][0]["final_docs"] == 2
    assert str(recorder.calls[0][-1].content).count("<passage ") == 2


# --- compress_answer_evidence --------------------------------------------------------------


ANSWERED = [
    {"question": "Which company does Ada Voss work for?", "answer": "Kestrel Labs"},
    {"question": "In which city is the headquarters of Kestrel Labs?", "answer": "Velford"},
]


def test_compress_keeps_supporting_passages_and_drops_unrelated_ones() -> None:
    recorder = fixed("unused")
    res, searcher = resources(recorder)
    evidence = [doc(pid) for pid in ("banana", "ada", "tom", "kestrel", "ada-painter")]
    state = make_state(evidence=evidence, sub_questions=ANSWERED, sufficient=True)
    update = compress_answer_evidence(state, res, Configuration())
    entry = check_accounting(
        state, update, "compress_answer_evidence", retrieval_calls=0, llm_calls=0, step=False
    )
    # Both passages stating a sub-answer are kept, in their original order.
    assert [d["id"] for d in update["evidence"]] == ["ada", "kestrel"]
    assert entry["kept"] == ["ada", "kestrel"] and entry["dropped"] == 3
    assert update["compressed"] is True
    assert recorder.calls == [] and searcher.calls == []


def test_compress_writes_no_controller_fields_the_graph_records_its_fixed_edge() -> None:
    res, _ = resources()
    state = make_state(evidence=[doc("ada"), doc("tom")], sub_questions=ANSWERED)
    update = compress_answer_evidence(state, res, Configuration())
    controller_fields = {
        "valid_actions",
        "invalid_reasons",
        "policy_scores",
        "next_action",
        "explanation",
    }
    assert not controller_fields & update.keys()
    node_update = run_action("compress_answer_evidence", state, res, Configuration())
    assert node_update["next_action"] == FIXED_EDGES["compress_answer_evidence"] == "stop_answer"
    assert node_update["valid_actions"] == ["stop_answer"] and node_update["policy_scores"] == {}
    assert {k: v for k, v in node_update.items() if k not in controller_fields} == update


def test_compress_passthrough_keeps_everything_up_to_max_final_docs() -> None:
    res, _ = resources()
    evidence = [doc(pid) for pid in ("banana", "ada", "tom", "kestrel")]
    state = make_state(evidence=evidence, sub_questions=ANSWERED)
    update = compress_answer_evidence(state, res, Configuration(compression="passthrough"))
    assert update["evidence"] == evidence
    assert update["compressed"] is True and update["trace"][0]["dropped"] == 0
    update = compress_answer_evidence(
        state, res, Configuration(compression="passthrough", max_final_docs=3)
    )
    assert update["evidence"] == evidence[:3]


def test_compress_respects_max_final_docs_and_keeps_everything_when_nothing_scores() -> None:
    res, _ = resources()
    state = make_state(
        question="Xyzzy?",
        evidence=[doc("banana"), doc("tom"), doc("velford")],
    )
    update = compress_answer_evidence(state, res, Configuration())
    assert [d["id"] for d in update["evidence"]] == ["banana", "tom", "velford"]
    update = compress_answer_evidence(state, res, Configuration(max_final_docs=2))
    assert [d["id"] for d in update["evidence"]] == ["banana", "tom"]
    evidence = [doc(pid) for pid in ("ada", "kestrel", "tom")]
    supported = make_state(evidence=evidence, sub_questions=ANSWERED)
    update = compress_answer_evidence(supported, res, Configuration(max_final_docs=1))
    assert [d["id"] for d in update["evidence"]] == ["kestrel"]


# --- LLMClient -----------------------------------------------------------------------------


def _client(responder: Callable[[list[BaseMessage]], str], **kwargs: Any) -> LLMClient:
    return LLMClient(ScriptedChatModel(respond=responder), **{"backoff_s": 0, **kwargs})


MESSAGES = [("system", "You answer."), ("human", "Question: where?")]
PROMPT_TEXT = "You answer.\nQuestion: where?"


def test_llm_client_retries_then_gives_none(monkeypatch: pytest.MonkeyPatch) -> None:
    sleeps: list[float] = []
    monkeypatch.setattr(client_module.time, "sleep", sleeps.append)
    recorder = failing()
    llm = LLMClient(ScriptedChatModel(respond=recorder), max_retries=2, backoff_s=0.5)
    text, usage = llm.text(MESSAGES)
    assert text is None
    assert len(recorder.calls) == 3
    assert sleeps == [0.5, 1.0]  # exponential backoff between attempts, none after the last
    assert usage == Usage(3, 3 * estimate_tokens(PROMPT_TEXT), 0)
    reply, usage = llm.json(MESSAGES)
    assert reply is None and usage.llm_calls == 3


def test_llm_client_does_not_repeat_a_reply_cut_at_its_budget() -> None:
    class LengthFinishReasonError(Exception):  # the openai client's, by name
        pass

    calls: list[int] = []

    def respond(messages: list[BaseMessage]) -> str:
        calls.append(1)
        raise LengthFinishReasonError("the length limit was reached")

    llm = _client(respond, max_retries=2)
    reply, usage = llm.json(MESSAGES)
    assert reply is None and len(calls) == 1 and usage.llm_calls == 1
    assert llm.failed_requests == 1


def test_llm_client_retries_an_empty_completion_and_sums_usage() -> None:
    replies = iter(["", "  ", "Velford"])
    recorder = Recorder(lambda system, human: next(replies))
    text, usage = _client(recorder, max_retries=2).text(MESSAGES)
    assert text == "Velford"
    assert usage == Usage(3, *recorder.tokens())


def test_llm_client_usage_sums_over_failed_and_successful_attempts() -> None:
    outcomes = iter([RuntimeError("timeout"), "ok"])

    def respond(messages: list[BaseMessage]) -> str:
        outcome = next(outcomes)
        if isinstance(outcome, Exception):
            raise outcome
        return outcome

    text, usage = _client(respond, max_retries=1).text(MESSAGES)
    assert text == "ok"
    prompt_chars = sum(len(content) for _, content in MESSAGES)
    assert usage == Usage(2, estimate_tokens(PROMPT_TEXT) + prompt_chars // 4, len("ok") // 4)


def test_llm_client_waits_only_after_a_failed_request(monkeypatch: pytest.MonkeyPatch) -> None:
    sleeps: list[float] = []
    monkeypatch.setattr(client_module.time, "sleep", sleeps.append)
    outcomes = iter(["", RuntimeError("503"), " ", "Velford"])

    def respond(messages: list[BaseMessage]) -> str:
        outcome = next(outcomes)
        if isinstance(outcome, Exception):
            raise outcome
        return outcome

    llm = LLMClient(ScriptedChatModel(respond=respond), max_retries=3, backoff_s=0.5)
    text, usage = llm.text(MESSAGES)
    assert text == "Velford"
    # The backoff of the second attempt's fault (0.5 * 2); an empty reply is asked again at once.
    assert sleeps == [1.0]
    assert (llm.replies, llm.failed_requests, usage.llm_calls) == (3, 1, 4)


def test_llm_client_does_not_retry_a_lost_backend() -> None:
    calls: list[int] = []

    def respond(messages: list[BaseMessage]) -> str:
        calls.append(1)
        raise ModelUnavailableError("the embedded server died again")

    llm = _client(respond, max_retries=2)
    with pytest.raises(ModelUnavailableError, match="died again"):
        llm.text(MESSAGES)
    assert len(calls) == 1 and llm.failed_requests == 0


def test_llm_client_json_retries_unparseable_replies() -> None:
    replies = iter(["Sure, here you go", 'Result: {"answers": ["Velford"]} done'])
    recorder = Recorder(lambda system, human: next(replies))
    reply, usage = _client(recorder, json_retries=1, json_mode=False).json(MESSAGES)
    assert reply == {"answers": ["Velford"]}
    assert usage == Usage(2, *recorder.tokens())
    # By default (temperature 0 repeats itself), one unparseable reply gives None.
    reply, usage = _client(fixed("nope"), max_retries=0, json_mode=False).json(MESSAGES)
    assert reply is None and usage.llm_calls == 1


def test_llm_client_builds_its_model_lazily_once() -> None:
    built: list[int] = []

    def factory() -> ScriptedChatModel:
        built.append(1)
        return ScriptedChatModel(respond=fixed("hi"))

    llm = LLMClient(factory, max_retries=0, backoff_s=0)
    assert built == []
    assert llm.text(MESSAGES)[0] == "hi"
    assert llm.text(MESSAGES)[0] == "hi"
    assert built == [1]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('{"a": 1}', {"a": 1}),
        ('```json\n{"answers": ["x", "UNKNOWN"]}\n```', {"answers": ["x", "UNKNOWN"]}),
        ('```\n{"a": {"b": [1, 2]}}\n```\nHope this helps!', {"a": {"b": [1, 2]}}),
        (
            'Sure! Here is the JSON: {"sub_questions": ["q1", "q2"]} Let me know.',
            {"sub_questions": ["q1", "q2"]},
        ),
        ('The set {x, y} is not JSON, but {"ok": true} is.', {"ok": True}),
        ('  {"a": "brace } inside"}  ', {"a": "brace } inside"}),
        ("no json here", None),
        ("[1, 2, 3]", None),
        ('{"unterminated": ', None),
        ("", None),
    ],
)
def test_parse_json_object(text: str, expected: dict[str, Any] | None) -> None:
    assert parse_json_object(text) == expected

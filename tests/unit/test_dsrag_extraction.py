"""The one-call DS-RAG question analysis (:mod:`dynakrag.dsrag.extraction`) with scripted models.

Every reply is written here: what is under test is how a reply becomes targets, criteria and
sub-questions, how the rules repair a partial or unusable reply, what ``auto`` picks, that one
call is made (and memoised), and that the schema reaches the model.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.messages import BaseMessage
from langchain_core.outputs import ChatResult

from dynakrag import prompts
from dynakrag.configuration import Configuration
from dynakrag.dsrag.analysis import Target
from dynakrag.dsrag.epqd import rule_decompose
from dynakrag.dsrag.extraction import (
    AUTO_GIVE_UP_AFTER,
    FALLBACK_PER_TARGET,
    analyse_question,
    compatible_sub_questions,
    compression_model_calls,
    graph_of_targets,
)
from dynakrag.dsrag.rule_extraction import rule_analysis
from dynakrag.llm.cache import CachedChatModel, SQLiteLLMCache
from dynakrag.llm.client import LLMClient
from dynakrag.llm.fake import Responder, ScriptedChatModel

RANKING = "Which of Ada Voss, Tom Reyl and Mira Quon was born first?"
PEOPLE = ["Ada Voss", "Tom Reyl", "Mira Quon"]
COMPARISON = (
    "Are Lena Hartwig, who studied at Velford Conservatory, and Ovid Marsh from the same country?"
)
TEMPLATED = (
    "Who's born date is the first earliest, among Ada Voss, who studied law in Brenn as a young "
    "woman, Tom Reyl and Mira Quon?"
)


def item(entity: str, asks: str, question: str = "", *details: str) -> dict[str, Any]:
    return {"entity": entity, "asks": asks, "details": list(details), "question": question}


def reply_of(*items: dict[str, Any]) -> str:
    return json.dumps({"sub_questions": list(items)})


class Script:
    """A scripted analysis model that counts its calls and keeps the last request."""

    def __init__(self, reply: str | Callable[[list[BaseMessage]], str]) -> None:
        self.reply = reply
        self.calls = 0
        self.requests: list[str] = []

    def __call__(self, messages: list[BaseMessage]) -> str:
        assert str(messages[0].content) == prompts.ANALYSIS_SYSTEM, "unexpected prompt"
        self.calls += 1
        self.requests.append(str(messages[-1].content))
        return self.reply(messages) if callable(self.reply) else self.reply

    def client(self) -> LLMClient:
        return LLMClient(ScriptedChatModel(respond=self), max_retries=0)


def anchors(analysis: Any) -> list[str]:
    return [next(n.text for n in c.nodes if n.key == c.anchor) for c in analysis.criteria.criteria]


# --- the reply becomes one criterion per entity asked about ----------------------------------


def test_a_reworded_ranking_gives_one_criterion_per_person_in_one_call() -> None:
    script = Script(reply_of(*(item(p, "birth date", f"When was {p} born?") for p in PEOPLE)))
    analysis = analyse_question(RANKING, script.client(), "llm")
    assert script.calls == 1 and analysis.method == "llm" and not analysis.notes
    assert analysis.sub_questions == tuple(f"When was {p} born?" for p in PEOPLE)
    # The shared fact is the core; each person is the anchor of one criterion.
    assert analysis.criteria.fallback is None
    assert analysis.criteria.graph.node(analysis.criteria.core).text == "birth date"
    assert anchors(analysis) == PEOPLE
    assert analysis.usage.llm_calls == 1 and analysis.usage.prompt_tokens > 0
    # The rules cannot read this wording: no core, and not one criterion per person.
    rules = rule_analysis(RANKING)
    assert rules.criteria.fallback is not None


def test_the_request_carries_the_question_and_the_given_sub_questions() -> None:
    subs = ["Which company makes the Lumo Kettle?", "Who founded Brightwell Appliances?"]
    script = Script(
        reply_of(
            item("Lumo Kettle", "maker", subs[0]), item("Brightwell Appliances", "founder", subs[1])
        )
    )
    question = "Who founded the company that makes the Lumo Kettle?"
    analysis = analyse_question(question, script.client(), "llm", sub_questions=subs)
    request = script.requests[0]
    assert request.startswith(f"Question: {question}\nSub-questions:\n1. {subs[0]}\n2. {subs[1]}")
    assert analysis.given == tuple(subs) and analysis.method == "llm"
    # An entity named only by a given sub-question (a resolved bridge) is in the text.
    assert anchors(analysis) == ["Lumo Kettle", "Brightwell Appliances"]


def test_describing_names_hang_below_their_entity() -> None:
    script = Script(
        reply_of(
            item("Lena Hartwig", "nationality", "", "Velford Conservatory"),
            item("Ovid Marsh", "nationality", "What is the nationality of Ovid Marsh?"),
        )
    )
    analysis = analyse_question(COMPARISON, script.client(), "llm")
    assert anchors(analysis) == ["Lena Hartwig", "Ovid Marsh"]
    first = analysis.criteria.criteria[0].as_graph()
    texts = first.node_texts
    edge = (texts.index("Lena Hartwig"), texts.index("Velford Conservatory"))
    assert edge in first.edges
    # A missing sub-question is written from the entity and the fact asked.
    assert analysis.sub_questions[0] == "What is the nationality of Lena Hartwig?"


def test_a_lone_target_is_anchored_at_its_entity_not_at_a_detail() -> None:
    built = graph_of_targets([Target("Ada Voss", "birth date", "When?", ("Brenn", "Ostvik"))])
    extraction = built.extractions[0]
    assert [n.text for n in extraction.nodes] == [
        "When",
        "birth date",
        "Brenn",
        "Ostvik",
        "Ada Voss",
    ]
    script = Script(reply_of(item("Ada Voss", "birth date", "When was Ada Voss born?")))
    analysis = analyse_question("When was Ada Voss born?", script.client(), "llm")
    assert anchors(analysis) == ["Ada Voss"]


def test_criteria_fall_back_to_one_per_target_when_the_core_is_elsewhere() -> None:
    # Two facts about one person with two describing names: the person branches, so
    # Algorithm 1 would take the person as the core and its details as the branches.
    question = "When and where was Ada Voss, of Brenn and Ostvik, born?"
    script = Script(
        reply_of(
            item("Ada Voss", "birth date", "When was Ada Voss born?", "Brenn", "Ostvik"),
            item("Ada Voss", "birth place", "Where was Ada Voss born?", "Brenn", "Ostvik"),
        )
    )
    analysis = analyse_question(question, script.client(), "llm")
    assert analysis.criteria.fallback == FALLBACK_PER_TARGET
    assert anchors(analysis) == ["Ada Voss", "Ada Voss"]


# --- repair ----------------------------------------------------------------------------------


def test_invented_entities_and_details_are_dropped_and_noted() -> None:
    script = Script(
        reply_of(
            item("Ada Voss", "birth date", "", "Atlantis"),
            item("Tom Reyl", "birth date"),
            item("Mira Quon", "birth date"),
            item("Zed Unknown", "birth date"),
            item("Tom Reyl", "birth date"),
        )
    )
    analysis = analyse_question(RANKING, script.client(), "llm")
    assert analysis.method == "repaired"
    assert anchors(analysis) == PEOPLE
    notes = " | ".join(analysis.notes)
    assert "'Zed Unknown' is not in the question" in notes and "'Atlantis'" in notes
    assert "repeated" in notes


def test_a_person_the_reply_left_out_is_added_from_the_rules() -> None:
    # A list the rules cannot read: the name after a listed entity joins the targets.
    script = Script(reply_of(item("Ada Voss", "birth date"), item("Tom Reyl", "birth date")))
    analysis = analyse_question(RANKING, script.client(), "llm")
    assert analysis.method == "repaired" and anchors(analysis) == PEOPLE
    added = analysis.targets[-1]
    assert added.source == "rules" and added.asks == "birth date"
    assert any("'Mira Quon'" in note for note in analysis.notes)
    # A templated question: the rule graph's list items (its core's branches) repair it.
    script = Script(reply_of(item("Ada Voss", "birth date", "", "Brenn")))
    analysis = analyse_question(TEMPLATED, script.client(), "llm")
    assert sorted(anchors(analysis)) == sorted(PEOPLE)
    # A description's place is not a list item: "Brenn" is no target.
    assert "Brenn" not in anchors(analysis)


def test_names_joined_into_one_item_are_split() -> None:
    # A small model's "Tom Reyl and Mira Quon" is two people: one criterion each.
    joined = item("Tom Reyl and Mira Quon", "birth date", "When were Tom Reyl and Mira Quon born?")
    script = Script(reply_of(item("Ada Voss", "birth date"), joined))
    analysis = analyse_question(TEMPLATED, script.client(), "llm")
    assert analysis.method == "repaired" and anchors(analysis) == PEOPLE
    assert [t.question for t in analysis.targets[1:]] == [
        "What is the birth date of Tom Reyl?",
        "What is the birth date of Mira Quon?",
    ]
    assert any("split" in note for note in analysis.notes)
    # One-word names joined by "and" are more often one name: they stay whole.
    question = "Which was founded first, Procter & Gamble or Simon and Garfunkel Records?"
    script = Script(reply_of(item("Procter & Gamble", "founding date")))
    analysis = analyse_question(question, script.client(), "llm")
    assert "Procter & Gamble" in [t.entity for t in analysis.targets]


def test_an_age_is_asked_as_the_birth_date_it_is_read_from() -> None:
    question = "Looking at Ada Voss and Tom Reyl: who is the oldest?"
    script = Script(reply_of(*(item(p, "age", f"How old is {p}?") for p in PEOPLE[:2])))
    analysis = analyse_question(question, script.client(), "llm")
    assert analysis.sub_questions == ("When was Ada Voss born?", "When was Tom Reyl born?")
    assert {t.asks for t in analysis.targets} == {"birth date"}
    assert analysis.method == "repaired" and any("'age'" in n for n in analysis.notes)


def test_an_order_by_age_asks_each_person_for_the_birth_date() -> None:
    # The reply follows a description for one person and copies the question for another.
    question = "Of Ada Voss, who studied law in Brenn, Tom Reyl and Mira Quon, who was born second?"
    script = Script(
        reply_of(
            item("Ada Voss", "education", "What did Ada Voss study in Brenn?", "Brenn"),
            item("Tom Reyl", "birth order", "Who was born second?"),
            item("Mira Quon", "birth date", f"Who among {', '.join(PEOPLE)} was born second?"),
        )
    )
    analysis = analyse_question(question, script.client(), "llm")
    assert analysis.sub_questions == tuple(f"When was {p} born?" for p in PEOPLE)
    assert {t.asks for t in analysis.targets} == {"birth date"}
    assert analysis.targets[0].details == ("Brenn",)
    # An age word in a description does not turn a comparison of nationalities into one of
    # ages.
    question = "Are Ada Voss, the eldest of three sisters, and Tom Reyl from the same country?"
    script = Script(reply_of(*(item(p, "nationality") for p in PEOPLE[:2])))
    analysis = analyse_question(question, script.client(), "llm")
    assert {t.asks for t in analysis.targets} == {"nationality"}
    # Without an order by age, a fact the reply asks stays; a sub-question without its
    # entity is written from the entity and the fact.
    question = "Did Ada Voss and Tom Reyl study at the same university?"
    script = Script(
        reply_of(
            item("Ada Voss", "university"), item("Tom Reyl", "university", "Where did he study?")
        )
    )
    analysis = analyse_question(question, script.client(), "llm")
    assert analysis.sub_questions == (
        "What is the university of Ada Voss?",
        "What is the university of Tom Reyl?",
    )


def test_a_name_of_a_description_made_an_item_is_dropped_from_a_comparison() -> None:
    question = (
        "Do Ada Voss, Tom Reyl, who attended Velford Conservatory where he learned the violin, "
        "and Mira Quon share the same nationality?"
    )
    items = [item(p, "nationality") for p in PEOPLE]
    items.insert(2, item("Velford Conservatory", "location", "Where is Velford Conservatory?"))
    analysis = analyse_question(question, Script(reply_of(*items)).client(), "llm")
    assert anchors(analysis) == PEOPLE
    assert any("'Velford Conservatory' is not among" in note for note in analysis.notes)
    # A multi-hop question's targets ask different facts: none is dropped.
    question = "Who founded the company that makes the Lumo Kettle, and where was it founded?"
    items = [
        item("Lumo Kettle", "maker", "Which company makes the Lumo Kettle?"),
        item("Lumo Kettle", "founder", "Who founded the maker of the Lumo Kettle?"),
        item("Lumo Kettle", "founding place", "Where was the maker of the Lumo Kettle founded?"),
    ]
    analysis = analyse_question(question, Script(reply_of(*items)).client(), "llm")
    assert len(analysis.targets) == 3


def test_given_sub_questions_the_reply_skipped_are_added() -> None:
    subs = ["When was Ada Voss born?", "When was Tom Reyl born?"]
    script = Script(reply_of(item("Ada Voss", "birth date", subs[0])))
    analysis = analyse_question("Who is older?", script.client(), "llm", sub_questions=subs)
    assert anchors(analysis) == ["Ada Voss", "Tom Reyl"]
    assert analysis.method == "repaired"


@pytest.mark.parametrize(
    "reply",
    [
        "Sure, here are the entities: Ada Voss, Tom Reyl.",
        '{"answers": ["x"]}',
        "{}",
        reply_of(item("Nobody Here", "birth date")),
    ],
)
def test_an_unusable_reply_falls_back_to_the_whole_rule_path(reply: str) -> None:
    script = Script(reply)
    analysis = analyse_question(TEMPLATED, script.client(), "llm")
    assert analysis.method == "fallback" and script.calls == 1
    assert analysis.sub_questions == rule_decompose(TEMPLATED).sub_questions
    assert sorted(anchors(analysis)) == sorted(PEOPLE)  # the rules read the template
    assert analysis.usage.llm_calls == 1  # the failed call is still accounted
    assert analysis.notes and analysis.notes[-1].endswith("rules")


def test_a_failing_model_never_raises() -> None:
    def broken(messages: list[BaseMessage]) -> str:
        raise ConnectionError("model down")

    analysis = analyse_question(TEMPLATED, Script(broken).client(), "llm")
    assert analysis.method == "fallback" and len(analysis.criteria.criteria) == 3
    assert analyse_question("", Script(broken).client(), "llm").criteria.criteria


# --- the settings ----------------------------------------------------------------------------


def test_rules_and_a_missing_model_make_no_call() -> None:
    script = Script(reply_of(item("Ada Voss", "birth date")))
    for setting, llm in (("rules", script.client()), ("llm", None), ("auto", None)):
        analysis = analyse_question(TEMPLATED, llm, setting)
        assert analysis.method == "rules" and analysis.usage.llm_calls == 0
        assert analysis.sub_questions == rule_decompose(TEMPLATED).sub_questions
    assert script.calls == 0


def test_auto_uses_a_model_that_answers_in_the_schema() -> None:
    script = Script(reply_of(*(item(p, "birth date") for p in PEOPLE)))
    llm = script.client()
    for index in range(AUTO_GIVE_UP_AFTER + 2):
        analysis = analyse_question(f"{RANKING} ({index})", llm, "auto")
        assert analysis.method == "llm"
    assert script.calls == AUTO_GIVE_UP_AFTER + 2


def test_auto_stops_asking_a_model_that_never_answers_in_the_schema() -> None:
    script = Script("no JSON here")
    llm = script.client()
    methods = [analyse_question(f"{TEMPLATED} ({i})", llm, "auto").method for i in range(5)]
    assert methods == ["fallback"] * AUTO_GIVE_UP_AFTER + ["rules"] * 2
    assert script.calls == AUTO_GIVE_UP_AFTER
    # "llm" keeps asking whatever the replies were.
    analyse_question(TEMPLATED, llm, "llm")
    assert script.calls == AUTO_GIVE_UP_AFTER + 1


def test_auto_reads_the_controllers_own_sub_questions_with_the_rules() -> None:
    script = Script(reply_of(*(item(p, "birth date", f"When was {p} born?") for p in PEOPLE)))
    llm = script.client()
    subs = ["When was Ada Voss born?", "When was Tom Reyl born?"]
    given = analyse_question(RANKING, llm, "auto", sub_questions=subs)
    assert script.calls == 0 and given.method == "rules" and given.sub_questions == tuple(subs)
    assert anchors(given) == ["Ada Voss", "Tom Reyl"]
    # Sub-questions an analysis of the question wrote are that analysis, remembered.
    own = analyse_question(RANKING, llm, "auto")
    again = analyse_question(RANKING, llm, "auto", sub_questions=own.sub_questions)
    assert script.calls == 1 and again.reused and again.method == "llm"


def test_auto_takes_the_rules_when_the_model_cannot_be_reached() -> None:
    def broken(messages: list[BaseMessage]) -> str:
        raise ConnectionError("model down")

    llm = Script(broken).client()
    assert analyse_question(TEMPLATED, llm, "auto").method == "fallback"
    second = analyse_question(TEMPLATED + " ", llm, "auto")
    assert second.method == "rules" and "failed" in second.notes[0]


# --- one call per question -------------------------------------------------------------------


def test_a_question_is_analysed_once_per_client() -> None:
    script = Script(reply_of(*(item(p, "birth date", f"When was {p} born?") for p in PEOPLE)))
    llm = script.client()
    first = analyse_question(RANKING, llm, "llm")
    again = analyse_question(RANKING, llm, "llm")
    assert script.calls == 1 and again.reused and again.usage.llm_calls == 0
    assert again.criteria == first.criteria
    # Asked with the sub-questions that analysis wrote (the sufficiency check's EPQD parts):
    # the same analysis, no call.
    parts = analyse_question(RANKING, llm, "llm", sub_questions=first.sub_questions)
    assert script.calls == 1 and parts.reused and parts.sub_questions == first.sub_questions
    # Other sub-questions are another request.
    analyse_question(RANKING, llm, "llm", sub_questions=["When was Ada Voss born?"])
    assert script.calls == 2
    # Another client asks its own model.
    analyse_question(RANKING, Script(script.reply).client(), "llm")
    assert script.calls == 2


# --- the schema reaches the model ------------------------------------------------------------


def birth_dates(messages: list[BaseMessage]) -> str:
    """An analysis asking each of PEOPLE's birth date, in JSON."""
    return reply_of(*(item(p, "birth date") for p in PEOPLE))


class RecordingModel(ScriptedChatModel):
    """Records the keyword arguments of each call (what ``bind`` set); replies with
    :func:`birth_dates`."""

    respond: Responder = birth_dates
    seen: list[dict[str, Any]]

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        self.seen.append(kwargs)
        return super()._generate(messages, stop, run_manager, **kwargs)


def test_the_schema_is_sent_as_the_response_format_through_the_disk_cache(
    tmp_path: Path,
) -> None:
    model = RecordingModel(seen=[])
    cache = SQLiteLLMCache.in_dir(tmp_path)
    cached = CachedChatModel(inner=model, disk_cache=cache, identity="recording")
    llm = LLMClient(cached, max_retries=0, json_mode=True)
    analysis = analyse_question(RANKING, llm, "llm")
    assert analysis.method == "llm"
    (kwargs,) = model.seen
    assert kwargs["response_format"] == {"type": "json_object", "schema": prompts.ANALYSIS_SCHEMA}
    # A new client (no memo) gets the reply from the disk cache, keyed with the schema.
    again = analyse_question(RANKING, LLMClient(cached, json_mode=True), "llm")
    assert len(model.seen) == 1 and cache.hits == 1 and again.criteria == analysis.criteria
    # Without JSON mode (a model that is not OpenAI-compatible) nothing is bound.
    analyse_question(RANKING, LLMClient(RecordingModel(seen=[]), json_mode=False), "llm")
    cache.close()


def test_plain_json_calls_still_send_json_mode_only() -> None:
    model = RecordingModel(seen=[])
    LLMClient(model, json_mode=True).json([("human", "hi")])
    assert model.seen == [{"response_format": {"type": "json_object"}}]


# --- the controller's sub-questions and the cost -----------------------------------------------


def test_compatible_sub_questions_leave_out_unknown_references_and_repeats() -> None:
    subs = [
        {"question": "Which company makes the Lumo Kettle?", "answer": "Brightwell"},
        {"question": "Who founded #1?", "answer": None},
        {"question": "Which company makes the Lumo Kettle?", "answer": None},
        {"question": "  ", "answer": None},
        "not a sub-question",
    ]
    assert compatible_sub_questions(subs) == ["Which company makes the Lumo Kettle?"]  # type: ignore[arg-type]
    assert compatible_sub_questions([]) == []


@pytest.mark.parametrize(
    ("settings", "state", "calls"),
    [
        ({"compression": "heuristic"}, {}, 0),
        ({"compression": "dics", "dsrag_extraction": "rules"}, {}, 0),
        ({"compression": "dics", "dsrag_extraction": "llm"}, {}, 1),
        ({"compression": "dics", "dsrag_extraction": "llm"}, {"sub_questions": [{}]}, 1),
        ({"compression": "dics", "dsrag_extraction": "auto"}, {"sub_questions": [{}]}, 0),
        ({"compression": "dics", "dsrag_extraction": "auto"}, {}, 1),
        ({"compression": "dics", "decomposition": "epqd"}, {"sub_questions": [{}]}, 0),
        ({"compression": "dics", "decomposition": "epqd"}, {}, 1),
        ({"compression": "dics", "dsrag_extraction": "llm"}, {"hops": [{}]}, 0),
    ],
)
def test_compression_model_calls(settings: dict[str, str], state: dict, calls: float) -> None:
    assert compression_model_calls(state, Configuration(**settings)) == calls


def test_the_policy_cost_of_compression_counts_its_model_call() -> None:
    from dynakrag.policy.base import ACTION_COSTS, action_cost
    from dynakrag.policy.heuristic import HeuristicPolicy

    state: Any = {"question": "q", "evidence": [], "trace": []}
    cheap = Configuration(compression="dics", dsrag_extraction="rules")
    model = Configuration(compression="dics", dsrag_extraction="llm", cost_lambda=0.5)
    base = ACTION_COSTS["compress_answer_evidence"]
    assert action_cost("compress_answer_evidence", state, cheap) == base
    assert action_cost("compress_answer_evidence", state, model) == base + 1.0
    assert action_cost("retrieve_more", state, model) == ACTION_COSTS["retrieve_more"]
    policy = HeuristicPolicy()
    actions = ["compress_answer_evidence", "stop_answer"]
    values = policy.value(state, actions, model)
    scores = policy.scores(state, actions, model)
    assert scores["compress_answer_evidence"] == pytest.approx(
        values["compress_answer_evidence"] - 0.5 * (base + 1.0)
    )


def test_an_openai_compatible_server_receives_the_schema() -> None:
    """Through langchain-openai and the openai SDK, as the embedded llama.cpp server gets it."""
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    from langchain_openai import ChatOpenAI

    from tests.fakes import chat_completion_body

    bodies: list[dict[str, Any]] = []
    text = reply_of(*(item(p, "birth date") for p in PEOPLE))

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            bodies.append(json.loads(self.rfile.read(int(self.headers["Content-Length"]))))
            data = json.dumps(
                chat_completion_body(text, model="local", number=1, prompt_tokens=10)
            ).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        model = ChatOpenAI(
            base_url=f"http://127.0.0.1:{server.server_port}/v1",
            api_key="local",
            model="local",
            temperature=0,
            max_retries=0,
            extra_body={"max_tokens": 256},
        )
        analysis = analyse_question(RANKING, LLMClient(model, max_retries=0), "llm")
    finally:
        server.shutdown()
        server.server_close()
    assert analysis.method == "llm" and anchors(analysis) == PEOPLE
    (body,) = bodies
    assert body["response_format"] == {"type": "json_object", "schema": prompts.ANALYSIS_SCHEMA}
    # The completion budget: the analysis's own, capped by the configured one.
    assert body["max_tokens"] == min(prompts.ANALYSIS_MAX_TOKENS, 256)

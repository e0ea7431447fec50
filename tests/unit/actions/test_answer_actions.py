"""The actions that end a run, called directly on hand-made states: stop_answer (its answer,
fallbacks and trimming) and compress_answer_evidence (the passages kept, its fixed edge to
stop_answer)."""

from __future__ import annotations

import pytest

from dynakrag import prompts
from dynakrag.actions.compress_answer_evidence import compress_answer_evidence
from dynakrag.actions.stop_answer import stop_answer
from dynakrag.configuration import Configuration
from dynakrag.graph.nodes import FIXED_EDGES, run_action
from tests.unit.actions.support import (
    apply,
    by_prompt,
    check_accounting,
    doc,
    failing,
    fixed,
    make_state,
    resources,
)

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


def _hops(*resolved: tuple[str, str | None, str | None]):
    from dynakrag.actions.chain import plan_hops

    hops = plan_hops([question for question, _, _ in resolved])
    for hop, (_, answer, passage) in zip(hops, resolved, strict=True):
        if answer is not None:
            hop.update(status="resolved", answer=answer, passage=passage)
    return hops


def test_dics_with_a_chain_keeps_one_passage_per_hop_no_model_call() -> None:
    recorder = fixed("unused")
    res, searcher = resources(recorder)
    hops = _hops(
        ("Which company does Ada Voss work for?", "Kestrel Labs", "ada"),
        ("In which city is the headquarters of #1?", "Velford", "kestrel"),
    )
    evidence = [doc(pid) for pid in ("banana", "ada", "tom", "kestrel", "ada-painter")]
    state = make_state(evidence=evidence, hops=hops)
    update = compress_answer_evidence(state, res, Configuration(compression="dics"))
    assert [d["id"] for d in update["evidence"]] == ["ada", "kestrel"]
    entry = update["trace"][0]
    assert entry["dics_mode"] == "hops"
    assert [(p["hop"], p["passage"], p["how"]) for p in entry["hop_passages"]] == [
        (1, "ada", "states its answer"),
        (2, "kestrel", "states its answer"),
    ]
    assert recorder.calls == [] and searcher.calls == []


def test_dics_chooses_passages_for_a_hop_the_chain_did_not_resolve() -> None:
    res, _ = resources()
    hops = _hops(
        ("Which company does Ada Voss work for?", "Kestrel Labs", "ada"),
        ("Who founded #1?", None, None),
    )
    evidence = [doc(pid) for pid in ("banana", "ada", "velford", "kestrel")]
    state = make_state(evidence=evidence, hops=hops)
    update = compress_answer_evidence(state, res, Configuration(compression="dics"))
    served = [(p["hop"], p["passage"], p["how"]) for p in update["trace"][0]["hop_passages"]]
    assert served[0] == (1, "ada", "states its answer")
    # No sentence vouches for a passage of the open hop: it keeps DICS's choice among the
    # passages about Kestrel Labs and those scoring near the best on its words.
    assert served[1] == (2, "kestrel", "chosen by DICS among its entity's passages")
    assert (2, "kestrel", "scores near the best on its words") in served
    assert all(passage not in {"banana", "velford"} for _, passage, _ in served)
    assert [d["id"] for d in update["evidence"]] == ["ada", "kestrel"]


def test_dics_serves_a_hop_with_its_entitys_passage_and_the_passages_it_went_through() -> None:
    from dynakrag.state import Document

    res, _ = resources()
    # An open hop about a named entity is served first by a passage about it, not by one
    # about another person that shares its words.
    hops = _hops(("Where was Tom Reyl born?", None, None))
    birthplaces = Document(
        id="guide", title="Birthplaces", text="Lia Brand was born in Velford, where Orvane flows."
    )
    question = "Where was Tom Reyl born?"
    state = make_state(
        question=question, evidence=[birthplaces, doc("banana"), doc("tom")], hops=hops
    )
    update = compress_answer_evidence(state, res, Configuration(compression="dics"))
    assert update["trace"][0]["hop_passages"][0] == {
        "hop": 1,
        "passage": "tom",
        "how": "chosen by DICS among its entity's passages",
    }
    # A hop extended through the city its person's passage named keeps that passage too.
    country = Document(id="quarmouth", title="Quarmouth", text="Quarmouth is a city in Vardonia.")
    hops = _hops(("In which country was Tom Reyl born?", "Vardonia", "quarmouth"))
    hops[0].update(via=["Quarmouth"], via_sentences=["Tom Reyl was born in Quarmouth."])
    question = "In which country was Tom Reyl born?"
    state = make_state(question=question, evidence=[doc("banana"), doc("tom"), country], hops=hops)
    update = compress_answer_evidence(state, res, Configuration(compression="dics"))
    assert [d["id"] for d in update["evidence"]] == ["tom", "quarmouth"]
    assert [p["how"] for p in update["trace"][0]["hop_passages"]] == [
        "states its answer",
        "names the entity it went through",
    ]


def test_dics_keeps_the_own_passage_of_each_answer_a_comparison_reads() -> None:
    from dynakrag.state import Document

    res, _ = resources()
    question = "Which company's founder was born earlier, Kestrel Labs or Orbis Devices?"
    orbis = Document(
        id="orbis", title="Orbis Devices", text="Orbis Devices was founded by Lia Brand."
    )
    lia = Document(id="lia", title="Lia Brand", text="Lia Brand was born in 1961.")
    hops = _hops(
        ("Who founded Kestrel Labs?", "Tom Reyl", "kestrel"),
        ("Who founded Orbis Devices?", "Lia Brand", "orbis"),
    )
    evidence = [doc("banana"), doc("kestrel"), orbis, doc("tom"), lia]
    state = make_state(question=question, evidence=evidence, hops=hops)
    update = compress_answer_evidence(state, res, Configuration(compression="dics"))
    # The reader compares the founders' birth years: each founder's own passage stays.
    assert [d["id"] for d in update["evidence"]] == ["kestrel", "orbis", "tom", "lia"]
    assert {"hop": 2, "passage": "lia", "how": "is its answer's own passage"} in update["trace"][0][
        "hop_passages"
    ]


def test_dics_keeps_a_passage_about_each_thing_the_question_names() -> None:
    res, _ = resources()
    # The chain asked only of Kestrel Labs; the question also describes it by Ada Voss.
    question = "Ada Voss works at a company. In which city is that company's headquarters?"
    hops = _hops(("In which city is the headquarters of Kestrel Labs?", "Velford", "kestrel"))
    evidence = [doc("banana"), doc("kestrel"), doc("ada"), doc("velford")]
    state = make_state(question=question, evidence=evidence, hops=hops)
    update = compress_answer_evidence(state, res, Configuration(compression="dics"))
    assert [d["id"] for d in update["evidence"]] == ["kestrel", "ada"]
    assert update["trace"][0]["hop_passages"][-1] == {
        "hop": 0,
        "passage": "ada",
        "how": "about Ada Voss, which the question names",
    }


def test_a_chain_judges_the_names_on_the_evidence_before_compression() -> None:
    recorder = by_prompt(answer='Answer: "Velford"')
    res, _ = resources(recorder)
    hops = _hops(
        ("Which company does Ada Voss work for?", "Kestrel Labs", "ada"),
        ("In which city is the headquarters of #1?", None, None),
    )
    cfg = Configuration(sub_question_answering="chain", incomplete_chain="read")
    everything = [doc(pid) for pid in ("ada", "kestrel", "velford", "banana")]
    state = make_state(evidence=everything, hops=hops)
    compressed = apply(state, compress_answer_evidence(state, res, cfg))
    # Whatever compression kept, every name of the question was in the evidence it judged.
    assert compressed["trace"][-1]["evidence_verdict"] is None
    compressed["evidence"] = [doc("velford")]  # as if it had dropped the named ones
    final = stop_answer(compressed, res, cfg)
    assert "does not mention" not in final.get("abstain_reason", "")


def test_a_chains_compression_keeps_the_passages_about_what_the_question_names() -> None:
    from dynakrag.state import Document

    res, _ = resources()
    question = "Which river flows through the birthplace of Tom Reyl?"
    hops = _hops(
        ("Where was Tom Reyl born?", None, None), ("Which river flows through #1?", None, None)
    )
    evidence = [
        Document(id="guide", title="River guide", text=f"{question} Tom Reyl's cousin asked."),
        Document(id="tom", title="Tom Reyl", text="He grew up by the sea."),
        doc("banana"),
    ]
    state = make_state(question=question, evidence=evidence, hops=hops)
    kept = [d["id"] for d in compress_answer_evidence(state, res, Configuration())["evidence"]]
    # Tom Reyl's own passage shares few of the question's words, yet it is about its name.
    assert kept == ["guide", "tom"]

"""The graph's prompts: which call is which, and the prefix the answer shares with the check."""

from __future__ import annotations

from langchain_core.messages import HumanMessage, SystemMessage

from dynakrag import prompts

PASSAGES = [
    {"title": "Ada Voss", "text": "Ada Voss was born in Lindholm."},
    {"title": "Lindholm", "text": "Lindholm is a port town on the Vell river."},
]
QUESTION = "On which river is the birthplace of Ada Voss?"
SUBS = ["Where was Ada Voss born?", "On which river is #1?"]


def test_each_graph_call_is_recognised_by_its_task() -> None:
    assert prompts.task_of(prompts.decompose_messages(QUESTION)) == prompts.DECOMPOSE
    check = prompts.sufficiency_messages(QUESTION, SUBS, PASSAGES)
    assert prompts.task_of(check) == prompts.SUFFICIENCY
    rewrite = prompts.rewrite_messages(QUESTION, QUESTION, PASSAGES)
    assert prompts.task_of(rewrite) == prompts.REWRITE
    answer = prompts.answer_messages(QUESTION, PASSAGES, [("Where was Ada Voss born?", "x")])
    assert prompts.task_of(answer) == prompts.ANSWER
    # LangChain messages too, and anything else is no graph call.
    as_messages = [SystemMessage(answer[0][1]), HumanMessage(answer[1][1])]
    assert prompts.task_of(as_messages) == prompts.ANSWER
    assert prompts.task_of(prompts.ircot_reason_messages(QUESTION, PASSAGES, [])) is None
    assert prompts.task_of([]) is None


def test_the_answer_prompt_extends_the_checks_system_and_passages() -> None:
    """A server that keeps the last prompt's KV cache re-reads only the answer's request."""
    check = prompts.sufficiency_messages(QUESTION, SUBS, PASSAGES)
    answer = prompts.answer_messages(QUESTION, PASSAGES, [("Where was Ada Voss born?", "x")])
    assert check[0] == answer[0]
    shared = prompts.format_passages(PASSAGES)
    assert check[1][1].startswith(shared)
    assert answer[1][1].startswith(shared)


def test_a_prompt_passage_is_what_the_state_and_the_baselines_hold() -> None:
    """The prompts' layer does not import the state's: :class:`~dynakrag.prompts.PromptPassage`
    fits :class:`~dynakrag.state.Document` and the baselines' evidence by shape, each of its
    keys held there as the same type."""
    from typing_extensions import get_type_hints

    from dynakrag.eval.methods.base import Evidence
    from dynakrag.state import Document

    shown = get_type_hints(prompts.PromptPassage)
    assert shown == {"title": str, "text": str}
    for holder in (Document, Evidence):
        held = get_type_hints(holder)
        assert {key: held[key] for key in shown} == shown, holder.__name__

"""The prompts of the graph's own calls: decomposition, sufficiency check, query rewrite,
final answer and grounding check, and :func:`task_of`, which tells them apart."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from dynakrag.prompts.passages import DATA_NOTICE, PromptPassage, few_shot_messages, format_passages

DECOMPOSE_SYSTEM = (
    "You split a question into the simplest sub-questions that must be answered in order. "
    "Each sub-question asks ONE fact about ONE named thing: never describe a thing by another "
    "fact (not 'the company where X works', not 'the founder of Y'); ask that fact first and "
    "refer to its answer. Keep every name from the question exactly as written. When a "
    "sub-question needs the answer of an earlier one, write #1, #2, ... for that answer. A "
    "question that asks one fact is one sub-question. Reply with JSON only: "
    '{"sub_questions": ["...", "..."]}.'
)

DECOMPOSE_EXAMPLES: tuple[tuple[str, list[str]], ...] = (
    (
        "Which university did the director of Harbor Lights attend?",
        ["Who directed Harbor Lights?", "Which university did #1 attend?"],
    ),
    (
        "Who was born earlier, Ada Voss or Tom Reyl?",
        ["When was Ada Voss born?", "When was Tom Reyl born?"],
    ),
    ("Who founded Orbis Devices?", ["Who founded Orbis Devices?"]),
    (
        "Who painted the mural in the library that Cora Quill designed?",
        ["Which library did Cora Quill design?", "Who painted the mural in #1?"],
    ),
    (
        "What language is spoken in the country where the author of Dust Roads was born?",
        [
            "Who wrote Dust Roads?",
            "In which country was #1 born?",
            "What language is spoken in #2?",
        ],
    ),
    (
        "Which mountain overlooks the home town of the coach of the team that Lena Ortiz plays "
        "for?",
        [
            "Which team does Lena Ortiz play for?",
            "Who coaches #1?",
            "What is the home town of #2?",
            "Which mountain overlooks #3?",
        ],
    ),
    (
        "Ines Carrow is employed by some studio. Name the year that studio opened.",
        ["Which studio employs Ines Carrow?", "In which year did #1 open?"],
    ),
    (
        "Are Blue Harbor and Night Train directed by the same person?",
        ["Who directed Blue Harbor?", "Who directed Night Train?"],
    ),
)
REWRITE_SYSTEM = (
    "You rewrite a search query so that it finds the missing evidence for a question. "
    + DATA_NOTICE
    + " Use names found in the passages when they help. Reply with the new query only, one line."
)

REWRITE_EXAMPLES: tuple[tuple[str, str, str], ...] = (
    (
        "Where was the director of Blue Harbor born?",
        "Blue Harbor is a 1998 film directed by Ines Carrow.",
        "Ines Carrow birthplace",
    ),
    (
        "Which company acquired the maker of the Lumen X2 phone?",
        "The Lumen X2 is a phone made by Orbis Devices.",
        "Orbis Devices acquired by company",
    ),
)

ANSWER_SYSTEM = (
    "You answer a question using only the given passages. "
    + DATA_NOTICE
    + " Reply with the shortest answer (a name, date, number, place or yes/no), no explanation. "
    "If the passages do not contain the answer, reply: insufficient evidence"
)
# The sufficiency check and the final answer read the same passages one after the other. The check
# therefore opens like the answer (the answer's system text, then the passages) and puts its own
# rules in the request, after the passages: the answer's prompt then starts with the check's, and
# a server that keeps its KV cache (llama.cpp) re-reads only the answer's request. A combined
# system text that held both tasks' rules was measured and made the small model reply in JSON
# to single questions (naive F1 0.235 on 20 HotpotQA eval questions), so the answer prompt stays
# exactly as it was.
SUFFICIENCY_TASK = (
    "Answer each sub-question below using only the passages above. For each sub-question give "
    "a short answer (a name, date, place or yes/no) that the passages state, or exactly UNKNOWN "
    "when they do not state it. Do not guess. Reply with JSON only: "
    '{"answers": ["...", "..."]}, one answer per sub-question, in order.'
)
SUFFICIENCY_REQUEST_END = "JSON:"
# One hop of the chain (dynakrag.actions.chain), asked alone over its entity's passages.
HOP_TASK = (
    "Answer the question below using only the passages above. Reply with JSON only: "
    '{"answer": "..."} with the shortest answer (a name, date, number, place or yes/no) as a '
    'passage states it, or {"answer": "UNKNOWN"} when no passage states it. Do not guess.'
)
# A yes/no hop ("Is Sutera a type of shrub?"): the passage about the entity rarely says "no" in
# so many words; it says what the entity is instead (a genus of flowering plants).
HOP_YES_NO_TASK = (
    "Answer the yes/no question below using only the passages above. Reply with JSON only: "
    '{"answer": "yes"} when a passage states it; {"answer": "no"} when a passage states '
    "something that rules it out (another kind of thing, another nationality, place, date or "
    'number); {"answer": "UNKNOWN"} when no passage says anything about it. Do not guess.'
)
HOP_REQUEST_END = "Answer JSON:"
# A hop gone through a smaller place ("born in the city of Rynford" for "In which country was
# X born?") is asked about that place: its own passage rarely names the person.
CONTAINING_PLACE_QUESTION = "In which {noun} is {place}?"
HOP_FACTS_TITLE = "found so far"
HOP_RULED_OUT = "These answers proved wrong; give another or UNKNOWN:"
ANSWER_REQUEST_END = "Answer:"

# Completion budgets sized to what each call returns (a runaway reply costs ~13 tokens/s here).
DECOMPOSE_MAX_TOKENS = 160
REWRITE_MAX_TOKENS = 32
HOP_MAX_TOKENS = 32
ANSWER_MAX_TOKENS = 48


def sufficiency_max_tokens(n_sub_questions: int) -> int:
    """Room for one short answer per sub-question in the JSON reply."""
    return 16 + 24 * max(1, n_sub_questions)


INSUFFICIENT_EVIDENCE = "insufficient evidence"
FACTS_TITLE = "facts found in the passages"
UNKNOWN = "UNKNOWN"


def decompose_messages(question: str) -> list[tuple[str, str]]:
    """Few-shot messages asking for the sub-questions of ``question``."""
    shots = (
        (f"Question: {example}", json.dumps({"sub_questions": parts}))
        for example, parts in DECOMPOSE_EXAMPLES
    )
    return few_shot_messages(DECOMPOSE_SYSTEM, shots, f"Question: {question}")


def hop_messages(
    question: str,
    passages: Sequence[PromptPassage],
    found: Sequence[str] = (),
    ruled_out: Sequence[str] = (),
    *,
    yes_no: bool = False,
) -> list[tuple[str, str]]:
    """Ask one hop's question over its passages; ``found`` are sentences the hop already went
    through (given as one more passage block); ``ruled_out`` are answers that proved wrong (a
    later hop found nothing about them); ``yes_no``: the hop asks yes or no."""
    blocks = list(passages)
    if found:
        blocks.append({"title": HOP_FACTS_TITLE, "text": " ".join(found)})
    excluded = f"{HOP_RULED_OUT} {'; '.join(ruled_out)}\n" if ruled_out else ""
    return [
        ("system", ANSWER_SYSTEM),
        (
            "human",
            f"{format_passages(blocks)}\n\n{HOP_YES_NO_TASK if yes_no else HOP_TASK}\n"
            f"{excluded}Question: {question}\n"
            f"{HOP_REQUEST_END}",
        ),
    ]


def sufficiency_messages(
    question: str | None, sub_questions: Sequence[str], passages: Sequence[PromptPassage]
) -> list[tuple[str, str]]:
    """Ask for an answer or UNKNOWN per sub-question, from the passages only.

    ``question`` (the main question) is given as context when set; one sub-question asked on
    its own goes without it, so the model answers that sub-question and not the main one.
    """
    numbered = "\n".join(f"{i}. {q}" for i, q in enumerate(sub_questions, start=1))
    main = f"Main question: {question}\n" if question is not None else ""
    return [
        ("system", ANSWER_SYSTEM),
        (
            "human",
            f"{format_passages(passages)}\n\n{SUFFICIENCY_TASK}\n{main}"
            f"Sub-questions:\n{numbered}\n\n{SUFFICIENCY_REQUEST_END}",
        ),
    ]


def rewrite_messages(
    question: str, query: str, passages: Sequence[PromptPassage]
) -> list[tuple[str, str]]:
    """Few-shot messages asking for a better search query."""
    messages: list[tuple[str, str]] = [("system", REWRITE_SYSTEM)]
    for example_question, example_passage, new_query in REWRITE_EXAMPLES:
        messages.append(
            (
                "human",
                f"{format_passages([{'title': '', 'text': example_passage}])}\n"
                f"Question: {example_question}\nCurrent query: {example_question}\nNew query:",
            )
        )
        messages.append(("ai", new_query))
    messages.append(
        (
            "human",
            f"{format_passages(passages)}\nQuestion: {question}\nCurrent query: {query}\n"
            "New query:",
        )
    )
    return messages


def answer_messages(
    question: str,
    passages: Sequence[PromptPassage],
    facts: Sequence[tuple[str, str]] = (),
) -> list[tuple[str, str]]:
    """Ask for the final short answer; ``facts`` are sub-answers already checked against the
    passages, given as intermediate steps."""
    blocks = list(passages)
    if facts:
        # Derived from the passages by the model, so it is data too: one more passage block.
        lines = "\n".join(f"- {sub} {answer}" for sub, answer in facts)
        blocks.append({"title": FACTS_TITLE, "text": lines})

    return [
        ("system", ANSWER_SYSTEM),
        ("human", f"{format_passages(blocks)}\n\nQuestion: {question}\n{ANSWER_REQUEST_END}"),
    ]


# The grounding check's one generator call (dynakrag.actions.grounding), made only when the
# answer's words are partly in the passages and no string match decides. It opens like the
# answer (the answer's system text, then the passages) so a server that keeps its KV cache
# re-reads only the request, and ends with its own marker so task_of tells it apart.
VERIFY_TASK = (
    "Check a proposed answer against the passages above. Reply with JSON only: "
    '{"supported": true} when the passages state that answer to the question, '
    '{"supported": false} when they do not state it or state something else. '
    "Do not use what you know beyond the passages."
)
VERIFY_REQUEST_END = "Verdict:"
VERIFY_MAX_TOKENS = 12


def verify_messages(
    question: str, answer: str, passages: Sequence[PromptPassage]
) -> list[tuple[str, str]]:
    """Ask whether the passages state ``answer`` to ``question`` (a JSON yes/no)."""
    return [
        ("system", ANSWER_SYSTEM),
        (
            "human",
            f"{format_passages(passages)}\n\n{VERIFY_TASK}\nQuestion: {question}\n"
            f"Proposed answer: {answer}\n{VERIFY_REQUEST_END}",
        ),
    ]


DECOMPOSE, SUFFICIENCY, REWRITE, ANSWER = "decompose", "sufficiency", "rewrite", "answer"
VERIFY = "verify"
HOP = "hop"


def _content(message: Any) -> str:
    """The text of a ``(role, text)`` pair or of a LangChain message."""
    return str(message[1] if isinstance(message, tuple) else getattr(message, "content", ""))


def task_of(messages: Sequence[Any]) -> str | None:
    """Which of the graph's calls ``messages`` is (``DECOMPOSE``, ``SUFFICIENCY``, ``REWRITE``,
    ``ANSWER``, ``VERIFY``, ``HOP``), or None for any other prompt. Scripted models and the eval
    tally use it: the sufficiency check, the answer and the grounding check share their system text;
    their requests end differently."""
    if not messages:
        return None
    system, request = _content(messages[0]), _content(messages[-1]).rstrip()
    if system == DECOMPOSE_SYSTEM:
        return DECOMPOSE
    if system == REWRITE_SYSTEM:
        return REWRITE
    if system == ANSWER_SYSTEM:
        if request.endswith(HOP_REQUEST_END):  # before SUFFICIENCY: both end with "JSON:"
            return HOP
        if request.endswith(SUFFICIENCY_REQUEST_END):
            return SUFFICIENCY
        if request.endswith(ANSWER_REQUEST_END):
            return ANSWER
        if request.endswith(VERIFY_REQUEST_END):
            return VERIFY
    return None

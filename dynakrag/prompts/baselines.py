"""The prompts of the baselines (:mod:`dynakrag.eval.methods`): IRCoT's reasoning step, the
heavy "reasoning" answer setting (also the routing generator's heavy tier) and DS-RAG's
LangChain-style multi-query decomposition baseline."""

from __future__ import annotations

from collections.abc import Sequence

from dynakrag.prompts.passages import DATA_NOTICE, PromptPassage, format_passages

IRCOT_SYSTEM = (
    "You reason step by step toward the answer of a multi-hop question, using only the given "
    "passages. "
    + DATA_NOTICE
    + " Write only the next sentence of reasoning: one short sentence that states a fact from "
    "the passages and names the entity to look up next. When the passages already answer the "
    "question, write: So the answer is: <answer>."
)

IRCOT_ANSWER_MARKER = "answer is"
"""A reasoning sentence containing this ends IRCoT's retrieve-and-reason loop."""


def ircot_reason_messages(
    question: str, passages: Sequence[PromptPassage], thoughts: Sequence[str]
) -> list[tuple[str, str]]:
    """Ask for the next chain-of-thought sentence (IRCoT, Trivedi et al. 2023)."""
    so_far = " ".join(thoughts) if thoughts else "(none yet)"
    return [
        ("system", IRCOT_SYSTEM),
        (
            "human",
            f"{format_passages(passages)}\n\nQuestion: {question}\nReasoning so far: {so_far}\n"
            "Next sentence:",
        ),
    ]


REASONING_ANSWER_SYSTEM = (
    "You answer a question using only the given passages. "
    + DATA_NOTICE
    + " First reason step by step in a few short sentences, each stating a fact from the "
    "passages that leads to the answer. Then write a last line of the form "
    "'Answer: <answer>' with the shortest answer (a name, date, number, place or yes/no). "
    "If the passages do not contain the answer, the last line is: Answer: insufficient evidence"
)
"""System prompt of the heavy "reasoning" setting (reason first, then ``Answer: ...``)."""


def reasoning_messages(question: str, passages: Sequence[PromptPassage]) -> list[tuple[str, str]]:
    """Messages of the heavy setting: reason over the passages, then ``Answer: ...``."""
    return [
        ("system", REASONING_ANSWER_SYSTEM),
        ("human", f"{format_passages(passages)}\n\nQuestion: {question}\nReasoning:"),
    ]


MULTI_QUERY_DECOMPOSE_SYSTEM = (
    "You are a helpful assistant that breaks an input question into sub-questions. The goal is "
    "to split the input into a set of sub-problems or sub-questions that can be answered in "
    'isolation. Reply with JSON only: {"sub_questions": ["...", "..."]}.'
)
"""The LangChain-style multi-query decomposition baseline of DS-RAG's Table 7 (free count)."""


def multi_query_decompose_messages(question: str) -> list[tuple[str, str]]:
    """Ask for sub-questions with no segmentation and no count (the Table 7 baseline)."""
    return [("system", MULTI_QUERY_DECOMPOSE_SYSTEM), ("human", f"Question: {question}\nJSON:")]

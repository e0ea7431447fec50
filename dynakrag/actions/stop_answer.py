"""stop_answer: end the run and write the final answer from the evidence."""

from __future__ import annotations

from typing import Any

from dynakrag import prompts
from dynakrag.actions.common import Resources, action_update, evidence_window
from dynakrag.actions.text import looks_like_value
from dynakrag.configuration import Configuration
from dynakrag.llm.answers import parse_final_answer
from dynakrag.state import State


def stop_answer(state: State, resources: Resources, cfg: Configuration) -> dict[str, Any]:
    """Answer from at most ``max_final_docs`` passages.

    Fallbacks: no evidence, or no usable reply, gives the last sub-question's answer when the
    sufficiency check found every part and that answer is an entity, else "insufficient
    evidence".
    """
    evidence = evidence_window(state, cfg)
    answer: str | None = None
    usage_kwargs: dict[str, Any] = {}
    if evidence:
        facts = [
            (sub["question"], sub["answer"])
            for sub in state.get("sub_questions", [])
            if sub.get("answer")
        ]
        reply, usage = resources.llm.text(
            prompts.answer_messages(state["question"], evidence, facts),
            max_tokens=prompts.ANSWER_MAX_TOKENS,
        )
        usage_kwargs["usage"] = usage
        answer = parse_final_answer(reply)
    fallback = answer is None
    if fallback:
        subs = state.get("sub_questions", [])
        last = subs[-1]["answer"] if subs and state.get("sufficient") else None
        # A chain's last sub-answer answers it; a bare value (a comparison's date) does not.
        answer = last if last and not looks_like_value(last) else prompts.INSUFFICIENT_EVIDENCE
    return action_update(
        state,
        "stop_answer",
        counts_as_step=False,
        details={"answer": answer, "fallback": fallback, "final_docs": len(evidence)},
        answer=answer,
        evidence=evidence,
        **usage_kwargs,
    )

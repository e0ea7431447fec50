"""The ``ircot`` method: IRCoT's fixed interleaving (Trivedi et al. 2023).

Retrieve with the question, write one reasoning sentence from the evidence, retrieve with that
sentence, ... until ``max_retrieval_calls`` retrievals were made or a sentence says "answer
is"; then answer. Every retrieval adds ``docs_per_action`` unseen passages.
"""

from __future__ import annotations

from dynakrag import prompts
from dynakrag.configuration import Configuration
from dynakrag.eval.methods.base import Evidence, Method, MethodResult, Tally, final_answer, retrieve
from dynakrag.llm.client import LLMClient
from dynakrag.retrieval.base import Searcher


def _first_sentence(reply: str | None) -> str:
    text = " ".join((reply or "").split())
    for prefix in ("Next sentence:", "Reasoning:"):
        if text.lower().startswith(prefix.lower()):
            text = text[len(prefix) :].strip()
    return text[:300]


class IRCoTMethod(Method):
    """Interleave retrieval with chain-of-thought sentences (fixed schedule), then answer."""

    name = "ircot"

    def run(
        self, question: str, searcher: Searcher, llm: LLMClient, cfg: Configuration
    ) -> MethodResult:
        tally = Tally()
        evidence: list[Evidence] = []
        thoughts: list[str] = []
        queries: list[str] = []
        actions: list[str] = []
        query = question
        for call in range(cfg.max_retrieval_calls):
            queries.append(query)
            seen = {doc["id"] for doc in evidence}
            evidence += retrieve(searcher, query, cfg.docs_per_action, cfg.frontier_depth, seen)
            tally.add(retrievals=1)
            actions.append("retrieve")
            if call == cfg.max_retrieval_calls - 1:
                break  # a sentence after the last retrieval could not be used for searching
            reply, usage = llm.text(
                prompts.ircot_reason_messages(question, evidence[: cfg.max_final_docs], thoughts)
            )
            tally.add(usage)
            actions.append("reason")
            sentence = _first_sentence(reply)
            if sentence:
                thoughts.append(sentence)
            if prompts.IRCOT_ANSWER_MARKER in sentence.lower():
                break
            # Documented fallback: no usable sentence pages deeper into the question's ranking.
            query = sentence or question
        window = evidence[: cfg.max_final_docs]
        prediction = final_answer(self, question, window, llm, tally, actions)
        return tally.result(prediction, window, actions, reasoning=thoughts, queries=queries)

"""The ``naive`` method: one retrieval of the top ``k`` passages (default 5) for the question,
then the answer (with the ``abstain`` setting, under the graph's grounding check:
:func:`~dynakrag.eval.methods.base.grounded_answer`)."""

from __future__ import annotations

from typing import Any

from dynakrag.configuration import Configuration
from dynakrag.errors import UserInputError
from dynakrag.eval.methods.base import Method, MethodResult, Tally, grounded_answer, retrieve
from dynakrag.llm.client import LLMClient
from dynakrag.retrieval.base import Searcher


class NaiveMethod(Method):
    """Retrieve the top ``k`` passages for the question once, then answer."""

    name = "naive"

    def __init__(self, *, no_answer: bool = False, k: int = 5) -> None:
        super().__init__(no_answer=no_answer)
        if k < 1:
            raise UserInputError(f"k must be >= 1, got {k}")
        self.k = k

    def options(self) -> dict[str, Any]:
        return {**super().options(), "k": self.k}

    def run(
        self, question: str, searcher: Searcher, llm: LLMClient, cfg: Configuration
    ) -> MethodResult:
        tally = Tally()
        evidence = retrieve(searcher, question, self.k, self.k)
        tally.add(retrievals=1)
        actions = ["retrieve"]
        prediction, verdict = grounded_answer(self, question, evidence, llm, tally, actions, cfg)
        return tally.result(prediction, evidence, actions, verdict)

"""The hand-made world of the routing tests: a corpus of eight cities, the queries routed
over it, thresholds set by hand, and a fake chat model whose replies carry log-probs (in
ChatOpenAI's format) that say how sure it is."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from pydantic import Field

from dynakrag.retrieval.passage import Passage
from dynakrag.routing.thresholds import PercentileThresholds

# "city" is in every passage, "river" in most; each name is in exactly one.
CORPUS = [
    Passage("zan", "Zanzibar", "Zanzibar is a city on an island with a river."),
    Passage("quo", "Quokka Town", "Quokka Town is a city near the river delta."),
    Passage("oslo", "Oslo", "Oslo is a city and the capital of Norway, on a river."),
    Passage("lima", "Lima", "Lima is a city and the capital of Peru, by a river."),
    Passage("rome", "Rome", "Rome is an old city on the river Tiber."),
    Passage("kyiv", "Kyiv", "Kyiv is a city on the river Dnipro."),
    Passage("bern", "Bern", "Bern is a small city, the federal seat of Switzerland."),
    Passage("gent", "Gent", "Gent is a city in Flanders with a harbour and canals."),
]


def idf_thresholds(p25: float, p50: float, p75: float) -> PercentileThresholds:
    """Avg-IDF thresholds set by hand (lower avg IDF is harder)."""
    return PercentileThresholds("avg_idf", (p25, p50, p75), (25.0, 50.0, 75.0), "lower")


def median(value: float, kind: str = "answer") -> PercentileThresholds:
    """A one-cut perplexity threshold set by hand (higher perplexity is harder)."""
    return PercentileThresholds(f"{kind}_perplexity", (value,), (50.0,), "higher")


QUERIES = [
    "Zanzibar Quokka",
    "Oslo Norway",
    "capital of Peru",
    "old city Tiber",
    "city on a river",
    "city",
    "the of",
]


Respond = Callable[[list[BaseMessage]], tuple[str, list[float] | None]]


class LogprobChat(BaseChatModel):
    """Replies ``respond(messages) -> (text, logprobs)``; logprobs go into
    ``response_metadata["logprobs"]`` in ChatOpenAI's format (omitted when ``None``)."""

    respond: Respond
    calls: list[str] = Field(default_factory=list)

    @property
    def _llm_type(self) -> str:
        return "logprob-fake"

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        self.calls.append(str(messages[0].content))
        text, logprobs = self.respond(messages)
        metadata: dict[str, Any] = {}
        if logprobs is not None:
            metadata["logprobs"] = {
                "content": [{"token": f"t{i}", "logprob": v} for i, v in enumerate(logprobs)]
            }
        usage = {"input_tokens": 10, "output_tokens": len(text) // 4 + 1, "total_tokens": 11}
        message = AIMessage(content=text, response_metadata=metadata, usage_metadata=usage)
        return ChatResult(generations=[ChatGeneration(message=message)])


def reader(*, with_logprobs: bool = True, cut_off: bool = False) -> LogprobChat:
    """Confident (log-prob -0.1) on fluent passages, unsure (-3.0) when one says "nonsense";
    the reasoning prompt gets a reason-then-answer reply (without its answer line when
    ``cut_off``)."""

    def respond(messages: list[BaseMessage]) -> tuple[str, list[float] | None]:
        prompt = str(messages[-1].content)
        unsure = "nonsense" in prompt
        if "reason step by step" in str(messages[0].content):
            if cut_off:
                return "Oslo is the capital of Norway.\nSo the", None
            return "Oslo is the capital of Norway.\nAnswer: Oslo", None
        logprobs = [-3.0, -3.0] if unsure else [-0.1, -0.1]
        return ("Bergen" if unsure else "Oslo"), (logprobs if with_logprobs else None)

    return LogprobChat(respond=respond)


FLUENT = [{"title": "Oslo", "text": "Oslo is the capital of Norway."}]
NONSENSE = [{"title": "Oslo", "text": "nonsense marmalade whisk galloped quarterly."}]

"""The chain tests' shared world: a few fictional passages, a scripted model that plans and
answers hops from them, and a chain-mode graph over them."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping

from langchain_core.messages import BaseMessage

from dynakrag import build_graph, prompts
from dynakrag.configuration import Configuration
from dynakrag.llm.client import LLMClient
from dynakrag.llm.fake import ScriptedChatModel
from dynakrag.retrieval.passage import Passage
from tests.fakes import KeywordSearcher, passages_in

PASSAGES = [
    Passage(
        "p-ada",
        "Ada Voss",
        "Ada Voss is an engineer who works at Selkthorn Robotics. Ada Voss was born in 1970 in "
        "the city of Ambelstead. She enjoys sailing.",
    ),
    Passage(
        "c-selk",
        "Selkthorn Robotics",
        "Selkthorn Robotics is a robotics company. Selkthorn Robotics was founded in 1990 by "
        "Ilsa Marr. The headquarters of Selkthorn Robotics is in the city of Quarstead.",
    ),
    Passage(
        "c-selkmoor",
        "Selkmoor Appliances",
        "Selkmoor Appliances is an appliance company. Selkmoor Appliances was founded in 1981 by "
        "Tom Reyl. The headquarters of Selkmoor Appliances is in the city of Prynmere.",
    ),
    Passage(
        "p-ilsa",
        "Ilsa Marr",
        "Ilsa Marr is an entrepreneur. Ilsa Marr was born in 1955 in the city of Prynvale.",
    ),
    Passage(
        "p-tom",
        "Tom Reyl",
        "Tom Reyl is an entrepreneur. Tom Reyl was born in 1948 in the city of Ambelwyn.",
    ),
    Passage(
        "city-prynvale",
        "Prynvale",
        "Prynvale is a city in the country of Vardonia. The river Dunara flows through Prynvale.",
    ),
]


def hop_responder(
    plans: Mapping[str, list[str]], facts: Mapping[str, str], *, reads: str = "yes"
) -> ScriptedChatModel:
    """Plans questions as ``plans`` says; answers a hop with ``facts[hop]`` when the passages it
    was shown hold that answer (else UNKNOWN); the reader answers ``reads``."""

    def respond(messages: list[BaseMessage]) -> str:
        kind = prompts.task_of(messages)
        last = str(messages[-1].content)
        if kind == prompts.DECOMPOSE:
            question = last.rsplit("Question: ", 1)[1].strip()
            return json.dumps({"sub_questions": plans.get(question, [question])})
        if kind == prompts.HOP:
            question = re.findall(r"Question: (.*)", last)[-1].strip()
            answer = facts.get(question, "UNKNOWN")
            shown = passages_in(last)
            return json.dumps({"answer": answer if answer in shown else "UNKNOWN"})
        if kind == prompts.ANSWER:
            return reads
        raise AssertionError(f"unexpected prompt {kind}")

    return ScriptedChatModel(respond=respond)


def graph_for(model: ScriptedChatModel, **settings: object):
    cfg = Configuration(
        **{
            "sub_question_answering": "chain",
            "max_steps": 16,
            "max_retrieval_calls": 10,
            **settings,
        }
    )
    return build_graph(KeywordSearcher(PASSAGES), configuration=cfg, llm=LLMClient(model))

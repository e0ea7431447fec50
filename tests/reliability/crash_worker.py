"""Run demo questions forever, logging every step to a trajectory log; the crash-safety test
kills this process with SIGKILL while it writes.

Usage: ``python -m tests.reliability.crash_worker LOG TAG``
"""

from __future__ import annotations

import itertools
import sys
import time

from langchain_core.messages import BaseMessage

from dynakrag.data.demo import demo_passages
from dynakrag.graph.builder import build_graph
from dynakrag.llm.fake import ScriptedChatModel
from dynakrag.training import open_trajectory_log
from tests.fakes import KeywordSearcher, demo_responder
from tests.joint import joint_configuration
from tests.reliability.support import demo_answers, demo_corpus


def main(path: str, tag: str) -> None:
    corpus = demo_corpus()
    inner = demo_responder(demo_answers(corpus))

    def respond(messages: list[BaseMessage]) -> str:
        time.sleep(0.001)  # a model takes a while: kills land inside runs as well
        return inner(messages)

    saver = open_trajectory_log(path)
    graph = build_graph(
        KeywordSearcher(demo_passages(corpus)),
        ScriptedChatModel(respond=respond),
        configuration=joint_configuration(),  # the scripted reader answers the joint check
        checkpointer=saver,
    )
    for number in itertools.count():
        question = corpus.questions[number % len(corpus.questions)]
        config = {"configurable": {"thread_id": f"{tag}-{number:05d}"}}
        graph.invoke({"question": question.question}, config)
        print(number, flush=True)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])

"""The walk of one decision through the code: controller -> validity -> policy -> action -> state.

Runs the graph on a demo-world question with the tests' scripted reader and traces (with
``sys.setprofile``) the calls that enter a dynakrag module from another one, from the second
controller step to the third: one decision and the action it chose. Calls are followed down to
``--depth`` dynakrag frames below the graph's node functions (or LangGraph itself). A *stay* is
one entry into a module (consecutive entries into the same module count once), a *room* one
module, a *return* an entry into a module the walk was in before. Fewer stays and returns mean
a newcomer follows a decision through fewer files and back-and-forths.

    .venv/bin/python benchmarks/decision_walk.py            # prints the walk and its counts
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from types import FrameType
from typing import Any

_REPO = Path(__file__).resolve().parent.parent
if str(_REPO) not in sys.path:
    sys.path.insert(0, str(_REPO))  # tests.fakes: the scripted reader

import dynakrag  # noqa: E402

PACKAGE = os.path.dirname(dynakrag.__file__)
NODE_FUNCTIONS = ("controller", "node")


def _module(frame: FrameType | None) -> str | None:
    if frame is None or not frame.f_code.co_filename.startswith(PACKAGE):
        return None
    return os.path.relpath(frame.f_code.co_filename, PACKAGE).removesuffix(".py")


def _depth(frame: FrameType) -> int | None:
    """Dynakrag frames between ``frame`` and the node function above it; 0 for a function
    LangGraph calls itself; None outside a node."""
    depth, current = 0, frame
    while current is not None:
        module = _module(current)
        if module == "graph/builder" and current.f_code.co_name in NODE_FUNCTIONS:
            return depth
        if module is not None:
            depth += 1
        current = current.f_back
    return 0 if _module(frame.f_back) is None else None


def trace_decision(max_depth: int = 3) -> list[tuple[str, str, int]]:
    """``(module, function, depth)`` of each stay of the second decision of a demo question."""
    from dynakrag import build_graph
    from dynakrag.configuration import Configuration
    from dynakrag.data.demo_corpus import generate_demo_corpus
    from dynakrag.llm.client import LLMClient
    from dynakrag.retrieval.passage import Passage
    from tests.fakes import KeywordSearcher, demo_chat_model

    corpus = generate_demo_corpus(7)
    question = corpus.questions[0]
    graph = build_graph(
        KeywordSearcher([Passage(p["id"], p["title"], p["text"]) for p in corpus.passages]),
        configuration=Configuration(),
        llm=LLMClient(demo_chat_model({question.question: question.answer})),
    )
    entries: list[tuple[str, str, int]] = []

    def profile(frame: FrameType, event: str, arg: Any) -> None:
        module = _module(frame)
        if event != "call" or module is None:
            return
        depth = _depth(frame)
        if depth is None or depth > max_depth:
            return
        if _module(frame.f_back) != module or depth == 0:
            entries.append((module, frame.f_code.co_name, depth))

    sys.setprofile(profile)
    try:
        graph.invoke({"question": question.question})
    finally:
        sys.setprofile(None)
    starts = [i for i, e in enumerate(entries) if e[:2] == ("graph/builder", "controller")]
    walk: list[tuple[str, str, int]] = []
    for entry in entries[starts[1] : starts[2]]:
        if not walk or walk[-1][0] != entry[0]:
            walk.append(entry)
    return walk


def counts(walk: list[tuple[str, str, int]]) -> dict[str, int]:
    rooms: list[str] = []
    returns = 0
    for module, _, _ in walk:
        if module in rooms:
            returns += 1
        else:
            rooms.append(module)
    return {"stays": len(walk), "rooms": len(rooms), "returns": returns}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--depth", type=int, default=3)
    args = parser.parse_args(argv)
    walk = trace_decision(args.depth)
    for module, function, depth in walk:
        print(f"{'  ' * depth}{module}.{function}")
    found = counts(walk)
    print(f"depth <= {args.depth}: {found['stays']} stays in {found['rooms']} rooms, "
          f"{found['returns']} returns")  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

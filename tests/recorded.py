"""Decisions of the shipped learned policy and selections of the shipped DICS selector on fixed
inputs, recorded once so that a reshaping of the code can show it changed neither.

``python -m tests.recorded`` rewrites ``tests/data/recorded_decisions.json`` from the current
code; ``tests/unit/test_recorded_decisions.py`` recomputes the same values and compares.
Inputs are generated here (the demo world, scripted model, keyword retriever; made-up DS-RAG
style questions and passages), so no dataset is needed.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from tests.joint import JOINT

RECORD_FILE = Path(__file__).parent / "data" / "recorded_decisions.json"
POLICY_SETTINGS: tuple[dict[str, Any], ...] = (
    # The joint check at the paper's budget: the defaults the first records were taken with.
    JOINT,
    {**JOINT, "cost_lambda": 0.3},
    {**JOINT, "max_steps": 2, "docs_per_action": 2},
    # The default configuration: the chain, hop by hop.
    {},
)
N_DEMO_QUESTIONS = 8

SELECTION_CASES: tuple[dict[str, Any], ...] = (
    {
        "question": "Who's born date is the earliest, among Ada Lovelace, Alan Turing and "
        "Grace Hopper?",
        "sub_questions": [
            "When was Ada Lovelace born?",
            "When was Alan Turing born?",
            "When was Grace Hopper born?",
        ],
    },
    {
        "question": "Is nationality of Marie Curie and Albert Einstein the same?",
        "sub_questions": [
            "What is the nationality of Marie Curie?",
            "What is the nationality of Albert Einstein?",
        ],
    },
    {
        "question": "Which of Lise Meitner, Emmy Noether and Rosalind Franklin was born last?",
        "sub_questions": [],
    },
)
SELECTION_PASSAGES: tuple[tuple[str, str], ...] = (
    ("p1", "Ada Lovelace was born on 10 December 1815 in London, England."),
    ("p2", "Alan Turing was born on 23 June 1912 in Maida Vale, London."),
    ("p3", "Grace Hopper was born on December 9, 1906, in New York City."),
    ("p4", "Marie Curie was a Polish and naturalised-French physicist and chemist."),
    ("p5", "Albert Einstein was a German-born theoretical physicist, later a Swiss citizen."),
    ("p6", "Lise Meitner was born on 7 November 1878 in Vienna, Austria."),
    ("p7", "Emmy Noether was born on 23 March 1882 in Erlangen, Bavaria."),
    ("p8", "Rosalind Franklin was born on 25 July 1920 in Notting Hill, London."),
    ("p9", "London is the capital city of England and the United Kingdom."),
    ("p10", "The Analytical Engine was a proposed mechanical general-purpose computer."),
    ("p11", "Turing's work at Bletchley Park helped break the Enigma cipher."),
    ("p12", "Hopper developed the first compiler, the A-0 system."),
)


def policy_decisions() -> list[dict[str, Any]]:
    """Every step the shipped learned policy takes on the demo questions, per setting."""
    from dynakrag.configuration import Configuration
    from dynakrag.data.demo import demo_passages
    from dynakrag.data.demo_corpus import generate_demo_corpus
    from dynakrag.graph.builder import build_graph
    from tests.fakes import KeywordSearcher, demo_chat_model

    corpus = generate_demo_corpus(7)
    questions = corpus.questions[:N_DEMO_QUESTIONS]
    answers = {q.question: q.answer for q in questions}
    searcher = KeywordSearcher(list(demo_passages(corpus)))
    runs = []
    for setting in POLICY_SETTINGS:
        graph = build_graph(
            searcher,
            demo_chat_model(answers),
            policy="learned",
            # The record holds the answers written before abstention existed; with it on the
            # decisions are the same and only the "insufficient evidence" answers become "".
            configuration=Configuration(**setting, abstain=False),
        )
        for q in questions:
            result = graph.invoke({"question": q.question})
            runs.append(
                {
                    "setting": setting,
                    "question": q.question,
                    "steps": [
                        {
                            "action": entry["action"],
                            "valid_actions": entry.get("valid_actions", []),
                            "scores": entry.get("scores", {}),
                        }
                        for entry in result["trace"]
                    ],
                    "answer": result["answer"],
                }
            )
    return runs


def selector_selections() -> list[dict[str, Any]]:
    """The shipped GS selector's choice per criterion (rule extraction, no model calls)."""
    from dynakrag.configuration import Configuration
    from dynakrag.dsrag.pipeline import select_context

    cfg = Configuration(dsrag_extraction="rules", compression="dics")
    selections = []
    for case in SELECTION_CASES:
        chosen = select_context(
            case["question"], case["sub_questions"], SELECTION_PASSAGES, None, cfg
        )
        selections.append({"question": case["question"], "selected": list(chosen.selected_ids)})
    return selections


def current() -> dict[str, Any]:
    """The values the current code gives on the recorded inputs (JSON-normalised)."""
    return json.loads(json.dumps({"policy": policy_decisions(), "selector": selector_selections()}))


if __name__ == "__main__":
    RECORD_FILE.parent.mkdir(parents=True, exist_ok=True)
    RECORD_FILE.write_text(json.dumps(current(), indent=1, sort_keys=True) + "\n")
    print(f"wrote {RECORD_FILE}", file=sys.stderr)

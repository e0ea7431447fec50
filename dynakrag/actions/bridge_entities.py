"""Bridge entities: names the evidence revealed that the question does not mention.

They are what a multi-hop question hinges on (the director of the film, the city of the
company); ``bridge_entity_expand`` searches for them one at a time.
"""

from __future__ import annotations

import re
from typing import Any

from dynakrag.actions.text import STOP_NAMES, looks_like_value
from dynakrag.state import Document, State

_PROPER_NAME = re.compile(r"\b(?:[A-Z][\w'’-]+)(?:\s+(?:of|de|van|von|the|and)?\s*[A-Z][\w'’-]+)+")


def detect_bridge_entities(
    question: str,
    evidence: list[Document],
    sub_questions: list[Any],
    limit: int = 8,
) -> list[str]:
    """Entities named in the evidence (or answered sub-questions) but not in the question.

    Candidates are answers of sub-questions first, then multi-word proper names in the evidence
    ranked by how many passages mention them; names that already title an evidence passage are
    left out, since their document is already here.
    """
    question_lower = question.lower()
    titles = {doc.get("title", "").lower() for doc in evidence}
    ordered: list[str] = []

    def consider(name: str) -> None:
        name = name.strip(" .,;:'\"")
        words = name.split()
        while words and words[0] in STOP_NAMES:
            words = words[1:]
        name = " ".join(words)
        low = name.lower()
        if len(name) < 3 or low in question_lower or low in titles:
            return
        if any(low == existing.lower() for existing in ordered):
            return
        ordered.append(name)

    for sub in sub_questions:
        answer = sub.get("answer") if isinstance(sub, dict) else None
        if answer and answer.strip() and not looks_like_value(answer):
            consider(answer)
    mentions: dict[str, int] = {}
    first_seen: dict[str, int] = {}
    for position, doc in enumerate(evidence):
        for match in set(_PROPER_NAME.findall(doc.get("text", ""))):
            mentions[match] = mentions.get(match, 0) + 1
            first_seen.setdefault(match, position)
    for name in sorted(mentions, key=lambda n: (-mentions[n], first_seen[n], n)):
        consider(name)
    return ordered[:limit]


def pending_bridge_entities(state: State) -> list[str]:
    """Detected bridge entities that have not been expanded yet."""
    expanded = {entity.lower() for entity in state.get("expanded_entities", [])}
    return [e for e in state.get("bridge_entities", []) if e.lower() not in expanded]

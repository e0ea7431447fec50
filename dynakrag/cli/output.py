"""What the answering commands print: one block per graph step while it runs, JSON at the end."""

from __future__ import annotations

import json
from typing import Any, TextIO


def stream_run(graph: Any, question: str, out: TextIO | None) -> dict[str, Any]:
    """Run the graph, printing each action as it completes; return the final state."""
    final: dict[str, Any] = {}
    for mode, chunk in graph.stream({"question": question}, stream_mode=["updates", "values"]):
        if mode == "values":
            final = chunk
            continue
        for node, update in chunk.items():
            if node == "prepare" or out is None:
                continue  # prepare resets the trace; only action nodes add steps
            for entry in (update or {}).get("trace", []):
                print(format_step(entry), file=out, flush=True)
    return final


def format_step(entry: dict[str, Any]) -> str:
    """One printed line per action: the action, the valid set, the scores, what was added."""
    scores = ", ".join(f"{a}={s:.2f}" for a, s in entry.get("scores", {}).items())
    if not scores:  # a fixed edge (after compression): nothing was scored
        scores = ", ".join(entry.get("valid_actions", []))
    line = f"[{entry['step']}] {entry['action']}  valid: {{{scores}}}"
    if entry.get("search_query"):
        line += f"\n    query: {entry['search_query']}"
    if entry.get("added"):
        line += f"\n    added: {', '.join(entry['added'])}"
    if entry["action"] == "sufficiency_check":
        verdict = "sufficient" if entry.get("sufficient") else f"gaps: {entry.get('gaps')}"
        line += f"\n    {verdict}"
    return line


def to_json(state: dict[str, Any]) -> str:
    """The final state as indented JSON; values JSON cannot hold are written as strings."""
    jsonable = json.loads(json.dumps(state, default=str))
    return json.dumps(jsonable, ensure_ascii=False, indent=2)

"""What the answering commands print: one block per graph step while it runs, JSON at the end."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any, TextIO, cast

from dynakrag.state import State, TraceEntry


def stream_run(
    graph: Any,
    question: str,
    out: TextIO | None,
    config: dict[str, Any] | None = None,
    *,
    explain: bool = False,
) -> State:
    """Run the graph (with ``config``: e.g. a logged run's thread), printing each action as it
    completes (with ``explain``, also why it was chosen); return the final state."""
    final = cast(State, {})
    stream = graph.stream({"question": question}, config, stream_mode=["updates", "values"])
    for mode, chunk in stream:
        if mode == "values":
            final = chunk
            continue
        for node, update in chunk.items():
            if node == "prepare" or out is None:
                continue  # prepare resets the trace; only action nodes add steps
            for entry in (update or {}).get("trace", []):
                print(format_step(entry, explain=explain), file=out, flush=True)
    return final


def format_step(entry: TraceEntry, *, explain: bool = False) -> str:
    """One printed line per action: the action, the valid set, the scores, what was added;
    with ``explain``, the decision's explanation lines (:func:`dynakrag.policy.explain.describe`:
    what drove the choice, the rule behind each blocked action, budget and lambda)."""
    scores = ", ".join(f"{a}={s:.2f}" for a, s in entry.get("scores", {}).items())
    if not scores:  # a fixed edge (after compression): nothing was scored
        scores = ", ".join(entry.get("valid_actions", []))
    line = f"[{entry['step']}] {entry['action']}  valid: {{{scores}}}"
    if entry.get("search_query"):
        line += f"\n    query: {entry['search_query']}"
    if entry.get("added"):
        line += f"\n    added: {', '.join(entry['added'])}"
    if entry["action"] == "sufficiency_check":
        if entry.get("plan"):
            line += f"\n    plan: {' | '.join(entry['plan'])}"
        for asked in entry.get("hops_asked") or []:
            answer = asked.get("answer") or "UNKNOWN"
            hop, verdict = asked["hop"], asked["verdict"]
            line += f"\n    hop {hop}: {asked['question']} -> {answer} ({verdict})"
        verdict = "sufficient" if entry.get("sufficient") else f"gaps: {entry.get('gaps')}"
        line += f"\n    {verdict}"
    if entry["action"] == "stop_answer" and entry.get("abstained"):
        line += f"\n    abstained: {entry.get('abstain_reason')}"
    elif entry["action"] == "stop_answer" and entry.get("answer_citations"):
        line += f"\n    cites: {', '.join(entry['answer_citations'])}"
    if explain and entry.get("explanation"):
        from dynakrag.policy.explain import describe

        lines = describe(entry["explanation"], with_lambda=entry.get("step") == 1)
        line += "".join(f"\n    {text}" for text in lines)
    return line


def answer_line(final: State) -> str:
    """The last line of ``ask`` and ``demo``: ``Answer: ...``, or ``No answer: <reason>`` when
    the run abstained (setting ``abstain``; the exit code stays 0: abstaining is an outcome,
    not an error)."""
    if final.get("abstained"):
        return f"No answer: {final.get('abstain_reason') or 'the evidence does not support one'}"
    return f"Answer: {final.get('answer', '')}"


def explanation_lines(trace: Sequence[TraceEntry]) -> list[dict[str, Any]]:
    """Per trace entry: its step, action and the readable lines of its explanation."""
    from dynakrag.policy.explain import describe

    return [
        {
            "step": entry.get("step"),
            "action": entry.get("action"),
            "lines": describe(entry.get("explanation") or {}),
        }
        for entry in trace
    ]


def to_json(state: Mapping[str, Any]) -> str:
    """The final state (and what ``ask --json`` adds to it) as indented JSON; values JSON
    cannot hold are written as strings."""
    jsonable = json.loads(json.dumps(state, default=str))
    return json.dumps(jsonable, ensure_ascii=False, indent=2)

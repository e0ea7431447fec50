"""What a collection cost and what it left out, question by question, with a running ETA.

:func:`~dynakrag.training.collect.collect` tells a :class:`CollectionReport` about every
question it finishes (seconds, what the model really spent, requests answered from the
per-question memo, records) or leaves out (and why). With a ``stream`` the report prints one
line a question: the questions done of the total, the seconds per question so far and the ETA
(seconds per question so far x questions left), so a collection run in the background says
when it will end. ``summary()`` is the closing paragraph of ``dynakrag collect``; ``to_dict()``
the numbers of the collection-cost benchmark.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import IO, Any

from dynakrag.data.datasets import QAExample
from dynakrag.llm.client import NO_USAGE, Usage

__all__ = ["CollectionReport", "format_duration"]


def format_duration(seconds: float) -> str:
    """``42 s``, ``7 min 05 s``, ``3 h 12 min``."""
    seconds = max(0.0, seconds)
    if seconds < 60:
        return f"{seconds:.0f} s"
    minutes, secs = divmod(round(seconds), 60)
    if minutes < 60:
        return f"{minutes} min {secs:02d} s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes:02d} min"


@dataclass
class CollectionReport:
    """Running totals of one collection (see the module docstring).

    ``total``: questions this run is to do (for the ETA); ``done_before``: questions a resumed
    collection had already finished (counted in the progress line, not in the costs).
    """

    total: int | None = None
    done_before: int = 0
    stream: IO[str] | None = None
    questions: int = 0
    records: int = 0
    seconds: float = 0.0
    """Collecting time of the collected questions (building a searcher excluded)."""
    spent: Usage = NO_USAGE
    """What the model really answered for the collected questions (memo hits excluded)."""
    memo_hits: int = 0
    left_out: list[tuple[str, str, str]] = field(default_factory=list)
    """``(dataset, example_id, reason)`` of each question left out."""
    left_out_seconds: float = 0.0

    def collected(
        self, example: QAExample, seconds: float, spent: Usage, memo_hits: int, records: int
    ) -> None:
        """A question finished with ``records`` records."""
        self.questions += 1
        self.records += records
        self.seconds += seconds
        self.spent += spent
        self.memo_hits += memo_hits
        self._progress(f"{example.id}: {seconds:.1f} s, {spent.llm_calls} LLM calls")

    def leave_out(self, example: QAExample, reason: str, seconds: float = 0.0) -> None:
        """A question left out of the collection, why, and the ``seconds`` it took."""
        self.left_out.append((example.dataset, example.id, reason))
        self.left_out_seconds += seconds
        self._progress(f"{example.id} left out: {reason}")

    @property
    def processed(self) -> int:
        return self.questions + len(self.left_out)

    @property
    def seconds_per_question(self) -> float | None:
        """Seconds per question processed so far (a left-out question's time counts too;
        building an index does not)."""
        if not self.processed:
            return None
        return (self.seconds + self.left_out_seconds) / self.processed

    def eta_seconds(self) -> float | None:
        """Seconds per question so far x questions left (None before the first or without a
        total)."""
        per = self.seconds_per_question
        if per is None or self.total is None:
            return None
        return per * max(0, self.total - self.processed)

    def _progress(self, what: str) -> None:
        if self.stream is None:
            return
        done = self.done_before + self.processed
        of = f"/{self.done_before + self.total}" if self.total is not None else ""
        per, eta = self.seconds_per_question, self.eta_seconds()
        timing = f", {per:.1f} s/question" if per is not None else ""
        timing += f", ETA {format_duration(eta)}" if eta is not None else ""
        self.stream.write(f"collecting: {done}{of} questions{timing} ({what})\n")
        self.stream.flush()

    def per_question(self) -> dict[str, float | None]:
        """Mean seconds, LLM calls, prompt and completion tokens and memo hits per collected
        question."""
        n = self.questions
        if not n:
            return dict.fromkeys(
                ("seconds", "llm_calls", "prompt_tokens", "completion_tokens", "memo_hits")
            )
        return {
            "seconds": self.seconds / n,
            "llm_calls": self.spent.llm_calls / n,
            "prompt_tokens": self.spent.prompt_tokens / n,
            "completion_tokens": self.spent.completion_tokens / n,
            "memo_hits": self.memo_hits / n,
        }

    def to_dict(self) -> dict[str, Any]:
        return {
            "questions": self.questions,
            "records": self.records,
            "seconds": self.seconds,
            "llm_calls": self.spent.llm_calls,
            "prompt_tokens": self.spent.prompt_tokens,
            "completion_tokens": self.spent.completion_tokens,
            "memo_hits": self.memo_hits,
            "per_question": self.per_question(),
            "left_out": [
                {"dataset": d, "example_id": q, "reason": why} for d, q, why in self.left_out
            ],
        }

    def summary(self) -> str:
        """A few lines for the end of ``dynakrag collect``."""
        per = self.per_question()
        lines = [
            f"Collected {self.questions} questions ({self.records} records) in "
            f"{format_duration(self.seconds)}"
        ]
        if self.questions:
            lines[0] += (
                f": {per['seconds']:.1f} s, {per['llm_calls']:.1f} LLM calls, "
                f"{per['prompt_tokens']:.0f} prompt tokens a question "
                f"({per['memo_hits']:.1f} requests a question answered from the memo)"
            )
        if self.left_out:
            lines.append(f"Left out {len(self.left_out)} questions:")
            lines += [f"  {d} {q}: {why}" for d, q, why in self.left_out]
        else:
            lines.append("Left out: none")
        return "\n".join(lines)

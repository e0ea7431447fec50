"""benchmarks/chain_causes.py without a model or data: a missed question is put down to the
first hop that left the gold path, read from its journal."""

from __future__ import annotations

from typing import Any

from tests.benchmark_scripts import benchmark_module


def _gold(bench: Any) -> list[Any]:
    return [
        bench.GoldHop("q", 0, "Ada Voss employer", "Ada Voss", "p-ada", "Zeta Corp"),
        bench.GoldHop("q", 1, "Zeta Corp founder", "Zeta Corp", "p-zeta", "Tom Reyl"),
    ]


def _hop(status: str, answer: str | None, passage: str | None, **more: Any) -> dict[str, Any]:
    return {"status": status, "answer": answer, "passage": passage, "asked": [], **more}


def test_the_first_hop_off_the_gold_path_names_the_cause() -> None:
    with benchmark_module("chain_causes") as bench:
        gold = _gold(bench)
        right = _hop("resolved", "Zeta Corp", "p-ada")

        def cause(*hops: dict[str, Any]) -> tuple[str, str]:
            return bench.question_cause({"details": {"hops": list(hops)}}, gold)

        assert cause(right, _hop("resolved", "Ilsa Brand", "p-other")) == (
            "",
            "hop 2: wrong answer (other passage)",
        )
        assert cause(right, _hop("failed", None, None, rejected=[])) == (
            "",
            "hop 2: passage not found",
        )
        turned_down = _hop("failed", None, None, asked=["p-zeta"], rejected=["Tom Reyl: why"])
        assert cause(right, turned_down)[1] == "hop 2: right answer turned down"
        assert cause(right, _hop("resolved", "Tom Reyl", "p-zeta")) == (
            "",
            "hops right, final answer wrong",
        )
        assert cause(_hop("resolved", "Zeta", "p-ada")) == (
            "plan: 1 hops for 2",
            "plan stops before the last gold hop",
        )

"""benchmarks/runstore.RunStore: whole runs through the one executor and resume rule."""

from __future__ import annotations

from pathlib import Path

from tests.benchmark_scripts import benchmark_module


def test_a_finished_run_is_read_back_not_computed_again(tmp_path: Path) -> None:
    computed: list[str] = []

    def compute(key: str):
        def run() -> dict[str, object]:
            computed.append(key)
            return {"key": key, "score": len(computed)}

        return run

    key = "graph / hotpotqa: λ=0.5"  # characters a file name cannot keep
    with benchmark_module("runstore") as runstore:
        first = runstore.RunStore(tmp_path, 2, "t", quiet=True)
        assert first.run(key, compute(key)) == {"key": key, "score": 1}
        again = runstore.RunStore(tmp_path, 2, "t", quiet=True)
        assert key in again.done
        assert again.run(key, compute(key)) == {"key": key, "score": 1}
        assert again.run("other", compute("other"))["score"] == 2
    assert computed == [key, "other"]
    assert len(list(tmp_path.glob("*.json"))) == 2

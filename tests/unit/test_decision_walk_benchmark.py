"""benchmarks/decision_walk.py: one decision is traced from the controller to the state."""

from __future__ import annotations

from tests.benchmark_scripts import benchmark_module


def test_one_decision_walks_controller_validity_policy_action_state() -> None:
    with benchmark_module("decision_walk") as walk_module:
        walk = walk_module.trace_decision(3)
        found = walk_module.counts(walk)
    modules = [module for module, _, _ in walk]
    assert modules[0] == "graph/builder" and modules[-1] == "state"
    order = [modules.index(m) for m in ("graph/controller", "graph/validity", "policy/base")]
    assert order == sorted(order) and "graph/nodes" in modules
    assert found["stays"] == len(walk) and found["rooms"] == len(set(modules))

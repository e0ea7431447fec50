"""The architecture: no import cycle between modules of ``dynakrag``, counting imports inside
functions too (a deferred import hides a cycle from the interpreter, not from the design).

The layers contract itself is ``[tool.importlinter]`` in pyproject.toml, checked by
``make lint``; this test keeps ``make test`` failing on a cycle even without it.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import grimp
import pytest


def import_cycles(package: str) -> list[list[str]]:
    """The import cycles among ``package``'s modules: strongly connected components of more
    than one module (Tarjan, iterative), each sorted. Imports under ``TYPE_CHECKING`` never
    run and are left out; imports inside functions count."""
    graph = grimp.build_graph(package, cache_dir=None, exclude_type_checking_imports=True)
    edges = {
        module: sorted(graph.find_modules_directly_imported_by(module)) for module in graph.modules
    }
    return _strongly_connected(edges)


def _strongly_connected(edges: dict[str, list[str]]) -> list[list[str]]:
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []
    for root in sorted(edges):
        if root in index:
            continue
        work: list[tuple[str, Iterable[str]]] = [(root, iter(edges[root]))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, successors = work[-1]
            for successor in successors:
                if successor not in edges:
                    continue  # outside the package
                if successor not in index:
                    index[successor] = low[successor] = len(index)
                    stack.append(successor)
                    on_stack.add(successor)
                    work.append((successor, iter(edges[successor])))
                    break
                if successor in on_stack:
                    low[node] = min(low[node], index[successor])
            else:
                work.pop()
                if work:
                    parent = work[-1][0]
                    low[parent] = min(low[parent], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        components.append(sorted(component))
    return sorted(components)


def test_dynakrag_has_no_import_cycle() -> None:
    cycles = import_cycles("dynakrag")
    assert not cycles, "import cycles:\n" + "\n".join(" <-> ".join(c) for c in cycles)


def test_a_cycle_closed_inside_a_function_is_found(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    package = tmp_path / "cyclic_example"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "low.py").write_text(
        "def later():\n    from cyclic_example import high\n\n    return high\n"
    )
    (package / "high.py").write_text("from cyclic_example import low\n")
    # A type-only import back never runs: not a cycle.
    (package / "user.py").write_text("from cyclic_example import typed\n")
    (package / "typed.py").write_text(
        "from typing import TYPE_CHECKING\n\n"
        "if TYPE_CHECKING:\n    from cyclic_example import user\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    assert import_cycles("cyclic_example") == [["cyclic_example.high", "cyclic_example.low"]]

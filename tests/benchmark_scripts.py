"""The scripts under ``benchmarks/`` imported as modules, for their tests."""

from __future__ import annotations

import contextlib
import importlib.util
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"


@contextlib.contextmanager
def benchmark_module(script: str) -> Iterator[ModuleType]:
    """``benchmarks/<script>.py`` imported as a module for the duration of the block (in
    ``sys.modules`` meanwhile: its dataclasses look their module up there)."""
    name = f"{script}_benchmark"
    spec = importlib.util.spec_from_file_location(name, BENCHMARKS / f"{script}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
        yield module
    finally:
        sys.modules.pop(name, None)

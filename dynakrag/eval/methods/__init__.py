"""The methods an evaluation compares, behind one small interface.

:mod:`~dynakrag.eval.methods.base` holds the interface (``Method.run(question, searcher, llm,
cfg) -> MethodResult``) and what the methods share; each method family has its own module:
:mod:`~dynakrag.eval.methods.naive`, :mod:`~dynakrag.eval.methods.ircot`,
:mod:`~dynakrag.eval.methods.decompose` (DecomposeRAG), :mod:`~dynakrag.eval.methods.dynakrag`
(the graph under a policy, with ablations and the gold-aware oracle) and
:mod:`~dynakrag.eval.methods.dsrag` (DS-RAG and its paper's baselines).
:mod:`~dynakrag.eval.methods.registry` lists them by name.
"""

from dynakrag.eval.methods.base import Method, MethodResult
from dynakrag.eval.methods.registry import METHODS, get_method

__all__ = ["METHODS", "Method", "MethodResult", "get_method"]

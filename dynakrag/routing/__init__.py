"""DRAG routing: per-query choice of the retriever and of the generator.

:mod:`~dynakrag.routing.retriever`
    Average IDF of the query picks one of four retriever tiers (:class:`RoutedSearcher`).
:mod:`~dynakrag.routing.generator`
    Perplexity after retrieval picks the generator tier (:class:`GeneratorRouter`), among
    the tiers of :mod:`~dynakrag.routing.generator_tiers`; the signals are
    :mod:`~dynakrag.routing.perplexity`'s, the context's from
    :mod:`~dynakrag.routing.prompt_logprobs`.
:mod:`~dynakrag.routing.thresholds`
    The percentile cut points both signals are routed by (:class:`PercentileThresholds`).
:mod:`~dynakrag.routing.decisions`
    The decision record and log both routers keep (:class:`RoutingDecision`).
:mod:`~dynakrag.routing.factory`
    Every searcher built by name, ``routed`` included (:func:`build_searcher`).
"""

from dynakrag.routing.decisions import DecisionLog, RoutingDecision
from dynakrag.routing.factory import RETRIEVERS, build_searcher
from dynakrag.routing.generator import GeneratorRouter, RoutedGeneration
from dynakrag.routing.generator_tiers import GeneratorTier, default_generator_tiers
from dynakrag.routing.perplexity import fit_perplexity_thresholds
from dynakrag.routing.prompt_logprobs import PromptLogprobScorer
from dynakrag.routing.retriever import (
    TIER_NAMES,
    DecomposeSearcher,
    QueryDifficulty,
    RetrieverTiers,
    RoutedSearcher,
    build_tiers,
    fit_idf_thresholds,
)
from dynakrag.routing.thresholds import PercentileThresholds

__all__ = [
    "RETRIEVERS",
    "TIER_NAMES",
    "DecisionLog",
    "DecomposeSearcher",
    "GeneratorRouter",
    "GeneratorTier",
    "PercentileThresholds",
    "PromptLogprobScorer",
    "QueryDifficulty",
    "RetrieverTiers",
    "RoutedGeneration",
    "RoutedSearcher",
    "RoutingDecision",
    "build_searcher",
    "build_tiers",
    "default_generator_tiers",
    "fit_idf_thresholds",
    "fit_perplexity_thresholds",
]

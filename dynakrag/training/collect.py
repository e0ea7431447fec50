"""Collect labelled transitions for the learned controller from training questions.

For every training example, ``rollouts`` exploration rollouts run from the initial state:
epsilon-greedy over the valid set A(s) around a behaviour policy (the heuristic by default),
seeded per (seed, example, rollout). From every state a rollout visits, each valid action is
also run once on a copy of the state (``branch=True``), so every action there has a labelled
outcome. States are identified by their action history, so a state reached by several
rollouts is expanded (and recorded) once. ``stop_answer`` is never executed: no final answer is
generated during collection, it is labelled by support recall alone; a rollout ends when it
chooses ``stop_answer`` or after ``compress_answer_evidence``.

Labels use the example's gold support (``QAExample.gold_sets``) and are computed outside the
state, which never holds gold. With SR = :func:`dynakrag.eval.metrics.support_recall` of the
ids of the state's evidence:

* acquisition actions: ``SR(s') - SR(s)``
* ``sufficiency_check``: 1.0 when ``SR(s) == 1``, else 0.0
* ``stop_answer``: ``SR(s)``
* ``compress_answer_evidence``: ``SR(s')`` (the coverage the compression keeps)

and the continuation label of a state: the best SR reached later in a rollout through it minus
``SR(s)`` (the maximum over the rollouts that visited it; 0 for a state where every visiting
rollout stopped).

Record schema (one JSON object a line, ``RECORD_SCHEMA``)::

    schema          "dynakrag-transition/1"
    source          "collect" (this module) or "log" (records_from_transitions)
    example_id      the question's id (the thread id for a log)
    dataset, split  where the question comes from (only "train" rows are collected)
    step            actions taken before this state (0 at the initial state)
    history         those actions, in order (identifies the state within the example)
    feature_version FEATURE_SCHEMA_VERSION of ``features``
    features        featurize(s, action): list of len(FEATURE_NAMES) floats; its first
                    N_STATE_FEATURES entries are state_features(s)
    valid           A(s), the valid actions at s
    action          the action the record labels
    label           v(s, action) as defined above
    sr_before       SR(s)
    sr_after        SR(s') (SR(s) for stop_answer, which is not run)
    continuation    the continuation label of s (same in every record of s)
    chosen          whether a rollout took this action from s
    executed        whether the action ran (false for stop_answer)
    deltas          {retrieval_calls, llm_calls, prompt_tokens, completion_tokens} it spent
"""

from __future__ import annotations

import os
import random
import sys
import zlib
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from langchain_core.language_models import BaseChatModel

from dynakrag.actions.common import Resources
from dynakrag.configuration import Configuration
from dynakrag.data.datasets import QAExample
from dynakrag.errors import UserInputError
from dynakrag.eval.metrics import state_support_recall
from dynakrag.files import read_jsonl
from dynakrag.graph.replay import initial_state, step
from dynakrag.graph.validity import valid_actions
from dynakrag.llm.client import LLMClient
from dynakrag.policy.base import Policy
from dynakrag.policy.features import FEATURE_SCHEMA_VERSION, featurize
from dynakrag.retrieval.base import Searcher
from dynakrag.retrieval.passage import Passage
from dynakrag.state import ACQUISITION_ACTIONS, State

__all__ = [
    "COUNTERS",
    "RECORD_SCHEMA",
    "collect",
    "demo_examples",
    "distractor_searcher_factory",
    "label",
    "read_records",
    "records_from_transitions",
]

RECORD_SCHEMA = "dynakrag-transition/1"
COUNTERS: tuple[str, ...] = ("retrieval_calls", "llm_calls", "prompt_tokens", "completion_tokens")
GoldItems = Sequence[str | frozenset[str] | Iterable[str]]


def label(action: str, sr_before: float, sr_after: float) -> float:
    """v(s, a) for training, from SR(s) and SR(s') (see the module docstring)."""
    if action in ACQUISITION_ACTIONS:
        return sr_after - sr_before
    if action == "sufficiency_check":
        return 1.0 if sr_before >= 1.0 else 0.0
    if action == "stop_answer":
        return sr_before
    if action == "compress_answer_evidence":
        return sr_after
    raise ValueError(f"unknown action {action!r}")


# --------------------------------------------------------------------------------------------
# Searchers and examples


def distractor_searcher_factory(
    retriever: str = "bm25", embeddings: Any = None
) -> Callable[[QAExample], Searcher]:
    """Per-example searchers over the example's own passages (the distractor setting).

    ``retriever`` is one of :data:`~dynakrag.routing.factory.RETRIEVERS`, built by
    :func:`~dynakrag.routing.factory.build_searcher` (MiniLM unless ``embeddings`` is given,
    created once for all examples). DS-RAG examples, which have no passages of their own,
    search the chunked DS-RAG corpus (indexed once).
    """
    from dynakrag.routing.factory import RETRIEVERS, build_searcher, needs_embeddings

    if retriever not in RETRIEVERS:
        raise UserInputError(
            f"unknown retriever {retriever!r}; choose one of {', '.join(RETRIEVERS)}"
        )
    shared: dict[str, Searcher] = {}

    def build(passages: Sequence[Passage]) -> Searcher:
        nonlocal embeddings
        if embeddings is None and needs_embeddings(retriever):
            from dynakrag.retrieval.embeddings import default_embeddings

            embeddings = default_embeddings()  # one model for every example
        return build_searcher(retriever, passages, embeddings=embeddings)

    def factory(example: QAExample) -> Searcher:
        if example.passages:
            return build(example.passages)
        if "dsrag" not in shared:
            from dynakrag.data.datasets import dsrag_corpus

            shared["dsrag"] = build(dsrag_corpus())
        return shared["dsrag"]

    return factory


def demo_examples(seed: int = 7) -> list[QAExample]:
    """The generated demo corpus's questions as training examples over the whole corpus."""
    from dynakrag.data.demo import demo_passages
    from dynakrag.data.demo_corpus import generate_demo_corpus

    corpus = generate_demo_corpus(seed)
    passages = tuple(demo_passages(corpus))
    return [
        QAExample(
            id=q.id,
            question=q.question,
            answers=(q.answer,),
            support=tuple(q.support),
            passages=passages,
            dataset="demo",
            row=row,
            split="train",
            meta={"kind": q.kind, "hops": q.hops},
        )
        for row, q in enumerate(corpus.questions)
    ]


# --------------------------------------------------------------------------------------------
# Collection


@dataclass
class _Outcome:
    state: State | None  # None for stop_answer (never run)
    sr_after: float
    deltas: dict[str, int]


@dataclass
class _Node:
    history: tuple[str, ...]
    state: State
    sr: float
    valid: list[str]
    outcomes: dict[str, _Outcome] = field(default_factory=dict)
    chosen: set[str] = field(default_factory=set)
    continuation: float = 0.0


def _rng(seed: int, example_id: str, rollout: int) -> random.Random:
    return random.Random(zlib.crc32(f"{seed}|{example_id}|{rollout}".encode()))


def _client(llm: LLMClient | BaseChatModel) -> LLMClient:
    return llm if isinstance(llm, LLMClient) else LLMClient(llm)


def collect(
    examples: Iterable[QAExample],
    searcher_factory: Callable[[QAExample], Searcher] | None,
    llm: LLMClient | BaseChatModel,
    cfg: Configuration,
    *,
    epsilon: float = 0.3,
    seed: int = 13,
    branch: bool = True,
    progress: bool = True,
    rollouts: int = 2,
    behaviour: Policy | None = None,
) -> Iterator[dict[str, Any]]:
    """Labelled records (see the module docstring), example by example.

    ``searcher_factory(example)`` gives the searcher of an example (default: BM25 over its
    own passages). Raises :class:`UserInputError` for an ``eval`` example: collection is
    training. Examples without gold support are skipped.
    """
    if not 0.0 <= epsilon <= 1.0:
        raise UserInputError(f"epsilon must be in [0, 1], got {epsilon}")
    if rollouts < 1:
        raise UserInputError(f"rollouts must be >= 1, got {rollouts}")
    if behaviour is None:
        from dynakrag.policy.heuristic import HeuristicPolicy

        behaviour = HeuristicPolicy()
    factory = searcher_factory or distractor_searcher_factory("bm25")
    client = _client(llm)
    items = examples if not progress else _progress(examples)
    for example in items:
        if example.split == "eval":
            raise UserInputError(
                f"example {example.id!r} is an eval row: collection is training, use train rows"
            )
        gold = example.gold_sets
        if not gold:
            continue
        resources = Resources(searcher=factory(example), llm=client)
        nodes = _explore(example, gold, resources, cfg, behaviour, epsilon, seed, branch, rollouts)
        yield from _records(example, nodes, cfg)


def _progress(examples: Iterable[QAExample]) -> Iterator[QAExample]:
    from dynakrag.progress import progress_bar

    total = len(examples) if isinstance(examples, Sequence) else None
    yield from progress_bar(
        examples, total=total, desc="collecting", unit="question", file=sys.stderr
    )


def _explore(
    example: QAExample,
    gold: GoldItems,
    resources: Resources,
    cfg: Configuration,
    behaviour: Policy,
    epsilon: float,
    seed: int,
    branch: bool,
    rollouts: int,
) -> dict[tuple[str, ...], _Node]:
    """Run the rollouts of one example; the visited states with their outcomes and labels."""
    root = initial_state(example.question, cfg)
    nodes: dict[tuple[str, ...], _Node] = {}

    def node_for(history: tuple[str, ...], state: State) -> _Node:
        if history not in nodes:
            nodes[history] = _Node(
                history, state, state_support_recall(state, gold), valid_actions(state, cfg)
            )
        return nodes[history]

    def outcome(node: _Node, action: str) -> _Outcome:
        if action not in node.outcomes:
            if action == "stop_answer":
                node.outcomes[action] = _Outcome(None, node.sr, dict.fromkeys(COUNTERS, 0))
            else:
                after = step(node.state, action, resources, cfg, policy=behaviour)
                node.outcomes[action] = _Outcome(
                    after,
                    state_support_recall(after, gold),
                    {c: int(after.get(c, 0)) - int(node.state.get(c, 0)) for c in COUNTERS},
                )
        return node.outcomes[action]

    for rollout in range(rollouts):
        rng = _rng(seed, example.id, rollout)
        history: tuple[str, ...] = ()
        state = root
        path: list[_Node] = []
        final_sr: float | None = None
        while True:
            node = node_for(history, state)
            if not node.valid:
                break
            path.append(node)
            if rng.random() < epsilon:
                choice = rng.choice(node.valid)
            else:
                choice = behaviour.choose(node.state, node.valid, cfg)
                if choice not in node.valid:
                    choice = node.valid[0]
            for action in node.valid if branch else [choice]:
                outcome(node, action)
            node.chosen.add(choice)
            if choice == "stop_answer":
                break
            taken = node.outcomes[choice]
            if choice == "compress_answer_evidence":
                final_sr = taken.sr_after
                break
            assert taken.state is not None
            history, state = (*history, choice), taken.state
        srs = [n.sr for n in path] + ([final_sr] if final_sr is not None else [])
        for index, visited in enumerate(path):
            later = max(srs[index + 1 :], default=visited.sr)
            visited.continuation = max(visited.continuation, later - visited.sr)
    return nodes


def _records(
    example: QAExample, nodes: Mapping[tuple[str, ...], _Node], cfg: Configuration
) -> Iterator[dict[str, Any]]:
    for node in nodes.values():
        for action in node.valid:
            if action not in node.outcomes:
                continue
            result = node.outcomes[action]
            yield {
                "schema": RECORD_SCHEMA,
                "source": "collect",
                "example_id": example.id,
                "dataset": example.dataset,
                "split": example.split,
                "step": len(node.history),
                "history": list(node.history),
                "feature_version": FEATURE_SCHEMA_VERSION,
                "features": featurize(node.state, action, cfg).tolist(),
                "valid": list(node.valid),
                "action": action,
                "label": label(action, node.sr, result.sr_after),
                "sr_before": node.sr,
                "sr_after": result.sr_after,
                "continuation": node.continuation,
                "chosen": action in node.chosen,
                "executed": result.state is not None,
                "deltas": dict(result.deltas),
            }


# --------------------------------------------------------------------------------------------
# Logged runs


def records_from_transitions(
    transitions: Iterable[Any],
    gold_by_question: Mapping[str, GoldItems],
    cfg: Configuration | None = None,
    *,
    dataset: str = "log",
    split: str = "train",
) -> list[dict[str, Any]]:
    """Records from logged ``Transition``s (``read_transitions``) of questions with known gold.

    ``gold_by_question`` maps a question (as the state holds it) to its gold support.
    Transitions of other questions are skipped, and so is a ``stop_answer`` reached by the
    fixed edge after compression (no decision). The run's actual next state gives ``sr_after``;
    each decision has one record (``chosen`` true) and no branches; ``example_id`` is the
    thread id. ``split`` must be ``"train"``.
    """
    if split != "train":
        raise UserInputError("records of logged runs are training data: split must be 'train'")
    cfg = cfg or Configuration()
    runs: list[list[Any]] = []
    for transition in transitions:
        start = not (transition.state.get("trace") or [])
        same = runs and runs[-1][-1].thread_id == transition.thread_id
        if start or not same:
            runs.append([])
        runs[-1].append(transition)
    records: list[dict[str, Any]] = []
    for run in runs:
        question = run[0].state.get("question")
        gold = gold_by_question.get(question) if isinstance(question, str) else None
        if not gold:
            continue
        srs = [state_support_recall(t.state, gold) for t in run]
        srs.append(state_support_recall(run[-1].next_state, gold))
        for index, transition in enumerate(run):
            history = [e["action"] for e in transition.state.get("trace") or []]
            if transition.action == "stop_answer" and history[-1:] == ["compress_answer_evidence"]:
                continue
            sr_before, sr_after = srs[index], srs[index + 1]
            if transition.action == "stop_answer":
                sr_after = sr_before
            deltas = {
                c: int(transition.next_state.get(c, 0)) - int(transition.state.get(c, 0))
                for c in COUNTERS
            }
            records.append(
                {
                    "schema": RECORD_SCHEMA,
                    "source": "log",
                    "example_id": transition.thread_id,
                    "dataset": dataset,
                    "split": split,
                    "step": len(history),
                    "history": history,
                    "feature_version": FEATURE_SCHEMA_VERSION,
                    "features": featurize(transition.state, transition.action, cfg).tolist(),
                    "valid": list(transition.state.get("valid_actions") or []),
                    "action": transition.action,
                    "label": label(transition.action, sr_before, sr_after),
                    "sr_before": sr_before,
                    "sr_after": sr_after,
                    "continuation": max(0.0, max(srs[index + 1 :]) - sr_before),
                    "chosen": True,
                    "executed": True,
                    "deltas": deltas,
                }
            )
    return records


# --------------------------------------------------------------------------------------------
# Files


def read_records(paths: str | os.PathLike[str] | Iterable[str | os.PathLike[str]]) -> list[dict]:
    """The transition records of one or more JSONL files (written with
    :func:`dynakrag.files.write_jsonl`); UserInputError naming file and line if one is bad."""
    return read_jsonl(paths, schema=RECORD_SCHEMA, what="trajectories")

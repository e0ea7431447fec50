"""Collect labelled transitions for the learned controller from training questions.

For every training example, ``rollouts`` exploration rollouts run from the initial state:
epsilon-greedy over the valid set A(s) around a behaviour policy (the heuristic by default),
seeded per (seed, example, rollout). From every state a rollout visits, each valid action is
also labelled (``branch=True``): run once on a copy of the state where its label needs its
outcome, so every action there has a label. States are identified by their action history, so
a state reached by several rollouts is expanded (and recorded) once. A rollout ends when it
chooses ``stop_answer`` or after ``compress_answer_evidence``.

Labels use the example's gold support (``QAExample.gold_sets``) and, for the answer labels,
its gold answers; they are computed outside the state, which never holds gold. With SR =
:func:`dynakrag.eval.metrics.support_recall` of the ids of a state's evidence, ``labels``
chooses (:data:`~dynakrag.training.labelling.LABELS`):

``"recall"`` (the default; the paper's labels, label version 1): no answer is generated.

* acquisition actions: ``SR(s') - SR(s)`` (the support they fetched)
* ``sufficiency_check``: ``1`` when ``SR(s) == 1`` (the evidence already covers the gold
  support), else ``0``
* ``stop_answer``: ``SR(s)`` (stopping is worth the coverage reached)
* ``compress_answer_evidence``: ``SR(s')`` (the coverage the compressed evidence keeps)

and the continuation label of a state: the best SR reached later in a rollout through it
minus ``SR(s)``. Neither ``stop_answer`` nor a ``sufficiency_check`` no rollout chooses is run
(their labels read only ``SR(s)``: ``executed`` is false, ``deltas`` zero); a check a rollout
chooses runs, as the rollout goes on from its state.

``"answer"`` (label version 2 for the answer actions): with F1(s) the answer F1
(:func:`~dynakrag.eval.metrics.f1_score` against the gold answers) of the answer the graph's
own answer step (``stop_answer``, run through the graph's checkpoints by
:class:`~dynakrag.graph.replay.Branches`) writes from
state s, every branch of an answer action is answered:

* acquisition actions: ``SR(s') - SR(s)``
* ``stop_answer``: ``F1(s)`` (the answer is right or not: the branch stops here)
* ``compress_answer_evidence``: ``F1(s')`` (the answer written from the compressed evidence)
* ``sufficiency_check``: ``F1(s')`` (the answer written after the check, which adds the
  sub-answers it found)

and the continuation label: the best answer F1 reached later in a rollout through the state
minus F1 of stopping now (the maximum over the rollouts that visited it, never below 0; F1 is
0 where stopping is not valid yet), so the continuation model learns when stopping is safe.
Each answer is generated once per state (shared between a stop branch, the check or
compression that led to the state, and the continuation label).

``"visited-answer"``: answers only at the states the rollouts visit (one answer per visited
state, not per branch): ``stop_answer`` and the continuation as for ``"answer"``, and a check
or compression a rollout chooses by the answer at the state it leads to; a check or
compression no rollout chooses keeps its recall label (label version 1).

Cost: the model requests of one question go through a :class:`RequestMemo`, so a request sent
from several states (a rewrite from a state and from the same state after a check, the
question's decomposition) is asked once (``memo=False`` asks every time; the records are the
same either way); a :class:`CollectionReport` receives each question's seconds, model spend
and memo hits, and each question left out with its reason.

The records' format is :mod:`dynakrag.training.records`'s. The outcomes, labels and records of
the visited states are :mod:`dynakrag.training.labelling`'s (shared with the logged runs of
:mod:`dynakrag.training.logged_runs`); the searchers are :mod:`dynakrag.training.searchers`'.
"""

from __future__ import annotations

import logging
import random
import sys
import time
import zlib
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import replace
from typing import Any

from langchain_core.language_models import BaseChatModel

from dynakrag.actions.common import Resources
from dynakrag.configuration import Configuration
from dynakrag.data.datasets import QAExample
from dynakrag.data.demo import DEMO_SEED, EVALUATION_WORLD_SEEDS, TRAINING_WORLD_SEEDS
from dynakrag.errors import UserInputError
from dynakrag.eval.metrics import state_support_recall
from dynakrag.graph.replay import Branches
from dynakrag.graph.validity import valid_actions
from dynakrag.llm.client import LLMClient
from dynakrag.policy.base import Policy
from dynakrag.retrieval.base import Searcher
from dynakrag.state import State
from dynakrag.training.collection_report import CollectionReport
from dynakrag.training.labelling import (
    ANSWER_ACTIONS,
    LABELS,
    AnsweredStates,
    GoldItems,
    Outcome,
    StateNode,
    node_records,
    raise_continuation,
    run_outcome,
    stop_f1,
    unrun_outcome,
)
from dynakrag.training.records import TransitionFields
from dynakrag.training.reply_memo import RequestMemo
from dynakrag.training.searchers import distractor_searcher_factory

logger = logging.getLogger(__name__)

__all__ = ["collect", "demo_examples", "training_world_examples"]


def training_world_examples(seeds: Sequence[int] = TRAINING_WORLD_SEEDS) -> list[QAExample]:
    """The questions of the generated demo worlds of ``seeds`` as training examples, each over
    its own world's passages, ids prefixed with the world ("w1101-q-hq-00"). Raises
    :class:`UserInputError` for a world that measures (:data:`EVALUATION_WORLD_SEEDS`)."""
    measured = sorted(set(seeds) & set(EVALUATION_WORLD_SEEDS))
    if measured:
        raise UserInputError(
            f"demo world seed(s) {', '.join(map(str, measured))} are for measuring, not training"
        )
    examples = [
        replace(example, id=f"w{seed}-{example.id}", meta={**example.meta, "world_seed": seed})
        for seed in seeds
        for example in demo_examples(seed)
    ]
    return [replace(example, row=row) for row, example in enumerate(examples)]


def demo_examples(seed: int = DEMO_SEED) -> list[QAExample]:
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
    collection: Mapping[str, Any] | None = None,
    labels: str = "recall",
    memo: bool = True,
    report: CollectionReport | None = None,
) -> Iterator[TransitionFields]:
    """Labelled records (see the module docstring), example by example.

    ``searcher_factory(example)`` gives the searcher of an example (default: BM25 over its
    own passages). Raises :class:`UserInputError` for an ``eval`` example: collection is
    training. Examples without gold support are left out, and so are examples during which a
    model request failed (logged as an error: their labels would read the failure as a wrong
    answer; a resumed collection runs them again); ``report`` counts both, with the reason.
    ``collection`` (the settings that produced the records, e.g. seed and retriever) is
    copied into every record, so a resumed collection can check that it continues the same
    one. ``labels``: one of :data:`LABELS`; ``memo``: answer a repeated request of a question
    from memory (:class:`RequestMemo`).
    """
    if not 0.0 <= epsilon <= 1.0:
        raise UserInputError(f"epsilon must be in [0, 1], got {epsilon}")
    if rollouts < 1:
        raise UserInputError(f"rollouts must be >= 1, got {rollouts}")
    if labels not in LABELS:
        raise UserInputError(f"unknown labels {labels!r}; choose one of {', '.join(LABELS)}")
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
            if report is not None:
                report.leave_out(example, "no gold support to label with")
            continue
        searcher = factory(example)  # building an index is not the question's cost
        started = time.perf_counter()
        asking = RequestMemo(client, remember=memo)
        resources = Resources(searcher=searcher, llm=asking)
        failed = client.failed_requests
        nodes = _explore(
            example, gold, resources, cfg, behaviour, epsilon, seed, branch, rollouts, labels
        )
        if client.failed_requests > failed:
            # A failed request reads as "no answer" and would mislabel: leave the question out.
            logger.error(
                "question %s left out: a model request failed (%s); a rerun collects it",
                example.id,
                client.last_error,
            )
            if report is not None:
                why = f"a model request failed ({client.last_error})"
                report.leave_out(example, why, time.perf_counter() - started)
            continue
        records = list(
            node_records(example, nodes, cfg, collection=collection, answers=labels != "recall")
        )
        if report is not None:
            seconds = time.perf_counter() - started
            report.collected(example, seconds, asking.spent, asking.hits, len(records))
        yield from records


def _progress(examples: Iterable[QAExample]) -> Iterator[QAExample]:
    from dynakrag.progress import progress_bar

    total = len(examples) if isinstance(examples, Sequence) else None
    yield from progress_bar(
        examples, total=total, desc="collecting", unit="question", file=sys.stderr
    )


def _runs(action: str, chosen: bool, labels: str) -> bool:
    """Whether collecting ``labels`` runs ``action`` (``chosen``: a rollout takes it)."""
    if labels == "answer":
        return True
    if action == "stop_answer":
        return labels == "visited-answer"  # the answer at a visited state
    if action == "sufficiency_check":
        return chosen  # the rollout goes on from the state it leads to
    return True


def _answers_after(action: str, chosen: bool, labels: str) -> bool:
    """Whether collecting ``labels`` writes the answer right after ``action``."""
    if labels == "answer":
        return True
    return labels == "visited-answer" and chosen and action in ANSWER_ACTIONS


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
    labels: str = "answer",
) -> dict[tuple[str, ...], StateNode]:
    """Run the rollouts of one example; the visited states with their outcomes and labels
    (``labels``: one of :data:`LABELS`)."""
    branches = Branches(resources, cfg, policy=behaviour)
    root = branches.start(example.question)
    nodes: dict[tuple[str, ...], StateNode] = {}
    answered: AnsweredStates = {}
    answers = example.answers if labels != "recall" else ()

    def node_for(history: tuple[str, ...], state: State) -> StateNode:
        if history not in nodes:
            nodes[history] = StateNode(
                history, state, state_support_recall(state, gold), valid_actions(state, cfg)
            )
        return nodes[history]

    def outcome(node: StateNode, action: str, chosen: bool) -> Outcome:
        if not _runs(action, chosen, labels):
            return node.outcomes.setdefault(action, unrun_outcome(node))
        return run_outcome(
            node,
            action,
            branches,
            gold,
            answers=answers,
            answered=answered,
            answer_after=_answers_after(action, chosen, labels),
        )

    for rollout in range(rollouts):
        rng = _rng(seed, example.id, rollout)
        history: tuple[str, ...] = ()
        state = root
        path: list[StateNode] = []
        final: Outcome | None = None  # the compression that ended the rollout
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
                outcome(node, action, action == choice)
            node.chosen.add(choice)
            if choice == "stop_answer":
                break
            taken = node.outcomes[choice]
            if choice == "compress_answer_evidence":
                final = taken
                break
            assert taken.state is not None
            history, state = (*history, choice), taken.state
        for visited in path:
            visited.f1 = stop_f1(visited, branches, answers, answered)
        srs = [n.sr for n in path] + ([final.sr_after] if final is not None else [])
        raise_continuation(path, srs, "continuation_support")
        if answers:
            f1s = [n.f1 or 0.0 for n in path] + ([final.f1 or 0.0] if final is not None else [])
            raise_continuation(path, f1s, "continuation")
        else:  # no gold answer: the label-version-1 continuation
            raise_continuation(path, srs, "continuation")
    return nodes

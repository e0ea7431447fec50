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
chooses (:data:`LABELS`):

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
own answer step (``stop_answer``, run with :func:`~dynakrag.graph.replay.step`) writes from
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

The records' format is :mod:`dynakrag.training.records`'s.
"""

from __future__ import annotations

import logging
import random
import sys
import time
import zlib
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from langchain_core.language_models import BaseChatModel

from dynakrag.actions.common import Resources
from dynakrag.configuration import Configuration
from dynakrag.data.datasets import QAExample
from dynakrag.errors import UserInputError
from dynakrag.eval.metrics import f1_score, state_support_recall
from dynakrag.graph.replay import initial_state, step
from dynakrag.graph.validity import valid_actions
from dynakrag.llm.client import LLMClient
from dynakrag.policy.base import Policy
from dynakrag.policy.features import (
    FEATURE_SCHEMA_VERSION,
    feature_config,
    feature_inputs,
    featurize,
)
from dynakrag.retrieval.base import Searcher
from dynakrag.retrieval.passage import Passage
from dynakrag.state import ACQUISITION_ACTIONS, State
from dynakrag.training.collection_report import CollectionReport
from dynakrag.training.gold import GoldBook, answer_support
from dynakrag.training.records import (
    RECORD_SCHEMA,
    finished_questions,
    read_records,
    resume_collection,
)
from dynakrag.training.reply_memo import RequestMemo

logger = logging.getLogger(__name__)

__all__ = [
    "ANSWER_ACTIONS",
    "COUNTERS",
    "LABELS",
    "LABEL_VERSION",
    "RECORD_SCHEMA",
    "collect",
    "collection_searcher_factory",
    "demo_examples",
    "distractor_searcher_factory",
    "finished_questions",
    "label",
    "read_records",
    "records_from_transitions",
    "resume_collection",
    "split_runs",
]

LABEL_VERSION = 2
"""Version of the label definitions (records carry it as ``label_version``; 1 before answers)."""
ANSWER_ACTIONS: frozenset[str] = frozenset(
    {"stop_answer", "compress_answer_evidence", "sufficiency_check"}
)
"""Actions labelled by the answer written right after them."""
COUNTERS: tuple[str, ...] = ("retrieval_calls", "llm_calls", "prompt_tokens", "completion_tokens")
LABELS: tuple[str, ...] = ("recall", "answer", "visited-answer")
"""The label definitions :func:`collect` can write (module docstring); the first is the default."""
GoldItems = Sequence[str | frozenset[str] | Iterable[str]]


def label(action: str, sr_before: float, sr_after: float, answer_f1: float | None = None) -> float:
    """v(s, a) for training (see the module docstring): the support-recall gain
    ``SR(s') - SR(s)`` of an acquisition action; for an answer action (stop_answer,
    compress_answer_evidence, sufficiency_check) ``answer_f1``, the F1 of the answer written
    right after it. Without ``answer_f1`` (no gold answer known) an answer action keeps its
    label-version-1 support-recall label."""
    if action in ACQUISITION_ACTIONS:
        return sr_after - sr_before
    if action not in ANSWER_ACTIONS:
        raise ValueError(f"unknown action {action!r}")
    if answer_f1 is not None:
        return answer_f1
    if action == "sufficiency_check":
        return 1.0 if sr_before >= 1.0 else 0.0
    if action == "stop_answer":
        return sr_before
    return sr_after


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


def collection_searcher_factory(
    retriever: str, corpus: Sequence[Passage] | None = None
) -> Callable[[QAExample], Searcher]:
    """The searcher factory of a collection, in one process or on a worker.

    Without ``corpus`` (the distractor setting) each question searches its own passages
    (:func:`distractor_searcher_factory`). With it (the open setting) every question searches
    one index over the pooled ``corpus``, built when the first question asks for it, so a
    resumed collection with nothing left to do indexes nothing.
    """
    factory = distractor_searcher_factory(retriever)
    if corpus is None:
        return factory
    pooled = QAExample(
        id="open",
        question="",
        answers=(),
        support=(),
        passages=tuple(corpus),
        dataset="open",
        row=-1,
        split="train",
    )
    built: list[Searcher] = []

    def pooled_searcher(example: QAExample) -> Searcher:
        if not built:
            built.append(factory(pooled))
        return built[0]

    return pooled_searcher


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
    """What running one action from a state gave."""

    state: State | None  # None when not run (a logged stop_answer without its final state)
    sr_after: float
    deltas: dict[str, int]
    answer: str | None = None
    """Answer actions: the answer written right after the action (from ``state``)."""
    f1: float | None = None
    """Its F1 against the gold answers (None without gold answers or for acquisition)."""


@dataclass
class _Node:
    """A visited state, its outcomes and the labels of the state itself."""

    history: tuple[str, ...]
    state: State
    sr: float
    valid: list[str]
    outcomes: dict[str, _Outcome] = field(default_factory=dict)
    chosen: set[str] = field(default_factory=set)
    continuation: float = 0.0
    """Answer F1 still to gain by going on (support recall for label-version-1 records)."""
    continuation_support: float | None = None
    """Support recall still to gain by going on (None: same as ``continuation``)."""
    f1: float | None = None
    """F1 of the answer written by stopping here (None: stopping is not valid, or no gold)."""


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
) -> Iterator[dict[str, Any]]:
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
            _records(example, nodes, cfg, collection=collection, answers=labels != "recall")
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


AnsweredStates = dict[tuple[str, ...], State]
"""Final states of the answers written so far, by the history of the state answered."""


def _answered(
    state: State,
    history: tuple[str, ...],
    resources: Resources,
    cfg: Configuration,
    behaviour: Policy,
    answered: AnsweredStates | None,
) -> State:
    """The state after the graph's own answer step from ``state`` (written once per history
    when ``answered`` keeps them)."""
    if answered is not None and history in answered:
        return answered[history]
    final = step(state, "stop_answer", resources, cfg, policy=behaviour)
    if answered is not None:
        answered[history] = final
    return final


def _answer_f1(final: State, answers: Sequence[str]) -> float | None:
    return f1_score(str(final.get("answer") or ""), answers) if answers else None


def _deltas(before: State, after: State) -> dict[str, int]:
    return {c: int(after.get(c, 0)) - int(before.get(c, 0)) for c in COUNTERS}


def _outcome(
    node: _Node,
    action: str,
    resources: Resources,
    cfg: Configuration,
    behaviour: Policy,
    gold: GoldItems,
    *,
    answers: Sequence[str] = (),
    answered: AnsweredStates | None = None,
    answer_after: bool = True,
) -> _Outcome:
    """The outcome of ``action`` from ``node`` (run once with the graph's ``step``, then
    remembered on the node); also what ``dynakrag train --branch`` runs from logged states.

    With ``answer_after``, an answer action also gets the answer written right after it
    (``stop_answer`` is that answer; after ``compress_answer_evidence`` or
    ``sufficiency_check`` the graph's answer step runs on the new state) and its F1 against
    ``answers``; an outcome run without it gets its answer when asked again with it.
    ``answered`` shares the answers between outcomes (the state after a check is also the
    next node). An outcome labelled without running (:func:`_unrun`) is run when asked for."""
    known = node.outcomes.get(action)
    if known is not None and known.state is not None:
        if answer_after and action in ANSWER_ACTIONS and known.answer is None:
            _answer_after(known, node, action, resources, cfg, behaviour, answers, answered)
        return known
    if action == "stop_answer":
        after = _answered(node.state, node.history, resources, cfg, behaviour, answered)
    else:
        after = step(node.state, action, resources, cfg, policy=behaviour)
    result = _Outcome(after, state_support_recall(after, gold), _deltas(node.state, after))
    if action == "stop_answer" or (answer_after and action in ANSWER_ACTIONS):
        _answer_after(result, node, action, resources, cfg, behaviour, answers, answered)
    node.outcomes[action] = result
    return result


def _answer_after(
    result: _Outcome,
    node: _Node,
    action: str,
    resources: Resources,
    cfg: Configuration,
    behaviour: Policy,
    answers: Sequence[str],
    answered: AnsweredStates | None,
) -> None:
    """Give an answer action's outcome the answer written right after it, and its F1."""
    after = result.state
    assert after is not None
    final = (
        after
        if action == "stop_answer"
        else _answered(after, (*node.history, action), resources, cfg, behaviour, answered)
    )
    result.answer = str(final.get("answer") or "")
    result.f1 = _answer_f1(final, answers)


def _unrun(node: _Node) -> _Outcome:
    """The outcome of an action labelled without running it (recall labels of stop_answer
    and of a sufficiency_check no rollout chooses: they read only ``SR(s)``)."""
    return _Outcome(None, node.sr, dict.fromkeys(COUNTERS, 0))


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


def _stop_f1(
    node: _Node,
    resources: Resources,
    cfg: Configuration,
    behaviour: Policy,
    answers: Sequence[str],
    answered: AnsweredStates,
) -> float | None:
    """F1 of answering at ``node`` (None where stopping is not valid, as before any
    evidence); the stop branch's answer when it ran."""
    if "stop_answer" not in node.valid or not answers:
        return None
    if "stop_answer" in node.outcomes:
        return node.outcomes["stop_answer"].f1
    final = _answered(node.state, node.history, resources, cfg, behaviour, answered)
    return _answer_f1(final, answers)


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
) -> dict[tuple[str, ...], _Node]:
    """Run the rollouts of one example; the visited states with their outcomes and labels
    (``labels``: one of :data:`LABELS`)."""
    root = initial_state(example.question, cfg)
    nodes: dict[tuple[str, ...], _Node] = {}
    answered: AnsweredStates = {}
    answers = example.answers if labels != "recall" else ()

    def node_for(history: tuple[str, ...], state: State) -> _Node:
        if history not in nodes:
            nodes[history] = _Node(
                history, state, state_support_recall(state, gold), valid_actions(state, cfg)
            )
        return nodes[history]

    def outcome(node: _Node, action: str, chosen: bool) -> _Outcome:
        if not _runs(action, chosen, labels):
            return node.outcomes.setdefault(action, _unrun(node))
        return _outcome(
            node,
            action,
            resources,
            cfg,
            behaviour,
            gold,
            answers=answers,
            answered=answered,
            answer_after=_answers_after(action, chosen, labels),
        )

    for rollout in range(rollouts):
        rng = _rng(seed, example.id, rollout)
        history: tuple[str, ...] = ()
        state = root
        path: list[_Node] = []
        final: _Outcome | None = None  # the compression that ended the rollout
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
            visited.f1 = _stop_f1(visited, resources, cfg, behaviour, answers, answered)
        srs = [n.sr for n in path] + ([final.sr_after] if final is not None else [])
        _raise_continuation(path, srs, "continuation_support")
        if answers:
            f1s = [n.f1 or 0.0 for n in path] + ([final.f1 or 0.0] if final is not None else [])
            _raise_continuation(path, f1s, "continuation")
        else:  # no gold answer: the label-version-1 continuation
            _raise_continuation(path, srs, "continuation")
    return nodes


def _raise_continuation(path: Sequence[_Node], values: Sequence[float], name: str) -> None:
    """Raise each path node's ``name`` to the best later value minus its own (``values``:
    one per node of the path, then the value the rollout ended with, if any)."""
    for index, visited in enumerate(path):
        gain = max(values[index + 1 :], default=values[index]) - values[index]
        setattr(visited, name, max(getattr(visited, name) or 0.0, gain))


def _records(
    example: QAExample,
    nodes: Mapping[tuple[str, ...], _Node],
    cfg: Configuration,
    *,
    collection: Mapping[str, Any] | None = None,
    answers: bool = True,
) -> Iterator[dict[str, Any]]:
    """The records of one example's nodes (the format of the module docstring); without
    ``answers`` (the recall labels) every record is of label version 1."""
    budgets = feature_config(cfg)
    labelled = [(n, a) for n in nodes.values() for a in n.valid if a in n.outcomes]
    inputs = {id(node): feature_inputs(node.state) for node in nodes.values()}
    for node, action in labelled:
        result = node.outcomes[action]
        state = inputs[id(node)]
        answer_label = action in ANSWER_ACTIONS and result.f1 is not None
        record = {
            "schema": RECORD_SCHEMA,
            "source": "collect",
            "example_id": example.id,
            "dataset": example.dataset,
            "split": example.split,
            "step": len(node.history),
            "history": list(node.history),
            "feature_version": FEATURE_SCHEMA_VERSION,
            "features": featurize(state, action, cfg).tolist(),
            "state": state,
            "budgets": budgets,
            "valid": list(node.valid),
            "action": action,
            "label": label(action, node.sr, result.sr_after, result.f1),
            "label_version": (
                LABEL_VERSION if answer_label or (answers and action not in ANSWER_ACTIONS) else 1
            ),
            "sr_before": node.sr,
            "sr_after": result.sr_after,
            "f1_before": node.f1,
            "f1_after": result.f1,
            "answer": result.answer,
            "continuation": node.continuation,
            "continuation_support": (
                node.continuation
                if node.continuation_support is None
                else node.continuation_support
            ),
            "chosen": action in node.chosen,
            "executed": result.state is not None,
            "deltas": dict(result.deltas),
            "question_records": len(labelled),
        }
        if collection is not None:
            record["collection"] = dict(collection)
        yield record


# --------------------------------------------------------------------------------------------
# Logged runs


def split_runs(transitions: Iterable[Any]) -> list[list[Any]]:
    """Logged ``Transition``s (thread by thread, by step) cut into runs: a new run starts on
    a new thread or where the trace is empty again (a later question on the same thread)."""
    runs: list[list[Any]] = []
    for transition in transitions:
        start = not (transition.state.get("trace") or [])
        same = runs and runs[-1][-1].thread_id == transition.thread_id
        if start or not same:
            runs.append([])
        runs[-1].append(transition)
    return runs


def records_from_transitions(
    transitions: Iterable[Any],
    gold: GoldBook | Mapping[str, GoldItems],
    cfg: Configuration | None = None,
    *,
    dataset: str = "log",
    split: str = "train",
    branch: Resources | None = None,
    behaviour: Policy | None = None,
) -> list[dict[str, Any]]:
    """Records from logged ``Transition``s (``read_transitions``) of runs with known gold.

    ``gold``: a :class:`~dynakrag.training.gold.GoldBook` (a run matches by run id, else by
    normalised question), or a mapping of questions to gold support. Runs without gold, and
    runs tagged ``split="eval"`` (eval rows never train), are skipped, and so is a
    ``stop_answer`` reached by the fixed edge after compression (no decision: its answer labels
    the compression). Each logged decision gives a record of the action taken (``chosen``
    true) whose outcome is the run's actual next state; an answer action is labelled by the F1
    of the answer the run wrote right after it, when the log holds that answer (else by
    support recall, label version 1). A gold row without support labels by the answer alone
    (:func:`~dynakrag.training.gold.answer_support` over every passage the run and its branches
    saw: weaker).

    ``branch``: the resources (searcher, model) of the runs' corpus; with them every other
    valid action is also run once from each logged state with collection's branching
    (:func:`_outcome`: the graph's own ``step``, scores from ``behaviour``, heuristic by
    default), answers included, for the paper's counterfactual labels, and the continuation
    label is the answer F1 still to gain, as in collection (without branches it is the support
    recall still to gain). ``example_id`` is the run id (``/2``, ``/3``... for later runs on the
    same thread); ``source`` is "log". ``split`` must be ``"train"``.
    """
    if split != "train":
        raise UserInputError("records of logged runs are training data: split must be 'train'")
    cfg = cfg or Configuration()
    book = gold if isinstance(gold, GoldBook) else GoldBook.from_support(gold)
    if branch is not None and behaviour is None:
        from dynakrag.policy.heuristic import HeuristicPolicy

        behaviour = HeuristicPolicy()
    records: list[dict[str, Any]] = []
    runs_of_thread: dict[str, int] = {}
    for run in split_runs(transitions):
        thread = run[0].thread_id
        runs_of_thread[thread] = runs_of_thread.get(thread, 0) + 1
        if run[0].run.get("split") == "eval":
            continue
        question = run[0].state.get("question")
        row = book.match(thread, question if isinstance(question, str) else None)
        if row is None:
            continue
        number = runs_of_thread[thread]
        example = QAExample(
            id=thread if number == 1 else f"{thread}/{number}",
            question=str(question or ""),
            answers=tuple(row.answers),
            support=(),
            passages=(),
            dataset=dataset,
            row=-1,
            split=split,
        )
        nodes = _logged_nodes(run, example, row.support, cfg, branch, behaviour)
        records.extend({**record, "source": "log"} for record in _records(example, nodes, cfg))
    return records


def _logged_nodes(
    run: Sequence[Any],
    example: QAExample,
    support: GoldItems,
    cfg: Configuration,
    branch: Resources | None,
    behaviour: Policy | None,
) -> dict[tuple[str, ...], _Node]:
    """One logged run as collection's nodes: its decisions with their logged outcomes (and
    branches), labelled as :func:`_explore` labels a rollout."""
    answers = example.answers
    answered: AnsweredStates = {}
    answering: dict[str, Any] = {"answers": answers, "answered": answered}
    for transition in run:  # the logged answers, so branches reuse them instead of asking again
        if transition.action == "stop_answer":
            answered[_history(transition.state)] = transition.next_state
    nodes: dict[tuple[str, ...], _Node] = {}
    ending: _Outcome | None = None  # the compression that ended the run
    for transition in run:
        history = _history(transition.state)
        if transition.action == "stop_answer" and history[-1:] == ("compress_answer_evidence",):
            continue
        valid = list(transition.state.get("valid_actions") or [transition.action])
        node = _Node(history, transition.state, 0.0, valid)
        taken = _Outcome(
            transition.next_state, 0.0, _deltas(transition.state, transition.next_state)
        )
        if transition.action in ANSWER_ACTIONS:
            after = history if transition.action == "stop_answer" else (*history, transition.action)
            final = answered.get(after)
            if final is not None:
                taken.answer = str(final.get("answer") or "")
                taken.f1 = _answer_f1(final, answers)
        node.outcomes[transition.action] = taken
        node.chosen.add(transition.action)
        if transition.action == "compress_answer_evidence":
            ending = taken
        if branch is not None and behaviour is not None:
            possible = valid_actions(transition.state, cfg)
            for action in (a for a in valid if a in possible):
                _outcome(node, action, branch, cfg, behaviour, support, **answering)
        nodes[history] = node
    gold = support or _answer_gold(answers, nodes.values(), answered.values())
    path = list(nodes.values())
    for node in path:
        node.sr = state_support_recall(node.state, gold)
        for outcome in node.outcomes.values():
            after = outcome.state
            outcome.sr_after = state_support_recall(after, gold) if after else node.sr
        if branch is not None and behaviour is not None:
            node.f1 = _stop_f1(node, branch, cfg, behaviour, answers, answered)
        elif "stop_answer" in node.outcomes:
            node.f1 = node.outcomes["stop_answer"].f1
    srs = [n.sr for n in path] + ([ending.sr_after] if ending is not None else [])
    _raise_continuation(path, srs, "continuation_support")
    if answers and branch is not None:
        f1s = [n.f1 or 0.0 for n in path] + ([ending.f1 or 0.0] if ending is not None else [])
        _raise_continuation(path, f1s, "continuation")
    else:  # without branches, stopping earlier was never tried: support recall to gain
        _raise_continuation(path, srs, "continuation")
    return nodes


def _history(state: Mapping[str, Any]) -> tuple[str, ...]:
    return tuple(entry["action"] for entry in state.get("trace") or [])


def _answer_gold(
    answers: Sequence[str], nodes: Iterable[_Node], finals: Iterable[State]
) -> GoldItems:
    """Answer-only gold as support: the passages, among all the run and its branches saw,
    that state a gold answer."""
    states = [*finals]
    for node in nodes:
        states.append(node.state)
        states.extend(o.state for o in node.outcomes.values() if o.state is not None)
    return answer_support(answers, [doc for s in states for doc in s.get("evidence") or []])

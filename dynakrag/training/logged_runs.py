"""Records from logged runs: the graph's own runs, with known gold, as training records.

:func:`records_from_transitions` turns logged transitions (``read_transitions``) into the
records collection writes (:mod:`dynakrag.training.records`' format), labelled as
:mod:`dynakrag.training.collect` labels a rollout (:mod:`dynakrag.training.labelling`),
optionally with counterfactual branches run from each logged state.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, cast

from dynakrag.actions.common import Resources
from dynakrag.configuration import Configuration
from dynakrag.data.datasets import QAExample
from dynakrag.errors import UserInputError
from dynakrag.eval.metrics import state_support_recall
from dynakrag.graph.replay import Branches
from dynakrag.graph.validity import valid_actions
from dynakrag.policy.base import Policy
from dynakrag.state import State
from dynakrag.training.gold import GoldBook, answer_support
from dynakrag.training.labelling import (
    ANSWER_ACTIONS,
    AnsweredStates,
    GoldItems,
    Outcome,
    StateNode,
    answer_f1,
    counter_deltas,
    node_records,
    raise_continuation,
    run_outcome,
    stop_f1,
)
from dynakrag.training.records import TransitionFields

__all__ = ["records_from_transitions", "split_runs"]


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
) -> list[TransitionFields]:
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
    (:func:`~dynakrag.training.labelling.run_outcome`: through the graph's checkpoints, scores from
    ``behaviour``, heuristic by default), answers included, for the paper's counterfactual
    labels, and the continuation label is the answer F1 still to gain, as in collection
    (without branches it is the support recall still to gain). ``example_id`` is the run id
    (``/2``, ``/3``... for later runs on the same thread); ``source`` is "log". ``split``
    must be ``"train"``.
    """
    if split != "train":
        raise UserInputError("records of logged runs are training data: split must be 'train'")
    cfg = cfg or Configuration()
    book = gold if isinstance(gold, GoldBook) else GoldBook.from_support(gold)
    if branch is not None and behaviour is None:
        from dynakrag.policy.heuristic import HeuristicPolicy

        behaviour = HeuristicPolicy()
    records: list[TransitionFields] = []
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
        records.extend(
            cast(TransitionFields, {**record, "source": "log"})
            for record in node_records(example, nodes, cfg)
        )
    return records


def _logged_nodes(
    run: Sequence[Any],
    example: QAExample,
    support: GoldItems,
    cfg: Configuration,
    branch: Resources | None,
    behaviour: Policy | None,
) -> dict[tuple[str, ...], StateNode]:
    """One logged run as collection's nodes: its decisions with their logged outcomes (and
    branches), labelled as collection labels a rollout."""
    answers = example.answers
    branches = (
        Branches(branch, cfg, policy=behaviour)
        if branch is not None and behaviour is not None
        else None
    )
    answered: AnsweredStates = {}
    answering: dict[str, Any] = {"answers": answers, "answered": answered}
    for transition in run:  # the logged answers, so branches reuse them instead of asking again
        if transition.action == "stop_answer":
            answered[_history(transition.state)] = transition.next_state
    nodes: dict[tuple[str, ...], StateNode] = {}
    ending: Outcome | None = None  # the compression that ended the run
    for transition in run:
        history = _history(transition.state)
        if transition.action == "stop_answer" and history[-1:] == ("compress_answer_evidence",):
            continue
        valid = list(transition.state.get("valid_actions") or [transition.action])
        node = StateNode(history, transition.state, 0.0, valid)
        taken = Outcome(
            transition.next_state, 0.0, counter_deltas(transition.state, transition.next_state)
        )
        if transition.action in ANSWER_ACTIONS:
            after = history if transition.action == "stop_answer" else (*history, transition.action)
            final = answered.get(after)
            if final is not None:
                taken.answer = str(final.get("answer") or "")
                taken.f1 = answer_f1(final, answers)
        node.outcomes[transition.action] = taken
        node.chosen.add(transition.action)
        if transition.action == "compress_answer_evidence":
            ending = taken
        if branches is not None:
            possible = valid_actions(transition.state, cfg)
            for action in (a for a in valid if a in possible):
                run_outcome(node, action, branches, support, **answering)
        nodes[history] = node
    gold = support or _answer_gold(answers, nodes.values(), answered.values())
    path = list(nodes.values())
    for node in path:
        node.sr = state_support_recall(node.state, gold)
        for outcome in node.outcomes.values():
            after = outcome.state
            outcome.sr_after = state_support_recall(after, gold) if after else node.sr
        if branches is not None:
            node.f1 = stop_f1(node, branches, answers, answered)
        elif "stop_answer" in node.outcomes:
            node.f1 = node.outcomes["stop_answer"].f1
    srs = [n.sr for n in path] + ([ending.sr_after] if ending is not None else [])
    raise_continuation(path, srs, "continuation_support")
    if answers and branches is not None:
        f1s = [n.f1 or 0.0 for n in path] + ([ending.f1 or 0.0] if ending is not None else [])
        raise_continuation(path, f1s, "continuation")
    else:  # without branches, stopping earlier was never tried: support recall to gain
        raise_continuation(path, srs, "continuation")
    return nodes


def _history(state: Mapping[str, Any]) -> tuple[str, ...]:
    return tuple(entry["action"] for entry in state.get("trace") or [])


def _answer_gold(
    answers: Sequence[str], nodes: Iterable[StateNode], finals: Iterable[State]
) -> GoldItems:
    """Answer-only gold as support: the passages, among all the run and its branches saw,
    that state a gold answer."""
    states = [*finals]
    for node in nodes:
        states.append(node.state)
        states.extend(o.state for o in node.outcomes.values() if o.state is not None)
    return answer_support(answers, [doc for s in states for doc in s.get("evidence") or []])

"""Graph state: a narrow input the caller fills, and the full state the controller conditions on.

The state holds only what is observable at inference time (question, evidence, frontier
statistics, history, bridge entities, recorded gaps, accounting): never gold labels.
Counters are merged by addition so each node returns only its own deltas.
"""

from __future__ import annotations

import operator
from typing import Annotated, Literal, NotRequired, TypedDict, get_args

from dynakrag.files import JsonObject

ActionName = Literal[
    "retrieve_more",
    "gap_query",
    "bridge_entity_expand",
    "rewrite_query",
    "sufficiency_check",
    "stop_answer",
    "compress_answer_evidence",
]
"""The nodes the controller may go to (its ``Command``'s return type): the seven actions."""

ACTIONS: tuple[str, ...] = get_args(ActionName)
"""The seven atomic actions, each a graph node of the same name, in this order."""

ACQUISITION_ACTIONS: frozenset[str] = frozenset(
    {"retrieve_more", "gap_query", "bridge_entity_expand", "rewrite_query"}
)
TERMINAL_ACTIONS: frozenset[str] = frozenset({"stop_answer", "compress_answer_evidence"})


def merge_accounting(
    left: dict[str, dict[str, int]] | None, right: dict[str, dict[str, int]] | None
) -> dict[str, dict[str, int]]:
    """Add per-node counters: ``{node: {counter: value}}``."""
    merged = {node: dict(counts) for node, counts in (left or {}).items()}
    for node, counts in (right or {}).items():
        bucket = merged.setdefault(node, {})
        for key, value in counts.items():
            bucket[key] = bucket.get(key, 0) + value
    return merged


class RetrieverRank(TypedDict):
    """One retriever that ranked a passage (:attr:`Hit.sources
    <dynakrag.retrieval.provenance.Hit.sources>` as JSON)."""

    retriever: str
    rank: int
    score: float


class RouteChoice(TypedDict):
    """A routed searcher's choice for a query (:meth:`RoutedHit.to_dict
    <dynakrag.routing.retriever.RoutedHit.to_dict>`): the tier and why (the query's average
    IDF)."""

    tier: int
    tier_name: str
    avg_idf: float


class Document(TypedDict, total=False):
    """One evidence passage with its provenance."""

    id: str
    title: str
    text: str
    score: float
    query: str
    action: str
    step: int
    retriever: str
    """Which retriever found it (e.g. dense, bm25, hybrid), at ``rank`` in its search."""
    rank: int
    sources: list[RetrieverRank]
    """Every retriever that ranked it: ``{retriever, rank, score}``."""
    route: RouteChoice
    """With a routed searcher: the tier chosen for the query and the query's average IDF."""


class SubQuestion(TypedDict):
    """One part of the question; ``answer`` is None while unknown."""

    question: str
    answer: str | None


HopKind = Literal["person", "organisation", "place", "date", "number", "yes/no", "text"]
"""The kind of answer a hop expects (:func:`dynakrag.actions.answer_kind.expected_kind`)."""
HopStatus = Literal["open", "resolved", "failed"]


class Rejection(TypedDict):
    """An answer a hop's generator gave that did not stand."""

    answer: str
    why: str


class Hop(TypedDict):
    """One single-relation step of the question's chain (:mod:`dynakrag.actions.chain`).

    ``question`` is as planned, ``#k`` standing for hop k's answer; once resolved, ``answer``
    is stated by ``sentence`` of passage ``passage``, about the hop's entity.
    """

    question: str
    expects: HopKind
    type_noun: str
    """The noun the question asks for ("country" in "In which country ..."), "" when none."""
    status: HopStatus
    answer: str | None
    passage: str | None
    sentence: str | None
    via: list[str]
    """Entities the hop was extended through: a sentence named an entity of another kind than
    the hop expects (a city for a country), so the hop goes on from that entity."""
    via_sentences: list[str]
    """The sentences that named each entity of ``via``."""
    queries: list[str]
    """Searches made for this hop."""
    asked: list[str]
    """Passage ids the generator was shown for this hop (for its current entity)."""
    rejected: list[Rejection]
    """Answers the generator gave that did not stand, each with why."""
    why: str
    """Why the hop stood, or why it is still open or failed, one line."""
    reopened: NotRequired[bool]
    """Whether the hop was asked again, its answer ruled out, after a later hop found nothing
    about that answer (at most once)."""


class Contribution(TypedDict):
    """One feature's (or one-hot family's) part of an action's value."""

    feature: str
    value: float | str
    """The feature's value; for a one-hot family (``name*``), the member that is on."""
    contribution: float


class ValueBreakdown(TypedDict):
    """How a learned policy's score of one action is made: bias + contributions = value;
    score = value - guard penalty - λ·cost."""

    value: float
    bias: float
    contributions: list[Contribution]
    """The largest ones; ``rest`` is the sum of the others."""
    rest: float
    guard_penalty: float
    cost: float
    score: float


class ContinuationCheck(TypedDict):
    estimate: float
    margin: float
    guard: bool


class BudgetRecord(TypedDict):
    """Where a run stood against its token budget at a decision
    (:meth:`BudgetStatus.to_json <dynakrag.policy.token_budget.BudgetStatus.to_json>`)."""

    token_budget: int
    spent: int
    remaining: int
    correction: float
    """The prompt correction used, rounded to 4 places."""
    price: dict[str, float]
    """Per action: its expected tokens plus those of the answer after it (rounded to 0.1)."""


class Explanation(TypedDict, total=False):
    """Why the controller chose an action (:mod:`dynakrag.policy.explain`); plain JSON, so it
    is checkpointed like the rest of the state."""

    policy: str
    chosen: str
    runner_up: str | None
    scores: dict[str, float]
    """The scores of the choice and the runner-up."""
    blocked: dict[str, str]
    """Action -> the validity rule that blocked it."""
    cost_lambda: float
    lambda_source: str
    tokens: dict[str, float]
    """The choice's token estimate (``TokenEstimate.to_json``)."""
    budget: BudgetRecord
    """The token budget when one is set."""
    feature_version: int
    values: dict[str, ValueBreakdown]
    """Learned policies only: the choice's and the runner-up's value breakdown."""
    continuation: ContinuationCheck
    fixed_edge: str
    """Instead of all the above: the action follows the last one by a fixed edge."""


class Decision(TypedDict):
    """What the controller decides at a state (:func:`dynakrag.graph.controller.decide`): the
    state update it writes before going to ``next_action``."""

    valid_actions: list[str]
    invalid_reasons: dict[str, str]
    """Each blocked action with the rule that blocks it."""
    policy_scores: dict[str, float]
    next_action: str
    explanation: Explanation


class HopQuestion(TypedDict):
    """One question the chain asked the generator
    (:func:`dynakrag.actions.chain.resolve_hops`)."""

    hop: int
    question: str
    answer: str | None
    verdict: NotRequired[str]
    """Why the answer stood or did not; set once the answer is judged."""


class HopOutcome(TypedDict):
    """Where one hop stands after a sufficiency check (its trace entry's ``hops``)."""

    hop: int
    status: HopStatus
    answer: str | None
    why: str


class VerdictRecord(TypedDict):
    """An abstention verdict's JSON-ready fields
    (:meth:`dynakrag.actions.grounding.AbstentionVerdict.record`)."""

    abstained: bool
    abstain_code: str
    abstain_reason: str
    answer_citations: list[str]
    grounding: str


class AnswerPassage(TypedDict):
    """A passage DICS keeps because it states a verified sub-answer."""

    sub_question: str
    answer: str
    passage: str


class HopPassage(TypedDict):
    """A passage DICS keeps for a hop of the chain, and how it serves it."""

    hop: int
    passage: str
    how: str


class TraceDetails(TypedDict, total=False):
    """What each action adds to its trace entry besides the common fields (the ``details`` of
    :func:`dynakrag.actions.common.action_update`)."""

    # A search (retrieve_more, gap_query, bridge_entity_expand, rewrite_query).
    search_query: str
    entity: str
    """bridge_entity_expand: the entity searched."""
    rewritten_query: str
    fallback: bool
    """rewrite_query: the rewrite fell back to a rule; stop_answer: the answer did."""

    # sufficiency_check.
    sufficient: bool
    gaps: list[str]
    parsed: bool
    ungrounded_answers: list[str]
    missing_entities: list[str]
    plan: list[str]
    """With a chain: the sub-questions planned at this check (absent once planned)."""
    checks_left_out: list[str]
    """With a chain: planned hops that only checked a value the question states, left out."""
    hops_asked: list[HopQuestion]
    hops: list[HopOutcome]

    # compress_answer_evidence.
    kept: list[str]
    dropped: int
    criteria: list[str]
    criteria_fallback: str | None
    dics_mode: str
    dics_choices: list[JsonObject]
    answer_passages: list[AnswerPassage]
    extraction: JsonObject
    """DS-RAG's question analysis, as it records it."""
    hop_passages: list[HopPassage]
    evidence_verdict: VerdictRecord | None

    # stop_answer (and the verdict's fields, :class:`VerdictRecord`).
    answer: str
    final_docs: int
    abstained: bool
    abstain_code: str
    abstain_reason: str
    answer_citations: list[str]
    grounding: str


class TraceEntry(TraceDetails, total=False):
    """One action of a run, as :func:`dynakrag.actions.common.action_update` records it: the
    common fields below, and the action's own :class:`TraceDetails`."""

    step: int
    action: str
    valid_actions: list[str]
    scores: dict[str, float]
    explanation: Explanation
    query: str
    added: list[str]
    """Ids of the documents the action added."""
    retrieval_calls: int
    llm_calls: int
    prompt_tokens: int
    completion_tokens: int


class FrontierStats(TypedDict, total=False):
    """Statistics of one search (:func:`dynakrag.actions.frontier.acquire`), what the policy
    features read to judge whether another search is worth it. A search writes every key; the
    state's ``frontier`` is empty (``{}``) before the first one."""

    exhausted: bool
    """No unseen candidate is left in the ranked list."""
    query: str
    candidates: int
    """Ranked candidates the search returned (at most ``frontier_depth``)."""
    depth_reached: int
    """Rank of the last passage taken (0: none taken)."""
    unseen_left: int
    """Candidates not yet in the evidence after this search."""
    top_score: float
    added_mean_score: float
    """Mean score of the passages taken (0.0: none)."""
    margin: float
    """Top-1 minus top-2 score (0.0 with fewer than two candidates)."""
    dropped: int
    """Candidates the searcher left out (:data:`dynakrag.retrieval.provenance.Dropped`)."""


class InputState(TypedDict):
    """What a caller provides."""

    question: str


class StateUpdate(TypedDict, total=False):
    """The fields of :class:`State` past the question, each optional: what a node returns as
    its partial update (the reducers' fields, ``trace`` to ``accounting``, as the deltas they
    add). :func:`dynakrag.actions.common.action_update` builds it for every action."""

    query: str
    """The current retrieval query (the question until rewritten)."""
    evidence: list[Document]
    """Evidence so far, in acquisition order (de-duplicated by id)."""
    frontier: FrontierStats
    """Statistics of the last retrieval: query, depth reached, scores, unseen candidates left."""
    sub_questions: list[SubQuestion]
    hops: list[Hop]
    """The chain of hops (``sub_question_answering="chain"``): empty until planned."""
    gaps: list[str]
    """Recorded missing information not yet queried."""
    queried_gaps: list[str]
    exhausted_queries: list[str]
    """Queries whose ranked candidates are all in the evidence already."""
    bridge_entities: list[str]
    """Entities found in the evidence but absent from the question."""
    expanded_entities: list[str]
    sufficient: bool
    """Verdict of the latest sufficiency check."""
    evidence_count_at_check: int
    """Evidence size when sufficiency was last checked (-1: never)."""
    last_new_docs: int
    """Documents the latest action added."""
    compressed: bool
    rewrites: int

    # Controller decision for the next step.
    valid_actions: list[str]
    invalid_reasons: dict[str, str]
    policy_scores: dict[str, float]
    next_action: str
    explanation: Explanation
    """Why the controller chose ``next_action`` (:mod:`dynakrag.policy.explain`); copied into
    the action's trace entry."""

    # History and accounting (merged by reducers).
    trace: Annotated[list[TraceEntry], operator.add]
    steps: Annotated[int, operator.add]
    retrieval_calls: Annotated[int, operator.add]
    llm_calls: Annotated[int, operator.add]
    prompt_tokens: Annotated[int, operator.add]
    completion_tokens: Annotated[int, operator.add]
    accounting: Annotated[dict[str, dict[str, int]], merge_accounting]

    answer: str
    """The final answer: empty when the run abstained; with ``abstain`` off, "insufficient
    evidence" when none could be given."""
    abstained: bool
    """The run gave no answer because the evidence does not support one
    (:mod:`dynakrag.actions.grounding`; setting ``abstain``)."""
    abstain_reason: str
    """Why it abstained, one sentence ("" when it answered)."""
    answer_citations: list[str]
    """Ids of the evidence passages the answer rests on (empty when it abstained)."""


class State(InputState, StateUpdate):
    """Everything the controller conditions on, plus results and accounting: the question and
    every field of :class:`StateUpdate`."""


ADDITIVE_FIELDS: tuple[str, ...] = (
    "trace",
    "steps",
    "retrieval_calls",
    "llm_calls",
    "prompt_tokens",
    "completion_tokens",
    "accounting",
)
"""Fields merged by a reducer (added up across updates)."""


def initial_state(question: str) -> State:
    """The state of a run before its first action (``question`` already validated)."""
    return State(
        question=question,
        query=question,
        evidence=[],
        sub_questions=[],
        hops=[],
        gaps=[],
        queried_gaps=[],
        exhausted_queries=[],
        bridge_entities=[],
        expanded_entities=[],
        sufficient=False,
        evidence_count_at_check=-1,
        last_new_docs=0,
        compressed=False,
        rewrites=0,
        answer="",
        abstained=False,
        abstain_reason="",
        answer_citations=[],
        frontier={},
        trace=[],
        steps=0,
        retrieval_calls=0,
        llm_calls=0,
        prompt_tokens=0,
        completion_tokens=0,
        accounting={},
    )

"""The ``dynakrag`` method: the DynaKRAG graph under a policy, with ablations.

Evidence, trace and accounting come from the graph's final state. ``policy`` is any policy
name or file (``heuristic``, ``uniform``, ``fixed``, a trained ``.npz``) or ``"oracle"``: the
gold-aware upper bound (:class:`~dynakrag.eval.oracle.OraclePolicy`), built per question from
the gold the runner passes (``needs_gold``) and refused without it. ``ablate`` switches parts
off (:data:`ABLATIONS`): ``sufficiency`` (``sufficiency_check`` taken out of the valid set the
policy ranks), ``compression`` (``compress_answer_evidence`` passes the evidence through:
``compression="passthrough"``), ``continuation`` (the learned policy's continuation guard
off; needs a learned policy). ``log``: a trajectory log (SQLite file or ``postgresql://``
URL) every question's run is checkpointed to, as its own run tagged ``command="eval"`` plus
``log_tags`` (the CLI passes the dataset and split, so runs of eval rows never train); the
log is opened on the first question in each process and closed by :meth:`close`.

``no_answer``: the graph has no switch for skipping the answer, so the method runs it with
:class:`AnswerlessLLM`, an LLMClient that declines the final-answer prompt
(:func:`dynakrag.prompts.answer_messages`) without calling the model or counting a call;
``stop_answer`` then takes its documented fallback, which the method discards (the prediction
is ``""``).
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from typing import Any

from dynakrag.configuration import Configuration
from dynakrag.errors import UserInputError
from dynakrag.eval.methods.base import Evidence, Method, MethodResult, is_answer_prompt
from dynakrag.llm.client import NO_USAGE, ClientWrapper, LLMClient, Messages, Usage
from dynakrag.policy.base import Policy
from dynakrag.retrieval.base import Searcher
from dynakrag.state import TraceEntry


class AnswerlessLLM(ClientWrapper):
    """Delegates to ``inner`` but declines the final-answer prompt: ``(None, NO_USAGE)``.

    No model call is made or counted for it; ``declined`` counts how often it was asked.
    """

    def __init__(self, inner: LLMClient) -> None:
        super().__init__(inner)
        self.declined = 0
        self._declined_lock = threading.Lock()

    def text(
        self, messages: Messages, *, max_tokens: int | None = None
    ) -> tuple[str | None, Usage]:
        if is_answer_prompt(messages):
            with self._declined_lock:
                self.declined += 1
            return None, NO_USAGE
        return self.inner.text(messages, max_tokens=max_tokens)


ORACLE = "oracle"
ABLATIONS: dict[str, str] = {
    "sufficiency": "sufficiency_check removed from the valid set the policy ranks",
    "compression": "compress_answer_evidence passes the evidence through (no compression)",
    "continuation": "the learned policy's continuation guard switched off",
}
"""The ``dynakrag`` method's ablations, by name."""


class DynakragMethod(Method):
    """The DynaKRAG graph (policy: ``policy`` if given, else the configuration's).

    ``ablate``: names from :data:`ABLATIONS`; ``oracle_horizon``: look-ahead of the oracle.
    """

    name = "dynakrag"

    def __init__(
        self,
        *,
        no_answer: bool = False,
        policy: Policy | str | None = None,
        ablate: Sequence[str] = (),
        oracle_horizon: int = 2,
        log: str | None = None,
        log_tags: Mapping[str, Any] | None = None,
    ) -> None:
        super().__init__(no_answer=no_answer)
        self.log = log
        self.log_tags = dict(log_tags or {})
        self._saver: Any = None
        self._saver_lock = threading.Lock()
        self.policy = policy
        self.ablate = tuple(dict.fromkeys(ablate))
        self.oracle_horizon = oracle_horizon
        unknown = [name for name in self.ablate if name not in ABLATIONS]
        if unknown:
            raise UserInputError(
                f"unknown ablation {unknown[0]!r}; choose from {', '.join(ABLATIONS)}"
            )
        if oracle_horizon < 1:
            raise UserInputError(f"oracle_horizon must be >= 1, got {oracle_horizon}")
        if policy is not None:
            self._check_policy(policy)  # a bad policy fails before any data or model loads

    @property
    def needs_gold(self) -> bool:
        return self.policy == ORACLE

    def options(self) -> dict[str, Any]:
        policy = (
            self.policy
            if self.policy is None or isinstance(self.policy, str)
            else (self.policy.name)
        )
        options: dict[str, Any] = {**super().options(), "policy": policy}
        if self.ablate:
            options["ablate"] = list(self.ablate)
        if self.policy == ORACLE:
            options["oracle_horizon"] = self.oracle_horizon
        if self.log:
            from dynakrag.graph.runlog import describe_log

            options["log"] = describe_log(self.log)
        return options

    def _checkpointer(self) -> Any:
        """The log's checkpointer, opened once per process (None without a log)."""
        if self.log is None:
            return None
        with self._saver_lock:
            if self._saver is None:
                from dynakrag.graph.runlog import open_trajectory_log

                self._saver = open_trajectory_log(self.log)
            return self._saver

    def close(self) -> None:
        """Close the log if this process opened it."""
        with self._saver_lock:
            if self._saver is not None:
                from dynakrag.graph.runlog import close_trajectory_log

                close_trajectory_log(self._saver)
                self._saver = None

    def __getstate__(self) -> dict[str, Any]:
        # An open log does not travel to another process: each opens its own.
        state = dict(self.__dict__)
        state["_saver"], state["_saver_lock"] = None, None
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._saver_lock = threading.Lock()

    def _check_policy(self, spec: Policy | str) -> Policy | None:
        """The resolved policy (None for the oracle); UserInputError for unusable settings."""
        from dynakrag.policy.learned import LearnedPolicy
        from dynakrag.policy.registry import resolve_policy

        resolved = None if spec == ORACLE else resolve_policy(spec)
        if "continuation" in self.ablate and not isinstance(resolved, LearnedPolicy):
            raise UserInputError(
                "the continuation ablation needs a learned policy (a trained .npz file), "
                f"not {spec if isinstance(spec, str) else spec.name!r}"
            )
        return resolved

    def configured(self, cfg: Configuration) -> Configuration:
        """The run's configuration under the ablations."""
        if "compression" in self.ablate:
            return cfg.merged({"compression": "passthrough"})
        return cfg

    def make_policy(
        self,
        cfg: Configuration,
        searcher: Searcher,
        llm: LLMClient,
        gold: Sequence[Any] | None = None,
    ) -> Policy:
        """The policy of one question, with the ablations applied."""
        from dynakrag.actions.common import Resources
        from dynakrag.eval.oracle import OraclePolicy
        from dynakrag.policy.ablation import WithoutActions
        from dynakrag.policy.learned import LearnedPolicy

        spec = self.policy if self.policy is not None else cfg.policy
        removed = {"sufficiency_check"} if "sufficiency" in self.ablate else set()
        if spec == ORACLE:
            if not gold:
                raise UserInputError(
                    "the oracle policy needs the question's gold support (evaluation only)"
                )
            return OraclePolicy(
                gold, Resources(searcher, llm), horizon=self.oracle_horizon, without=removed
            )
        policy = self._check_policy(spec)
        assert policy is not None
        if "continuation" in self.ablate and isinstance(policy, LearnedPolicy):
            policy = policy.with_ablated_continuation()
        return WithoutActions(policy, removed) if removed else policy

    def run(
        self,
        question: str,
        searcher: Searcher,
        llm: LLMClient,
        cfg: Configuration,
        *,
        gold: Sequence[Any] | None = None,
    ) -> MethodResult:
        """Answer ``question``; ``gold`` is read by the oracle policy only."""
        from dynakrag.eval.oracle import OraclePolicy
        from dynakrag.graph.builder import build_graph

        cfg = self.configured(cfg)
        client: LLMClient = AnswerlessLLM(llm) if self.no_answer else llm
        policy = self.make_policy(cfg, searcher, client, gold)
        checkpointer = self._checkpointer()
        config = None
        if checkpointer is not None:
            from dynakrag.graph.runlog import run_config

            config = run_config(**{"command": "eval", **self.log_tags})
        graph = build_graph(
            searcher, policy=policy, configuration=cfg, llm=client, checkpointer=checkpointer
        )
        final = graph.invoke({"question": question}, config)
        trace = list(final.get("trace", []))
        evidence: list[Evidence] = [
            {"id": doc["id"], "title": doc.get("title", ""), "text": doc.get("text", "")}
            for doc in final.get("evidence", [])
        ]
        details: dict[str, Any] = {
            "sub_questions": list(final.get("sub_questions", [])),
            "hops": list(final.get("hops", [])),
            "accounting": dict(final.get("accounting", {})),
            "trace": [_compact_step(entry) for entry in trace],
        }
        if isinstance(policy, OraclePolicy):
            details["oracle"] = policy.stats()  # look-ahead cost, outside the accounting
        if config is not None:
            details["run_id"] = config["configurable"]["thread_id"]
        return MethodResult(
            prediction="" if self.no_answer else str(final.get("answer", "")),
            evidence=evidence,
            actions=[entry["action"] for entry in trace],
            retrieval_calls=int(final.get("retrieval_calls", 0)),
            llm_calls=int(final.get("llm_calls", 0)),
            prompt_tokens=int(final.get("prompt_tokens", 0)),
            completion_tokens=int(final.get("completion_tokens", 0)),
            details=details,
            abstained=bool(final.get("abstained")) and not self.no_answer,
            abstain_reason="" if self.no_answer else str(final.get("abstain_reason") or ""),
            answer_citations=list(final.get("answer_citations") or []),
        )


def _compact_step(entry: TraceEntry) -> TraceEntry:
    """A trace entry without the per-step score table (kept: action, valid set, query, added)."""
    compact = entry.copy()
    compact.pop("scores", None)
    return compact

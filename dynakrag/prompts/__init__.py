"""Every prompt text dynakrag sends, each next to the family of calls it serves.

:mod:`~dynakrag.prompts.passages`
    The data notice and the ``<passage>`` blocks every prompt with retrieved text shares:
    retrieved text reaches a prompt only inside those tags, and every system prompt that shows
    passages says that text inside them is data, never instructions.
:mod:`~dynakrag.prompts.graph`
    The graph's calls (decomposition, sufficiency check, rewrite, answer, grounding check) and
    :func:`task_of`.
:mod:`~dynakrag.prompts.baselines`
    IRCoT, the reasoning answer setting and the multi-query decomposition baseline.
:mod:`~dynakrag.prompts.dsrag`
    DS-RAG: EPQD, the question graph's entities and relations, the one-call question analysis.

Every name is re-exported here: callers write ``from dynakrag import prompts; prompts.X``.
Replies are cached by prompt text, so a prompt's text changes only on purpose.
"""

from dynakrag.prompts.baselines import (
    IRCOT_ANSWER_MARKER,
    IRCOT_SYSTEM,
    MULTI_QUERY_DECOMPOSE_SYSTEM,
    REASONING_ANSWER_SYSTEM,
    ircot_reason_messages,
    multi_query_decompose_messages,
    reasoning_messages,
)
from dynakrag.prompts.dsrag import (
    ANALYSIS_EXAMPLES,
    ANALYSIS_MAX_DETAILS,
    ANALYSIS_MAX_ITEMS,
    ANALYSIS_MAX_TOKENS,
    ANALYSIS_SCHEMA,
    ANALYSIS_SYSTEM,
    DSRAG_ENTITY_EXAMPLES,
    DSRAG_ENTITY_SYSTEM,
    DSRAG_RELATION_EXAMPLES,
    DSRAG_RELATION_SYSTEM,
    EPQD_EXAMPLES,
    EPQD_SYSTEM,
    analysis_messages,
    dsrag_entity_messages,
    dsrag_relation_messages,
    epqd_messages,
    epqd_repair_messages,
)
from dynakrag.prompts.graph import (
    ANSWER,
    ANSWER_MAX_TOKENS,
    ANSWER_REQUEST_END,
    ANSWER_SYSTEM,
    DECOMPOSE,
    DECOMPOSE_EXAMPLES,
    DECOMPOSE_MAX_TOKENS,
    DECOMPOSE_SYSTEM,
    FACTS_TITLE,
    INSUFFICIENT_EVIDENCE,
    REWRITE,
    REWRITE_EXAMPLES,
    REWRITE_MAX_TOKENS,
    REWRITE_SYSTEM,
    SUFFICIENCY,
    SUFFICIENCY_REQUEST_END,
    SUFFICIENCY_TASK,
    UNKNOWN,
    VERIFY,
    VERIFY_MAX_TOKENS,
    VERIFY_REQUEST_END,
    VERIFY_TASK,
    answer_messages,
    decompose_messages,
    rewrite_messages,
    sufficiency_max_tokens,
    sufficiency_messages,
    task_of,
    verified,
    verify_messages,
)
from dynakrag.prompts.passages import (
    DATA_NOTICE,
    format_passages,
)

__all__ = [
    "ANALYSIS_EXAMPLES",
    "ANALYSIS_MAX_DETAILS",
    "ANALYSIS_MAX_ITEMS",
    "ANALYSIS_MAX_TOKENS",
    "ANALYSIS_SCHEMA",
    "ANALYSIS_SYSTEM",
    "ANSWER",
    "ANSWER_MAX_TOKENS",
    "ANSWER_REQUEST_END",
    "ANSWER_SYSTEM",
    "DATA_NOTICE",
    "DECOMPOSE",
    "DECOMPOSE_EXAMPLES",
    "DECOMPOSE_MAX_TOKENS",
    "DECOMPOSE_SYSTEM",
    "DSRAG_ENTITY_EXAMPLES",
    "DSRAG_ENTITY_SYSTEM",
    "DSRAG_RELATION_EXAMPLES",
    "DSRAG_RELATION_SYSTEM",
    "EPQD_EXAMPLES",
    "EPQD_SYSTEM",
    "FACTS_TITLE",
    "INSUFFICIENT_EVIDENCE",
    "IRCOT_ANSWER_MARKER",
    "IRCOT_SYSTEM",
    "MULTI_QUERY_DECOMPOSE_SYSTEM",
    "REASONING_ANSWER_SYSTEM",
    "REWRITE",
    "REWRITE_EXAMPLES",
    "REWRITE_MAX_TOKENS",
    "REWRITE_SYSTEM",
    "SUFFICIENCY",
    "SUFFICIENCY_REQUEST_END",
    "SUFFICIENCY_TASK",
    "UNKNOWN",
    "VERIFY",
    "VERIFY_MAX_TOKENS",
    "VERIFY_REQUEST_END",
    "VERIFY_TASK",
    "analysis_messages",
    "answer_messages",
    "decompose_messages",
    "dsrag_entity_messages",
    "dsrag_relation_messages",
    "epqd_messages",
    "epqd_repair_messages",
    "format_passages",
    "ircot_reason_messages",
    "multi_query_decompose_messages",
    "reasoning_messages",
    "rewrite_messages",
    "sufficiency_max_tokens",
    "sufficiency_messages",
    "task_of",
    "verified",
    "verify_messages",
]

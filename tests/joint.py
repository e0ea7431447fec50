"""The joint check at the DynaKRAG paper's budget, pinned by the tests written for it.

The configuration's defaults were these until the chain became the default
(``sub_question_answering='chain'``, ``max_steps`` 16, ``max_retrieval_calls`` 10). A test
that checks the joint check, or runs the graph with a scripted reader that answers the joint
prompts, pins them: ``Configuration(**JOINT)``, ``joint_configuration(...)`` or, for the CLI
and anything that reads the environment, the ``joint_env`` fixture (``tests/conftest.py``).
"""

from __future__ import annotations

from typing import Any

from dynakrag.configuration import ENV_PREFIX, Configuration

JOINT: dict[str, Any] = {
    "sub_question_answering": "joint",
    "max_steps": 4,
    "max_retrieval_calls": 4,
}
"""The joint check with the paper's 4 control steps and 4 retrieval calls."""

JOINT_ENV: dict[str, str] = {ENV_PREFIX + name.upper(): str(value) for name, value in JOINT.items()}
""":data:`JOINT` as ``DYNAKRAG_*`` environment variables."""


def joint_configuration(**overrides: Any) -> Configuration:
    """``Configuration(**JOINT)`` with ``overrides`` on top."""
    return Configuration(**{**JOINT, **overrides})

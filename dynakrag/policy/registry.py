"""Resolve the ``policy`` setting to a Policy instance."""

from __future__ import annotations

from pathlib import Path

from dynakrag.errors import ConfigurationError
from dynakrag.policy.base import Policy
from dynakrag.policy.heuristic import HeuristicPolicy
from dynakrag.policy.uniform import UniformPolicy

BUILTIN_POLICIES: dict[str, type[Policy]] = {
    "heuristic": HeuristicPolicy,
    "uniform": UniformPolicy,
}


def resolve_policy(spec: str | Policy) -> Policy:
    """A built-in policy by name, or a Policy instance as given."""
    if isinstance(spec, Policy):
        return spec
    if spec in BUILTIN_POLICIES:
        return BUILTIN_POLICIES[spec]()
    if Path(spec).exists():
        raise ConfigurationError(
            f"policy file {spec!r}: learned policy files are not supported in this version"
        )
    names = ", ".join(sorted(BUILTIN_POLICIES))
    raise ConfigurationError(f"unknown policy {spec!r} (built-in policies: {names})")

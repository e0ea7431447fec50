"""Resolve the ``policy`` setting to a Policy instance."""

from __future__ import annotations

from pathlib import Path

from dynakrag.errors import ConfigurationError
from dynakrag.policy.base import Policy
from dynakrag.policy.fixed import FixedSchedulePolicy
from dynakrag.policy.heuristic import HeuristicPolicy
from dynakrag.policy.uniform import UniformPolicy

BUILTIN_POLICIES: dict[str, type[Policy]] = {
    "heuristic": HeuristicPolicy,
    "uniform": UniformPolicy,
    "fixed": FixedSchedulePolicy,
}
GOLD_POLICIES: frozenset[str] = frozenset({"oracle"})
"""Policies that read gold labels: built per question by the evaluation, never by name here."""
DEFAULT_POLICY_FILE = Path(__file__).parent / "models" / "default_policy.npz"
"""The shipped learned policy (``policy="learned"``); ``make default-policy`` rebuilds it."""


def resolve_policy(spec: str | Policy) -> Policy:
    """A built-in policy by name, a trained policy file (never unpickled), or a Policy."""
    if isinstance(spec, Policy):
        return spec
    if spec in BUILTIN_POLICIES:
        return BUILTIN_POLICIES[spec]()
    if spec == "learned":
        from dynakrag.policy.learned import load_policy_file

        if not DEFAULT_POLICY_FILE.exists():
            raise ConfigurationError(
                f"the shipped learned policy is missing ({DEFAULT_POLICY_FILE}); rebuild it "
                "with 'make default-policy' or pass a policy file"
            )
        return load_policy_file(DEFAULT_POLICY_FILE)
    if spec in GOLD_POLICIES:
        raise ConfigurationError(
            f"policy {spec!r} reads the gold support, so it runs only in an evaluation: "
            f"dynakrag eval --method dynakrag --policy {spec}"
        )
    if Path(spec).exists():
        from dynakrag.policy.learned import load_policy_file

        return load_policy_file(spec)
    names = ", ".join(sorted([*BUILTIN_POLICIES, "learned"]))
    raise ConfigurationError(f"unknown policy {spec!r} (built-in policies: {names})")

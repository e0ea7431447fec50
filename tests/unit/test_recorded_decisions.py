"""The shipped learned policy and the shipped DICS selector decide as recorded.

The record (``tests/data/recorded_decisions.json``) was written by ``python -m tests.recorded``
before the package was reshaped; a change that moves code must not change a decision. When the
chain became the default it was written again: the joint runs' steps and answers as before,
their settings named (the joint check at the paper's budget), and runs of the default
configuration (the chain) added. When the forest was refitted on the chain collection's 600
questions (session 22) the policy's steps were written again; the selector's are unchanged.
"""

from __future__ import annotations

import json

import pytest

from tests.recorded import RECORD_FILE, policy_decisions, selector_selections


@pytest.fixture(scope="module")
def recorded() -> dict:
    return json.loads(RECORD_FILE.read_text())


def test_the_shipped_policy_takes_the_recorded_steps(recorded: dict) -> None:
    now = json.loads(json.dumps(policy_decisions()))
    assert len(now) == len(recorded["policy"])
    for before, after in zip(recorded["policy"], now, strict=True):
        assert after == before, f"decisions changed on {before['question']!r} {before['setting']}"


def test_the_shipped_selector_makes_the_recorded_selections(recorded: dict) -> None:
    assert json.loads(json.dumps(selector_selections())) == recorded["selector"]

"""The uniform-validity baseline: every executable action is equally likely."""

from __future__ import annotations

import random
import zlib
from collections.abc import Sequence

from dynakrag.configuration import Configuration
from dynakrag.policy.base import Policy
from dynakrag.state import State


class UniformPolicy(Policy):
    """Random values, seeded by the configuration seed, the question and the step."""

    name = "uniform"

    def value(self, state: State, actions: Sequence[str], cfg: Configuration) -> dict[str, float]:
        key = f"{cfg.seed}|{state['question']}|{len(state.get('trace', []))}"
        rng = random.Random(zlib.crc32(key.encode("utf-8")))
        return {action: rng.random() for action in actions}

"""Collection branches through LangGraph checkpoints (``graph/replay.Branches``) and writes the
very records the former hand-written reducer engine wrote: their digests on the fake model were
taken with that engine (commit 24fe674) and pinned here.

A change meant to alter records (a new feature, another label) re-pins them: print the new
digests with ``_digest`` and say in the commit why they changed.
"""

from __future__ import annotations

import hashlib
import json

import pytest

from dynakrag.training.collect import collect
from tests.unit.test_collect_and_train import CFG, TRAIN, llm, searcher_for

PINNED = {
    "recall": (494, "e8b5715c6325859dec953e689b31b9b8a0067c46fa6faf8547ba5b145cb52bfa"),
    "answer": (494, "6c7a3c880a6531740fa479abead703e2ab375197954aa7604de7345a0fe7158a"),
    "visited-answer": (494, "701af34a8cac20658f3d9382ad112978d39c30c8c44887119605e2bf73c2a7bc"),
}


def _digest(labels: str) -> tuple[int, str]:
    records = list(collect(TRAIN, searcher_for, llm(), CFG, progress=False, labels=labels))
    text = "\n".join(json.dumps(record, sort_keys=True) for record in records)
    return len(records), hashlib.sha256(text.encode()).hexdigest()


@pytest.mark.parametrize("labels", sorted(PINNED))
def test_checkpoint_branches_write_the_records_of_the_former_engine(labels: str) -> None:
    assert _digest(labels) == PINNED[labels]

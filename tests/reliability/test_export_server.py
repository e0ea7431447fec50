"""``dynakrag export`` against a real ``langgraph dev`` server: runs made through the SDK (as
Studio makes them) come back from the exported log as the same trajectories."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from dynakrag import cli
from dynakrag.training import read_transitions
from tests.reliability.support import demo_corpus


@pytest.mark.slow
def test_dev_server_threads_export_to_a_log(
    studio: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import langgraph_sdk

    client = langgraph_sdk.get_sync_client(url=studio.url, api_key=None)
    questions = demo_corpus().questions[:2]
    thread = client.threads.create()
    thread_id = thread["thread_id"]
    try:
        finals = [
            client.runs.wait(thread_id, "dynakrag", input={"question": q.question})
            for q in questions  # two runs on one thread, as a Studio session makes them
        ]
        log = tmp_path / "studio.sqlite"
        code = cli.main(
            ["export", "--server", studio.url, "--log", str(log), "--thread", thread_id]
        )
        out = capsys.readouterr().out
        assert code == 0, out
        assert "Exported 1 thread" in out
    finally:
        client.threads.delete(thread_id)
    transitions = read_transitions(log, thread_id)
    actions = [t.action for t in transitions]
    assert actions == [e["action"] for final in finals for e in final["trace"]]
    stops = [t for t in transitions if t.action == "stop_answer"]
    assert [t.next_state["answer"] for t in stops] == [final["answer"] for final in finals]
    assert [t.state["question"] for t in stops] == [q.question for q in questions]
